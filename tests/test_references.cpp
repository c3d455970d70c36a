// Every file that the sources, scripts, configs and docs cite exists in the repository:
// a comment that sends a reader to a file that is not there (one outside the repository,
// one that moved) is a defect this catches.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>
#include "tests/support/paths.h"

namespace test_references {

namespace fs = std::filesystem;

namespace {

bool skipped_dir(const std::string& name) {
  return name.starts_with(".") || name.starts_with("build") || name == "data" || name == "runs" ||
         name == "node_modules" || name == "subprojects";
}

bool cited_kind(const fs::path& p) {
  static const std::set<std::string> kinds = {".h", ".cpp", ".md", ".py", ".sh", ".json", ".build"};
  return kinds.count(p.extension().string()) > 0;
}

}  // namespace

TEST_CASE("every source file, script, config or doc a file cites is in the repository") {
  const fs::path root = pens::testing::source_dir();
  std::vector<fs::path> files;
  std::set<std::string> basenames;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && skipped_dir(name)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    basenames.insert(name);
    // Tests make up paths for their fixtures: their citations are not checked.
    if (cited_kind(it->path()) && !fs::relative(it->path(), root).string().starts_with("tests/")) {
      files.push_back(it->path());
    }
  }
  REQUIRE(files.size() > 100);
  // A path of the repository's own kinds of files: "train/loop/step.h", "docs/training.md",
  // "adding-a-penalty.md".
  const std::regex cited(R"((?:^|[\s`("'\[])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.(?:h|cpp|md|py|sh))\b)");
  int references = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      // System headers, and usage lines whose upper-case words are placeholders.
      if (line.find("#include <") != std::string::npos || line.find("usage:") != std::string::npos) continue;
      for (auto m = std::sregex_iterator(line.begin(), line.end(), cited); m != std::sregex_iterator(); ++m) {
        const std::string path = (*m)[1];
        if (path.starts_with("../") || path.starts_with("./")) continue;  // relative links are checked below
        ++references;
        // "pens/graph/graph.h": the include root pens installs is the repository's top.
        const bool found = path.find('/') == std::string::npos
                               ? basenames.count(path) > 0
                               : fs::exists(root / path) || fs::exists(file.parent_path() / path) ||
                                     (path.starts_with("pens/") && fs::exists(root / path.substr(5)));
        CHECK_MESSAGE(found, fs::relative(file, root).string() << ":" << number << " cites " << path
                                                               << ", which is not in the repository");
      }
    }
  }
  CHECK(references > 200);
}

}  // namespace test_references
