#include "pens/train/loop/run_kind.h"

namespace pens {

std::string run_kind_of(const nlohmann::json& config) {
  if (!config.is_object()) return "classifier";  // its parser says what is wrong
  if (const auto kind = config.find("kind"); kind != config.end() && kind->is_string()) return kind->get<std::string>();
  if (const auto task = config.find("task"); task != config.end()) {
    return task->is_string() && task->get<std::string>() == "skipgram" ? "skipgram" : "trees";
  }
  return "classifier";
}

}  // namespace pens
