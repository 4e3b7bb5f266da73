// SPDX-License-Identifier: Apache-2.0
/* A C user's program built against the installed peerplan on the host
 * backend: declares a plan, runs a declared and an undeclared all-reduce on
 * every rank and checks the sums and the routes. Exits non-zero on a
 * failure; prints "consumer_c: ... 0 failures" on rank 0 otherwise. */
#include <mpi.h>
#include <stdio.h>

#include "peerplan/peerplan.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  peerplan_comm_t comm = NULL;
  if (peerplan_comm_create(MPI_COMM_WORLD, NULL, &comm) != PEERPLAN_SUCCESS) {
    fprintf(stderr, "consumer_c: create failed: %s\n", peerplan_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  enum { kCount = 64 };
  const int64_t shape[1] = {kCount};
  const peerplan_declaration_t plan = {
      "x", PEERPLAN_ALL_REDUCE, PEERPLAN_F32, {1, shape, NULL}, NULL, 0.0f};
  failures += peerplan_declare(comm, &plan, 1) != PEERPLAN_SUCCESS;

  float in[kCount], out[kCount];
  for (int i = 0; i < kCount; ++i) in[i] = (float)(rank + i);
  peerplan_call_result_t declared, undeclared;
  failures += peerplan_all_reduce(comm, in, out, PEERPLAN_F32, plan.layout, NULL, &declared) !=
              PEERPLAN_SUCCESS;
  const float rank_sum = (float)(size * (size - 1) / 2);
  for (int i = 0; i < kCount; ++i) failures += out[i] != rank_sum + (float)(size * i);

  const int64_t odd_shape[1] = {kCount - 1};
  const peerplan_layout_t odd = {1, odd_shape, NULL};
  failures +=
      peerplan_all_reduce(comm, in, out, PEERPLAN_F32, odd, NULL, &undeclared) != PEERPLAN_SUCCESS;
  failures += undeclared.route != PEERPLAN_ROUTE_FALLBACK;
  for (int i = 0; i < kCount - 1; ++i) failures += out[i] != rank_sum + (float)(size * i);

  failures += peerplan_comm_close(comm) != PEERPLAN_SUCCESS;
  peerplan_comm_destroy(comm);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("consumer_c: peerplan %s, %d ranks, %d failures\n", peerplan_version(), size, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
