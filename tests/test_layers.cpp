// The layers of pens (docs/architecture.md), as the build enforces them: the checker
// passes on the source tree and fails, naming the include, on one that points up.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/paths.h"
#include "tests/support/run.h"
#include "tests/support/temp_dir.h"

namespace test_layers {

namespace {

using Checked = pens::testing::Run;

Checked check_layers(const std::string& root) {
  return pens::testing::run_command("python3 " + pens::testing::source_dir() + "/scripts/check-layers.py --root " +
                                    root);
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("every include of the source tree points down the layer stack") {
  const Checked c = check_layers(pens::testing::source_dir());
  INFO(c.out);
  CHECK(c.status == 0);
}

TEST_CASE("the layer check fails on an include that points up, and names it") {
  pens::testing::TempDir dir;
  write(dir / "ops/ir/node.h", "#include \"pens/ops/ir/shape.h\"\n");
  write(dir / "ops/ir/shape.h", "\n");
  write(dir / "graph/graph.h", "#include \"pens/ops/ir/node.h\"\n#include \"pens/ops/op.h\"\n");
  write(dir / "ops/op.h", "#include \"pens/ops/ir/node.h\"\n");
  write(dir / "train/loop/step.h", "#include \"pens/autodiff/tape.h\"\n");
  write(dir / "autodiff/tape.h", "#include \"pens/graph/graph.h\"\n");
  write(dir / "cli/args.h", "\n");
  write(dir / "cli/main.cpp", "#include \"cli/args.h\"\n#include \"pens/train/loop/step.h\"\n");
  CHECK(check_layers(dir.path()).status == 0);  // all downward

  write(dir / "ops/check.h", "#include \"pens/ops/op.h\"\n#include \"pens/graph/graph.h\"  // up: ops is below graph\n");
  write(dir / "serialization/checkpoint.h", "#include \"pens/train/loop/step.h\"\n");
  write(dir / "models/m.h", "#include \"nowhere/x.h\"\n");
  write(dir / "models/n.h", "#include \"graph/graph.h\"\n#include \"pens/cli/args.h\"\n");
  const Checked c = check_layers(dir.path());
  INFO(c.out);
  CHECK(c.status == 1);
  CHECK(c.out.find("ops/check.h:2: includes \"pens/graph/graph.h\": ops (layer 1) may not use graph (layer 2)") !=
        std::string::npos);
  CHECK(c.out.find("serialization/checkpoint.h:1") != std::string::npos);
  CHECK(c.out.find("models/m.h:1: includes \"nowhere/x.h\", which is in no layer") != std::string::npos);
  // The library's headers only through the installed include root, and only the library's.
  CHECK(c.out.find("models/n.h:1: includes \"graph/graph.h\": the library's headers are included as "
                   "\"pens/graph/graph.h\"") != std::string::npos);
  CHECK(c.out.find("models/n.h:2: includes \"pens/cli/args.h\", which is no header of the library") !=
        std::string::npos);
  CHECK(c.out.find("ops/op.h") == std::string::npos);  // downward includes are not reported
}

}  // namespace test_layers
