#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The whole test suite: every cmocka suite, example and packaging check, built four ways
# (gcc Release with OpenMP; gcc with ASan+UBSan; clang without OpenMP; aarch64 cross-compiled
# and run under qemu-user), all warnings as errors,
# then a consumer project built against the installed package (CMake and pkg-config), then a
# pip install and pip wheel into a venv (pytest on the wheel's package), then a
# fuzz smoke: every libFuzzer harness for GRADREF_FUZZ_SMOKE_SECONDS (30) when clang's fuzzer
# runtime is there (scripts/fuzz.sh runs the long campaign).
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh test
jobs=$(nproc 2>/dev/null || echo 2)
out=build-test

echo "== format: clang-format with the committed .clang-format"
# shellcheck disable=SC2046
clang-format --dry-run --Werror $(find include src tests bench examples -name '*.[ch]' | sort)

echo "== function lengths: none over 80 lines outside the reference loops"
/usr/bin/python3 scripts/function_lengths.py 80
echo "== include graph: no cycles, common/ and kernels never reach up"
/usr/bin/python3 scripts/include_graph.py

suite() {
  dir=$out/$1
  shift
  echo "== $dir"
  cmake -S . -B "$dir" -DGRADREF_WERROR=ON "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
}

mkdir -p $out
suite release -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Release
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  suite sanitize -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
  -DGRADREF_SANITIZE=ON
suite clang-serial -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADREF_WITH_OPENMP=OFF
if [ "$(uname -m)" = x86_64 ]; then # aarch64: cross-compiled, every test under qemu-user
  suite aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release
  echo "== aarch64: gradref-bench (built without oneDNN) runs a problem at neon_dot"
  # GRADREF_MAX_ISA preset: --isa's re-exec of itself needs a native aarch64 kernel
  qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu \
    -E GRADREF_MAX_ISA=neon_dot $out/aarch64/bench/gradref-bench -t 2 -r 1 --isa neon_dot "B8192 D64" |
    grep -q "ISA neon_dot (oneDNN at none)" || { echo "gradref-bench failed on aarch64"; exit 1; }
  echo "== aarch64: the NEON kernels are in the library (scripts/insn_mix.py, docs/performance.md)"
  fmla=$(aarch64-linux-gnu-objdump -d $out/aarch64/libgradref.a | grep -cE "fmla[[:space:]]+v")
  echo "$fmla vector FMLA instructions"
  [ "$fmla" -ge 100 ] || { echo "the NEON kernels are missing"; exit 1; }
  sdot=$(aarch64-linux-gnu-objdump -d $out/aarch64/libgradref.a | grep -cE "sdot[[:space:]]+v")
  echo "$sdot vector SDOT instructions (the neon_dot level)"
  [ "$sdot" -ge 24 ] || { echo "the neon_dot kernels are missing"; exit 1; }
  for o in $(find $out/aarch64/CMakeFiles/gradref_objects.dir -name '*.o' ! -name '*_neon_dot.c.o'); do
    if aarch64-linux-gnu-objdump -d "$o" | grep -qE "[su]dot[[:space:]]+v"; then
      echo "$o: dot-product instructions outside a neon_dot kernel file"
      exit 1
    fi
  done
  /usr/bin/python3 scripts/insn_mix.py \
    $out/aarch64/CMakeFiles/gradref_objects.dir/src/common/gemm_neon.c.o kernel_neon --most 1
fi

echo "== consumer of the installed package"
prefix=$(pwd)/$out/prefix
rm -rf "$prefix" $out/consumer
cmake --install $out/release --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n 1)
cmake -S tests/consumer -B $out/consumer -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build $out/consumer
LD_LIBRARY_PATH="$libdir" $out/consumer/consumer
$out/consumer/consumer_static
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists --print-errors 'gradref >= 0.1'
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror tests/consumer/main.c -o $out/consumer/consumer_pc \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs gradref)
LD_LIBRARY_PATH="$libdir" $out/consumer/consumer_pc

echo "== Python package: pytest against the release build, then the installed package"
GRADREF_LIBRARY=$out/release/libgradref.so PYTHONPATH=python /usr/bin/python3 -m pytest -q \
  -p no:cacheprovider python/tests
pydir=$(ls -d "$prefix"/lib/python3*/*-packages | head -n 1)
(cd / && PYTHONPATH="$pydir" /usr/bin/python3 -c \
  "import gradref; print('installed package:', gradref.version(), gradref.library_path())")

echo "== pip: install into a venv and build a wheel, offline (Debian's setuptools), pytest on the wheel"
venv=$(pwd)/$out/venv
rm -rf "$venv" $out/wheel
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --no-build-isolation --no-index .
"$venv/bin/pip" wheel -q --no-build-isolation --no-index --no-deps -w $out/wheel .
ls $out/wheel
"$venv/bin/pip" install -q --no-index --no-deps --force-reinstall $out/wheel/gradref-*.whl
(cd python/tests && env -u GRADREF_LIBRARY "$venv/bin/python" -c \
  "import gradref, sys; p = gradref.library_path(); print('wheel package:', gradref.version(), p); \
sys.exit(not p.startswith(sys.prefix))")
(cd python/tests && env -u GRADREF_LIBRARY "$venv/bin/python" -m pytest -q -p no:cacheprovider .)

probe='int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }'
if printf '%s\n' "$probe" | clang -fsanitize=fuzzer -x c - -o $out/fuzz-probe >/dev/null 2>&1; then
  echo "== fuzz smoke"
  GRADREF_FUZZ_BUILD=$out/fuzz sh scripts/fuzz.sh "${GRADREF_FUZZ_SMOKE_SECONDS:-30}" "$jobs"
else
  echo "== fuzz smoke skipped: clang's libFuzzer runtime (Debian libclang-rt-14-dev) is missing"
fi
echo "all gradref test builds passed"
