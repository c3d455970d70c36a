#include "pens/graph/noise.h"

#include <algorithm>
#include <set>

#include "pens/ops/ir/error.h"
#include "pens/ops/random.h"

namespace pens {

std::string child_prefix(int child) { return cat("c", child, "/"); }

int64_t site_stream(int child, std::string_view source) {
  // The top bit dropped: attributes are signed.
  return static_cast<int64_t>(mix64(hash_name(cat(child_prefix(child), source))) >> 1);
}

int64_t NoiseSite::stream() const { return site_stream(child, cat(annotated.name, "#", index)); }

NodeId NoiseSite::add(std::string_view op, const std::vector<NodeId>& inputs, Attributes attrs,
                      std::string_view tag) {
  std::string name = cat(child_prefix(child), annotated.name, "~", tag);
  if (graph.find(name)) name = cat(name, index);
  const NodeId v = graph.add(op, inputs, std::move(attrs), std::move(name));
  graph.node(v).role = "noise";
  graph.node(v).layer = annotated.layer;
  return v;
}

NodeId NoiseSite::add_probe(std::string_view tag, const Attributes& params) {
  const NodeId v = add("probe", {value}, {{"stream", stream()}}, tag);
  graph.set_probe(v, ProbeBody{annotated.noise[index].kind, params, child, nullptr});
  return v;
}

NodeId NoiseSite::subspace_indices(const std::string& group, int64_t size, int64_t keep) {
  const std::string name = cat(child_prefix(child), "subspace:", group);
  auto it = subspace_draws_->find(group);
  if (it != subspace_draws_->end()) {
    const Node& drawn = graph[it->second];
    if (drawn.attrs.get_int("n") != size || drawn.attrs.get_int("keep") != keep) {
      fail("node '", annotated.name, "': subspace group '", group, "' keeps ", keep, " of ", size,
           " here but ", drawn.attrs.get_int("keep"), " of ", drawn.attrs.get_int("n"),
           " elsewhere");
    }
    return it->second;
  }
  const NodeId v = graph.add("subset", {},
                             {{"n", size},
                              {"keep", keep},
                              {"stream", site_stream(child, name)}},
                             name);
  graph.node(v).role = "noise";
  subspace_draws_->emplace(group, v);
  return v;
}

namespace {

// Gaussian input or bias noise, and weight fuzzing: the same op on different values.
NodeId add_gaussian(NoiseSite& site, const Attributes& a, std::string_view tag) {
  return site.add("gaussian_noise", {site.value},
                  {{"sigma", a.get_float("sigma")}, {"stream", site.stream()}}, tag);
}

NoiseKind mask_kind() {
  NoiseKind mask{"mask",
                 "inverted dropout of the node's output: keep with probability 1-p, scale by 1/(1-p)",
                 {{"p", AttrType::Float, false, AttrValue(0.5), "drop probability", AttrRange::from_below(0, 1)},
                  {"rescale", AttrType::Int, false, AttrValue(int64_t{1}), "0: keep values unscaled", AttrRange::from_to(0, 1)}},
                 false,
                 [](NoiseSite& site, const Attributes& a) {
                   return site.add("dropout", {site.value},
                                   {{"p", a.get_float("p")},
                                    {"rescale", a.get_int("rescale")},
                                    {"stream", site.stream()}},
                                   "mask");
                 }};
  mask.aliases = {"dropout"};
  return mask;
}

NoiseKind gaussian_kind() {
  return {"gaussian",
          "additive Gaussian noise on the node's output (input noise, bias noise)",
          {{"sigma", AttrType::Float, false, AttrValue(0.1), "standard deviation", AttrRange::at_least(0)}},
          false,
          [](NoiseSite& site, const Attributes& a) { return add_gaussian(site, a, "gaussian"); }};
}

NoiseKind fuzz_kind() {
  return {"fuzz",
          "weight fuzzing: the child uses theta + N(0, sigma^2); gradients reach theta",
          {{"sigma", AttrType::Float, false, AttrValue(0.02), "standard deviation", AttrRange::at_least(0)}},
          true,
          [](NoiseSite& site, const Attributes& a) { return add_gaussian(site, a, "fuzz"); }};
}

NoiseKind subspace_kind() {
  return {"subspace",
          "subspace sampling: keep `keep` of the group's latent dimensions (one draw per child "
          "and noise key), slicing this parameter along `axes`",
          {{"group", AttrType::String, true, {}, "latent dimension group shared across parameters"},
           {"keep", AttrType::Int, true, {}, "dimensions kept", AttrRange::at_least(1)},
           {"axes", AttrType::Ints, false, AttrValue(std::vector<int64_t>{0}),
            "axes of this parameter indexed by the group's dimensions", AttrRange::at_least(0)}},
          true,
          [](NoiseSite& site, const Attributes& a) {
            const Shape shape = Shape::from(site.annotated.attrs.get_ints("shape"));
            const std::vector<int64_t>& axes = a.get_ints("axes");
            if (axes.empty()) fail("node '", site.annotated.name, "': subspace needs at least one axis");
            NodeId indices{};
            for (int64_t axis : axes) {
              if (axis < 0 || axis >= shape.rank) {
                fail("node '", site.annotated.name, "': subspace axis ", axis, " is out of range for shape ",
                     shape.str());
              }
              const int64_t size = shape[static_cast<int>(axis)];
              const int64_t keep = a.get_int("keep");
              if (keep < 1 || keep > size) {
                fail("node '", site.annotated.name, "': subspace keep ", keep, " is not in [1, ", size, "]");
              }
              indices = site.subspace_indices(a.get_string("group"), size, keep);
            }
            return site.add("gather_axes", {site.value, indices}, {{"axes", axes}}, "subspace");
          }};
}

}  // namespace

NoiseKind adversarial_kind();  // graph/adversarial.cpp

template <>
std::vector<NoiseKind> builtin_kinds<NoiseKind>() {
  return {mask_kind(), gaussian_kind(), fuzz_kind(), subspace_kind(), adversarial_kind()};
}

void normalize_noise(const Node& node, NoiseAnnotation& annotation) {
  const NoiseKind* kind = NoiseRegistry::global().find(annotation.kind);
  if (!kind) fail_at(node.name, "node '", node.name, "': ", NoiseRegistry::global().unknown(annotation.kind));
  // `children` is the annotation's own key in model files (which children apply it).
  if (std::any_of(kind->params.begin(), kind->params.end(), [](const AttrSpec& p) { return p.name == "children"; })) {
    fail_at(node.name, "node '", node.name, "': noise kind '", kind->name, "' declares a parameter 'children', the ",
            "name an annotation uses for the children that apply it; rename the kind's parameter");
  }
  if (kind->parameters_only && !is_param(node)) {
    fail_at(node.name, "node '", node.name, "': noise kind '", kind->name, "' applies to parameters only");
  }
  try {
    normalize_attrs(kind->params, annotation.params, [&] { return cat("node '", node.name, "' (noise ", kind->name, ")"); });
  } catch (const Error& e) {
    throw Error(e.what(), node.name);
  }
  // Whether each child exists is the perturb pass's to check: the annotation does not know K.
  std::set<int64_t> seen;
  for (int64_t child : annotation.children) {
    if (child < 1 || !seen.insert(child).second) {
      fail_at(node.name, "node '", node.name, "' (noise ", kind->name, "): children must list distinct children ",
              "numbered from 1, got ", child, child < 1 ? "" : " twice");
    }
  }
}

void add_noise(Graph& g, NodeId v, std::string kind, Attributes params, std::vector<int64_t> children) {
  NoiseAnnotation annotation;
  annotation.kind = std::move(kind);
  annotation.params = std::move(params);
  annotation.children = std::move(children);
  normalize_noise(g[v], annotation);
  g.node(v).noise.push_back(std::move(annotation));
}

}  // namespace pens
