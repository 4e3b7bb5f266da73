// SPDX-License-Identifier: Apache-2.0
// Element types peerplan reduces. Reductions always accumulate in fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "peerplan/export.h"

namespace peerplan {

enum class DataType : std::uint8_t { f16 = 0, bf16 = 1, f32 = 2 };

inline constexpr std::size_t element_size(DataType dtype) noexcept {
  return dtype == DataType::f32 ? 4 : 2;
}

PEERPLAN_API const char* to_string(DataType dtype) noexcept;

// Parses "f16"/"fp16"/"half", "bf16"/"bfloat16", "f32"/"fp32"/"float".
PEERPLAN_API std::optional<DataType> parse_data_type(std::string_view text) noexcept;

}  // namespace peerplan
