# SPDX-License-Identifier: Apache-2.0
# Cross-compiling for aarch64 Linux with Debian's gcc-aarch64-linux-gnu, the tests run under
# qemu-user (Debian's qemu-user) and cmocka from Debian's arm64 multiarch (libcmocka-dev:arm64):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# One C library in the emulated runs: the cross toolchain's loader and libc (in
# /usr/aarch64-linux-gnu), searched before the multiarch directory that holds cmocka (a program
# loaded by one glibc's ld.so with the other's libc.so spins at its first OpenMP region). OpenMP
# threads wait passively: spinning under emulation is very slow.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
find_program(GRADREF_CROSS_CXX aarch64-linux-gnu-g++)
if(GRADREF_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${GRADREF_CROSS_CXX})
endif()
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config finds the arm64 cmocka
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} /)
set(CMAKE_CROSSCOMPILING_EMULATOR
    qemu-aarch64;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu;-E;OMP_WAIT_POLICY=passive)
