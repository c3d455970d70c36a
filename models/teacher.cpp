#include "pens/models/teacher.h"

#include <string>
#include <vector>

namespace pens {

void add_teacher(Graph& g, double decay, bool at_inference) {
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
}

}  // namespace pens
