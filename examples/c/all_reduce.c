// SPDX-License-Identifier: Apache-2.0
/* peerplan from C: declare one all-reduce, call it and an undeclared one,
 * print the routes they took. Build it with the MPI C compiler:
 *
 *   mpicc -std=c99 all_reduce.c -o all_reduce $(pkg-config --cflags --libs peerplan-c)
 *   mpirun -np 2 ./all_reduce
 */
#include <mpi.h>
#include <stdio.h>

#include "peerplan/peerplan.h"

/* Prints the failure and returns 1 (each rank for itself). */
static int failed(peerplan_result_t result, const char* what) {
  if (result == PEERPLAN_SUCCESS) return 0;
  fprintf(stderr, "%s failed (%s): %s\n", what, peerplan_result_string(result),
          peerplan_last_error());
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, errors = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  peerplan_comm_t comm = NULL;
  if (failed(peerplan_comm_create(MPI_COMM_WORLD, NULL, &comm), "create"))
    MPI_Abort(MPI_COMM_WORLD, 1);

  /* Host memory: this runs on the host backend (a GPU build given GPUs
   * would want device pointers here). */
  enum { kRows = 4, kHidden = 256 };
  static float x[kRows * kHidden];
  const int64_t shape[2] = {kRows, kHidden};
  const peerplan_declaration_t plan = {
      "hidden", PEERPLAN_ALL_REDUCE, PEERPLAN_F32, {2, shape, NULL}, NULL, 0.0f};
  errors += failed(peerplan_declare(comm, &plan, 1), "declare");

  for (int i = 0; i < kRows * kHidden; ++i) x[i] = (float)rank;
  peerplan_call_result_t declared, undeclared;
  errors += failed(peerplan_all_reduce(comm, x, x, PEERPLAN_F32, plan.layout, NULL, &declared),
                   "all_reduce (declared)");
  const int64_t odd_shape[1] = {kHidden - 1};
  const peerplan_layout_t odd = {1, odd_shape, NULL};
  errors += failed(peerplan_all_reduce(comm, x, x, PEERPLAN_F32, odd, NULL, &undeclared),
                   "all_reduce (undeclared)");

  /* Each element was the rank, summed twice over the first kHidden - 1. */
  const float once = (float)(size * (size - 1) / 2);
  int wrong = 0;
  for (int i = 0; i < kRows * kHidden; ++i) wrong += x[i] != (i < kHidden - 1 ? once * size : once);
  if (rank == 0) {
    printf("peerplan %s from C: %d ranks, backend %s\n", peerplan_version(), size,
           peerplan_comm_backend(comm));
    printf("declared [4, 256] f32: %s; undeclared [255] f32: %s (%s)\n",
           peerplan_route_name(declared.route), peerplan_route_name(undeclared.route),
           peerplan_reason_name(undeclared.reason));
    printf("#wrong %d\n", wrong);
  }
  errors += failed(peerplan_comm_close(comm), "close");
  peerplan_comm_destroy(comm);
  MPI_Finalize();
  return errors != 0 || wrong != 0;
}
