#include "pens/models/teacher.h"

#include <string>
#include <vector>

namespace pens {

void add_teacher(Graph& g, double decay, bool at_inference, int64_t teacher_child) {
  std::vector<NodeId> students;
  for (NodeId v : g.nodes()) {
    if (is_param(g[v]) && !g[v].has(kFrozen)) students.push_back(v);
  }
  for (NodeId v : students) {
    const std::string name = g[v].name;
    // Its values come from the student's at initialisation: no draws of its own.
    const NodeId t = g.param("teacher/" + name, Shape::from(g[v].attrs.get_ints("shape")));
    g.set_flag(t, kFrozen);
    g.add_average({.param = "teacher/" + name, .source = name, .decay = decay, .at_inference = at_inference});
  }
  // Inference reads the teacher's weights: the running statistics read with them follow
  // the teacher's own batch statistics (its child's), not the student's, which fit other
  // weights.
  if (!at_inference || teacher_child == 0) return;
  std::vector<MovingAverage> averages = g.averages();
  for (MovingAverage& a : averages) {
    if (of_batch_statistic(g, a)) a.child = teacher_child;
  }
  g.set_averages(std::move(averages));
}

}  // namespace pens
