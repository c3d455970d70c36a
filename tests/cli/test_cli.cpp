// The pens command-line tool, run as a user runs it.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "pens/models/synthetic.h"
#include "pens/ops/registry.h"
#include "pens/serialization/model_file.h"
#include "tests/support/npy.h"
#include "tests/support/paths.h"
#include "tests/support/run.h"
#include "tests/support/temp_dir.h"

namespace test_cli {

namespace {
using pens::testing::cli;
using pens::testing::Run;

Run pens_cli(const std::string& args) { return pens::testing::run_command(cli() + " " + args); }

// Reads the two counts of the first line of `out` that begins as `format` says, all of it
// (two %d; e.g. "gradcheck: %d of %d ops passed"); false when no line does.
bool scan_two_counts(const std::string& out, const std::string& format, int& a, int& b) {
  const std::string whole = format + "%n";  // %n: how far the whole format matched
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    int end = 0;
    if (std::sscanf(line.c_str(), whole.c_str(), &a, &b, &end) == 2 && end > 0) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("pens ops --json lists every registered op as valid JSON") {
  const Run r = pens_cli("ops --json");
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  std::set<std::string> listed;
  for (const auto& op : doc) {
    listed.insert(op.at("name").get<std::string>());
    CHECK(op.contains("arity"));
    CHECK(op.contains("stochastic"));
    CHECK(op.at("inputs").is_array());
  }
  // The tool lists pens' own ops; this process may also hold the ops the tests register
  // from outside ("test_*", and examples/extending's softplus).
  std::set<std::string> registered;
  for (const pens::OpDef* op : pens::OpRegistry::global().all()) {
    if (op->name.rfind("test_", 0) != 0 && op->name != "softplus") registered.insert(op->name);
  }
  CHECK(listed == registered);
  CHECK(doc.size() >= 25);
}

TEST_CASE("pens gradcheck --all-ops passes and prints one line per op") {
  const Run r = pens_cli("gradcheck --all-ops");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("matmul            max rel error") != std::string::npos);
  CHECK(r.out.find("dropout           max rel error") != std::string::npos);
  CHECK(r.out.find("FAIL") == std::string::npos);
  int passed = 0, ops = 0;
  REQUIRE(scan_two_counts(r.out, "gradcheck: %d of %d ops passed", passed, ops));
  CHECK(passed == ops);
  CHECK(passed >= 25);
}

TEST_CASE("every subcommand has --help, and mistakes give a message and a non-zero exit") {
  for (const char* cmd : {"ops", "kinds", "gradcheck", "inspect", "fmt", "new", "train", "config", "pretrain", "eval"}) {
    const Run help = pens_cli(std::string(cmd) + " --help");
    CHECK(help.status == 0);
    CHECK(help.out.rfind("usage: pens ", 0) == 0);
  }
  CHECK(pens_cli("--help").status == 0);
  const Run unknown = pens_cli("frobnicate");
  CHECK(unknown.status == 2);
  CHECK(unknown.out.find("unknown command 'frobnicate'") != std::string::npos);
  const Run bad_option = pens_cli("ops --jsn");
  CHECK(bad_option.status == 1);
  CHECK(bad_option.out.find("unknown option --jsn") != std::string::npos);
  const Run bad_op = pens_cli("gradcheck --op relux");
  CHECK(bad_op.status == 1);
  CHECK(bad_op.out.find("unknown op 'relux'") != std::string::npos);
}

// One line, exit status 1, and the text it must hold.
void check_refused(const Run& r, std::initializer_list<std::string> parts) {
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  for (const std::string& part : parts) CHECK(r.out.find(part) != std::string::npos);
}

TEST_CASE("a misspelt name is answered with the nearest ones, by kind of name") {
  pens::testing::TempDir dir;
  // Commands and options.
  CHECK(pens_cli("trian x").out.find("unknown command 'trian' (did you mean 'train'?)") != std::string::npos);
  check_refused(pens_cli("ops --jsn"), {"unknown option --jsn (did you mean '--json'? See --help.)"});
  // Ops.
  check_refused(pens_cli("gradcheck --op relux"), {"unknown op 'relux' (did you mean 'relu'? `pens ops` lists them)"});
  // A model file's fields, nodes, noise kinds and attributes.
  nlohmann::json model =
      nlohmann::json::parse(std::ifstream(pens::testing::source_dir() + "/examples/models/mlp-pea.json"));
  const auto refused_model = [&](const nlohmann::json& doc) {
    std::ofstream(dir / "m.json") << doc.dump();
    return pens_cli("fmt " + (dir / "m.json"));
  };
  nlohmann::json doc = model;
  doc["outputs"] = {"logit"};
  check_refused(refused_model(doc), {"/outputs/0: no node named 'logit' (did you mean 'logits'?)"});
  doc = model;
  doc["pseudo_ensemble"]["childrn"] = doc["pseudo_ensemble"]["children"];
  doc["pseudo_ensemble"].erase("children");
  check_refused(refused_model(doc), {"unknown field 'childrn' (did you mean 'children'? expected one of: "});
  doc = model;
  doc["inputs"][0]["noise"][0]["kind"] = "gausian";
  check_refused(refused_model(doc), {"unknown noise kind 'gausian' (did you mean 'gaussian'? registered: "});
  doc["inputs"][0]["noise"][0]["kind"] = "dropout";
  check_refused(refused_model(doc), {"unknown noise kind 'dropout'", "dropout is the kind 'mask'"});
  doc = model;
  doc["inputs"][0]["noise"][0]["std"] = 0.1;
  check_refused(refused_model(doc), {"unknown attribute 'std' (takes: "});
  // A config's fields, its optimizer's settings and its optimizer kind.
  std::ofstream(dir / "c.json") << R"({"model": "m.json", "evaluaton": {}})";
  check_refused(pens_cli("train " + (dir / "c.json")), {"unknown field evaluaton (did you mean 'eval'? choices: "});
  std::ofstream(dir / "c.json") << R"({"model": "m.json", "optimizer": {"kind": "sgd", "learning_rte": 0.1}})";
  check_refused(pens_cli("train " + (dir / "c.json")),
                {"unknown field optimizer.learning_rte (did you mean 'learning_rate'? fields of optimizer sgd: "});
  std::ofstream(dir / "c.json") << R"({"model": "m.json", "optimizer": {"kind": "adagard"}})";
  check_refused(pens_cli("train " + (dir / "c.json")),
                {"optimizer.kind: unknown optimizer 'adagard' (did you mean 'adagrad'? registered: "});
}

TEST_CASE("pens train on a data set that is not MNIST: a config naming two .npy files, then pens eval") {
  pens::testing::TempDir dir;
  // The teacher task: 12 features, 4 classes; the test set drawn apart.
  const pens::Dataset train = pens::make_teacher_task(2000, 12, 4, 3);
  const pens::Dataset test = pens::make_teacher_task(500, 12, 4, 4);
  pens::testing::write_npy_floats(dir / "x.npy", {train.size, 12}, train.x);
  pens::testing::write_npy_labels(dir / "y.npy", std::vector<int64_t>(train.y.begin(), train.y.end()));
  pens::testing::write_npy_floats(dir / "tx.npy", {test.size, 12}, test.x);
  pens::testing::write_npy_labels(dir / "ty.npy", std::vector<int64_t>(test.y.begin(), test.y.end()));
  REQUIRE(pens_cli("new mlp --layers 12,32,4 --mask-hidden 0.3 --penalty logits:kl:1:all --weight-std 0.3 --output " +
                   (dir / "m.json")).status == 0);
  const std::string config = R"({"model": "m.json",
    "data": {"source": "npy", "dir": ".", "test_x": "tx.npy", "test_y": "ty.npy", "labeled": 100, "validation": 200},
    "batch": {"labeled": 20, "unlabeled": 40},
    "optimizer": {"learning_rate": 0.1, "warmup_epochs": 0},
    "run": {"epochs": 6, "steps_per_epoch": 50, "threads": 1}})";
  std::ofstream(dir / "c.json") << config;
  const Run trained = pens_cli("train " + (dir / "c.json") + " --out " + (dir / "run"));
  INFO(trained.out);
  REQUIRE(trained.status == 0);
  CHECK(trained.out.find("split 1: 100 labeled, 1700 unlabeled, 200 validation, 500 test") != std::string::npos);
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(dir / "run/summary.json"));
  MESSAGE("PEA on 100 labels of the teacher task: test error ", summary["test_error"].get<double>());
  // Four classes: chance is 3/4 wrong.
  CHECK(summary["test_error"].get<double>() < 0.5);
  CHECK(summary["config"]["data"]["source"] == "npy");
  const Run eval = pens_cli("eval " + (dir / "run"));
  INFO(eval.out);
  CHECK(eval.status == 0);
  CHECK(eval.out.find("test (500 examples): error ") != std::string::npos);

  // Faults of the data name the file and the fault.
  std::ofstream(dir / "y.npy", std::ios::trunc) << "not numpy";
  check_refused(pens_cli("train " + (dir / "c.json") + " --out " + (dir / "run2")),
                {dir / "y.npy", "not a .npy file"});
  pens::testing::write_npy_labels(dir / "y.npy", std::vector<int64_t>(7, 0));
  check_refused(pens_cli("train " + (dir / "c.json") + " --out " + (dir / "run2")),
                {"y.npy holds 7 labels but", "x.npy holds 2000 examples"});
  std::ofstream(dir / "c.json", std::ios::trunc) << R"({"model": "m.json", "data": {"source": "npz"}})";
  check_refused(pens_cli("train " + (dir / "c.json")), {"data.source: unknown data source 'npz' (did you mean 'npy'?"});
  std::ofstream(dir / "c.json", std::ios::trunc) << R"({"model": "m.json", "data": {"source": "npy", "text_x": "a"}})";
  check_refused(pens_cli("train " + (dir / "c.json")), {"unknown field data.text_x (did you mean 'test_x'"});
}

TEST_CASE("a path that cannot be used is the user's mistake: one line, exit status 1") {
  pens::testing::TempDir dir;
  const std::string trees = "(3 (2 the) (4 (4 good) (2 film)))\n(1 (2 the) (0 (0 bad) (2 plot)))\n";
  for (const char* part : {"train.txt", "dev.txt", "test.txt"}) std::ofstream(dir / part) << trees;
  REQUIRE(pens_cli("new ctn --sst " + dir.path() + " --dim 4 --classes 2 --output " + (dir / "ctn.json")).status == 0);
  std::ofstream(dir / "config.json") << R"({"model": "ctn.json", "task": "binary", "data": {"dir": ")" << dir.path()
                                     << R"("}, "run": {"epochs": 1}})";
  std::ofstream(dir / "a-file") << "not a folder";
  const std::string train = "train " + (dir / "config.json") + " --out ";
  check_refused(pens_cli(train + (dir / "a-file")), {dir / "a-file", "Not a directory"});
  check_refused(pens_cli(train + (dir / "a-file/run")), {dir / "a-file/run", "Not a directory"});
  check_refused(pens_cli(train + "/proc/pens-run"), {"/proc/pens-run", "No such file or directory"});
  std::filesystem::create_symlink(dir / "loop-b", dir / "loop-a");
  std::filesystem::create_symlink(dir / "loop-a", dir / "loop-b");
  check_refused(pens_cli(train + (dir / "loop-a/run")), {dir / "loop-a", "Too many levels of symbolic links"});
  // A model of the other task: the config and its model named.
  std::ofstream(dir / "fine.json") << R"({"model": "ctn.json", "task": "fine", "data": {"dir": ")" << dir.path()
                                   << R"("}, "run": {"epochs": 1}})";
  check_refused(pens_cli("train " + (dir / "fine.json") + " --out " + (dir / "fine-run")),
                {dir / "fine.json" + ": model " + (dir / "ctn.json") + ": the model scores 2 classes but the fine task has 5"});
  check_refused(pens_cli("new ctn --vocabulary 10 --classes 3"), {"--classes 3: the treebank's tasks have 5 classes"});
  // And the same config where it can write: one thread is "1 thread".
  const Run ran = pens_cli(train + (dir / "run") + " --threads 1");
  CHECK(ran.status == 0);
  CHECK(ran.out.find(", 1 thread; writing " + (dir / "run")) != std::string::npos);
}

TEST_CASE("noise that no child draws: pens fmt warns, pens train refuses, naming the node") {
  pens::testing::TempDir dir;
  const std::string trees = "(3 (2 the) (4 (4 good) (2 film)))\n(1 (2 the) (0 (0 bad) (2 plot)))\n";
  for (const char* part : {"train.txt", "dev.txt", "test.txt"}) std::ofstream(dir / part) << trees;
  REQUIRE(pens_cli("new ctn --sst " + dir.path() + " --dim 4 --classes 2 --fuzz 0.02 --output " + (dir / "ctn.json"))
              .status == 0);
  nlohmann::json model = nlohmann::json::parse(std::ifstream(dir / "ctn.json"));
  REQUIRE(model.contains("pseudo_ensemble"));
  model.erase("pseudo_ensemble");  // the section a noisy model needs, left out
  std::ofstream(dir / "clean.json") << model.dump();
  // Its standard error alone: the canonical form still goes to standard output.
  const Run formatted = pens::testing::run_command("{ " + cli() + " fmt " + (dir / "clean.json") + " 2>&1 >/dev/null; }");
  CHECK(formatted.status == 0);
  CHECK(formatted.out.find("pens fmt: warning: " + (dir / "clean.json") + ": node 'E' carries fuzz noise, but the "
                           "model has no pseudo_ensemble section") != std::string::npos);
  std::ofstream(dir / "config.json") << R"({"model": "clean.json", "task": "binary", "data": {"dir": ")" << dir.path()
                                     << R"("}, "run": {"epochs": 1}})";
  check_refused(pens_cli("train " + (dir / "config.json") + " --out " + (dir / "run")),
                {"clean.json: node 'E' carries fuzz noise", "so no child draws it"});
}

TEST_CASE("nodes nothing uses are warned about; a size past the memory limit is refused where it is declared") {
  pens::testing::TempDir dir;
  nlohmann::json model =
      nlohmann::json::parse(std::ifstream(pens::testing::source_dir() + "/tests/data/models/tiny-ensemble.json"));
  model["nodes"].push_back({{"name", "spare"}, {"op", "relu"}, {"inputs", {"h1"}}});
  std::ofstream(dir / "unread.json") << model.dump();
  const Run warned = pens::testing::run_command("{ " + cli() + " fmt " + (dir / "unread.json") + " 2>&1 >/dev/null; }");
  CHECK(warned.status == 0);
  CHECK(warned.out == "pens fmt: warning: " + (dir / "unread.json") + ": nothing uses 'spare' (not an output, a loss, "
                      "a penalty's node, an average or a tree port, nor feeding one)\n");
  model["nodes"].back() = {{"name", "huge"}, {"op", "constant"}, {"attrs", {{"shape", {1000000, 1000000}}, {"value", 0.0}}}};
  std::ofstream(dir / "huge.json") << model.dump();
  check_refused(pens_cli("fmt " + (dir / "huge.json")),
                {"node 'huge' holds [1000000,1000000]: 3725.3 GiB, more than pens' memory limit"});
  // Nothing to say about a model whose every node is used.
  const Run quiet = pens::testing::run_command(
      "{ " + cli() + " fmt " + pens::testing::source_dir() + "/tests/data/models/tiny-ensemble.json 2>&1 >/dev/null; }");
  CHECK(quiet.out.empty());
}

TEST_CASE("pens kinds lists the noise kinds, penalty kinds and optimizers, in text and JSON") {
  const Run r = pens_cli("kinds --json");
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  const auto names = [&](const char* what) {
    std::set<std::string> out;
    for (const auto& k : doc.at(what)) out.insert(k.at("name").get<std::string>());
    return out;
  };
  CHECK(names("noise") == std::set<std::string>{"adversarial", "fuzz", "gaussian", "mask", "subspace"});
  CHECK(names("penalty") ==
        std::set<std::string>{"activation_l2", "direction", "entropy", "kl", "l2", "pseudo_label", "softmax_l2", "tanh",
                              "target_entropy", "xent"});
  CHECK(names("optimizer") == std::set<std::string>{"adagrad", "adam", "sgd"});
  for (const auto& k : doc.at("penalty")) {
    const std::string name = k.at("name");
    CHECK(k.at("symmetrised") == (name == "kl" || name == "xent" || name == "entropy" || name == "activation_l2"));
    CHECK(k.at("params") == (name == "pseudo_label" ? nlohmann::json{{"threshold", 0.95}} : nlohmann::json::object()));
  }
  const Run text = pens_cli("kinds");
  CHECK(text.status == 0);
  CHECK(text.out.find("epsilon=1e-08, initial_accumulator=0") != std::string::npos);
  CHECK(text.out.find("V^k: KL(softmax(a) || softmax(b))") != std::string::npos);
  CHECK(text.out.find("threshold=0.95") != std::string::npos);
}

namespace {
std::string example(const std::string& name) { return pens::testing::source_dir() + "/examples/models/" + name; }
}  // namespace

TEST_CASE("pens inspect: 2 children, 3 taps, shared parameters, in JSON, text and DOT") {
  const Run r = pens_cli("inspect " + example("mlp-pea.json") + " --children 2 --format json");
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("children") == 2);
  CHECK(doc.at("taps").size() == 3);
  CHECK(doc.at("parameter_nodes") == 6);  // the parent's six: W1, b1, W2, b2, W3, b3
  std::set<std::string> roles;
  int parameters = 0;
  for (const auto& n : doc.at("nodes")) {
    roles.insert(n.at("role").get<std::string>());
    CHECK(n.contains("inputs"));
    CHECK(n.contains("noise"));
    if (n.at("op") == "parameter") {
      ++parameters;
      CHECK(n.at("role") == "parent");
    }
  }
  CHECK(parameters == 6);
  CHECK(roles == std::set<std::string>{"parent", "child:1", "child:2", "noise", "penalty"});
  const auto& tap = doc.at("taps")[0];
  CHECK(tap.at("layer") == "h1");
  CHECK(tap.at("children") == nlohmann::json::array({"c1/h1", "c2/h1"}));
  CHECK(tap.at("penalty") == "direction");
  CHECK(tap.at("pairing") == "child-child");
  CHECK(tap.at("parent").is_null());  // child-child pairs: no parent side
  CHECK(doc.at("taps")[2].at("penalty") == "tanh");
  CHECK(doc.at("taps")[2].at("lambda") == 2.0);
  // The children's layers, which share the parent's weights, each run as one product.
  CHECK(doc.at("stacked_products") == nlohmann::json::parse(R"([["c1/a1", "c2/a1"], ["c1/a2", "c2/a2"],
                                                              ["c1/logits", "c2/logits"]])"));

  const Run text = pens_cli("inspect " + example("mlp-pea.json") + " --children 2");
  CHECK(text.status == 0);
  CHECK(text.out.find("pseudo-ensemble: 2 children sharing 6 parameter nodes; 3 taps") != std::string::npos);
  CHECK(text.out.find("tap out: parent -, children c1/logits c2/logits; tanh, lambda 2") != std::string::npos);
  CHECK(text.out.find("graph: " + std::to_string(doc.at("nodes").size()) + " nodes") != std::string::npos);
  CHECK(text.out.find("stacked products (the tape runs each as one product over its nodes' rows):\n"
                      "  c1/a1 + c2/a1\n  c1/a2 + c2/a2\n  c1/logits + c2/logits\n") != std::string::npos);

  const Run dot = pens_cli("inspect " + example("mlp-pea.json") + " --children 2 --format dot");
  CHECK(dot.status == 0);
  CHECK(dot.out.find("subgraph \"cluster_child 1\"") != std::string::npos);
  CHECK(dot.out.find("subgraph \"cluster_child 2\"") != std::string::npos);
  CHECK(dot.out.find("subgraph \"cluster_penalties\"") != std::string::npos);
  size_t drawn = 0;  // lines "  n<id> [label=...": a node
  std::istringstream dot_lines(dot.out);
  for (std::string line; std::getline(dot_lines, line);) {
    int end = 0;
    std::sscanf(line.c_str(), " n%*d [label=%n", &end);
    drawn += line.starts_with(' ') && end > 0;
  }
  CHECK(drawn == doc.at("nodes").size());  // every node, once

  const Run three = pens_cli("inspect " + example("mlp-pea.json") + " --children 3 --format json");
  CHECK(nlohmann::json::parse(three.out).at("taps")[0].at("children").size() == 3);
}

TEST_CASE("pens gradcheck MODEL: every penalty kind, both pairings; a failing check exits 1") {
  for (const char* pairing : {"child-child", "parent-child"}) {
    for (const char* kind : {"kl", "xent", "tanh", "direction", "l2"}) {
      const Run r = pens_cli("gradcheck " + example("mlp-pea-small.json") + " --pairing " + pairing + " --kind " + kind);
      INFO(pairing << " " << kind << ": " << r.out);
      CHECK(r.status == 0);
      CHECK(r.out.find(": ok") != std::string::npos);
    }
  }
  // A model evaluated exactly at a ReLU kink: the analytic gradient (the subgradient 0)
  // is not the slope central differences see. The check fails and says where.
  const Run kink = pens_cli("gradcheck " + pens::testing::source_dir() + "/tests/data/models/relu-kink.json");
  CHECK(kink.status == 1);
  CHECK(kink.out.find("FAIL") != std::string::npos);
  CHECK(kink.out.find("worst entry: d target[0] / d W1[0]: analytic 0, numeric") != std::string::npos);
  // An unreachable tolerance fails too.
  const Run strict = pens_cli("gradcheck " + example("mlp-pea-small.json") + " --tolerance 1e-14");
  CHECK(strict.status == 1);
  CHECK(strict.out.find("FAIL") != std::string::npos);
  CHECK(strict.out.find("worst entry: d target[0] / d ") != std::string::npos);
}

TEST_CASE("pens gradcheck samples large models by default, says so, and refuses bad numbers") {
  const Run big = pens_cli("gradcheck " + example("mlp-pea.json") + " --threads 1");
  INFO(big.out);
  CHECK(big.status == 0);
  CHECK(big.out.find("checked: 64 per tensor; --sample all checks every one)") != std::string::npos);
  CHECK(big.out.find(": ok") != std::string::npos);
  const Run sampled = pens_cli("gradcheck " + example("mlp-pea-small.json") + " --sample 3");
  CHECK(sampled.status == 0);
  CHECK(sampled.out.find("checked: 3 per tensor") != std::string::npos);
  const Run whole = pens_cli("gradcheck " + example("mlp-pea-small.json"));
  CHECK(whole.out.find("checked") == std::string::npos);  // small models are checked whole
  // The narrow V^c model whose plain differences miss by truncation passes, and says why.
  const Run narrow = pens_cli("gradcheck " + pens::testing::source_dir() + "/tests/data/models/tanh-vc-narrow.json");
  CHECK(narrow.status == 0);
  CHECK(narrow.out.find("only after extrapolation to smaller steps") != std::string::npos);
  for (const char* bad : {"--tolerance nan", "--tolerance -1", "--step 0", "--step inf", "--sample -2", "--threads -1"}) {
    const Run r = pens_cli("gradcheck " + example("mlp-pea-small.json") + " " + bad);
    INFO(bad << ": " << r.out);
    CHECK(r.status == 1);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find(std::string(bad).substr(0, std::string(bad).find(' '))) != std::string::npos);
  }
}

TEST_CASE("options outside their domain and inputs that are not regular files: one line, exit 1") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"new mlp --mask-input 1.5", "--mask-input must be a finite number in [0, 1), got 1.5"},
      {"new mlp --gaussian-input -1", "--gaussian-input must be a finite number >= 0, got -1"},
      {"new mlp --max-norm nan", "--max-norm must be a finite number >= 0, got nan"},
      {"new mlp --hidden-bias inf", "--hidden-bias must be a finite number, got inf"},
      {"new mlp --penalty logits:kl:1 --smoothing 1", "--smoothing must be a finite number in [0, 1)"},
      {"new ctn --vocabulary 10 --fuzz -0.5", "--fuzz must be a finite number >= 0"},
      {"new ctn --vocabulary 10 --dim 0", "--dim must be an integer from 1"},
  };
  for (const auto& item : cases) {
    const auto& command = item.first;  // not bindings: doctest captures them (clang < 16)
    const auto& expected = item.second;
    const Run r = pens_cli(command);
    INFO(command << ": " << r.out);
    CHECK(r.status == 1);
    CHECK(r.out.find(expected) != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  // Sizes beyond the memory limit are refused before anything is allocated (a 784-2M-10
  // network needs 23.7 GiB for its parameters and gradients in double precision), and the limit is an
  // option of every command.
  pens::testing::TempDir models;
  REQUIRE(pens_cli("new mlp --layers 784,2000000,10 --output " + (models / "wide.json")).status == 0);
  for (const std::string limit : {" --memory-limit 2", " --memory-limit=2"}) {
    const Run r = pens_cli("gradcheck " + (models / "wide.json") + limit);
    INFO(r.out);
    CHECK(r.status == 1);
    CHECK(r.out.find("the parameters (4 tensors, values and gradients): 23.7 GiB needed, more than the memory limit "
                     "of 2.0 GiB (set by the caller); raise it with --memory-limit GB") != std::string::npos);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  for (const char* bad : {"--memory-limit 0", "--memory-limit nan", "--memory-limit 2x", "--memory-limit"}) {
    const Run r = pens_cli(std::string("inspect ") + (models / "wide.json") + " " + bad);
    INFO(bad << ": " << r.out);
    CHECK(r.status == 1);
    const bool named = r.out.find("is not a memory size in GiB") != std::string::npos ||
                       r.out.find("--memory-limit needs a value") != std::string::npos;
    CHECK(named);
  }
  // A FIFO is refused at once (opening it for reading would wait for a writer forever).
  pens::testing::TempDir dir;
  REQUIRE(::mkfifo((dir / "pipe.json").c_str(), 0600) == 0);
  for (const char* command : {"fmt ", "train ", "inspect "}) {
    // `timeout`: were the FIFO opened for reading, the test would fail instead of hanging.
    const Run r = pens::testing::run_command("timeout 20 " + cli() + " " + command + (dir / "pipe.json"));
    INFO(command << ": " << r.out);
    CHECK(r.status == 1);
    CHECK(r.out.find("pipe.json: not a regular file") != std::string::npos);
  }
}

// The corpus of bad inputs in tests/data/bad-inputs (models, configs, IDX files, trees,
// options; cases.tsv lists them), run by the script users run on their own corpora.
TEST_CASE("every case of the bad-input corpus is refused with one line naming the problem") {
  const Run r =
      pens::testing::run_command("PENS=" + cli() + " " + pens::testing::source_dir() + "/scripts/bad-inputs.sh");
  INFO(r.out);
  CHECK(r.status == 0);
  int cases = 0, refused_well = 0;
  REQUIRE(scan_two_counts(r.out, "bad inputs: %d cases, %d refused well", cases, refused_well));
  CHECK(cases >= 175);
  CHECK(cases == refused_well);
}

TEST_CASE("pens fmt prints example models unchanged and rejects garbage with one line") {
  for (const char* name : {"mlp-pea.json", "mlp-pea-small.json"}) {
    const Run r = pens_cli("fmt " + example(name));
    CHECK(r.status == 0);
    std::ifstream in(example(name));
    const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(r.out == original);
    CHECK(pens_cli("fmt --check " + example(name)).status == 0);
  }
  // Garbage of several kinds: every one a single line and exit status 1, never a signal.
  pens::testing::TempDir dir;
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary += static_cast<char>((i * 7919 + 13) % 256);
  const std::vector<std::pair<std::string, const char*>> garbage = {
      {binary, ""}, {"{\"format_version\": 1", "not valid JSON"}, {"[[[[[[[[", "not valid JSON"},
      {"{}", "missing field 'format_version'"}, {"", "empty, expected a JSON document"}};
  for (const auto& [bytes, expected] : garbage) {
    {
      std::ofstream out(dir / "garbage.json", std::ios::binary);
      out << bytes;
    }
    const Run r = pens_cli("fmt " + (dir / "garbage.json"));
    INFO(r.out);
    CHECK(r.status == 1);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.rfind("pens fmt: error: ", 0) == 0);
    CHECK(r.out.find(expected) != std::string::npos);
  }
  CHECK(pens_cli("fmt /nonexistent.json").status == 1);
}

TEST_CASE("pens fmt --check takes several files and names each one not in canonical form") {
  pens::testing::TempDir dir;
  std::ifstream in(example("mlp-pea-small.json"));
  const std::string canonical((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "spaced.json") << nlohmann::json::parse(canonical).dump(4);
  const std::string spaced = dir / "spaced.json";
  CHECK(pens_cli("fmt --check " + example("mlp-pea.json") + " " + example("mlp-pea-small.json")).status == 0);
  const Run r = pens_cli("fmt --check " + example("mlp-pea.json") + " " + spaced + " " + example("mlp-pea-small.json"));
  CHECK(r.status == 1);
  CHECK(r.out == spaced + ": not in canonical form (`pens fmt " + spaced + "` prints it)\n");
  // Printing the canonical form is for one file; a file that cannot be read stops the check.
  const Run two = pens_cli("fmt " + example("mlp-pea.json") + " " + spaced);
  CHECK(two.status == 1);
  CHECK(two.out.find("unexpected argument") != std::string::npos);
  const Run missing = pens_cli("fmt --check " + spaced + " /nonexistent.json");
  CHECK(missing.status == 1);
  CHECK(missing.out.find("/nonexistent.json") != std::string::npos);
  CHECK(pens_cli("fmt --check").status == 1);
}

TEST_CASE("pens config prints a config on a base as pens reads it, and a bad base in one line") {
  pens::testing::TempDir dir;
  std::ofstream(dir / "base.json") << R"({"description": "base", "model": "m.model.json", "run": {"epochs": 5, "seed": 2}})";
  std::ofstream(dir / "child.json") << R"({"base": "base.json", "run": {"epochs": 7}})";
  const Run r = pens_cli("config " + (dir / "child.json"));
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out) == nlohmann::json::parse(R"({"model": "m.model.json", "run": {"epochs": 7, "seed": 2}})"));
  std::ofstream(dir / "orphan.json") << R"({"base": "gone.json"})";
  check_refused(pens_cli("config " + (dir / "orphan.json")), {"orphan.json", "base \"gone.json\"", "no such file"});
}

TEST_CASE("pens new writes a model that loads, and names bad options") {
  const Run r = pens_cli("new mlp --layers 10,6,3 --mask-hidden 0.5 --penalty logits:kl:1 --loss-on parent");
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("pseudo_ensemble").at("penalties")[0].at("kind") == "kl");
  CHECK(doc.at("parameters").size() == 4);
  const Run bad = pens_cli("new mlp --penalty h7:kl:1");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("no node named 'h7'") != std::string::npos);
  CHECK(pens_cli("new mlp --layers 10,x").out.find("'x' is not a positive width") != std::string::npos);
  const Run noisy = pens_cli("new mlp --layers 10,6,3 --noise W2:fuzz:sigma=0.05 --noise h1:mask:p=0.3,rescale=0");
  REQUIRE(noisy.status == 0);
  const auto nd = nlohmann::json::parse(noisy.out);
  CHECK(nd.at("parameters")[2].at("noise")[0] == nlohmann::json({{"kind", "fuzz"}, {"sigma", 0.05}}));
  CHECK(nd.at("nodes")[1].at("noise")[0] == nlohmann::json({{"kind", "mask"}, {"p", 0.3}, {"rescale", 0}}));
  const Run bad_noise = pens_cli("new mlp --noise h1:fuzz");
  CHECK(bad_noise.status == 1);
  CHECK(bad_noise.out.find("parameters only") != std::string::npos);
  // Batch norm and a mean teacher: 2 running statistics and 5 teacher parameters
  // (W1, scale, shift, W2, b2), each a moving average; the fixed target from --penalty.
  const Run mt = pens_cli("new mlp --layers 10,6,3 --batch-norm --teacher 0.99 --children 2 "
                          "--noise x:gaussian:sigma=0.3 --penalty logits:softmax_l2:1:all:fixed");
  REQUIRE(mt.status == 0);
  const auto md = nlohmann::json::parse(mt.out);
  CHECK(md.at("moving_averages").size() == 7);
  CHECK(md.at("pseudo_ensemble").at("teacher") == 1);
  CHECK(md.at("pseudo_ensemble").at("penalties")[0].at("fixed_target") == true);
  CHECK(pens_cli("new mlp --teacher 0.99").out.find("--teacher needs a pseudo-ensemble") != std::string::npos);
  CHECK(pens_cli("new mlp --batch-norm-decay 0.9").out.find("needs --batch-norm") != std::string::npos);
  CHECK(pens_cli("new mlp --penalty logits:kl:1:all:x").out.find("takes 'fixed' (a fixed target), 'unscheduled'") !=
        std::string::npos);
  const Run both = pens_cli("new mlp --penalty h1:activation_l2:0.01:all:unscheduled,fixed");
  REQUIRE(both.status == 0);
  const auto term = nlohmann::json::parse(both.out).at("pseudo_ensemble").at("penalties")[0];
  CHECK(term.at("scheduled") == false);
  CHECK(term.at("fixed_target") == true);
  // A kind's parameters among the flags.
  const Run with_param =
      pens_cli("new mlp --children 1 --pairing parent-child --penalty logits:pseudo_label:1:all:threshold=0.9");
  REQUIRE(with_param.status == 0);
  CHECK(nlohmann::json::parse(with_param.out).at("pseudo_ensemble").at("penalties")[0].at("params").at("threshold") ==
        0.9);
  CHECK(pens_cli("new mlp --penalty logits:pseudo_label:1:all:threshold=high").out.find(
            "'threshold=high' is not NAME=NUMBER") != std::string::npos);
  CHECK(pens_cli("new mlp --children 1 --pairing parent-child --penalty logits:pseudo_label:1:all:thresh=0.9")
            .out.find("has no parameter 'thresh' (it takes threshold)") != std::string::npos);
  // Initial weights per matrix: He's sqrt(2 / fan-in), or one value each.
  const Run he = pens_cli("new mlp --layers 8,32,2 --weight-std he");
  REQUIRE(he.status == 0);
  const auto hd = nlohmann::json::parse(he.out).at("parameters");
  CHECK(hd[0].at("init").at("std").get<double>() == doctest::Approx(0.5));
  CHECK(hd[2].at("init").at("std").get<double>() == doctest::Approx(0.25));
  const Run listed = pens_cli("new mlp --layers 8,32,2 --weight-std 0.3,0.02");
  REQUIRE(listed.status == 0);
  CHECK(nlohmann::json::parse(listed.out).at("parameters")[2].at("init").at("std") == 0.02);
  CHECK(pens_cli("new mlp --layers 8,32,2 --weight-std 0.3,0.2,0.1").out.find("3 values for 2 weight matrices") !=
        std::string::npos);
  CHECK(pens_cli("new mlp --weight-std 0.1,-1").out.find("'-1' is not a standard deviation >= 0") != std::string::npos);
  // The output normalised too: its value is "logits", with no bias beside it.
  const Run bn_out = pens_cli("new mlp --layers 8,6,3 --batch-norm --batch-norm-output");
  REQUIRE(bn_out.status == 0);
  const auto bd = nlohmann::json::parse(bn_out.out);
  CHECK(bd.at("nodes")[8].at("name") == "logits");
  CHECK(bd.at("nodes")[8].at("op") == "normalize");
  CHECK(bd.at("moving_averages").size() == 4);
  CHECK(pens_cli("new mlp --batch-norm-output").out.find("--batch-norm-output needs --batch-norm") !=
        std::string::npos);
  // Averaged weights for evaluation alone: no child reads them, the running statistics
  // follow the clean pass.
  const Run eval_averages = pens_cli("new mlp --layers 8,6,3 --batch-norm --average-weights 0.99 --children 1 "
                                     "--pairing parent-child --noise x:gaussian:sigma=0.3 --penalty logits:kl:1 "
                                     "--batch-statistics parent");
  REQUIRE(eval_averages.status == 0);
  const auto ad = nlohmann::json::parse(eval_averages.out);
  CHECK(ad.at("moving_averages").size() == 7);
  CHECK(!ad.at("moving_averages")[0].contains("child"));
  CHECK(!ad.at("pseudo_ensemble").contains("teacher"));
  CHECK(ad.at("pseudo_ensemble").at("batch_statistics") == "parent");
  const Run mlp_by_part = pens_cli("new mlp --layers 8,6,3 --batch-norm --children 1 --pairing parent-child "
                                   "--noise x:gaussian:sigma=0.3 --penalty logits:kl:1:unlabeled --statistics-by-part");
  REQUIRE(mlp_by_part.status == 0);
  CHECK(nlohmann::json::parse(mlp_by_part.out).at("pseudo_ensemble").at("statistics_by_part") == true);
  CHECK(pens_cli("new mlp --average-weights 0.9 --teacher 0.9").out.find("both average the weights") !=
        std::string::npos);
  CHECK(pens_cli("new mlp --batch-statistics parent").out.find("need a pseudo-ensemble") != std::string::npos);
  const Run uncentred = pens_cli("new mlp --center /nonexistent/mnist");
  CHECK(uncentred.status == 1);
  CHECK(uncentred.out.find("/nonexistent/mnist") != std::string::npos);
  // A ladder: one l2 penalty per layer with its target, the decoder's weights V<l>.
  const Run ladder = pens_cli("new ladder --layers 8,6,4,3 --denoising 100,1,0.1,0.1 --noise 0.2");
  REQUIRE(ladder.status == 0);
  const auto ld = nlohmann::json::parse(ladder.out);
  const auto& terms = ld.at("pseudo_ensemble").at("penalties");
  REQUIRE(terms.size() == 4);
  CHECK(terms[3] == nlohmann::json({{"node", "xhat"}, {"target", "x"}, {"kind", "l2"}, {"lambda", 12.5}, {"rows", "all"}}));
  CHECK(ld.at("inputs")[0].at("noise")[0] == nlohmann::json({{"kind", "gaussian"}, {"sigma", 0.2}}));
  CHECK(ladder.out.find("\"parent_value\"") != std::string::npos);  // the clean statistics of the estimates
  CHECK(pens_cli("new ladder --layers 8,6,3 --denoising 1,1").out.find("3 widths, 2 weights") != std::string::npos);
  CHECK(pens_cli("new ladder --denoising 1,-2").out.find("'-2' is not a weight >= 0") != std::string::npos);
  CHECK(pens_cli("new ladder --estimate-statistics corrupted").out.find("clean or child, got 'corrupted'") !=
        std::string::npos);
  const Run averaged = pens_cli("new ladder --layers 8,6,3 --denoising 1,1,1 --average-weights 0.99 --estimate-statistics child");
  REQUIRE(averaged.status == 0);
  CHECK(averaged.out.find("\"average/W1\"") != std::string::npos);
  CHECK(averaged.out.find("\"average/V1\"") != std::string::npos);  // the decoder's too, by default
  CHECK(averaged.out.find("parent_value") == std::string::npos);
  const Run encoder = pens_cli("new ladder --layers 8,6,3 --denoising 1,1,1 --average-weights 0.99 --average-params 'W.*|beta.*'");
  REQUIRE(encoder.status == 0);
  CHECK(encoder.out.find("\"average/W2\"") != std::string::npos);
  CHECK(encoder.out.find("\"average/V1\"") == std::string::npos);
  CHECK(pens_cli("new ladder --average-params 'W.*'").out.find("--average-params needs --average-weights") !=
        std::string::npos);
  CHECK(pens_cli("new ladder --average-weights 0.9 --average-params 'Q.*'").out.find(
            "no trainable parameter's whole name matches 'Q.*'") != std::string::npos);
  const Run by_part = pens_cli("new ladder --layers 8,6,3 --denoising 1,1,1 --statistics-by-part");
  REQUIRE(by_part.status == 0);
  const auto bp = nlohmann::json::parse(by_part.out).at("pseudo_ensemble");
  CHECK(bp.at("statistics_by_part") == true);
  for (const auto& term : bp.at("penalties")) CHECK(term.at("rows") == "unlabeled");
  // The ladder code's costs on the unlabeled rows, with one set of statistics per batch.
  const Run unlabeled_costs = pens_cli("new ladder --layers 8,6,3 --denoising 1,1,1 --denoising-rows unlabeled");
  REQUIRE(unlabeled_costs.status == 0);
  const auto uc = nlohmann::json::parse(unlabeled_costs.out).at("pseudo_ensemble");
  CHECK_FALSE(uc.contains("statistics_by_part"));
  REQUIRE(uc.at("penalties").size() == 3);
  for (const auto& term : uc.at("penalties")) CHECK(term.at("rows") == "unlabeled");
  CHECK(pens_cli("new ladder --denoising-rows labeled").out.find("all or unlabeled, got 'labeled'") != std::string::npos);
  // Combinations: more noise, more children, a penalty of its own pairing beside the costs.
  const Run combined = pens_cli("new ladder --layers 8,6,3 --denoising 1,1,1 --noise-on x:adversarial:eps=1.0 "
                                "--children 2 --loss-on children --batch-statistics parent "
                                "--penalty logits:xent:1:all:child-child");
  REQUIRE(combined.status == 0);
  const auto cd = nlohmann::json::parse(combined.out);
  CHECK(cd.at("inputs")[0].at("noise")[1].at("kind") == "adversarial");
  const auto& ce = cd.at("pseudo_ensemble");
  CHECK(ce.at("children") == 2);
  CHECK(ce.at("loss_on") == "children");
  CHECK(ce.at("batch_statistics") == "parent");
  CHECK(ce.at("penalties").back() == nlohmann::json({{"node", "logits"}, {"kind", "xent"}, {"lambda", 1.0},
                                                      {"rows", "all"}, {"pairing", "child-child"}}));
  // Children of two kinds: the ladder's noise and costs in child 1, VAT's adversarial
  // noise and KL term in child 2, each child's batch statistics its own.
  const Run two_kinds = pens_cli("new ladder --layers 8,6,3 --denoising 1,1,1 --children 2 --ladder-children 1 "
                                 "--noise-on x:adversarial:eps=1.0@2 --penalty logits:kl:1:all:fixed@2 "
                                 "--batch-statistics own,parent");
  REQUIRE(two_kinds.status == 0);
  const auto tk = nlohmann::json::parse(two_kinds.out);
  CHECK(tk.at("inputs")[0].at("noise")[0].at("children") == nlohmann::json({1}));
  CHECK(tk.at("inputs")[0].at("noise")[1].at("children") == nlohmann::json({2}));
  const auto& te = tk.at("pseudo_ensemble");
  CHECK(te.at("batch_statistics") == nlohmann::json({"own", "parent"}));
  for (size_t i = 0; i + 1 < te.at("penalties").size(); ++i) CHECK(te.at("penalties")[i].at("children") == nlohmann::json({1}));
  CHECK(te.at("penalties").back().at("children") == nlohmann::json({2}));
  CHECK(pens_cli("new ladder --children 2 --noise-on x:mask:p=0.1@0").out.find(
            "--noise 'x:mask:p=0.1@0': '0' in '0' is not a child") != std::string::npos);
  CHECK(pens_cli("new ladder --children 2 --penalty logits:kl:1@3").out.find(
            "penalties[7].children must list distinct children in [1, 2], got 3") != std::string::npos);
  CHECK(pens_cli("new ladder --batch-statistics own,parent").out.find("one per child (1), got 2") != std::string::npos);
  CHECK(pens_cli("new ladder --penalty h9:kl:1").out.find("no node named 'h9'") != std::string::npos);
  CHECK(pens_cli("new ladder --penalty logits:kl:1:all:child-child").out.find(
            "'child-child' needs at least 2 children, got 1") != std::string::npos);
  CHECK(pens_cli("new ladder --penalty logits:kl:1:all:sideways").out.find(
            "(this term's pairing) and NAME=NUMBER (a parameter of the kind), got 'sideways'") != std::string::npos);
}

TEST_CASE("pens average: an average of each trained parameter, read at inference, with or without values") {
  pens::testing::TempDir dir;
  const std::string model = pens::testing::source_dir() + "/examples/sst/tree-lstm-glove.model.json";
  const auto before = nlohmann::json::parse(std::ifstream(model));
  std::vector<nlohmann::json> trained;
  for (const auto& p : before.at("parameters")) {
    if (!p.contains("flags") || !p.at("flags").contains("frozen")) trained.push_back(p);
  }
  REQUIRE(trained.size() > 1);
  const Run all = pens_cli("average " + model + " --decay 0.999 --output " + (dir / "averaged.json"));
  INFO(all.out);
  REQUIRE(all.status == 0);
  const auto after = nlohmann::json::parse(std::ifstream(dir / "averaged.json"));
  std::map<std::string, nlohmann::json> params, averages;
  for (const auto& p : after.at("parameters")) params[p.at("name")] = p;
  for (const auto& a : after.at("moving_averages")) averages[a.at("source")] = a;
  CHECK(averages.size() == trained.size());
  for (const auto& p : trained) {
    const std::string name = p.at("name");
    CAPTURE(name);
    REQUIRE(averages.contains(name));
    CHECK(averages[name] == nlohmann::json({{"at_inference", true}, {"decay", 0.999}, {"param", "average/" + name},
                                            {"source", name}}));
    CHECK(params.at("average/" + name).at("shape") == p.at("shape"));
    CHECK(params.at("average/" + name).at("flags") == nlohmann::json({"frozen"}));
  }
  CHECK(after.at("nodes") == before.at("nodes"));
  CHECK(after.at("metadata").at("description").get<std::string>().starts_with(
      "tree-lstm-glove.model.json with a moving average (decay 0.999) of each trained parameter ("));
  CHECK(pens_cli("fmt --check " + (dir / "averaged.json")).status == 0);

  // Twice, a decay outside [0, 1), none at all: refused, nothing written.
  check_refused(pens_cli("average " + (dir / "averaged.json") + " --decay 0.99 --output " + (dir / "twice.json")),
                {"already has an average 'average/"});
  CHECK(!std::filesystem::exists(dir / "twice.json"));
  check_refused(pens_cli("average " + model + " --decay 1"), {"--decay must be a finite number in [0, 1), got 1"});
  check_refused(pens_cli("average " + model), {"pens average needs --decay D"});

  // --params matches whole names: "W." is Wx alone; "W", part of a name, matches none.
  const Run one = pens_cli("average " + model + " --decay 0.999 --params 'W.'");
  REQUIRE(one.status == 0);
  const auto only_wx = nlohmann::json::parse(one.out);
  std::vector<std::string> sources;
  for (const auto& a : only_wx.at("moving_averages")) {
    if (a.at("param").get<std::string>().starts_with("average/")) sources.push_back(a.at("source"));
  }
  CHECK(sources == std::vector<std::string>{"Wx"});
  check_refused(pens_cli("average " + model + " --decay 0.999 --params W"),
                {"no trainable parameter's whole name matches 'W'"});
  check_refused(pens_cli("average " + model + " --decay 0.999 --params '('"), {"'(' is not a regular expression"});

  // Trained values are kept, the averages starting at them; written in place.
  REQUIRE(pens_cli("new mlp --layers 4,3,2 --values 7 --output " + (dir / "m.json")).status == 0);
  check_refused(pens_cli("average " + (dir / "m.json") + " --decay 0.9"), {"holds trained values", "--output"});
  const auto raw = nlohmann::json::parse(std::ifstream(dir / "m.json"));
  REQUIRE(pens_cli("average " + (dir / "m.json") + " --decay 0.9 --output " + (dir / "m.json")).status == 0);
  const auto with_values = nlohmann::json::parse(std::ifstream(dir / "m.json"));
  std::map<std::string, nlohmann::json> values;
  for (const auto& p : with_values.at("parameters")) values[p.at("name")] = p.at("values");
  for (const auto& p : raw.at("parameters")) {
    const std::string name = p.at("name");
    CAPTURE(name);
    CHECK(values.at(name) == p.at("values"));
    CHECK(values.at("average/" + name) == p.at("values"));
  }
}

TEST_CASE("the example model files are what the command at the end of their description writes") {
  // One is not written by pens new alone: pea-authors.model.json holds the mean training
  // image (pens new mlp --center reads the MNIST files).
  const std::string examples = pens::testing::source_dir() + "/examples";
  const std::set<std::string> by_hand = {"pea-authors.model.json"};
  for (const std::string& name : by_hand) CHECK(std::filesystem::exists(examples + "/mnist/" + name));
  const std::string marker = "Written by: pens ";
  for (const std::string folder : {"/mnist", "/models"}) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(examples + folder)) {
      const std::string name = entry.path().filename().string();
      const bool model = folder == "/models" || name.ends_with(".model.json");
      if (model && !by_hand.contains(name)) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
      CAPTURE(path.string());
      const auto shipped = nlohmann::json::parse(std::ifstream(path));
      const std::string description = shipped.at("metadata").at("description");
      const size_t at = description.find(marker);
      REQUIRE(at != std::string::npos);
      const Run written = pens_cli(description.substr(at + marker.size()));
      REQUIRE(written.status == 0);
      const auto made = nlohmann::json::parse(written.out);
      // Plain loops over items(), not structured bindings: doctest's messages capture the
      // key in a lambda, and clang 14 cannot capture a structured binding.
      for (const auto& item : shipped.items()) {
        const std::string key = item.key();
        if (key != "metadata") CHECK_MESSAGE(made.value(key, nlohmann::json()) == item.value(), "differs in ", key);
      }
      for (const auto& item : made.items()) {
        const std::string key = item.key();
        CHECK_MESSAGE(shipped.contains(key), "adds ", key);
      }
    }
  }
}

TEST_CASE("pens eval, train and pretrain: a corrupt IDX file or a bad config is one line and exit 1") {
  pens::testing::TempDir dir;
  // A t10k-images file whose header promises 3 images of 28 x 28 but holds 2.
  std::string images = {'\0', '\0', '\x08', '\x03', '\0', '\0', '\0', '\x03', '\0', '\0', '\0', '\x1c', '\0', '\0', '\0', '\x1c'};
  images += std::string(2 * 784, '\x10');
  std::ofstream(dir / "t10k-images-idx3-ubyte", std::ios::binary) << images;
  std::ofstream(dir / "t10k-labels-idx1-ubyte", std::ios::binary)
      << std::string({'\0', '\0', '\x08', '\x01', '\0', '\0', '\0', '\x03', '\x01', '\x02', '\x03'});
  const Run eval = pens_cli("eval " + example("mlp-pea.json") + " --data-dir " + dir.path());
  CHECK(eval.status == 1);
  CHECK(eval.out.find("t10k-images-idx3-ubyte: truncated: the header promises 2352 bytes of data, the file holds 1568") !=
        std::string::npos);
  CHECK(std::count(eval.out.begin(), eval.out.end(), '\n') == 1);

  // Well-formed IDX files of 10 x 10 images: refused before anything runs, not evaluated
  // at 90% error.
  pens::testing::TempDir small;
  std::string small_images = {'\0', '\0', '\x08', '\x03', '\0', '\0', '\0', '\x02', '\0', '\0', '\0', '\x0a', '\0', '\0', '\0', '\x0a'};
  small_images += std::string(2 * 100, '\x10');
  std::ofstream(small / "t10k-images-idx3-ubyte", std::ios::binary) << small_images;
  std::ofstream(small / "t10k-labels-idx1-ubyte", std::ios::binary)
      << std::string({'\0', '\0', '\x08', '\x01', '\0', '\0', '\0', '\x02', '\x01', '\x02'});
  const Run narrow = pens_cli("eval " + example("mlp-pea.json") + " --data-dir " + small.path());
  INFO(narrow.out);
  CHECK(narrow.status == 1);
  CHECK(narrow.out.find("the input 'x' takes 784 values per example, but " + small.path() + ", test images has 100") !=
        std::string::npos);

  std::ofstream(dir / "config.json") << R"({"model": "m.json", "run": {"epoch": 3}})";
  const Run train = pens_cli("train " + (dir / "config.json"));
  CHECK(train.status == 1);
  CHECK(train.out.find("unknown field run.epoch") != std::string::npos);
  CHECK(std::count(train.out.begin(), train.out.end(), '\n') == 1);

  // A skip-gram config names a task too; pens train sends it to pens pretrain.
  const Run skipgram = pens_cli("train " + pens::testing::source_dir() + "/examples/sst/skipgram.json");
  CHECK(skipgram.status == 1);
  CHECK(skipgram.out.find("skipgram.json is a word-vector pre-training config (task \"skipgram\"): run it with pens "
                          "pretrain") != std::string::npos);
  CHECK(std::count(skipgram.out.begin(), skipgram.out.end(), '\n') == 1);

  std::ofstream(dir / "pretrain.json") << R"({"model": "m.json", "layers": [{"node": "a1", "corruption": 0.25}]})";
  const Run pretrain = pens_cli("pretrain " + (dir / "pretrain.json"));
  CHECK(pretrain.status == 1);
  CHECK(pretrain.out.find("layers[0].corruption: expected an array") != std::string::npos);
  CHECK(std::count(pretrain.out.begin(), pretrain.out.end(), '\n') == 1);
}

TEST_CASE("pens pretrain: a budget stops greedy pre-training with a checkpoint, --resume ends it as one run would") {
  pens::testing::TempDir dir;
  // 40 training images of 28 x 28 (their labels unused).
  std::string images = {'\0', '\0', '\x08', '\x03', '\0', '\0', '\0', '\x28', '\0', '\0', '\0', '\x1c', '\0', '\0', '\0', '\x1c'};
  for (int i = 0; i < 40 * 784; ++i) images += static_cast<char>((i * 37 + i / 784 * 11) % 256);
  std::ofstream(dir / "train-images-idx3-ubyte", std::ios::binary) << images;
  std::string labels = {'\0', '\0', '\x08', '\x01', '\0', '\0', '\0', '\x28'};
  labels += std::string(40, '\x01');
  std::ofstream(dir / "train-labels-idx1-ubyte", std::ios::binary) << labels;
  REQUIRE(pens_cli("new mlp --layers 784,6,5,10 --output " + (dir / "net.json")).status == 0);
  std::ofstream(dir / "pretrain.json") << R"({"model": "net.json", "data": {"dir": "."},
    "layers": [{"node": "a1", "corruption": [{"kind": "mask", "p": 0.25}], "epochs": 2},
               {"node": "a2", "corruption": [{"kind": "mask", "p": 0.25}], "epochs": 2}],
    "batch": 10, "run": {"steps_per_epoch": 4, "threads": 1}})";
  const std::string config = dir / "pretrain.json";
  const Run whole = pens_cli("pretrain " + config + " --out " + (dir / "whole"));
  INFO(whole.out);
  REQUIRE(whole.status == 0);
  CHECK(whole.out.find("layer a2: denoising error") != std::string::npos);
  const Run missing = pens_cli("pretrain " + config + " --out " + (dir / "none") + " --resume");
  CHECK(missing.status == 1);
  CHECK(missing.out.find("checkpoint") != std::string::npos);
  const Run stopped = pens_cli("pretrain " + config + " --out " + (dir / "parts") + " --budget-minutes 1e-9");
  INFO(stopped.out);
  REQUIRE(stopped.status == 0);
  CHECK(stopped.out.find("wall-clock budget of 1e-09 minutes reached at step 0") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "parts/checkpoint.pens"));
  const Run resumed = pens_cli("pretrain " + config + " --out " + (dir / "parts") + " --resume");
  INFO(resumed.out);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.out.find("resuming from") != std::string::npos);
  const auto weights = [](const std::string& model) {
    const pens::Model m = pens::load_model(model);
    return std::vector<float>(m.values->values().begin(), m.values->values().end());
  };
  CHECK(weights(dir / "parts/model.json") == weights(dir / "whole/model.json"));
}

TEST_CASE("tree models from the command line: new, inspect one tree, train on a treebank, eval") {
  pens::testing::TempDir dir;
  const std::string trees = "(3 (2 the) (4 (4 good) (2 film)))\n(1 (2 the) (0 (0 bad) (2 plot)))\n(2 (2 the) (2 film))\n";
  for (const char* part : {"train.txt", "dev.txt", "test.txt"}) std::ofstream(dir / part) << trees;
  const Run made = pens_cli("new ctn --sst " + dir.path() + " --dim 6 --classes 2 --fuzz 0.02 --subspace 3 --output " +
                            (dir / "ctn.json"));
  REQUIRE(made.status == 0);
  const Run shown = pens_cli("inspect " + (dir / "ctn.json") + " --tree '(3 (2 a) (4 b))'");
  REQUIRE(shown.status == 0);
  CHECK(shown.out.find("c1/tensor@h1") != std::string::npos);       // the child's composition at height 1
  CHECK(shown.out.find("c1/subspace:latent") != std::string::npos);  // one subspace draw
  CHECK(shown.out.rfind("graph: ", 0) == 0);
  CHECK(shown.out.find(", batch") == std::string::npos);  // a tree's sizes come from the tree
  const Run checked = pens_cli("gradcheck " + (dir / "ctn.json") + " --tree '(3 (2 a) (4 b))'");
  CHECK(checked.status == 0);
  CHECK(checked.out.find("parameter elements, one tree\n") != std::string::npos);
  CHECK(pens_cli("inspect " + (dir / "ctn.json") + " --tree '(3 (2 a)'").out.find("--tree:1:9: unbalanced") !=
        std::string::npos);
  std::ofstream(dir / "config.json") << R"({"model": "ctn.json", "task": "binary", "data": {"dir": ")" << dir.path()
                                     << R"("}, "batch": {"trees": 2}, "run": {"epochs": 2}, "eval": {"samples": 3}})";
  // Without gnuplot on the PATH the curve is not drawn, and the run does not claim it.
  std::filesystem::create_directories(dir / "bare");
  std::ofstream(dir / "bare/learning-curve.png") << "an earlier run's picture";  // must not survive
  const Run bare = pens::testing::run_command("PATH=/nonexistent " + cli() + " train " +
                                              (dir / "config.json") + " --out " + (dir / "bare"));
  INFO(bare.out);
  REQUIRE(bare.status == 0);
  CHECK(bare.out.find("gnuplot is not installed") != std::string::npos);
  CHECK(bare.out.find("outputs in " + (dir / "bare") + ": summary.json, metrics.jsonl, model.json, best.model.json, "
                      "checkpoint.pens\n") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "bare/learning-curve.png"));
  const Run trained = pens_cli("train " + (dir / "config.json") + " --out " + (dir / "run"));
  INFO(trained.out);
  REQUIRE(trained.status == 0);
  CHECK(trained.out.find("test root accuracy") != std::string::npos);
  // With it (scripts/setup.sh installs it), the picture is listed exactly when it exists.
  CHECK((trained.out.find("learning-curve.png\n") != std::string::npos) ==
        std::filesystem::exists(dir / "run/learning-curve.png"));
  CHECK(trained.out.find("Warning") == std::string::npos);  // nothing of gnuplot's on the terminal
  CHECK_FALSE(std::filesystem::exists(dir / "run/filters.png"));  // words are not an image

  // One evaluation (a one-epoch run) is drawn as a point, without gnuplot's warning about
  // an empty x range.
  const Run once = pens_cli("train " + (dir / "config.json") + " --epochs 1 --out " + (dir / "once"));
  INFO(once.out);
  REQUIRE(once.status == 0);
  CHECK(once.out.find("Warning") == std::string::npos);
  const Run eval = pens_cli("eval " + (dir / "run/model.json") + " --data dev --samples 4 --data-dir " + dir.path());
  INFO(eval.out);
  REQUIRE(eval.status == 0);
  CHECK(eval.out.find("binary task, 2 roots") != std::string::npos);  // the neutral root is not evaluated
  CHECK(eval.out.find("mean of 4 subspace draws") != std::string::npos);
  CHECK(eval.out.find("root accuracy") != std::string::npos);
}

// A tree architecture written as a model file alone, with no C++ of its own: its gradients
// (dropout's masks replayed from their keys) match finite differences in double precision.
TEST_CASE("pens gradcheck passes on the shipped Tree-LSTM, over a tree with leaves at several heights") {
  const Run r = pens_cli("gradcheck " + pens::testing::source_dir() +
                         "/examples/sst/tree-lstm.model.json --tree '(3 (2 a) (4 (1 (2 b) (3 c)) (0 d)))'");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("parameter elements") != std::string::npos);
  CHECK(r.out.find(": ok\n") != std::string::npos);
}

TEST_CASE("a lowercased vocabulary from the command line: pens new ctn sizes E, pens eval must be told") {
  pens::testing::TempDir dir;
  const std::string trees = "(3 (2 The) (4 (4 good) (2 film)))\n(1 (2 the) (0 (0 bad) (2 FILM)))\n";
  for (const char* part : {"train.txt", "dev.txt", "test.txt"}) std::ofstream(dir / part) << trees;
  const auto rows_of_e = [&](const std::string& options) {
    const Run made = pens_cli("new ctn --sst " + dir.path() + " --dim 4 " + options);
    REQUIRE(made.status == 0);
    const auto doc = nlohmann::json::parse(made.out);
    for (const auto& p : doc.at("parameters")) {
      if (p.at("name") == "E") return p.at("shape")[0].get<int>();
    }
    FAIL("no parameter E");
    return 0;
  };
  CHECK(rows_of_e("") == 7);              // <unk>, FILM, The, bad, film, good, the
  CHECK(rows_of_e("--lowercase") == 5);   // <unk>, bad, film, good, the
  REQUIRE(pens_cli("new ctn --sst " + dir.path() + " --dim 4 --lowercase --output " + (dir / "ctn.json")).status == 0);
  std::ofstream(dir / "config.json") << R"({"model": "ctn.json", "task": "fine", "data": {"dir": ")" << dir.path()
                                     << R"(", "lowercase": true}, "run": {"epochs": 1}})";
  REQUIRE(pens_cli("train " + (dir / "config.json") + " --out " + (dir / "run")).status == 0);
  const std::string eval = "eval " + (dir / "run/model.json") + " --data-dir " + dir.path();
  const Run exact = pens_cli(eval);
  CHECK(exact.status == 1);
  CHECK(exact.out.find("E has 5 rows but the vocabulary with --min-count 1 has 7 words") != std::string::npos);
  const Run folded = pens_cli(eval + " --lowercase");
  INFO(folded.out);
  CHECK(folded.status == 0);
  CHECK(folded.out.find("root accuracy") != std::string::npos);
}

}  // namespace test_cli
