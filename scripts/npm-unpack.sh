#!/usr/bin/env bash
# Downloads an npm package's tarball into DIR (npm installed first where it is missing)
# and unpacks it there (DIR/package/...); prints the tarball's path. The fetch scripts'
# one way to the npm registry.
#
#   scripts/npm-unpack.sh PACKAGE[@VERSION] DIR
set -euo pipefail
package="$1" dir="$2"
cd "$(dirname "$0")/.."
command -v npm > /dev/null || scripts/ensure-packages.sh npm >&2
(cd "$dir" && npm pack --silent "$package" > /dev/null)
tarball="$(ls "$dir"/*.tgz)"
tar -xzf "$tarball" -C "$dir"
echo "$tarball"
