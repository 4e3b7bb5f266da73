// SPDX-License-Identifier: Apache-2.0
// The exact key of a collective call, in canonical form (docs/design.md, The
// lookup contract): operation, dtype, shape, strides with size-1 dimensions'
// strides zeroed, and for the fused op the weight's address and epsilon's
// bits. Fixed size, no heap: building and hashing a key never allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "peerplan/declaration.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/export.h"
#include "peerplan/layout.hpp"
#include "peerplan/operation.hpp"

namespace peerplan {

struct PEERPLAN_API PlanKey {
  Operation operation = Operation::all_reduce;
  DataType dtype = DataType::bf16;
  std::uint8_t rank = 0;
  std::uint32_t eps_bits = 0;                    // 0 for all-reduce; +0.0 and -0.0 both map to 0
  std::uintptr_t weight = 0;                     // 0 for all-reduce
  std::array<std::int64_t, kMaxRank> shape{};    // unused dims are 0
  std::array<std::int64_t, kMaxRank> strides{};  // size-1 and unused dims are 0

  friend bool operator==(const PlanKey&, const PlanKey&) = default;

  // Human-readable form for messages: "fused_add_rms_norm bf16 [2, 4096]
  // strides [4096, 1] weight 0x7f.. eps 1e-06".
  std::string to_string() const;
};

PEERPLAN_API PlanKey make_all_reduce_key(DataType dtype, const TensorLayout& layout) noexcept;
PEERPLAN_API PlanKey make_fused_key(DataType dtype, const TensorLayout& layout, const void* weight,
                                    float eps) noexcept;
// The key a declaration stands for (its first weight, if any).
PEERPLAN_API PlanKey make_key(const Declaration& declaration) noexcept;

PEERPLAN_API std::size_t hash_value(const PlanKey& key) noexcept;

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& key) const noexcept { return hash_value(key); }
};

}  // namespace peerplan
