// SPDX-License-Identifier: Apache-2.0
#include "communicator/rank_gpu.hpp"

#include <cstdlib>
#include <sstream>

namespace peerplan::communicator {

std::string encode_rank_gpu(const RankGpu& gpu) {
  std::string name = gpu.name;
  for (char& c : name)
    if (c == '\n') c = ' ';
  std::ostringstream out;
  out << gpu.bus_id << '\n' << name << '\n' << gpu.nvlinks.switch_links << '\n';
  for (const auto& peer : gpu.nvlinks.gpu_peers) out << peer.to_string() << ' ';
  return out.str();
}

RankGpu decode_rank_gpu(std::span<const std::byte> blob) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(blob.data()), blob.size()));
  RankGpu gpu;
  std::string switch_links, peers;
  std::getline(in, gpu.bus_id);
  std::getline(in, gpu.name);
  std::getline(in, switch_links);
  std::getline(in, peers);
  gpu.nvlinks.switch_links = std::atoi(switch_links.c_str());
  std::istringstream words(peers);
  for (std::string word; words >> word;)
    if (const auto peer = topology::PciAddress::parse(word)) gpu.nvlinks.gpu_peers.push_back(*peer);
  return gpu;
}

}  // namespace peerplan::communicator
