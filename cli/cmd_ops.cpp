#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "ops/registry.h"

namespace pens::cli {

namespace {
std::string differentiable_inputs(const OpDef& op) {
  std::string out;
  for (const InputSlot& s : op.inputs) {
    if (!s.differentiable) continue;
    if (!out.empty()) out += ",";
    out += s.name;
  }
  if (op.variadic && op.inputs.back().differentiable) out += "...";
  return out.empty() ? "-" : out;
}
}  // namespace

int run_ops(const std::vector<std::string>& argv) {
  const Args args(argv, {"json"}, {});
  if (!args.positional().empty()) fail("unexpected argument '", args.positional()[0], "'");
  const auto ops = OpRegistry::global().all();
  if (args.flag("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const OpDef* op : ops) {
      nlohmann::json inputs = nlohmann::json::array();
      for (const InputSlot& s : op->inputs) {
        inputs.push_back({{"name", s.name},
                          {"dtype", dtype_name(s.dtype)},
                          {"differentiable", s.differentiable}});
      }
      nlohmann::json attrs = nlohmann::json::array();
      for (const AttrSpec& a : op->attrs) {
        nlohmann::json spec = {{"name", a.name},
                               {"type", attr_type_name(a.type)},
                               {"required", a.required},
                               {"doc", a.doc}};
        if (auto* d = std::get_if<AttrValue>(&a.default_value)) {
          spec["default"] = std::visit([](const auto& v) { return nlohmann::json(v); }, *d);
        }
        attrs.push_back(spec);
      }
      out.push_back({{"name", op->name},
                     {"summary", op->summary},
                     {"arity", op->inputs.size()},
                     {"variadic", op->variadic},
                     {"inputs", inputs},
                     {"differentiable", differentiable_inputs(*op) != "-"},
                     {"stochastic", op->stochastic},
                     {"leaf", op->leaf},
                     {"attributes", attrs}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << std::left << std::setw(16) << "op" << std::setw(7) << "arity" << std::setw(20)
            << "differentiable" << std::setw(11) << "stochastic"
            << "summary\n";
  for (const OpDef* op : ops) {
    std::cout << std::setw(16) << op->name << std::setw(7) << op->arity_str() << std::setw(20)
              << differentiable_inputs(*op) << std::setw(11) << (op->stochastic ? "yes" : "no")
              << op->summary << "\n";
  }
  std::cout << ops.size() << " ops\n";
  return 0;
}

}  // namespace pens::cli
