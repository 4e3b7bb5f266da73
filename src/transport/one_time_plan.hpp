// SPDX-License-Identifier: Apache-2.0
// Prepare a plan and make one call with it: what the communicator does at
// declare and then at a hit, in one step. For code that drives a transport
// without a communicator (transport tests); the communicator itself
// prepares once per plan. Header-only: nothing of it ships in the library.
#pragma once

#include "transport/transport.hpp"

namespace peerplan::transport {

inline std::size_t args_bytes(DataType dtype, const TensorLayout* layout) {
  return layout == nullptr ? 0 : static_cast<std::size_t>(layout->numel()) * element_size(dtype);
}

inline bool all_reduce_once(PeerTransport& transport, Route route, Protocol protocol,
                            const AllReduceArgs& args) {
  const auto launch = transport.prepare({Operation::all_reduce, route, protocol, args.dtype,
                                         args.layout, args_bytes(args.dtype, args.layout)});
  return transport.all_reduce(*launch, args);
}

inline void fused_add_rms_norm_once(PeerTransport& transport, Route route, Protocol protocol,
                                    const FusedArgs& args) {
  const auto launch = transport.prepare({Operation::fused_add_rms_norm, route, protocol, args.dtype,
                                         args.layout, args_bytes(args.dtype, args.layout)});
  transport.fused_add_rms_norm(*launch, args);
}

}  // namespace peerplan::transport
