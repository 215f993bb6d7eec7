# BPF objects and skeletons, libbpf-bootstrap style:
#   bulwark_bpf_skeleton(<name> <file.bpf.c> [NOT_SHIPPED])
# compiles <file.bpf.c> with clang -target bpf (CO-RE, BTF) against a vmlinux.h
# dumped from this host's BTF, runs `bpftool gen skeleton`, and exposes an
# INTERFACE target <name>_skel whose include dir holds <name>.skel.h.
# NOT_SHIPPED: a test or benchmark object, left out of the build digest that
# names the product's programs (BULWARK_BPF_OBJECTS).
find_program(BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
find_program(BPF_CLANG clang REQUIRED)

set(BULWARK_BPF_GEN ${CMAKE_BINARY_DIR}/bpf-gen)
file(MAKE_DIRECTORY ${BULWARK_BPF_GEN})
set(BULWARK_VMLINUX_H ${BULWARK_BPF_GEN}/vmlinux.h)
if(EXISTS /sys/kernel/btf/vmlinux)
  set(_btf_src /sys/kernel/btf/vmlinux)
else()
  message(FATAL_ERROR "no /sys/kernel/btf/vmlinux: BTF is needed to build the BPF programs (CO-RE)")
endif()
add_custom_command(OUTPUT ${BULWARK_VMLINUX_H}
  COMMAND ${BPFTOOL} btf dump file ${_btf_src} format c > ${BULWARK_VMLINUX_H}.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${BULWARK_VMLINUX_H}.tmp ${BULWARK_VMLINUX_H}
  COMMENT "Dumping kernel BTF to vmlinux.h")
add_custom_target(bulwark_vmlinux_h DEPENDS ${BULWARK_VMLINUX_H})

execute_process(COMMAND uname -m OUTPUT_VARIABLE _arch OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_arch STREQUAL "x86_64")
  set(BULWARK_BPF_ARCH x86)
elseif(_arch STREQUAL "aarch64")
  set(BULWARK_BPF_ARCH arm64)
else()
  set(BULWARK_BPF_ARCH ${_arch})
endif()

function(bulwark_bpf_skeleton name src)
  cmake_parse_arguments(ARG "NOT_SHIPPED" "" "" ${ARGN})
  set(_obj ${BULWARK_BPF_GEN}/${name}.bpf.o)
  set(_skel ${BULWARK_BPF_GEN}/${name}.skel.h)
  get_filename_component(_src_dir ${src} DIRECTORY)
  file(GLOB _bpf_headers ${CMAKE_SOURCE_DIR}/bpf/include/*.h ${CMAKE_SOURCE_DIR}/bpf/helpers/*.h ${_src_dir}/*.h)
  add_custom_command(OUTPUT ${_obj}
    COMMAND ${BPF_CLANG} -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_${BULWARK_BPF_ARCH}
            -I${BULWARK_BPF_GEN} -I${CMAKE_SOURCE_DIR}/bpf/include -I${CMAKE_SOURCE_DIR}/bpf/helpers
            -c ${src} -o ${_obj}
    DEPENDS ${src} ${_bpf_headers} bulwark_vmlinux_h ${BULWARK_VMLINUX_H}
    COMMENT "BPF ${name}")
  add_custom_command(OUTPUT ${_skel}
    COMMAND ${BPFTOOL} gen skeleton ${_obj} name ${name} > ${_skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${_skel}.tmp ${_skel}
    DEPENDS ${_obj}
    COMMENT "BPF skeleton ${name}")
  add_custom_target(${name}_skel_gen DEPENDS ${_skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${BULWARK_BPF_GEN})
  if(NOT ARG_NOT_SHIPPED)
    set_property(GLOBAL APPEND PROPERTY BULWARK_BPF_OBJECTS ${_obj})
  endif()
endfunction()
