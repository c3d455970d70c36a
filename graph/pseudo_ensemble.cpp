#include "pens/graph/pseudo_ensemble.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "pens/graph/penalty.h"
#include "pens/ops/ir/error.h"

namespace pens {

namespace {
// An error about a field of the spec: model-file readers point at it.
template <class... Args>
[[noreturn]] void fail_spec(const std::string& field, const Args&... args) {
  throw Error(cat(args...), "", field);
}

bool one_of(const std::string& s, std::initializer_list<const char*> options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return s == o; });
}
}  // namespace

std::vector<int64_t> PseudoEnsembleSpec::children_of(const PenaltyTerm& term) const {
  if (!term.children.empty()) return term.children;
  std::vector<int64_t> all;
  for (int64_t k = 1; k <= children; ++k) all.push_back(k);
  return all;
}

bool PseudoEnsembleSpec::splits_rows() const {
  return std::any_of(penalties.begin(), penalties.end(), [](const PenaltyTerm& t) { return t.rows != "all"; });
}

void PseudoEnsembleSpec::validate() const {
  if (children < 1 || children > 64) fail_spec("children", "pseudo_ensemble.children must be in [1, 64], got ", children);
  if (!one_of(pairing, {"child-child", "parent-child"})) {
    fail_spec("pairing", "pseudo_ensemble.pairing must be 'child-child' or 'parent-child', got '", pairing, "'");
  }
  if (!one_of(loss_on, {"parent", "child", "children"})) {
    fail_spec("loss_on", "pseudo_ensemble.loss_on must be 'parent', 'child' or 'children', got '", loss_on, "'");
  }
  if (!(smoothing >= 0 && smoothing < 1)) {
    fail_spec("smoothing", "pseudo_ensemble.smoothing must be in [0, 1), got ", smoothing);
  }
  if (batch_statistics.size() != 1 && batch_statistics.size() != static_cast<size_t>(children)) {
    fail_spec("batch_statistics", "pseudo_ensemble.batch_statistics must be one entry (every child's) or one per ",
              "child (", children, "), got ", batch_statistics.size());
  }
  for (const std::string& b : batch_statistics) {
    if (!one_of(b, {"own", "parent"})) {
      fail_spec("batch_statistics", "pseudo_ensemble.batch_statistics must be 'own' or 'parent', got '", b, "'");
    }
  }
  if (statistics_by_part && std::any_of(batch_statistics.begin(), batch_statistics.end(),
                                        [](const std::string& b) { return b != "own"; })) {
    fail_spec("statistics_by_part", "pseudo_ensemble.statistics_by_part needs batch_statistics 'own': children that ",
              "read the parent's statistics would mix its labeled rows' with their own unlabeled rows'");
  }
  if (teacher != 0) {
    if (teacher != 1) fail_spec("teacher", "pseudo_ensemble.teacher must be 0 (none) or 1 (child 1), got ", teacher);
    if (pairing != "child-child" || children < 2) {
      fail_spec("teacher", "pseudo_ensemble.teacher needs pairing 'child-child' and at least 2 children: child 1 is "
                "the teacher, the others the students it is paired with");
    }
    if (loss_on != "parent") {
      fail_spec("loss_on", "pseudo_ensemble.loss_on must be 'parent' with a teacher: child 1 (the teacher) has no "
                "parameters of its own to train");
    }
  }
  if (pairing == "child-child" && !penalties.empty() && children < 2 &&
      std::any_of(penalties.begin(), penalties.end(), [](const PenaltyTerm& t) { return t.pairing.empty(); })) {
    fail_spec("children", "pseudo_ensemble.pairing 'child-child' needs at least 2 children, got ", children);
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < penalties.size(); ++i) {
    const PenaltyTerm& p = penalties[i];
    const std::string where = cat("pseudo_ensemble.penalties[", i, "]");
    const std::string field = cat("penalties/", i, "/");
    if (p.node.empty()) fail_spec(field + "node", where, ".node is empty");
    const PenaltyKind* kind = PenaltyRegistry::global().find(p.kind);
    if (!kind) {
      fail_spec(field + "kind", where, ".kind: ", PenaltyRegistry::global().unknown(p.kind));
    }
    for (const auto& [name, value] : p.params) {
      if (!kind->params.contains(name)) {
        std::string declared;
        for (const auto& [n, d] : kind->params) declared += (declared.empty() ? "" : ", ") + n;
        fail_spec(field + "params/" + name, where, ".params: penalty kind '", p.kind, "' has no parameter '", name,
                  "' (", declared.empty() ? std::string("it takes none") : "it takes " + declared, ")");
      }
      if (!std::isfinite(value)) fail_spec(field + "params/" + name, where, ".params.", name, " must be finite");
    }
    if (!(p.lambda >= 0 && std::isfinite(p.lambda))) {
      fail_spec(field + "lambda", where, ".lambda must be finite and >= 0, got ", p.lambda);
    }
    if (!one_of(p.rows, {"all", "labeled", "unlabeled"})) {
      fail_spec(field + "rows", where, ".rows must be 'all', 'labeled' or 'unlabeled', got '", p.rows, "'");
    }
    if (!p.pairing.empty()) {
      if (!one_of(p.pairing, {"child-child", "parent-child"})) {
        fail_spec(field + "pairing", where, ".pairing must be 'child-child' or 'parent-child' (or absent: the ",
                  "pseudo-ensemble's), got '", p.pairing, "'");
      }
      if (p.pairing == "child-child" && children < 2) {
        fail_spec(field + "pairing", where, ".pairing 'child-child' needs at least 2 children, got ", children);
      }
    }
    std::set<int64_t> listed;
    for (int64_t k : p.children) {
      if (k < 1 || k > children || !listed.insert(k).second) {
        fail_spec(field + "children", where, ".children must list distinct children in [1, ", children, "], got ", k);
      }
    }
    if (pairing_of(p) == "child-child" && !p.children.empty() && p.children.size() < 2) {
      fail_spec(field + "children", where, ".children: pairing 'child-child' needs at least 2 children, got ",
                p.children.size());
    }
    if (!p.target.empty() && pairing_of(p) != "parent-child") {
      fail_spec(field + "target", where, ".target needs pairing 'parent-child': the target is the clean parent's "
                "node, compared with each child's '", p.node, "'");
    }
    if (!seen.emplace(p.node, p.kind).second) {
      fail_spec(field + "node", where, ": a second ", p.kind, " penalty on '", p.node, "'");
    }
  }
  for (size_t i = 0; i < lambda_schedule.size(); ++i) {
    const LambdaStage& s = lambda_schedule[i];
    const std::string field = cat("lambda_schedule/", i, "/");
    if (!(s.epochs > 0 && std::isfinite(s.epochs))) {
      fail_spec(field + "epochs", "pseudo_ensemble.lambda_schedule[", i, "].epochs must be > 0, got ", s.epochs);
    }
    if (!(s.scale >= 0 && std::isfinite(s.scale))) {
      fail_spec(field + "scale", "pseudo_ensemble.lambda_schedule[", i, "].scale must be finite and >= 0, got ",
                s.scale);
    }
  }
}

}  // namespace pens
