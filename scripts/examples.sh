#!/bin/sh
# Builds gradref (Release, OpenMP when available) and runs every example.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh examples
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGRADREF_BUILD_TESTS=OFF
cmake --build build -j "$jobs"
for example in build/examples/example_*; do
  echo "== $example"
  "$example"
done
