// SPDX-License-Identifier: Apache-2.0
// The real NCCL behind the interposer: the functions it defines itself
// (they would call themselves) and those its bootstrap needs, resolved once,
// at the first interposed call. From PEERPLAN_NCCL_LIBRARY when it is set
// (dlopen of that file), else the next definition after this library
// (dlsym(RTLD_NEXT)), else an already loaded libnccl.so.2 (one a program
// loaded privately, e.g. a Python extension's, is not in the global scope).
#pragma once

#include <nccl.h>

#include <string>

#include "bootstrap/nccl_bootstrap.hpp"

namespace peerplan::nccl_interposer {

struct RealNccl {
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommSplit) comm_split = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  // Optional (NCCL 2.22 on): its absence is no error until a call of it.
  decltype(&::ncclGroupSimulateEnd) group_simulate_end = nullptr;
#endif
  decltype(&::ncclCommFinalize) comm_finalize = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclGetLastError) get_last_error = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  // The other operations a group may hold (counted, then passed on).
  // ncclBcast too: it is ncclBroadcast in place.
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclReduce) reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  // Not interposed: for the bootstrap and the messages.
  decltype(&::ncclCommUserRank) comm_user_rank = nullptr;
  decltype(&::ncclCommCount) comm_count = nullptr;
  decltype(&::ncclCommCuDevice) comm_cu_device = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;

  std::string source;  // where they were found, for messages
  // The load address of the library they were found in, or null.
  const void* library_base = nullptr;
  std::string error;  // why some were not, or empty
};

// Resolved once (thread-safe). A function not found is null, and `error`
// says which and why: an interposed call of it returns ncclInternalError.
const RealNccl& real_nccl();

// Whether `code` lies in the library of the real functions: how the
// interposer tells NCCL's own calls of an exported NCCL function (through its
// PLT, which the preload binds to the interposer) from the program's.
bool in_real_nccl(const void* code);

// What the bootstrap over NCCL calls.
bootstrap::NcclFunctions bootstrap_functions(const RealNccl& real);

}  // namespace peerplan::nccl_interposer
