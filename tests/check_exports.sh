#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The shared library exports exactly the functions gradref.h declares: nothing more (internal
# gradref__ helpers stay hidden) and nothing less (every declaration links).
# usage: check_exports.sh libgradref.so include/gradref.h
set -eu
lib=$1
header=$2
tmp=${TMPDIR:-/tmp}/gradref-exports.$$
trap 'rm -f "$tmp".*' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRr]$/ {print $3}' | sed 's/@.*//' | sort -u >"$tmp.exported"
grep -oE '\bgradref_[a-z0-9_]+\(' "$header" | tr -d '(' | sort -u >"$tmp.declared"
status=0
if ! diff -u "$tmp.declared" "$tmp.exported"; then
  echo "exported symbols (+) differ from the header's declarations (-)" >&2
  status=1
fi
count=$(wc -l <"$tmp.declared")
echo "checked $count exported functions"
exit $status
