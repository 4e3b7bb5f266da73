// SPDX-License-Identifier: Apache-2.0
// The NCCL functions libpeerplan_nccl.so defines (exports.map lists them):
// each does the real NCCL's work through real_nccl() and, around it,
// peerplan's: create after init, the declared all-reduces on peerplan,
// close before finalize/destroy.
//
// Groups. NCCL groups are per thread, so is this bookkeeping. The real
// ncclGroupStart/End are always called (the operations the interposer does
// not see, ncclAlltoAll and the like, must stay grouped). Inside the
// outermost group the first operation, if it is an all-reduce peerplan
// could run, is held back: when a second operation comes, the held one is
// first handed to the real NCCL and then the new one, so NCCL sees every
// operation in the application's order; when the group ends with the held
// all-reduce its only operation, the rules decide as for a call outside a
// group (peerplan runs it after the real, empty, group end, if that end
// succeeded). The operations counted are the interposed ones (all-reduce, broadcast, reduce, all-gather,
// reduce-scatter, send, recv); one NCCL has and the interposer does not
// define is not seen.
// ncclGroupSimulateEnd ends the group as ncclGroupEnd does, but NCCL only
// estimates its operations: the held all-reduce goes to NCCL, uncounted.
// Communicators made inside a group are initialised by NCCL at the group's
// end, a simulated one's too: peerplan is created over them after the real
// ncclGroupEnd or ncclGroupSimulateEnd.
// A communicator where a peerplan call timed out is broken: every later
// operation on it, an all-reduce or not, is refused with ncclRemoteError
// and reaches neither library (call_dispatch.hpp), and a group holding one
// fails as a whole: NCCL is made to fail it at its end.
// Finalize or destroy inside a group releases peerplan's side locally (a
// collective close would be queued in the group). Finalize or destroy of a
// communicator where peerplan's bootstrap left NCCL an all-gather that may
// never complete aborts the real communicator instead (abort_instead.hpp).
#include <nccl.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "nccl_interposer/abort_instead.hpp"
#include "nccl_interposer/call_dispatch.hpp"
#include "nccl_interposer/comm_table.hpp"
#include "nccl_interposer/last_error.hpp"
#include "nccl_interposer/nccl_types.hpp"
#include "nccl_interposer/real_nccl.hpp"
#include "transport/cuda/bounded_wait.hpp"

#define PEERPLAN_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace peerplan::nccl_interposer {
namespace {

struct GroupState {
  int depth = 0;
  std::size_t ops = 0;                     // operations seen in the outermost group
  std::optional<NcclAllReduce> held;       // the group's first operation, an all-reduce
  ncclResult_t held_result = ncclSuccess;  // a failure of handing it to NCCL late
  std::optional<ncclComm_t> refused;       // a broken communicator the group used
  std::vector<ncclComm_t> created;         // communicators made in the group
};
thread_local GroupState t_group;

const RealNccl& real() { return real_nccl(); }

// Runs an all-reduce of the open group; one refused (a broken
// communicator) fails the whole group at its end.
ncclResult_t run_in_group(const NcclAllReduce& call, const Choice& choice, GroupState& group) {
  if (refuses(choice)) group.refused = call.comm;
  return run(call, choice);
}

// An operation of the group: the held all-reduce, if any, goes to NCCL
// before it.
void note_group_operation() {
  ++t_group.ops;
  if (!t_group.held) return;
  const NcclAllReduce held = *t_group.held;
  t_group.held.reset();
  const Choice choice = choose(held, true, t_group.ops);
  // choose gives NCCL in a group of several (or refuses it, broken meanwhile).
  const ncclResult_t result = run_in_group(held, choice, t_group);
  if (result != ncclSuccess && t_group.held_result == ncclSuccess) t_group.held_result = result;
}

// An operation other than an all-reduce, counted (in a group: one more
// operation; outside: a fallback of its own). Refused on a broken
// communicator, as NCCL refuses every operation on one with an
// asynchronous error: passed to NCCL, it could pair with an all-reduce
// another rank handed NCCL before it saw the timeout.
std::optional<ncclResult_t> other_operation(ncclComm_t comm, std::size_t count,
                                            ncclDataType_t type) {
  const std::size_t bytes = call_bytes(count, type);
  if (t_group.depth > 0) {
    note_group_operation();
    const std::optional<ncclResult_t> refused = refuse_if_broken(comm, bytes, false);
    if (refused) t_group.refused = comm;
    return refused;
  }
  if (const std::optional<ncclResult_t> refused = refuse_if_broken(comm, bytes, true)) {
    return refused;
  }
  count_other(comm, bytes);
  return std::nullopt;
}

// Before the real end of the outermost group: a group holding a refused
// operation fails as a whole, as NCCL's does when one of its operations
// fails (NCCL then runs none of them).
void fail_if_refused(const GroupState& group) {
  if (group.refused) fail_nccl_group(*group.refused);
}

// The outermost group's result: its first failure (`result`), else the
// real end's. After a refusal, ncclRemoteError, its reason the last error
// again (NCCL's failed end may have recorded its own).
ncclResult_t group_result(const GroupState& group, ncclResult_t result, ncclResult_t end) {
  if (!group.refused) return result == ncclSuccess ? end : result;
  const ncclResult_t refused = refusal(*group.refused);
  return result == ncclSuccess ? refused : result;
}

// NCCL_COMM_BLOCKING read as NCCL reads it (strtoll, any base): 0 or 1
// overrides every communicator's config, any other value none.
std::optional<bool> environment_non_blocking() {
  const char* env = std::getenv("NCCL_COMM_BLOCKING");
  if (env == nullptr || *env == '\0') return std::nullopt;
  errno = 0;
  const long long value = std::strtoll(env, nullptr, 0);
  if (errno != 0 || (value != 0 && value != 1)) return std::nullopt;
  return value == 0;
}

// Whether NCCL makes a new communicator non-blocking: the environment, else
// config->blocking, else `otherwise` (a split with no config inherits its
// parent's; every other init is blocking).
bool non_blocking(const ncclConfig_t* config, bool otherwise = false) {
  if (const std::optional<bool> from_environment = environment_non_blocking()) {
    return *from_environment;
  }
  if (config != nullptr && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking == 0;
  return otherwise;
}

// A parent the interposer did not see made counts as blocking, NCCL's default.
bool non_blocking_parent(ncclComm_t parent) {
  const auto state = find_comm(parent);
  return state != nullptr && state->non_blocking;
}

const char* const kNonBlocking =
    "the communicator is non-blocking (NCCL_COMM_BLOCKING=0, ncclConfig_t::blocking = 0, or a "
    "split with no config of a non-blocking communicator), which peerplan's bootstrap cannot "
    "wait on";

// After a successful real init of `comm`.
void created(ncclComm_t comm, const std::string& why_not = {}) {
  if (t_group.depth > 0) {
    // NCCL initialises it at the group's end; peerplan comes after that.
    if (why_not.empty()) {
      take_comm(comm);  // a communicator freed at this address before (abort_instead.hpp)
      t_group.created.push_back(comm);
    } else {
      attach_peerplan(comm, why_not);  // records the reason, no collective step
    }
    return;
  }
  attach_peerplan(comm, why_not);
}

// After a successful real init of `comm` by ncclCommInitRank(Config) or
// ncclCommSplit, which NCCL made non-blocking or not. (A name of its own: a
// string literal given to an overload set converts to bool first.)
void created_blocking_or_not(ncclComm_t comm, bool non_blocking) {
  if (non_blocking) {
    attach_peerplan(comm, kNonBlocking, true);  // the reason only, even in a group
  } else {
    created(comm);
  }
}

// Leaves the outermost group: its state, and this thread's outside any.
GroupState leave_group() {
  GroupState group = std::move(t_group);
  t_group = GroupState{};
  return group;
}

// After the real end of the outermost group (simulated or not), which
// initialised the communicators made in it: peerplan over them.
void attach_created(const std::vector<ncclComm_t>& created) {
  // Several in one group is most likely one process driving several
  // ranks of one communicator (one GPU each), whose collective create
  // would wait for ranks this thread runs only afterwards.
  const std::string why_not =
      created.size() > 1
          ? "several communicators were initialised in one group (one process for several "
            "ranks?), and peerplan runs one rank per process"
          : "";
  for (ncclComm_t comm : created) attach_peerplan(comm, why_not);
}

// An abort must return although GPU work may never end (that is what
// aborts are for): peerplan's release waits for its kernels (up to the
// timeout) and frees memory (cudaFree waits for every kernel of the
// device), so it runs on a helper thread, waited for only briefly. Past
// that it goes on there, and its memory stays until it ends.
void release_without_waiting(std::shared_ptr<peerplan::Communicator> peerplan) {
  using peerplan::transport::cuda::TeardownClock;
  if (peerplan == nullptr) return;
  const bool released = peerplan::transport::cuda::run_until(
      [peerplan = std::move(peerplan)]() mutable { peerplan.reset(); },
      TeardownClock::now() + peerplan::transport::cuda::kTeardownMargin);
  if (!released) {
    peerplan::log::warn(
        "NCCL interposer: ncclCommAbort returns while peerplan's side is still being released "
        "on a helper thread (GPU work on this device has not ended); its memory is freed when "
        "that work ends");
  }
}

// One WARN per process: a program may call NCCL in a loop.
ncclResult_t missing(const char* name) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    const std::string why =
        real().error.empty() ? "the NCCL in " + real().source + " lacks it" : real().error;
    log::warn(
        std::string("NCCL interposer: ") + name +
        " (and every call whose real function is missing) fails with ncclInternalError: " + why);
  }
  return ncclInternalError;
}

}  // namespace
}  // namespace peerplan::nccl_interposer

using namespace peerplan::nccl_interposer;

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks,
                                                   ncclUniqueId commId, int rank) {
  if (!real().comm_init_rank) return missing("ncclCommInitRank");
  const ncclResult_t result = note_nccl_result(real().comm_init_rank(comm, nranks, commId, rank));
  // NCCL_COMM_BLOCKING=0 makes this communicator non-blocking too.
  if (result == ncclSuccess || result == ncclInProgress)
    created_blocking_or_not(*comm, non_blocking(nullptr));
  return result;
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                         ncclUniqueId commId, int rank,
                                                         ncclConfig_t* config) {
  if (!real().comm_init_rank_config) return missing("ncclCommInitRankConfig");
  const ncclResult_t result =
      note_nccl_result(real().comm_init_rank_config(comm, nranks, commId, rank, config));
  if (result == ncclSuccess || result == ncclInProgress)
    created_blocking_or_not(*comm, non_blocking(config));
  return result;
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!real().comm_init_all) return missing("ncclCommInitAll");
  const ncclResult_t result = note_nccl_result(real().comm_init_all(comms, ndev, devlist));
  if (result == ncclSuccess) {
    for (int i = 0; i < ndev; ++i) {
      created(comms[i],
              "ncclCommInitAll makes every rank in one process, and peerplan runs one rank per "
              "process");
    }
  }
  return result;
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                                ncclComm_t* newcomm, ncclConfig_t* config) {
  if (!real().comm_split) return missing("ncclCommSplit");
  const ncclResult_t result =
      note_nccl_result(real().comm_split(comm, color, key, newcomm, config));
  if ((result == ncclSuccess || result == ncclInProgress) && newcomm && *newcomm) {
    // With no config NCCL copies the parent's (the environment still overrides).
    created_blocking_or_not(*newcomm,
                            non_blocking(config, config == nullptr && non_blocking_parent(comm)));
  }
  return result;
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                                ncclDataType_t datatype, ncclRedOp_t op,
                                                ncclComm_t comm, cudaStream_t stream) {
  if (!real().all_reduce) return missing("ncclAllReduce");
  const NcclAllReduce call{sendbuff, recvbuff, count, datatype, op, comm, stream};
  if (t_group.depth == 0) return run(call, choose(call, false, 1));
  if (t_group.ops == 0) {
    ++t_group.ops;
    // Held only if peerplan could run it as the group's one operation. Any
    // other goes to NCCL now, so a bad argument fails at the call, as NCCL's
    // own check does (and NCCL's group end reports it again).
    const Choice alone = choose(call, true, 1);
    if (!alone.decision.to_peerplan) return run_in_group(call, alone, t_group);
    t_group.held = call;  // the group's only operation, so far
    return ncclSuccess;
  }
  note_group_operation();
  return run_in_group(call, choose(call, true, t_group.ops), t_group);
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclGroupStart() {
  if (!real().group_start) return missing("ncclGroupStart");
  const ncclResult_t result = note_nccl_result(real().group_start());
  if (result == ncclSuccess) ++t_group.depth;
  return result;
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclGroupEnd() {
  if (!real().group_end) return missing("ncclGroupEnd");
  if (t_group.depth != 1) {
    // Not the outermost (or no group at all: NCCL reports the misuse).
    if (t_group.depth > 1) --t_group.depth;
    return note_nccl_result(real().group_end());
  }
  GroupState group = leave_group();
  std::optional<Choice> to_peerplan;
  ncclResult_t result = group.held_result;
  if (group.held) {
    Choice choice = choose(*group.held, true, 1);
    if (choice.decision.to_peerplan) {
      to_peerplan = std::move(choice);
    } else {
      // Still inside the real group, where the application put it.
      const ncclResult_t held = run_in_group(*group.held, choice, group);
      if (result == ncclSuccess) result = held;
    }
  }
  fail_if_refused(group);
  const ncclResult_t end = note_nccl_result(real().group_end());
  result = group_result(group, result, end);
  // A group NCCL failed ran none of its operations: neither does peerplan
  // (a program that retries it would otherwise sum twice).
  if (to_peerplan && end == ncclSuccess) {
    const ncclResult_t ran = run(*group.held, *to_peerplan);
    if (result == ncclSuccess) result = ran;
  }
  if (end == ncclSuccess) attach_created(group.created);
  return result;
}

// Headers older than NCCL 2.22 have no simulated groups: nothing to define.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
PEERPLAN_NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (!real().group_simulate_end) return missing("ncclGroupSimulateEnd");
  if (t_group.depth != 1) {
    if (t_group.depth > 1) --t_group.depth;
    return note_nccl_result(real().group_simulate_end(simInfo));
  }
  const GroupState group = leave_group();
  ncclResult_t result = group.held_result;
  if (group.held) {
    // NCCL estimates it with the rest of the group and runs none of it:
    // neither peerplan's nor NCCL's call, so not counted.
    const NcclAllReduce& held = *group.held;
    const ncclResult_t handed = note_nccl_result(real().all_reduce(
        held.send, held.recv, held.count, held.type, held.op, held.comm, held.stream));
    if (result == ncclSuccess) result = handed;
  }
  fail_if_refused(group);
  const ncclResult_t end = note_nccl_result(real().group_simulate_end(simInfo));
  result = group_result(group, result, end);
  // NCCL initialises the group's new communicators all the same.
  if (end == ncclSuccess) attach_created(group.created);
  return result;
}
#endif

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!real().comm_finalize) return missing("ncclCommFinalize");
  // Before NCCL's: peerplan's close exchanges over this communicator.
  const auto state = detach_peerplan(comm, t_group.depth == 0, false);
  // NCCL's would wait for good for what peerplan's side left in it.
  if (state && must_abort_instead(*state)) return abort_instead(comm, *state, Teardown::finalize);
  return note_nccl_result(real().comm_finalize(comm));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!real().comm_destroy) return missing("ncclCommDestroy");
  const auto state = detach_peerplan(comm, t_group.depth == 0, true);
  if (state && must_abort_instead(*state)) return abort_instead(comm, *state, Teardown::destroy);
  return note_nccl_result(real().comm_destroy(comm));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!real().comm_abort) return missing("ncclCommAbort");
  // NCCL first: aborting stops its kernels, which peerplan's release could
  // otherwise wait behind. Then a local release, no collective step. Calls
  // on other threads that found the state already go to NCCL from here on;
  // one already in peerplan keeps its communicator until it returns.
  auto state = take_comm(comm);
  if (state) state->aborted = true;
  // A finalize aborted it already (abort_instead.hpp): NCCL's handle is freed.
  const ncclResult_t result =
      state && state->nccl_freed ? ncclSuccess : note_nccl_result(real().comm_abort(comm));
  if (state) {
    release_without_waiting(state->release_communicator());
    if (!state->summarized.exchange(true))
      peerplan::log::info(peerplan::log::Subsystem::init,
                          "NCCL interposer: rank " + std::to_string(state->rank) +
                              " (aborted) calls by size:\n" + state->summary());
  }
  return result;
}

PEERPLAN_NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm) { return last_error_text(comm); }

PEERPLAN_NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!real().comm_get_async_error) return missing("ncclCommGetAsyncError");
  const auto state = find_comm(comm);
  // Freed by a finalize that aborted it (abort_instead.hpp): NCCL must not
  // see it, but for NCCL's own calls during that abort.
  if (state != nullptr && state->nccl_freed && asyncError != nullptr &&
      !in_real_nccl(__builtin_return_address(0))) {
    *asyncError = ncclRemoteError;
    return ncclSuccess;
  }
  const ncclResult_t result = real().comm_get_async_error(comm, asyncError);
  if (result != ncclSuccess || asyncError == nullptr || *asyncError != ncclSuccess) return result;
  if (state == nullptr || state->async_error.load() == ncclSuccess) return result;
  // NCCL (2.28) asks it too, through its PLT, before each operation it
  // enqueues: told of peerplan's error, it would refuse the calls handed to
  // it after a create that gave up, which the docs and counters say NCCL
  // runs (after a timeout the interposer refuses them itself). NCCL gets
  // its own answer, the program peerplan's (to abort the communicator). The
  // address is read here: a helper's could be this function's.
  if (!in_real_nccl(__builtin_return_address(0))) {
    *asyncError = static_cast<ncclResult_t>(state->async_error.load());
  }
  return result;
}

// The other operations: counted (a group's operations, or fallbacks of
// their own), then passed to NCCL as they are, but on a broken
// communicator (other_operation).
PEERPLAN_NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                                cudaStream_t stream) {
  if (!real().broadcast) return missing("ncclBroadcast");
  if (const auto refused = other_operation(comm, count, datatype)) return *refused;
  return note_nccl_result(
      real().broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream));
}

// NCCL's own ncclBcast calls ncclBroadcast through its PLT, which the
// preload binds to the interposer's: the real broadcast in place instead,
// counted once.
PEERPLAN_NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype,
                                            int root, ncclComm_t comm, cudaStream_t stream) {
  if (!real().broadcast) return missing("ncclBcast");
  if (const auto refused = other_operation(comm, count, datatype)) return *refused;
  return note_nccl_result(real().broadcast(buff, buff, count, datatype, root, comm, stream));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, ncclRedOp_t op, int root,
                                             ncclComm_t comm, cudaStream_t stream) {
  if (!real().reduce) return missing("ncclReduce");
  if (const auto refused = other_operation(comm, count, datatype)) return *refused;
  return note_nccl_result(
      real().reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff,
                                                size_t sendcount, ncclDataType_t datatype,
                                                ncclComm_t comm, cudaStream_t stream) {
  if (!real().all_gather) return missing("ncclAllGather");
  if (const auto refused = other_operation(comm, sendcount, datatype)) return *refused;
  return note_nccl_result(real().all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff,
                                                    size_t recvcount, ncclDataType_t datatype,
                                                    ncclRedOp_t op, ncclComm_t comm,
                                                    cudaStream_t stream) {
  if (!real().reduce_scatter) return missing("ncclReduceScatter");
  if (const auto refused = other_operation(comm, recvcount, datatype)) return *refused;
  return note_nccl_result(
      real().reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count,
                                           ncclDataType_t datatype, int peer, ncclComm_t comm,
                                           cudaStream_t stream) {
  if (!real().send) return missing("ncclSend");
  if (const auto refused = other_operation(comm, count, datatype)) return *refused;
  return note_nccl_result(real().send(sendbuff, count, datatype, peer, comm, stream));
}

PEERPLAN_NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                           int peer, ncclComm_t comm, cudaStream_t stream) {
  if (!real().recv) return missing("ncclRecv");
  if (const auto refused = other_operation(comm, count, datatype)) return *refused;
  return note_nccl_result(real().recv(recvbuff, count, datatype, peer, comm, stream));
}
