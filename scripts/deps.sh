#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages gradref's build needs, when they are missing.
#   scripts/deps.sh examples   -> compiler, cmake, python3 with numpy (the Python example)
#   scripts/deps.sh test       -> also cmocka, pkg-config, clang with its libFuzzer runtime and
#                                 OpenMP (the fuzz smoke), clang-format, g++ (header and ABI
#                                 tests), binutils,
#                                 libdnnl-dev (oneDNN, the bench's convolution peer), pytest,
#                                 hypothesis and torch (the Python package's suite), venv,
#                                 setuptools and wheel (pip install and pip wheel), and for
#                                 the aarch64 build under emulation: Debian's cross gcc and
#                                 qemu-user, and cmocka from the arm64 multiarch
set -eu
want="gcc make cmake libc6-dev python3 python3-numpy"
if [ "${1:-examples}" = test ]; then
  want="$want libcmocka-dev pkg-config clang clang-format libclang-rt-14-dev libomp-dev g++ binutils"
  want="$want libdnnl-dev"
  want="$want python3-pytest python3-hypothesis python3-torch python3-venv python3-setuptools"
  want="$want python3-wheel"
  want="$want gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
fi
missing=""
for pkg in $want; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing="$missing $pkg"
done
arm64=""
if [ "${1:-examples}" = test ] && [ "$(dpkg --print-architecture)" != arm64 ]; then
  dpkg-query -W -f='${Status}' libcmocka-dev:arm64 2>/dev/null | grep -q "ok installed" ||
    arm64=libcmocka-dev:arm64
fi
[ -z "$missing" ] && [ -z "$arm64" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "gradref needs these Debian packages:$missing (run as root, or install them)" >&2
  exit 1
fi
echo "installing:$missing $arm64"
export DEBIAN_FRONTEND=noninteractive
[ -n "$arm64" ] && dpkg --add-architecture arm64
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing $arm64
