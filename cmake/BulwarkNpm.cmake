# bulwark_npm_ci(SOURCE_DIR <dir with package.json> BINARY_DIR <dir> COMMENT <text>):
# the pinned npm packages of <SOURCE_DIR>'s package-lock.json installed into
# <BINARY_DIR> (`npm ci`, offline-safe from the lock file), again only when the
# lock changes. Its output, <BINARY_DIR>/node_modules/.bulwark-npm-ci.stamp, is
# what later steps depend on. The directory is made at configure time: Unix
# Makefiles, unlike Ninja, do not make a command's working directory.
function(bulwark_npm_ci)
  cmake_parse_arguments(N "" "SOURCE_DIR;BINARY_DIR;COMMENT" "" ${ARGN})
  file(MAKE_DIRECTORY ${N_BINARY_DIR}/node_modules)
  add_custom_command(
    OUTPUT ${N_BINARY_DIR}/node_modules/.bulwark-npm-ci.stamp
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${N_SOURCE_DIR}/package.json ${N_SOURCE_DIR}/package-lock.json
            ${N_BINARY_DIR}/
    COMMAND ${NPM_EXECUTABLE} ci --no-audit --no-fund --loglevel=error
    COMMAND ${CMAKE_COMMAND} -E touch ${N_BINARY_DIR}/node_modules/.bulwark-npm-ci.stamp
    DEPENDS ${N_SOURCE_DIR}/package.json ${N_SOURCE_DIR}/package-lock.json
    WORKING_DIRECTORY ${N_BINARY_DIR}
    COMMENT "${N_COMMENT}"
    VERBATIM)
endfunction()

# bulwark_node_or_skip(<result> TESTS <names...> LABELS <labels>): finds node
# and npm (NODE_EXECUTABLE, NPM_EXECUTABLE); when either is missing, each of
# the Node.js tier's tests is registered as a skip that says so and <result>
# is FALSE (the caller returns), else TRUE.
function(bulwark_node_or_skip result)
  cmake_parse_arguments(N "" "LABELS" "TESTS" ${ARGN})
  find_program(NODE_EXECUTABLE node)
  find_program(NPM_EXECUTABLE npm)
  if(NODE_EXECUTABLE AND NPM_EXECUTABLE)
    set(${result} TRUE PARENT_SCOPE)
    return()
  endif()
  foreach(_t ${N_TESTS})
    bulwark_add_test(NAME ${_t} COMMAND sh -c "echo 'SKIP: node and npm are needed (scripts/install-deps.sh)'; exit 77")
    set_tests_properties(${_t} PROPERTIES SKIP_RETURN_CODE 77 LABELS "${N_LABELS}")
  endforeach()
  set(${result} FALSE PARENT_SCOPE)
endfunction()
