// The "csv" data source: examples as rows of numbers in text files, one example a line,
// the features and the class label in columns (the label the last column unless the
// config says which), an optional header line.
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"

namespace pens {

namespace {

// The rows of a CSV file of numbers (comma-separated; spaces around a number allowed),
// after `skip` header lines; every row as wide as the first. Errors name file, line, column.
std::vector<std::vector<double>> read_number_rows(const std::string& path, int64_t skip) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open (the data section names it)");
  std::vector<std::vector<double>> rows;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (number <= skip) continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // a blank line
    std::vector<double>& row = rows.emplace_back();
    size_t at = 0;
    while (true) {
      const size_t end = std::min(line.find(',', at), line.size());
      const size_t first = line.find_first_not_of(" \t", at);
      const size_t last = line.find_last_not_of(" \t", end == 0 ? 0 : end - 1);
      double value = 0;
      const char* begin = line.data() + (first == std::string::npos ? end : std::min(first, end));
      const char* stop = line.data() + (last == std::string::npos || last < first ? end : last + 1);
      const auto [ptr, ec] = std::from_chars(begin, stop, value);
      if (ec != std::errc() || ptr != stop || begin == stop || !std::isfinite(value)) {
        fail(path, ":", number, ": column ", row.size() + 1, " is not a finite number: '", std::string(begin, stop), "'");
      }
      row.push_back(value);
      if (end == line.size()) break;
      at = end + 1;
    }
    if (row.size() != rows.front().size()) {
      fail(path, ":", number, ": ", row.size(), " columns, the first row has ", rows.front().size());
    }
  }
  if (rows.empty()) fail(path, ": no rows of numbers");
  return rows;
}

Dataset examples_from(const std::string& path, int64_t header, int64_t label_column) {
  const std::vector<std::vector<double>> rows = read_number_rows(path, header);
  const auto columns = static_cast<int64_t>(rows.front().size());
  if (columns < 2) fail(path, ": ", columns, " column: an example needs features and a label");
  const int64_t label = label_column < 0 ? columns + label_column : label_column;
  if (label < 0 || label >= columns) fail(path, ": label_column ", label_column, " is outside the ", columns, " columns");
  Dataset d = make_dataset(static_cast<int64_t>(rows.size()), columns - 1, 0, path);
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = rows[r][static_cast<size_t>(label)];
    if (y != std::floor(y) || y < -1) {
      fail(path, ": row ", r + 1, ": label ", y, " is not a class (a whole number from 0, or -1: no label)");
    }
    d.y[r] = static_cast<float>(y);
    d.classes = std::max<int64_t>(d.classes, static_cast<int64_t>(y) + 1);
    float* x = d.x.data() + static_cast<int64_t>(r) * d.dim;
    for (int64_t c = 0; c < columns; ++c) {
      if (c != label) *x++ = static_cast<float>(rows[r][static_cast<size_t>(c)]);
    }
  }
  return d;
}

}  // namespace

DataSourceKind csv_source() {
  return {.name = "csv",
          .summary = "rows of numbers in CSV files: features and a class label a line (train, optionally test)",
          .settings = {{.name = "train", .type = AttrType::String, .default_value = AttrValue(std::string("train.csv")),
                        .doc = "the training examples, in the data folder"},
                       {.name = "test", .type = AttrType::String, .default_value = AttrValue(std::string()),
                        .doc = "the test examples (\"\": no test set)"},
                       {.name = "header", .type = AttrType::Int, .default_value = AttrValue(int64_t{0}),
                        .doc = "lines to skip at the top of each file", .range = AttrRange::at_least(0)},
                       {.name = "label_column", .type = AttrType::Int, .default_value = AttrValue(int64_t{-1}),
                        .doc = "the label's column from 0 (negative: from the end)"}},
          .load = [](const std::string& dir, const Attributes& s, const std::string& part) {
            const std::string& file = s.get_string(part == "train" ? "train" : "test");
            if (file.empty()) return Dataset{};
            return examples_from((std::filesystem::path(dir) / file).string(), s.get_int("header"),
                                 s.get_int("label_column"));
          }};
}

}  // namespace pens
