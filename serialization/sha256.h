// SHA-256, for the checksums of parameter sidecar files and config hashes: OpenSSL's
// libcrypto (6.4x the speed of the hand-written version pens had; docs/architecture.md).
#pragma once
#include <string>
#include <string_view>

namespace pens {

// The digest of `bytes` as 64 lower-case hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace pens
