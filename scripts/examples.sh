#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds gradref (Release, OpenMP when available), runs every example (C, then the Python
# golden-test example), and installs the library and the Python package (default prefix
# /usr/local; set PREFIX to change it), so that `python3 -c "import gradref"` works.
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
echo "== examples/golden_test.py"
PYTHONPATH=python GRADREF_LIBRARY=build/libgradref.so /usr/bin/python3 examples/golden_test.py
echo "== install"
cmake --install build --prefix "${PREFIX:-/usr/local}" | grep -c -E 'Installing|Up-to-date' | sed 's/$/ files installed/'
if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi
pydir=$(ls -d "${PREFIX:-/usr/local}"/lib/python3*/*-packages | head -n 1)
(cd / && PYTHONPATH="$pydir" /usr/bin/python3 -c \
  "import gradref; print('import gradref:', gradref.version(), 'from', gradref.library_path())")
# The first python3 on PATH may be another interpreter (pyenv, a venv): the package is pure
# Python and needs nothing but the standard library to import, so it goes there too.
other=$(command -v python3 || true)
if [ -n "$other" ] && [ "$(readlink -f "$other")" != "$(readlink -f /usr/bin/python3)" ]; then
  site=$("$other" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)
  if [ -n "$site" ] && mkdir -p "$site" 2>/dev/null && cp -r "$pydir/gradref" "$site/" 2>/dev/null; then
    (cd / && "$other" -c "import gradref; print('and for $other:', gradref.version())")
  fi
fi
