#!/usr/bin/env bash
# Builds the documentation site (mkdocs.yml): README.md and docs/ as pages, into
# build-docs/site/ (open build-docs/site/index.html). The repository's files are staged
# beside the pages (build-docs/src/), so that a page's links to configs, scripts and
# sources open them; a "C++ headers" page is made from the installed headers' opening
# comments. Fails on a broken relative link or anchor (scripts/check-links.py) and on
# any mkdocs warning (--strict).
#
#   scripts/docs.sh                     build the site
#   scripts/docs.sh --screenshots DIR   and take screenshots of its home and results pages
#                                       with headless Chromium (home.png, results.png)
#   scripts/docs.sh --serve             build, then serve it on http://127.0.0.1:8000
set -euo pipefail
cd "$(dirname "$0")/.."

screenshots="" serve=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --screenshots) screenshots=$2; shift 2 ;;
    --serve) serve=1; shift ;;
    *) echo "docs: unknown option '$1' (choices: --screenshots DIR, --serve)" >&2; exit 2 ;;
  esac
done

packages=(mkdocs)
[[ -n $screenshots ]] && packages+=(chromium)
scripts/ensure-packages.sh "${packages[@]}"

python3 scripts/check-links.py README.md docs

src=build-docs/src
rm -rf "$src"
mkdir -p "$src"
# The working tree as it is (edits not yet committed included), without build outputs,
# data and runs.
tar -c --exclude=./.git --exclude='./build*' --exclude=./data --exclude=./runs \
  --exclude=node_modules --exclude=__pycache__ . | tar -x -C "$src"

# The C++ headers page: each installed header (meson.build's public_headers) with the
# comment that opens it, by layer, linking to the header itself.
python3 - "$src/docs/headers.md" <<'EOF'
import re
import sys
from pathlib import Path

build = Path("meson.build").read_text()
listed = re.search(r"public_headers = files\((.*?)\n\)", build, re.S).group(1)
headers = re.findall(r"'([^']+\.h)'", listed)
lines = ["# C++ headers", "",
         "The headers `meson install` installs (`#include <pens/LAYER/FILE.h>`), by layer, bottom",
         "up, each with the comment that opens it; [api.md](api.md) shows them used. This page",
         "is made by scripts/docs.sh from meson.build's list.", ""]
layer = None
for header in headers:
    this_layer = header.rsplit("/", 1)[0]
    if this_layer != layer:
        layer = this_layer
        lines += [f"## {layer}/", ""]
    comment = []
    for line in Path(header).read_text().splitlines():
        if not line.startswith("//"):
            break
        comment.append(line[2:].strip())
    lines += [f"**[{header}](../{header})**", "", " ".join(comment) or "(no opening comment)", ""]
Path(sys.argv[1]).write_text("\n".join(lines))
EOF

# --strict turns mkdocs' warnings into a failure; a page left out of the navigation is
# only its notice, so that is checked here.
log=$(mkdocs build --strict 2>&1) || { echo "$log" >&2; exit 1; }
if grep -q 'not included in the "nav"' <<<"$log"; then
  echo "$log" >&2
  echo "docs: every page needs a place in mkdocs.yml's nav" >&2
  exit 1
fi
echo "docs: built build-docs/site/index.html"

if [[ -n $screenshots ]]; then
  mkdir -p "$screenshots"
  for page in index:home docs/results:results; do
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1600 \
      --screenshot="$screenshots/${page#*:}.png" "file://$PWD/build-docs/site/${page%%:*}.html" 2>/dev/null
  done
  echo "docs: screenshots in $screenshots (home.png, results.png)"
fi
if [[ $serve == 1 ]]; then
  python3 -m http.server --bind 127.0.0.1 --directory build-docs/site 8000
fi
