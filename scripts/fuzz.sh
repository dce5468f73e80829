#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer harnesses of tests/fuzz (clang, ASan+UBSan, OpenMP) and runs each one in
# turn for SECONDS (default 600), JOBS at a time (default 1), starting from the committed seed
# corpus. Any crash, sanitizer report or contract violation stops the script with the harness's
# log; its input is kept as build-fuzz/artifacts/<harness>-crash-*.
#   sh scripts/fuzz.sh [SECONDS [JOBS]]
# The corpus each run grows is kept in build-fuzz/corpus/<harness> (not committed).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-600}
jobs=${2:-1}
out=${GRADREF_FUZZ_BUILD:-build-fuzz}

if [ "${3:-}" = --one ]; then # internal: one harness, $4
  h=$4
  mkdir -p "$out/corpus/$h" "$out/artifacts"
  log="$out/fuzz_$h.log"
  if "$out/tests/fuzz/fuzz_$h" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$out/artifacts/$h-" \
      "$out/corpus/$h" "tests/fuzz/corpus/$h" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz_$h: clean, $runs runs in ${secs} s"
  else
    echo "fuzz_$h: FAILED (log: $log)"
    grep -v '^#\|^INFO\|^stat::' "$log" | tail -40
    exit 1
  fi
  exit 0
fi

cmake -S . -B "$out" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DGRADREF_BUILD_FUZZ=ON \
  -DGRADREF_BUILD_TESTS=OFF -DGRADREF_BUILD_EXAMPLES=OFF -DGRADREF_BUILD_BENCH=OFF \
  -DGRADREF_WERROR=ON >"$out.configure.log" 2>&1 || { cat "$out.configure.log"; exit 1; }
cmake --build "$out" -j "$(nproc 2>/dev/null || echo 2)" >"$out.build.log" 2>&1 ||
  { tail -40 "$out.build.log"; exit 1; }
harnesses=$(cd tests/fuzz/corpus && ls)
echo "fuzzing each of: $(echo $harnesses) for $secs s, $jobs at a time"
# shellcheck disable=SC2086
printf '%s\n' $harnesses | xargs -P "$jobs" -I {} sh "$0" "$secs" 1 --one {}
echo "fuzz: every harness ran clean"
