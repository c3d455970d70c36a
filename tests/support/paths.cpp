#include "tests/support/paths.h"

namespace pens::testing {

std::string source_dir() { return PENS_SOURCE_DIR; }
std::string cli() { return PENS_CLI; }
std::string extending_example() { return PENS_EXTENDING_EXAMPLE; }
std::string mpirun() { return PENS_MPIRUN; }

}  // namespace pens::testing
