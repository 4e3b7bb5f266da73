// SPDX-License-Identifier: Apache-2.0
// What an NVTX range costs a call, a benchmark program, not a test: the
// time of constructing and destroying each range type peerplan marks a
// call or step with (core/nvtx_ranges.hpp, communicator/call_ranges.hpp),
// with ranges off (PEERPLAN_NVTX=0), on with no profiler attached (the
// usual case), and on with whatever tool NVTX_INJECTION64_PATH names, if
// any. Each case: 10^7 iterations (-n), the best of 5 repeats, in ns per
// iteration, next to an empty loop's. No MPI, no communicator.
//
//   peerplan_nvtx_range_cost [-n iterations]
//   NVTX_INJECTION64_PATH=/path/to/tool.so peerplan_nvtx_range_cost
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "communicator/call_ranges.hpp"
#include "host_timing.hpp"
#include "core/nvtx_ranges.hpp"

namespace {

using namespace peerplan;
using benchmarks::best_ns_per_iteration;
using benchmarks::opaque;
using core::nvtx::Colour;
using core::nvtx::Domain;

void run_cases(const char* label, Domain domain, long iterations) {
  const Declaration declared = Declaration::all_reduce("decode", DataType::bf16, {8, 4096});
  const routing::RouteDecision decision{Route::one_shot, FallbackReason::none, 65536, Protocol::ll};
  communicator::PreparedPlan plan(decision.route, decision.reason, decision.protocol,
                                  decision.message_bytes, 16, 65536, {});
  plan.nvtx_message = communicator::register_plan_message(domain, declared, decision);
  const TensorLayout layout{8, 4096};

  const double empty = best_ns_per_iteration(iterations, [&] { opaque(domain); });
  const double lifecycle = best_ns_per_iteration(iterations, [&] {
    opaque(domain);
    const core::nvtx::Range range(domain, Colour::lifecycle, "declare");
  });
  const double declared_call = best_ns_per_iteration(iterations, [&] {
    opaque(domain);
    const communicator::CallRange range(domain, Operation::all_reduce, &plan, DataType::bf16,
                                        layout);
  });
  const double undeclared_call = best_ns_per_iteration(iterations, [&] {
    opaque(domain);
    const communicator::CallRange range(domain, Operation::all_reduce, nullptr, DataType::bf16,
                                        layout);
  });
  std::printf("%-34s %8.2f %8.2f %8.2f %8.2f\n", label, empty, lifecycle, declared_call,
              undeclared_call);
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 10'000'000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "-n") == 0) iterations = std::atol(argv[i + 1]);
  const char* tool = std::getenv("NVTX_INJECTION64_PATH");
  std::printf(
      "ns per iteration (the loop's own included: \"loop\" is an empty one), %ld "
      "iterations, best of 5\n",
      iterations);
  std::printf("%-34s %8s %8s %8s %8s\n", "case", "loop", "step", "declared", "undecl.");
  run_cases("PEERPLAN_NVTX=0", core::nvtx::domain(false), iterations);
  // The first enabled domain() loads the tool, if one is named.
  const Domain on = core::nvtx::domain(true);
  run_cases(tool ? "on, tool attached" : "on, no tool attached", on, iterations);
  if (tool != nullptr && !on) std::printf("(NVTX_INJECTION64_PATH=%s did not attach)\n", tool);
  if (!core::nvtx::built()) std::printf("(this build has no NVTX: ranges are compiled out)\n");
  return 0;
}
