#include "pens/train/optim/groups.h"

#include <algorithm>
#include <map>
#include <optional>

#include "pens/ops/ir/error.h"
#include "pens/ops/parallel.h"

namespace pens {

namespace {

// The run's optimizer on the store's elements outside every group, and each group's on
// the elements of its parameters: a step routes each range of the store to the optimizers
// whose elements it holds. Every member is elementwise, so an element's update does not
// depend on how the ranges are cut, nor on the thread count.
class GroupedOptimizer : public Optimizer {
 public:
  struct Member {
    std::unique_ptr<Optimizer> optimizer;
    double rate_scale = 1;               // the member's rate over the schedule's
    std::optional<double> momentum = {};  // the group's constant momentum; none: the schedule's
  };
  // A run of consecutive elements updated by one member.
  struct Segment {
    int64_t begin = 0, end = 0;
    size_t member = 0;
  };

  GroupedOptimizer(std::string kind, std::vector<Member> members, std::vector<Segment> segments, int64_t size)
      : kind_(std::move(kind)), members_(std::move(members)), segments_(std::move(segments)), size_(size) {}

  std::string_view kind() const override { return kind_; }
  bool elementwise() const override { return true; }

  void step(const OptimizerStep& s) override {
    parallel_ranges(size_, [&](int64_t begin, int64_t n) { step_range(s, begin, n); });
  }

  void step_range(const OptimizerStep& s, int64_t begin, int64_t n) override {
    const int64_t end = begin + n;
    auto it = std::upper_bound(segments_.begin(), segments_.end(), begin,
                               [](int64_t at, const Segment& seg) { return at < seg.end; });
    for (; it != segments_.end() && it->begin < end; ++it) {
      const int64_t lo = std::max(begin, it->begin), hi = std::min(end, it->end);
      const Member& m = members_[it->member];
      OptimizerStep ms = s;
      ms.learning_rate = s.learning_rate * m.rate_scale;
      if (m.momentum) ms.momentum = *m.momentum;
      m.optimizer->step_range(ms, lo, hi - lo);
    }
  }

  std::vector<StateBuffer> state() override {
    std::vector<StateBuffer> out = members_[0].optimizer->state();
    for (size_t g = 1; g < members_.size(); ++g) {
      for (StateBuffer b : members_[g].optimizer->state()) {
        b.name = cat("group", g, "/", b.name);
        out.push_back(std::move(b));
      }
    }
    return out;
  }

  void restart() override {
    for (Member& m : members_) m.optimizer->restart();
  }

 private:
  std::string kind_;
  std::vector<Member> members_;  // [0]: the run's own optimizer
  std::vector<Segment> segments_;  // covering [0, size_) in order
  int64_t size_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer_with_groups(const std::string& kind, const Attributes& settings,
                                                      double base_rate, const std::vector<OptimizerGroup>& groups,
                                                      ParamStore<float>& params) {
  if (groups.empty()) return make_optimizer(kind, params, settings);
  if (!(base_rate > 0)) fail("optimizer.groups: the run's learning rate is ", base_rate, "; a group's rate is relative to it");
  std::vector<GroupedOptimizer::Member> members;
  members.push_back({make_optimizer(kind, params, settings)});
  if (!members[0].optimizer->elementwise()) {
    fail("optimizer.groups: optimizer ", kind, " updates the whole store at once, so no group can take part of it");
  }
  std::map<std::string, size_t> owner;  // parameter -> member
  for (size_t g = 0; g < groups.size(); ++g) {
    const OptimizerGroup& group = groups[g];
    const std::string where = cat("optimizer.groups[", g, "]");
    if (group.params.empty()) fail(where, ".params names no parameter");
    for (const std::string& name : group.params) {
      if (!params.find(name)) fail(where, ".params: the model has no parameter '", name, "'");
      const auto [it, added] = owner.emplace(name, g + 1);
      if (!added) fail(where, ".params: '", name, "' is already in optimizer.groups[", it->second - 1, "]");
    }
    std::unique_ptr<Optimizer> optimizer;
    try {
      optimizer = make_optimizer(group.kind, params, group.settings);
    } catch (const Error& e) {
      fail(where, ": ", e.what());
    }
    if (!optimizer->elementwise()) fail(where, ": optimizer ", group.kind, " has no update of a range of the store");
    members.push_back({std::move(optimizer), group.learning_rate / base_rate, group.momentum});
  }
  // Segments in store order; the gaps between parameters (alignment) are the run optimizer's.
  std::vector<ParamEntry> entries = params.entries();
  std::ranges::sort(entries, {}, &ParamEntry::offset);
  std::vector<GroupedOptimizer::Segment> segments;
  const auto add = [&](int64_t begin, int64_t end, size_t member) {
    if (begin >= end) return;
    if (!segments.empty() && segments.back().member == member && segments.back().end == begin) {
      segments.back().end = end;
    } else {
      segments.push_back({begin, end, member});
    }
  };
  int64_t at = 0;
  for (const ParamEntry& e : entries) {
    add(at, e.offset, 0);
    const auto it = owner.find(e.name);
    add(e.offset, e.offset + e.shape.numel(), it == owner.end() ? 0 : it->second);
    at = e.offset + e.shape.numel();
  }
  const auto size = static_cast<int64_t>(params.values().size());
  add(at, size, 0);
  return std::make_unique<GroupedOptimizer>(kind + "+groups", std::move(members), std::move(segments), size);
}

std::string describe_groups(const std::vector<OptimizerGroup>& groups) {
  std::string out;
  for (const OptimizerGroup& g : groups) {
    std::string names;
    for (const std::string& p : g.params) names += (names.empty() ? "" : ", ") + p;
    out += cat(out.empty() ? " (" : "; ", names, " on ", g.kind, " at ", g.learning_rate);
  }
  return out.empty() ? out : out + ")";
}

}  // namespace pens
