// Where the tests find the checkout and the programs of their own build. The paths are
// compiled into tests/support/paths.cpp alone, so that the test files' objects do not
// depend on where the checkout is (ccache reuses them from another clone).
#pragma once

#include <string>

namespace pens::testing {

std::string source_dir();         // the checkout the tests were built from
std::string cli();                // the pens tool of the same build
std::string extending_example();  // examples/extending of the same build
std::string mpirun();             // the mpirun found at configure time; empty without MPI

}  // namespace pens::testing
