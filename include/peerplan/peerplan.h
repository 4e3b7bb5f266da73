// SPDX-License-Identifier: Apache-2.0
/* The C interface of peerplan: for C and Fortran programs (through
 * MPI_Fint communicator handles) and for Python (ctypes). It mirrors the
 * C++ Communicator (peerplan/communicator.hpp); docs/api-c.md shows
 * a whole program.
 *
 * Conventions:
 *  - Every function that can fail returns a peerplan_result_t; on failure
 *    peerplan_last_error() holds the message (per thread, until this
 *    thread's next failing call). No C++ exception crosses this interface.
 *  - Handles are opaque. Collective functions must be called by every rank
 *    of the communicator, in the same order, as in C++.
 *  - A layout is a shape and, optionally, element strides (NULL means
 *    contiguous row-major); at most 8 dimensions.
 *  - Streams are cudaStream_t passed as void* (NULL: the default stream);
 *    the host backend ignores them.
 *  - Enumerated arguments are plain ints (peerplan_dtype_t, ...), so that a
 *    value outside the enum is an INVALID_ARGUMENT, not undefined behaviour
 *    in the library.
 *
 * C99; the library itself is C++20. */
#ifndef PEERPLAN_PEERPLAN_H
#define PEERPLAN_PEERPLAN_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "peerplan/export.h" /* PEERPLAN_API */

#ifdef __cplusplus
extern "C" {
#endif

/* The numbers are the C++ peerplan::ErrorCode values. */
typedef enum peerplan_result {
  PEERPLAN_SUCCESS = 0,
  PEERPLAN_ERROR_INVALID_ARGUMENT = 1, /* a value passed is wrong; the message says which */
  PEERPLAN_ERROR_INVALID_USAGE = 2,    /* right values, wrong moment (e.g. after close) */
  PEERPLAN_ERROR_UNDECLARED_PLAN = 3,  /* a strict lookup of a key nobody declared */
  PEERPLAN_ERROR_MISMATCH = 4,         /* ranks disagree (declarations, configuration) */
  PEERPLAN_ERROR_TIMEOUT = 5,          /* a bounded wait expired; another rank probably stopped */
  PEERPLAN_ERROR_CUDA = 6,
  PEERPLAN_ERROR_NCCL = 7,
  PEERPLAN_ERROR_MPI = 8,
  PEERPLAN_ERROR_SYSTEM = 9,       /* an OS call failed (shared memory, mmap) */
  PEERPLAN_ERROR_UNSUPPORTED = 10, /* valid, but this build or machine cannot serve it */
  PEERPLAN_ERROR_INTERNAL = 11,    /* a bug in peerplan; please report it */
  PEERPLAN_ERROR_OUT_OF_MEMORY = 12
} peerplan_result_t;

enum peerplan_dtype { PEERPLAN_F16 = 0, PEERPLAN_BF16 = 1, PEERPLAN_F32 = 2 };
typedef int peerplan_dtype_t; /* one of enum peerplan_dtype */

enum peerplan_operation { PEERPLAN_ALL_REDUCE = 0, PEERPLAN_FUSED_ADD_RMS_NORM = 1 };
typedef int peerplan_operation_t; /* one of enum peerplan_operation */

enum peerplan_route {
  PEERPLAN_ROUTE_ONE_SHOT = 0,
  PEERPLAN_ROUTE_TWO_SHOT = 1,
  PEERPLAN_ROUTE_FUSED_ONE_SHOT = 2,
  PEERPLAN_ROUTE_FALLBACK = 3,
  PEERPLAN_ROUTE_HIERARCHICAL = 4,
  PEERPLAN_ROUTE_FUSED_TWO_SHOT = 5
};
typedef int peerplan_route_t; /* one of enum peerplan_route */

/* How a P2P route moves the bytes (peerplan::Protocol). */
enum peerplan_protocol {
  PEERPLAN_PROTOCOL_NONE = 0,
  PEERPLAN_PROTOCOL_STAGED = 1,
  PEERPLAN_PROTOCOL_LL = 2,
  PEERPLAN_PROTOCOL_LAMPORT = 3,
  PEERPLAN_PROTOCOL_PULL = 4,
  PEERPLAN_PROTOCOL_DMA = 5
};
typedef int peerplan_protocol_t; /* one of enum peerplan_protocol */

enum peerplan_fallback_reason {
  PEERPLAN_REASON_NONE = 0,
  PEERPLAN_REASON_UNDECLARED = 1,
  PEERPLAN_REASON_OVER_CUTOFF = 2,
  PEERPLAN_REASON_P2P_DISABLED = 3,
  PEERPLAN_REASON_NODE_LAYOUT = 4
};
typedef int peerplan_fallback_reason_t; /* one of enum peerplan_fallback_reason */

typedef struct peerplan_config* peerplan_config_t;
typedef struct peerplan_comm* peerplan_comm_t;

/* A tensor layout. `strides` NULL: contiguous. */
typedef struct peerplan_layout {
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;
} peerplan_layout_t;

/* One declaration. All-reduce: weight NULL, eps ignored. Fused op: the
 * norm weight (its address is part of the key: the calls must pass the
 * same pointer) and epsilon. */
typedef struct peerplan_declaration {
  const char* name;
  peerplan_operation_t operation;
  peerplan_dtype_t dtype;
  peerplan_layout_t layout;
  const void* weight;
  float eps;
} peerplan_declaration_t;

typedef struct peerplan_call_result {
  peerplan_route_t route;
  peerplan_fallback_reason_t reason;
  int zero_copy; /* 1: the peers read this rank's input in place */
  peerplan_protocol_t protocol;
} peerplan_call_result_t;

typedef struct peerplan_plan_info {
  peerplan_route_t route;
  peerplan_fallback_reason_t reason;
  size_t index; /* position in the declared set */
  peerplan_protocol_t protocol;
} peerplan_plan_info_t;

typedef struct peerplan_stats {
  uint64_t p2p_calls;
  uint64_t zero_copy_calls;
  uint64_t fallback_undeclared;
  uint64_t fallback_over_cutoff;
  uint64_t fallback_p2p_disabled;
  uint64_t fallback_node_layout;
  size_t plans; /* how many declared plans peerplan_plan_stats can read */
} peerplan_stats_t;

typedef struct peerplan_plan_stats {
  const char* name; /* valid until the next declare, close or destroy */
  peerplan_operation_t operation;
  peerplan_route_t route;
  peerplan_fallback_reason_t reason;
  uint64_t hits;
  uint64_t fallbacks;
  peerplan_protocol_t protocol;
  /* What a hit launches ("bf16 one-shot Lamport: 132 blocks x 512 threads,
   * PDL"; "" on the fallback); valid as `name` is. */
  const char* launch;
} peerplan_plan_stats_t;

/* The number of this interface's binary layout: raised when a function's
 * signature, a struct's fields or an enum's numbering changes incompatibly,
 * so that bindings loading the library at run time (the Python package)
 * can refuse one they were not written for. peerplan_abi_version()
 * returns the number the library was built with. */
#define PEERPLAN_ABI_VERSION 1

/* Library version ("0.1.0") and the text of a result code. */
PEERPLAN_API const char* peerplan_version(void);
PEERPLAN_API int peerplan_abi_version(void);
/* The MPI library this libpeerplan runs on, as MPI_Get_library_version
 * words it (callable before MPI_Init): a binding with an MPI of its own
 * (mpi4py) compares it with its own to catch two MPIs in one process. */
PEERPLAN_API const char* peerplan_mpi_library_version(void);
PEERPLAN_API const char* peerplan_result_string(peerplan_result_t result);
PEERPLAN_API const char* peerplan_route_name(peerplan_route_t route);
PEERPLAN_API const char* peerplan_reason_name(peerplan_fallback_reason_t reason);
PEERPLAN_API const char* peerplan_protocol_name(peerplan_protocol_t protocol);
/* The message of this thread's last failing call ("" if none). */
PEERPLAN_API const char* peerplan_last_error(void);

/* MPI for programs that have no MPI binding of their own (Python without
 * mpi4py): the Fortran handle of MPI_COMM_WORLD, initialising MPI first
 * when nobody has; peerplan_mpi_finalize finalises it only if
 * peerplan_mpi_world initialised it (else it does nothing). */
PEERPLAN_API peerplan_result_t peerplan_mpi_world(MPI_Fint* world);
PEERPLAN_API void peerplan_mpi_finalize(void);

/* Configuration: the names and values of the PEERPLAN_* environment
 * variables (docs/configuration.md), e.g. ("PEERPLAN_TIMEOUT_MS", "5000").
 * A value is checked when set (INVALID_ARGUMENT names what is accepted).
 * The environment still overrides what is set here, as it overrides the
 * C++ Config. */
PEERPLAN_API peerplan_result_t peerplan_config_create(peerplan_config_t* config);
PEERPLAN_API peerplan_result_t peerplan_config_set(peerplan_config_t config, const char* name,
                                                   const char* value);
PEERPLAN_API void peerplan_config_destroy(peerplan_config_t config);

/* Collective over `comm` (which peerplan duplicates: the caller keeps it).
 * `config` may be NULL (defaults). */
PEERPLAN_API peerplan_result_t peerplan_comm_create(MPI_Comm comm, peerplan_config_t config,
                                                    peerplan_comm_t* out);
/* The same from a Fortran communicator handle (MPI_Comm_f2c). */
PEERPLAN_API peerplan_result_t peerplan_comm_create_f(MPI_Fint comm, peerplan_config_t config,
                                                      peerplan_comm_t* out);
/* Collective; idempotent. Then only destroy, stats and queries work. */
PEERPLAN_API peerplan_result_t peerplan_comm_close(peerplan_comm_t comm);
/* Local: frees the handle (without close, only this rank's resources). */
PEERPLAN_API void peerplan_comm_destroy(peerplan_comm_t comm);

PEERPLAN_API int peerplan_comm_rank(peerplan_comm_t comm);
PEERPLAN_API int peerplan_comm_size(peerplan_comm_t comm);
/* "host" or "cuda". */
PEERPLAN_API const char* peerplan_comm_backend(peerplan_comm_t comm);
/* The CUDA device this rank drives, as ncclCommCuDevice gives it: buffers
 * passed to calls are memory of this device. -1 on the host backend. */
PEERPLAN_API int peerplan_comm_cuda_device(peerplan_comm_t comm);
PEERPLAN_API int peerplan_comm_p2p_enabled(peerplan_comm_t comm);
/* Why P2P is off ("" when it is on). Valid while the handle lives. */
PEERPLAN_API const char* peerplan_comm_p2p_disabled_reason(peerplan_comm_t comm);

/* Collective: replaces the declared set (same list on every rank). */
PEERPLAN_API peerplan_result_t peerplan_declare(peerplan_comm_t comm,
                                                const peerplan_declaration_t* declarations,
                                                size_t count);

/* Probes (local, never fail): 1 when the key was declared, else 0. */
PEERPLAN_API int peerplan_has_plan_all_reduce(peerplan_comm_t comm, peerplan_dtype_t dtype,
                                              peerplan_layout_t layout);
PEERPLAN_API int peerplan_has_plan_fused(peerplan_comm_t comm, peerplan_dtype_t dtype,
                                         peerplan_layout_t layout, const void* weight, float eps);
/* Strict lookups: PEERPLAN_ERROR_UNDECLARED_PLAN naming the key. */
PEERPLAN_API peerplan_result_t peerplan_plan_all_reduce(peerplan_comm_t comm,
                                                        peerplan_dtype_t dtype,
                                                        peerplan_layout_t layout,
                                                        peerplan_plan_info_t* info);
PEERPLAN_API peerplan_result_t peerplan_plan_fused(peerplan_comm_t comm, peerplan_dtype_t dtype,
                                                   peerplan_layout_t layout, const void* weight,
                                                   float eps, peerplan_plan_info_t* info);

/* Collective. out = sum over ranks of in (out == in, or a buffer apart
 * from in: a partial overlap is INVALID_ARGUMENT). `result` may be NULL. */
PEERPLAN_API peerplan_result_t peerplan_all_reduce(peerplan_comm_t comm, const void* in, void* out,
                                                   peerplan_dtype_t dtype, peerplan_layout_t layout,
                                                   void* stream, peerplan_call_result_t* result);
/* Collective. residual = allreduce(inout) + residual;
 * inout = rmsnorm(residual) * weight. */
PEERPLAN_API peerplan_result_t peerplan_fused_add_rms_norm(peerplan_comm_t comm, void* inout,
                                                           void* residual, const void* weight,
                                                           float eps, peerplan_dtype_t dtype,
                                                           peerplan_layout_t layout, void* stream,
                                                           peerplan_call_result_t* result);

/* Collective: device buffers the peers may read in place (CUDA backend;
 * the host backend accepts and stages). `data[i]`, `bytes[i]`. */
PEERPLAN_API peerplan_result_t peerplan_register_buffers(peerplan_comm_t comm, void* const* data,
                                                         const size_t* bytes, size_t count);
PEERPLAN_API peerplan_result_t peerplan_deregister_buffers(peerplan_comm_t comm);

/* Counters (local). peerplan_plan_stats reads plan `index` (declaration
 * order) of the last peerplan_stats call on this handle. */
PEERPLAN_API peerplan_result_t peerplan_stats(peerplan_comm_t comm, peerplan_stats_t* stats);
PEERPLAN_API peerplan_result_t peerplan_plan_stats(peerplan_comm_t comm, size_t index,
                                                   peerplan_plan_stats_t* stats);
/* The most frequent undeclared keys (PEERPLAN_TRACK_UNDECLARED; C++
 * Stats::undeclared), most calls first, of the last peerplan_stats call on
 * this handle: their number (0 when tracking is off or before any
 * peerplan_stats). */
PEERPLAN_API peerplan_result_t peerplan_undeclared_key_count(peerplan_comm_t comm, size_t* count);
/* Key `index` of that snapshot: its text as the C++ to_string(Stats) prints
 * it ("all_reduce f32 [300] strides [1]"), copied with its terminating NUL
 * into `key` (`key_size` bytes); `length` receives the text's length
 * without the NUL, `calls` and `overcount` its counts (the true number of
 * calls lies in [calls - overcount, calls]). Each of the three may be NULL.
 * key NULL with key_size 0 asks for the length and counts only. An index
 * not below the count, or a text longer than key_size - 1 (then `length`
 * is still set, and `key` holds ""), is PEERPLAN_ERROR_INVALID_ARGUMENT. */
PEERPLAN_API peerplan_result_t peerplan_undeclared_key(peerplan_comm_t comm, size_t index,
                                                       char* key, size_t key_size, size_t* length,
                                                       uint64_t* calls, uint64_t* overcount);
PEERPLAN_API peerplan_result_t peerplan_reset_stats(peerplan_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* PEERPLAN_PEERPLAN_H */
