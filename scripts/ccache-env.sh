# Sourced by the build scripts: how ccache, when installed (meson uses it when it finds
# it), caches pens' builds. Paths under the checkout are hashed relative to it, and the
# working folder is left out of the hash (the build maps the checkout's paths out of the
# objects, debug information included: -ffile-prefix-map in meson.build), so a second
# clone elsewhere hits the first one's cache; the precompiled headers are cacheable only
# with the two sloppinesses below (ccache's manual, "Precompiled headers").
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
