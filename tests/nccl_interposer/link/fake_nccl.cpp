// SPDX-License-Identifier: Apache-2.0
// A stand-in for libnccl.so.2 that runs nothing and records, in order, the
// calls that reach it: the interposer's order test points
// PEERPLAN_NCCL_LIBRARY at it, so the calls the interposer hands to "the
// real NCCL" can be checked without a GPU. fake_nccl_log() returns the
// record, one call per line. Where NCCL 2.28 calls its own exported
// functions (through its PLT, where a preloaded interposer's definitions
// take the calls), so does this fake.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

namespace {
std::string& record() {
  static std::string calls;
  return calls;
}
ncclResult_t note(const std::string& call) {
  record() += call + "\n";
  return ncclSuccess;
}
std::string last_error = "fake last error";
ncclResult_t group_end_result = ncclSuccess;
// As NCCL's groups: an operation refused in a group fails the group too,
// reported by its outermost end.
int group_depth = 0;
ncclResult_t group_error = ncclSuccess;
// The outermost end reports an operation the group refused.
ncclResult_t end_group() {
  if (group_depth > 0 && --group_depth > 0) return ncclSuccess;
  const ncclResult_t refused = group_error;
  group_error = ncclSuccess;
  return refused;
}
int fake_comms[8];  // distinct handles
// The all-gathers that never complete (fake_nccl_hang_all_gathers), by
// communicator, until its abort.
bool all_gathers_hang = false;
std::map<ncclComm_t, int> pending;
// What every ncclAllGather returns (fake_nccl_fail_all_gathers).
ncclResult_t all_gather_result = ncclSuccess;
// NCCL's finalize and destroy wait for the communicator's operations: with
// one that never completes they never return. Recorded so instead.
ncclResult_t waits(const char* call, ncclComm_t comm) {
  const auto found = pending.find(comm);
  if (found == pending.end()) return note(call);
  return note(std::string(call) + " would wait forever for " + std::to_string(found->second) +
              " pending operation(s)");
}
int next_comm = 0;
ncclComm_t new_comm() { return reinterpret_cast<ncclComm_t>(&fake_comms[next_comm++ % 8]); }
}  // namespace

#define FAKE extern "C" __attribute__((visibility("default")))

FAKE const char* fake_nccl_log() { return record().c_str(); }
FAKE void fake_nccl_clear() { record().clear(); }
// A failure NCCL records in a function the interposer does not define
// (ncclMemAlloc, say): its text becomes NCCL's last error.
FAKE void fake_nccl_fail_elsewhere(const char* text) { last_error = text; }
// What the next ncclGroupEnd returns (then ncclSuccess again).
FAKE void fake_nccl_fail_next_group_end(ncclResult_t result) { group_end_result = result; }
// While `hang`, every ncclAllGather is one a peer never joins: it stays
// pending on its communicator until ncclCommAbort.
FAKE void fake_nccl_hang_all_gathers(bool hang) { all_gathers_hang = hang; }
// While `result` is not ncclSuccess, every ncclAllGather returns it at once
// and queues nothing, as NCCL's enqueue does when it fails.
FAKE void fake_nccl_fail_all_gathers(ncclResult_t result) { all_gather_result = result; }
// How many of those `comm` holds.
FAKE int fake_nccl_pending(ncclComm_t comm) {
  const auto found = pending.find(comm);
  return found == pending.end() ? 0 : found->second;
}

FAKE ncclResult_t ncclGetUniqueId(ncclUniqueId*) { return note("GetUniqueId"); }
FAKE const char* ncclGetErrorString(ncclResult_t) { return "fake error string"; }
FAKE const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }
FAKE ncclResult_t ncclCommInitRank(ncclComm_t* comm, int, ncclUniqueId, int rank) {
  *comm = new_comm();
  return note("CommInitRank " + std::to_string(rank));
}
FAKE ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int rank,
                                         ncclConfig_t*) {
  *comm = new_comm();
  return note("CommInitRankConfig " + std::to_string(rank));
}
FAKE ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  for (int i = 0; i < ndev; ++i) comms[i] = new_comm();
  return note("CommInitAll " + std::to_string(ndev));
}
FAKE ncclResult_t ncclCommSplit(ncclComm_t, int color, int, ncclComm_t* newcomm, ncclConfig_t*) {
  *newcomm = new_comm();
  return note("CommSplit " + std::to_string(color));
}
// As NCCL's enqueue check: arguments NCCL's ArgsCheck refuses fail the
// call at once (and its group); so does a communicator that reports an
// asynchronous error (ncclCommEnsureReady).
FAKE ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  const bool invalid = comm == nullptr || type < 0 || type >= ncclNumTypes || op < 0 ||
                       op >= ncclNumOps || (count > 0 && (send == nullptr || recv == nullptr));
  if (invalid) {
    note("AllReduce invalid " + std::to_string(count));
    if (group_depth > 0 && group_error == ncclSuccess) group_error = ncclInvalidArgument;
    return ncclInvalidArgument;
  }
  ncclResult_t async = ncclSuccess;
  if (const ncclResult_t asked = ncclCommGetAsyncError(comm, &async); asked != ncclSuccess) {
    return asked;
  }
  if (async != ncclSuccess && async != ncclInProgress) {
    note("AllReduce refused " + std::to_string(count));
    return async;
  }
  return note("AllReduce " + std::to_string(count));
}
FAKE ncclResult_t ncclGroupStart() {
  ++group_depth;
  return note("GroupStart");
}
FAKE ncclResult_t ncclGroupEnd() {
  note("GroupEnd");
  const ncclResult_t refused = end_group();
  const ncclResult_t result = group_end_result != ncclSuccess ? group_end_result : refused;
  group_end_result = ncclSuccess;
  return result;
}
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
FAKE ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  note("GroupSimulateEnd");
  return end_group();
}
#endif
FAKE ncclResult_t ncclCommFinalize(ncclComm_t comm) { return waits("CommFinalize", comm); }
FAKE ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const ncclResult_t result = waits("CommDestroy", comm);
  pending.erase(comm);
  return result;
}
FAKE ncclResult_t ncclCommAbort(ncclComm_t comm) {
  pending.erase(comm);  // abort stops what NCCL still runs
  return note("CommAbort");
}
FAKE ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}
FAKE ncclResult_t ncclBroadcast(const void*, void*, size_t count, ncclDataType_t, int, ncclComm_t,
                                cudaStream_t) {
  return note("Broadcast " + std::to_string(count));
}
// As NCCL's: a broadcast in place.
FAKE ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t type, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, type, root, comm, stream);
}
FAKE ncclResult_t ncclReduce(const void*, void*, size_t count, ncclDataType_t, ncclRedOp_t, int,
                             ncclComm_t, cudaStream_t) {
  return note("Reduce " + std::to_string(count));
}
// One rank: the gather is a copy, on the stream (when the buffers differ),
// so that the interposer's bootstrap over this NCCL works on a GPU.
// FAKE_NCCL_ALLGATHER_STALL_MS=<ms> holds the stream that long first: a
// peer that does not come.
FAKE ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                ncclComm_t comm, cudaStream_t stream) {
  if (all_gather_result != ncclSuccess) {
    note("AllGather " + std::to_string(count) + " (fails)");
    return all_gather_result;
  }
  if (all_gathers_hang) {
    ++pending[comm];
    return note("AllGather " + std::to_string(count) + " (never completes)");
  }
  if (const char* stall = std::getenv("FAKE_NCCL_ALLGATHER_STALL_MS")) {
    static int milliseconds = 0;
    milliseconds = std::atoi(stall);
    cudaLaunchHostFunc(
        stream,
        [](void* ms) {
          std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(ms)));
        },
        &milliseconds);
  }
  if (send != recv && type == ncclUint8 && count > 0 &&
      cudaMemcpyAsync(recv, send, count, cudaMemcpyDefault, stream) != cudaSuccess) {
    cudaGetLastError();
  }
  return note("AllGather " + std::to_string(count));
}
FAKE ncclResult_t ncclReduceScatter(const void*, void*, size_t count, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, cudaStream_t) {
  return note("ReduceScatter " + std::to_string(count));
}
FAKE ncclResult_t ncclSend(const void*, size_t count, ncclDataType_t, int, ncclComm_t,
                           cudaStream_t) {
  return note("Send " + std::to_string(count));
}
FAKE ncclResult_t ncclRecv(void*, size_t count, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return note("Recv " + std::to_string(count));
}
FAKE ncclResult_t ncclCommUserRank(const ncclComm_t, int* rank) {
  *rank = 0;
  return note("CommUserRank");
}
FAKE ncclResult_t ncclCommCount(const ncclComm_t, int* count) {
  *count = 1;
  return ncclSuccess;
}
FAKE ncclResult_t ncclCommCuDevice(const ncclComm_t, int* device) {
  *device = 0;
  return ncclSuccess;
}
