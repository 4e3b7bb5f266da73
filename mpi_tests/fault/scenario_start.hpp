// SPDX-License-Identifier: Apache-2.0
// What the fault suite's scenario programs (fault_scenario.cpp,
// recovery_scenario.cpp) share: this rank's place, the verdict lines the
// driver (run_fault_scenario.cmake) reads, and their common start.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace peerplan::fault_scenarios {

inline int world_rank = 0;
inline int world_size = 1;

// One line for the driver: `FAULT rank=<r> <line>`.
inline void say(const std::string& line) {
  std::printf("FAULT rank=%d %s\n", world_rank, line.c_str());
  std::fflush(stdout);
}

struct ScenarioArgs {
  std::string name;
  int victim = 0;
  std::chrono::milliseconds timeout{0};
};

// MPI_Init, this rank and the world's size, then `<scenario> <victim rank>
// <timeout ms>`; nullopt after MPI_Finalize (the usage printed by rank 0)
// when the arguments are not three.
inline std::optional<ScenarioArgs> start_scenario(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (argc != 4) {
    if (world_rank == 0)
      std::fprintf(stderr, "usage: %s <scenario> <victim> <timeout ms>\n", argv[0]);
    MPI_Finalize();
    return std::nullopt;
  }
  return ScenarioArgs{argv[1], std::atoi(argv[2]), std::chrono::milliseconds(std::atoi(argv[3]))};
}

// Every rank's pid, gathered before anything can fail: a survivor continues
// a stopped victim with SIGCONT.
inline std::vector<int> gather_pids() {
  std::vector<int> pids(world_size);
  const int pid = static_cast<int>(::getpid());
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return pids;
}

}  // namespace peerplan::fault_scenarios
