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
#include "transport/host/split_verdict.hpp"
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

// ---- what the ranks tell each other -----------------------------------------

// The call a rank makes, told to the others before it posts the reduction.
struct CallShape {
  std::uint8_t kind = 0;   // MpiFallback::Kind
  std::uint8_t dtype = 0;  // DataType
  std::int64_t count = 0;
  std::int64_t started_ns = 0;  // system clock when it made the call (for messages)
};

constexpr int kShapeBytes = 2 + 2 * sizeof(std::int64_t);

std::array<std::byte, kShapeBytes> encode(const CallShape& c) {
  std::array<std::byte, kShapeBytes> out{};
  out[0] = static_cast<std::byte>(c.kind);
  out[1] = static_cast<std::byte>(c.dtype);
  std::memcpy(out.data() + 2, &c.count, sizeof c.count);
  std::memcpy(out.data() + 2 + sizeof c.count, &c.started_ns, sizeof c.started_ns);
  return out;
}

// Every rank's call, by rank, from an exchange of calls.
std::vector<CallShape> decode_calls(const std::vector<std::byte>& gathered) {
  std::vector<CallShape> calls(gathered.size() / kShapeBytes);
  for (std::size_t r = 0; r < calls.size(); ++r) {
    const std::byte* at = gathered.data() + r * kShapeBytes;
    calls[r].kind = static_cast<std::uint8_t>(at[0]);
    calls[r].dtype = static_cast<std::uint8_t>(at[1]);
    std::memcpy(&calls[r].count, at + 2, sizeof calls[r].count);
    std::memcpy(&calls[r].started_ns, at + 2 + sizeof calls[r].count, sizeof calls[r].started_ns);
  }
  return calls;
}

bool all_same(const std::vector<CallShape>& calls) {
  return std::all_of(calls.begin(), calls.end(), [&](const CallShape& c) {
    return c.kind == calls[0].kind && c.dtype == calls[0].dtype && c.count == calls[0].count;
  });
}

const char* kind_name(std::uint8_t kind) {
  return kind == 0 ? "all_reduce" : "fused_add_rms_norm (all-reduce part)";
}

std::string describe_call(std::uint8_t kind, std::uint8_t dtype, std::int64_t count) {
  return std::string(kind_name(kind)) + " of " + std::to_string(count) + " " +
         to_string(static_cast<DataType>(dtype)) + " elements";
}

// "rank 0: all_reduce of 64 f32 elements; rank 1: ...".
std::string describe_calls(const std::vector<CallShape>& calls) {
  std::string listed;
  for (std::size_t r = 0; r < calls.size(); ++r) {
    listed += (r ? "; rank " : "rank ") + std::to_string(r) + ": " +
              describe_call(calls[r].kind, calls[r].dtype, calls[r].count);
  }
  return listed;
}

// What a rank says about its part of one call, after it.
enum class State : std::uint8_t {
  ok = 0,        // its reduction completed, and it says so before its own deadline
  gave_up = 1,   // its reduction did not complete within the timeout
  too_late = 2,  // its reduction completed, but it got to its verdict only after its deadline
  failed = 3,    // MPI returned an error
  absent = 4,    // its exchange of calls did not complete within the timeout: no reduction
  mismatch = 5,  // the ranks' calls differ: no rank posted a reduction
};

State decode_state(const bootstrap::Blob& blob, int rank) {
  if (blob.size() != 1 || static_cast<std::uint8_t>(blob[0]) > 5) {
    throw InternalError(std::string(kContext) + ": rank " + std::to_string(rank) +
                        " sent a malformed verdict (" + std::to_string(blob.size()) +
                        " bytes); please report this");
  }
  return static_cast<State>(blob[0]);
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
    unsettled_.reset();
    return;
  }
  pending_abandoned();
  if (abandoned_.empty() && !unsettled_ && !exchange_abandoned_) {
    verdicts_.reset();
    types_.reset();
    comm_.reset();
    staging_ = {};
    gathered_ = {};
    return;
  }
  const std::size_t pending = pending_abandoned();
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
  if (unsettled_) {
    remains->requests.push_back(std::move(unsettled_->requests));
    remains->buffers.push_back(std::move(unsettled_->mine));
    remains->buffers.push_back(std::move(unsettled_->calls));
    unsettled_.reset();
  }
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
  if (mpi_finalized()) return abandoned_.size() + (unsettled_ ? 1 : 0);
  std::erase_if(abandoned_, [](Abandoned& a) {
    int complete = 0;
    // Completed requests become MPI_REQUEST_NULL; none is modified unless all completed.
    const int rc = MPI_Testall(static_cast<int>(a.requests.size()), a.requests.data(), &complete,
                               MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS && complete != 0;
  });
  return abandoned_.size() + (unsettled_ ? 1 : 0);
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
//  - A rank X succeeds only when it received "ok" from every rank.
//  - Take any rank Y. X got "ok" from Y, so Y's reduction completed, at
//    time c_Y, and Y waits for the verdicts until c_Y + T + T/4.
//  - A rank Z's "ok" to a rank leaves only before Z's own deadline p_Z + T
//    (the clock is read before each message), where p_Z is read when Z
//    makes the call, before it posts its exchange of calls and its
//    reduction (a later message says "too late", which counts as giving up).
//    No rank's reduction can complete before every rank has posted (each
//    result needs every contribution), so p_Z <= c_Y, and Z's "ok" left
//    before c_Y + T: a quarter of the timeout before Y stops waiting, which
//    covers the message's way (Y matches every message that has arrived
//    before it looks at its deadline).
//  - So Y receives the same n "ok"s as X and succeeds too.
// Hence when any rank raises for a call (gave up, timed out waiting for a
// verdict, saw another rank give up), no rank succeeds: the verdict is the
// same everywhere, but where Z stalled between two of its messages past
// p_Z + T: some ranks got "ok", others "too late". Z sees that (the clock
// is read after each message too) and says in its Timeout who got what.
// The assumption is that a verdict message, once this rank decided to send
// it, can be matched at the receiver within T/4 (shared memory:
// microseconds; any working network: well under a second).
// Mismatch is the same everywhere too: the exchange of calls gives every
// rank where it completes the same n calls, and a rank where it did not
// hears "mismatch" in the verdicts (a rank still waiting for it posts no
// reduction, so no rank's reduction completes).
void MpiFallback::reduce(Kind kind, DataType dtype, std::int64_t count) {
  pending_abandoned();  // reap reductions a late rank has completed since
  const std::uint64_t call = ++calls_;
  // Built only for an error: the fast path allocates nothing for messages.
  const auto what = [&] {
    return std::string(kContext) + ": " +
           describe_call(static_cast<std::uint8_t>(kind), static_cast<std::uint8_t>(dtype), count) +
           " (fallback call #" + std::to_string(call) + " on rank " + std::to_string(rank_) + ")";
  };

  CallShape shape;
  shape.kind = static_cast<std::uint8_t>(kind);
  shape.dtype = static_cast<std::uint8_t>(dtype);
  shape.count = count;
  shape.started_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  // Read before anything is posted (see the proof above).
  const auto started = Clock::now();
  const auto deadline = started + timeout_;

  // Agree on the call before posting the reduction: with different counts
  // MPI writes past the smaller buffer or aborts the whole job. The verdict
  // comes too late for that and nothing else is exchanged before posting,
  // so this is one small collective more per call (about 1 us at 2 ranks,
  // 5 us at 4 on 2 cores); a crashed job costs far more.
  std::vector<CallShape> calls;  // every rank's, when the exchange completed
  Polled exchanged;
  if (settle(deadline, exchanged.failure)) {
    std::vector<std::byte> gathered;
    exchanged = exchange_calls(encode(shape), call, deadline, gathered);
    if (exchanged.completed) calls = decode_calls(gathered);
  }
  Polled reduction;
  State state = exchanged.failure.empty() ? State::absent : State::failed;
  if (exchanged.completed && !all_same(calls)) {
    state = State::mismatch;
  } else if (exchanged.completed) {
    reduction = post_and_wait(kind, dtype, count, deadline);
    if (reduction.completed) {
      PEERPLAN_FAULT_POINT("fallback.reduced", rank_);
      // Vouch for the result only before this rank's own deadline.
      state = Clock::now() < deadline ? State::ok : State::too_late;
    } else {
      state = reduction.failure.empty() ? State::gave_up : State::failed;
    }
  }

  // The verdicts. "ok": wait for every rank's, up to a timeout (+ T/4 for
  // the messages' way) after the reduction completed here; otherwise a
  // short roll call (detection within 1.5 x the timeout). Every call has
  // one, a Mismatch too: a rank that gave up on the exchange of calls
  // learns of it here, and the exchanges' tags stay in step.
  std::chrono::milliseconds bound = timeout_ / 2;
  if (state == State::ok) {
    bound = std::chrono::duration_cast<std::chrono::milliseconds>(
        reduction.completed_at + timeout_ + timeout_ / 4 - Clock::now());
  }
  bound = std::max(bound, std::chrono::milliseconds(1));
  const auto verdict_at = Clock::now();
  const std::array<std::byte, 1> encoded{static_cast<std::byte>(state)};
  std::vector<bootstrap::Blob> blobs;
  std::string unanswered;  // the exchange's Timeout: who did not answer
  bootstrap::detail::TimedExchange::Said said;
  try {
    if (state == State::ok) {
      // "ok" only in the messages that leave before the deadline.
      const std::array<std::byte, 1> late{static_cast<std::byte>(State::too_late)};
      blobs = verdicts_->allgather_by(encoded, late, deadline, said, "fallback verdict", bound);
    } else {
      blobs = verdicts_->allgather(encoded, "fallback verdict", bound);
    }
  } catch (const Timeout& e) {
    exchange_abandoned_ = true;
    unanswered = e.what();
  } catch (...) {
    exchange_abandoned_ = true;
    throw;
  }

  if (state == State::failed) {
    throw MpiError(what() + ": " + exchanged.failure + reduction.failure +
                   " (every rank's call fails: this rank told the others)");
  }
  const char* const mismatch_tail =
      "; every rank must make the same calls, with the same dtype and shape, in the same "
      "order. No rank posted the reduction or touched a buffer; later calls work.";
  if (state == State::mismatch) {
    throw Mismatch(what() + ": the ranks made different fallback calls at this point (" +
                   describe_calls(calls) + ")" + mismatch_tail);
  }
  const auto timeout_text = [&] { return std::to_string(timeout_.count()) + " ms"; };
  const auto ms_since_start = [&](Clock::time_point t) {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::milliseconds>(t - started).count());
  };
  // What happened on this rank, for the messages.
  const auto here = [&]() -> std::string {
    switch (state) {
      case State::ok:
        return "the reduction completed here";
      case State::absent:
        return "not every rank made " +
               (unsettled_ && unsettled_->call != call
                    ? "fallback call #" + std::to_string(unsettled_->call) +
                          " (which timed out) yet, so this rank posted nothing for this one"
                    : std::string("this call")) +
               " within PEERPLAN_TIMEOUT_MS=" + timeout_text() + " (gave up after " +
               ms_since_start(verdict_at) + " ms, before posting the reduction)";
      case State::gave_up:
        return "the reduction did not complete here within PEERPLAN_TIMEOUT_MS=" + timeout_text() +
               " (gave up after " + ms_since_start(verdict_at) + " ms)";
      default:
        return "the reduction completed here after " + ms_since_start(reduction.completed_at) +
               " ms, but this rank was stalled and could confirm it only after " +
               ms_since_start(verdict_at) + " ms, past PEERPLAN_TIMEOUT_MS=" + timeout_text() +
               ", so it gave up";
    }
  };
  const char* const slow_tail =
      " If the ranks are merely slow, raise PEERPLAN_TIMEOUT_MS; PEERPLAN_DEBUG=TRACE logs every "
      "call's route on every rank.";
  const std::string tail =
      std::string(". Every rank raises Timeout for this call; none uses its result.") + slow_tail;
  if (state == State::ok && !said.all_in_time()) {
    exchange_abandoned_ = true;  // the others' words stay unread
    if (said.all_late()) {       // the deadline passed just before the first send
      state = State::too_late;
      throw Timeout(what() + ": " + here() + tail);
    }
    throw Timeout(what() + ": the reduction completed here, but " +
                  describe_split_verdict(said, timeout_, "too late") + "." + slow_tail);
  }
  if (!unanswered.empty()) {
    throw Timeout(what() + ": " + here() + ", and " + missing_ranks(unanswered) + " did not " +
                  (state == State::ok ? "confirm it within " : "answer a roll call within ") +
                  std::to_string(bound.count()) +
                  " ms more: stopped, crashed, stalled, or making collective calls in a "
                  "different order" +
                  tail);
  }

  std::vector<int> failed, gave_up, too_late, absent, mismatched;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;  // said as `here`
    switch (decode_state(blobs[static_cast<std::size_t>(r)], r)) {
      case State::ok:
        break;
      case State::failed:
        failed.push_back(r);
        break;
      case State::gave_up:
        gave_up.push_back(r);
        break;
      case State::too_late:
        too_late.push_back(r);
        break;
      case State::absent:
        absent.push_back(r);
        break;
      case State::mismatch:
        mismatched.push_back(r);
        break;
    }
  }
  if (!failed.empty()) {
    throw MpiError(what() + ": MPI failed on " + ranks_phrase(failed) +
                   " during this call (their error says why); every rank's call fails.");
  }
  if (!mismatched.empty()) {
    throw Mismatch(what() + ": " + ranks_phrase(mismatched) +
                   " found that the ranks made different fallback calls at this point (their "
                   "error lists them)" +
                   mismatch_tail);
  }
  if (state == State::ok && gave_up.empty() && too_late.empty() && absent.empty()) {  // all "ok"
    if (kind == Kind::fused && size_ > 2) sum_gathered(dtype, count);  // see post_reduction()
    return;
  }

  std::string others;
  if (!absent.empty()) {
    others += "; " + ranks_phrase(absent) +
              " gave up before posting it (not every rank had made the call there within " +
              timeout_text() + ")";
  }
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
  if (!calls.empty()) {  // by the ranks' clocks, when they made the call
    const auto by_start = [](const CallShape& a, const CallShape& b) {
      return a.started_ns < b.started_ns;
    };
    const auto [first, last] = std::minmax_element(calls.begin(), calls.end(), by_start);
    const std::int64_t lag_ms = (last->started_ns - first->started_ns) / 1000000;
    const auto last_rank = static_cast<int>(last - calls.begin());
    if (lag_ms >= timeout_.count() / 4) {
      others += "; the last rank to make the call was rank " + std::to_string(last_rank) +
                (last_rank == rank_ ? " (this one)" : "") + ", " + std::to_string(lag_ms) +
                " ms after the first (by the ranks' clocks)";
    }
  }
  throw Timeout(what() + ": " + here() + others + tail);
}

// A fixed-size collective that every rank posts for every call: it can
// never be erroneous, whatever the ranks' calls, and a rank that gives up
// on it still posts the same collectives as the others (settle()).
MpiFallback::Polled MpiFallback::exchange_calls(std::span<const std::byte> mine, std::uint64_t call,
                                                Clock::time_point deadline,
                                                std::vector<std::byte>& gathered) {
  Unsettled exchange;
  exchange.call = call;
  exchange.mine.assign(mine.begin(), mine.end());
  exchange.calls.resize(static_cast<std::size_t>(size_) * kShapeBytes);
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallgather(exchange.mine.data(), kShapeBytes, MPI_BYTE, exchange.calls.data(),
                                kShapeBytes, MPI_BYTE, comm_.get(), &request);
  Polled polled;
  if (rc != MPI_SUCCESS) {
    polled.failure = mpi_failure(rc, "MPI_Iallgather (the exchange of calls)");
    return polled;
  }
  exchange.requests.push_back(request);
  polled = poll(exchange.requests, deadline);
  if (polled.completed) {
    gathered = std::move(exchange.calls);
  } else if (exchange.requests[0] != MPI_REQUEST_NULL) {
    unsettled_ = std::move(exchange);  // MPI still owns its buffers
  }
  return polled;
}

// A rank that gave up on an exchange of calls posted no reduction, while
// the others, their calls agreeing, may have. Before it posts anything
// else it completes that exchange and, where the calls agreed, posts the
// same reduction (on a buffer of its own, the result discarded), so that
// every rank posts the same collectives in the same order and the late
// rank's reduction completes.
bool MpiFallback::settle(Clock::time_point deadline, std::string& failure) {
  if (!unsettled_) return true;
  const Polled polled = poll(unsettled_->requests, deadline);
  if (!polled.completed) {
    failure = polled.failure;
    return false;
  }
  const std::vector<CallShape> calls = decode_calls(unsettled_->calls);
  unsettled_.reset();
  if (!all_same(calls)) return true;  // no rank posted a reduction for it
  const auto kind = static_cast<Kind>(calls[0].kind);
  const auto dtype = static_cast<DataType>(calls[0].dtype);
  Abandoned owed;
  owed.buffer.resize(static_cast<std::size_t>(calls[0].count) * element_size(dtype));
  failure =
      post_reduction(kind, dtype, calls[0].count, owed.buffer.data(), owed.gathered, owed.requests);
  abandoned_.push_back(std::move(owed));  // reaped once it completes
  return failure.empty();
}

std::string MpiFallback::post_reduction(Kind kind, DataType dtype, std::int64_t count,
                                        std::byte* data, std::vector<std::byte>& gathered,
                                        std::vector<MPI_Request>& requests) {
  const std::size_t bytes = element_size(dtype);
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
    gathered.resize(static_cast<std::size_t>(size_) * static_cast<std::size_t>(count) * bytes);
  for (std::int64_t first = 0; first < count; first += piece) {
    const auto len = static_cast<int>(std::min(piece, count - first));
    std::byte* mine_at = data + first * static_cast<std::int64_t>(bytes);
    MPI_Request request = MPI_REQUEST_NULL;
    // Piece p of every rank lands at size x first x bytes, rank by rank.
    const int rc =
        gather ? MPI_Iallgather(mine_at, len * static_cast<int>(bytes), MPI_BYTE,
                                gathered.data() + size_ * first * static_cast<std::int64_t>(bytes),
                                len * static_cast<int>(bytes), MPI_BYTE, comm_.get(), &request)
               : MPI_Iallreduce(MPI_IN_PLACE, mine_at, len, types_->datatype(dtype),
                                types_->sum(dtype), comm_.get(), &request);
    if (rc != MPI_SUCCESS) return mpi_failure(rc, gather ? "MPI_Iallgather" : "MPI_Iallreduce");
    requests.push_back(request);
  }
  return {};
}

MpiFallback::Polled MpiFallback::post_and_wait(Kind kind, DataType dtype, std::int64_t count,
                                               Clock::time_point deadline) {
  std::vector<MPI_Request> requests;
  Polled polled;
  polled.failure = post_reduction(kind, dtype, count, staging_.data(), gathered_, requests);
  PEERPLAN_FAULT_POINT("fallback.posted", rank_);
  if (polled.failure.empty()) polled = poll(requests, deadline);
  if (!polled.completed && std::any_of(requests.begin(), requests.end(),
                                       [](MPI_Request r) { return r != MPI_REQUEST_NULL; })) {
    // MPI still owns the buffer: hand it over with the requests.
    abandoned_.push_back({std::move(requests), std::move(staging_), std::move(gathered_)});
    staging_ = {};
    gathered_ = {};
  }
  return polled;
}

MpiFallback::Polled MpiFallback::poll(std::vector<MPI_Request>& requests,
                                      Clock::time_point deadline) {
  Polled polled;
  Backoff backoff;
  for (;;) {
    int done = 0;
    const int rc =
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      polled.failure = mpi_failure(rc, "MPI_Testall");
      return polled;
    }
    if (done) {
      polled.completed = true;
      polled.completed_at = Clock::now();
      return polled;
    }
    if (Clock::now() >= deadline) return polled;
    backoff.pause();
  }
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
  // A call without elements still takes part in the exchange of calls: a
  // peer's call with elements is a Mismatch, not a timeout on that peer.
  const std::int64_t count = args.layout->numel();
  if (count > 0 && (args.in == nullptr || args.out == nullptr)) {
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
  if (count < 0) {
    throw InvalidArgument(std::string(kContext) + ": " + what + ": a negative element count");
  }
  if (count > 0 && data == nullptr) {  // a call without elements is still exchanged
    throw InvalidArgument(std::string(kContext) + ": " + what + ": the buffer is null");
  }
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(dtype);
  staging_.resize(bytes);
  if (bytes > 0) std::memcpy(staging_.data(), data, bytes);  // memcpy's pointers must be valid
  reduce(for_fused ? Kind::fused : Kind::all_reduce, dtype, count);
  if (bytes > 0) std::memcpy(data, staging_.data(), bytes);
}

void MpiFallback::fused_add_rms_norm(const FusedArgs& args) {
  check_open("fused_add_rms_norm");
  check_dtype(args.dtype, "fused_add_rms_norm");
  if (args.layout == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": fused_add_rms_norm: layout is null");
  }
  const std::int64_t count = args.layout->numel();  // 0: still exchanged, as in all_reduce
  if (count > 0 && (args.inout == nullptr || args.residual == nullptr || args.weight == nullptr)) {
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
