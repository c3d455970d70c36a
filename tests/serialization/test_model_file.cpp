// The JSON model format: canonical round trips, and a clear error for every kind of bad
// input, naming the field.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pens/autodiff/tape.h"
#include "pens/models/mlp.h"
#include "pens/serialization/files.h"
#include "pens/serialization/model_file.h"
#include "pens/serialization/sha256.h"
#include "tests/support/helpers.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace test_model_file {

using namespace pens;
using json = nlohmann::json;

namespace {

Model small_model(bool with_values) {
  Model m;
  m.graph = build_mlp({.layers = {5, 4, 3}, .max_norm = 3.5, .mask_input = 0.2, .mask_hidden = 0.5});
  PseudoEnsembleSpec spec;
  spec.penalties = {{"logits", "kl", 1.0, "all"}};
  m.ensemble = spec;
  m.metadata["note"] = "test model";
  if (with_values) {
    m.values = std::make_shared<ParamStore<float>>(m.graph);
    m.values->initialize(m.graph, 3);
  }
  return m;
}

json small_json(bool with_values = false) {
  return json::parse(write_model(small_model(with_values), with_values ? ValueStorage::Inline : ValueStorage::None, "").json);
}

Model parse(const json& doc, const std::string& dir = ".") { return parse_model(doc.dump(), "test.json", dir); }

std::vector<float> forward_logits(const Model& m) {
  ParamStore<float>& params = *m.values;
  Tape<float> tape(m.graph, params, {.batch = 2});
  auto x = tape.input("x");
  for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 0.3f;
  tape.forward();
  const auto v = tape.value("logits");
  return {v.data, v.data + v.size()};
}

}  // namespace

TEST_CASE("every example and test-data model reads and writes back byte for byte") {
  int files = 0;
  for (const char* folder : {"/examples", "/tests/data/models"}) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(pens::testing::source_dir() + folder)) {
    // Model files: everything under a models/ folder, and *.model.json beside training configs.
    const std::string name = entry.path().filename().string();
    const bool model_file = entry.path().parent_path().filename() == "models" ||
                            (name.size() > 11 && name.ends_with(".model.json"));
    if (entry.path().extension() != ".json" || !model_file) continue;
    INFO(entry.path().string());
    const std::string text = read_file(entry.path().string(), kMaxModelFileBytes);
    const Model m = load_model(entry.path().string());
    const ValueStorage storage = !m.values ? ValueStorage::None
                                 : m.weights_file.empty() ? ValueStorage::Inline : ValueStorage::Sidecar;
    CHECK(write_model(m, storage, m.weights_file).json == text);
    ++files;
  }
  }
  CHECK(files >= 10);
}

TEST_CASE("trained parameters survive saving, inline and in a sidecar, bit for bit") {
  testing::TempDir dir;
  const Model original = small_model(true);
  const std::vector<float> expected = forward_logits(original);
  for (ValueStorage storage : {ValueStorage::Inline, ValueStorage::Sidecar}) {
    const std::string path = dir / (storage == ValueStorage::Inline ? "inline.json" : "sidecar.json");
    save_model(original, path, storage);
    const Model loaded = load_model(path);
    REQUIRE(loaded.values);
    CHECK(std::equal(loaded.values->values().begin(), loaded.values->values().end(),
                     original.values->values().begin()));
    CHECK(forward_logits(loaded) == expected);  // bit-identical outputs
    CHECK(loaded.ensemble == original.ensemble);
    CHECK(loaded.metadata == original.metadata);
    // And the written text is canonical: writing the loaded model again changes nothing.
    CHECK(write_model(loaded, storage, loaded.weights_file).json == read_file(path, kMaxModelFileBytes));
  }
  const Model written = load_model(dir / "sidecar.json");
  CHECK(written.weights_file.rfind("sidecar.weights-", 0) == 0);  // named by its content
  CHECK(std::filesystem::file_size(dir / written.weights_file) == 4 * (5 * 4 + 4 + 4 * 3 + 3));
}

TEST_CASE("a model saved again gets a new sidecar before its JSON moves to it, and the old one goes") {
  testing::TempDir dir;
  const std::string path = dir / "m.json";
  Model model = small_model(true);
  std::ofstream(dir / "m.weights.bin") << "a sidecar of the old naming";
  std::ofstream(dir / "best.m.weights.bin") << "another model's";
  save_model(model, path, ValueStorage::Sidecar);
  const std::string first = load_model(path).weights_file;
  model.values->value("W1")[0] += 1.0f;
  save_model(model, path, ValueStorage::Sidecar);
  const std::string second = load_model(path).weights_file;
  CHECK(second != first);
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"m.json", second, "best.m.weights.bin"});
  // The folder as a kill leaves it between the next save's sidecar and its JSON: the new
  // sidecar beside the old pair, which still reads, with the old values.
  const float saved = load_model(path).values->value("W1")[0];
  model.values->value("W1")[0] += 1.0f;
  testing::TempDir elsewhere;
  save_model(model, elsewhere / "m.json", ValueStorage::Sidecar);
  const std::string next = load_model(elsewhere / "m.json").weights_file;
  std::filesystem::copy_file(elsewhere / next, dir / next);
  const Model old = load_model(path);
  CHECK(old.weights_file == second);
  CHECK(old.values->value("W1")[0] == saved);
  // The next save leaves the one sidecar its JSON names.
  save_model(model, path, ValueStorage::Sidecar);
  CHECK(load_model(path).weights_file == next);
  CHECK_FALSE(std::filesystem::exists(dir / second));
}

TEST_CASE("hand-written files may list nodes in any order; writing puts them in topological order") {
  json doc = small_json();
  std::reverse(doc["nodes"].begin(), doc["nodes"].end());
  const Model m = parse(doc);
  CHECK(json::parse(write_model(m, ValueStorage::None, "").json) == small_json());
}

TEST_CASE("bad model files: not JSON, truncated, versions, unknown fields, nesting") {
  CHECK_ERROR_MENTIONS(parse_model("this is not json", "bad.json", "."), "bad.json", "not valid JSON");
  const std::string text = small_json().dump(2);
  CHECK_ERROR_MENTIONS(parse_model(text.substr(0, text.size() / 2), "cut.json", "."), "cut.json", "not valid JSON");
  CHECK_ERROR_MENTIONS(parse_model("[1, 2]", "t.json", "."), "t.json: /: expected an object");
  json doc = small_json();
  doc.erase("format_version");
  CHECK_ERROR_MENTIONS(parse(doc), "test.json: /: missing field 'format_version'");
  doc = small_json();
  doc["format_version"] = 2;
  CHECK_ERROR_MENTIONS(parse(doc), "/format_version", "unsupported format_version 2");
  doc = small_json();
  doc["format_version"] = "1";
  CHECK_ERROR_MENTIONS(parse(doc), "/format_version", "expected an integer");
  doc = small_json();
  doc["opset_version"] = 7;
  CHECK_ERROR_MENTIONS(parse(doc), "/opset_version", "unsupported opset_version 7");
  doc = small_json();
  doc["nodes"][0]["colour"] = "red";
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/0/colour", "unknown field 'colour'");
  std::string deep(200, '[');
  CHECK_ERROR_MENTIONS(parse_model(deep, "deep.json", "."), "deep.json", "nested deeper than 64");
  CHECK_ERROR_MENTIONS(load_model("/nonexistent/model.json"), "/nonexistent/model.json", "cannot open");
}

TEST_CASE("bad model files: unknown ops and noise kinds, arity, dangling inputs, cycles, names") {
  json doc = small_json();
  doc["nodes"][1]["op"] = "relux";
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/1", "unknown op 'relux'");
  doc = small_json();
  doc["nodes"][0]["noise"][0]["kind"] = "blur";
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/0/noise/0", "unknown noise kind 'blur'");
  doc = small_json();
  doc["nodes"][1]["inputs"].push_back("x");  // relu with two inputs
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/1", "node 'h1' (relu)", "expected 1 input, got 2");
  doc = small_json();
  doc["nodes"][1]["inputs"][0] = "a7";
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/1/inputs/0", "no node named 'a7'");
  doc = small_json();
  doc["nodes"][0]["inputs"][0] = "h1";  // a1 reads h1, which reads a1
  CHECK_ERROR_MENTIONS(parse(doc), "cycle", "node '");
  doc = small_json();
  doc["nodes"][1]["name"] = "a1";
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/1", "duplicate node name 'a1'");
  doc = small_json();
  doc["parameters"][0]["name"] = "x";
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/0", "duplicate node name 'x'");
  doc = small_json();
  doc["outputs"][0] = "nowhere";
  CHECK_ERROR_MENTIONS(parse(doc), "/outputs/0", "no node named 'nowhere'");
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["node"] = "h9";
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/node", "no node named 'h9'");
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["fixed_target"] = "yes";
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/fixed_target", "expected true or false");
  // A fixed target reads back, and writes back only when set.
  doc["pseudo_ensemble"]["penalties"][0]["fixed_target"] = true;
  const Model fixed = parse(doc);
  CHECK(fixed.ensemble->penalties[0].fixed_target);
  CHECK(json::parse(write_model(fixed, ValueStorage::None, "").json) == doc);
  CHECK_FALSE(small_json()["pseudo_ensemble"]["penalties"][0].contains("fixed_target"));
  // A term the λ stages do not scale: read back, written back only when so.
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["scheduled"] = 0;
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/scheduled", "expected true or false");
  doc["pseudo_ensemble"]["penalties"][0]["scheduled"] = false;
  const Model unscheduled = parse(doc);
  CHECK_FALSE(unscheduled.ensemble->penalties[0].scheduled);
  CHECK(json::parse(write_model(unscheduled, ValueStorage::None, "").json) == doc);
  CHECK(parse(small_json()).ensemble->penalties[0].scheduled);
  CHECK_FALSE(small_json()["pseudo_ensemble"]["penalties"][0].contains("scheduled"));
  // A kind's parameters read back and write back; one its kind lacks, or not a number, is named.
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["kind"] = "pseudo_label";
  doc["pseudo_ensemble"]["penalties"][0]["params"] = {{"threshold", 0.8}};
  const Model labeled = parse(doc);
  CHECK(labeled.ensemble->penalties[0].params == std::map<std::string, double>{{"threshold", 0.8}});
  CHECK(json::parse(write_model(labeled, ValueStorage::None, "").json) == doc);
  doc["pseudo_ensemble"]["penalties"][0]["params"]["threshold"] = "high";
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/params/threshold", "number");
  doc["pseudo_ensemble"]["penalties"][0]["params"] = {{"margin", 0.8}};
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/params/margin", "no parameter 'margin'");
  doc = small_json();
  doc["pseudo_ensemble"]["pairing"] = "pairs";
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble", "pairing", "'pairs'");
  // A term's own pairing: read back, written back only when set, a bad one named.
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["pairing"] = "parent-child";
  const Model paired = parse(doc);
  CHECK(paired.ensemble->penalties[0].pairing == "parent-child");
  CHECK(json::parse(write_model(paired, ValueStorage::None, "").json) == doc);
  CHECK_FALSE(small_json()["pseudo_ensemble"]["penalties"][0].contains("pairing"));
  doc["pseudo_ensemble"]["penalties"][0]["pairing"] = "pairs";
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/pairing", "'pairs'");
  // Children of different kinds: which children apply a noise annotation, which a term
  // taps, each child's source of batch statistics; read back, written back only when set.
  doc = small_json();
  doc["inputs"][0]["noise"][0]["children"] = {2};
  doc["pseudo_ensemble"]["penalties"][0]["children"] = {1, 2};
  doc["pseudo_ensemble"]["batch_statistics"] = {"own", "parent"};
  const Model kinds = parse(doc);
  CHECK(kinds.graph["x"].noise[0].children == std::vector<int64_t>{2});
  CHECK(kinds.ensemble->penalties[0].children == std::vector<int64_t>{1, 2});
  CHECK(kinds.ensemble->batch_statistics == std::vector<std::string>{"own", "parent"});
  CHECK(json::parse(write_model(kinds, ValueStorage::None, "").json) == doc);
  CHECK_FALSE(small_json()["inputs"][0]["noise"][0].contains("children"));
  CHECK_FALSE(small_json()["pseudo_ensemble"]["penalties"][0].contains("children"));
  CHECK_FALSE(small_json()["pseudo_ensemble"].contains("batch_statistics"));
  doc["inputs"][0]["noise"][0]["children"] = json::array();
  CHECK_ERROR_MENTIONS(parse(doc), "/inputs/0/noise/0/children", "an empty list of children");
  doc["inputs"][0]["noise"][0]["children"] = {0};
  CHECK_ERROR_MENTIONS(parse(doc), "/inputs/0/noise/0", "numbered from 1, got 0");
  doc["inputs"][0]["noise"][0]["children"] = {"two"};
  CHECK_ERROR_MENTIONS(parse(doc), "/inputs/0/noise/0/children/0", "expected an integer");
  doc["inputs"][0]["noise"][0]["children"] = {3};
  CHECK_ERROR_MENTIONS(parse(doc), "node 'x', noise 0 (mask)", "child 3", "the pseudo-ensemble has 2");
  doc = small_json();
  doc["pseudo_ensemble"]["batch_statistics"] = {"own", "parent", "own"};
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble", "one per child (2), got 3");
  doc = small_json();
  doc["nodes"][0]["attrs"] = {{"alpha", 1}};
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/0", "unknown attribute 'alpha'");
  doc = small_json();
  doc["inputs"][0]["noise"][0]["p"] = "half";
  CHECK_ERROR_MENTIONS(parse(doc), "/inputs/0/noise/0", "'p' should be float");
}

TEST_CASE("what only the pseudo-ensemble's passes find is refused on reading, at the field that caused it") {
  json doc = small_json();
  doc["inputs"][0]["noise"][0]["p"] = 1.3;
  CHECK_ERROR_MENTIONS(parse(doc), "test.json: /inputs/0/noise/0:", "node 'x' (noise mask)", "'p' must be in [0, 1), got 1.3");
  doc = small_json();
  doc["nodes"][1]["noise"][0]["rescale"] = 2;
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/1/noise/0:", "'rescale' must be in [0, 1]");
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["node"] = "W1";
  CHECK_ERROR_MENTIONS(parse(doc), "test.json: /pseudo_ensemble/penalties/0/node:", "'W1' is not part of the network",
                       "it is a leaf");
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["target"] = "nope";
  CHECK_ERROR_MENTIONS(parse(doc), "test.json: /pseudo_ensemble/penalties/0/target:", "no node named 'nope'");
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["kind"] = "klx";
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/kind:", "unknown penalty kind 'klx'",
                       "(did you mean 'kl'? registered: ");
  doc = small_json();
  doc["pseudo_ensemble"]["penalties"][0]["lambda"] = -1;
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/penalties/0/lambda:", ">= 0");
  doc = small_json();
  doc["pseudo_ensemble"]["children"] = 0;
  CHECK_ERROR_MENTIONS(parse(doc), "/pseudo_ensemble/children:", "[1, 64]");
  doc = small_json();
  doc["parameters"][0]["init"] = {{"kind", "normal"}, {"std", -0.5}};
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/0", "'std' must be >= 0");
}

TEST_CASE("bad model files: shapes, sizes and parameter values") {
  json doc = small_json();
  doc["parameters"][0]["shape"] = {4, 4};  // W1 is [5,4]: a1 = affine(x[B,5], W1) no longer fits
  CHECK_ERROR_MENTIONS(parse(doc), "/nodes/0", "node 'a1' (affine)", "[B,5]", "[4,4]");
  doc = small_json();
  doc["parameters"][0]["shape"] = {1000000, 1000000};  // 10^12 elements: refused, never allocated
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/0/shape", "more than 2147483648 elements");
  doc = small_json();
  doc["inputs"][0]["shape"] = {-1, 0};
  CHECK_ERROR_MENTIONS(parse(doc), "/inputs/0/shape/1", "must be at least 1");
  doc = small_json();
  doc["parameters"][0]["shape"] = {1, 2, 3, 4, 5};
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/0/shape", "rank 5");

  doc = small_json(true);
  doc["parameters"][1]["values"].erase(0);
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/1/values", "3 values", "needs 4");
  doc = small_json(true);
  doc["parameters"][0]["values"][3] = 1e300;  // not a float32
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/0/values/3", "not a finite float32");
  std::string text = small_json(true).dump();
  const size_t at = text.find("\"values\":[") + 10;
  text.insert(at, "1e999,");  // JSON has no infinity; this overflows
  CHECK_ERROR_MENTIONS(parse_model(text, "inf.json", "."), "inf.json:1:", "not valid JSON", "1e999 is out of range");
  doc = small_json(true);
  doc["parameters"][2].erase("values");
  CHECK_ERROR_MENTIONS(parse(doc), "/parameters/2", "not for 'W2'");
}

TEST_CASE("bad model files: the sidecar missing, short, long, altered, elsewhere, or holding NaN") {
  testing::TempDir dir;
  const std::string path = dir / "m.json";
  save_model(small_model(true), path, ValueStorage::Sidecar);
  const std::string sidecar = dir / load_model(path).weights_file;
  const std::string good = read_file(sidecar, 1 << 20);
  const json doc = json::parse(read_file(path, 1 << 20));

  std::filesystem::remove(sidecar);
  CHECK_ERROR_MENTIONS(load_model(path), "/weights/file", "m.weights-", "cannot open");
  write_file_atomically(sidecar, good.substr(0, good.size() - 4));
  CHECK_ERROR_MENTIONS(load_model(path), "/weights/file", "holds 152 bytes, expected 156");
  write_file_atomically(sidecar, good + "xxxx");
  CHECK_ERROR_MENTIONS(load_model(path), "/weights/file", "more than the limit of 156");
  std::string altered = good;
  altered[10] ^= 0x40;
  write_file_atomically(sidecar, altered);
  CHECK_ERROR_MENTIONS(load_model(path), "/weights/sha256", "does not match its checksum");

  // A NaN with a checksum that matches: the values themselves are checked too.
  std::string nan_bytes = good;
  const float nan = std::nanf("");
  std::memcpy(nan_bytes.data() + 8, &nan, 4);
  write_file_atomically(sidecar, nan_bytes);
  json with_nan = doc;
  with_nan["weights"]["sha256"] = sha256_hex(nan_bytes);
  CHECK_ERROR_MENTIONS(parse(with_nan, dir.path()), "/weights/file", "element 2 is not finite");

  json elsewhere = doc;
  elsewhere["weights"]["file"] = "../etc/passwd";
  CHECK_ERROR_MENTIONS(parse(elsewhere, dir.path()), "/weights/file", "must be a file name beside the model");
  json wrong_size = doc;
  wrong_size["weights"]["bytes"] = 999999999999;
  CHECK_ERROR_MENTIONS(parse(wrong_size, dir.path()), "/weights/bytes", "declares 999999999999 bytes");
}

TEST_CASE("sha256 matches the FIPS 180-4 examples") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("atomic writes: a crash before the rename leaves the old file whole") {
  testing::TempDir dir;
  const std::string path = dir / "file.json";
  write_file_atomically(path, "old contents");
  CHECK_THROWS(write_file_atomically(path, "new contents, never finished",
                                     [] { throw Error("simulated crash between write and rename"); }));
  CHECK(read_file(path, 1 << 20) == "old contents");
  // No temporary file is left behind by a failure we could see.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);
  write_file_atomically(path, "new contents");
  CHECK(read_file(path, 1 << 20) == "new contents");
}

}  // namespace test_model_file
