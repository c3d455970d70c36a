// The precompiled header of pens' own targets (the library, the tool, the tests): the
// third-party and standard headers most of their files include, parsed once per target
// instead of once per file (meson's cpp_pch; `-Db_pch=false` turns it off). Only headers
// outside pens belong here: pens' own headers change too often, and every file still
// includes what it uses. No include guard: the compiler reads it once per target, as the
// unit it precompiles (a guard there draws a warning).

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
