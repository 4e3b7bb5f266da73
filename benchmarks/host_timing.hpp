// SPDX-License-Identifier: Apache-2.0
// Timing of short host code for the cost benchmarks (nvtx_range_cost.cpp,
// nccl_interposer_cost.cpp): the best of 5 repeats of a loop, in ns per
// iteration, and a barrier against the compiler hoisting a value out of it.
#pragma once

#include <algorithm>
#include <chrono>

namespace peerplan::benchmarks {

// Makes the compiler reload `value` every iteration, as a program passes
// its arguments afresh to each call (and a call reads its communicator's
// state each time).
template <class T>
void opaque(T& value) {
  asm volatile("" : "+m"(value) : : "memory");
}

template <class Body>
double best_ns_per_iteration(long iterations, Body&& body) {
  double best = 1e300;
  for (int repeat = 0; repeat < 5; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) body();
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / static_cast<double>(iterations));
  }
  return best;
}

}  // namespace peerplan::benchmarks
