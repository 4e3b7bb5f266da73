// SPDX-License-Identifier: Apache-2.0
// NCCL's element types and reductions in the rules' terms
// (dispatch_rules.hpp), and the bytes a call moves.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <limits>
#include <optional>

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/dtype.hpp"

namespace peerplan::nccl_interposer {

inline NcclType to_nccl_type(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
      return NcclType::int8;
    case ncclUint8:
      return NcclType::uint8;
    case ncclInt32:
      return NcclType::int32;
    case ncclUint32:
      return NcclType::uint32;
    case ncclInt64:
      return NcclType::int64;
    case ncclUint64:
      return NcclType::uint64;
    case ncclFloat16:
      return NcclType::f16;
    case ncclFloat32:
      return NcclType::f32;
    case ncclFloat64:
      return NcclType::f64;
    case ncclBfloat16:
      return NcclType::bf16;
    default:
      return NcclType::other;
  }
}

inline NcclOp to_nccl_op(ncclRedOp_t op) noexcept {
  switch (op) {
    case ncclSum:
      return NcclOp::sum;
    case ncclProd:
      return NcclOp::prod;
    case ncclMax:
      return NcclOp::max;
    case ncclMin:
      return NcclOp::min;
    case ncclAvg:
      return NcclOp::avg;
    default:
      return NcclOp::other;  // ncclRedOpCreatePreMulSum's
  }
}

// The types peerplan reduces; nullopt for the others.
inline std::optional<DataType> to_data_type(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclFloat16:
      return DataType::f16;
    case ncclBfloat16:
      return DataType::bf16;
    case ncclFloat32:
      return DataType::f32;
    default:
      return std::nullopt;
  }
}

// Bytes of one element (1 for types this NCCL may add later: the counters
// then show elements).
inline std::size_t element_bytes(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    default:
      return 1;
  }
}

// Bytes of `count` elements, the largest size_t where that overflows (a
// call NCCL refuses, counted all the same).
inline std::size_t call_bytes(std::size_t count, ncclDataType_t type) noexcept {
  const std::size_t element = element_bytes(type);
  return count > std::numeric_limits<std::size_t>::max() / element
             ? std::numeric_limits<std::size_t>::max()
             : count * element;
}

}  // namespace peerplan::nccl_interposer
