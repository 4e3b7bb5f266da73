// SPDX-License-Identifier: Apache-2.0
#include "communicator/card_collection.hpp"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "bootstrap/nodes.hpp"
#include "communicator/cutoff_resolution.hpp"
#include "communicator/p2p_level_check.hpp"
#include "core/config_fields.hpp"
#include "core/config_validation.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "topology/pci_address.hpp"
#include "topology/topology.hpp"
#if PEERPLAN_HAVE_CUDA
#include "transport/cuda/cuda_backend.hpp"
#include "transport/cuda/gpu_identity.hpp"
#endif

namespace peerplan::communicator {
namespace {

// FNV-1a of the file's bytes, in hex: enough to tell two files apart in a message.
std::string digest_of_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::uint64_t hash = 14695981039346656037ull;
  for (std::istreambuf_iterator<char> it(file), end; it != end; ++it) {
    hash ^= static_cast<unsigned char>(*it);
    hash *= 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// Where this rank runs, logged at INFO so users can check their binding
// (the host backend's shared-memory traffic stays within a NUMA node when
// ranks are bound well).
std::string describe_locality(const Config& config) {
  const auto topology = topology::Topology::shared(config.topology_file);
  const auto binding = topology->process_binding();
  // Sets in braces, so that "{0}" cannot be read as a count of zero.
  // binding.cpus is already a list ("0-3,8"); an XML topology gives the
  // file's whole machine, not where this process runs.
  std::ostringstream out;
  out << "topology " << topology->source() << ": "
      << (binding.live ? "this process is bound to" : "the file's machine has") << " cpus {"
      << binding.cpus << "}, NUMA node(s) {";
  for (std::size_t i = 0; i < binding.numa_nodes.size(); ++i)
    out << (i > 0 ? "," : "") << binding.numa_nodes[i];
  out << "}, " << topology->gpus().size() << " GPU(s) visible";
  return out.str();
}

template <class Step>
std::optional<std::string> error_of(Step&& step) {
  try {
    step();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

void fill_gpu([[maybe_unused]] const Config& config, [[maybe_unused]] int local_rank,
              [[maybe_unused]] OwnCard& own) {
#if PEERPLAN_HAVE_CUDA
  RankCard& card = own.card;
  if (config.backend == Backend::host) return;
  card.sees_gpu = transport::cuda::cuda_device_visible();
  if (!card.sees_gpu) return;
  // Selected before the exchange (the local rank is known from the
  // bootstrap); used only if every rank sees a GPU and the backend is cuda.
  card.gpu_error = error_of([&] {
    const int device = transport::cuda::select_device(config.device, local_rank);
    own.device = device;
    transport::cuda::check_kernel_choices(config.kernels, device);
    const auto identity = transport::cuda::current_gpu_identity();
    card.gpu = {identity.pci_bus_id, identity.name, identity.nvlinks, identity.pcie_max_mb_per_s};
  });
  // Where this rank's topology places its GPU, for the P2P level check. A
  // topology that does not load is reported by topology_error instead.
  if (topology::PciAddress::parse(card.gpu.bus_id)) {
    try {
      const auto topology = topology::Topology::shared(config.topology_file);
      card.gpu_location = topology->find_gpu(card.gpu.bus_id);
      // A file the user chose that lacks the GPU is a mistake worth a WARN
      // (it can turn P2P off); a live topology without it is told by the
      // P2P level check.
      if (!card.gpu_location && !config.topology_file.empty())
        log::warn(communicator::topology_file_lacks_gpu(config.topology_file, card.gpu.bus_id,
                                                        topology->gpus().size(), config.p2p_level));
    } catch (const Error&) {
    }
  }
#endif
}

}  // namespace

OwnCard fill_own_card(const Config& config, const std::optional<std::string>& settings_error,
                      int local_rank) {
  OwnCard own;
  RankCard& card = own.card;
  card.node_key = bootstrap::detail::node_key();
  card.machine_key = bootstrap::detail::machine_key();
  card.settings_error = settings_error;
  if (!card.settings_error) card.settings_error = error_of([&] { core::validate_config(config); });
  for (const auto& field : core::config_fields(config))
    if (field.agreed) card.agreed_settings.push_back({field.name, field.variable, field.value});
  card.tuning_file = config.tuning_file;
  if (!config.tuning_file.empty()) {
    card.tuning_error =
        error_of([&] { own.tuning = routing::read_tuning_file(config.tuning_file); });
    if (own.tuning) {
      card.tuning_digest = digest_of_file(config.tuning_file);
      for (const auto& entry : own.tuning->entries)
        card.tuning_entries.push_back({entry.fingerprint, tuning_entry_effect(config, &entry)});
    }
  }
  card.topology_error = error_of([&] { own.locality = describe_locality(config); });
  fill_gpu(config, local_rank, own);
  return own;
}

std::vector<RankCard> exchange_cards(bootstrap::Bootstrap& bootstrap, const RankCard& mine) {
  const auto encoded = encode_rank_card(mine);
  const auto blobs = bootstrap.allgather(encoded);
  std::vector<RankCard> cards;
  cards.reserve(blobs.size());
  for (std::size_t rank = 0; rank < blobs.size(); ++rank) {
    try {
      cards.push_back(decode_rank_card(blobs[rank]));
    } catch (const Mismatch& e) {
      throw Mismatch("create: the card of rank " + std::to_string(rank) + " is " + e.what());
    }
  }
  return cards;
}

}  // namespace peerplan::communicator
