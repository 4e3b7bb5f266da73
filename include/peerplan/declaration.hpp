// SPDX-License-Identifier: Apache-2.0
// What an application declares ahead of time: every collective it wants on
// the fast path. Declarations are validated, checked for agreement across
// ranks, routed and indexed by Communicator::declare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "peerplan/dtype.hpp"
#include "peerplan/export.h"
#include "peerplan/layout.hpp"
#include "peerplan/operation.hpp"

namespace peerplan {

// A norm weight is identified by its address, not its values: two weights
// with equal values are different plans. The weight has the declaration's
// dtype and is contiguous.
struct NormWeight {
  const void* data = nullptr;
  std::int64_t length = 0;  // must equal the layout's last dimension (hidden)
};

struct PEERPLAN_API Declaration {
  std::string name;  // unique within one declared set; used in messages
  Operation operation = Operation::all_reduce;
  DataType dtype = DataType::bf16;
  TensorLayout layout;               // strides omitted = contiguous row-major
  std::vector<NormWeight> weights;   // fused op: exactly one; all-reduce: none
  std::optional<float> eps;          // fused op: required, >= 0; all-reduce: none
  std::size_t input_alignment = 16;  // bytes the caller guarantees; power of two >= 16

  static Declaration all_reduce(std::string name, DataType dtype, TensorLayout layout);
  static Declaration fused_add_rms_norm(std::string name, DataType dtype, TensorLayout layout,
                                        const void* weight, float eps);
};

}  // namespace peerplan
