// SPDX-License-Identifier: Apache-2.0
#include "routing/fingerprint.hpp"

#include <string_view>
#include <tuple>

#include "peerplan/errors.hpp"

namespace peerplan::routing {
namespace {

// Larger is farther: the kind first, then fewer NVLinks.
auto farness(const topology::LinkClass& link) {
  return std::tuple(static_cast<int>(link.kind), -link.nvlinks);
}

// The model name in quotes (names have blanks), with '"' and '\' escaped so
// that the fingerprint stays one unambiguous token.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + '"';
}

}  // namespace

std::string gpu_model(const std::vector<std::string>& names) {
  if (names.empty()) return "unknown";
  for (const auto& name : names)
    if (name != names.front()) return "mixed";
  return names.front();
}

std::optional<topology::LinkClass> farthest_link(const std::vector<topology::GpuLocation>& gpus,
                                                 const topology::NvlinkCounts& nvlinks) {
  const std::size_t n = gpus.size();
  if (!nvlinks.empty()) {
    bool square = nvlinks.size() == n;
    for (const auto& row : nvlinks) square = square && row.size() == n;
    if (!square) {
      throw InvalidArgument("farthest_link: NVLink counts must be a " + std::to_string(n) + "x" +
                            std::to_string(n) + " matrix (one row and column per GPU) or empty");
    }
  }
  std::optional<topology::LinkClass> farthest;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const auto link = topology::classify(gpus[i], gpus[j], nvlinks.empty() ? 0 : nvlinks[i][j]);
      if (!farthest || farness(link) > farness(*farthest)) farthest = link;
    }
  }
  return farthest;
}

std::string topology_fingerprint(const MachineFacts& facts) {
  std::string text = to_string(facts.backend);
  if (facts.num_nodes > 1) {
    text +=
        " nodes=" + std::to_string(facts.num_nodes) + " ranks=" + std::to_string(facts.world_size);
    return facts.gpus_shared ? text + " shared" : text;
  }
  text += " ranks=" + std::to_string(facts.world_size);
  if (facts.backend != Backend::cuda) return text;
  text += " gpu=" + quoted(gpu_model(facts.gpu_names));
  if (facts.world_size < 2) return text;
  const bool located = static_cast<int>(facts.gpus.size()) == facts.world_size;
  const auto link = located ? farthest_link(facts.gpus, facts.nvlinks) : std::nullopt;
  text += " links=" + (link ? topology::to_string(*link) : std::string("unknown"));
  return facts.gpus_shared ? text + " shared" : text;
}

bool fingerprint_says_shared(const std::string& fingerprint) noexcept {
  constexpr std::string_view word = " shared";
  return fingerprint.size() >= word.size() &&
         std::string_view(fingerprint).substr(fingerprint.size() - word.size()) == word;
}

}  // namespace peerplan::routing
