// SPDX-License-Identifier: Apache-2.0
#include "transport/host/mpi_fallback.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "bootstrap/mpi_check.hpp"
#include "core/fault_injection.hpp"
#include "core/log.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/errors.hpp"
#include "transport/host/backoff.hpp"
#include "transport/host/reduce.hpp"
#include "transport/host/rms_norm.hpp"
#include "transport/host/strided_copy.hpp"

namespace peerplan::transport::host {
namespace {

using Clock = std::chrono::steady_clock;

// MPI counts are int: larger messages go in pieces of this many elements.
constexpr std::int64_t kMaxMpiCount = std::int64_t{1} << 30;

constexpr const char* kContext = "peerplan MPI fallback";

std::string mpi_failure(int code, const char* call) {
  try {
    bootstrap::detail::check_mpi(code, call, kContext);
  } catch (const MpiError& e) {
    return e.what();
  }
  return {};
}

void check(int code, const char* call) { bootstrap::detail::check_mpi(code, call, kContext); }

std::string join(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

// "rank 2" or "ranks 0, 1".
std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(ranks);
}

// Who a TimedExchange Timeout says it waited for ("rank 3", "ranks 1, 3"),
// from its message; the whole message when it is not in the expected form.
std::string missing_ranks(const std::string& exchange_timeout) {
  const std::string marker = "waiting for rank";
  const auto at = exchange_timeout.find(marker);
  if (at == std::string::npos) return "a rank (" + exchange_timeout + ")";
  const auto begin = at + std::string("waiting for ").size();
  const auto end = exchange_timeout.find(" (", begin);
  return exchange_timeout.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// ---- verdicts ---------------------------------------------------------------

// What a rank says about its part of one call.
enum class State : std::uint8_t {
  ok = 0,        // its reduction completed, and it says so before its own deadline
  gave_up = 1,   // its reduction did not complete within the timeout
  too_late = 2,  // its reduction completed, but it got to its verdict only after its deadline
  failed = 3,    // MPI returned an error
};

struct Verdict {
  State state = State::ok;
  std::uint8_t kind = 0;   // MpiFallback::Kind
  std::uint8_t dtype = 0;  // DataType
  std::int64_t count = 0;
  std::int64_t posted_ns = 0;  // system clock when it posted the reduction
};

constexpr std::size_t kVerdictBytes = 3 + 2 * sizeof(std::int64_t);

std::array<std::byte, kVerdictBytes> encode(const Verdict& v) {
  std::array<std::byte, kVerdictBytes> out{};
  out[0] = static_cast<std::byte>(v.state);
  out[1] = static_cast<std::byte>(v.kind);
  out[2] = static_cast<std::byte>(v.dtype);
  std::memcpy(out.data() + 3, &v.count, sizeof v.count);
  std::memcpy(out.data() + 3 + sizeof v.count, &v.posted_ns, sizeof v.posted_ns);
  return out;
}

Verdict decode(const bootstrap::Blob& blob, int rank) {
  if (blob.size() != kVerdictBytes || static_cast<std::uint8_t>(blob[0]) > 3) {
    throw InternalError(std::string(kContext) + ": rank " + std::to_string(rank) +
                        " sent a malformed verdict (" + std::to_string(blob.size()) +
                        " bytes); please report this");
  }
  Verdict v;
  v.state = static_cast<State>(blob[0]);
  v.kind = static_cast<std::uint8_t>(blob[1]);
  v.dtype = static_cast<std::uint8_t>(blob[2]);
  std::memcpy(&v.count, blob.data() + 3, sizeof v.count);
  std::memcpy(&v.posted_ns, blob.data() + 3 + sizeof v.count, sizeof v.posted_ns);
  return v;
}

const char* kind_name(std::uint8_t kind) {
  return kind == 0 ? "all_reduce" : "fused_add_rms_norm (all-reduce part)";
}

std::string describe_call(std::uint8_t kind, std::uint8_t dtype, std::int64_t count) {
  return std::string(kind_name(kind)) + " of " + std::to_string(count) + " " +
         to_string(static_cast<DataType>(dtype)) + " elements";
}

// ---- the keeper -------------------------------------------------------------

// What a closed fallback leaves behind while MPI may still run a reduction
// (or a verdict message) it abandoned after a timeout.
struct Remains {
  bootstrap::OwnedComm comm;
  std::unique_ptr<MpiReductionTypes> types;
  std::unique_ptr<bootstrap::detail::TimedExchange> verdicts;
  std::vector<std::vector<MPI_Request>> requests;
  std::vector<std::vector<std::byte>> buffers;
};

// Deliberately never freed. An abandoned MPI_Iallreduce completes whenever
// the late rank arrives — possibly after close() and until MPI_Finalize —
// and Open MPI then uses its communicator, datatype and operation and
// writes its buffer: freeing any of them crashed the process (in whatever
// MPI call progressed the request, or in MPI_Finalize). A nonblocking
// collective's request may not be freed either (MPI_Request_free is
// erroneous for it). Only a communicator that timed out in the fallback
// puts anything here; MPI_Finalize releases the MPI objects, the memory
// goes with the process. The vector itself is never destroyed, so no
// static destructor touches MPI after MPI_Finalize.
void keep_until_exit(std::unique_ptr<Remains> remains) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<Remains>>();
  const std::lock_guard lock(mutex);
  kept->push_back(std::move(remains));
}

bool mpi_finalized() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

MpiFallback::MpiFallback(bootstrap::OwnedComm comm, std::chrono::milliseconds timeout)
    : comm_(std::move(comm)), timeout_(timeout) {
  if (!comm_) {
    throw InvalidArgument(std::string(kContext) + ": the communicator is MPI_COMM_NULL");
  }
  if (timeout.count() <= 0) {
    throw InvalidArgument(std::string(kContext) + ": the timeout must be positive (got " +
                          std::to_string(timeout.count()) + " ms); set PEERPLAN_TIMEOUT_MS > 0");
  }
  // Errors come back as codes (MpiError), never abort the job.
  check(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN),
        "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)");
  check(MPI_Comm_rank(comm_.get(), &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_.get(), &size_), "MPI_Comm_size");
  types_ = std::make_unique<MpiReductionTypes>();
  verdicts_ = std::make_unique<bootstrap::detail::TimedExchange>(comm_.get(), timeout_);
}

MpiFallback::~MpiFallback() {
  try {
    close();
  } catch (...) {
    // close() only logs and moves things; nothing to report from a destructor.
  }
}

void MpiFallback::close() {
  if (closed_) return;
  closed_ = true;
  if (mpi_finalized()) {
    // MPI released its objects and runs nothing any more: just forget them.
    types_.reset();  // release() skips MPI once finalised
    verdicts_.reset();
    comm_.reset();
    abandoned_.clear();
    return;
  }
  pending_abandoned();
  if (abandoned_.empty() && !exchange_abandoned_) {
    verdicts_.reset();
    types_.reset();
    comm_.reset();
    staging_ = {};
    gathered_ = {};
    return;
  }
  const std::size_t pending = abandoned_.size();
  auto remains = std::make_unique<Remains>();
  remains->comm = std::move(comm_);
  remains->types = std::move(types_);
  remains->verdicts = std::move(verdicts_);
  for (Abandoned& a : abandoned_) {
    remains->requests.push_back(std::move(a.requests));
    remains->buffers.push_back(std::move(a.buffer));
    remains->buffers.push_back(std::move(a.gathered));
  }
  abandoned_.clear();
  keep_until_exit(std::move(remains));
  log::info(log::Subsystem::fallback,
            std::string(kContext) + ": close() after a timeout: " + std::to_string(pending) +
                " abandoned reduction(s) still pending in MPI" +
                (exchange_abandoned_ ? ", and messages of an abandoned verdict exchange," : "") +
                " keep their communicator, datatype, operations and buffers alive until the "
                "process exits (deliberately never freed: MPI may complete them at any time "
                "until MPI_Finalize, and freeing what they use crashes it)");
}

std::size_t MpiFallback::pending_abandoned() noexcept {
  if (mpi_finalized()) return abandoned_.size();
  std::erase_if(abandoned_, [](Abandoned& a) {
    int complete = 0;
    // Completed requests become MPI_REQUEST_NULL; none is modified unless all completed.
    const int rc = MPI_Testall(static_cast<int>(a.requests.size()), a.requests.data(), &complete,
                               MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS && complete != 0;
  });
  return abandoned_.size();
}

void MpiFallback::check_open(const char* what) const {
  if (closed_) {
    throw InvalidUsage(std::string(kContext) + ": " + what +
                       " after close(); create a new communicator.");
  }
}

void MpiFallback::check_dtype(DataType dtype, const char* what) {
  if (dtype != DataType::f16 && dtype != DataType::bf16 && dtype != DataType::f32) {
    throw InvalidArgument(std::string(kContext) + ": " + what + ": unknown dtype (value " +
                          std::to_string(static_cast<int>(dtype)) +
                          "); use DataType::f16, DataType::bf16 or DataType::f32");
  }
}

// Why no rank can return a result while another raises for the same call
// (n ranks, timeout T):
//  - A rank X succeeds only when it received "ok", for the same call, from
//    every rank.
//  - Take any rank Y. X got "ok" from Y, so Y's reduction completed, at
//    time c_Y, and Y waits for the verdicts until c_Y + T + T/4.
//  - A rank Z says "ok" only before its own deadline p_Z + T, where p_Z is
//    read before Z posts its reduction (later it says "too late", which
//    counts as giving up). No rank's reduction can complete before every
//    rank has posted (each result needs every contribution), so p_Z <= c_Y,
//    and Z's "ok" left before c_Y + T: a quarter of the timeout before Y
//    stops waiting, which covers the message's way (Y matches every message
//    that has arrived before it looks at its deadline).
//  - So Y receives the same n "ok"s as X and succeeds too.
// Hence when any rank raises for a call (gave up, timed out waiting for a
// verdict, saw another rank give up), no rank succeeds: the verdict is the
// same everywhere. The assumption is that a verdict message, once this rank
// decided to send it, can be matched at the receiver within T/4 (shared
// memory: microseconds; any working network: well under a second).
void MpiFallback::reduce(Kind kind, DataType dtype, std::int64_t count) {
  pending_abandoned();  // reap reductions a late rank has completed since
  const std::uint64_t call = ++calls_;
  // Built only for an error: the fast path allocates nothing for messages.
  const auto what = [&] {
    return std::string(kContext) + ": " +
           describe_call(static_cast<std::uint8_t>(kind), static_cast<std::uint8_t>(dtype), count) +
           " (fallback call #" + std::to_string(call) + " on rank " + std::to_string(rank_) + ")";
  };
  const std::size_t bytes = element_size(dtype);

  Verdict mine;
  mine.kind = static_cast<std::uint8_t>(kind);
  mine.dtype = static_cast<std::uint8_t>(dtype);
  mine.count = count;
  mine.posted_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // Read before posting (see the proof above).
  const auto posted = Clock::now();
  const auto deadline = posted + timeout_;

  // The fused op's all-reduce at 3+ ranks gathers every rank's message and
  // sums it here in fp32, in rank order, rounded once: the bits of the P2P
  // kernels, whichever path a call takes (MPI's reduction would round after
  // every pairwise add, in an order of its choosing). At 2 ranks MPI's sum
  // is that single fp32 add already. It moves (n-1)/n x n x the bytes of a
  // reduce-scatter + all-gather, which the fused op's row sizes afford.
  const bool gather = kind == Kind::fused && size_ > 2;
  const std::int64_t piece =
      gather ? kMaxMpiCount / static_cast<std::int64_t>(bytes) : kMaxMpiCount;
  if (gather)
    gathered_.resize(static_cast<std::size_t>(size_) * static_cast<std::size_t>(count) * bytes);
  std::vector<MPI_Request> requests;
  std::string failure;  // MPI's error, when it failed here
  for (std::int64_t first = 0; first < count; first += piece) {
    const auto len = static_cast<int>(std::min(piece, count - first));
    std::byte* mine_at = staging_.data() + first * static_cast<std::int64_t>(bytes);
    MPI_Request request = MPI_REQUEST_NULL;
    // Piece p of every rank lands at size x first x bytes, rank by rank.
    const int rc =
        gather ? MPI_Iallgather(mine_at, len * static_cast<int>(bytes), MPI_BYTE,
                                gathered_.data() + size_ * first * static_cast<std::int64_t>(bytes),
                                len * static_cast<int>(bytes), MPI_BYTE, comm_.get(), &request)
               : MPI_Iallreduce(MPI_IN_PLACE, mine_at, len, types_->datatype(dtype),
                                types_->sum(dtype), comm_.get(), &request);
    if (rc != MPI_SUCCESS) {
      failure = mpi_failure(rc, gather ? "MPI_Iallgather" : "MPI_Iallreduce");
      break;
    }
    requests.push_back(request);
  }
  PEERPLAN_FAULT_POINT("fallback.posted", rank_);

  bool completed = false;
  Clock::time_point completed_at;
  if (failure.empty()) {
    Backoff backoff;
    for (;;) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                                 MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        failure = mpi_failure(rc, "MPI_Testall");
        break;
      }
      if (done) {
        completed = true;
        completed_at = Clock::now();
        break;
      }
      if (Clock::now() >= deadline) break;
      backoff.pause();
    }
  }
  if (!completed && std::any_of(requests.begin(), requests.end(),
                                [](MPI_Request r) { return r != MPI_REQUEST_NULL; })) {
    // MPI still owns the buffer: hand it over with the requests.
    abandoned_.push_back({std::move(requests), std::move(staging_), std::move(gathered_)});
    staging_ = {};
    gathered_ = {};
  }

  if (completed) {
    PEERPLAN_FAULT_POINT("fallback.reduced", rank_);
    // Vouch for the result only before this rank's own deadline.
    mine.state = Clock::now() < deadline ? State::ok : State::too_late;
  } else {
    mine.state = failure.empty() ? State::gave_up : State::failed;
  }

  // The verdicts. "ok": wait for every rank's, up to a timeout (+ T/4 for
  // the messages' way) after the reduction completed here; otherwise a
  // short roll call (detection within 1.5 x the timeout).
  std::chrono::milliseconds bound = timeout_ / 2;
  if (mine.state == State::ok) {
    bound = std::max(std::chrono::milliseconds(1),
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         completed_at + timeout_ + timeout_ / 4 - Clock::now()));
  }
  bound = std::max(bound, std::chrono::milliseconds(1));
  const auto verdict_at = Clock::now();
  const auto encoded = encode(mine);
  std::vector<bootstrap::Blob> blobs;
  std::string unanswered;  // the exchange's Timeout: who did not answer
  try {
    blobs = verdicts_->allgather(encoded, "fallback verdict", bound);
  } catch (const Timeout& e) {
    exchange_abandoned_ = true;
    unanswered = e.what();
  } catch (...) {
    exchange_abandoned_ = true;
    throw;
  }

  if (mine.state == State::failed) {
    throw MpiError(what() + ": " + failure +
                   " (every rank's call fails: this rank told the others)");
  }
  const auto timeout_text = [&] { return std::to_string(timeout_.count()) + " ms"; };
  const auto ms_since_post = [&](Clock::time_point t) {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::milliseconds>(t - posted).count());
  };
  // What happened on this rank, for the messages.
  const auto here = [&]() -> std::string {
    switch (mine.state) {
      case State::ok:
        return "the reduction completed here";
      case State::gave_up:
        return "the reduction did not complete here within PEERPLAN_TIMEOUT_MS=" + timeout_text() +
               " (gave up after " + ms_since_post(verdict_at) + " ms)";
      default:
        return "the reduction completed here after " + ms_since_post(completed_at) +
               " ms, but this rank was stalled and could confirm it only after " +
               ms_since_post(verdict_at) + " ms, past PEERPLAN_TIMEOUT_MS=" + timeout_text() +
               ", so it gave up";
    }
  };
  const char* const tail =
      ". Every rank raises Timeout for this call; none uses its result. If the ranks are merely "
      "slow, raise PEERPLAN_TIMEOUT_MS; PEERPLAN_DEBUG=TRACE logs every call's route on every "
      "rank.";
  if (!unanswered.empty()) {
    throw Timeout(what() + ": " + here() + ", and " + missing_ranks(unanswered) + " did not " +
                  (mine.state == State::ok ? "confirm it within " : "answer a roll call within ") +
                  std::to_string(bound.count()) +
                  " ms more: stopped, crashed, stalled, or making collective calls in a "
                  "different order" +
                  tail);
  }

  std::vector<Verdict> verdicts(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    verdicts[static_cast<std::size_t>(r)] =
        r == rank_ ? mine : decode(blobs[static_cast<std::size_t>(r)], r);
  }
  std::vector<int> failed, gave_up, too_late, differing;
  int last = 0;
  std::int64_t first_ns = verdicts[0].posted_ns;
  for (int r = 0; r < size_; ++r) {
    const Verdict& v = verdicts[static_cast<std::size_t>(r)];
    if (v.kind != mine.kind || v.dtype != mine.dtype || v.count != mine.count)
      differing.push_back(r);
    if (v.posted_ns > verdicts[static_cast<std::size_t>(last)].posted_ns) last = r;
    first_ns = std::min(first_ns, v.posted_ns);
    if (r == rank_) continue;  // said as `here`
    if (v.state == State::failed) failed.push_back(r);
    if (v.state == State::gave_up) gave_up.push_back(r);
    if (v.state == State::too_late) too_late.push_back(r);
  }
  if (!failed.empty()) {
    throw MpiError(what() + ": MPI failed on " + ranks_phrase(failed) +
                   " during this call (their error says why); every rank's call fails.");
  }
  if (!differing.empty()) {
    std::string calls;
    for (int r = 0; r < size_; ++r) {
      const Verdict& v = verdicts[static_cast<std::size_t>(r)];
      calls += (r ? "; rank " : "rank ") + std::to_string(r) + ": " +
               describe_call(v.kind, v.dtype, v.count);
    }
    throw Mismatch(what() + ": the ranks made different fallback calls at this point (" + calls +
                   "); every rank must make the same calls, with the same dtype and shape, in "
                   "the same order. The result is discarded on every rank.");
  }
  if (mine.state == State::ok && gave_up.empty() && too_late.empty()) {  // all "ok"
    if (gather) sum_gathered(dtype, count);
    return;
  }

  std::string others;
  if (!gave_up.empty()) {
    others += "; " + ranks_phrase(gave_up) +
              " gave up waiting for it (the reduction did not "
              "complete there within " +
              timeout_text() + ")";
  }
  if (!too_late.empty()) {
    others += "; " + ranks_phrase(too_late) +
              " completed it but stalled past the timeout before confirming it";
  }
  const std::int64_t lag_ms =
      (verdicts[static_cast<std::size_t>(last)].posted_ns - first_ns) / 1000000;
  if (lag_ms >= timeout_.count() / 4) {
    others += "; the last rank to make the call was rank " + std::to_string(last) +
              (last == rank_ ? " (this one)" : "") + ", " + std::to_string(lag_ms) +
              " ms after the first (by the ranks' clocks)";
  }
  throw Timeout(what() + ": " + here() + others + tail);
}

void MpiFallback::sum_gathered(DataType dtype, std::int64_t count) {
  const std::size_t bytes = element_size(dtype);
  const std::int64_t piece = kMaxMpiCount / static_cast<std::int64_t>(bytes);
  std::vector<const void*> sources(static_cast<std::size_t>(size_));
  for (std::int64_t first = 0; first < count; first += piece) {
    const std::int64_t len = std::min(piece, count - first);
    const std::byte* region = gathered_.data() + size_ * first * static_cast<std::int64_t>(bytes);
    for (int r = 0; r < size_; ++r)
      sources[static_cast<std::size_t>(r)] = region + r * len * static_cast<std::int64_t>(bytes);
    reduce_sources(dtype, sources.data(), size_, 0, len,
                   staging_.data() + first * static_cast<std::int64_t>(bytes));
  }
}

void MpiFallback::all_reduce(const AllReduceArgs& args) {
  check_open("all_reduce");
  check_dtype(args.dtype, "all_reduce");
  if (args.layout == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": all_reduce: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  if (args.in == nullptr || args.out == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": all_reduce: in or out is null");
  }
  const std::size_t bytes = element_size(args.dtype);
  staging_.resize(static_cast<std::size_t>(count) * bytes);
  pack(*args.layout, bytes, args.in, staging_.data());
  reduce(Kind::all_reduce, args.dtype, count);
  unpack(*args.layout, bytes, staging_.data(), args.out);
}

void MpiFallback::all_reduce_contiguous(void* data, DataType dtype, std::int64_t count,
                                        bool for_fused) {
  const char* what = for_fused ? "fused_add_rms_norm" : "all_reduce";
  check_open(what);
  check_dtype(dtype, what);
  if (count <= 0) return;
  if (data == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": " + what + ": the buffer is null");
  }
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(dtype);
  staging_.resize(bytes);
  std::memcpy(staging_.data(), data, bytes);
  reduce(for_fused ? Kind::fused : Kind::all_reduce, dtype, count);
  std::memcpy(data, staging_.data(), bytes);
}

void MpiFallback::fused_add_rms_norm(const FusedArgs& args) {
  check_open("fused_add_rms_norm");
  check_dtype(args.dtype, "fused_add_rms_norm");
  if (args.layout == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": fused_add_rms_norm: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  if (args.inout == nullptr || args.residual == nullptr || args.weight == nullptr) {
    throw InvalidArgument(std::string(kContext) +
                          ": fused_add_rms_norm: inout, residual or weight is null");
  }
  if (!(args.eps >= 0.0f)) {
    throw InvalidArgument(std::string(kContext) + ": fused_add_rms_norm: eps must be >= 0");
  }
  const std::size_t bytes = element_size(args.dtype);
  staging_.resize(static_cast<std::size_t>(count) * bytes);
  pack(*args.layout, bytes, args.inout, staging_.data());
  reduce(Kind::fused, args.dtype, count);
  add_rms_norm(args.dtype, *args.layout, staging_.data(), args.inout, args.residual, args.weight,
               args.eps);
}

}  // namespace peerplan::transport::host
