// The layers of pens (docs/architecture.md), as the build enforces them: the checker
// passes on the source tree and fails, naming the include, on one that points up.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/run.h"
#include "tests/support/temp_dir.h"

namespace {

using Checked = pens::testing::Run;

Checked check_layers(const std::string& root) {
  return pens::testing::run_command("python3 " + std::string(PENS_SOURCE_DIR) + "/scripts/check-layers.py --root " + root);
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("every include of the source tree points down the layer stack") {
  const Checked c = check_layers(PENS_SOURCE_DIR);
  INFO(c.out);
  CHECK(c.status == 0);
}

TEST_CASE("the layer check fails on an include that points up, and names it") {
  pens::testing::TempDir dir;
  write(dir / "ops/ir/node.h", "#include \"ops/ir/shape.h\"\n");
  write(dir / "ops/ir/shape.h", "\n");
  write(dir / "graph/graph.h", "#include \"ops/ir/node.h\"\n#include \"ops/op.h\"\n");
  write(dir / "ops/op.h", "#include \"ops/ir/node.h\"\n");
  write(dir / "train/step.h", "#include \"autodiff/tape.h\"\n");
  write(dir / "autodiff/tape.h", "#include \"graph/graph.h\"\n");
  CHECK(check_layers(dir.path()).status == 0);  // all downward

  write(dir / "ops/check.h", "#include \"ops/op.h\"\n#include \"graph/graph.h\"  // up: ops is below graph\n");
  write(dir / "serialization/checkpoint.h", "#include \"train/step.h\"\n");
  write(dir / "models/m.h", "#include \"nowhere/x.h\"\n");
  const Checked c = check_layers(dir.path());
  INFO(c.out);
  CHECK(c.status == 1);
  CHECK(c.out.find("ops/check.h:2: includes \"graph/graph.h\": ops (layer 1) may not use graph (layer 2)") !=
        std::string::npos);
  CHECK(c.out.find("serialization/checkpoint.h:1") != std::string::npos);
  CHECK(c.out.find("models/m.h:1: includes \"nowhere/x.h\", which is in no layer") != std::string::npos);
  CHECK(c.out.find("ops/op.h") == std::string::npos);  // downward includes are not reported
}
