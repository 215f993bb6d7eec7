# Hardened builds of every binary Bulwark ships (agentd, policyc, bulwark-oci,
# the static launcher and guest agent, the probes the tests run): what the
# rule language's `hardening:` asks of the tools Bulwark confines, asked of
# Bulwark first. Whatever the toolchain cannot give is said here, at configure
# time, and BULWARK_HARDENING_LACKS carries it to the self-check test
# (tests/unit/agentd/sandbox_own_hardening_test.cpp).
#
#   -fstack-protector-strong        canaries in every function with a local array or address-taken local
#   -D_FORTIFY_SOURCE=3             checked libc calls (=3: sizes known at run time; GCC >= 12), optimised builds
#   -D_GLIBCXX_ASSERTIONS           bounds-checked std::vector/string/span indexing and iterator misuse
#   -fcf-protection=full (x86-64)   IBT landing pads and shadow-stack compatibility
#   -mbranch-protection=standard    BTI and PAC on arm64
#   PIE, -z relro -z now            full RELRO, every symbol bound at start (no lazy PLT writes)
#   -z noexecstack                  a non-executable stack
option(BULWARK_HARDEN "Hardened build of every binary (see cmake/BulwarkHardening.cmake)" ON)

include(CheckCXXCompilerFlag)
include(CheckLinkerFlag)
include(CheckPIESupported)

set(BULWARK_HARDENING_LACKS "")
set(BULWARK_HARDENING_FLAGS "")
set(BULWARK_STATIC_LINK -static)
# bulwark_link_static(<target> <library target>... [LOGGING <agentd file>...]
# LIBS <archive>...): the static programs (the OCI launcher, the microVM guest
# agent, the VM tier's runner) linked from this build's own library archives,
# by path and as one group (a target link would add their shared
# dependencies), and the system's static archives; the same objects agentd
# links, compiled once. The agentd files that log and that the program pulls
# (LOGGING, e.g. bpf/bpf_loader.cpp) come from agentd_logging_static instead,
# compiled with spdlog header-only: linked ahead of the archives, they define
# every symbol of those files, so the archives' copies (built against the
# shared spdlog) are never pulled; a file missing from the list fails the
# link on spdlog's symbols. In a unity build an archive member holds several
# files: the libraries are compiled with a section per function and object
# and the program linked with --gc-sections, so only what the program reaches
# is kept, and only that must resolve (an undefined symbol in reached code
# still fails the link); the LOGGING files stay members of their own in
# their libraries (SKIP_UNITY_BUILD_INCLUSION, agentd/CMakeLists.txt).
# Stripped; last on the target's link line (after CMake's own -pie, which
# would make it dynamic).
function(bulwark_link_static target)
  cmake_parse_arguments(S "" "" "LIBS;LOGGING" ${ARGN})
  target_link_libraries(${target} PRIVATE bulwark_log_static)
  foreach(_f ${S_LOGGING})
    # (a regular expression: its dots match the names' own)
    target_sources(${target} PRIVATE $<FILTER:$<TARGET_OBJECTS:agentd_logging_static>,INCLUDE,/${_f}.o$>)
  endforeach()
  set(_archives)
  foreach(_l ${S_UNPARSED_ARGUMENTS})
    add_dependencies(${target} ${_l})
    target_compile_options(${_l} PRIVATE -ffunction-sections -fdata-sections)
    target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:${_l},INTERFACE_INCLUDE_DIRECTORIES>)
    list(APPEND _archives $<TARGET_FILE:${_l}>)
  endforeach()
  target_link_libraries(${target} PRIVATE -Wl,--gc-sections -Wl,--start-group ${_archives} -Wl,--end-group ${S_LIBS}
                        Threads::Threads ${BULWARK_STATIC_LINK} -s)
endfunction()
if(NOT BULWARK_HARDEN)
  message(STATUS "hardening: off (BULWARK_HARDEN=OFF)")
  return()
endif()

macro(_bulwark_harden_flag flag what)
  string(MAKE_C_IDENTIFIER "BULWARK_HAS${flag}" _var)
  check_cxx_compiler_flag("${flag}" ${_var})
  if(${_var})
    add_compile_options(${flag})
    list(APPEND BULWARK_HARDENING_FLAGS ${flag})
  else()
    list(APPEND BULWARK_HARDENING_LACKS "${what}")
  endif()
endmacro()

# BULWARK_STATIC_LINK: how the static programs link (the OCI launcher and the
# microVM guest agent run where no libc is installed): -static-pie when the
# toolchain has it, so they are position-independent too.
set(BULWARK_STATIC_LINK -static)
check_pie_supported(OUTPUT_VARIABLE _pie_why LANGUAGES C CXX)
if(CMAKE_CXX_LINK_PIE_SUPPORTED)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  list(APPEND BULWARK_HARDENING_FLAGS -fPIE -pie)
  check_linker_flag(CXX -static-pie BULWARK_HAS_STATIC_PIE)
  if(BULWARK_HAS_STATIC_PIE)
    set(BULWARK_STATIC_LINK -static-pie)
  else()
    list(APPEND BULWARK_HARDENING_LACKS "pie (static programs: no -static-pie)")
  endif()
else()
  list(APPEND BULWARK_HARDENING_LACKS "pie")
endif()

_bulwark_harden_flag(-fstack-protector-strong stack-protector)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  _bulwark_harden_flag(-fcf-protection=full cet-ibt)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  _bulwark_harden_flag(-mbranch-protection=standard bti)
endif()
add_compile_definitions(_GLIBCXX_ASSERTIONS)
list(APPEND BULWARK_HARDENING_FLAGS -D_GLIBCXX_ASSERTIONS)
# FORTIFY needs optimisation (glibc warns without it) and fights the
# sanitizers' own interceptors.
if(BULWARK_SANITIZE)
  list(APPEND BULWARK_HARDENING_LACKS "fortify (sanitizer build)")
else()
  set(_fortify 2)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    set(_fortify 3)
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 9)
    set(_fortify 3)
  endif()
  add_compile_options($<$<NOT:$<CONFIG:Debug>>:-U_FORTIFY_SOURCE> $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=${_fortify}>)
  list(APPEND BULWARK_HARDENING_FLAGS "-D_FORTIFY_SOURCE=${_fortify} (not in Debug)")
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    list(APPEND BULWARK_HARDENING_LACKS "fortify (Debug build: no optimisation)")
  endif()
endif()

foreach(_z relro now noexecstack)
  check_linker_flag(CXX "LINKER:-z,${_z}" BULWARK_HAS_Z_${_z})
  if(BULWARK_HAS_Z_${_z})
    add_link_options(LINKER:-z,${_z})
    list(APPEND BULWARK_HARDENING_FLAGS "-z ${_z}")
  else()
    list(APPEND BULWARK_HARDENING_LACKS "-z ${_z}")
  endif()
endforeach()

# CET and BTI are properties of the whole executable: the linker marks it only
# when every object in it (the C library's start files and libstdc++
# included) carries the property. Probe what this toolchain really produces
# rather than assume it; forcing the mark (-z ibt, -z shstk) would claim
# protection that objects in the binary lack.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|aarch64|arm64")
  find_program(BULWARK_READELF readelf)
  set(_probe_dir ${CMAKE_BINARY_DIR}/hardening-probe)
  file(WRITE ${_probe_dir}/probe.cpp "#include <string>\nint main(int c, char**) { return std::string(c, 'x').size() == 3; }\n")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(_marks "BTI" "PAC")
    set(_names bti pac)
    set(_mark_flag -mbranch-protection=standard)
  else()
    set(_marks "IBT" "SHSTK")
    set(_names cet-ibt cet-shstk)
    set(_mark_flag -fcf-protection=full)
  endif()
  try_compile(_probe_ok ${_probe_dir}/build ${_probe_dir}/probe.cpp
              CMAKE_FLAGS "-DCMAKE_CXX_FLAGS=${_mark_flag}" "-DCMAKE_POSITION_INDEPENDENT_CODE=ON"
              COPY_FILE ${_probe_dir}/probe)
  set(_notes "")
  if(_probe_ok AND BULWARK_READELF)
    execute_process(COMMAND ${BULWARK_READELF} -n ${_probe_dir}/probe OUTPUT_VARIABLE _notes ERROR_QUIET)
  endif()
  foreach(_mark _name IN ZIP_LISTS _marks _names)
    if(NOT _notes MATCHES "${_mark}")
      list(APPEND BULWARK_HARDENING_LACKS "${_name} (the toolchain's start files and libraries carry no ${_mark} property)")
    endif()
  endforeach()
endif()

list(JOIN BULWARK_HARDENING_FLAGS ", " _on)
message(STATUS "hardening: ${_on}")
if(BULWARK_HARDENING_LACKS)
  list(JOIN BULWARK_HARDENING_LACKS "; " _lacks)
  message(STATUS "hardening: this toolchain cannot give: ${_lacks}")
endif()
