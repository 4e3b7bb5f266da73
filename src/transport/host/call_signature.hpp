// SPDX-License-Identifier: Apache-2.0
// What a rank's P2P call is, published in its signal area next to its input
// (signal_area.hpp): the node's ranks compare it once they all arrived, so
// that ranks that made different calls raise Mismatch instead of reducing
// each other's unrelated bytes.
#pragma once

#include <cstdint>
#include <string>

#include "peerplan/dtype.hpp"
#include "peerplan/operation.hpp"
#include "peerplan/route.hpp"  // Route only: its names are the routing layer's

namespace peerplan::transport::host {

struct CallSignature {
  std::uint64_t kind = 0;      // operation | route << 8 | dtype << 16 | eps bits << 32
  std::uint64_t elements = 0;  // the call's element count
  std::uint64_t row = 0;       // the fused op's row length (hidden); 0 for an all-reduce
  friend bool operator==(const CallSignature&, const CallSignature&) = default;

  Operation operation() const noexcept { return static_cast<Operation>(kind & 0xff); }
  Route route() const noexcept { return static_cast<Route>((kind >> 8) & 0xff); }
  DataType dtype() const noexcept { return static_cast<DataType>((kind >> 16) & 0xff); }
};

CallSignature all_reduce_signature(Route route, DataType dtype, std::int64_t elements) noexcept;
CallSignature fused_signature(Route route, DataType dtype, std::int64_t elements,
                              std::int64_t hidden, float eps) noexcept;

// "all_reduce (one-shot) of 1024 f32 elements", "fused_add_rms_norm (fused
// one-shot) of 2 rows of 512 bf16, eps 1e-06".
std::string describe(const CallSignature& call);

}  // namespace peerplan::transport::host
