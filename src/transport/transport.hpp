// SPDX-License-Identifier: Apache-2.0
// Transports: what the communicator dispatches to. A PeerTransport runs the
// P2P routes for declared plans among the ranks of one node; a
// FallbackTransport (NCCL on the cuda backend, MPI on the host backend)
// takes every call the index or the cutoffs decline. Both backends share
// everything above this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "peerplan/buffer_region.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/layout.hpp"
#include "peerplan/operation.hpp"
#include "peerplan/route.hpp"
#include "routing/launch_shape_tuning.hpp"
#include "routing/protocol_choice.hpp"

namespace peerplan::transport {

using StreamHandle = void*;

// Arguments of one all-reduce. `layout` describes both `in` and `out`
// (element strides); in == out is allowed.
struct AllReduceArgs {
  const void* in = nullptr;
  void* out = nullptr;
  DataType dtype = DataType::f32;
  const TensorLayout* layout = nullptr;
  StreamHandle stream = nullptr;
};

// residual = allreduce(inout) + residual; inout = rmsnorm(residual) * weight.
// inout and residual share `layout`; its last dimension is the hidden size;
// weight is contiguous [hidden] of the same dtype.
struct FusedArgs {
  void* inout = nullptr;
  void* residual = nullptr;
  const void* weight = nullptr;
  float eps = 0.0f;
  DataType dtype = DataType::f32;
  const TensorLayout* layout = nullptr;
  StreamHandle stream = nullptr;
};

// What one declared plan runs on a P2P transport: everything about the
// launch that does not depend on the call's pointers and stream (kernel,
// grid, shard geometry, byte counts), decided once by
// PeerTransport::prepare and handed back on every call that hits the plan.
// Only the transport that prepared it may run it.
class PlanLaunch {
 public:
  virtual ~PlanLaunch() = default;
  // One line for the INFO route table and PlanStats::launch, e.g. "bf16
  // one-shot Lamport: 132 blocks x 512 threads, PDL".
  virtual std::string describe() const = 0;
};

// A plan as the router decided it: its route and protocol came from
// routing::route_declaration with this transport's protocol_windows().
struct LaunchRequest {
  Operation operation = Operation::all_reduce;
  Route route = Route::one_shot;
  Protocol protocol = Protocol::staged;
  DataType dtype = DataType::f32;
  const TensorLayout* layout = nullptr;  // only read by prepare()
  std::size_t message_bytes = 0;
};

class PeerTransport {
 public:
  virtual ~PeerTransport() = default;
  // Collective, same argument on every rank. Makes the staging slots hold
  // at least `max_message_bytes` (the largest declared plan routed to P2P);
  // may re-create them, which releases the previous ones. 0 releases
  // everything. It is also the recovery after a Timeout: a transport whose
  // wait timed out refuses calls (InvalidUsage) until reserve() re-creates
  // the buffers and resets the call epochs on every rank.
  // `max_lamport_bytes`: the largest plan the router gave the Lamport
  // protocol (0: none), which needs a region of its own; `max_dma_bytes`
  // likewise for the plans given Protocol::dma (copy engines). Neither
  // kind stages anything in the slots: `max_message_bytes` need not count
  // them, and capacity_bytes() is the largest of the three.
  virtual void reserve(std::size_t max_message_bytes, std::size_t max_lamport_bytes = 0,
                       std::size_t max_dma_bytes = 0) = 0;
  virtual std::size_t capacity_bytes() const noexcept = 0;
  // Which protocol this transport runs for which messages; the router
  // chooses each plan's from it. The same on every rank (built from the
  // agreed config only).
  virtual routing::ProtocolWindows protocol_windows() const noexcept = 0;
  // Local, before the first prepare(): the launch shapes a tuning file
  // measured for this machine. A transport whose kernels have no tunable
  // shape ignores them.
  virtual void set_launch_shapes(const routing::LaunchShapeTuning& shapes) { (void)shapes; }
  // Local: the launch of one plan the router admitted, after reserve() (a
  // Lamport plan needs its region). Throws InvalidArgument when this
  // transport cannot run the request (a route or protocol it lacks, a
  // message over capacity_bytes()): a mismatch between router and
  // transport, never the user's doing. A prepared launch stays valid
  // across reserve() calls that keep the capacity it was prepared under.
  virtual std::unique_ptr<PlanLaunch> prepare(const LaunchRequest& request) = 0;
  // Collective, in the same order on every rank: the plan `launch` was
  // prepared for, called with its key's dtype and layout. Every wait is
  // bounded by the timeout: Timeout names the ranks that did not arrive.
  // Results are bit-identical on every rank. Returns true when the peers
  // read this rank's input in place (zero copy, from a registered buffer),
  // false when it was staged.
  virtual bool all_reduce(const PlanLaunch& launch, const AllReduceArgs& args) = 0;
  virtual void fused_add_rms_norm(const PlanLaunch& launch, const FusedArgs& args) = 0;
  // Collective. Registers this rank's buffers for zero-copy reads by the
  // peers (added to earlier registrations); throws on every rank when any
  // rank failed, registering nothing. A transport that cannot read peers'
  // memory in place accepts them and keeps staging (registered count 0).
  virtual void register_buffers(std::span<const BufferRegion> buffers) = 0;
  // Collective. Forgets every registration.
  virtual void deregister_buffers() = 0;
  // This rank's buffers that calls can read in place.
  virtual std::size_t registered_buffer_count() const noexcept = 0;
  // Collective, idempotent.
  virtual void close() = 0;
};

class FallbackTransport {
 public:
  virtual ~FallbackTransport() = default;
  virtual void all_reduce(const AllReduceArgs& args) = 0;
  virtual void fused_add_rms_norm(const FusedArgs& args) = 0;
  virtual void close() = 0;
};

}  // namespace peerplan::transport
