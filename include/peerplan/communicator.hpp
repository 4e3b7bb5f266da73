// The communicator: lifecycle (create, declare, close) and dispatch of
// all-reduce and fused add + RMSNorm (DESIGN §4). Collective calls must be
// made by every rank of the communicator, in the same order.
#pragma once

#include <mpi.h>

#include <memory>
#include <span>
#include <string>

#include "peerplan/config.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/dtype.hpp"
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
};

class Communicator {
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
  // Strict lookup: throws UndeclaredPlan naming the key.
  virtual PlanInfo plan_for(const PlanKey& key) const = 0;

  // out = sum over ranks of in. in == out is allowed. Never fails on an
  // undeclared key: it takes the fallback and counts it.
  virtual CallResult all_reduce(const void* in, void* out, DataType dtype,
                                const TensorLayout& layout, StreamHandle stream = nullptr) = 0;

  // residual = allreduce(inout) + residual; inout = rmsnorm(residual) * weight.
  // inout and residual share `layout`; weight is contiguous [layout.last_dim()].
  virtual CallResult fused_add_rms_norm(void* inout, void* residual, const void* weight,
                                        float eps, DataType dtype, const TensorLayout& layout,
                                        StreamHandle stream = nullptr) = 0;

  virtual Stats stats() const = 0;
  virtual void reset_stats() = 0;

  // Collective, idempotent. Every later call but close() throws InvalidUsage.
  virtual void close() = 0;
  virtual bool is_closed() const noexcept = 0;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual Backend backend() const noexcept = 0;
  // Whether the fast path is enabled (create's agreement; a failed buffer
  // preparation at declare disables it on every rank), and if not, why.
  virtual bool p2p_enabled() const noexcept = 0;
  virtual const std::string& p2p_disabled_reason() const noexcept = 0;
  virtual const Config& config() const noexcept = 0;

 protected:
  Communicator() = default;
};

}  // namespace peerplan
