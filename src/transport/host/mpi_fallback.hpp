// The host backend's fallback: every call the index or the cutoffs decline.
// All-reduce through MPI_Iallreduce polled against the timeout (f32 with
// MPI_SUM, f16/bf16 with user-defined ops that add in fp32), the fused op as
// that all-reduce followed by the standalone add + RMSNorm shared with the
// P2P path. Messages are staged in a private contiguous buffer (strided
// layouts are packed there), so that MPI never touches user memory after a
// call returned, even when it returned by Timeout.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include "transport/host/mpi_reduction_types.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::host {

class MpiFallback final : public FallbackTransport {
 public:
  // `comm` (the communicator's own duplicate) stays owned by the caller and
  // must remain valid until close(). Not collective.
  MpiFallback(MPI_Comm comm, std::chrono::milliseconds timeout);
  ~MpiFallback() override;

  // Collective over `comm`. Throws Timeout when the reduction does not
  // complete within the timeout (a rank did not call), MpiError,
  // InvalidArgument, InvalidUsage after close().
  void all_reduce(const AllReduceArgs& args) override;
  void fused_add_rms_norm(const FusedArgs& args) override;
  // Frees the MPI datatype and operations. Local; idempotent.
  void close() override;

  // Reductions abandoned by a Timeout that MPI has not completed yet (their
  // staging buffers stay alive until it does). For tests and diagnostics.
  std::size_t pending_abandoned() noexcept;

 private:
  struct Abandoned {
    MPI_Request request;
    std::vector<std::byte> buffer;
  };
  // Reduces staging_[0, count) in place across the ranks.
  void reduce_staging(DataType dtype, std::int64_t count, const char* what);
  void check_open(const char* what) const;

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  MpiReductionTypes types_;
  std::vector<std::byte> staging_;
  std::vector<Abandoned> abandoned_;
  bool closed_ = false;
};

}  // namespace peerplan::transport::host
