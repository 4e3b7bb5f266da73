// SPDX-License-Identifier: Apache-2.0
#include "transport/host/host_peer_transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "core/fault_injection.hpp"
#include "peerplan/errors.hpp"
#include "transport/host/backoff.hpp"
#include "transport/host/element.hpp"
#include "transport/host/reduce.hpp"
#include "transport/host/rms_norm.hpp"
#include "transport/host/segment_names.hpp"
#include "transport/host/split_verdict.hpp"
#include "transport/host/strided_copy.hpp"
#include "transport/peer_call_state.hpp"

namespace peerplan::transport::host {
namespace {

constexpr std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

constexpr std::string_view kBackend = "peerplan host backend";

// Elements reduced at a time before being scattered into a strided output.
constexpr std::int64_t kStridedChunk = 4096;

struct Identity {
  std::int64_t global_rank;  // 64 bits: no padding goes out in the blob
  std::uint64_t nonce;
};

const char* phase_text(Signal which) {
  switch (which) {
    case Signal::arrive:
      return "stage their input (flag barrier 'arrive')";
    case Signal::reduced:
      return "reduce their shard (two-shot barrier 'reduced')";
    case Signal::done:
      return "finish reading the staging slot of the call before last ('done')";
    case Signal::abandoned:
    case Signal::verdict:
    case Signal::gave_up_why:
      break;
  }
  return "?";
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

void require(bool condition, const char* what, const char* message) {
  if (!condition) {
    throw InvalidArgument(std::string("peerplan host backend: ") + what + ": " + message);
  }
}

// The host backend runs every plan the same way: the only thing decided at
// declare is the route (and the call re-derives the rest, which costs
// nothing next to the copies through shared memory).
class HostPlanLaunch final : public PlanLaunch {
 public:
  HostPlanLaunch(Operation op, Route r, DataType dtype) : operation(op), route(r), dtype_(dtype) {}
  std::string describe() const override {
    const char* algorithm =
        route == Route::one_shot   ? "one-shot"
        : route == Route::two_shot ? "two-shot"
        : route == Route::hierarchical
            ? "hierarchical (shards summed in the node, then across nodes by MPI)"
            : "fused one-shot";
    return std::string(to_string(dtype_)) + " " + algorithm +
           ", staged through shared memory, fp32 sums in rank order";
  }
  const Operation operation;
  const Route route;

 private:
  DataType dtype_;
};

// Only this transport's prepare() made the plans the communicator passes
// (as on the cuda backend): no check per call.
const HostPlanLaunch& host_launch(const PlanLaunch& launch) {
  return static_cast<const HostPlanLaunch&>(launch);
}

}  // namespace

struct HostPeerTransport::Call {
  std::uint64_t epoch = 0;
  std::chrono::steady_clock::time_point deadline;
  const char* what = "";
};

HostPeerTransport::HostPeerTransport(bootstrap::Bootstrap& bootstrap,
                                     std::chrono::milliseconds timeout,
                                     std::unique_ptr<NodeGroupSum> across_nodes)
    : bootstrap_(bootstrap),
      timeout_(timeout),
      local_rank_(bootstrap.local_rank()),
      local_size_(bootstrap.local_size()),
      across_nodes_(std::move(across_nodes)) {
  if (timeout.count() <= 0) {
    throw InvalidArgument("peerplan host backend: the timeout must be positive (got " +
                          std::to_string(timeout.count()) + " ms); set PEERPLAN_TIMEOUT_MS > 0");
  }
  // Segments that killed jobs left in /dev/shm (segment_names.hpp says why
  // this removes only those whose creator is gone). Every rank does it: ranks
  // of one node may live in different pid namespaces, each sees its own.
  remove_stale_segments();
  // A name prefix unique to this job on this node: local rank 0's random
  // nonce, so two jobs (or transports) sharing /dev/shm never collide; each
  // rank's own names add its pid namespace and pid, for that cleanup.
  std::random_device entropy;
  const std::uint64_t nonce = (static_cast<std::uint64_t>(entropy()) << 32) | entropy();
  const Identity mine{bootstrap.rank(), nonce};
  bootstrap::Blob blob(sizeof mine);
  std::memcpy(blob.data(), &mine, sizeof mine);
  const auto all = bootstrap.local_allgather(blob);
  global_ranks_.resize(all.size());
  Identity first{};
  for (std::size_t i = 0; i < all.size(); ++i) {
    Identity id{};
    std::memcpy(&id, all[i].data(), std::min(sizeof id, all[i].size()));
    global_ranks_[i] = static_cast<int>(id.global_rank);
    if (i == 0) first = id;
  }
  name_prefix_ = job_segment_prefix(first.nonce);
  own_name_prefix_ = creator_segment_prefix(name_prefix_, own_pid_namespace(), ::getpid());
  // Probe with one page per rank, so that a /dev/shm that is missing, not
  // writable or not shared by the node's ranks (separate containers) fails
  // here, where the communicator agrees on enabling P2P, rather than at the
  // first declare. The staging memory itself comes with reserve().
  PeerSegments::establish(bootstrap_, own_name_prefix_ + "probe", kSignalAreaBytes).release();
}

HostPeerTransport::~HostPeerTransport() { close(); }

void HostPeerTransport::close() {
  segments_.release();
  capacity_ = 0;
  closed_ = true;
}

void HostPeerTransport::reserve(std::size_t max_message_bytes, std::size_t, std::size_t) {
  if (closed_) {
    throw InvalidUsage(
        "peerplan host backend: reserve() after close(); create a new communicator.");
  }
  const bool needs_rebuild = broken_ || max_message_bytes != capacity_;
  // Every rank rebuilds, or none: a broken transport on one rank must reset
  // the epochs of all.
  if (bootstrap_.agree(!needs_rebuild)) return;

  segments_.release();
  capacity_ = 0;
  input_bytes_ = slot_bytes_ = 0;
  epoch_ = 0;
  broken_ = false;
  broken_reason_.clear();
  if (max_message_bytes == 0) return;

  const auto n = static_cast<std::size_t>(local_size_);
  input_bytes_ = align_up(max_message_bytes, 64);
  // A two-shot shard holds ceil(count / n) elements <= bytes / n + one element.
  // The hierarchical route keeps its shards in fp32: up to twice the bytes.
  const std::size_t shard_bytes = (max_message_bytes + n - 1) / n + 4;
  const std::size_t result_bytes = align_up(across_nodes_ ? 2 * shard_bytes : shard_bytes, 64);
  slot_bytes_ = align_up(input_bytes_ + result_bytes, 4096);
  ++generation_;
  segments_ =
      PeerSegments::establish(bootstrap_, own_name_prefix_ + "g" + std::to_string(generation_),
                              kSignalAreaBytes + 2 * slot_bytes_);
  capacity_ = max_message_bytes;
  sources_.assign(n, nullptr);
}

std::byte* HostPeerTransport::input_region(int local_rank, std::uint64_t epoch) const noexcept {
  return segments_.base(local_rank) + kSignalAreaBytes + (epoch % 2) * slot_bytes_;
}

std::byte* HostPeerTransport::result_region(int local_rank, std::uint64_t epoch) const noexcept {
  return input_region(local_rank, epoch) + input_bytes_;
}

HostPeerTransport::Call HostPeerTransport::begin_call(const char* what,
                                                      std::int64_t message_bytes) {
  begin_peer_call(kBackend, {closed_, broken_, broken_reason_, capacity_}, what,
                  static_cast<std::size_t>(message_bytes));
  Call call;
  call.epoch = ++epoch_;
  call.deadline = std::chrono::steady_clock::now() + timeout_;
  call.what = what;
  // Slot epoch % 2 was last used by call epoch - 2: every peer must be done
  // reading it before this rank overwrites it.
  if (call.epoch > 2) wait_for_peers(call, Signal::done, call.epoch - 2);
  return call;
}

// The node's verdict word (signal_area.hpp) holds the furthest wait of any
// call that the node's ranks have decided: failed(e, w) for "wait w of call
// e failed", failed(e, w) + 1 for "it succeeded". Waits are numbered in the
// order every call takes them, so the word only grows, and a value past
// succeeded(e, w) also means that wait succeeded (nobody gets past a wait
// that failed: a failure breaks the transport until reserve()).
std::uint64_t HostPeerTransport::verdict_failed(std::uint64_t epoch, Signal which) noexcept {
  const std::uint64_t step = which == Signal::done ? 0 : which == Signal::arrive ? 1 : 2;
  return ((epoch << 2) | step) << 1;
}

void HostPeerTransport::wait_for_peers(Call& call, Signal which, std::uint64_t target) {
  // Every rank decides a wait by setting the verdict word, and only from a
  // value before it; so for each wait exactly one decision holds: success
  // (set by a rank that saw every rank there) or failure (set by a rank whose
  // wait expired first). A rank whose wait expired still succeeds when a
  // peer decided success first: no rank completes a call another failed.
  const std::uint64_t failed = verdict_failed(call.epoch, which);
  const std::uint64_t succeeded = failed + 1;
  std::byte* const verdict_area = segments_.base(0);
  Backoff backoff;
  for (;;) {
    std::uint64_t verdict = load_signal(verdict_area, Signal::verdict);
    if (verdict >= succeeded) return;
    if (verdict == failed) fail_wait(call, which, target, false);
    bool all_there = true;
    for (int peer = 0; peer < local_size_ && all_there; ++peer) {
      all_there = peer == local_rank_ || load_signal(segments_.base(peer), which) >= target;
    }
    if (all_there) {
      if (compare_exchange_signal(verdict_area, Signal::verdict, verdict, succeeded)) return;
      continue;  // another rank decided first: follow it
    }
    if (std::chrono::steady_clock::now() > call.deadline) {
      PEERPLAN_FAULT_POINT("p2p.expired", bootstrap_.rank());
      // This rank and the ranks it waits for are named before the decision,
      // so that a peer that reads the decision can name them even if the
      // late ranks arrive meanwhile; withdrawn if a peer decided first.
      std::vector<int>& late = missing_scratch_;
      late.clear();
      for (int peer = 0; peer < local_size_; ++peer) {
        if (peer != local_rank_ && load_signal(segments_.base(peer), which) < target)
          late.push_back(peer);
      }
      if (late.empty()) continue;  // they all arrived meanwhile
      store_awaited(own_segment(), local_size_, late);
      store_signal(own_segment(), Signal::gave_up_why,
                   static_cast<std::uint64_t>(GaveUpWhy::timeout));
      store_signal(own_segment(), Signal::abandoned, call.epoch);
      if (compare_exchange_signal(verdict_area, Signal::verdict, verdict, failed)) {
        fail_wait(call, which, target, true);
      }
      store_signal(own_segment(), Signal::abandoned, 0);
      continue;
    }
    backoff.pause();
  }
}

void HostPeerTransport::fail_wait(const Call& call, Signal which, std::uint64_t target,
                                  bool timed_out_here) {
  // Local ranks, each once: the ones the deciding rank(s) waited for when
  // they gave up, those that gave up, and those this rank still waits for.
  std::vector<int>& late = missing_scratch_;
  std::vector<int>& gave_up = gave_up_scratch_;
  std::vector<int>& missing = waiting_scratch_;
  late.clear();
  gave_up.clear();
  missing.clear();
  for (int peer = 0; peer < local_size_; ++peer) {
    if (peer == local_rank_) continue;
    if (load_signal(segments_.base(peer), which) < target) missing.push_back(peer);
    if (!timed_out_here && load_signal(segments_.base(peer), Signal::abandoned) == call.epoch)
      gave_up.push_back(peer);
  }
  for (int q = 0; q < local_size_; ++q) {
    const bool awaited =
        timed_out_here ? is_awaited(own_segment(), q)
                       : std::any_of(gave_up.begin(), gave_up.end(),
                                     [&](int peer) { return is_awaited(segments_.base(peer), q); });
    if (awaited) late.push_back(q);
  }
  std::string message = std::string(call.what) + " call #" + std::to_string(call.epoch);
  const std::string phase = std::string(" to ") + phase_text(which);
  if (timed_out_here) {
    message += " timed out after " + std::to_string(timeout_.count()) + " ms waiting for rank(s) " +
               name_local_ranks(late) + phase;
  } else {
    // The peers that gave up say why: their timeout, or the exchange
    // between nodes (a Mismatch there is one here too).
    bool between_nodes = false, different_calls = false;
    for (int peer : gave_up) {
      const auto why =
          static_cast<GaveUpWhy>(load_signal(segments_.base(peer), Signal::gave_up_why));
      between_nodes = between_nodes || why == GaveUpWhy::between_nodes;
      different_calls = different_calls || why == GaveUpWhy::different_calls;
    }
    message += " cannot complete: " +
               (gave_up.empty() ? std::string("a rank") : "rank(s) " + name_local_ranks(gave_up));
    if (different_calls) {
      message +=
          " found that the ranks of the nodes made different calls at this point (their "
          "error lists them); every rank must make the same calls in the same order";
      fail_transport(message, /*different_calls=*/true);
    }
    message += between_nodes ? " failed in the exchange between nodes (their error says why)"
                             : " gave up on it after their own timeout";
    if (!late.empty()) message += " waiting for rank(s) " + name_local_ranks(late) + phase;
    if (!missing.empty() && missing != late) {
      message += ", while this rank waited for rank(s) " + name_local_ranks(missing) + phase;
    }
  }
  fail_transport(message, /*different_calls=*/false);
}

void HostPeerTransport::fail_transport(const std::string& message, bool different_calls) {
  broken_ = true;
  broken_reason_ = message;
  if (across_nodes_) across_nodes_->give_up(message);
  if (different_calls) throw Mismatch(std::string(kBackend) + ": " + message);
  throw Timeout(peer_timeout_message(kBackend, message));
}

std::string HostPeerTransport::name_local_ranks(const std::vector<int>& local_ranks) const {
  std::string text;
  for (int r : local_ranks) {
    text += (text.empty() ? "" : ", ") + std::to_string(global_ranks_[r]);
    if (r == local_rank_) text += " (this rank)";
  }
  return text;
}

void HostPeerTransport::stage_input(Call& call, const CallSignature& signature,
                                    const TensorLayout& layout, const void* input) {
  pack(layout, element_size(signature.dtype()), input, input_region(local_rank_, call.epoch));
  store_call_signature(own_segment(), call.epoch, signature);
  store_signal(own_segment(), Signal::arrive, call.epoch);
  PEERPLAN_FAULT_POINT("p2p.arrived", bootstrap_.rank());
  wait_for_peers(call, Signal::arrive, call.epoch);
  require_same_calls(call, signature);
  for (int peer = 0; peer < local_size_; ++peer) sources_[peer] = input_region(peer, call.epoch);
}

void HostPeerTransport::require_same_calls(const Call& call, const CallSignature& mine) {
  // Every node peer published its signature before its arrive flag, so every
  // rank reads the same ones here and decides alike, before anything is
  // reduced or written.
  bool same = true;
  for (int peer = 0; peer < local_size_ && same; ++peer) {
    same = peer == local_rank_ || load_call_signature(segments_.base(peer), call.epoch) == mine;
  }
  if (same) return;
  std::string listed;
  for (int peer = 0; peer < local_size_; ++peer) {
    const CallSignature theirs =
        peer == local_rank_ ? mine : load_call_signature(segments_.base(peer), call.epoch);
    listed += (peer ? "; rank " : "rank ") + std::to_string(global_ranks_[peer]) + ": " +
              describe(theirs);
  }
  const std::string message =
      std::string(call.what) + " call #" + std::to_string(call.epoch) +
      ": the ranks made different calls at this point (" + listed +
      "); every rank must make the same calls, with the same dtype, shape and eps, in the same "
      "order";
  // Done with the slots as the others are: the next calls stay in step.
  finish_call(call);
  // The other nodes are left waiting for this node's partial sums: tell
  // them, and stop using the exchange between nodes, now out of step.
  if (across_nodes_) {
    fail_transport(message +
                       "; the exchange between nodes is out of step: close() the "
                       "communicator and create a new one",
                   /*different_calls=*/true);
  }
  throw Mismatch(std::string(kBackend) + ": " + message +
                 ". Nothing was reduced or written; later calls work.");
}

void HostPeerTransport::finish_call(const Call& call) {
  store_signal(own_segment(), Signal::done, call.epoch);
}

std::unique_ptr<PlanLaunch> HostPeerTransport::prepare(const LaunchRequest& request) {
  const char* what = "prepare";
  require(request.protocol == Protocol::staged, what, "the host backend stages every route");
  if (closed_ || capacity_ == 0 || request.message_bytes > capacity_) {
    refuse_peer_call(kBackend, {closed_, false, {}, capacity_}, what, request.message_bytes);
  }
  if (across_nodes_) {
    require(request.route == Route::hierarchical, what,
            "the job spans several nodes: the route must be hierarchical");
  } else if (request.operation == Operation::all_reduce) {
    require(request.route == Route::one_shot || request.route == Route::two_shot, what,
            "an all-reduce runs one_shot or two_shot");
  } else {
    require(request.route == Route::fused_one_shot, what, "the fused op runs fused_one_shot");
  }
  return std::make_unique<HostPlanLaunch>(request.operation, request.route, request.dtype);
}

bool HostPeerTransport::all_reduce(const PlanLaunch& launch, const AllReduceArgs& args) {
  const HostPlanLaunch& plan = host_launch(launch);
  require(plan.operation == Operation::all_reduce, "all_reduce", "the plan is a fused op's");
  return run_all_reduce(plan.route, args);
}

void HostPeerTransport::fused_add_rms_norm(const PlanLaunch& launch, const FusedArgs& args) {
  const HostPlanLaunch& plan = host_launch(launch);
  require(plan.operation == Operation::fused_add_rms_norm, "fused_add_rms_norm",
          "the plan is an all-reduce's");
  run_fused(args);
}

bool HostPeerTransport::run_all_reduce(Route route, const AllReduceArgs& args) {
  require(args.layout != nullptr, "all_reduce", "layout is null");
  if (across_nodes_) {
    require(route == Route::hierarchical, "all_reduce",
            "the job spans several nodes: the route must be hierarchical");
  } else {
    require(route == Route::one_shot || route == Route::two_shot, "all_reduce",
            "route must be one_shot or two_shot");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return false;  // same on every rank: nothing to exchange
  require(args.in != nullptr && args.out != nullptr, "all_reduce", "in or out is null");
  const auto bytes = count * static_cast<std::int64_t>(element_size(args.dtype));
  Call call = begin_call(route == Route::one_shot   ? "all_reduce (one-shot)"
                         : route == Route::two_shot ? "all_reduce (two-shot)"
                                                    : "all_reduce (hierarchical)",
                         bytes);
  stage_input(call, all_reduce_signature(route, args.dtype, count), *args.layout, args.in);
  if (route == Route::one_shot)
    one_shot(call, args, count);
  else if (route == Route::two_shot)
    two_shot(call, args, count);
  else
    hierarchical_all_reduce(call, args, count);
  finish_call(call);
  return false;
}

void HostPeerTransport::one_shot(Call&, const AllReduceArgs& args, std::int64_t count) {
  const TensorLayout& layout = *args.layout;
  if (is_dense(layout)) {
    reduce_sources(args.dtype, sources_.data(), local_size_, 0, count, args.out);
    return;
  }
  const std::size_t bytes = element_size(args.dtype);
  chunk_.resize(static_cast<std::size_t>(kStridedChunk) * bytes);
  for (std::int64_t first = 0; first < count; first += kStridedChunk) {
    const std::int64_t len = std::min(kStridedChunk, count - first);
    reduce_sources(args.dtype, sources_.data(), local_size_, first, len, chunk_.data());
    unpack_range(layout, bytes, chunk_.data(), first, len, args.out);
  }
}

std::pair<std::int64_t, std::int64_t> HostPeerTransport::shard_range(
    int owner, std::int64_t count) const noexcept {
  // Shards of ceil(count / n) elements; the last ones may be short or empty.
  const std::int64_t shard = (count + local_size_ - 1) / local_size_;
  const std::int64_t lo = std::min(owner * shard, count);
  return {lo, std::min(lo + shard, count)};
}

void HostPeerTransport::two_shot(Call& call, const AllReduceArgs& args, std::int64_t count) {
  const auto [lo, hi] = shard_range(local_rank_, count);
  reduce_sources(args.dtype, sources_.data(), local_size_, lo, hi - lo,
                 result_region(local_rank_, call.epoch));
  store_signal(own_segment(), Signal::reduced, call.epoch);
  wait_for_peers(call, Signal::reduced, call.epoch);
  const std::size_t bytes = element_size(args.dtype);
  for (int owner = 0; owner < local_size_; ++owner) {
    const auto [first, last] = shard_range(owner, count);
    unpack_range(*args.layout, bytes, result_region(owner, call.epoch), first, last - first,
                 args.out);
  }
}

void HostPeerTransport::sum_shard_across_nodes(Call& call, DataType dtype, std::int64_t count) {
  const auto [lo, hi] = shard_range(local_rank_, count);
  shard_sum_.resize(static_cast<std::size_t>(hi - lo));
  // Not rounded: the other nodes' partial sums join it before the one rounding.
  sum_sources_to_float(dtype, sources_.data(), local_size_, lo, hi - lo, shard_sum_.data());
  between_nodes(call, Signal::reduced, [&] { across_nodes_->sum(shard_sum_, call.what); });
  PEERPLAN_FAULT_POINT("hier.summed", bootstrap_.rank());
  std::memcpy(result_region(local_rank_, call.epoch), shard_sum_.data(),
              shard_sum_.size() * sizeof(float));
  store_signal(own_segment(), Signal::reduced, call.epoch);
  wait_for_peers(call, Signal::reduced, call.epoch);
  agree_between_nodes(call);
}

// The hierarchical call's verdict, over every rank of the job: a node whose
// ranks all hold their shards must not complete a call that a rank of
// another node fails. The node-local waits cannot tell, so every rank says
// "ok" (or "gave up", when it fails anywhere in the call) to every rank,
// and the call succeeds only where every rank said "ok". As for the MPI
// fallback's verdict (mpi_fallback.cpp, reduce()), no rank can succeed
// where another fails, for timeout T:
//  - A rank Z's "ok" to a rank leaves only before Z's own deadline p_Z + T
//    (the clock is read before each message), p_Z read when its call began,
//    before it staged its input; a later message says "gave up".
//  - A rank Y that said "ok" did so once its node's ranks all held their
//    shards, at c_Y, which needs every rank of the job to have staged its
//    input (each shard sums a node's inputs and every node's partial sum);
//    so p_Z <= c_Y for every Z, and every "ok" left before c_Y + T.
//  - Y waits for the words until c_Y + T + T/4, matching every message that
//    arrived before it looks at its clock: it gets every "ok" that was sent
//    (given that a message, once sent, arrives within T/4).
//  So where one rank got every "ok", so does every rank that said "ok", and
//  a rank that said "gave up" or nothing fails everyone. The exception: Z
//  stalls between two of its messages past p_Z + T, so some ranks got "ok"
//  and others "gave up". Z sees it (the clock is read after each message
//  too) and says in its Timeout which rank got what.
void HostPeerTransport::agree_between_nodes(const Call& call) {
  const std::string what = std::string(call.what) + " call #" + std::to_string(call.epoch);
  NodeGroupSum::Verdict verdict;
  try {
    verdict =
        across_nodes_->agree(call.deadline, timeout_ + timeout_ / 4, (what + " verdict").c_str());
  } catch (const Error&) {
    broken_ = true;
    broken_reason_ = what + " got no verdict from every rank";
    throw;
  }
  if (!verdict.said.all_in_time()) {
    if (verdict.said.all_late()) {
      fail_between_nodes(what + " gave up: this rank got its node's shards only after its " +
                         std::to_string(timeout_.count()) +
                         " ms timeout (it was stalled), too late to say 'ok' to the "
                         "other nodes");
    }
    fail_between_nodes(what + ": " + describe_split_verdict(verdict.said, timeout_, "gave up"));
  }
  if (!verdict.gave_up.empty()) {
    fail_between_nodes(what + " cannot complete: rank(s) " + join_ranks(verdict.gave_up) +
                       " gave up on it (the verdict between nodes)");
  }
}

void HostPeerTransport::fail_between_nodes(const std::string& message) {
  across_nodes_->give_up(message);
  broken_ = true;
  broken_reason_ = message;
  throw Timeout(peer_timeout_message(kBackend, message));
}

template <class Step>
void HostPeerTransport::between_nodes(const Call& call, Signal next_wait, Step&& step) {
  try {
    step();
  } catch (const Error& error) {
    // The node's ranks wait for this rank at `next_wait`: decide that it
    // failed, so that they fail now, not at their deadline. No peer can have
    // decided it succeeded: this rank has not raised its flag for it. It
    // waited for no rank of its node.
    store_awaited(own_segment(), local_size_, {});
    const GaveUpWhy why = dynamic_cast<const Mismatch*>(&error) != nullptr
                              ? GaveUpWhy::different_calls
                              : GaveUpWhy::between_nodes;
    store_signal(own_segment(), Signal::gave_up_why, static_cast<std::uint64_t>(why));
    store_signal(own_segment(), Signal::abandoned, call.epoch);
    std::uint64_t verdict = load_signal(segments_.base(0), Signal::verdict);
    const std::uint64_t failed = verdict_failed(call.epoch, next_wait);
    while (verdict < failed &&
           !compare_exchange_signal(segments_.base(0), Signal::verdict, verdict, failed)) {
    }
    broken_ = true;
    broken_reason_ = std::string(call.what) + " failed between nodes";
    across_nodes_->give_up(broken_reason_);
    throw;
  }
}

void HostPeerTransport::hierarchical_all_reduce(Call& call, const AllReduceArgs& args,
                                                std::int64_t count) {
  sum_shard_across_nodes(call, args.dtype, count);
  // Every rank rounds the same fp32 shards the same way.
  const std::size_t bytes = element_size(args.dtype);
  chunk_.resize(static_cast<std::size_t>(kStridedChunk) * bytes);
  for (int owner = 0; owner < local_size_; ++owner) {
    const auto [first, last] = shard_range(owner, count);
    const auto* sums = reinterpret_cast<const float*>(result_region(owner, call.epoch));
    for (std::int64_t begin = first; begin < last; begin += kStridedChunk) {
      const std::int64_t len = std::min(kStridedChunk, last - begin);
      for (std::int64_t i = 0; i < len; ++i)
        store_from_float(args.dtype, sums[begin - first + i], chunk_.data() + i * bytes);
      unpack_range(*args.layout, bytes, chunk_.data(), begin, len, args.out);
    }
  }
}

void HostPeerTransport::hierarchical_fused(Call& call, const FusedArgs& args, std::int64_t count) {
  sum_shard_across_nodes(call, args.dtype, count);
  const TensorLayout& layout = *args.layout;
  const std::size_t bytes = element_size(args.dtype);
  const std::int64_t hidden = layout.last_dim();
  const std::int64_t rows = count / hidden;
  const std::int64_t step = layout.rank() == 0 ? 1 : layout.stride(layout.rank() - 1);
  const std::int64_t shard = shard_range(0, count).second;  // every shard but the last ones
  row_values_.resize(static_cast<std::size_t>(hidden));
  visit_element(args.dtype, [&](auto traits) {
    using E = decltype(traits);
    for (std::int64_t row = 0; row < rows; ++row) {
      // The row's reduced values, rounded to the dtype like the one-node
      // fused op's, from the shards it spans.
      for (std::int64_t i = 0; i < hidden; ++i) {
        const std::int64_t element = row * hidden + i;
        const int owner = static_cast<int>(element / shard);
        const auto* sums = reinterpret_cast<const float*>(result_region(owner, call.epoch));
        row_values_[static_cast<std::size_t>(i)] =
            round_to(args.dtype, sums[element - owner * shard]);
      }
      const std::int64_t offset = row_offset(layout, row) * static_cast<std::int64_t>(bytes);
      add_rms_norm_row<E>(row_values_.data(), static_cast<std::byte*>(args.residual) + offset,
                          args.weight, static_cast<std::byte*>(args.inout) + offset, step, hidden,
                          args.eps);
    }
  });
}

void HostPeerTransport::run_fused(const FusedArgs& args) {
  require(args.layout != nullptr, "fused_add_rms_norm", "layout is null");
  const TensorLayout& layout = *args.layout;
  const std::int64_t count = layout.numel();
  if (count == 0) return;
  require(args.inout != nullptr && args.residual != nullptr && args.weight != nullptr,
          "fused_add_rms_norm", "inout, residual or weight is null");
  require(args.eps >= 0.0f, "fused_add_rms_norm", "eps must be >= 0");
  const std::size_t bytes = element_size(args.dtype);
  Call call = begin_call(
      across_nodes_ ? "fused_add_rms_norm (hierarchical)" : "fused_add_rms_norm (fused one-shot)",
      count * static_cast<std::int64_t>(bytes));
  stage_input(call,
              fused_signature(across_nodes_ ? Route::hierarchical : Route::fused_one_shot,
                              args.dtype, count, layout.last_dim(), args.eps),
              layout, args.inout);
  if (across_nodes_) {
    hierarchical_fused(call, args, count);
    finish_call(call);
    return;
  }

  const std::int64_t hidden = layout.last_dim();
  const std::int64_t rows = count / hidden;
  const std::int64_t step = layout.rank() == 0 ? 1 : layout.stride(layout.rank() - 1);
  row_values_.resize(static_cast<std::size_t>(hidden));
  visit_element(args.dtype, [&](auto traits) {
    using E = decltype(traits);
    for (std::int64_t row = 0; row < rows; ++row) {
      reduce_sources_to_float(args.dtype, sources_.data(), local_size_, row * hidden, hidden,
                              row_values_.data());
      const std::int64_t offset = row_offset(layout, row) * static_cast<std::int64_t>(bytes);
      add_rms_norm_row<E>(row_values_.data(), static_cast<std::byte*>(args.residual) + offset,
                          args.weight, static_cast<std::byte*>(args.inout) + offset, step, hidden,
                          args.eps);
    }
  });
  finish_call(call);
}

}  // namespace peerplan::transport::host
