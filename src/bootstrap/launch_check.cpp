// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/launch_check.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

// A positive integer, or 0 when unset or not a number (a variable we cannot
// read proves nothing, so it never triggers the error).
long count_from(const EnvironmentLookup& environment, const std::string& name) {
  const std::optional<std::string> text = environment(name);
  if (!text || text->empty()) return 0;
  long value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  return (ec == std::errc() && ptr == end && value > 0) ? value : 0;
}

[[noreturn]] void report(const std::string& variable, long count, const std::string& launcher,
                         const std::string& remedy) {
  throw InvalidUsage(
      "MPI reports a world of 1 rank, but " + variable + "=" + std::to_string(count) + " says " +
      launcher + " started " + std::to_string(count) + " processes: the job was launched as " +
      std::to_string(count) + " separate one-rank MPI jobs that cannot see each other. " + remedy);
}

}  // namespace

std::optional<std::string> process_environment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

void check_launch(int mpi_world_size, const EnvironmentLookup& environment) {
  if (mpi_world_size != 1) return;

  const std::string use_mpirun =
      "Launch with the mpirun/mpiexec of the MPI library this program was built with "
      "(mpirun -np N ./program), or under Slurm with srun --mpi=pmix (srun --mpi=list shows "
      "the plugins; the one your MPI library expects).";

  if (const long n = count_from(environment, "OMPI_COMM_WORLD_SIZE"); n > 1) {
    report("OMPI_COMM_WORLD_SIZE", n, "Open MPI's mpirun",
           "This program's MPI library is not the Open MPI whose mpirun launched it (linked "
           "against another MPI, or another Open MPI installation). " +
               use_mpirun);
  }
  if (const long n = count_from(environment, "PMI_SIZE"); n > 1) {
    report("PMI_SIZE", n, "a PMI launcher (MPICH/Intel MPI mpiexec, or srun --mpi=pmi2)",
           "This program's MPI library did not use that PMI (built for another launcher). " +
               use_mpirun);
  }
  if (const long n = count_from(environment, "MV2_COMM_WORLD_SIZE"); n > 1) {
    report("MV2_COMM_WORLD_SIZE", n, "MVAPICH's launcher",
           "This program's MPI library is not that MVAPICH. " + use_mpirun);
  }
  // Slurm: SLURM_STEP_NUM_TASKS is set by srun in every task it starts. A
  // batch script exports SLURM_NTASKS for the whole allocation even to a
  // lone process it runs directly, so SLURM_NTASKS/SLURM_NPROCS alone prove
  // nothing; together with a task id above 0 they do.
  if (const long n = count_from(environment, "SLURM_STEP_NUM_TASKS"); n > 1) {
    report("SLURM_STEP_NUM_TASKS", n, "srun",
           "srun's PMI plugin does not match this program's MPI library: use srun --mpi=pmix "
           "(or the plugin your MPI expects; srun --mpi=list), or mpirun -np N.");
  }
  if (count_from(environment, "SLURM_PROCID") > 0) {
    for (const char* name : {"SLURM_NTASKS", "SLURM_NPROCS"}) {
      if (const long n = count_from(environment, name); n > 1) {
        report(name, n, "srun",
               "srun's PMI plugin does not match this program's MPI library: use srun "
               "--mpi=pmix (or the plugin your MPI expects; srun --mpi=list), or mpirun -np N.");
      }
    }
  }
  // torchrun, torch.distributed.launch, accelerate, deepspeed: they set RANK
  // and WORLD_SIZE and start each process without any MPI world.
  if (const long n = count_from(environment, "WORLD_SIZE"); n > 1 && environment("RANK")) {
    report("WORLD_SIZE", n, "a non-MPI launcher (torchrun or similar)",
           "peerplan needs an MPI world: start the program with mpirun -np N (or srun "
           "--mpi=pmix) instead of torchrun-style launchers.");
  }
}

}  // namespace peerplan::bootstrap
