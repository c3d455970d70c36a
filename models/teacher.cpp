#include "pens/models/teacher.h"

#include <regex>
#include <string>
#include <vector>

#include "pens/ops/ir/error.h"

namespace pens {

namespace {

// A frozen "PREFIX + P" averaging each trainable parameter P whose whole name matches
// `only`, read at inference when at_inference. Returns the names of the parameters averaged.
std::vector<std::string> average(Graph& g, double decay, bool at_inference, const std::string& prefix,
                                 const std::regex& only) {
  std::vector<std::string> sources;
  for (NodeId v : g.nodes()) {
    if (is_param(g[v]) && !g[v].has(kFrozen) && std::regex_match(g[v].name, only)) sources.push_back(g[v].name);
  }
  // Averages added twice would fail below as a duplicate node, the graph half changed;
  // said first, as what it is.
  for (const std::string& name : sources) {
    if (g.find(prefix + name)) fail("'", name, "' already has an average '", prefix, name, "'");
  }
  for (const std::string& name : sources) {
    const NodeId v = *g.find(name);
    // Its values come from the source's at initialisation: no draws of its own.
    const NodeId a = g.param(prefix + name, Shape::from(g[v].attrs.get_ints("shape")));
    g.set_flag(a, kFrozen);
    g.add_average({.param = prefix + name, .source = name, .decay = decay, .at_inference = at_inference});
  }
  return sources;
}

}  // namespace

void add_teacher(Graph& g, double decay, bool at_inference, int64_t teacher_child) {
  if (teacher_child < 1) fail("add_teacher: the teacher is a child, 1 or more, got ", teacher_child);
  average(g, decay, at_inference, "teacher/", std::regex(".*"));
  // Inference reads the teacher's weights: the running statistics read with them follow
  // the teacher's own batch statistics (its child's), not the student's, which fit other
  // weights.
  if (!at_inference) return;
  std::vector<MovingAverage> averages = g.averages();
  for (MovingAverage& a : averages) {
    if (of_batch_statistic(g, a)) a.child = teacher_child;
  }
  g.set_averages(std::move(averages));
}

std::vector<std::string> add_weight_averages(Graph& g, double decay, const std::string& params) {
  std::regex only;
  try {
    only = std::regex(params);
  } catch (const std::regex_error& e) {
    fail("the parameters to average: '", params, "' is not a regular expression (", e.what(), ")");
  }
  std::vector<std::string> averaged = average(g, decay, true, "average/", only);
  if (averaged.empty()) fail("the parameters to average: no trainable parameter's whole name matches '", params, "'");
  return averaged;
}

}  // namespace pens
