// SPDX-License-Identifier: Apache-2.0
// "[a, b, c]" for shapes and strides in messages (layouts and keys).
#pragma once

#include <cstdint>
#include <string>

namespace peerplan::plan {

inline void append_list(std::string& out, const std::int64_t* values, int count) {
  out += '[';
  for (int i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  out += ']';
}

}  // namespace peerplan::plan
