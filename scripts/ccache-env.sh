# Sourced by the build scripts: how ccache, when installed (meson uses it when it finds
# it), caches pens' builds. Paths under the checkout are hashed relative to it, so a
# second clone elsewhere hits the first one's cache; the precompiled headers are
# cacheable only with the two sloppinesses below (ccache's manual, "Precompiled headers").
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
