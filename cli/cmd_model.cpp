// pens fmt, pens new and pens average: model files in canonical form.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/args.h"
#include "pens/graph/noise.h"
#include "pens/models/ctn.h"
#include "pens/models/dataset.h"
#include "pens/models/ladder.h"
#include "pens/models/mlp.h"
#include "pens/models/mnist.h"
#include "pens/models/sst.h"
#include "pens/models/teacher.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"
#include "pens/serialization/model_file.h"

namespace pens::cli {

namespace {

// A model file's canonical form, warning on stderr where the model is valid but pens train
// would refuse it or ignore part of it.
std::string canonical_form(const std::string& path) {
  const Model model = load_model(path);
  if (const std::string dead = undrawn_noise(model); !dead.empty()) {
    std::cerr << "pens fmt: warning: " << path << ": " << dead << "\n";
  }
  if (const std::vector<std::string> unread = unread_nodes(model); !unread.empty()) {
    std::string names;
    for (size_t i = 0; i < unread.size() && i < 8; ++i) names += (i ? ", '" : "'") + unread[i] + "'";
    if (unread.size() > 8) names += cat(" and ", unread.size() - 8, " more");
    std::cerr << "pens fmt: warning: " << path << ": nothing uses " << names
              << " (not an output, a loss, a penalty's node, an average or a tree port, nor feeding one)\n";
  }
  const ValueStorage storage = !model.values ? ValueStorage::None
                               : model.weights_file.empty() ? ValueStorage::Inline
                                                            : ValueStorage::Sidecar;
  return write_model(model, storage, model.weights_file).json;
}

}  // namespace

int run_fmt(const std::vector<std::string>& argv) {
  const Args args(argv, {"check"}, {});
  if (!args.flag("check")) {
    std::cout << canonical_form(args.one_positional("a model file"));
    return 0;
  }
  // --check takes any number of files, as a formatter's check does in CI: every file that
  // is not canonical is named; a file that cannot be read stops the check with its error.
  if (args.positional().empty()) fail("missing a model file");
  int status = 0;
  for (const std::string& path : args.positional()) {
    if (read_file(path, kMaxModelFileBytes) != canonical_form(path)) {
      std::cout << path << ": not in canonical form (`pens fmt " << path << "` prints it)\n";
      status = 1;
    }
  }
  return status;
}

namespace {

std::vector<std::string> comma_separated(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) items.push_back(item);
  return items;
}

// All of `text` as a number (strtod's forms: 2, 0.5, 1e-6), or nothing.
std::optional<double> whole_number(const std::string& text) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') return std::nullopt;
  return number;
}

// Comma-separated numbers >= 0 (--denoising, --weight-std), or a failure naming the
// option, the item and what each should be.
std::vector<double> non_negative_list(const std::string& text, const std::string& option, const char* what) {
  std::vector<double> out;
  for (const std::string& item : comma_separated(text)) {
    const std::optional<double> v = whole_number(item);
    if (!v || !(*v >= 0)) fail(option, " '", text, "': '", item, "' is not ", what, " >= 0");
    out.push_back(*v);
  }
  return out;
}

std::vector<int64_t> parse_layers(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : comma_separated(text)) {
    try {
      size_t used = 0;
      const long long w = std::stoll(item, &used);
      if (used != item.size() || w < 1) throw std::invalid_argument(item);
      out.push_back(w);
    } catch (const std::exception&) {
      fail("--layers: '", item, "' is not a positive width");
    }
  }
  if (out.size() < 2) fail("--layers needs at least two widths, e.g. 784,800,800,10");
  return out;
}

// "1+3": children numbered from 1, for a noise annotation or a penalty term that only
// some children carry.
std::vector<int64_t> parse_children(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, '+');) {
    char* end = nullptr;
    const long long k = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || k < 1) {
      fail(option, ": '", item, "' in '", text, "' is not a child (children are numbered from 1: 1+2)");
    }
    out.push_back(k);
  }
  return out;
}

// TEXT@CHILDREN -> TEXT, and CHILDREN (parse_children) into *children; TEXT alone leaves it empty.
std::string strip_children(const std::string& text, const std::string& option, std::vector<int64_t>* children) {
  const size_t at = text.rfind('@');
  if (at == std::string::npos) return text;
  *children = parse_children(text.substr(at + 1), option + " '" + text + "'");
  return text.substr(0, at);
}

// NODE:KIND:LAMBDA[:ROWS[:FLAGS]][@CHILDREN], FLAGS a comma-separated list of fixed,
// unscheduled, a pairing (child-child or parent-child) for this term alone and NAME=VALUE
// for the kind's parameters (threshold=0.95), CHILDREN the children it taps (1+2;
// default every child)
PenaltyTerm parse_penalty(const std::string& option_text) {
  PenaltyTerm t;
  const std::string text = strip_children(option_text, "--penalty", &t.children);
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ':')) parts.push_back(item);
  if (parts.size() < 3 || parts.size() > 5) {
    fail("--penalty '", text,
         "': expected NODE:KIND:LAMBDA[:ROWS[:fixed,unscheduled,child-child|parent-child,NAME=NUMBER]][@CHILDREN]");
  }
  t.node = parts[0];
  t.kind = parts[1];
  try {
    t.lambda = std::stod(parts[2]);
  } catch (const std::exception&) {
    fail("--penalty '", text, "': '", parts[2], "' is not a number");
  }
  if (parts.size() >= 4) t.rows = parts[3];
  if (parts.size() == 5) {
    std::stringstream flags(parts[4]);
    for (std::string flag; std::getline(flags, flag, ',');) {
      if (const size_t eq = flag.find('='); eq != std::string::npos) {
        const std::optional<double> value = whole_number(flag.substr(eq + 1));
        if (!value) fail("--penalty '", text, "': '", flag, "' is not NAME=NUMBER");
        t.params[flag.substr(0, eq)] = *value;
      } else if (flag == "fixed") {
        t.fixed_target = true;
      } else if (flag == "unscheduled") {
        t.scheduled = false;
      } else if (flag == "child-child" || flag == "parent-child") {
        t.pairing = flag;
      } else {
        fail("--penalty '", text, "': the fifth part takes 'fixed' (a fixed target), 'unscheduled' (λ stages do "
             "not scale it), 'child-child' or 'parent-child' (this term's pairing) and NAME=NUMBER (a parameter of "
             "the kind), got '", flag, "'");
      }
    }
  }
  return t;
}

// --average-weights D [--average-params REGEX]: moving averages of the weights read at
// inference alone: no child reads them, and the running statistics stay the clean
// pass's (eval.recalibrate_statistics refits them).
void add_weight_averages_option(const Args& args, Graph& g) {
  if (!args.option("average-weights")) {
    if (args.option("average-params")) fail("--average-params needs --average-weights");
    return;
  }
  add_weight_averages(g, args.option_double("average-weights", 0.999, AttrRange::from_below(0, 1)),
                      args.option("average-params").value_or(".*"));
}

// Every --penalty of the command, each naming a node of `g`.
void add_penalty_options(const Args& args, const Graph& g, PseudoEnsembleSpec& pe) {
  for (const std::string& p : args.all("penalty")) {
    pe.penalties.push_back(parse_penalty(p));
    if (!g.find(pe.penalties.back().node)) {
      fail("--penalty: the model has no node named '", pe.penalties.back().node, "'");
    }
  }
}

// NODE:KIND[:NAME=VALUE,...][@CHILDREN], CHILDREN the children that apply it (1+2;
// default every child)
void add_noise_option(Graph& g, const std::string& option_text) {
  std::vector<int64_t> children;
  const std::string text = strip_children(option_text, "--noise", &children);
  const size_t first = text.find(':');
  if (first == std::string::npos) fail("--noise '", text, "': expected NODE:KIND[:NAME=VALUE,...][@CHILDREN]");
  const size_t second = text.find(':', first + 1);
  const std::string node = text.substr(0, first);
  const std::string kind = text.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
  const auto v = g.find(node);
  if (!v) fail("--noise '", text, "': the model has no node named '", node, "'");
  Attributes params;
  if (second != std::string::npos) {
    std::stringstream in(text.substr(second + 1));
    std::string item;
    while (std::getline(in, item, ',')) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos) fail("--noise '", text, "': '", item, "' is not NAME=VALUE");
      const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
      if (const std::optional<double> number = whole_number(value)) {
        if (value.find_first_of(".eE") == std::string::npos) {
          params.set(name, static_cast<int64_t>(*number));
        } else {
          params.set(name, *number);
        }
      } else {
        params.set(name, value);
      }
    }
  }
  add_noise(g, *v, kind, params, children);
}

// --weight-std: one standard deviation for every weight matrix (0.01), one per matrix
// (0.05,0.04,0.1), or "he", sqrt(2 / fan-in) for each.
void set_weight_std(const std::string& text, MlpSpec& spec) {
  if (text == "he") {
    spec.layer_weight_std.clear();
    for (size_t i = 0; i + 1 < spec.layers.size(); ++i) {
      spec.layer_weight_std.push_back(std::sqrt(2.0 / static_cast<double>(spec.layers[i])));
    }
    return;
  }
  const std::vector<double> values = non_negative_list(text, "--weight-std", "a standard deviation");
  if (values.size() == 1) {
    spec.weight_std = values[0];
  } else if (values.size() + 1 != spec.layers.size()) {
    fail("--weight-std '", text, "': ", values.size(), " values for ", spec.layers.size() - 1,
         " weight matrices (give one, one per matrix, or 'he')");
  } else {
    spec.layer_weight_std = values;
  }
}

// pens new's output: the model file in canonical form, to --output (atomically) or stdout.
int write_new_model(const Model& model, ValueStorage storage, const Args& args) {
  const std::string text = write_model(model, storage, "").json;
  if (auto out = args.option("output")) {
    write_file_atomically(*out, text);
    std::cerr << "wrote " << *out << "\n";
  } else {
    std::cout << text;
  }
  return 0;
}

// pens new ctn: the compact tensor network over sentiment trees.
int new_ctn(const Args& args) {
  CtnSpec spec;
  if (auto dir = args.option("sst")) {
    const VocabularyPolicy policy = vocabulary_policy(args);
    spec.vocabulary = Vocabulary::from_trees(read_trees(*dir + "/train.txt"), policy).size();
  }
  spec.vocabulary = args.option_int("vocabulary", spec.vocabulary, 1, kMaxCount);
  if (spec.vocabulary < 1) fail("pens new ctn: give --vocabulary N or --sst DIR (its training words size E)");
  spec.dim = args.option_int("dim", spec.dim, 1, int64_t{1} << 16);
  spec.classes = args.option_int("classes", spec.classes, 2, 5);
  if (spec.classes != 2 && spec.classes != 5) {
    fail("--classes ", spec.classes, ": the treebank's tasks have 5 classes (fine) or 2 (binary)");
  }
  spec.tensor = args.option("tensor").value_or(spec.tensor);
  spec.fuzz = args.option_double("fuzz", 0, AttrRange::at_least(0));
  spec.subspace = args.option_int("subspace", 0, 0, int64_t{1} << 20);
  spec.activation_noise = args.option_double("activation-noise", 0, AttrRange::at_least(0));
  spec.word_std = args.option_double("word-std", spec.word_std, AttrRange::at_least(0));
  spec.init = args.option("init").value_or(spec.init);
  spec.leaf_tanh = args.flag("leaf-tanh");
  Model model = build_ctn(spec);
  if (auto d = args.option("description")) model.metadata["description"] = *d;
  // PEA on trees: penalties between children on a node of the cell (scores).
  const std::vector<std::string> penalties = args.all("penalty");
  if (!penalties.empty()) {
    if (!model.ensemble) fail("pens new ctn: --penalty needs noise (--fuzz, --subspace or --activation-noise)");
    for (const std::string& p : penalties) model.ensemble->penalties.push_back(parse_penalty(p));
    model.ensemble->children = args.option_int("children", 2, 1, kMaxChildren);
    model.ensemble->validate();
  }
  return write_new_model(model, ValueStorage::None, args);
}

// pens new ladder: a ladder network, its decoder and denoising costs a pseudo-ensemble.
int new_ladder(const Args& args) {
  LadderSpec spec;
  if (auto layers = args.option("layers")) spec.layers = parse_layers(*layers);
  spec.noise = args.option_double("noise", spec.noise, AttrRange::at_least(0));
  if (args.option("input-noise")) spec.input_noise = args.option_double("input-noise", 0, AttrRange::at_least(0));
  if (auto text = args.option("denoising")) spec.denoising = non_negative_list(*text, "--denoising", "a weight");
  spec.batch_norm_decay = args.option_double("batch-norm-decay", spec.batch_norm_decay, AttrRange::from_below(0, 1));
  if (auto s = args.option("estimate-statistics")) {
    if (*s != "clean" && *s != "child") fail("--estimate-statistics: clean or child, got '", *s, "'");
    spec.clean_estimate_statistics = *s == "clean";
  }
  Model model = build_ladder(spec);
  // The rows the denoising costs cover: every row by default, or the unlabeled ones
  // alone as in the ladder paper's code (and so the decoder, which nothing else reads),
  // which --statistics-by-part implies as that code normalises the two parts apart.
  const bool by_part = args.flag("statistics-by-part");
  const std::string cost_rows = args.option("denoising-rows").value_or(by_part ? "unlabeled" : "all");
  if (cost_rows != "all" && cost_rows != "unlabeled") fail("--denoising-rows: all or unlabeled, got '", cost_rows, "'");
  model.ensemble->statistics_by_part = by_part;
  for (PenaltyTerm& t : model.ensemble->penalties) t.rows = cost_rows;
  // Children of two kinds: the ladder's corruption and denoising costs in some children
  // only, so that the others can carry other noise (VAT's adversarial child).
  if (auto listed = args.option("ladder-children")) {
    const std::vector<int64_t> children = parse_children(*listed, "--ladder-children");
    for (NodeId v : model.graph.nodes()) {
      for (NoiseAnnotation& a : model.graph.node(v).noise) a.children = children;
    }
    for (PenaltyTerm& t : model.ensemble->penalties) t.children = children;
  }
  // Combinations: more noise (e.g. VAT's adversarial perturbation on the input), more
  // corrupted children, more penalties beside the denoising costs (e.g. PEA's agreement
  // between the children, pairing child-child).
  for (const std::string& n : args.all("noise-on")) add_noise_option(model.graph, n);
  PseudoEnsembleSpec& pe = *model.ensemble;
  pe.children = args.option_int("children", pe.children, 1, kMaxChildren);
  pe.loss_on = args.option("loss-on").value_or(pe.loss_on);
  if (auto b = args.option("batch-statistics")) pe.batch_statistics = comma_separated(*b);
  add_penalty_options(args, model.graph, pe);
  pe.validate();
  // Averaged weights for evaluation only: child 1 is the corrupted encoder, not a teacher.
  add_weight_averages_option(args, model.graph);
  if (auto d = args.option("description")) model.metadata["description"] = *d;
  return write_new_model(model, ValueStorage::None, args);
}

}  // namespace

int run_new(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "ctn") {
    const Args args(std::vector<std::string>(argv.begin() + 1, argv.end()), {"leaf-tanh", "lowercase"},
                    {"vocabulary", "sst", "min-count", "dim", "classes", "tensor", "fuzz", "subspace",
                     "activation-noise", "word-std", "init", "penalty", "children", "description", "output"});
    if (!args.positional().empty()) fail("pens new ctn takes options only");
    return new_ctn(args);
  }
  if (!argv.empty() && argv[0] == "ladder") {
    const Args args(std::vector<std::string>(argv.begin() + 1, argv.end()), {"statistics-by-part"},
                    {"layers", "noise", "input-noise", "denoising", "denoising-rows", "batch-norm-decay",
                     "estimate-statistics", "average-weights", "average-params", "noise-on", "ladder-children",
                     "children", "loss-on", "batch-statistics", "penalty", "description", "output"});
    if (!args.positional().empty()) fail("pens new ladder takes options only");
    return new_ladder(args);
  }
  const Args args(argv, {"batch-norm", "batch-norm-output", "statistics-by-part"},
                  {"batch-norm-decay", "teacher", "average-weights", "average-params", "layers", "mask-input",
                   "mask-hidden", "gaussian-input", "gaussian-bias", "center", "max-norm", "weight-std", "hidden-bias",
                   "output-bias", "loss", "penalty", "children", "pairing", "loss-on", "batch-statistics", "smoothing",
                   "output", "description", "values", "noise"});
  const std::string& kind = args.one_positional("a model kind (mlp, ctn, ladder)");
  if (kind != "mlp") fail("unknown model kind '", kind, "' (mlp, ctn, ladder)");
  MlpSpec spec;
  spec.layers = parse_layers(args.option("layers").value_or("784,800,800,10"));
  const AttrRange probability = AttrRange::from_below(0, 1), non_negative = AttrRange::at_least(0);
  spec.mask_input = args.option_double("mask-input", 0, probability);
  spec.mask_hidden = args.option_double("mask-hidden", 0, probability);
  spec.gaussian_input = args.option_double("gaussian-input", 0, non_negative);
  spec.gaussian_bias = args.option_double("gaussian-bias", 0, non_negative);
  if (auto dir = args.option("center")) spec.input_mean = feature_means(load_mnist(*dir, "train"));
  spec.max_norm = args.option_double("max-norm", 0, non_negative);
  if (auto w = args.option("weight-std")) set_weight_std(*w, spec);
  spec.hidden_bias = args.option_double("hidden-bias", spec.hidden_bias, AttrRange{});
  spec.output_bias = args.option_double("output-bias", spec.output_bias, AttrRange{});
  spec.loss = args.option("loss").value_or(spec.loss);
  spec.batch_norm = args.flag("batch-norm");
  spec.batch_norm_output = args.flag("batch-norm-output");
  spec.batch_norm_decay = args.option_double("batch-norm-decay", spec.batch_norm_decay, AttrRange::from_below(0, 1));
  if (args.option("batch-norm-decay") && !spec.batch_norm) fail("--batch-norm-decay needs --batch-norm");
  if (spec.batch_norm_output && !spec.batch_norm) fail("--batch-norm-output needs --batch-norm");
  Model model;
  model.graph = build_mlp(spec);
  for (const std::string& n : args.all("noise")) add_noise_option(model.graph, n);
  const bool teacher = args.option("teacher").has_value();
  if (teacher && args.option("average-weights")) {
    fail("--teacher and --average-weights both average the weights: --teacher for a mean teacher (child 1 reads "
         "the averages), --average-weights for evaluation alone");
  }
  if (teacher) add_teacher(model.graph, args.option_double("teacher", 0.999, AttrRange::from_below(0, 1)));
  add_weight_averages_option(args, model.graph);
  if (auto d = args.option("description")) model.metadata["description"] = *d;
  if (!args.all("penalty").empty() || args.option("children")) {
    PseudoEnsembleSpec pe;
    add_penalty_options(args, model.graph, pe);
    pe.children = args.option_int("children", pe.children, 1, kMaxChildren);
    pe.pairing = args.option("pairing").value_or(pe.pairing);
    pe.loss_on = args.option("loss-on").value_or(pe.loss_on);
    if (auto b = args.option("batch-statistics")) pe.batch_statistics = comma_separated(*b);
    pe.statistics_by_part = args.flag("statistics-by-part");
    pe.smoothing = args.option_double("smoothing", pe.smoothing, AttrRange::from_below(0, 1));
    pe.teacher = teacher ? 1 : 0;
    pe.validate();
    model.ensemble = pe;
  }
  if (teacher && !model.ensemble) fail("--teacher needs a pseudo-ensemble (--children, --penalty): child 1 is the teacher");
  if (!model.ensemble && (args.option("batch-statistics") || args.flag("statistics-by-part"))) {
    fail("--batch-statistics and --statistics-by-part need a pseudo-ensemble (--children, --penalty): they say "
         "which batch's statistics the children normalise with");
  }
  ValueStorage storage = ValueStorage::None;
  if (args.option("values")) {
    model.values = std::make_shared<ParamStore<float>>(model.graph);
    model.values->initialize(model.graph, static_cast<uint64_t>(args.option_int("values", 0, 0, kMaxSeed)));
    storage = ValueStorage::Inline;
  }
  return write_new_model(model, storage, args);
}

int run_average(const std::vector<std::string>& argv) {
  const Args args(argv, {}, {"decay", "params", "output"});
  const std::string& path = args.one_positional("a model file");
  if (!args.option("decay")) fail("pens average needs --decay D, the average's decay per step (e.g. 0.999)");
  const double decay = args.option_double("decay", 0, AttrRange::from_below(0, 1));
  const std::string params = args.option("params").value_or(".*");
  Model model = load_model(path);
  const auto output = args.option("output");
  if (model.values && !output) fail(path, " holds trained values: name the file to write with --output");
  const std::vector<std::string> averaged = add_weight_averages(model.graph, decay, params);
  if (model.values) {
    // The trained values carry over by name; each average starts at its source's value,
    // as it would where training draws the values.
    auto values = std::make_shared<ParamStore<float>>(model.graph);
    values->start_averages_at_sources(model.graph, copy_shared_values(*values, *model.values, path));
    model.values = std::move(values);
  }
  std::string names;
  for (size_t i = 0; i < averaged.size(); ++i) names += (i ? ", " : "") + averaged[i];
  const std::string note = cat(std::filesystem::path(path).filename().string(), " with a moving average (decay ", decay,
                               ") of each trained parameter (", names, "), read at inference");
  const std::string before = model.metadata.value("description", "");
  model.metadata["description"] = before.empty() ? note : note + ": " + before;
  if (!output) {
    std::cout << write_model(model, ValueStorage::None, "").json;
    return 0;
  }
  save_model(model, *output, model.values ? ValueStorage::Auto : ValueStorage::None);
  std::cerr << "wrote " << *output << ": averages of " << averaged.size() << " parameters, decay " << decay << "\n";
  return 0;
}

}  // namespace pens::cli
