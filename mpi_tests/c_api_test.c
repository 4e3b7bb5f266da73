// SPDX-License-Identifier: Apache-2.0
/* The C interface from a C99 program: configuration (valid, invalid and
 * unknown settings), creation from a C and from a Fortran communicator
 * handle, declare, probes and strict lookups, declared and undeclared
 * all-reduces and fused calls checked against exact references, stats
 * (with the undeclared-key table of PEERPLAN_TRACK_UNDECLARED), errors as
 * result codes with messages (NULL handles and pointers, calls
 * after close). Every rank counts its failed checks; the job fails when any
 * rank has one. */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peerplan/peerplan.h"

static int g_failures = 0;
static int g_checks = 0;
static int g_rank = 0;

#define CHECK(condition, ...)                                                           \
  do {                                                                                  \
    ++g_checks;                                                                         \
    if (!(condition)) {                                                                 \
      ++g_failures;                                                                     \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__, \
              #condition);                                                              \
      fprintf(stderr, __VA_ARGS__);                                                     \
      fprintf(stderr, " (last error: %s)\n", peerplan_last_error());                    \
    }                                                                                   \
  } while (0)

#define HIDDEN 64

/* Reads the stats and every plan's stats many times over, as a monitoring
 * thread beside another would; returns non-NULL on a failed read. */
#define STATS_READS 2000
static void* read_stats_repeatedly(void* handle) {
  peerplan_comm_t comm = (peerplan_comm_t)handle;
  for (int i = 0; i < STATS_READS; ++i) {
    peerplan_stats_t stats;
    peerplan_plan_stats_t plan;
    if (peerplan_stats(comm, &stats) != PEERPLAN_SUCCESS || stats.plans != 2) return handle;
    if (peerplan_plan_stats(comm, 0, &plan) != PEERPLAN_SUCCESS || plan.name[0] == '\0')
      return handle;
  }
  return NULL;
}

static void check_configuration(void) {
  peerplan_config_t config = NULL;
  CHECK(peerplan_config_create(&config) == PEERPLAN_SUCCESS, "config_create");
  CHECK(peerplan_config_set(config, "PEERPLAN_TIMEOUT_MS", "20000") == PEERPLAN_SUCCESS,
        "a valid setting");
  CHECK(
      peerplan_config_set(config, "PEERPLAN_TIMEOUT_MS", "soon") == PEERPLAN_ERROR_INVALID_ARGUMENT,
      "an invalid value");
  CHECK(strstr(peerplan_last_error(), "PEERPLAN_TIMEOUT_MS") != NULL,
        "the message names the setting");
  CHECK(strstr(peerplan_last_error(), "peerplan_config_set") != NULL &&
            strstr(peerplan_last_error(), "unset the variable") == NULL,
        "the message says the value came from peerplan_config_set, not the environment");
  /* A retired name is told what replaces it, as in the environment. */
  CHECK(peerplan_config_set(config, "PEERPLAN_ONE_SHOT_PROTOCOL", "ll") ==
            PEERPLAN_ERROR_INVALID_ARGUMENT,
        "a retired setting");
  CHECK(strstr(peerplan_last_error(), "set PEERPLAN_ONE_SHOT_LAMPORT") != NULL &&
            strstr(peerplan_last_error(), "ll -> never") != NULL,
        "the message names the replacement and how values translate");
  CHECK(peerplan_config_set(config, "PEERPLAN_FUSED_LL", "0") == PEERPLAN_ERROR_INVALID_ARGUMENT &&
            strstr(peerplan_last_error(), "write never") != NULL,
        "a window of 0 bytes says to write never");
  CHECK(
      peerplan_config_set(config, "PEERPLAN_NO_SUCH_THING", "1") == PEERPLAN_ERROR_INVALID_ARGUMENT,
      "an unknown setting");
  CHECK(strstr(peerplan_last_error(), "PEERPLAN_BACKEND") != NULL,
        "the message lists the settings");
  CHECK(peerplan_config_set(NULL, "PEERPLAN_DEBUG", "WARN") == PEERPLAN_ERROR_INVALID_ARGUMENT,
        "a NULL config");
  peerplan_config_destroy(config);
}

static void check_all_reduce(peerplan_comm_t comm, int size, int declared) {
  /* Declared: [4, 64]; undeclared: [3, 5] (odd, never declarable). */
  const int64_t shape_declared[2] = {4, HIDDEN};
  const int64_t shape_undeclared[2] = {3, 5};
  const int64_t* shape = declared ? shape_declared : shape_undeclared;
  const peerplan_layout_t layout = {2, shape, NULL};
  const int count = (int)(shape[0] * shape[1]);
  float in[4 * HIDDEN], out[4 * HIDDEN];
  for (int i = 0; i < count; ++i) {
    in[i] = (float)(g_rank + 1) * (float)(i % 17);
    out[i] = -1.0f;
  }
  peerplan_call_result_t result;
  CHECK(peerplan_all_reduce(comm, in, out, PEERPLAN_F32, layout, NULL, &result) == PEERPLAN_SUCCESS,
        "all_reduce");
  int wrong = 0;
  const float ranks_sum = (float)(size * (size + 1) / 2);
  for (int i = 0; i < count; ++i) wrong += out[i] != ranks_sum * (float)(i % 17);
  CHECK(wrong == 0, "%d of %d elements wrong", wrong, count);
  if (declared) {
    CHECK(peerplan_comm_p2p_enabled(comm) ? result.route != PEERPLAN_ROUTE_FALLBACK
                                          : result.route == PEERPLAN_ROUTE_FALLBACK,
          "route %s", peerplan_route_name(result.route));
  } else {
    CHECK(result.route == PEERPLAN_ROUTE_FALLBACK && result.reason == PEERPLAN_REASON_UNDECLARED,
          "route %s reason %s", peerplan_route_name(result.route),
          peerplan_reason_name(result.reason));
  }
}

static void check_fused(peerplan_comm_t comm, int size, const float* weight) {
  const int64_t shape[2] = {2, HIDDEN};
  const peerplan_layout_t layout = {2, shape, NULL};
  const float eps = 1e-6f;
  float inout[2 * HIDDEN], residual[2 * HIDDEN];
  for (int i = 0; i < 2 * HIDDEN; ++i) {
    inout[i] = (float)(g_rank + 1) * (float)(i % 5 + 1);
    residual[i] = (float)(i % 3);
  }
  peerplan_call_result_t result;
  CHECK(peerplan_fused_add_rms_norm(comm, inout, residual, weight, eps, PEERPLAN_F32, layout, NULL,
                                    &result) == PEERPLAN_SUCCESS,
        "fused_add_rms_norm");
  const double ranks_sum = size * (size + 1) / 2.0;
  int wrong = 0;
  for (int row = 0; row < 2; ++row) {
    double r[HIDDEN], squares = 0.0;
    for (int j = 0; j < HIDDEN; ++j) {
      const int i = row * HIDDEN + j;
      r[j] = ranks_sum * (i % 5 + 1) + (i % 3);
      squares += r[j] * r[j];
      wrong += residual[i] != (float)r[j]; /* integer sums: exact */
    }
    const double inv_rms = 1.0 / sqrt(squares / HIDDEN + eps);
    for (int j = 0; j < HIDDEN; ++j) {
      const double expected = r[j] * inv_rms * weight[j];
      wrong += fabs(inout[row * HIDDEN + j] - expected) > 1e-5 * fabs(expected) + 1e-6;
    }
  }
  CHECK(wrong == 0, "fused: %d wrong elements", wrong);
  CHECK(peerplan_comm_p2p_enabled(comm) ? result.route != PEERPLAN_ROUTE_FALLBACK
                                        : result.route == PEERPLAN_ROUTE_FALLBACK,
        "fused route %s", peerplan_route_name(result.route));
}

static void check_communicator(peerplan_comm_t comm, int size) {
  CHECK(peerplan_comm_rank(comm) == g_rank, "rank %d", peerplan_comm_rank(comm));
  CHECK(peerplan_comm_size(comm) == size, "size %d", peerplan_comm_size(comm));
  CHECK(strcmp(peerplan_comm_backend(comm), "host") == 0 ||
            strcmp(peerplan_comm_backend(comm), "cuda") == 0,
        "backend %s", peerplan_comm_backend(comm));
  CHECK(strcmp(peerplan_comm_backend(comm), "cuda") == 0 ? peerplan_comm_cuda_device(comm) >= 0
                                                         : peerplan_comm_cuda_device(comm) == -1,
        "cuda_device %d on the %s backend", peerplan_comm_cuda_device(comm),
        peerplan_comm_backend(comm));

  float weight[HIDDEN];
  for (int j = 0; j < HIDDEN; ++j) weight[j] = 0.5f + (float)j / HIDDEN;
  const int64_t ar_shape[2] = {4, HIDDEN};
  const int64_t fused_shape[2] = {2, HIDDEN};
  const peerplan_declaration_t declarations[2] = {
      {"ar", PEERPLAN_ALL_REDUCE, PEERPLAN_F32, {2, ar_shape, NULL}, NULL, 0.0f},
      {"norm", PEERPLAN_FUSED_ADD_RMS_NORM, PEERPLAN_F32, {2, fused_shape, NULL}, weight, 1e-6f}};
  CHECK(peerplan_declare(comm, declarations, 2) == PEERPLAN_SUCCESS, "declare");

  const peerplan_layout_t ar_layout = {2, ar_shape, NULL};
  const int64_t other_shape[1] = {64};
  const peerplan_layout_t other = {1, other_shape, NULL};
  CHECK(peerplan_has_plan_all_reduce(comm, PEERPLAN_F32, ar_layout) == 1, "declared key");
  CHECK(peerplan_has_plan_all_reduce(comm, PEERPLAN_BF16, ar_layout) == 0, "another dtype");
  CHECK(peerplan_has_plan_fused(comm, PEERPLAN_F32, declarations[1].layout, weight, 1e-6f) == 1,
        "declared fused key");
  CHECK(peerplan_has_plan_fused(comm, PEERPLAN_F32, declarations[1].layout, weight, 1e-5f) == 0,
        "another epsilon misses");
  peerplan_plan_info_t info;
  CHECK(peerplan_plan_fused(comm, PEERPLAN_F32, declarations[1].layout, weight, 1e-6f, &info) ==
                PEERPLAN_SUCCESS &&
            info.index == 1,
        "plan_fused index %zu", info.index);
  CHECK(
      peerplan_plan_all_reduce(comm, PEERPLAN_F32, other, &info) == PEERPLAN_ERROR_UNDECLARED_PLAN,
      "strict lookup of an undeclared key");
  CHECK(strlen(peerplan_last_error()) > 0, "the lookup failure has a message");

  check_all_reduce(comm, size, 1);
  check_all_reduce(comm, size, 0);
  check_fused(comm, size, weight);

  /* Errors are codes with messages, on this rank alone (caught before any
   * exchange). */
  float buffer[4 * HIDDEN];
  CHECK(peerplan_all_reduce(comm, NULL, buffer, PEERPLAN_F32, ar_layout, NULL, NULL) ==
            PEERPLAN_ERROR_INVALID_ARGUMENT,
        "NULL input");
  CHECK(strlen(peerplan_last_error()) > 0, "the NULL input has a message");
  CHECK(peerplan_all_reduce(comm, buffer, buffer, (peerplan_dtype_t)9, ar_layout, NULL, NULL) ==
            PEERPLAN_ERROR_INVALID_ARGUMENT,
        "an unknown dtype");
  const peerplan_layout_t too_deep = {9, ar_shape, NULL};
  CHECK(peerplan_all_reduce(comm, buffer, buffer, PEERPLAN_F32, too_deep, NULL, NULL) ==
            PEERPLAN_ERROR_INVALID_ARGUMENT,
        "nine dimensions");
  CHECK(strstr(peerplan_last_error(), "1 to 8") != NULL, "nine dimensions: use 1 to 8");
  const peerplan_layout_t no_dimensions = {0, ar_shape, NULL};
  CHECK(peerplan_all_reduce(comm, buffer, buffer, PEERPLAN_F32, no_dimensions, NULL, NULL) ==
                PEERPLAN_ERROR_INVALID_ARGUMENT &&
            strstr(peerplan_last_error(), "1 to 8") != NULL,
        "no dimensions: use 1 to 8");

  /* A declaration the C interface cannot convert on one rank (a dtype
   * outside the enum): every rank gets INVALID_ARGUMENT at once, naming that
   * rank, not a timeout; the declared set stays. */
  peerplan_declaration_t bad[2] = {declarations[0], declarations[1]};
  if (g_rank == size - 1) bad[0].dtype = (peerplan_dtype_t)7;
  const double declare_start = MPI_Wtime();
  CHECK(peerplan_declare(comm, bad, 2) == PEERPLAN_ERROR_INVALID_ARGUMENT,
        "a dtype outside the enum on the last rank");
  char rank_text[32];
  snprintf(rank_text, sizeof rank_text, "rank %d", size - 1);
  CHECK(strstr(peerplan_last_error(), "dtype 7") != NULL &&
            strstr(peerplan_last_error(), rank_text) != NULL,
        "the message names the dtype and the rank");
  CHECK(MPI_Wtime() - declare_start < 5.0, "every rank failed at once (%.1f s)",
        MPI_Wtime() - declare_start);
  CHECK(peerplan_has_plan_all_reduce(comm, PEERPLAN_F32, ar_layout) == 1,
        "the declared set stays in force");

  peerplan_stats_t stats;
  CHECK(peerplan_stats(comm, &stats) == PEERPLAN_SUCCESS, "stats");
  CHECK(stats.plans == 2, "plans %zu", stats.plans);
  CHECK(stats.fallback_undeclared == 1, "undeclared %llu",
        (unsigned long long)stats.fallback_undeclared);
  CHECK(stats.p2p_calls + stats.fallback_p2p_disabled + stats.fallback_over_cutoff == 2,
        "declared calls counted once each");
  peerplan_plan_stats_t plan;
  CHECK(peerplan_plan_stats(comm, 1, &plan) == PEERPLAN_SUCCESS && strcmp(plan.name, "norm") == 0 &&
            plan.operation == PEERPLAN_FUSED_ADD_RMS_NORM && plan.hits + plan.fallbacks == 1,
        "plan stats of 'norm'");
  CHECK(peerplan_plan_stats(comm, 2, &plan) == PEERPLAN_ERROR_INVALID_ARGUMENT,
        "index past the end");
  /* Tracking is off here: an undeclared call counts, but no key is kept. */
  size_t keys = 99;
  char key[128];
  CHECK(peerplan_undeclared_key_count(comm, &keys) == PEERPLAN_SUCCESS && keys == 0,
        "no undeclared keys without PEERPLAN_TRACK_UNDECLARED: %zu", keys);
  CHECK(peerplan_undeclared_key(comm, 0, key, sizeof key, NULL, NULL, NULL) ==
                PEERPLAN_ERROR_INVALID_ARGUMENT &&
            strstr(peerplan_last_error(), "PEERPLAN_TRACK_UNDECLARED") != NULL,
        "key 0 of an empty table: %s", peerplan_last_error());
  /* peerplan.h: a plan's name and launch text stay valid until the next
   * declare, close or destroy, so a later peerplan_stats must not free them
   * (the sanitizer stage reports a use after free otherwise). */
  CHECK(peerplan_plan_stats(comm, 1, &plan) == PEERPLAN_SUCCESS, "plan stats again");
  const char* kept_name = plan.name;
  const char* kept_launch = plan.launch;
  CHECK(peerplan_stats(comm, &stats) == PEERPLAN_SUCCESS &&
            peerplan_stats(comm, &stats) == PEERPLAN_SUCCESS,
        "stats read twice more");
  CHECK(strcmp(kept_name, "norm") == 0 && strlen(kept_launch) < 4096,
        "a plan's name after later peerplan_stats calls");
  /* Two threads reading the stats of one handle at once. */
  pthread_t readers[2];
  int started = 0;
  for (int t = 0; t < 2; ++t)
    started += pthread_create(&readers[t], NULL, read_stats_repeatedly, comm) == 0;
  CHECK(started == 2, "started the stats readers");
  for (int t = 0; t < started; ++t) {
    void* failed = NULL;
    pthread_join(readers[t], &failed);
    CHECK(failed == NULL, "stats read by thread %d", t);
  }
  CHECK(peerplan_reset_stats(comm) == PEERPLAN_SUCCESS && peerplan_stats(comm, &stats) == 0 &&
            stats.fallback_undeclared == 0,
        "reset_stats");

  CHECK(peerplan_comm_close(comm) == PEERPLAN_SUCCESS, "close");
  CHECK(peerplan_comm_close(comm) == PEERPLAN_SUCCESS, "close again (idempotent)");
  CHECK(peerplan_all_reduce(comm, buffer, buffer, PEERPLAN_F32, ar_layout, NULL, NULL) ==
            PEERPLAN_ERROR_INVALID_USAGE,
        "a call after close");
  CHECK(strstr(peerplan_last_error(), "closed") != NULL, "says it is closed");
}

/* PEERPLAN_TRACK_UNDECLARED through the C interface: three undeclared calls
 * of one shape are one key with 3 calls, in its C++ text; a bad index and
 * a buffer too small are INVALID_ARGUMENT. */
static void check_undeclared_keys(int size) {
  peerplan_config_t config = NULL;
  CHECK(peerplan_config_create(&config) == PEERPLAN_SUCCESS &&
            peerplan_config_set(config, "PEERPLAN_TIMEOUT_MS", "20000") == PEERPLAN_SUCCESS &&
            peerplan_config_set(config, "PEERPLAN_TRACK_UNDECLARED", "16") == PEERPLAN_SUCCESS,
        "a config that tracks undeclared keys");
  peerplan_comm_t comm = NULL;
  CHECK(peerplan_comm_create(MPI_COMM_WORLD, config, &comm) == PEERPLAN_SUCCESS, "create");
  peerplan_config_destroy(config);
  if (comm == NULL) return;

  size_t count = 99;
  CHECK(peerplan_undeclared_key_count(comm, &count) == PEERPLAN_SUCCESS && count == 0,
        "no keys before the first peerplan_stats: %zu", count);
  const int64_t shape[1] = {300};
  const peerplan_layout_t layout = {1, shape, NULL};
  float buffer[300];
  for (int call = 0; call < 3; ++call) {
    for (int i = 0; i < 300; ++i) buffer[i] = 1.0f;
    peerplan_call_result_t result;
    CHECK(peerplan_all_reduce(comm, buffer, buffer, PEERPLAN_F32, layout, NULL, &result) ==
                  PEERPLAN_SUCCESS &&
              result.reason == PEERPLAN_REASON_UNDECLARED && buffer[299] == (float)size,
          "undeclared call %d", call);
  }

  peerplan_stats_t stats;
  CHECK(peerplan_stats(comm, &stats) == PEERPLAN_SUCCESS && stats.fallback_undeclared == 3,
        "stats: %llu undeclared", (unsigned long long)stats.fallback_undeclared);
  CHECK(peerplan_undeclared_key_count(comm, &count) == PEERPLAN_SUCCESS && count == 1,
        "one undeclared key: %zu", count);
  CHECK(peerplan_undeclared_key_count(comm, NULL) == PEERPLAN_ERROR_INVALID_ARGUMENT,
        "a NULL count");
  char key[128];
  size_t length = 0;
  uint64_t calls = 0, overcount = 99;
  CHECK(peerplan_undeclared_key(comm, 0, key, sizeof key, &length, &calls, &overcount) ==
            PEERPLAN_SUCCESS,
        "key 0");
  CHECK(strcmp(key, "all_reduce f32 [300] strides [1]") == 0 && length == strlen(key),
        "key text \"%s\" (length %zu)", key, length);
  CHECK(calls == 3 && overcount == 0, "calls %llu, overcount %llu", (unsigned long long)calls,
        (unsigned long long)overcount);

  /* The length alone (NULL, 0), then a buffer too small for the text. */
  size_t needed = 0;
  CHECK(peerplan_undeclared_key(comm, 0, NULL, 0, &needed, NULL, NULL) == PEERPLAN_SUCCESS &&
            needed == length,
        "length query: %zu", needed);
  char small[8] = "stale";
  size_t short_length = 0;
  CHECK(peerplan_undeclared_key(comm, 0, small, sizeof small, &short_length, NULL, NULL) ==
                PEERPLAN_ERROR_INVALID_ARGUMENT &&
            small[0] == '\0' && short_length == length,
        "a buffer too small: \"%s\", length %zu", small, short_length);
  CHECK(strstr(peerplan_last_error(), "too small") != NULL, "says too small: %s",
        peerplan_last_error());
  CHECK(peerplan_undeclared_key(comm, 0, NULL, 16, NULL, NULL, NULL) ==
            PEERPLAN_ERROR_INVALID_ARGUMENT,
        "NULL key with a size");
  CHECK(peerplan_undeclared_key(comm, 1, key, sizeof key, NULL, &calls, NULL) ==
                PEERPLAN_ERROR_INVALID_ARGUMENT &&
            strstr(peerplan_last_error(), "index 1") != NULL,
        "index past the end: %s", peerplan_last_error());

  CHECK(peerplan_reset_stats(comm) == PEERPLAN_SUCCESS &&
            peerplan_stats(comm, &stats) == PEERPLAN_SUCCESS &&
            peerplan_undeclared_key_count(comm, &count) == PEERPLAN_SUCCESS && count == 0,
        "reset_stats empties the table: %zu", count);
  CHECK(peerplan_comm_close(comm) == PEERPLAN_SUCCESS, "close");
  peerplan_comm_destroy(comm);
}

/* A handle after peerplan_comm_destroy: every entry point refuses it with
 * INVALID_USAGE (or its neutral value) instead of reading freed memory, and a
 * second destroy frees nothing. Called before any later create, which could
 * reuse the address (docs/api-c.md). The library only compares the pointer,
 * so this does no use after free itself (the sanitizer stage runs it too). */
static void check_destroyed_communicator(peerplan_comm_t gone) {
  float buffer[4] = {0};
  int64_t shape[1] = {4};
  peerplan_layout_t layout = {1, shape, NULL};
  peerplan_stats_t stats;
  CHECK(peerplan_declare(gone, NULL, 0) == PEERPLAN_ERROR_INVALID_USAGE, "declare after destroy");
  CHECK(strstr(peerplan_last_error(), "not live") != NULL &&
            strstr(peerplan_last_error(), "peerplan_comm_destroy") != NULL,
        "says the handle was destroyed: %s", peerplan_last_error());
  CHECK(peerplan_all_reduce(gone, buffer, buffer, PEERPLAN_F32, layout, NULL, NULL) ==
            PEERPLAN_ERROR_INVALID_USAGE,
        "all_reduce after destroy");
  CHECK(peerplan_comm_close(gone) == PEERPLAN_ERROR_INVALID_USAGE, "close after destroy");
  CHECK(peerplan_stats(gone, &stats) == PEERPLAN_ERROR_INVALID_USAGE, "stats after destroy");
  size_t keys = 0;
  CHECK(peerplan_undeclared_key_count(gone, &keys) == PEERPLAN_ERROR_INVALID_USAGE &&
            peerplan_undeclared_key(gone, 0, NULL, 0, NULL, NULL, NULL) ==
                PEERPLAN_ERROR_INVALID_USAGE,
        "undeclared keys after destroy");
  CHECK(peerplan_comm_rank(gone) == -1 && peerplan_comm_size(gone) == 0 &&
            strcmp(peerplan_comm_backend(gone), "") == 0 && peerplan_comm_p2p_enabled(gone) == 0 &&
            peerplan_comm_cuda_device(gone) == -1,
        "queries after destroy");
  CHECK(peerplan_has_plan_all_reduce(gone, PEERPLAN_F32, layout) == 0, "probe after destroy");
  peerplan_comm_destroy(gone);
  CHECK(strstr(peerplan_last_error(), "nothing was freed") != NULL, "destroyed twice: %s",
        peerplan_last_error());
  peerplan_comm_destroy(NULL); /* still a no-op */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  CHECK(strlen(peerplan_version()) > 0, "version");
  CHECK(peerplan_abi_version() == PEERPLAN_ABI_VERSION, "ABI %d, header %d", peerplan_abi_version(),
        PEERPLAN_ABI_VERSION);
  {
    /* The library's MPI is this program's: the same text, word for word. */
    char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int length = 0;
    MPI_Get_library_version(mpi_version, &length);
    CHECK(strcmp(peerplan_mpi_library_version(), mpi_version) == 0, "MPI \"%s\", program's \"%s\"",
          peerplan_mpi_library_version(), mpi_version);
  }
  CHECK(strcmp(peerplan_result_string(PEERPLAN_ERROR_TIMEOUT), "timeout") == 0, "%s",
        peerplan_result_string(PEERPLAN_ERROR_TIMEOUT));
  check_configuration();

  CHECK(peerplan_declare(NULL, NULL, 0) == PEERPLAN_ERROR_INVALID_ARGUMENT, "NULL handle");
  CHECK(strstr(peerplan_last_error(), "NULL") != NULL, "says the handle is NULL");

  peerplan_config_t config = NULL;
  peerplan_config_create(&config);
  peerplan_config_set(config, "PEERPLAN_TIMEOUT_MS", "20000");
  peerplan_comm_t comm = NULL;
  CHECK(peerplan_comm_create(MPI_COMM_WORLD, config, &comm) == PEERPLAN_SUCCESS, "create");
  if (comm) check_communicator(comm, size);
  peerplan_comm_destroy(comm);
  check_destroyed_communicator(comm);
  check_undeclared_keys(size);

  /* The Fortran handle of the same communicator, as Fortran and Python
   * (mpi4py's py2f) pass it. */
  peerplan_comm_t from_fortran = NULL;
  CHECK(peerplan_comm_create_f(MPI_Comm_c2f(MPI_COMM_WORLD), config, &from_fortran) ==
            PEERPLAN_SUCCESS,
        "create from a Fortran handle");
  if (from_fortran) check_communicator(from_fortran, size);
  peerplan_comm_destroy(from_fortran);

  /* Fortran handles that name no communicator: made up, negative, or freed.
   * Each must give INVALID_ARGUMENT on every rank, not MPI's fatal error
   * handler (which would end the job here). */
  MPI_Comm freed = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &freed);
  const MPI_Fint freed_handle = MPI_Comm_c2f(freed);
  MPI_Comm_free(&freed);
  const MPI_Fint bad_handles[] = {12345, -7, freed_handle};
  for (int i = 0; i < 3; ++i) {
    peerplan_comm_t bad = NULL;
    CHECK(peerplan_comm_create_f(bad_handles[i], config, &bad) == PEERPLAN_ERROR_INVALID_ARGUMENT &&
              bad == NULL && strstr(peerplan_last_error(), "names no MPI communicator") != NULL,
          "create from Fortran handle %d", (int)bad_handles[i]);
    peerplan_comm_destroy(bad);
  }
  peerplan_config_destroy(config);
  /* The config handle after destroy: refused, never read. */
  CHECK(peerplan_config_set(config, "PEERPLAN_DEBUG", "WARN") == PEERPLAN_ERROR_INVALID_USAGE &&
            strstr(peerplan_last_error(), "not live") != NULL,
        "config_set after destroy: %s", peerplan_last_error());
  peerplan_comm_t never = NULL;
  CHECK(peerplan_comm_create(MPI_COMM_WORLD, config, &never) == PEERPLAN_ERROR_INVALID_USAGE &&
            never == NULL,
        "create with a destroyed config");
  peerplan_config_destroy(config);
  CHECK(strstr(peerplan_last_error(), "nothing was freed") != NULL, "config destroyed twice: %s",
        peerplan_last_error());

  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    printf("c_api_test: %d checks per rank, %d failed over %d ranks\n", g_checks, failures, size);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
