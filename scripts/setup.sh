#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine for pens and builds it: installs the Debian packages
# pens needs (only those missing), configures an optimized build in build/ and compiles.
# Called by scripts/test.sh and scripts/demo.sh; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# gnuplot-nox draws pens train's learning-curve.png; without it the run says so and the
# curve stays in curve.tsv. OpenSSL's libcrypto computes SHA-256, libpng writes PNG.
# pybind11, numpy and pytest are for the Python package, built for Debian's python3
# (/usr/bin/python3); matplotlib draws the curve of examples/python/train_pea.py, whose
# notebook the tests run in a Jupyter kernel (nbclient, ipykernel).
# Open MPI runs data-parallel training (mpirun -np P pens train; docs/distributed.md).
# ccache makes a second build of the same sources fast, in this folder or another clone
# (scripts/ccache-env.sh). mkdocs builds the documentation site (scripts/docs.sh), which
# the tests build too. oneDNN runs bfloat16 products (a config's "precision": "bfloat16";
# ops/precision.h).
scripts/ensure-packages.sh g++ meson ninja-build pkg-config libeigen3-dev libboost-graph-dev \
  nlohmann-json3-dev libssl-dev libpng-dev doctest-dev gnuplot-nox \
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-matplotlib \
  python3-nbclient python3-nbformat python3-ipykernel \
  libopenmpi-dev openmpi-bin ccache mkdocs libdnnl-dev

source scripts/ccache-env.sh
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
echo "setup: building (meson, build/)"
# One job per core: ninja's default of two more was slower here (large units, 2 cores).
scripts/ninja-quiet.sh build

# `import pens` from the build: a .pth file naming build/python in Debian's python3's
# site folder, and in that of the python3 first on the PATH when it is another CPython of
# the same version (a pyenv one, say), with Debian's packages after its own for numpy.
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
add_pth() {  # add_pth PYTHON LINE...
  local python=$1 site
  shift
  site=$("$python" -c 'import site; print(site.getsitepackages()[0])')
  $sudo mkdir -p "$site"
  printf '%s\n' "$@" | $sudo tee "$site/pens.pth" >/dev/null
}
add_pth /usr/bin/python3 "$PWD/build/python"
path_python=$(command -v python3 || true)
if [ -n "$path_python" ] && [ "$("$path_python" -c 'import sys; print(sys.executable)')" != /usr/bin/python3 ]; then
  version='import sys; print(sys.implementation.name, sys.version_info[:2])'
  if [ "$("$path_python" -c "$version")" = "$(/usr/bin/python3 -c "$version")" ]; then
    if "$path_python" -c 'import numpy' 2>/dev/null; then
      add_pth "$path_python" "$PWD/build/python"
    else
      add_pth "$path_python" "$PWD/build/python" /usr/lib/python3/dist-packages
    fi
  fi
fi
