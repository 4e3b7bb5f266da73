// SPDX-License-Identifier: Apache-2.0
// A user's program built against the installed peerplan: creates a
// communicator over MPI_COMM_WORLD (run at 2 ranks, or as a singleton),
// declares a plan, runs a declared and an undeclared all-reduce and checks
// the sums and the routes reported. Every rank's failures are counted on
// rank 0, which prints them.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include <peerplan/peerplan.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    peerplan::Config config;
    config.backend = peerplan::Backend::host;
    auto comm = peerplan::Communicator::create(MPI_COMM_WORLD, config);
    const peerplan::TensorLayout layout{2, 8};
    comm->declare(
        std::vector{peerplan::Declaration::all_reduce("x", peerplan::DataType::f32, layout)});
    if (!comm->has_plan_for(peerplan::make_all_reduce_key(peerplan::DataType::f32, layout))) {
      std::puts("declared plan not found");
      ++failures;
    }
    std::vector<float> in(16), out(16);
    for (int i = 0; i < 16; ++i) in[i] = float(i);
    comm->all_reduce(in.data(), out.data(), peerplan::DataType::f32, layout);
    for (int i = 0; i < 16; ++i) failures += out[i] != in[i] * float(size);
    const peerplan::TensorLayout undeclared{4, 4};
    const auto r = comm->all_reduce(in.data(), out.data(), peerplan::DataType::f32, undeclared);
    if (r.route != peerplan::Route::fallback || r.reason != peerplan::FallbackReason::undeclared) {
      std::puts("undeclared call did not report the fallback");
      ++failures;
    }
    for (int i = 0; i < 16; ++i) failures += out[i] != in[i] * float(size);
    comm->close();
  } catch (const peerplan::Error& e) {
    std::printf("consumer: rank %d: %s\n", rank, e.what());
    failures = 1;
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("consumer: peerplan %s, %d ranks, %d failures\n", peerplan::kVersion, size, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
