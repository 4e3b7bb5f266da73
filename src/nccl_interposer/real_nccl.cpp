// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/real_nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "core/log.hpp"

namespace peerplan::nccl_interposer {
namespace {

// Where the real functions come from: a handle for dlsym, and its name.
struct Source {
  void* handle = nullptr;
  std::string name;
  std::string error;
};

Source find_source() {
  if (const char* path = std::getenv("PEERPLAN_NCCL_LIBRARY"); path && *path) {
    // RTLD_LOCAL: its symbols must not become the global definitions the
    // application's calls bind to (those are this library's).
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      return {nullptr, path,
              std::string("PEERPLAN_NCCL_LIBRARY=") + path +
                  " could not be loaded: " + (why ? why : "unknown error") +
                  "; point it at the libnccl.so.2 your program uses"};
    }
    return {handle, path, {}};
  }
  if (dlsym(RTLD_NEXT, "ncclAllReduce") != nullptr) return {RTLD_NEXT, "the next libnccl", {}};
  // A libnccl loaded privately (RTLD_LOCAL, as Python loads extension
  // modules and what they need) is not searched by RTLD_NEXT.
  if (void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) {
    return {handle, "the loaded libnccl.so.2", {}};
  }
  return {nullptr, "",
          "no NCCL found after libpeerplan_nccl.so: the program has not loaded libnccl.so.2; "
          "set PEERPLAN_NCCL_LIBRARY to the libnccl.so.2 it uses"};
}

template <class Function>
void resolve(const Source& source, Function& function, const char* name, std::string& missing) {
  function = reinterpret_cast<Function>(dlsym(source.handle, name));
  if (!function) missing += std::string(missing.empty() ? "" : ", ") + name;
}

// The load address of the library that holds `code`, or null.
const void* library_base(const void* code) {
  Dl_info where{};
  if (code == nullptr || dladdr(code, &where) == 0) return nullptr;
  return where.dli_fbase;
}

RealNccl resolve_all() {
  RealNccl real;
  const Source source = find_source();
  real.source = source.name;
  if (!source.error.empty()) {
    real.error = source.error;
    log::warn("NCCL interposer: " + real.error);
    return real;
  }
  std::string missing;
  resolve(source, real.comm_init_rank, "ncclCommInitRank", missing);
  resolve(source, real.comm_init_rank_config, "ncclCommInitRankConfig", missing);
  resolve(source, real.comm_init_all, "ncclCommInitAll", missing);
  resolve(source, real.comm_split, "ncclCommSplit", missing);
  resolve(source, real.all_reduce, "ncclAllReduce", missing);
  resolve(source, real.group_start, "ncclGroupStart", missing);
  resolve(source, real.group_end, "ncclGroupEnd", missing);
  resolve(source, real.comm_finalize, "ncclCommFinalize", missing);
  resolve(source, real.comm_destroy, "ncclCommDestroy", missing);
  resolve(source, real.comm_abort, "ncclCommAbort", missing);
  resolve(source, real.get_last_error, "ncclGetLastError", missing);
  resolve(source, real.comm_get_async_error, "ncclCommGetAsyncError", missing);
  resolve(source, real.broadcast, "ncclBroadcast", missing);
  resolve(source, real.reduce, "ncclReduce", missing);
  resolve(source, real.all_gather, "ncclAllGather", missing);
  resolve(source, real.reduce_scatter, "ncclReduceScatter", missing);
  resolve(source, real.send, "ncclSend", missing);
  resolve(source, real.recv, "ncclRecv", missing);
  resolve(source, real.comm_user_rank, "ncclCommUserRank", missing);
  resolve(source, real.comm_count, "ncclCommCount", missing);
  resolve(source, real.comm_cu_device, "ncclCommCuDevice", missing);
  resolve(source, real.get_error_string, "ncclGetErrorString", missing);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  real.group_simulate_end = reinterpret_cast<decltype(real.group_simulate_end)>(
      dlsym(source.handle, "ncclGroupSimulateEnd"));
#endif
  real.library_base = library_base(reinterpret_cast<const void*>(real.comm_get_async_error));
  if (!missing.empty()) {
    real.error = "the NCCL in " + real.source + " lacks " + missing +
                 " (an NCCL older than this interposer needs?); those calls fail";
    log::warn("NCCL interposer: " + real.error);
  }
  return real;
}

}  // namespace

const RealNccl& real_nccl() {
  // Never destroyed: the program may call NCCL from static destructors.
  static const RealNccl* const real = new RealNccl(resolve_all());
  return *real;
}

bool in_real_nccl(const void* code) {
  const void* base = real_nccl().library_base;
  return base != nullptr && library_base(code) == base;
}

bootstrap::NcclFunctions bootstrap_functions(const RealNccl& real) {
  return {real.all_gather, real.comm_get_async_error, real.comm_user_rank,
          real.comm_count, real.comm_cu_device,       real.get_error_string};
}

}  // namespace peerplan::nccl_interposer
