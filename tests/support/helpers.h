// Small helpers shared by the tests.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "pens/ops/ir/error.h"

// Checks that `expr` throws a pens::Error whose message contains every given fragment
// (the node, the field, what was expected).
#define CHECK_ERROR_MENTIONS(expr, ...)                                         \
  do {                                                                          \
    bool threw_ = false;                                                        \
    try {                                                                       \
      expr;                                                                     \
    } catch (const pens::Error& e_) {                                           \
      threw_ = true;                                                            \
      const std::string msg_ = e_.what();                                       \
      for (const char* frag_ : {__VA_ARGS__}) {                                 \
        INFO("error message: " << msg_);                                        \
        CHECK_MESSAGE(msg_.find(frag_) != std::string::npos, "missing '" << std::string(frag_) << "'"); \
      }                                                                         \
    }                                                                           \
    CHECK_MESSAGE(threw_, #expr " did not throw a pens::Error");                \
  } while (0)
