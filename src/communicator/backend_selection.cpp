// SPDX-License-Identifier: Apache-2.0
#include "communicator/backend_selection.hpp"

#include <optional>

#include "bootstrap/fail_together.hpp"
#include "communicator/card_decisions.hpp"
#include "communicator/gpu_sharing.hpp"
#include "communicator/no_fallback.hpp"
#include "communicator/p2p_level_check.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "transport/host/host_backend.hpp"
#if PEERPLAN_HAVE_CUDA
#include "transport/cuda/cuda_backend.hpp"
#endif

namespace peerplan::communicator {
namespace {

#if PEERPLAN_HAVE_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

// Why P2P cannot be used, from rank-invariant facts only (the config has
// been checked to agree, num_nodes/size are the same everywhere), or empty.
// On the cuda backend the level is checked pair by pair instead
// (p2p_level_check.hpp): LOC still allows ranks that share a GPU.
std::string static_p2p_obstacle(const bootstrap::Bootstrap& bootstrap, const Config& config,
                                Backend backend, const NodeLayout& nodes) {
  if (config.disable_p2p) return "disabled by Config::disable_p2p / PEERPLAN_DISABLE_P2P";
  if (backend == Backend::host && config.p2p_level == P2PLevel::loc) {
    return "PEERPLAN_P2P_LEVEL=LOC allows no peer access";
  }
  if (bootstrap.size() < 2) return "the communicator has a single rank";
  if (nodes.unfit_for_hierarchical()) {
    return "the job spans " + nodes.text +
           "; peer-to-peer routes stay within a node, and the "
           "hierarchical route between nodes needs the same number of ranks, two or more, on "
           "every node";
  }
  return {};
}

}  // namespace

void check_world_size(const bootstrap::Bootstrap& bootstrap, const Config& config) {
  if (config.expected_world_size > 0 && config.expected_world_size != bootstrap.size()) {
    throw InvalidArgument("create: the communicator has " + std::to_string(bootstrap.size()) +
                          " ranks but Config::expected_world_size / PEERPLAN_WORLD_SIZE says " +
                          std::to_string(config.expected_world_size) + "; launch with mpirun -np " +
                          std::to_string(config.expected_world_size) + " or change the setting");
  }
}

namespace {

// Either every rank enables the fast path or none does.
// `obstacle`: a rank-invariant reason found before (the P2P level), or empty.
template <class MakePeer>
void enable_p2p_if_agreed(bootstrap::Bootstrap& bootstrap, const Config& config,
                          BackendSetup& setup, const char* what, MakePeer&& make_peer,
                          const std::string& obstacle = {}) {
  setup.p2p_disabled_reason = static_p2p_obstacle(bootstrap, config, setup.backend, setup.nodes);
  if (setup.p2p_disabled_reason.empty()) setup.p2p_disabled_reason = obstacle;
  if (!setup.p2p_disabled_reason.empty()) {
    if (bootstrap.rank() == 0)
      log::info(log::Subsystem::route, "P2P disabled: " + setup.p2p_disabled_reason);
    return;
  }
  // A Timeout propagates: create fails. Any other failure on any rank
  // disables P2P on every rank.
  if (auto failures = bootstrap::run_together(bootstrap, [&] { setup.peer = make_peer(); })) {
    setup.peer.reset();
    setup.p2p_disabled_reason = std::string(what) + " failed: " + failures->message;
    log::warn("P2P disabled on every rank, all calls go to the fallback: " +
              setup.p2p_disabled_reason);
  }
}

// The communicator's own duplicate of `comm` for an MPI fallback. A bounded
// barrier first names a missing rank; the duplication is bounded as well.
// (The card exchange cannot stand in for the barrier: a rank late for it
// still completes it from the cards the others sent before giving up, and
// would then wait in a duplication that cannot say who is missing.)
bootstrap::OwnedComm fallback_comm(MPI_Comm comm, bootstrap::Bootstrap& bootstrap,
                                   const Config& config) {
  bootstrap.barrier();
  return bootstrap::OwnedComm::duplicate(comm, config.timeout,
                                         "create (the MPI fallback's communicator)");
}

void create_host_transports(MPI_Comm comm, bootstrap::Bootstrap& bootstrap, const Config& config,
                            const std::vector<RankCard>& cards, BackendSetup& setup) {
  // The config agrees on every rank: every rank throws alike.
  if (config.fallback == Fallback::nccl) {
    throw InvalidArgument(
        "Config::fallback / PEERPLAN_FALLBACK is nccl, but the communicator "
        "runs on the host backend, whose fallback is MPI; use auto or mpi "
        "(or the cuda backend on GPUs)");
  }
  setup.fallback_kind = Fallback::mpi;
  setup.fallback =
      transport::host::make_mpi_fallback(fallback_comm(comm, bootstrap, config), config.timeout);
  enable_p2p_if_agreed(bootstrap, config, setup, "setting up shared memory", [&] {
    // Several nodes: the hierarchical route's exchange between them gets a
    // communicator of its own (every rank duplicates, so none waits alone).
    bootstrap::OwnedComm across_nodes;
    if (setup.nodes.num_nodes > 1) {
      across_nodes = bootstrap::OwnedComm::duplicate(
          comm, config.timeout, "create (the hierarchical route's communicator between nodes)");
    }
    return transport::host::make_host_peer_transport(bootstrap, config.timeout,
                                                     std::move(across_nodes), node_ids(cards));
  });
}

#if PEERPLAN_HAVE_CUDA
// The CUDA backend's fallback, from rank-invariant facts (the agreed config,
// what the build has, the groups of ranks sharing a GPU): the same on
// every rank, errors included.
Fallback choose_cuda_fallback(const Config& config, const SharedGpus& shared) {
  const bool nccl = transport::cuda::nccl_built();
  switch (config.fallback) {
    case Fallback::mpi:
      return Fallback::mpi;
    case Fallback::nccl:
      if (!nccl) {
        throw Unsupported(
            "Config::fallback / PEERPLAN_FALLBACK is nccl, but this build of "
            "peerplan has no NCCL (PEERPLAN_WITH_NCCL=OFF or NCCL not found when "
            "it was configured); use auto or mpi");
      }
      if (shared.any()) {
        throw Unsupported("Config::fallback / PEERPLAN_FALLBACK is nccl, but " + shared.text() +
                          ", which NCCL refuses (\"Duplicate GPU detected\"); give every rank "
                          "its own GPU, or use auto or mpi (correctness tests only)");
      }
      return Fallback::nccl;
    case Fallback::automatic:
      break;
  }
  return nccl && !shared.any() ? Fallback::nccl : Fallback::mpi;
}
#endif

void create_cuda_transports([[maybe_unused]] MPI_Comm comm,
                            [[maybe_unused]] bootstrap::Bootstrap& bootstrap,
                            [[maybe_unused]] const Config& config,
                            [[maybe_unused]] const std::vector<RankCard>& cards,
                            [[maybe_unused]] BackendSetup& setup,
                            [[maybe_unused]] FallbackSetup fallback) {
#if PEERPLAN_HAVE_CUDA
  // Each rank selected its GPU when it filled its card.
  check_gpus(cards);
  const SharedGpus shared = shared_gpus(cards);
  const std::vector<int> nodes = node_ids(cards);
  const auto level = p2p_level_verdict(cards, nodes, config.p2p_level);
  if (bootstrap.rank() == 0) {
    log::info(log::Subsystem::route, level.summary);
    // Unknown links held against an explicit level are in the obstacle;
    // these are the ones allowed (at auto or SYS): INFO, as they change nothing.
    if (level.unknown_links) log::info(log::Subsystem::route, *level.unknown_links);
  }
  setup.gpus_shared = shared.any();
  if (shared.any() && bootstrap.rank() == 0) {
    log::warn(shared.text() +
              ": for testing, not for speed (the GPU time-slices the ranks' "
              "kernels); the fallback is MPI, and tuning files and benchmarks do not apply");
  }
  // Without a fallback of its own, the declined calls go to the caller's
  // NCCL: reported as the NCCL fallback.
  setup.fallback_kind =
      fallback == FallbackSetup::none ? Fallback::nccl : choose_cuda_fallback(config, shared);
  std::string obstacle = level.obstacle.value_or(std::string());
  if (fallback == FallbackSetup::none) {
    setup.fallback = make_no_fallback();
    // The step between nodes needs a communicator of its own (NCCL's
    // would be made with ncclCommInitRank, which the interposer's caller
    // intercepts; MPI's needs MPI): none here.
    if (setup.nodes.num_nodes > 1 && obstacle.empty()) {
      obstacle = "the job spans " + setup.nodes.text +
                 " and a communicator without a fallback of its own (the NCCL interposer's) "
                 "has no exchange between nodes for the hierarchical route";
    }
  } else if (setup.fallback_kind == Fallback::nccl) {
    setup.fallback =
        transport::cuda::make_nccl_fallback(bootstrap, config.timeout, config.kernels.row_clusters);
  } else {
    setup.fallback = transport::cuda::make_mpi_device_fallback(
        fallback_comm(comm, bootstrap, config), config.timeout, config.kernels.row_clusters);
  }
  // Several nodes: the hierarchical route's step between them. NCCL where
  // it can serve: built, not ruled out by Config::fallback, and no two
  // ranks of one group (the same local rank on different nodes) on one GPU,
  // which NCCL refuses. (Posed nodes of one machine can give each group
  // distinct GPUs even where the node's own ranks share one.) MPI otherwise.
  bool exchange_on_nccl = false;
  if (setup.nodes.num_nodes > 1 && fallback == FallbackSetup::own) {
    const SharedGpus within_groups = shared_gpus(cards, /*within_groups=*/true);
    exchange_on_nccl =
        transport::cuda::nccl_built() && config.fallback != Fallback::mpi && !within_groups.any();
  }
  enable_p2p_if_agreed(
      bootstrap, config, setup, "setting up CUDA IPC / peer access",
      [&] {
        std::unique_ptr<transport::cuda::NodeExchange> across_nodes;
        if (setup.nodes.num_nodes > 1 && fallback == FallbackSetup::own) {
          across_nodes =
              exchange_on_nccl
                  ? transport::cuda::make_nccl_node_exchange(bootstrap, config.timeout,
                                                             config.kernels.row_clusters)
                  : transport::cuda::make_mpi_node_exchange(
                        bootstrap::OwnedComm::duplicate(
                            comm, config.timeout,
                            "create (the hierarchical route's communicator between nodes)"),
                        bootstrap, nodes, config.timeout);
          if (bootstrap.rank() == 0) {
            log::info(log::Subsystem::route,
                      std::string("hierarchical route: the step between nodes runs on ") +
                          across_nodes->engine());
          }
        }
        return transport::cuda::make_cuda_peer_transport(bootstrap, config.timeout,
                                                         config.transfer_mode, config.kernels,
                                                         std::move(across_nodes));
      },
      obstacle);
#endif
}

}  // namespace

BackendSetup select_backend(MPI_Comm comm, bootstrap::Bootstrap& bootstrap, const Config& config,
                            const std::vector<RankCard>& cards, const std::string& locality,
                            FallbackSetup fallback) {
  BackendSetup setup;
  setup.backend = decide_backend(config.backend, kCudaBuilt, cards);
  setup.nodes = node_layout(cards);
  // A topology file that cannot be read is an error on every rank: it was
  // asked for explicitly.
  check_topologies(cards);
  log::info(log::Subsystem::init, locality);
  if (setup.backend == Backend::cuda) {
    create_cuda_transports(comm, bootstrap, config, cards, setup, fallback);
  } else if (fallback == FallbackSetup::none) {
    // Decided from the cards: every rank throws alike.
    throw Unsupported(
        "create: the backend is host, but a communicator without a fallback of its own (the "
        "NCCL interposer's) runs on the cuda backend only; unset PEERPLAN_BACKEND or set it to "
        "cuda, and run on GPUs");
  } else {
    create_host_transports(comm, bootstrap, config, cards, setup);
  }
  if (bootstrap.rank() == 0) {
    log::info(log::Subsystem::init, std::string("backend ") + to_string(setup.backend) + ", " +
                                        std::to_string(bootstrap.size()) + " ranks on " +
                                        setup.nodes.text + ", P2P " +
                                        (setup.peer ? "enabled" : "disabled") + ", fallback " +
                                        to_string(setup.fallback_kind));
  }
  return setup;
}

}  // namespace peerplan::communicator
