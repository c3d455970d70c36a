// How a training run is reported: pictures (the learning curve, errors by epoch from
// metrics.jsonl, drawn by gnuplot when it is installed; a mosaic of first-layer filters,
// the paper's Figure 2a) and the text of its figures.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pens/serialization/model.h"

namespace pens {

// "12.34%" for a fraction, "-" for anything else (null: not measured).
std::string percent_text(const nlohmann::json& fraction);
// "42s", "3m05s", "2h07m".
std::string duration_text(double seconds);

// Writes `out_dir`/learning-curve.png (with curve.tsv and curve.gp, its data and gnuplot
// script) and `out_dir`/filters.png. Returns one line per picture that could not be
// drawn, saying why (no gnuplot; no square first layer), and leaves no picture of that
// name behind (not even an earlier run's); never throws for those.
std::vector<std::string> write_reports(const std::string& out_dir, const Model& model);

// Only `out_dir`/filters.png, as write_reports draws it.
std::vector<std::string> write_filter_image(const std::string& out_dir, const Model& model);

// The first-layer filters as an 8-bit image: the first `count` columns of the [side²,
// units] matrix `w`, each a side × side tile scaled to its own range, in a grid with
// one-pixel borders. Sets width and height.
std::vector<uint8_t> filter_mosaic(TensorView<const float> w, int64_t count, int64_t& width, int64_t& height);

}  // namespace pens
