// SPDX-License-Identifier: Apache-2.0
// A user's program built against the installed peerplan: creates a
// communicator over MPI_COMM_WORLD (run as a singleton, one rank), declares a
// plan, runs a declared and an undeclared all-reduce and checks the results
// and the routes reported.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include <peerplan/peerplan.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int failures = 0;
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
    const peerplan::TensorLayout undeclared{4, 4};
    const auto r = comm->all_reduce(in.data(), out.data(), peerplan::DataType::f32, undeclared);
    if (r.route != peerplan::Route::fallback || r.reason != peerplan::FallbackReason::undeclared) {
      std::puts("undeclared call did not report the fallback");
      ++failures;
    }
    for (int i = 0; i < 16; ++i) failures += out[i] != in[i];  // one rank: the sum is the input
    comm->close();
    std::printf("consumer: peerplan %s, %d failures\n", peerplan::kVersion, failures);
  } catch (const peerplan::Error& e) {
    std::printf("consumer: %s\n", e.what());
    failures = 1;
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
