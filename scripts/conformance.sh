#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The conformance suite (tests/conformance/): gradref against the real upstream
# implementations from PyPI, each in its own process, and docs/conformance.md rewritten from
# the results. Downloads the pinned upstreams (tests/conformance/requirements.txt) into a
# virtual environment in build-conformance/; not part of scripts/test.sh.
#   sh scripts/conformance.sh [--cases N]
set -eu
cd "$(dirname "$0")/.."
out=build-conformance
mkdir -p $out/results
cmake -S . -B $out/lib -DCMAKE_BUILD_TYPE=Release -DGRADREF_BUILD_TESTS=OFF \
  -DGRADREF_BUILD_BENCH=OFF >$out/configure.log 2>&1 || { cat $out/configure.log; exit 1; }
cmake --build $out/lib -j "$(nproc 2>/dev/null || echo 2)" --target gradref_shared
[ -x $out/venv/bin/python ] || /usr/bin/python3 -m venv $out/venv
# a package that cannot be had is reported by the suite, not fatal here
$out/venv/bin/pip install -q -r tests/conformance/requirements.txt ||
  while read -r req; do
    case "$req" in "#"* | "") continue ;; esac
    $out/venv/bin/pip install -q "$req" || echo "conformance: $req could not be installed"
  done <tests/conformance/requirements.txt
export GRADREF_LIBRARY="$(pwd)/$out/lib/libgradref.so" PYTHONPATH="$(pwd)/python"
export TF_CPP_MIN_LOG_LEVEL=3
echo "== the Python package's bfloat16 tests with the real ml_dtypes"
$out/venv/bin/python -m pytest -q -p no:cacheprovider python/tests/test_bf16_hf32.py \
  tests/conformance/test_ml_dtypes.py
saved=""
for module in pairs_tf pairs_jax pairs_torch pairs_fbgemm pairs_paddle pairs_mindspore; do
  echo "== $module"
  (cd tests/conformance && ../../$out/venv/bin/python run.py --module $module \
    --save "../../$out/results/$module.pkl" "$@")
  saved="$saved ../../$out/results/$module.pkl"
done
# shellcheck disable=SC2086
(cd tests/conformance && ../../$out/venv/bin/python run.py "$@" --report $saved \
  --out ../../docs/conformance.md)
echo "docs/conformance.md written"
