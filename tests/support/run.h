// Runs a command as a user would, for tests of the tool and the example programs.
#pragma once

#include <string>

namespace pens::testing {

struct Run {
  int status = -1;   // the exit status; 128 + the signal when one ended it
  std::string out;   // stdout and stderr together
};

// Runs `command` through the shell, stderr joined to stdout.
Run run_command(const std::string& command);

}  // namespace pens::testing
