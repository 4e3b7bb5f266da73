// SPDX-License-Identifier: Apache-2.0
#include "route_measurement.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if PEERPLAN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "call_buffers.hpp"
#include "peerplan/communicator.hpp"
#include "routing/fingerprint.hpp"

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

// What a protocol sweep communicator forces, route included: a time taken
// on anything else would be filed under the wrong protocol. No protocol:
// whichever the router gives the route (the grid sweep forces the grid).
struct ForcedProtocol {
  const char* name;
  Route route;
  std::optional<Protocol> protocol;
};

constexpr ForcedProtocol kOneShotLl{"one-shot LL", Route::one_shot, Protocol::ll};
constexpr ForcedProtocol kOneShotLamport{"one-shot Lamport", Route::one_shot, Protocol::lamport};
constexpr ForcedProtocol kFusedLl{"fused LL", Route::fused_one_shot, Protocol::ll};
constexpr ForcedProtocol kFusedLamport{"fused Lamport", Route::fused_one_shot, Protocol::lamport};
constexpr ForcedProtocol kFusedTwoShot{"fused two-shot", Route::fused_two_shot, Protocol::staged};
constexpr ForcedProtocol kTwoShotStaged{"two-shot staged", Route::two_shot, Protocol::staged};
constexpr ForcedProtocol kTwoShotDma{"two-shot dma", Route::two_shot, Protocol::dma};
constexpr ForcedProtocol kTwoShotLamport{"two-shot Lamport", Route::two_shot, Protocol::lamport};

void expect_protocol(const CallResult& result, const ForcedProtocol& forced,
                     const Communicator& comm, const std::string& what) {
  if (result.route == forced.route && (!forced.protocol || result.protocol == *forced.protocol))
    return;
  std::string message = what + " on the " + forced.name + " communicator ran " +
                        to_string(result.route) + " with protocol " + to_string(result.protocol) +
                        ", not " + to_string(forced.route);
  if (forced.protocol) message += std::string(" with ") + to_string(*forced.protocol);
  if (result.route == Route::fallback)
    message += std::string(" (reason ") + to_string(result.reason) + ")";
  if (!comm.p2p_enabled()) message += "; P2P is disabled: " + comm.p2p_disabled_reason();
  throw std::runtime_error(message);
}

// Every all-reduce up to `largest` bytes on the one-shot route, on the
// protocol `lamport` picks (never: LL, every_size: Lamport).
Config forcing_one_shot_protocol(Backend backend, std::size_t largest, Window lamport) {
  Config config = forcing(backend, RouteCutoffs{largest, 0, 0, 0});
  config.kernels.one_shot_lamport = lamport;
  return config;
}

// The two-shot's protocols, each forced at every size through both of its
// knobs: Lamport's window comes first in the router, so the staged and
// dma communicators shut it (whatever the transport's default), and the
// Lamport one opens it at every size with dma off, so that nothing else
// can run there whatever order a transport gives them.
enum class TwoShotProtocol { staged, dma, lamport };

// Every all-reduce up to `largest` bytes on the two-shot route, on
// `protocol`. Pieces as on the route sweep's two-shot communicator (the
// default).
Config forcing_two_shot_protocol(Backend backend, std::size_t largest, TwoShotProtocol protocol) {
  Config config = forcing(backend, RouteCutoffs{0, largest, 0, 0});
  const bool lamport = protocol == TwoShotProtocol::lamport;
  config.kernels.two_shot_lamport = lamport ? Window::every_size() : Window::never();
  config.kernels.two_shot_dma =
      protocol == TwoShotProtocol::dma ? Window::every_size() : Window::never();
  return config;
}

// Every fused op up to `largest` bytes on P2P: Lamport inside `lamport`,
// else LL lines inside `ll`, else the two-shot.
Config forcing_fused_protocol(Backend backend, std::size_t largest, Window lamport, Window ll) {
  Config config = forcing(backend, RouteCutoffs{0, 0, largest, 0});
  config.kernels.fused_lamport = lamport;
  config.kernels.fused_ll = ll;
  return config;
}

// Staging too large for the machine turns P2P off at declare, on every rank.
void require_p2p_after_declare(const std::vector<const Communicator*>& comms, std::size_t largest,
                               const char* option) {
  for (const Communicator* c : comms) {
    require(c->p2p_enabled(), "P2P was disabled while preparing staging buffers for " +
                                  std::to_string(largest) + "-byte messages (" +
                                  c->p2p_disabled_reason() + "); lower " + option);
  }
}

struct FusedSize {
  std::int64_t rows;
  std::size_t bytes;
};

// Whole rows of plan.hidden elements, as many as fit each size up to `max_bytes`.
std::vector<FusedSize> fused_sizes(const SweepPlan& plan, std::size_t max_bytes) {
  const std::size_t row_bytes = static_cast<std::size_t>(plan.hidden) * element_size(plan.dtype);
  std::vector<FusedSize> sizes;
  for (std::size_t bytes : sweep_sizes(plan)) {
    if (bytes > max_bytes) break;
    const auto rows = static_cast<std::int64_t>(bytes / row_bytes);
    if (rows > 0) sizes.push_back({rows, static_cast<std::size_t>(rows) * row_bytes});
  }
  return sizes;
}

std::vector<std::size_t> sizes_up_to(const SweepPlan& plan, std::size_t max_bytes) {
  std::vector<std::size_t> sizes = sweep_sizes(plan);
  std::erase_if(sizes, [&](std::size_t bytes) { return bytes > max_bytes; });
  return sizes;
}

std::vector<Declaration> all_reduce_declarations(const std::vector<std::size_t>& sizes,
                                                 DataType dtype) {
  std::vector<Declaration> declarations;
  for (std::size_t bytes : sizes) {
    declarations.push_back(Declaration::all_reduce(
        "all_reduce_" + std::to_string(bytes), dtype,
        TensorLayout{static_cast<std::int64_t>(bytes / element_size(dtype))}));
  }
  return declarations;
}

std::vector<Declaration> fused_declarations(const std::vector<FusedSize>& sizes,
                                            const SweepPlan& plan, const void* weight) {
  std::vector<Declaration> declarations;
  for (const FusedSize& size : sizes) {
    declarations.push_back(
        Declaration::fused_add_rms_norm("fused_" + std::to_string(size.rows), plan.dtype,
                                        TensorLayout{size.rows, plan.hidden}, weight, kEps));
  }
  return declarations;
}

// A communicator's config and the route and protocol it forces.
struct ForcingConfig {
  Config config;
  ForcedProtocol forced;
};

// Every all-reduce size timed on one communicator per forcing config, each
// forcing one protocol (or grid), every call checked against what its
// communicator forces; `row(bytes, times)` takes each size's times (µs, in
// the order of `forcing_configs`). The communicators are created and
// closed here: their staging is held only while they run. `option` names
// what bounds the sizes, should staging for the largest turn P2P off.
template <typename OnRow>
void measure_all_reduce_protocols(MPI_Comm comm, const SweepPlan& plan,
                                  const std::vector<std::size_t>& sizes,
                                  std::span<const ForcingConfig> forcing_configs,
                                  const char* option, CallTimer& timer, Backend backend,
                                  OnRow row) {
  const std::size_t largest = sizes.back();
  const std::size_t count = forcing_configs.size();
  std::vector<std::unique_ptr<Communicator>> owned;
  std::vector<const Communicator*> comms;
  for (const ForcingConfig& forcing_config : forcing_configs) {
    owned.push_back(Communicator::create(comm, forcing_config.config));
    comms.push_back(owned.back().get());
  }
  const auto declarations = all_reduce_declarations(sizes, plan.dtype);
  for (auto& c : owned) c->declare(declarations);
  require_p2p_after_declare(comms, largest, option);

  const CallBuffer in(backend, largest), out(backend, largest);
  for (std::size_t bytes : sizes) {
    const TensorLayout layout{static_cast<std::int64_t>(bytes / element_size(plan.dtype))};
    const auto time_on = [&](Communicator& c, const ForcedProtocol& forced) {
      const auto call = [&] {
        return c.all_reduce(in.data(), out.data(), plan.dtype, layout, timer.stream());
      };
      expect_protocol(call(), forced, c, "a " + std::to_string(bytes) + "-byte all-reduce");
      timer.synchronize();
      return timer.time([&] { call(); });
    };
    std::vector<double> times(count);
    for (std::size_t i = 0; i < count; ++i)
      times[i] = time_on(*owned[i], forcing_configs[i].forced);
    row(bytes, times);
  }
  timer.synchronize();
  for (auto& c : owned) c->close();
}

// The push one-shot on LL lines and on Lamport.
void measure_one_shot_protocols(MPI_Comm comm, const SweepPlan& plan,
                                const std::vector<std::size_t>& sizes, CallTimer& timer,
                                Sweep& sweep, const RowListener& listener) {
  const std::size_t largest = sizes.back();
  const Backend backend = sweep.backend;
  const std::array<ForcingConfig, 2> protocols{{
      {forcing_one_shot_protocol(backend, largest, Window::never()), kOneShotLl},
      {forcing_one_shot_protocol(backend, largest, Window::every_size()), kOneShotLamport},
  }};
  measure_all_reduce_protocols(comm, plan, sizes, protocols, "--protocols-max", timer, backend,
                               [&](std::size_t bytes, const std::vector<double>& times) {
                                 const OneShotProtocolTimes row{bytes, times[0], times[1]};
                                 sweep.one_shot_protocols.push_back(row);
                                 if (listener.one_shot_protocols) listener.one_shot_protocols(row);
                               });
}

// The push two-shot on the staged kernel, on copy engines (dma) and on
// Lamport.
void measure_two_shot_protocols(MPI_Comm comm, const SweepPlan& plan,
                                const std::vector<std::size_t>& sizes, CallTimer& timer,
                                Sweep& sweep, const RowListener& listener) {
  const std::size_t largest = sizes.back();
  const Backend backend = sweep.backend;
  const std::array<ForcingConfig, 3> protocols{{
      {forcing_two_shot_protocol(backend, largest, TwoShotProtocol::staged), kTwoShotStaged},
      {forcing_two_shot_protocol(backend, largest, TwoShotProtocol::dma), kTwoShotDma},
      {forcing_two_shot_protocol(backend, largest, TwoShotProtocol::lamport), kTwoShotLamport},
  }};
  measure_all_reduce_protocols(
      comm, plan, sizes, protocols, "-e", timer, backend,
      [&](std::size_t bytes, const std::vector<double>& times) {
        const TwoShotProtocolTimes row{bytes, times[0], times[1], times[2]};
        sweep.two_shot_protocols.push_back(row);
        if (listener.two_shot_protocols) listener.two_shot_protocols(row);
      });
}

// The multiprocessor count of this rank's GPU (selected by the
// communicators created before), the smallest over `comm`: every rank must
// create the same communicators, so all take the same candidates (GPUs of
// one fingerprint normally agree anyway). 0 when it cannot be read.
int smallest_multiprocessor_count(MPI_Comm comm) {
  int multiprocessors = 0;
#if PEERPLAN_HAVE_CUDA
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess) {
    multiprocessors = 0;
  }
#endif
  MPI_Allreduce(MPI_IN_PLACE, &multiprocessors, 1, MPI_INT, MPI_MIN, comm);
  return multiprocessors;
}

// The one-shot at each candidate grid cap, its protocol left to the
// router (the default windows, as a tuned machine runs it).
void measure_one_shot_grid_caps(MPI_Comm comm, const SweepPlan& plan,
                                const std::vector<std::size_t>& sizes, CallTimer& timer,
                                Sweep& sweep, const RowListener& listener) {
  const std::size_t largest = sizes.back();
  // The communicators' names in error messages; kept alive while they run.
  std::vector<std::string> names;
  for (int blocks : sweep.grid_candidates)
    names.push_back("one-shot grid of at most " + std::to_string(blocks) + " blocks");
  std::vector<ForcingConfig> grids;
  for (std::size_t i = 0; i < names.size(); ++i) {
    Config config = forcing(sweep.backend, RouteCutoffs{largest, 0, 0, 0});
    config.kernels.one_shot_max_blocks = sweep.grid_candidates[i];
    grids.push_back({config, {names[i].c_str(), Route::one_shot, std::nullopt}});
  }
  measure_all_reduce_protocols(comm, plan, sizes, std::span<const ForcingConfig>(grids),
                               "--protocols-max", timer, sweep.backend,
                               [&](std::size_t bytes, const std::vector<double>& times) {
                                 const OneShotGridTimes row{bytes, times};
                                 sweep.one_shot_grid.push_back(row);
                                 if (listener.one_shot_grid)
                                   listener.one_shot_grid(sweep.grid_candidates, row);
                               });
}

// Fused LL, Lamport and two-shot communicators, created and closed here.
void measure_fused_protocols(MPI_Comm comm, const SweepPlan& plan,
                             const std::vector<FusedSize>& sizes, CallTimer& timer, Sweep& sweep,
                             const RowListener& listener) {
  const std::size_t largest = sizes.back().bytes;
  const Backend backend = sweep.backend;
  auto ll = Communicator::create(comm, forcing_fused_protocol(backend, largest, Window::never(),
                                                              Window::up_to_bytes(largest)));
  auto lamport = Communicator::create(
      comm, forcing_fused_protocol(backend, largest, Window::every_size(), Window::never()));
  auto two_shot = Communicator::create(
      comm, forcing_fused_protocol(backend, largest, Window::never(), Window::never()));
  const CallBuffer weight(backend,
                          static_cast<std::size_t>(plan.hidden) * element_size(plan.dtype));
  const auto declarations = fused_declarations(sizes, plan, weight.data());
  for (Communicator* c : {ll.get(), lamport.get(), two_shot.get()}) c->declare(declarations);
  require_p2p_after_declare({ll.get(), lamport.get(), two_shot.get()}, largest, "--protocols-max");

  const CallBuffer inout(backend, largest), residual(backend, largest);
  for (const FusedSize& size : sizes) {
    const TensorLayout layout{size.rows, plan.hidden};
    const auto time_on = [&](Communicator& c, const ForcedProtocol& forced) {
      const auto call = [&] {
        return c.fused_add_rms_norm(inout.data(), residual.data(), weight.data(), kEps, plan.dtype,
                                    layout, timer.stream());
      };
      expect_protocol(call(), forced, c,
                      "a fused add + RMSNorm of " + std::to_string(size.bytes) + " bytes");
      timer.synchronize();
      return timer.time([&] { call(); });
    };
    FusedProtocolTimes row;
    row.bytes = size.bytes;
    row.rows = size.rows;
    row.ll_us = time_on(*ll, kFusedLl);
    row.lamport_us = time_on(*lamport, kFusedLamport);
    row.two_shot_us = time_on(*two_shot, kFusedTwoShot);
    sweep.fused_protocols.push_back(row);
    if (listener.fused_protocols) listener.fused_protocols(row);
  }
  timer.synchronize();
  for (Communicator* c : {ll.get(), lamport.get(), two_shot.get()}) c->close();
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
  const auto fused = fused_sizes(plan, plan.max_bytes);
  const std::size_t fused_max = fused.empty() ? 0 : fused.back().bytes;
  const std::size_t esize = element_size(plan.dtype);

  auto one_shot = Communicator::create(
      comm, forcing(Backend::automatic, RouteCutoffs{plan.max_bytes, 0, fused_max, 0}));
  const Backend backend = one_shot->backend();
  auto two_shot =
      Communicator::create(comm, forcing(backend, RouteCutoffs{0, plan.max_bytes, 0, 0}));
  auto fallback = Communicator::create(comm, forcing(backend, RouteCutoffs{0, 0, 0, 0}, true));

  Sweep sweep;
  sweep.backend = backend;
  sweep.ranks = one_shot->size();
  sweep.fingerprint = one_shot->topology_fingerprint();
  // First, so that a machine the tool refuses (ranks sharing a GPU, several
  // nodes) hears why rather than of a symptom.
  if (listener.started) listener.started(sweep);
  require(one_shot->p2p_enabled() && two_shot->p2p_enabled(),
          "P2P is disabled here (" + one_shot->p2p_disabled_reason() +
              "): there is nothing to tune; every call takes the fallback");

  // The fused op's weight, only where a size holds a row: a --hidden row
  // larger than -e is not measured, and needs no memory.
  std::optional<CallBuffer> weight;
  if (!fused.empty()) weight.emplace(backend, static_cast<std::size_t>(plan.hidden) * esize);
  std::vector<Declaration> declarations = all_reduce_declarations(sizes, plan.dtype);
  if (weight) {
    for (Declaration& d : fused_declarations(fused, plan, weight->data()))
      declarations.push_back(std::move(d));
  }
  for (Communicator* c : {one_shot.get(), two_shot.get(), fallback.get()}) c->declare(declarations);
  require(one_shot->p2p_enabled() && two_shot->p2p_enabled(),
          "P2P was disabled while preparing staging buffers for " + std::to_string(plan.max_bytes) +
              "-byte messages (" +
              (one_shot->p2p_enabled() ? two_shot : one_shot)->p2p_disabled_reason() +
              "); lower -e (or, on the host backend, make /dev/shm larger)");

  CallTimer timer(backend, plan.timing);
  // Where ranks share a GPU (--allow-shared-gpus) the fallback is MPI,
  // which cannot be captured: timed eagerly then (the times only check
  // the tool there).
  const bool fallback_capturable = !routing::fingerprint_says_shared(sweep.fingerprint);
  {
    const CallBuffer in(backend, plan.max_bytes), out(backend, plan.max_bytes);
    for (std::size_t bytes : sizes) {
      const TensorLayout layout{static_cast<std::int64_t>(bytes / esize)};
      const auto time_on = [&](Communicator& c, Route route) {
        const auto call = [&] {
          return c.all_reduce(in.data(), out.data(), plan.dtype, layout, timer.stream());
        };
        const CallResult first = call();
        expect_route(first, route, c, "a " + std::to_string(bytes) + "-byte all-reduce");
        // Whether the transport pulls: the protocol sweep has no one-shot then.
        if (route == Route::one_shot) sweep.one_shot_protocol = first.protocol;
        timer.synchronize();
        return timer.time([&] { call(); }, route != Route::fallback || fallback_capturable);
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
  if (fused.empty() && listener.skipped) {
    listener.skipped(
        "fused: not measured; no size from -b to -e holds a row of --hidden elements (the "
        "entry leaves fused_max_bytes auto)");
  }
  if (!fused.empty()) {
    const CallBuffer inout(backend, fused_max), residual(backend, fused_max);
    for (const FusedSize& size : fused) {
      const TensorLayout layout{size.rows, plan.hidden};
      const auto time_on = [&](Communicator& c, Route route) {
        const auto call = [&] {
          return c.fused_add_rms_norm(inout.data(), residual.data(), weight->data(), kEps,
                                      plan.dtype, layout, timer.stream());
        };
        expect_route(call(), route, c,
                     "a fused add + RMSNorm of " + std::to_string(size.bytes) + " bytes");
        timer.synchronize();
        return timer.time([&] { call(); }, route != Route::fallback || fallback_capturable);
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

void measure_protocols(MPI_Comm comm, const SweepPlan& plan, Sweep& sweep,
                       const RowListener& listener) {
  const auto skipped = [&](const std::string& why) {
    if (listener.skipped) listener.skipped(why);
  };
  if (plan.protocols_max_bytes == 0) {
    skipped(
        "protocols: not measured (--protocols-max 0); the entry leaves the protocol "
        "windows auto");
    return;
  }
  if (sweep.backend != Backend::cuda) {
    skipped(std::string("protocols: not measured; the ") + to_string(sweep.backend) +
            " backend has one protocol (staged copies), there is nothing to choose");
    return;
  }
  CallTimer timer(sweep.backend, plan.timing);
  const auto sizes = sizes_up_to(plan, plan.protocols_max_bytes);
  if (sweep.one_shot_protocol == Protocol::pull) {
    skipped(
        "one-shot protocols: not measured; the transport pulls (transfer mode pull), "
        "and the pull one-shot has one protocol");
  } else if (sizes.empty()) {
    skipped("one-shot protocols: not measured; no all-reduce size up to --protocols-max");
  } else {
    measure_one_shot_protocols(comm, plan, sizes, timer, sweep, listener);
  }
  const auto fused = fused_sizes(plan, plan.protocols_max_bytes);
  if (fused.empty()) {
    skipped(
        "fused protocols: not measured; no size up to --protocols-max holds a row of "
        "--hidden elements");
  } else {
    measure_fused_protocols(comm, plan, fused, timer, sweep, listener);
  }
  // The copy-engine window applies wherever the two-shot runs: every size
  // the route sweep timed the two-shot at (up to -e), not only those up to
  // --protocols-max, which bounds the LL lines' doubled staging.
  if (sweep.one_shot_protocol == Protocol::pull) {
    skipped(
        "two-shot protocols: not measured; the transport pulls (transfer mode pull), "
        "and the pull two-shot has one protocol");
  } else {
    measure_two_shot_protocols(comm, plan, sweep_sizes(plan), timer, sweep, listener);
  }
}

void measure_one_shot_grid(MPI_Comm comm, const SweepPlan& plan, Sweep& sweep,
                           const RowListener& listener) {
  const auto skipped = [&](const std::string& why) {
    if (listener.skipped) listener.skipped(why);
  };
  const std::string keeps = "; the entry keeps the transport's default grid";
  if (plan.protocols_max_bytes == 0) {
    skipped("one-shot grid: not measured (--protocols-max 0)" + keeps);
    return;
  }
  if (sweep.backend != Backend::cuda) {
    skipped(std::string("one-shot grid: not measured; the ") + to_string(sweep.backend) +
            " backend launches no kernels");
    return;
  }
  if (sweep.one_shot_protocol == Protocol::pull) {
    skipped(
        "one-shot grid: not measured; the transport pulls (transfer mode pull), and the "
        "pull one-shot's grid is not tuned" +
        keeps);
    return;
  }
  const auto sizes = sizes_up_to(plan, plan.protocols_max_bytes);
  if (sizes.empty()) {
    skipped("one-shot grid: not measured; no all-reduce size up to --protocols-max" + keeps);
    return;
  }
  sweep.grid_candidates = one_shot_grid_candidates(smallest_multiprocessor_count(comm));
  if (sweep.grid_candidates.empty()) {
    skipped("one-shot grid: not measured; the GPU's multiprocessor count could not be read" +
            keeps);
    return;
  }
  CallTimer timer(sweep.backend, plan.timing);
  measure_one_shot_grid_caps(comm, plan, sizes, timer, sweep, listener);
}

}  // namespace peerplan::tune
