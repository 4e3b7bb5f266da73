// SPDX-License-Identifier: Apache-2.0
// The C interface (include/peerplan/peerplan.h) over the C++ Communicator.
// Each entry point checks its handle, converts the C structs and runs the
// C++ call through guarded() (guarded_call.hpp), so no exception leaves.
#include "peerplan/peerplan.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "capi/c_config.hpp"
#include "capi/guarded_call.hpp"
#include "capi/live_handles.hpp"
#include "communicator/declare_failed_locally.hpp"
#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/version.hpp"

struct peerplan_comm {
  std::unique_ptr<peerplan::Communicator> comm;
  // peerplan_stats, peerplan_plan_stats and the undeclared-key readers may
  // run on several threads (a monitor beside the caller): the snapshot is
  // read and replaced under it.
  std::mutex stats_mutex;
  peerplan::Stats stats;  // what the last peerplan_stats read
  // The plan names and launch texts handed out by peerplan_plan_stats. They
  // must stay valid until the next declare, close or destroy (peerplan.h),
  // whatever later peerplan_stats calls do, so they are kept apart from
  // the snapshot: a set's elements never move, and it only grows until then.
  std::set<std::string, std::less<>> texts;

  const char* keep(const std::string& text) { return texts.insert(text).first->c_str(); }
  void forget_texts() {
    const std::lock_guard lock(stats_mutex);
    texts.clear();
  }
};

namespace peerplan::capi {
namespace {

TensorLayout to_layout(const peerplan_layout_t& layout) {
  // ndim 0 passes here, to be refused by declare and the calls (plan/layout_rules.cpp).
  if (layout.ndim < 0 || layout.ndim > kMaxRank) {
    throw InvalidArgument("layout.ndim is " + std::to_string(layout.ndim) + "; use 1 to " +
                          std::to_string(kMaxRank));
  }
  if (layout.ndim > 0 && layout.shape == nullptr) {
    throw InvalidArgument("layout.shape is NULL with ndim " + std::to_string(layout.ndim));
  }
  const std::span<const std::int64_t> shape(layout.shape, static_cast<std::size_t>(layout.ndim));
  if (layout.strides == nullptr) return TensorLayout::contiguous(shape);
  return TensorLayout::strided(shape,
                               std::span(layout.strides, static_cast<std::size_t>(layout.ndim)));
}

DataType to_dtype(peerplan_dtype_t dtype) {
  if (dtype != PEERPLAN_F16 && dtype != PEERPLAN_BF16 && dtype != PEERPLAN_F32) {
    throw InvalidArgument("dtype " + std::to_string(static_cast<int>(dtype)) +
                          " is not a peerplan_dtype_t; use PEERPLAN_F16, PEERPLAN_BF16 or "
                          "PEERPLAN_F32");
  }
  return static_cast<DataType>(dtype);
}

Declaration to_declaration(const peerplan_declaration_t& d, std::size_t index) {
  const std::string name =
      d.name != nullptr ? d.name : "declarations[" + std::to_string(index) + "]";
  try {
    switch (d.operation) {
      case PEERPLAN_ALL_REDUCE:
        return Declaration::all_reduce(name, to_dtype(d.dtype), to_layout(d.layout));
      case PEERPLAN_FUSED_ADD_RMS_NORM:
        return Declaration::fused_add_rms_norm(name, to_dtype(d.dtype), to_layout(d.layout),
                                               d.weight, d.eps);
    }
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("declarations[" + std::to_string(index) + "] (\"" + name +
                          "\"): " + e.what());
  }
  throw InvalidArgument("declarations[" + std::to_string(index) + "] (\"" + name +
                        "\"): operation " + std::to_string(static_cast<int>(d.operation)) +
                        " is not a peerplan_operation_t; use PEERPLAN_ALL_REDUCE or "
                        "PEERPLAN_FUSED_ADD_RMS_NORM");
}

void set_call_result(peerplan_call_result_t* out, const CallResult& result) noexcept {
  if (out == nullptr) return;
  out->route = static_cast<peerplan_route_t>(result.route);
  out->reason = static_cast<peerplan_fallback_reason_t>(result.reason);
  out->zero_copy = result.zero_copy ? 1 : 0;
  out->protocol = static_cast<peerplan_protocol_t>(result.protocol);
}

void set_plan_info(peerplan_plan_info_t* out, const PlanInfo& info) {
  if (out == nullptr) return;
  out->route = static_cast<peerplan_route_t>(info.route);
  out->reason = static_cast<peerplan_fallback_reason_t>(info.route_reason);
  out->protocol = static_cast<peerplan_protocol_t>(info.protocol);
  out->index = info.index;
}

using LiveComms = LiveHandles<peerplan_comm>;

std::string not_live_message(const char* what) {
  return std::string(what) +
         ": the communicator handle is not live: peerplan_comm_destroy freed it, or "
         "peerplan_comm_create never returned it; create a new communicator and use its "
         "handle";
}

// A null, destroyed or made-up handle is the caller's mistake, said plainly
// rather than crashing; the pointer is only compared, never read, until it
// is known to be live.
bool missing(const peerplan_comm* comm, const char* what, peerplan_result_t* result) {
  if (comm == nullptr) {
    *result = fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [what] {
      return std::string(what) +
             ": the communicator handle is NULL; pass the handle peerplan_comm_create returned";
    });
    return true;
  }
  if (LiveComms::contains(comm) && comm->comm) return false;
  *result = fail_with(PEERPLAN_ERROR_INVALID_USAGE, [what] { return not_live_message(what); });
  return true;
}

// For the queries that return a plain value: whether `comm` can be read
// (a destroyed handle also leaves its message for peerplan_last_error).
bool live(const peerplan_comm* comm, const char* what) {
  peerplan_result_t ignored;
  return !missing(comm, what, &ignored);
}

peerplan_result_t create(MPI_Comm comm, peerplan_config_t config, peerplan_comm_t* out) {
  if (out == nullptr)
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT, "peerplan_comm_create: out is NULL");
  *out = nullptr;
  if (config != nullptr && !LiveHandles<peerplan_config>::contains(config)) {
    return fail(PEERPLAN_ERROR_INVALID_USAGE,
                "peerplan_comm_create: the config handle is not live: peerplan_config_destroy "
                "freed it, or peerplan_config_create never returned it; pass a live config or "
                "NULL");
  }
  return guarded([&] {
    auto handle = std::make_unique<peerplan_comm>();
    handle->comm = Communicator::create(comm, config_from(config));
    LiveComms::add(handle.get());
    *out = handle.release();
  });
}

// peerplan_mpi_world initialised MPI (so peerplan_mpi_finalize ends it).
bool& mpi_initialised_here() {
  static bool here = false;
  return here;
}

// The enums are bytes: an int past a byte would wrap onto a known value.
bool fits_in_byte(int value) { return value >= 0 && value <= UINT8_MAX; }

}  // namespace
}  // namespace peerplan::capi

using namespace peerplan;
using namespace peerplan::capi;

extern "C" {

const char* peerplan_version(void) { return kVersion; }

int peerplan_abi_version(void) { return PEERPLAN_ABI_VERSION; }

const char* peerplan_mpi_library_version(void) {
  // Asked once: the answer cannot change while the library is loaded.
  // A fixed buffer, not a std::string: nothing here may throw across the C interface.
  static const char* const version = [] {
    static char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;  // not used: some MPIs count the terminating NUL in it
    if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
    return static_cast<const char*>(text);
  }();
  return version;
}

const char* peerplan_result_string(peerplan_result_t result) {
  if (result == PEERPLAN_ERROR_OUT_OF_MEMORY) return "out_of_memory";
  return to_string(static_cast<ErrorCode>(result));
}

const char* peerplan_route_name(peerplan_route_t route) {
  if (!fits_in_byte(route)) return "unknown";
  return to_string(static_cast<Route>(route));
}

const char* peerplan_reason_name(peerplan_fallback_reason_t reason) {
  if (!fits_in_byte(reason)) return "unknown";
  return to_string(static_cast<FallbackReason>(reason));
}

const char* peerplan_protocol_name(peerplan_protocol_t protocol) {
  if (!fits_in_byte(protocol)) return "unknown";
  return to_string(static_cast<Protocol>(protocol));
}

const char* peerplan_last_error(void) { return last_error().c_str(); }

peerplan_result_t peerplan_mpi_world(MPI_Fint* world) {
  if (world == nullptr)
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT, "peerplan_mpi_world: world is NULL");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    return fail(PEERPLAN_ERROR_INVALID_USAGE,
                "peerplan_mpi_world: MPI is already finalised; it cannot be used again");
  }
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      return fail(PEERPLAN_ERROR_MPI, "peerplan_mpi_world: MPI_Init_thread failed");
    }
    mpi_initialised_here() = true;
  }
  *world = MPI_Comm_c2f(MPI_COMM_WORLD);
  return PEERPLAN_SUCCESS;
}

void peerplan_mpi_finalize(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (mpi_initialised_here() && !finalized) MPI_Finalize();
  mpi_initialised_here() = false;
}

peerplan_result_t peerplan_comm_create(MPI_Comm comm, peerplan_config_t config,
                                       peerplan_comm_t* out) {
  return create(comm, config, out);
}

peerplan_result_t peerplan_comm_create_f(MPI_Fint comm, peerplan_config_t config,
                                         peerplan_comm_t* out) {
  if (out != nullptr) *out = nullptr;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return fail(PEERPLAN_ERROR_INVALID_USAGE,
                "peerplan_comm_create_f: MPI is not running; call it between MPI_Init and "
                "MPI_Finalize");
  }
  const MPI_Comm c_comm = MPI_Comm_f2c(comm);
  // A handle that names no communicator (never made, or freed) converts to
  // a null pointer in Open MPI; the next MPI call would run the fatal error
  // handler. Where MPI_Comm is an integer, create's own MPI checks see it.
  if constexpr (std::is_pointer_v<MPI_Comm>) {
    if (c_comm == nullptr) {
      return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [comm] {
        return "peerplan_comm_create_f: Fortran handle " + std::to_string(comm) +
               " names no MPI communicator (never created, or freed); pass MPI_Comm_c2f of a "
               "live communicator";
      });
    }
  }
  return create(c_comm, config, out);
}

peerplan_result_t peerplan_comm_close(peerplan_comm_t comm) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_comm_close", &result)) return result;
  return guarded([&] {
    comm->comm->close();
    comm->forget_texts();
  });
}

void peerplan_comm_destroy(peerplan_comm_t comm) {
  if (comm == nullptr) return;
  // A second destroy (or a made-up pointer) frees nothing: it only says so.
  if (!LiveComms::remove(comm)) {
    fail_with(PEERPLAN_ERROR_INVALID_USAGE,
              [] { return not_live_message("peerplan_comm_destroy") + " (nothing was freed)"; });
    return;
  }
  delete comm;
}

int peerplan_comm_rank(peerplan_comm_t comm) {
  return live(comm, "peerplan_comm_rank") ? comm->comm->rank() : -1;
}
int peerplan_comm_size(peerplan_comm_t comm) {
  return live(comm, "peerplan_comm_size") ? comm->comm->size() : 0;
}

const char* peerplan_comm_backend(peerplan_comm_t comm) {
  return live(comm, "peerplan_comm_backend") ? to_string(comm->comm->backend()) : "";
}

int peerplan_comm_cuda_device(peerplan_comm_t comm) {
  return live(comm, "peerplan_comm_cuda_device") ? comm->comm->cuda_device() : -1;
}

int peerplan_comm_p2p_enabled(peerplan_comm_t comm) {
  return live(comm, "peerplan_comm_p2p_enabled") && comm->comm->p2p_enabled() ? 1 : 0;
}

const char* peerplan_comm_p2p_disabled_reason(peerplan_comm_t comm) {
  return live(comm, "peerplan_comm_p2p_disabled_reason") ? comm->comm->p2p_disabled_reason().c_str()
                                                         : "";
}

peerplan_result_t peerplan_declare(peerplan_comm_t comm, const peerplan_declaration_t* declarations,
                                   size_t count) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_declare", &result)) return result;
  if (declarations == nullptr && count > 0) {
    return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [count] {
      return "peerplan_declare: declarations is NULL with count " + std::to_string(count);
    });
  }
  return guarded([&] {
    std::vector<Declaration> set;
    set.reserve(count);
    try {
      for (std::size_t i = 0; i < count; ++i) set.push_back(to_declaration(declarations[i], i));
    } catch (const InvalidArgument& e) {
      // Raised on every rank together, not here alone (the others are in declare).
      communicator::declare_failed_locally(*comm->comm, e.what());
    }
    comm->comm->declare(set);
    comm->forget_texts();
  });
}

int peerplan_has_plan_all_reduce(peerplan_comm_t comm, peerplan_dtype_t dtype,
                                 peerplan_layout_t layout) {
  if (!live(comm, "peerplan_has_plan_all_reduce")) return 0;
  try {
    return comm->comm->has_plan_for(make_all_reduce_key(to_dtype(dtype), to_layout(layout))) ? 1
                                                                                             : 0;
  } catch (...) {
    return 0;  // a key that cannot even be built was never declared
  }
}

int peerplan_has_plan_fused(peerplan_comm_t comm, peerplan_dtype_t dtype, peerplan_layout_t layout,
                            const void* weight, float eps) {
  if (!live(comm, "peerplan_has_plan_fused")) return 0;
  try {
    return comm->comm->has_plan_for(make_fused_key(to_dtype(dtype), to_layout(layout), weight, eps))
               ? 1
               : 0;
  } catch (...) {
    return 0;
  }
}

peerplan_result_t peerplan_plan_all_reduce(peerplan_comm_t comm, peerplan_dtype_t dtype,
                                           peerplan_layout_t layout, peerplan_plan_info_t* info) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_plan_all_reduce", &result)) return result;
  return guarded([&] {
    const auto plan = comm->comm->plan_for(make_all_reduce_key(to_dtype(dtype), to_layout(layout)));
    set_plan_info(info, plan);
  });
}

peerplan_result_t peerplan_plan_fused(peerplan_comm_t comm, peerplan_dtype_t dtype,
                                      peerplan_layout_t layout, const void* weight, float eps,
                                      peerplan_plan_info_t* info) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_plan_fused", &result)) return result;
  return guarded([&] {
    const auto plan =
        comm->comm->plan_for(make_fused_key(to_dtype(dtype), to_layout(layout), weight, eps));
    set_plan_info(info, plan);
  });
}

peerplan_result_t peerplan_all_reduce(peerplan_comm_t comm, const void* in, void* out,
                                      peerplan_dtype_t dtype, peerplan_layout_t layout,
                                      void* stream, peerplan_call_result_t* result) {
  peerplan_result_t status;
  if (missing(comm, "peerplan_all_reduce", &status)) return status;
  return guarded([&] {
    set_call_result(result,
                    comm->comm->all_reduce(in, out, to_dtype(dtype), to_layout(layout), stream));
  });
}

peerplan_result_t peerplan_fused_add_rms_norm(peerplan_comm_t comm, void* inout, void* residual,
                                              const void* weight, float eps, peerplan_dtype_t dtype,
                                              peerplan_layout_t layout, void* stream,
                                              peerplan_call_result_t* result) {
  peerplan_result_t status;
  if (missing(comm, "peerplan_fused_add_rms_norm", &status)) return status;
  return guarded([&] {
    set_call_result(result,
                    comm->comm->fused_add_rms_norm(inout, residual, weight, eps, to_dtype(dtype),
                                                   to_layout(layout), stream));
  });
}

peerplan_result_t peerplan_register_buffers(peerplan_comm_t comm, void* const* data,
                                            const size_t* bytes, size_t count) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_register_buffers", &result)) return result;
  if (count > 0 && (data == nullptr || bytes == nullptr)) {
    return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [count] {
      return "peerplan_register_buffers: data or bytes is NULL with count " + std::to_string(count);
    });
  }
  return guarded([&] {
    std::vector<BufferRegion> regions;
    for (std::size_t i = 0; i < count; ++i) regions.push_back({data[i], bytes[i]});
    comm->comm->register_buffers(regions);
  });
}

peerplan_result_t peerplan_deregister_buffers(peerplan_comm_t comm) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_deregister_buffers", &result)) return result;
  return guarded([&] { comm->comm->deregister_buffers(); });
}

peerplan_result_t peerplan_stats(peerplan_comm_t comm, peerplan_stats_t* stats) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_stats", &result)) return result;
  if (stats == nullptr)
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT, "peerplan_stats: stats is NULL");
  return guarded([&] {
    const std::lock_guard lock(comm->stats_mutex);
    comm->stats = comm->comm->stats();
    const Stats& s = comm->stats;
    *stats = peerplan_stats_t{s.p2p_calls,
                              s.zero_copy_calls,
                              s.fallback_undeclared,
                              s.fallback_over_cutoff,
                              s.fallback_p2p_disabled,
                              s.fallback_node_layout,
                              s.plans.size()};
  });
}

peerplan_result_t peerplan_plan_stats(peerplan_comm_t comm, size_t index,
                                      peerplan_plan_stats_t* stats) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_plan_stats", &result)) return result;
  if (stats == nullptr) {
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT, "peerplan_plan_stats: stats is NULL");
  }
  const std::lock_guard lock(comm->stats_mutex);
  if (index >= comm->stats.plans.size()) {
    return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [&] {
      return "peerplan_plan_stats: index " + std::to_string(index) + " is not below " +
             std::to_string(comm->stats.plans.size()) +
             ", the plan count of the last peerplan_stats call";
    });
  }
  return guarded([&] {  // keeping a text may allocate
    const PlanStats& p = comm->stats.plans[index];
    *stats = peerplan_plan_stats_t{comm->keep(p.name),
                                   static_cast<peerplan_operation_t>(p.operation),
                                   static_cast<peerplan_route_t>(p.route),
                                   static_cast<peerplan_fallback_reason_t>(p.route_reason),
                                   p.hits,
                                   p.fallbacks,
                                   static_cast<peerplan_protocol_t>(p.protocol),
                                   comm->keep(p.launch)};
  });
}

peerplan_result_t peerplan_undeclared_key_count(peerplan_comm_t comm, size_t* count) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_undeclared_key_count", &result)) return result;
  if (count == nullptr) {
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT, "peerplan_undeclared_key_count: count is NULL");
  }
  const std::lock_guard lock(comm->stats_mutex);
  *count = comm->stats.undeclared.size();
  return PEERPLAN_SUCCESS;
}

peerplan_result_t peerplan_undeclared_key(peerplan_comm_t comm, size_t index, char* key,
                                          size_t key_size, size_t* length, uint64_t* calls,
                                          uint64_t* overcount) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_undeclared_key", &result)) return result;
  if (key == nullptr && key_size > 0) {
    return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [key_size] {
      return "peerplan_undeclared_key: key is NULL with key_size " + std::to_string(key_size) +
             "; pass a buffer, or NULL and 0 to ask for the length only";
    });
  }
  if (key_size > 0) key[0] = '\0';  // a failure leaves "", never stale text
  const std::lock_guard lock(comm->stats_mutex);
  const auto& undeclared = comm->stats.undeclared;
  if (index >= undeclared.size()) {
    return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [&] {
      return "peerplan_undeclared_key: index " + std::to_string(index) + " is not below " +
             std::to_string(undeclared.size()) +
             ", the undeclared key count of the last peerplan_stats call" +
             (undeclared.empty() ? std::string(" (none are kept unless PEERPLAN_TRACK_UNDECLARED "
                                               "is above 0, and peerplan_stats reads them)")
                                 : std::string());
    });
  }
  const UndeclaredKeyStats& k = undeclared[index];
  if (length != nullptr) *length = k.key.size();
  if (calls != nullptr) *calls = k.calls;
  if (overcount != nullptr) *overcount = k.overcount;
  if (key == nullptr) return PEERPLAN_SUCCESS;  // the length query
  if (k.key.size() >= key_size) {
    return fail_with(PEERPLAN_ERROR_INVALID_ARGUMENT, [&] {
      return "peerplan_undeclared_key: key_size " + std::to_string(key_size) +
             " is too small for key " + std::to_string(index) + ", which needs " +
             std::to_string(k.key.size() + 1) + " bytes with its NUL";
    });
  }
  std::memcpy(key, k.key.c_str(), k.key.size() + 1);
  return PEERPLAN_SUCCESS;
}

peerplan_result_t peerplan_reset_stats(peerplan_comm_t comm) {
  peerplan_result_t result;
  if (missing(comm, "peerplan_reset_stats", &result)) return result;
  return guarded([&] { comm->comm->reset_stats(); });
}

}  // extern "C"
