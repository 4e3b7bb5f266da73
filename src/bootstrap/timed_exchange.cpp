// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/timed_exchange.hpp"

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "bootstrap/collective_count.hpp"
#include "bootstrap/mpi_check.hpp"
#include "core/fault_injection.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap::detail {
namespace {

// Buffers of messages abandoned by a timed-out call. A send to a rank that
// never receives, or a receive whose data is still arriving, may still be
// read or written by MPI after we gave up on it (MPI_Request_free lets it
// finish in the background), so its buffer must outlive the call. Only
// timeouts put anything here, and the job is broken by then: the memory is
// kept until exit on purpose.
void keep_until_exit(std::shared_ptr<const Blob> buffer) {
  static std::mutex mutex;
  static auto* graveyard = new std::vector<std::shared_ptr<const Blob>>();
  std::lock_guard<std::mutex> lock(mutex);
  graveyard->push_back(std::move(buffer));
}

int checked_count(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgument("bootstrap: a blob of " + std::to_string(bytes) +
                          " bytes is too large; bootstrap messages must be under 2 GiB");
  }
  return static_cast<int>(bytes);
}

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

}  // namespace

// One collective call in flight: what we send, what we still expect.
struct TimedExchange::Call {
  const char* operation = "";
  std::uint64_t number = 0;
  int tag = 0;
  std::shared_ptr<const Blob> outgoing;
  std::shared_ptr<const Blob> late_outgoing;  // allgather_by's other word
  std::vector<MPI_Request> sends;
  std::vector<int> send_peers;
  // Receiving: results[r] gets rank r's blob; awaiting[r] until its message
  // is matched by a probe; probe_source is the rank to probe (or ANY_SOURCE).
  std::vector<std::shared_ptr<Blob>> results;
  std::vector<char> awaiting;
  int awaiting_count = 0;
  int probe_source = MPI_ANY_SOURCE;
  std::vector<MPI_Request> receives;
  std::vector<int> receive_peers;
};

TimedExchange::TimedExchange(MPI_Comm comm, std::chrono::milliseconds timeout,
                             std::vector<int> rank_names)
    : comm_(comm), timeout_(timeout), rank_names_(std::move(rank_names)) {
  read_comm();
}

TimedExchange::TimedExchange(MPI_Comm comm, std::chrono::milliseconds timeout,
                             std::vector<int> members, Lane lane)
    : comm_(comm), timeout_(timeout), members_(std::move(members)), lane_(lane) {
  read_comm();
  if (lane_.count < 1 || lane_.index < 0 || lane_.index >= lane_.count ||
      lane_.count > tag_bound_) {
    throw InternalError("bootstrap: tag lane " + std::to_string(lane_.index) + " of " +
                        std::to_string(lane_.count) + " does not exist; please report this");
  }
  // rank_ and size_ hold this rank's place in comm_ until here.
  position_of_.assign(static_cast<std::size_t>(size_), -1);
  int mine = -1;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const int member = members_[i];
    if (member < 0 || member >= size_ || (i > 0 && member <= members_[i - 1])) {
      throw InternalError(
          "bootstrap: the members of an exchange must be distinct ranks of its "
          "communicator in ascending order; please report this");
    }
    position_of_[member] = static_cast<int>(i);
    if (member == rank_) mine = static_cast<int>(i);
  }
  if (mine < 0) {
    throw InternalError("bootstrap: an exchange among ranks " + join(members_) +
                        " was made on rank " + std::to_string(rank_) +
                        ", which is not one of them; please report this");
  }
  rank_names_ = members_;
  rank_ = mine;
  size_ = static_cast<int>(members_.size());
}

void TimedExchange::read_comm() {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  void* value = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
  if (found && value != nullptr) tag_bound_ = std::max(*static_cast<int*>(value), 1);
}

int TimedExchange::begin_call() {
  ++calls_;
  count_collective();
  // Lane i of n uses tags i, i + n, i + 2n, ... up to MPI_TAG_UB.
  const auto count = static_cast<std::uint64_t>(lane_.count);
  const std::uint64_t slots = (static_cast<std::uint64_t>(tag_bound_) + 1) / count;
  return static_cast<int>(static_cast<std::uint64_t>(lane_.index) + count * (calls_ % slots));
}

int TimedExchange::comm_rank_of(int position) const {
  return members_.empty() ? position : members_[position];
}

void TimedExchange::post_send(Call& call, int destination,
                              const std::shared_ptr<const Blob>& blob) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(blob->data(), checked_count(blob->size()), MPI_BYTE,
                      comm_rank_of(destination), call.tag, comm_, &request),
            "MPI_Isend");
  call.sends.push_back(request);
  call.send_peers.push_back(destination);
}

void TimedExchange::start_allgather(Call& call, std::span<const std::byte> mine,
                                    const char* operation) {
  call.operation = operation;
  call.tag = begin_call();
  call.number = calls_;
  call.outgoing = std::make_shared<const Blob>(mine.begin(), mine.end());
  call.results.resize(size_);
  call.awaiting.assign(size_, 1);
  call.awaiting[rank_] = 0;
  call.awaiting_count = size_ - 1;
  call.sends.reserve(static_cast<std::size_t>(size_));
  call.send_peers.reserve(static_cast<std::size_t>(size_));
}

std::vector<Blob> TimedExchange::gathered(Call& call) {
  std::vector<Blob> out(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      out[r] = *call.outgoing;
    } else {
      out[r] = std::move(*call.results[r]);
    }
  }
  return out;
}

std::vector<Blob> TimedExchange::allgather(std::span<const std::byte> mine, const char* operation) {
  return allgather(mine, operation, timeout_);
}

std::vector<Blob> TimedExchange::allgather(std::span<const std::byte> mine, const char* operation,
                                           std::chrono::milliseconds bound) {
  Call call;
  start_allgather(call, mine, operation);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) post_send(call, peer, call.outgoing);
  }
  wait(call, bound);
  return gathered(call);
}

std::vector<Blob> TimedExchange::allgather_by(std::span<const std::byte> in_time,
                                              std::span<const std::byte> late,
                                              std::chrono::steady_clock::time_point deadline,
                                              Said& said, const char* operation,
                                              std::chrono::milliseconds bound) {
  said = Said{};
  Call call;
  start_allgather(call, in_time, operation);
  call.late_outgoing = std::make_shared<const Blob>(late.begin(), late.end());
  const auto name = [&](int r) { return rank_names_.empty() ? r : rank_names_[r]; };
  // Everything above is done before the first reading of the clock. The
  // clock is read right before each send and right after it: a stall
  // between two sends shows in the next reading, and one that falls
  // between a reading and its send shows in the reading after the send.
  int sent = 0;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const bool on_time = std::chrono::steady_clock::now() < deadline;
    post_send(call, peer, on_time ? call.outgoing : call.late_outgoing);
    if (!on_time) {
      said.late.push_back(name(peer));
    } else if (std::chrono::steady_clock::now() < deadline) {
      said.in_time.push_back(name(peer));
    } else {
      said.unsure = name(peer);
    }
    if (++sent == 1) PEERPLAN_FAULT_POINT("verdict.first_sent", comm_rank_of(rank_));
  }
  if (!said.all_in_time()) {
    abandon_sends(call);
    return {};
  }
  wait(call, bound);
  return gathered(call);
}

Blob TimedExchange::broadcast(std::span<const std::byte> blob, int root, const char* operation) {
  if (root < 0 || root >= size_) {
    throw InvalidArgument("bootstrap " + std::string(operation) + ": root " + std::to_string(root) +
                          " is not a rank of this communicator (size " + std::to_string(size_) +
                          ")");
  }
  Call call;
  call.operation = operation;
  call.tag = begin_call();
  call.number = calls_;
  call.results.resize(size_);
  call.awaiting.assign(size_, 0);
  if (rank_ == root) {
    call.outgoing = std::make_shared<const Blob>(blob.begin(), blob.end());
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) post_send(call, peer, call.outgoing);
    }
  } else {
    call.awaiting[root] = 1;
    call.awaiting_count = 1;
    call.probe_source = comm_rank_of(root);
  }
  wait(call, timeout_);
  return rank_ == root ? *call.outgoing : std::move(*call.results[root]);
}

void TimedExchange::wait(Call& call, std::chrono::milliseconds bound) {
  // A pause between two polls this long means this rank did not run; the
  // grace it then gets to take the messages that arrived meanwhile.
  constexpr auto kStallGap = std::chrono::milliseconds(100);
  constexpr auto kStallGrace = std::chrono::milliseconds(100);
  auto deadline = std::chrono::steady_clock::now() + bound;
  std::vector<int> indices;
  std::vector<MPI_Status> statuses;
  auto previous_poll = std::chrono::steady_clock::now();
  bool stall_grace_given = false;
  for (unsigned polls = 0;; ++polls) {
    // The clock is read before the messages are matched, so that messages
    // that arrived before the deadline are taken, even by a rank that was
    // stalled past it (the verdicts' reasoning relies on this). MPI takes
    // queued messages in a few at a time as it progresses, so a rank that
    // did not run for a while (stopped, descheduled) gets one short grace
    // to take what arrived meanwhile before it concludes it never came.
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline && !stall_grace_given && now - previous_poll > kStallGap) {
      deadline = now + kStallGrace;
      stall_grace_given = true;
    }
    previous_poll = now;
    const bool expired = now >= deadline;
    // Match every message that has arrived and start receiving it.
    while (call.awaiting_count > 0) {
      int flag = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      check_mpi(MPI_Improbe(call.probe_source, call.tag, comm_, &flag, &message, &status),
                "MPI_Improbe");
      if (!flag) break;
      const int source = position_of_.empty() ? status.MPI_SOURCE : position_of_[status.MPI_SOURCE];
      if (source < 0) {
        throw InternalError("bootstrap " + std::string(call.operation) + " #" +
                            std::to_string(call.number) + ": a message from rank " +
                            std::to_string(status.MPI_SOURCE) +
                            ", which is not a member of this exchange; please report this");
      }
      if (!call.awaiting[source]) {
        throw InternalError("bootstrap " + std::string(call.operation) + " #" +
                            std::to_string(call.number) + ": a second message from rank " +
                            std::to_string(rank_names_.empty() ? source : rank_names_[source]) +
                            " under the same tag; please report this");
      }
      int count = 0;
      check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
      auto buffer = std::make_shared<Blob>(static_cast<std::size_t>(count));
      MPI_Request request = MPI_REQUEST_NULL;
      check_mpi(MPI_Imrecv(buffer->data(), count, MPI_BYTE, &message, &request), "MPI_Imrecv");
      call.results[source] = std::move(buffer);
      call.receives.push_back(request);
      call.receive_peers.push_back(source);
      call.awaiting[source] = 0;
      --call.awaiting_count;
    }

    bool pending = call.awaiting_count > 0;
    for (std::vector<MPI_Request>* requests : {&call.sends, &call.receives}) {
      if (requests->empty()) continue;
      indices.resize(requests->size());
      statuses.resize(requests->size());
      int completed = 0;
      check_mpi(MPI_Testsome(static_cast<int>(requests->size()), requests->data(), &completed,
                             indices.data(), statuses.data()),
                "MPI_Testsome");
      // Completed requests became MPI_REQUEST_NULL; MPI_UNDEFINED = none active.
      for (MPI_Request r : *requests) pending = pending || r != MPI_REQUEST_NULL;
    }
    if (!pending) return;

    if (expired) time_out(call, bound);
    // Spin briefly for the fast case, then sleep between polls: with more
    // ranks than cores (CI) a spinning rank steals the core of the rank it
    // is waiting for.
    if (polls >= 32) std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
}

void TimedExchange::abandon_sends(Call& call) {
  bool freed = false;
  for (MPI_Request& request : call.sends) {
    if (request == MPI_REQUEST_NULL) continue;
    MPI_Request_free(&request);
    freed = true;
  }
  if (freed) {
    keep_until_exit(call.outgoing);
    if (call.late_outgoing) keep_until_exit(call.late_outgoing);
  }
}

void TimedExchange::time_out(Call& call, std::chrono::milliseconds bound) {
  std::vector<int> missing;
  auto name = [&](int r) { return rank_names_.empty() ? r : rank_names_[r]; };
  for (int r = 0; r < size_; ++r) {
    if (call.awaiting[r]) missing.push_back(name(r));
  }
  // Give up on unfinished messages; MPI may still complete them, so their
  // buffers stay alive (keep_until_exit).
  for (std::size_t i = 0; i < call.receives.size(); ++i) {
    if (call.receives[i] == MPI_REQUEST_NULL) continue;
    missing.push_back(name(call.receive_peers[i]));
    MPI_Request_free(&call.receives[i]);
    keep_until_exit(call.results[call.receive_peers[i]]);
  }
  for (std::size_t i = 0; i < call.sends.size(); ++i) {
    if (call.sends[i] != MPI_REQUEST_NULL) missing.push_back(name(call.send_peers[i]));
  }
  abandon_sends(call);
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  throw Timeout("bootstrap " + std::string(call.operation) + " #" + std::to_string(call.number) +
                " timed out after " + std::to_string(bound.count()) + " ms waiting for rank" +
                (missing.size() == 1 ? " " : "s ") + join(missing) +
                " (a rank stopped participating or crashed; raise PEERPLAN_TIMEOUT_MS if ranks "
                "are merely slow)");
}

}  // namespace peerplan::bootstrap::detail
