// SPDX-License-Identifier: Apache-2.0
#include "communicator/p2p_level_check.hpp"

#include <cstdlib>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "communicator/rank_gpu.hpp"
#include "peerplan/errors.hpp"
#include "topology/pci_address.hpp"
#include "topology/topology.hpp"

namespace peerplan::communicator {
namespace {

using topology::P2PLevelVerdict;

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string_view text_of(const bootstrap::Blob& blob) {
  return {reinterpret_cast<const char*>(blob.data()), blob.size()};
}

// --- this rank's GPU: its rank number, then rank_gpu.hpp's text ------------------

struct NodeRank {
  int rank = -1;
  RankGpu gpu;
};

std::string encode_node_rank(int rank, const RankGpu& gpu) {
  return std::to_string(rank) + '\n' + encode_rank_gpu(gpu);
}

NodeRank decode_node_rank(const bootstrap::Blob& blob) {
  const std::string_view text = text_of(blob);
  const auto end_of_rank = text.find('\n');
  if (end_of_rank == std::string_view::npos) return {};
  NodeRank node_rank;
  node_rank.rank = std::atoi(std::string(text.substr(0, end_of_rank)).c_str());
  node_rank.gpu = decode_rank_gpu(std::span(blob).subspan(end_of_rank + 1));
  return node_rank;
}

// --- a verdict as bytes: length-prefixed fields, so texts may hold anything --------

void put_text(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

void put_optional(std::string& out, const std::optional<std::string>& field) {
  put_text(out, field ? "+" + *field : std::string("-"));
}

class FieldReader {
 public:
  explicit FieldReader(std::string_view text) : rest_(text) {}

  std::string text() {
    const auto colon = rest_.find(':');
    if (colon == std::string_view::npos) return fail();
    const std::size_t size =
        std::strtoull(std::string(rest_.substr(0, colon)).c_str(), nullptr, 10);
    if (size > rest_.size() - colon - 1) return fail();
    std::string field(rest_.substr(colon + 1, size));
    rest_.remove_prefix(colon + 1 + size);
    return field;
  }
  std::optional<std::string> optional_text() {
    std::string field = text();
    if (field.empty() || field[0] != '+') return std::nullopt;
    return field.substr(1);
  }
  int number() { return std::atoi(text().c_str()); }
  bool ok() const noexcept { return ok_; }

 private:
  std::string fail() {
    ok_ = false;
    rest_ = {};
    return {};
  }
  std::string_view rest_;
  bool ok_ = true;
};

std::string encode_verdict(const P2PLevelVerdict& verdict) {
  std::string out;
  put_optional(out, verdict.obstacle);
  put_optional(out, verdict.unknown_links);
  put_text(out, verdict.summary);
  for (int count :
       {verdict.pairs, verdict.allowed_pairs, verdict.beyond_pairs, verdict.unknown_pairs})
    put_text(out, std::to_string(count));
  return out;
}

std::optional<P2PLevelVerdict> decode_verdict(const bootstrap::Blob& blob) {
  FieldReader in(text_of(blob));
  P2PLevelVerdict verdict;
  verdict.obstacle = in.optional_text();
  verdict.unknown_links = in.optional_text();
  verdict.summary = in.text();
  verdict.pairs = in.number();
  verdict.allowed_pairs = in.number();
  verdict.beyond_pairs = in.number();
  verdict.unknown_pairs = in.number();
  if (!in.ok()) return std::nullopt;
  return verdict;
}

// --- the node's verdict, from its ranks' GPUs ---------------------------------------

// Local: no collective in here, so that a failure on this rank cannot put
// the ranks out of step (it only makes this rank's verdict say less).
P2PLevelVerdict node_verdict(const std::vector<NodeRank>& node_ranks, const Config& config) {
  std::shared_ptr<const topology::Topology> machine;
  std::optional<std::string> load_error;
  try {
    machine = topology::Topology::shared(config.topology_file);
  } catch (const Error& e) {
    load_error = e.what();
  }
  std::vector<topology::RankGpuPlacement> placements;
  std::vector<topology::PciAddress> addresses;
  std::vector<topology::NvlinkEnds> ends;
  for (const NodeRank& node_rank : node_ranks) {
    const std::string& bus_id = node_rank.gpu.bus_id;
    const auto address = topology::PciAddress::parse(bus_id);
    std::optional<topology::GpuLocation> location;
    if (machine && address) location = machine->find_gpu(bus_id);
    placements.push_back({node_rank.rank, bus_id, std::move(location)});
    // An unreadable bus id has no NVLink peer pointing at it; its pairs
    // are unknown anyway (check_p2p_level).
    addresses.push_back(address.value_or(topology::PciAddress{}));
    ends.push_back(node_rank.gpu.nvlinks);
  }
  P2PLevelVerdict verdict = topology::check_p2p_level(
      placements, topology::count_nvlinks(addresses, ends), config.p2p_level);
  if (load_error) {
    const std::string cause = "the topology could not be loaded (" + *load_error + ")";
    verdict.unknown_links = verdict.unknown_links ? cause + ": " + *verdict.unknown_links : cause;
  }
  return verdict;
}

// How much a verdict tells: an obstacle most, then unknown links.
int weight(const P2PLevelVerdict& verdict) {
  if (verdict.obstacle) return 2;
  return verdict.unknown_links ? 1 : 0;
}

// The agreed verdict: this node's, then the most telling of all nodes'.
P2PLevelVerdict agree_on_verdicts(bootstrap::Bootstrap& bootstrap, const Config& config,
                                  const std::vector<NodeRank>& node_ranks) {
  P2PLevelVerdict local;
  try {
    local = node_verdict(node_ranks, config);
  } catch (const Error& e) {
    // A bug rather than a fact about the machine; say so instead of blocking P2P.
    local.unknown_links = std::string("the P2P level could not be checked: ") + e.what();
  }

  // Ranks of one node may still disagree (different topology files, one
  // that failed to load); the agreed verdict is the most telling one.
  const std::string encoded = encode_verdict(local);
  std::optional<P2PLevelVerdict> agreed;
  for (const bootstrap::Blob& blob : bootstrap.allgather(bytes_of(encoded))) {
    auto verdict = decode_verdict(blob);
    if (verdict && (!agreed || weight(*verdict) > weight(*agreed))) agreed = std::move(verdict);
  }
  return agreed ? *agreed : local;
}

}  // namespace

P2PLevelVerdict gather_p2p_level_verdict(bootstrap::Bootstrap& bootstrap, const Config& config,
                                         const std::string& pci_bus_id,
                                         const topology::NvlinkEnds& nvlinks) {
  const std::string mine = encode_node_rank(bootstrap.rank(), {pci_bus_id, "", nvlinks});
  std::vector<NodeRank> node_ranks;
  for (const bootstrap::Blob& blob : bootstrap.local_allgather(bytes_of(mine)))
    node_ranks.push_back(decode_node_rank(blob));
  return agree_on_verdicts(bootstrap, config, node_ranks);
}

P2PLevelVerdict p2p_level_verdict(const std::vector<RankCard>& cards,
                                  const std::vector<int>& node_of_rank, P2PLevel level) {
  std::optional<P2PLevelVerdict> agreed;
  std::vector<bool> done(cards.size(), false);
  // Nodes in the order of their lowest rank, so that the first most telling
  // verdict is the one of the lowest rank, as when ranks gather verdicts.
  for (std::size_t first = 0; first < cards.size(); ++first) {
    if (done[first]) continue;
    std::vector<topology::RankGpuPlacement> placements;
    std::vector<topology::PciAddress> addresses;
    std::vector<topology::NvlinkEnds> ends;
    for (std::size_t r = first; r < cards.size(); ++r) {
      if (node_of_rank[r] != node_of_rank[first]) continue;
      done[r] = true;
      const RankGpu& gpu = cards[r].gpu;
      placements.push_back({static_cast<int>(r), gpu.bus_id, cards[r].gpu_location});
      // An unreadable bus id has no NVLink peer pointing at it; its pairs
      // are unknown anyway (check_p2p_level).
      addresses.push_back(topology::PciAddress::parse(gpu.bus_id).value_or(topology::PciAddress{}));
      ends.push_back(gpu.nvlinks);
    }
    P2PLevelVerdict verdict;
    try {
      verdict =
          topology::check_p2p_level(placements, topology::count_nvlinks(addresses, ends), level);
    } catch (const Error& e) {
      // A bug rather than a fact about the machine; say so instead of blocking P2P.
      verdict.unknown_links = std::string("the P2P level could not be checked: ") + e.what();
    }
    if (!agreed || weight(verdict) > weight(*agreed)) agreed = std::move(verdict);
  }
  return agreed.value_or(P2PLevelVerdict{});
}

std::optional<std::string> p2p_level_obstacle(bootstrap::Bootstrap& bootstrap, const Config& config,
                                              const std::string& pci_bus_id,
                                              const topology::NvlinkEnds& nvlinks) {
  return gather_p2p_level_verdict(bootstrap, config, pci_bus_id, nvlinks).obstacle;
}

}  // namespace peerplan::communicator
