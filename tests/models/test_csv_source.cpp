// The csv data source: rows of numbers, the label in a column, errors naming file and line.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"
#include "tests/support/temp_dir.h"

namespace test_csv_source {

using namespace pens;

Attributes settings_of(Attributes given) {
  normalize_attrs(DataSourceRegistry::global().at("csv").settings, given, "csv");
  return given;
}

TEST_CASE("csv: features and a label a row, a header skipped, the label in any column") {
  testing::TempDir dir;
  std::ofstream(dir / "train.csv") << "a,b,label\n0.5, 1.5 ,1\n-2,3e-1,0\n\n4,5,-1\r\n";
  std::ofstream(dir / "test.csv") << "a,b,label\n1,2,2\n";  // each file has its header
  const TrainData d = load_data("csv", dir.path(), settings_of({{"header", int64_t{1}}, {"test", std::string("test.csv")}}));
  CHECK(d.train.size == 3);
  CHECK(d.train.dim == 2);
  CHECK(d.train.x == std::vector<float>{0.5f, 1.5f, -2.0f, 0.3f, 4.0f, 5.0f});
  CHECK(d.train.y == std::vector<float>{1, 0, -1});
  CHECK(d.test.size == 1);
  CHECK(d.train.classes == 3);  // the test set's label 2 counts
  std::ofstream(dir / "first.csv") << "1,0.5,0.25\n0,1,2\n";
  const TrainData first =
      load_data("csv", dir.path(), settings_of({{"train", std::string("first.csv")}, {"label_column", int64_t{0}}}));
  CHECK(first.train.y == std::vector<float>{1, 0});
  CHECK(first.train.x == std::vector<float>{0.5f, 0.25f, 1, 2});
  CHECK(first.test.size == 0);
}

TEST_CASE("csv: a cell that is not a number, a ragged row or a label that is not a class is named") {
  testing::TempDir dir;
  const auto refused = [&](const std::string& text) {
    std::ofstream(dir / "train.csv", std::ios::trunc) << text;
    try {
      load_data("csv", dir.path(), settings_of({}));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refused("1,2,0\n1,x,1\n").find("train.csv:2: column 2 is not a finite number: 'x'") != std::string::npos);
  CHECK(refused("1,2,0\n1,2\n").find("train.csv:2: 2 columns, the first row has 3") != std::string::npos);
  CHECK(refused("1,2,0.5\n").find("label 0.5 is not a class") != std::string::npos);
  CHECK(refused("1,nan,0\n").find("column 2 is not a finite number") != std::string::npos);
  CHECK(refused("1,,0\n").find("column 2 is not a finite number: ''") != std::string::npos);
  CHECK(refused("\n\n").find("no rows of numbers") != std::string::npos);
  CHECK(refused("3\n").find("1 column: an example needs features and a label") != std::string::npos);
  CHECK_THROWS_WITH_AS(load_data("csv", dir.path(), settings_of({{"train", std::string("none.csv")}})),
                       doctest::Contains("none.csv: cannot open"), Error);
}

}  // namespace test_csv_source
