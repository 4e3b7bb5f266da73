// SPDX-License-Identifier: Apache-2.0
// Names of the element types, and parsing of the spellings users and
// environment variables commonly use for them.
#include "peerplan/dtype.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace peerplan {

const char* to_string(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::f16:
      return "f16";
    case DataType::bf16:
      return "bf16";
    case DataType::f32:
      return "f32";
  }
  return "invalid_dtype";
}

std::optional<DataType> parse_data_type(std::string_view text) noexcept {
  // Case-insensitive; no spelling is longer than 8 characters.
  std::array<char, 8> lower{};
  if (text.empty() || text.size() > lower.size()) return std::nullopt;
  std::transform(text.begin(), text.end(), lower.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  const std::string_view word(lower.data(), text.size());
  if (word == "f16" || word == "fp16" || word == "half" || word == "float16") return DataType::f16;
  if (word == "bf16" || word == "bfloat16") return DataType::bf16;
  if (word == "f32" || word == "fp32" || word == "float" || word == "float32") return DataType::f32;
  return std::nullopt;
}

}  // namespace peerplan
