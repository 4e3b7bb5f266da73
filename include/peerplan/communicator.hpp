// SPDX-License-Identifier: Apache-2.0
// The communicator: lifecycle (create, declare, close) and dispatch of
// all-reduce and fused add + RMSNorm (docs/design.md, Lifecycle). Collective
// calls must be made by every rank of the communicator, in the same order.
//
// Threads: one thread at a time per communicator, as with NCCL. A call of
// all_reduce, fused_add_rms_norm, declare, register_buffers,
// deregister_buffers or close made while another thread is inside one of
// them on the same communicator throws InvalidUsage and does nothing; use
// one communicator per thread, or serialise the calls (one thread after
// another is fine). stats() and reset_stats() may run on another thread at
// any time; has_plan_for(), plan_for() and the accessors while a call runs,
// but not while declare() or close() runs.
#pragma once

#include <mpi.h>

#include <memory>
#include <span>
#include <string>

#include "peerplan/buffer_region.hpp"
#include "peerplan/config.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/export.h"
#include "peerplan/layout.hpp"
#include "peerplan/plan_key.hpp"
#include "peerplan/route.hpp"

namespace peerplan {

// An opaque stream handle: a cudaStream_t on the cuda backend (nullptr =
// the legacy default stream), ignored by the host backend.
using StreamHandle = void*;

// A declared, prepared plan as the application may inspect it.
struct PlanInfo {
  const Declaration* declaration = nullptr;  // valid until the next declare/close
  Route route = Route::fallback;
  FallbackReason route_reason = FallbackReason::none;
  Protocol protocol = Protocol::none;
  // What a hit launches (PlanStats::launch); empty on the fallback.
  std::string launch;
  // The declaration's position in the declared set (Stats::plans[index]).
  std::size_t index = 0;
};

class PEERPLAN_API Communicator {
 public:
  // Collective over `comm` (which peerplan duplicates; the caller keeps
  // ownership of `comm`). Applies PEERPLAN_* environment overrides to
  // `config`. Ends with an agreement, so the fast path is enabled on every
  // rank or on none.
  static std::unique_ptr<Communicator> create(MPI_Comm comm, Config config = {});

  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Collective; also the refresh: replaces the whole declared set. Throws
  // InvalidArgument (bad declaration) or Mismatch (ranks declared different
  // sets) on every rank alike; on failure the previous set stays in force.
  virtual void declare(std::span<const Declaration> declarations) = 0;

  // Probe: never mutates, never throws.
  virtual bool has_plan_for(const PlanKey& key) const noexcept = 0;
  // Strict lookup: throws UndeclaredPlan naming the key, or InvalidUsage
  // on a closed or broken communicator (whose probe still answers).
  virtual PlanInfo plan_for(const PlanKey& key) const = 0;

  // out = sum over ranks of in. out is in (in place) or a buffer apart
  // from it: a partial overlap is refused (InvalidArgument), as NCCL and MPI
  // do not define it. Never fails on an undeclared key: it takes the
  // fallback and counts it.
  //
  // Argument rules (InvalidArgument names the argument or layout field and
  // what to change, before anything is read, written or counted):
  // - dtype is f16, bf16 or f32 (checked first).
  // - A call whose key matches a declaration has that declaration's
  //   (validated) layout; its pointers must be non-null and aligned to the
  //   declaration's input_alignment (16 bytes unless declared larger).
  // - Any other call: rank 1..8; no negative dimension; a dimension of 0
  //   makes a call without elements, which does nothing (null pointers and
  //   any strides allowed); otherwise strides of dimensions larger than 1
  //   positive and non-overlapping in some order of the dimensions
  //   (transposed and inner-strided tensors are fine), the tensor spanning
  //   at most 2^48 bytes (a larger span is a wrong shape or stride), and
  //   pointers non-null and aligned to the element size.
  virtual CallResult all_reduce(const void* in, void* out, DataType dtype,
                                const TensorLayout& layout, StreamHandle stream = nullptr) = 0;

  // residual = allreduce(inout) + residual; inout = rmsnorm(residual) * weight.
  // inout and residual share `layout`; weight is contiguous [layout.last_dim()].
  // Rules as for all_reduce, plus: rows contiguous (innermost stride 1),
  // residual not overlapping inout (their spans must be disjoint), eps
  // finite and >= 0, weight non-null and element-aligned (a declared
  // weight was checked at declare).
  virtual CallResult fused_add_rms_norm(void* inout, void* residual, const void* weight, float eps,
                                        DataType dtype, const TensorLayout& layout,
                                        StreamHandle stream = nullptr) = 0;

  // Collective. Registers device buffers of this rank (each rank passes its
  // own list, any length) so that, with TransferMode::pull, the peers read
  // an all-reduce input lying wholly inside one of them in place: no
  // staging copy (CallResult::zero_copy). Meant for inputs that live at a
  // fixed address, such as those of captured CUDA graphs. Registrations
  // add up; each buffer must be cudaMalloc-based device memory of this
  // rank's GPU, stay allocated until deregister_buffers() or close(), and
  // be registered before graphs that read it are captured. An input that
  // overlaps its output, or is not contiguous, is staged as usual. Throws
  // InvalidArgument on every rank when any rank's list is invalid,
  // registering nothing. Accepted but unused with push mode and on the host
  // backend (registered_buffer_count() is then 0), and when P2P is off.
  virtual void register_buffers(std::span<const BufferRegion> buffers) = 0;
  // Collective. Forgets every registration. Graphs captured with a
  // registered input must not be replayed afterwards (their next call
  // raises InvalidUsage instead of reading unmapped memory).
  virtual void deregister_buffers() = 0;
  virtual std::size_t registered_buffer_count() const noexcept = 0;

  // Per-plan hits and fallbacks by reason. Both may run on a monitoring
  // thread at any time, also while the owner declares or closes. After
  // close() both keep working, so the monitor may outlive the
  // communicator's use: stats() returns the counts as they stood at close
  // (per plan too) and reset_stats() zeroes those.
  virtual Stats stats() const = 0;
  virtual void reset_stats() = 0;

  // Collective, idempotent. Later, close() does nothing, stats() and
  // reset_stats() work as said above, has_plan_for() returns false and the
  // accessors keep answering; every other call throws InvalidUsage.
  virtual void close() = 0;
  virtual bool is_closed() const noexcept = 0;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual Backend backend() const noexcept = 0;
  // The CUDA device this rank drives (Config::device, or the local rank
  // modulo the GPUs it sees), as ncclCommCuDevice gives it; -1 on the host
  // backend. Buffers passed to calls must be memory of this device.
  virtual int cuda_device() const noexcept = 0;
  // What takes declined calls: Fallback::nccl or Fallback::mpi (Config::
  // fallback resolved; the same on every rank).
  virtual Fallback fallback() const noexcept = 0;
  // Whether the fast path is enabled (create's agreement; a failed buffer
  // preparation at declare disables it on every rank), and if not, why.
  virtual bool p2p_enabled() const noexcept = 0;
  virtual const std::string& p2p_disabled_reason() const noexcept = 0;
  virtual const Config& config() const noexcept = 0;
  // The machine as routing sees it, e.g. `cuda ranks=2 gpu="NVIDIA H200"
  // links=NV18`: what a tuning file's entries are matched on.
  virtual const std::string& topology_fingerprint() const noexcept = 0;
  // The cutoffs declare() routes by, resolved per field from the config
  // (code or PEERPLAN_*_BYTES), the tuning file's entry, or the default
  // table; no field is kAutoCutoff. The same on every rank.
  virtual RouteCutoffs cutoffs() const noexcept = 0;

 protected:
  Communicator() = default;
};

}  // namespace peerplan
