#include "pens/train/loop/report.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pens/ops/ir/error.h"
#include "pens/serialization/files.h"
#include "pens/serialization/png.h"

extern char** environ;

namespace pens {

namespace {

// Runs `program args...` without a shell; its exit status, or -1 when it cannot start.
int run_program(std::vector<std::string> argv) {
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, raw[0], nullptr, nullptr, raw.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string learning_curve(const std::filesystem::path& dir) {
  // A picture from an earlier run in this folder must not pass for this run's.
  std::error_code ignored;
  std::filesystem::remove(dir / "learning-curve.png", ignored);
  std::ifstream in(dir / "metrics.jsonl");
  std::ostringstream tsv;
  tsv << "# epoch\ttrain_error_%\tvalidation_error_%\ttest_error_%\tobjective\n";
  const auto percent = [](const nlohmann::json& v) { return v.is_number() ? cat(100.0 * v.get<double>()) : std::string("NaN"); };
  std::string line;
  int points = 0;
  double epoch = 0;
  // The range of the plotted errors, as drawn (at least 0.01 %).
  double lowest = INFINITY, highest = -INFINITY;
  while (std::getline(in, line)) {
    const nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (m.is_discarded() || !m.is_object()) continue;
    // A run may measure no error at all (skip-gram): a missing one is null, as an unmeasured one.
    const auto error = [&](const char* key) { return m.contains(key) ? m[key] : nlohmann::json(); };
    tsv << m.value("epoch", 0.0) << "\t" << percent(error("train_error")) << "\t" << percent(error("validation_error"))
        << "\t" << percent(error("test_error")) << "\t" << m.value("objective", 0.0) << "\n";
    for (const char* key : {"train_error", "validation_error", "test_error"}) {
      if (!error(key).is_number()) continue;
      const double drawn = std::max(0.01, 100.0 * error(key).get<double>());
      lowest = std::min(lowest, drawn), highest = std::max(highest, drawn);
    }
    epoch = m.value("epoch", 0.0);
    ++points;
  }
  if (points == 0) return "learning-curve.png: metrics.jsonl holds no evaluations";
  write_file_atomically((dir / "curve.tsv").string(), tsv.str());
  // One evaluation is a point (lines of one point draw nothing) in an x range around it,
  // and errors that are all equal get a y range around them (gnuplot warns on an empty
  // range).
  const std::string style = points == 1 ? " with points pt 7 " : " with lines ";
  const std::string head = cat("set terminal pngcairo size 900,560 noenhanced\n"
                                "set output '", (dir / "learning-curve.png").string(), "'\n",
                                points == 1 ? cat("set xrange [", epoch - 1, ":", epoch + 1, "]\n") : std::string(),
                                "set xlabel 'epoch'\nset grid\n"
                                "data = '", (dir / "curve.tsv").string(), "'\n");
  // A run that measures no error (skip-gram's) is drawn by its objective.
  const std::string script =
      lowest == INFINITY
          ? cat(head, "set title 'objective by epoch'\nset ylabel 'objective'\n",
                "plot data using 1:5", style, "lw 2 title 'objective'\n")
          : cat(head, "set title 'error by epoch'\nset ylabel 'error (%)'\nset logscale y\nset key top right\n",
                lowest == highest ? cat("set yrange [", lowest / 2, ":", highest * 2, "]\n") : "",
                "# a log axis cannot show 0: errors of 0 are drawn at 0.01%\n"
                "drawn(e) = e < 0.01 ? 0.01 : e\n"
                "plot data using 1:(drawn($2))", style, "lw 2 title 'train (labeled)', \\\n"
                "     data using 1:(drawn($3))", style, "lw 2 title 'validation', \\\n"
                "     data using 1:(drawn($4))", style, "lw 2 title 'test'\n");
  write_file_atomically((dir / "curve.gp").string(), script);
  const int status = run_program({"gnuplot", (dir / "curve.gp").string()});
  if (status == -1) return "learning-curve.png: gnuplot is not installed (apt-get install gnuplot-nox); curve.tsv and curve.gp hold the curve";
  if (status != 0) return cat("learning-curve.png: gnuplot exited with status ", status);
  return "";
}

}  // namespace

std::string percent_text(const nlohmann::json& fraction) {
  if (!fraction.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction.get<double>());
  return buf;
}

std::string duration_text(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  if (s >= 3600) return cat(s / 3600, "h", std::setw(2), std::setfill('0'), s / 60 % 60, "m");
  if (s >= 60) return cat(s / 60, "m", std::setw(2), std::setfill('0'), s % 60, "s");
  return cat(s, "s");
}

std::vector<uint8_t> filter_mosaic(TensorView<const float> w, int64_t count, int64_t& width, int64_t& height) {
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(w.shape.rows()))));
  if (side * side != w.shape.rows()) fail("filters of ", w.shape.rows(), " inputs are not square images");
  count = std::min(count, w.shape.cols());
  const auto grid = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(count))));
  const int64_t tile = side + 1;
  width = height = grid * tile + 1;
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height), 0);
  auto m = w.mat();
  for (int64_t f = 0; f < count; ++f) {
    const float lo = m.col(f).minCoeff(), hi = m.col(f).maxCoeff();
    const float scale = hi > lo ? 255.0f / (hi - lo) : 0.0f;
    const int64_t top = 1 + (f / grid) * tile, left = 1 + (f % grid) * tile;
    for (int64_t r = 0; r < side; ++r) {
      for (int64_t c = 0; c < side; ++c) {
        pixels[static_cast<size_t>((top + r) * width + left + c)] =
            static_cast<uint8_t>(std::lround((m(r * side + c, f) - lo) * scale));
      }
    }
  }
  return pixels;
}

std::vector<std::string> write_reports(const std::string& out_dir, const Model& model) {
  std::vector<std::string> problems;
  if (std::string p = learning_curve(out_dir); !p.empty()) problems.push_back(p);
  for (std::string& p : write_filter_image(out_dir, model)) problems.push_back(std::move(p));
  return problems;
}

std::vector<std::string> write_filter_image(const std::string& out_dir, const Model& model) {
  std::vector<std::string> problems;
  // Only a model whose input is an image has filters to picture: a tree model's inputs are
  // words, and a square number of features elsewhere is not a picture.
  if (model.tree || !model.values) return problems;
  int64_t pixels_in = 0;
  for (NodeId v : model.graph.nodes()) {
    const Node& n = model.graph[v];
    if (!is_input(n) || n.attrs.get_string("dtype") != "real") continue;
    const std::vector<int64_t> shape = n.attrs.get_ints("shape");
    if (shape.size() == 2) pixels_in = shape[1];
    break;
  }
  const auto side = std::lround(std::sqrt(static_cast<double>(pixels_in)));
  if (side < 2 || side * side != pixels_in) return problems;
  // The first layer: the first matrix parameter with a row per pixel.
  const ParamEntry* first = nullptr;
  for (const ParamEntry& e : model.values->entries()) {
    if (e.shape.rank == 2 && e.shape.rows() == pixels_in) {
      first = &e;
      break;
    }
  }
  if (!first) {
    problems.push_back(cat("filters.png: no weight matrix with a row for each of the input's ", pixels_in, " pixels"));
    return problems;
  }
  int64_t width = 0, height = 0;
  const std::vector<uint8_t> pixels = filter_mosaic(model.values->value(*first), 100, width, height);
  write_png_gray((std::filesystem::path(out_dir) / "filters.png").string(), width, height, pixels);
  return problems;
}

}  // namespace pens
