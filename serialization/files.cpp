#include "pens/serialization/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "pens/ops/ir/error.h"

namespace pens {

namespace {

// Renames the complete temporary file `temp` over `path` (removing it when that fails),
// then makes the rename durable.
void rename_into_place(const std::string& temp, const std::string& path, const std::filesystem::path& dir) {
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp.c_str());
    fail(path, ": rename failed: ", std::strerror(saved));
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

std::string read_file(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever; a regular file
  // ignores the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    fail(path, ": ", st.st_size, " bytes, more than the limit of ", max_bytes);
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail(path, ": read failed after ", done, " bytes");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

std::string absolute_path(const std::string& path) {
  if (path.empty()) return path;
  std::filesystem::path normal = std::filesystem::absolute(path).lexically_normal();
  // "data/mnist/" and "data/mnist" name one folder, and compare equal on resume.
  if (!normal.has_filename() && normal != normal.root_path()) normal = normal.parent_path();
  return normal.string();
}

int remove_interrupted_writes(const std::string& dir) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const size_t tag = name.rfind(".tmp-");
    // ".NAME.tmp-" and mkstemp's six characters.
    if (name.size() > 1 && name[0] == '.' && tag != std::string::npos && tag > 1 && name.size() == tag + 5 + 6 &&
        entry.is_regular_file(error)) {
      removed += std::filesystem::remove(entry.path(), error) ? 1 : 0;
    }
  }
  return removed;
}

void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::function<void()>& before_rename) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string temp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) fail(path, ": cannot create a temporary file in ", dir.string(), ": ", std::strerror(errno));
  auto abandon = [&](const std::string& what) {
    const int saved = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    fail(path, ": ", what, ": ", std::strerror(saved));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) abandon("write failed");
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) abandon("chmod failed");
  if (::fsync(fd) != 0) abandon("fsync failed");
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    fail(path, ": close failed: ", std::strerror(errno));
  }
  if (before_rename) {
    try {
      before_rename();
    } catch (...) {
      ::unlink(temp.c_str());
      throw;
    }
  }
  rename_into_place(temp, path, dir);
}

void link_atomically(const std::string& from, const std::string& to) {
  const std::filesystem::path target(to);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  // A temporary name of the form remove_interrupted_writes() cleans up after a kill.
  std::string temp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) fail(to, ": cannot create a temporary file in ", dir.string(), ": ", std::strerror(errno));
  ::close(fd);
  ::unlink(temp.c_str());
  if (::link(from.c_str(), temp.c_str()) != 0) {
    if (errno != EXDEV && errno != EPERM && errno != ENOTSUP && errno != EMLINK) {
      fail(to, ": cannot link ", from, ": ", std::strerror(errno));
    }
    write_file_atomically(to, read_file(from, std::numeric_limits<uint64_t>::max()));
    return;
  }
  rename_into_place(temp, to, dir);
}

void append_float32_le(std::string& out, const float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, 4);
    if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
    out.append(reinterpret_cast<const char*>(&bits), 4);
  }
}

void read_float32_le(const char* bytes, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + 4 * i, 4);
    if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
    std::memcpy(out + i, &bits, 4);
  }
}

}  // namespace pens
