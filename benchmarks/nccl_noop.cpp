// SPDX-License-Identifier: Apache-2.0
// A stand-in for libnccl.so.2 whose functions do nothing and succeed: what
// peerplan_nccl_interposer_cost points PEERPLAN_NCCL_LIBRARY at, so that
// the time of a call is the interposer's own. Defines each function the
// interposer resolves (src/nccl_interposer/real_nccl.cpp), no more.
#include <cuda_runtime_api.h>
#include <nccl.h>

#define NOOP extern "C" __attribute__((visibility("default")))

namespace {
int fake_comm;  // the one handle every init returns
}  // namespace

NOOP ncclResult_t ncclCommInitRank(ncclComm_t* comm, int, ncclUniqueId, int) {
  *comm = reinterpret_cast<ncclComm_t>(&fake_comm);
  return ncclSuccess;
}
NOOP ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int, ncclConfig_t*) {
  *comm = reinterpret_cast<ncclComm_t>(&fake_comm);
  return ncclSuccess;
}
NOOP ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  for (int i = 0; i < ndev; ++i) comms[i] = reinterpret_cast<ncclComm_t>(&fake_comm);
  return ncclSuccess;
}
NOOP ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t* newcomm, ncclConfig_t*) {
  *newcomm = reinterpret_cast<ncclComm_t>(&fake_comm);
  return ncclSuccess;
}
NOOP ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclGroupStart() { return ncclSuccess; }
NOOP ncclResult_t ncclGroupEnd() { return ncclSuccess; }
NOOP ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
NOOP ncclResult_t ncclCommDestroy(ncclComm_t) { return ncclSuccess; }
NOOP ncclResult_t ncclCommAbort(ncclComm_t) { return ncclSuccess; }
NOOP const char* ncclGetLastError(ncclComm_t) { return ""; }
NOOP ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}
NOOP ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                                cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclBcast(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                             ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                                cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP ncclResult_t ncclCommUserRank(const ncclComm_t, int* rank) {
  *rank = 0;
  return ncclSuccess;
}
NOOP ncclResult_t ncclCommCount(const ncclComm_t, int* count) {
  *count = 1;
  return ncclSuccess;
}
NOOP ncclResult_t ncclCommCuDevice(const ncclComm_t, int* device) {
  *device = 0;
  return ncclSuccess;
}
NOOP const char* ncclGetErrorString(ncclResult_t) { return "no error (stand-in NCCL)"; }
