#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Only the kernel files (*_avx2.c, *_avx512*.c) are compiled for their level's instruction set:
# every other object of the library must hold no AVX instruction (a YMM/ZMM register, a VEX
# FMA), or a CPU without it would fault before the level is even chosen.
# usage: check_baseline_isa.sh OBJECT...
set -eu
status=0
checked=0
for o in "$@"; do
  case "$o" in *_avx2.c.o | *_avx512.c.o | *_avx512_vnni.c.o | *_avx512_bf16.c.o) continue ;; esac
  checked=$((checked + 1))
  if objdump -d "$o" | grep -q '%ymm\|%zmm\|vfmadd\|vcvtph2ps\|vcvtps2ph'; then
    echo "$o: AVX instructions outside a kernel file" >&2
    status=1
  fi
done
echo "checked $checked baseline objects"
exit $status
