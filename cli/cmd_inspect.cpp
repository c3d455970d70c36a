#include <iostream>

#include "cli/args.h"
#include "cli/ensemble_args.h"
#include "pens/serialization/json_text.h"
#include "pens/serialization/model_file.h"

namespace pens::cli {

int run_inspect(const std::vector<std::string>& argv) {
  std::vector<std::string> options = kEnsembleOptions;
  options.push_back("format");
  const Args args(argv, {"parent"}, options);
  const Model model = load_model(args.one_positional("a model file"));
  const BuiltGraph built = build_for_cli(model, args);
  const std::string format = args.option("format").value_or("text");
  if (format == "json") {
    std::cout << format_json(inspect_json(built)) << "\n";
  } else if (format == "dot") {
    std::cout << inspect_dot(built);
  } else if (format == "text") {
    std::cout << inspect_text(built);
  } else {
    fail("--format must be text, dot or json, got '", format, "'");
  }
  return 0;
}

}  // namespace pens::cli
