# Cross build for arm64 (aarch64) on a Debian 12 amd64 host:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DBULWARK_CORE_ONLY=ON
# Compilers: gcc/g++-aarch64-linux-gnu. Libraries: Debian's arm64 packages
# installed side by side with the amd64 ones (multiarch: dpkg
# --add-architecture arm64; scripts/install-deps.sh), found under
# /usr/lib/aarch64-linux-gnu and /usr/include/aarch64-linux-gnu; the
# arch-independent headers (/usr/include, /usr/share/cmake) are shared with
# the host. Programs run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR) with
# the multiarch root as their root: one glibc (libc6:arm64) for the loader and
# the libraries, never the cross toolchain's older copy mixed with it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Armv8.5-A: the CPUs this build is tested on (MTE exists from v8.5 on; qemu
# -cpu max), and its atomics are inline LSE instructions. Below v8.1 GCC calls
# libgcc's outline-atomics helpers instead, and Debian 12's libgcc.a builds
# them without the BTI property (lse-init.o even registers a constructor
# without a landing pad): linked in, they would take the BTI mark off every
# library of Bulwark's code (cmake/BulwarkTest.cmake).
set(BULWARK_AARCH64_MARCH armv8.5-a CACHE STRING "-march of the arm64 cross build")
set(CMAKE_C_FLAGS_INIT "-march=${BULWARK_AARCH64_MARCH}")
set(CMAKE_CXX_FLAGS_INIT "-march=${BULWARK_AARCH64_MARCH}")

# Only the arm64 multiarch directories for libraries and packages' config
# files: an amd64 library or libyaml-cpp's amd64 config must never be taken.
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu
    /usr/lib/x86_64-linux-gnu/cmake /usr/include/x86_64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

find_program(BULWARK_QEMU_AARCH64_EMULATOR qemu-aarch64)
if(BULWARK_QEMU_AARCH64_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${BULWARK_QEMU_AARCH64_EMULATOR} -cpu max -L /)
endif()
