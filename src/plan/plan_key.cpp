// SPDX-License-Identifier: Apache-2.0
// Canonical plan keys (docs/design.md, The lookup contract, points 1-3): the
// stride of a size-1 dimension is irrelevant and stored as 0, unused dimension
// slots are 0, epsilon is compared by its bits with -0.0 folded onto +0.0, and
// the weight is compared by address. Two calls that must hit the same plan
// therefore produce bit-identical keys, and hashing/equality need no special
// cases.
#include "peerplan/plan_key.hpp"

#include <bit>
#include <string>

#include "plan/key_hash.hpp"
#include "plan/list_format.hpp"
#include "plan/norm_text.hpp"

namespace peerplan {
namespace {

// Fills every member of a default-constructed key with constant-offset
// stores (the loop is unrolled), which lets the compiler drop the 144-byte
// zeroing the default member initialisers imply; the mask instead of a branch
// keeps the loop straight-line. (A fill through a local array and a copy
// was measurably slower: 8-byte stores read back as 16-byte loads stall
// store-to-load forwarding.) Fixed trip count over every slot: TensorLayout
// keeps the dimensions and strides past its rank at 0 (its factories only
// write the first `rank` entries), so unused slots come out 0 here without a
// branch on the rank.
inline PlanKey canonical_key(Operation operation, DataType dtype, const TensorLayout& layout,
                             std::uint32_t eps_bits, std::uintptr_t weight) noexcept {
  PlanKey key;
  key.operation = operation;
  key.dtype = dtype;
  key.rank = static_cast<std::uint8_t>(layout.rank());
  key.eps_bits = eps_bits;
  key.weight = weight;
#if defined(__GNUC__)
#pragma GCC unroll 8
#endif
  for (int i = 0; i < kMaxRank; ++i) {
    const std::int64_t dim = layout.dim(i);
    key.shape[i] = dim;
    // A size-1 dimension's stride is irrelevant: stored as 0.
    key.strides[i] = layout.stride(i) & -static_cast<std::int64_t>(dim != 1);
  }
  return key;
}

std::uint32_t canonical_eps_bits(float eps) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(eps);
  return bits == 0x80000000u ? 0u : bits;  // -0.0 and +0.0 are the same epsilon
}

}  // namespace

PlanKey make_all_reduce_key(DataType dtype, const TensorLayout& layout) noexcept {
  return canonical_key(Operation::all_reduce, dtype, layout, 0, 0);
}

PlanKey make_fused_key(DataType dtype, const TensorLayout& layout, const void* weight,
                       float eps) noexcept {
  return canonical_key(Operation::fused_add_rms_norm, dtype, layout, canonical_eps_bits(eps),
                       reinterpret_cast<std::uintptr_t>(weight));
}

PlanKey make_key(const Declaration& declaration) noexcept {
  if (declaration.operation == Operation::all_reduce) {
    return make_all_reduce_key(declaration.dtype, declaration.layout);
  }
  const void* weight = declaration.weights.empty() ? nullptr : declaration.weights.front().data;
  PlanKey key =
      make_fused_key(declaration.dtype, declaration.layout, weight, declaration.eps.value_or(0.0f));
  // Keep whatever operation value the declaration holds (validation rejects
  // unknown ones); the key must describe the declaration faithfully.
  key.operation = declaration.operation;
  return key;
}

std::size_t hash_value(const PlanKey& key) noexcept {
  return static_cast<std::size_t>(plan::hash_key(key));
}

std::string PlanKey::to_string() const {
  std::string out;
  out.reserve(96);
  out += peerplan::to_string(operation);
  out += ' ';
  out += peerplan::to_string(dtype);
  out += ' ';
  plan::append_list(out, shape.data(), rank);
  out += " strides ";
  plan::append_list(out, strides.data(), rank);
  if (operation != Operation::all_reduce) {
    out += ' ';
    out += plan::norm_text(*this);
  }
  return out;
}

}  // namespace peerplan
