#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The shared library exports exactly the functions gradref.h declares: nothing more (internal
# gradref__ helpers stay hidden) and nothing less (every declaration links).
# With a static library as well, no global symbol it defines may lie outside gradref_ (and
# so gradref__), the sanitizers' own apart: a program linking it statically shares its
# namespace.
# usage: check_exports.sh libgradref.so include/gradref.h [libgradref.a]
set -eu
lib=$1
header=$2
static=${3:-}
tmp=${TMPDIR:-/tmp}/gradref-exports.$$
trap 'rm -f "$tmp".*' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRr]$/ {print $3}' | sed 's/@.*//' | sort -u >"$tmp.exported"
grep -oE '\bgradref_[a-z0-9_]+\(' "$header" | tr -d '(' | sort -u >"$tmp.declared"
status=0
if ! diff -u "$tmp.declared" "$tmp.exported"; then
  echo "exported symbols (+) differ from the header's declarations (-)" >&2
  status=1
fi
if [ -n "$static" ]; then
  nm -g --defined-only "$static" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRVW]$/ {print $3}' |
    grep -v '^gradref_' | grep -v '^__odr_asan\.\|^__asan_\|^__sancov' >"$tmp.foreign" || true
  if [ -s "$tmp.foreign" ]; then
    echo "the static library defines symbols outside gradref_:" >&2
    cat "$tmp.foreign" >&2
    status=1
  fi
fi
count=$(wc -l <"$tmp.declared")
echo "checked $count exported functions"
exit $status
