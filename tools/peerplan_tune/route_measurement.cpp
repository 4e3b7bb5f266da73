#include "route_measurement.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "call_buffers.hpp"
#include "peerplan/communicator.hpp"

namespace peerplan::tune {
namespace {

constexpr float kEps = 1e-6f;

// RouteCutoffs is {one-shot max, two-shot max, fused max, two-shot min}.
Config forcing(Backend backend, RouteCutoffs cutoffs, bool disable_p2p = false) {
  Config config;
  config.backend = backend;
  config.cutoffs = cutoffs;
  config.disable_p2p = disable_p2p;
  return config;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::runtime_error(message);
}

// The fused op's P2P plans run fused_one_shot or, past the one-shot
// protocols' windows, fused_two_shot: the cutoff being tuned covers both.
bool same_route(Route ran, Route expected) {
  if (expected == Route::fused_one_shot) return ran == expected || ran == Route::fused_two_shot;
  return ran == expected;
}

void expect_route(const CallResult& result, Route expected, const Communicator& comm,
                  const std::string& what) {
  if (same_route(result.route, expected)) return;
  std::string message = what + " ran on " + to_string(result.route) + " (reason " +
                        to_string(result.reason) + "), not on " + to_string(expected);
  if (!comm.p2p_enabled()) message += "; P2P is disabled: " + comm.p2p_disabled_reason();
  throw std::runtime_error(message);
}

struct FusedSize {
  std::int64_t rows;
  std::size_t bytes;
};

std::vector<FusedSize> fused_sizes(const SweepPlan& plan) {
  const std::size_t row_bytes = static_cast<std::size_t>(plan.hidden) * element_size(plan.dtype);
  std::vector<FusedSize> sizes;
  for (std::size_t bytes : sweep_sizes(plan)) {
    const auto rows = static_cast<std::int64_t>(bytes / row_bytes);
    if (rows > 0) sizes.push_back({rows, static_cast<std::size_t>(rows) * row_bytes});
  }
  return sizes;
}

}  // namespace

std::vector<std::size_t> sweep_sizes(const SweepPlan& plan) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = plan.min_bytes; bytes > 0 && bytes <= plan.max_bytes; bytes *= 2)
    sizes.push_back(bytes);
  return sizes;
}

Sweep measure_routes(MPI_Comm comm, const SweepPlan& plan, const RowListener& listener) {
  const auto sizes = sweep_sizes(plan);
  const auto fused = fused_sizes(plan);
  const std::size_t fused_max = fused.empty() ? 0 : fused.back().bytes;
  const std::size_t esize = element_size(plan.dtype);

  auto one_shot = Communicator::create(
      comm, forcing(Backend::automatic, RouteCutoffs{plan.max_bytes, 0, fused_max, 0}));
  const Backend backend = one_shot->backend();
  auto two_shot =
      Communicator::create(comm, forcing(backend, RouteCutoffs{0, plan.max_bytes, 0, 0}));
  auto fallback = Communicator::create(comm, forcing(backend, RouteCutoffs{0, 0, 0, 0}, true));
  require(one_shot->p2p_enabled() && two_shot->p2p_enabled(),
          "P2P is disabled here (" + one_shot->p2p_disabled_reason() +
              "): there is nothing to tune; every call takes the fallback");

  Sweep sweep;
  sweep.backend = backend;
  sweep.ranks = one_shot->size();
  sweep.fingerprint = one_shot->topology_fingerprint();
  if (listener.started) listener.started(sweep);

  const CallBuffer weight(backend, static_cast<std::size_t>(plan.hidden) * esize);
  std::vector<Declaration> declarations;
  for (std::size_t bytes : sizes) {
    declarations.push_back(Declaration::all_reduce(
        "all_reduce_" + std::to_string(bytes), plan.dtype,
        TensorLayout{static_cast<std::int64_t>(bytes / esize)}));
  }
  for (const FusedSize& size : fused) {
    declarations.push_back(Declaration::fused_add_rms_norm(
        "fused_" + std::to_string(size.rows), plan.dtype, TensorLayout{size.rows, plan.hidden},
        weight.data(), kEps));
  }
  for (Communicator* c : {one_shot.get(), two_shot.get(), fallback.get()}) c->declare(declarations);
  require(one_shot->p2p_enabled() && two_shot->p2p_enabled(),
          "P2P was disabled while preparing staging buffers for " +
              std::to_string(plan.max_bytes) + "-byte messages (" +
              (one_shot->p2p_enabled() ? two_shot : one_shot)->p2p_disabled_reason() +
              "); lower -e (or, on the host backend, make /dev/shm larger)");

  CallTimer timer(backend, plan.timing);
  {
    const CallBuffer in(backend, plan.max_bytes), out(backend, plan.max_bytes);
    for (std::size_t bytes : sizes) {
      const TensorLayout layout{static_cast<std::int64_t>(bytes / esize)};
      const auto time_on = [&](Communicator& c, Route route) {
        const auto call = [&] {
          return c.all_reduce(in.data(), out.data(), plan.dtype, layout, timer.stream());
        };
        expect_route(call(), route, c, "a " + std::to_string(bytes) + "-byte all-reduce");
        timer.synchronize();
        return timer.time([&] { call(); });
      };
      AllReduceTimes row;
      row.bytes = bytes;
      row.one_shot_us = time_on(*one_shot, Route::one_shot);
      row.two_shot_us = time_on(*two_shot, Route::two_shot);
      row.fallback_us = time_on(*fallback, Route::fallback);
      sweep.all_reduce.push_back(row);
      if (listener.all_reduce) listener.all_reduce(row);
    }
  }
  if (!fused.empty()) {
    const CallBuffer inout(backend, fused_max), residual(backend, fused_max);
    for (const FusedSize& size : fused) {
      const TensorLayout layout{size.rows, plan.hidden};
      const auto time_on = [&](Communicator& c, Route route) {
        const auto call = [&] {
          return c.fused_add_rms_norm(inout.data(), residual.data(), weight.data(), kEps,
                                      plan.dtype, layout, timer.stream());
        };
        expect_route(call(), route, c,
                     "a fused add + RMSNorm of " + std::to_string(size.bytes) + " bytes");
        timer.synchronize();
        return timer.time([&] { call(); });
      };
      FusedTimes row;
      row.bytes = size.bytes;
      row.rows = size.rows;
      row.p2p_us = time_on(*one_shot, Route::fused_one_shot);
      row.fallback_us = time_on(*fallback, Route::fallback);
      sweep.fused.push_back(row);
      if (listener.fused) listener.fused(row);
    }
  }
  timer.synchronize();
  for (Communicator* c : {one_shot.get(), two_shot.get(), fallback.get()}) c->close();
  return sweep;
}

}  // namespace peerplan::tune
