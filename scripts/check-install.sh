#!/usr/bin/env bash
# Installs the build in build/ into a temporary prefix (meson install with DESTDIR, the
# pkg-config file pointed at it), then, against that prefix only: builds
# examples/consumer (its own meson project, `dependency('pens')` through pkg-config) and
# runs it, reads the model it wrote with the installed `pens fmt`, compiles every
# installed header, compiles and runs docs/api.md's C++ examples, and imports the
# installed Python package. Prints
# "install: ok" or what failed; exit status 1 on failure.
#
#   scripts/check-install.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

DESTDIR="$work/stage" meson install -C "$build" --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "install: meson install failed"; exit 1; }
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root="$work/stage$prefix"
pc=$(find "$root" -name pens.pc | head -n 1)
[ -n "$pc" ] || { echo "install: no pens.pc installed"; exit 1; }
# The staged files as an installed prefix: pens.pc's other paths derive from its prefix.
sed -i "s|^prefix=.*|prefix=$root|" "$pc"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir pens)

# Only the installed headers: the consumer's build sees no source folder of pens.
meson setup "$work/consumer" examples/consumer >"$work/consumer.log" 2>&1 &&
  ninja -C "$work/consumer" >>"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; echo "install: examples/consumer did not build against the installed pens"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$work/consumer/residual_pea" "$work/residual.json" 200 ||
  { echo "install: examples/consumer failed"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$root/bin/pens" fmt "$work/residual.json" >/dev/null ||
  { echo "install: the installed pens does not read the consumer's model"; exit 1; }

# Every installed header, in one translation unit: none includes a header that was not
# installed.
(cd "$root/include" && find pens -name '*.h' | sort | sed 's|.*|#include <&>|') >"$work/all_headers.cpp"
g++ -std=c++20 -fsyntax-only "$work/all_headers.cpp" $(pkg-config --cflags pens) ||
  { echo "install: the installed headers do not compile on their own"; exit 1; }

# docs/api.md's C++ examples: one program, compiled with the installed headers and
# pkg-config's flags alone.
python3 -c 'import re, sys; print("".join(re.findall(r"```cpp\n(.*?)```", open(sys.argv[1]).read(), re.S)))' \
  docs/api.md >"$work/api.cpp"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 "$work/api.cpp" -o "$work/api" $(pkg-config --cflags --libs pens) ||
  { echo "install: docs/api.md's C++ examples do not compile against the installed pens"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$work/api" || { echo "install: docs/api.md's C++ examples failed"; exit 1; }

module=$(find "$root" -name '_pens*.so' | head -n 1)
if [ -n "$module" ]; then
  PYTHONPATH=$(dirname "$(dirname "$module")") /usr/bin/python3 -c \
    "import pens, sys; m = pens.load(sys.argv[1]); print('python: pens from', pens.__file__, '-', m.inspect().splitlines()[0])" \
    "$work/residual.json" || { echo "install: the installed Python package does not import"; exit 1; }
fi
echo "install: ok"
