#include "pens/serialization/sha256.h"

#include <openssl/evp.h>

#include <cstdio>

#include "pens/ops/ir/error.h"

namespace pens {

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    fail("SHA-256 of ", bytes.size(), " bytes failed in OpenSSL");
  }
  std::string hex(2 * size, '0');
  for (unsigned i = 0; i < size; ++i) std::snprintf(&hex[2 * i], 3, "%02x", digest[i]);
  return hex;
}

}  // namespace pens
