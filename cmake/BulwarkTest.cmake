# bulwark_add_test(NAME <name> COMMAND <command> [args...] [WORKING_DIRECTORY <dir>])
#
# add_test through tests/support/skip_gate.sh: every test of the project is
# registered with it (tests/check_tiers.py refuses a bare add_test). Exit 77
# is a skip, except in CI (BULWARK_CI=1, .ci/run) where it fails unless
# tests/not-runnable.txt lists the test with the reason it cannot run on the
# CI machine class. A target name as <command> must be given as
# $<TARGET_FILE:target>.
set(BULWARK_SKIP_GATE ${CMAKE_SOURCE_DIR}/tests/support/skip_gate.sh)
set(BULWARK_NOT_RUNNABLE ${CMAKE_SOURCE_DIR}/tests/not-runnable.txt)
function(bulwark_add_test)
  cmake_parse_arguments(T "" "NAME;WORKING_DIRECTORY" "COMMAND" ${ARGN})
  if(NOT T_NAME OR NOT T_COMMAND OR T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "bulwark_add_test(NAME <name> COMMAND <command...> [WORKING_DIRECTORY <dir>]): ${ARGN}")
  endif()
  set(_wd)
  if(T_WORKING_DIRECTORY)
    set(_wd WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
  endif()
  add_test(NAME ${T_NAME} COMMAND sh ${BULWARK_SKIP_GATE} ${BULWARK_NOT_RUNNABLE} ${T_NAME} ${T_COMMAND} ${_wd})
endfunction()

# bulwark_test_tier(NAME <name> SOURCES <files...> LIBS <libs...> [LABELS <labels...>] [TIMEOUT <s>])
#
# One executable per test tier. A tier whose requirement is missing (not root,
# no qemu, kernel refuses a program type) exits 77 after printing one line that
# says why; CTest reports it as skipped (in CI: failed, see bulwark_add_test).
set(BULWARK_CATCH_MAIN_SRC ${CMAKE_SOURCE_DIR}/tests/support/catch_main.cpp)
if(NOT TARGET bulwark_catch_main)
  add_library(bulwark_catch_main OBJECT ${BULWARK_CATCH_MAIN_SRC})
  target_include_directories(bulwark_catch_main PUBLIC ${CMAKE_SOURCE_DIR}/tests/support)
endif()

# In the arm64 cross build the tier's code (its tests, Catch2's runner and the
# product code it links) is one shared library, lib<name>_body.so, marked BTI
# and PAC, and <name> is a stub main that calls into it. Debian 12's aarch64
# start files (crt1.o, crti.o, crtbeginS.o) carry no BTI property, so an
# executable linking them is never marked and its pages never guarded; the
# library links none of them (-nostartfiles; __dso_handle from
# tests/support/arm64_dso_handle.c), so the loader maps every page of our
# code with BTI guarding (PROT_BTI). catch_main.cpp checks it in the process.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64" AND CMAKE_CROSSCOMPILING)
  set(BULWARK_TEST_BODY_LIBRARY ON)
  target_compile_definitions(bulwark_catch_main PRIVATE BULWARK_ARM64_POSTURE)
endif()

function(bulwark_test_tier)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(BULWARK_TEST_BODY_LIBRARY)
    add_library(${T_NAME}_body SHARED ${T_SOURCES} $<TARGET_OBJECTS:bulwark_catch_main>
                ${CMAKE_SOURCE_DIR}/tests/support/arm64_dso_handle.c)
    target_include_directories(${T_NAME}_body PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
    target_link_libraries(${T_NAME}_body PRIVATE ${T_LIBS})
    target_link_options(${T_NAME}_body PRIVATE -nostartfiles LINKER:-z,defs)
    add_executable(${T_NAME} ${CMAKE_SOURCE_DIR}/tests/support/arm64_test_stub.c)
    target_link_libraries(${T_NAME} PRIVATE ${T_NAME}_body)
    set_target_properties(${T_NAME} PROPERTIES BUILD_RPATH "$ORIGIN")
  else()
    add_executable(${T_NAME} ${T_SOURCES} $<TARGET_OBJECTS:bulwark_catch_main>)
    target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
    target_link_libraries(${T_NAME} PRIVATE ${T_LIBS})
  endif()
  bulwark_add_test(NAME ${T_NAME} COMMAND $<TARGET_FILE:${T_NAME}> ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
                       LABELS "${T_LABELS}")
endfunction()

# bulwark_npm_tier(TARGET <name> COMMENT <what npm installs> SCRIPTS <files...>):
# the Node.js test tiers' build step. The folder's package.json and
# package-lock.json are copied to its build directory and `npm ci` installs the
# pinned packages there (offline-safe from the lock file); the scripts are
# copied beside them; <name> (built with ALL) depends on both.
include(BulwarkNpm)
function(bulwark_npm_tier)
  cmake_parse_arguments(T "" "TARGET;COMMENT" "SCRIPTS" ${ARGN})
  set(_src ${CMAKE_CURRENT_SOURCE_DIR})
  set(_bld ${CMAKE_CURRENT_BINARY_DIR})
  list(TRANSFORM T_SCRIPTS PREPEND ${_src}/ OUTPUT_VARIABLE _script_paths)
  bulwark_npm_ci(SOURCE_DIR ${_src} BINARY_DIR ${_bld} COMMENT "${T_COMMENT}")
  add_custom_command(
    OUTPUT ${_bld}/scripts.stamp
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${_script_paths} ${_bld}/
    COMMAND ${CMAKE_COMMAND} -E touch ${_bld}/scripts.stamp
    DEPENDS ${_script_paths}
    VERBATIM)
  add_custom_target(${T_TARGET} ALL DEPENDS ${_bld}/node_modules/.bulwark-npm-ci.stamp ${_bld}/scripts.stamp)
endfunction()
