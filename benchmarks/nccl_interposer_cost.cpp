// SPDX-License-Identifier: Apache-2.0
// What libpeerplan_nccl.so adds to an ncclAllReduce on the host, a
// benchmark program, not a test. The interposer's code is linked in (as
// tests/nccl_interposer/link/dispatch_test.cpp does), its "real NCCL" is a
// stand-in whose functions do nothing (nccl_noop.cpp), and peerplan, where
// a case has it, is a communicator whose all_reduce does nothing: what is
// timed is the lookup, the rules and the counting alone. A communicator the
// interposer never saw is also timed through libpeerplan_nccl.so itself,
// loaded privately, for what the shared library adds. Each case: 2*10^6
// calls (-n), the best of 5 repeats, in ns per call, next to an empty
// loop's and against the stand-in NCCL called directly. No GPU, no MPI.
//
//   peerplan_nccl_interposer_cost [-n iterations]
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "host_timing.hpp"
#include "nccl_interposer/comm_table.hpp"
#include "stand_in_communicator.hpp"

namespace {

using namespace peerplan;
using benchmarks::best_ns_per_iteration;
using benchmarks::opaque;
using namespace peerplan::nccl_interposer;

// Routes every key peer to peer; its calls do nothing.
using NoopPeerplan = StandInCommunicator;

constexpr std::size_t kDeclared = 4096;    // f32 elements, declared
constexpr std::size_t kUndeclared = 8192;  // f32 elements, not declared

// Distinct handles for the cases' communicators; nothing reads them.
int handles[3];
ncclComm_t handle(int i) { return reinterpret_cast<ncclComm_t>(&handles[i]); }

struct Row {
  const char* name;
  double ns;
};

}  // namespace

int main(int argc, char** argv) {
  long iterations = 2'000'000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "-n") == 0) iterations = std::atol(argv[i + 1]);
  if (iterations <= 0) {
    std::fprintf(stderr, "-n takes a positive number of iterations\n");
    return 2;
  }
  // A program that calls NCCL has threads (NCCL's own, at least), so its
  // shared_ptr reference counts are atomic: so are this one's, with one
  // thread started before any case.
  std::thread([] {}).join();
  // Before the interposer's first call, which resolves the real functions.
  setenv("PEERPLAN_NCCL_LIBRARY", PEERPLAN_NCCL_NOOP, 1);
  void* noop = dlopen(PEERPLAN_NCCL_NOOP, RTLD_NOW | RTLD_LOCAL);
  const auto direct =
      noop ? reinterpret_cast<decltype(&ncclAllReduce)>(dlsym(noop, "ncclAllReduce")) : nullptr;
  if (direct == nullptr) {
    std::fprintf(stderr, "cannot load the stand-in NCCL %s: %s\n", PEERPLAN_NCCL_NOOP, dlerror());
    return 1;
  }

  void* library = dlopen(PEERPLAN_NCCL_INTERPOSER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  const auto preloaded =
      library ? reinterpret_cast<decltype(&ncclAllReduce)>(dlsym(library, "ncclAllReduce"))
              : nullptr;
  if (preloaded == nullptr) {
    std::fprintf(stderr, "cannot load %s (%s): its case is left out\n",
                 PEERPLAN_NCCL_INTERPOSER_LIBRARY, dlerror());
  }

  const ncclComm_t unseen = handle(0);
  const ncclComm_t without_peerplan = handle(1);
  const ncclComm_t with_peerplan = handle(2);
  // As attach_peerplan leaves a communicator peerplan will not serve (one
  // rank, say): in the table, every call to NCCL.
  attach_peerplan(without_peerplan, "the benchmark's communicator without peerplan");
  install_peerplan(with_peerplan, std::make_unique<NoopPeerplan>(), {{DataType::f32, kDeclared}},
                   0);

  alignas(256) static float buffer[kUndeclared];
  float* data = buffer;
  ncclComm_t comm = nullptr;
  std::size_t count = 0;
  bool failed = false;
  const auto interposed = [&] {
    opaque(data);
    opaque(comm);
    opaque(count);
    failed |= ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess;
  };
  const auto timed = [&](ncclComm_t c, std::size_t n) {
    comm = c;
    count = n;
    return best_ns_per_iteration(iterations, interposed);
  };

  const double loop = best_ns_per_iteration(iterations, [&] { opaque(data); });
  std::vector<Row> rows;
  comm = with_peerplan;
  count = kDeclared;
  rows.push_back({"stand-in NCCL, called directly", best_ns_per_iteration(iterations, [&] {
                    opaque(data);
                    opaque(comm);
                    opaque(count);
                    failed |= direct(data, data, count, ncclFloat32, ncclSum, comm, nullptr) !=
                              ncclSuccess;
                  })});
  rows.push_back({"communicator never seen", timed(unseen, kDeclared)});
  // The same through the preloadable library, whose thread-local variables
  // cost a call into the dynamic linker each (the cases above have the
  // interposer's code in the program, where they cost nothing).
  if (preloaded != nullptr) {
    rows.push_back({"never seen, libpeerplan_nccl.so", best_ns_per_iteration(iterations, [&] {
                      opaque(data);
                      opaque(count);
                      failed |= preloaded(data, data, count, ncclFloat32, ncclSum, unseen,
                                          nullptr) != ncclSuccess;
                    })});
  }
  rows.push_back({"in the table, no peerplan", timed(without_peerplan, kDeclared)});
  rows.push_back({"peerplan, undeclared size (NCCL)", timed(with_peerplan, kUndeclared)});
  rows.push_back({"peerplan, declared size", timed(with_peerplan, kDeclared)});
  if (failed) {
    std::fprintf(stderr, "an ncclAllReduce did not return ncclSuccess\n");
    return 1;
  }

  std::printf(
      "ns per ncclAllReduce (the loop's own included: \"empty loop\" is one), %ld calls, "
      "best of 5\n",
      iterations);
  std::printf("%-36s %10s %10s\n", "case", "ns/call", "over base");
  std::printf("%-36s %10.2f %10s\n", "empty loop", loop, "");
  for (const Row& row : rows) {
    std::printf("%-36s %10.2f %10.2f\n", row.name, row.ns, row.ns - rows.front().ns);
  }
  // Where each went, as the interposer counts it (detach logs it at INFO).
  for (const ncclComm_t c : {without_peerplan, with_peerplan}) {
    if (const auto state = find_comm(c)) std::printf("%s\n", state->summary().c_str());
  }
  return 0;
}
