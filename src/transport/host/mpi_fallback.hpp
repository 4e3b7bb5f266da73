// SPDX-License-Identifier: Apache-2.0
// The host backend's fallback: every call the index or the cutoffs decline.
// All-reduce through MPI_Iallreduce polled against the timeout (f32 with
// MPI_SUM, f16/bf16 with user-defined ops that add in fp32), the fused op as
// an all-reduce followed by the standalone add + RMSNorm shared with the
// P2P path; at 3+ ranks the fused op's all-reduce is an MPI_Iallgather
// summed here in rank order in fp32 and rounded once, so that it gives the
// P2P kernels' bits (see reduce()). Messages are staged in a private contiguous buffer (strided
// layouts are packed there), so that MPI never touches user memory after a
// call returned, even when it returned by Timeout.
//
// Before posting the reduction the ranks tell each other which call they
// make (kind, dtype, count), in a fixed-size MPI_Iallgather polled against
// the timeout: MPI requires the same count on every rank, and a rank with a
// larger one would write past the others' buffers, a smaller one abort the
// job (Open MPI sends a nonblocking collective's errors to MPI_COMM_WORLD's
// handler). Ranks that made different calls all raise Mismatch, with no
// reduction posted and no buffer touched, and the fallback stays usable. A
// rank that gives up on that exchange completes it at its next call, and
// posts the reduction the others posted for it, before anything else: so
// every rank posts the same collectives in the same order. One timeout,
// from the call, bounds that exchange and the reduction together.
//
// Every rank gets the same verdict for a call. After its reduction completed
// (or its wait expired) each rank tells the others, on the fallback's own
// communicator (point-to-point messages with a per-call tag, which never
// interfere with the collectives), through a bounded allgather:
//   - completed in time: "ok", then it waits for every rank's verdict, at
//     most a timeout (plus a quarter for the messages' transit) after its
//     reduction completed;
//   - the exchange of calls or the reduction did not complete within the
//     timeout, or it completed but this rank got to its verdict only after
//     its own deadline (it was stalled): "gave up", then a roll call of at
//     most half the timeout learns who is there;
//   - the calls differ: "mismatch", which a rank that gave up on the
//     exchange of calls learns here.
// The call succeeds only where every rank said "ok"; otherwise every rank
// that returns raises Mismatch when the calls differ, else Timeout (MpiError
// when MPI failed on a rank), naming the ranks that gave up or never
// answered. Why no rank can succeed while another fails: see reduce() in
// mpi_fallback.cpp.
//
// What an abandoned reduction uses (communicator, datatype, operation,
// staging buffer) must outlive it: MPI completes it whenever the late rank
// arrives, possibly after close() and until MPI_Finalize. So the fallback
// owns its communicator, reaps completed reductions, and close() hands what
// is still pending, with everything it uses, to a keeper that never frees it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/owned_comm.hpp"
#include "bootstrap/timed_exchange.hpp"
#include "transport/host/mpi_reduction_types.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::host {

class MpiFallback final : public FallbackTransport {
 public:
  // Takes `comm` (a duplicate no one else uses; its rank is the rank in the
  // user's communicator) and sets MPI_ERRORS_RETURN on it. Not collective.
  MpiFallback(bootstrap::OwnedComm comm, std::chrono::milliseconds timeout);
  ~MpiFallback() override;

  // Collective over `comm`. Throws Timeout on every rank when the reduction
  // did not complete within the timeout on some rank, or a rank did not
  // confirm it (see above); Mismatch on every rank when ranks made different
  // calls (kind, dtype or element count; nothing posted, buffers untouched,
  // the fallback still usable); MpiError; InvalidArgument (before any MPI
  // call: unknown dtype, null pointers); InvalidUsage after close().
  void all_reduce(const AllReduceArgs& args) override;
  void fused_add_rms_norm(const FusedArgs& args) override;
  // Collective, like all_reduce: reduces `count` elements of contiguous
  // host memory at `data` in place (staged like every call: MPI never sees
  // `data`). `for_fused` names the call as the all-reduce part of
  // fused_add_rms_norm in the exchange of calls, so that ranks making
  // different kinds of call get Mismatch. For the CUDA backend's MPI
  // fallback, which copies GPU tensors to pinned host memory and back.
  void all_reduce_contiguous(void* data, DataType dtype, std::int64_t count, bool for_fused);
  // Local; idempotent. Frees the communicator, datatype and operations, or,
  // when a timed-out call may still be running in MPI, hands them to a
  // process-lifetime keeper (logged at INFO).
  void close() override;

  // Reductions (and an exchange of calls) abandoned by a Timeout that MPI
  // has not completed yet (their buffers stay alive until it does). For
  // tests and diagnostics.
  std::size_t pending_abandoned() noexcept;
  // The fallback's communicator (MPI_COMM_NULL after close()). For tests.
  MPI_Comm comm() const noexcept { return comm_.get(); }

 private:
  // One reduction MPI still owns: its requests (one per piece of at most
  // 2^30 elements) and the buffer they read and write.
  struct Abandoned {
    std::vector<MPI_Request> requests;
    std::vector<std::byte> buffer;
    std::vector<std::byte> gathered;  // the fused op's allgather target (may be empty)
  };
  enum class Kind : std::uint8_t { all_reduce = 0, fused = 1 };

  // How waiting for nonblocking MPI operations ended.
  struct Polled {
    bool completed = false;
    std::chrono::steady_clock::time_point completed_at;
    std::string failure;  // MPI's error, when it failed here
  };
  // An exchange of calls this rank gave up on (see settle()).
  struct Unsettled {
    std::uint64_t call = 0;  // its fallback call number, for messages
    std::vector<MPI_Request> requests;
    std::vector<std::byte> mine;   // what this rank sent
    std::vector<std::byte> calls;  // every rank's call, once it completes
  };

  // Agrees with every rank on the call, reduces staging_[0, count) in place
  // across the ranks, then agrees on the verdict with every rank.
  void reduce(Kind kind, DataType dtype, std::int64_t count);
  // Every rank's encoded call into `gathered`, by an MPI_Iallgather polled
  // until `deadline`; one that does not complete becomes unsettled_.
  Polled exchange_calls(std::span<const std::byte> mine, std::uint64_t call,
                        std::chrono::steady_clock::time_point deadline,
                        std::vector<std::byte>& gathered);
  // Completes unsettled_ by `deadline` and posts the reduction it called
  // for; whether nothing is left unsettled (`failure`: MPI's error).
  bool settle(std::chrono::steady_clock::time_point deadline, std::string& failure);
  // Posts the reduction of data[0, count) (into `gathered` for the fused op
  // at 3+ ranks); MPI's error, or empty.
  std::string post_reduction(Kind kind, DataType dtype, std::int64_t count, std::byte* data,
                             std::vector<std::byte>& gathered, std::vector<MPI_Request>& requests);
  // Posts the reduction of staging_ and polls it until `deadline`; hands an
  // unfinished one to abandoned_.
  Polled post_and_wait(Kind kind, DataType dtype, std::int64_t count,
                       std::chrono::steady_clock::time_point deadline);
  Polled poll(std::vector<MPI_Request>& requests, std::chrono::steady_clock::time_point deadline);
  // staging_[0, count) = the rank-order fp32 sum of gathered_, rounded once.
  void sum_gathered(DataType dtype, std::int64_t count);
  void check_open(const char* what) const;
  static void check_dtype(DataType dtype, const char* what);

  bootstrap::OwnedComm comm_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t calls_ = 0;  // fallback calls made, for messages
  std::unique_ptr<MpiReductionTypes> types_;
  std::unique_ptr<bootstrap::detail::TimedExchange> verdicts_;
  std::vector<std::byte> staging_;
  // The fused op at 3+ ranks gathers every rank's message here (see post_reduction()).
  std::vector<std::byte> gathered_;
  std::vector<Abandoned> abandoned_;
  // Until it is settled, this rank posts nothing else on comm_.
  std::optional<Unsettled> unsettled_;
  // A verdict exchange timed out: point-to-point messages of it may still be
  // in flight on comm_, so close() keeps comm_ alive.
  bool exchange_abandoned_ = false;
  bool closed_ = false;
};

}  // namespace peerplan::transport::host
