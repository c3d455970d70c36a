// Reading and writing whole files safely: writes go to a temporary file in the same
// folder, are flushed to disk, then renamed over the target, so a process killed at any
// moment leaves either the old file or the new one, never a torn one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace pens {

// Reads a file; refuses files larger than `max_bytes` before reading them.
std::string read_file(const std::string& path, uint64_t max_bytes);

// `path` made absolute against the working directory and normalised ("a/./b/../c" is
// "/cwd/a/c", a folder without its trailing "/"); "" stays "".
std::string absolute_path(const std::string& path);

// Atomically replaces `path` with `bytes`. `before_rename`, when set, runs after the
// temporary file is complete and synced and before it is renamed: tests use it to
// simulate a crash at the worst moment.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::function<void()>& before_rename = {});

// Atomically makes `to` a second name of the complete file `from` (a hard link, renamed
// over `to`), or, where the file system has no hard links, an atomic copy.
void link_atomically(const std::string& from, const std::string& to);

// Removes the temporary files ".NAME.tmp-XXXXXX" that write_file_atomically leaves in
// `dir` when its process is killed mid-write; returns how many. Only for a folder no
// other process is writing in (a run folder being resumed).
int remove_interrupted_writes(const std::string& dir);

// Little-endian float32, the byte layout of sidecars and checkpoints.
void append_float32_le(std::string& out, const float* data, int64_t n);
void read_float32_le(const char* bytes, float* out, int64_t n);

}  // namespace pens
