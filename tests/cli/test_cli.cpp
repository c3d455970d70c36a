// The pens command-line tool, run as a user runs it.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "ops/registry.h"

namespace {
struct Run {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Run pens_cli(const std::string& args) {
  Run r;
  const std::string command = std::string(PENS_CLI) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
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
  std::set<std::string> registered;
  for (const pens::OpDef* op : pens::OpRegistry::global().all()) {
    if (op->name.rfind("test_", 0) != 0) registered.insert(op->name);
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
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("gradcheck: (\\d+) of (\\d+) ops passed")));
  CHECK(m[1] == m[2]);
  CHECK(std::stoi(m[1]) >= 25);
}

TEST_CASE("every subcommand has --help, and mistakes give a message and a non-zero exit") {
  for (const char* cmd : {"ops", "gradcheck"}) {
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
