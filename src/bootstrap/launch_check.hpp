// SPDX-License-Identifier: Apache-2.0
// Detects a job launched as N separate one-rank MPI jobs: a launcher started
// N processes (srun without the right --mpi plugin, a different MPI's
// mpirun, torchrun, ...) but the MPI library in each process did not join
// them into one world, so every process believes it is alone. Without this
// check such a job runs N independent copies of the program and "works".
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace peerplan::bootstrap {

// Looks up an environment variable; nullopt when it is not set.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (std::getenv).
std::optional<std::string> process_environment(const std::string& name);

// Throws InvalidUsage when `mpi_world_size` (the size of MPI_COMM_WORLD) is 1
// while the launcher's variables in `environment` say this process is one of
// several, naming the variable, the launcher and how to launch instead.
// Does nothing when MPI's world has several ranks or nothing says otherwise.
void check_launch(int mpi_world_size, const EnvironmentLookup& environment = process_environment);

}  // namespace peerplan::bootstrap
