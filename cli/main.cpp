// pens: the command-line tool. One subcommand per task; `pens CMD --help` for each.
#include <iostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "graph/error.h"

namespace {

using pens::cli::Command;

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"ops", "list the registered ops",
       "usage: pens ops [--json]\n\n"
       "Lists every registered op with its arity, which inputs are differentiable,\n"
       "whether it is stochastic, and its attributes.\n\n"
       "  --json   print a JSON array instead of a table\n",
       pens::cli::run_ops},
      {"gradcheck", "finite-difference gradient checks in double precision",
       "usage: pens gradcheck --all-ops [--op NAME]\n\n"
       "Runs the double-precision finite-difference check of each op's gradient\n"
       "(random shapes and values, fixed noise keys) and prints one line per op with\n"
       "its largest error: |analytic - numeric| / max(|analytic|, |numeric|, 1e-3).\n"
       "Exits non-zero if any op exceeds 1e-6.\n\n"
       "  --all-ops   check every registered op\n"
       "  --op NAME   check one op\n",
       pens::cli::run_gradcheck},
  };
  return all;
}

void print_help() {
  std::cout << "pens: pseudo-ensembles on a static computation graph\n\n"
               "usage: pens COMMAND [options]\n\ncommands:\n";
  for (const Command& c : commands()) {
    std::cout << "  " << c.name << std::string(12 - c.name.size(), ' ') << c.summary << "\n";
  }
  std::cout << "\n`pens COMMAND --help` describes a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2 && args[0] == "help") {
      for (const Command& c : commands()) {
        if (c.name == args[1]) {
          std::cout << c.usage;
          return 0;
        }
      }
    }
    print_help();
    return args.empty() ? 2 : 0;
  }
  for (const Command& c : commands()) {
    if (c.name != args[0]) continue;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string& a : rest) {
      if (a == "--help" || a == "-h") {
        std::cout << c.usage;
        return 0;
      }
    }
    try {
      return c.run(rest);
    } catch (const pens::Error& e) {
      std::cerr << "pens " << c.name << ": error: " << e.what() << "\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "pens " << c.name << ": internal error: " << e.what() << "\n";
      return 3;
    }
  }
  std::cerr << "pens: unknown command '" << args[0] << "'\n\n";
  print_help();
  return 2;
}
