# bulwark_test_tier(NAME <name> SOURCES <files...> LIBS <libs...> [LABELS <labels...>] [TIMEOUT <s>])
#
# One executable per test tier. A tier whose requirement is missing (not root,
# no qemu, kernel refuses a program type) exits 77 after printing one line that
# says why; CTest reports it as skipped.
set(BULWARK_CATCH_MAIN_SRC ${CMAKE_SOURCE_DIR}/tests/support/catch_main.cpp)
if(NOT TARGET bulwark_catch_main)
  add_library(bulwark_catch_main OBJECT ${BULWARK_CATCH_MAIN_SRC})
  target_include_directories(bulwark_catch_main PUBLIC ${CMAKE_SOURCE_DIR}/tests/support)
endif()

function(bulwark_test_tier)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES} $<TARGET_OBJECTS:bulwark_catch_main>)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
                       LABELS "${T_LABELS}")
endfunction()
