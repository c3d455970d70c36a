#include "pens/models/mnist.h"

#include <filesystem>

#include "pens/models/data_source.h"
#include "pens/ops/ir/error.h"
#include "pens/serialization/idx.h"

namespace pens {

Dataset load_mnist(const std::string& dir, const std::string& part) {
  if (part != "train" && part != "test") fail("MNIST part '", part, "': expected train or test");
  const std::string prefix = part == "train" ? "train" : "t10k";
  const std::string images_path = (std::filesystem::path(dir) / (prefix + "-images-idx3-ubyte")).string();
  const std::string labels_path = (std::filesystem::path(dir) / (prefix + "-labels-idx1-ubyte")).string();
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    fail(dir, ": not a folder (MNIST's folder holds its four IDX files)");
  }
  for (const std::string& p : {images_path, labels_path}) {
    if (!std::filesystem::exists(p)) fail(p, ": no such file (scripts/fetch-mnist.sh ", dir, " fetches MNIST)");
  }
  const IdxArray images = read_idx(images_path, 3);
  const IdxArray labels = read_idx(labels_path, 1);
  if (images.dims[0] != labels.dims[0]) {
    fail(images_path, " holds ", images.dims[0], " images but ", labels_path, " holds ", labels.dims[0], " labels");
  }
  constexpr int64_t kClasses = 10;
  Dataset d = make_dataset(images.dims[0], images.dims[1] * images.dims[2], kClasses, images_path);
  for (size_t i = 0; i < images.data.size(); ++i) d.x[i] = static_cast<float>(images.data[i]) / 255.0f;
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kClasses) {
      fail(labels_path, ": label ", static_cast<int>(labels.data[i]), " of example ", i, " is outside 0-9");
    }
    d.y[i] = labels.data[i];
  }
  return d;
}

DataSourceKind mnist_source() {
  return {.name = "mnist",
          .summary = "MNIST's four IDX files (train-images-idx3-ubyte, ...; scripts/fetch-mnist.sh)",
          .settings = {},
          .load = [](const std::string& dir, const Attributes&, const std::string& part) { return load_mnist(dir, part); }};
}

}  // namespace pens
