// SPDX-License-Identifier: Apache-2.0
// to_string(const Stats&): the counters as text, for logs and examples.
#include <algorithm>
#include <cstdio>
#include <string>

#include "peerplan/route.hpp"

namespace peerplan {
namespace {

std::string padded(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string right(std::uint64_t value, std::size_t width) {
  std::string text = std::to_string(value);
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

}  // namespace

std::string to_string(const Stats& stats) {
  std::string out = "P2P calls " + std::to_string(stats.p2p_calls) + " (zero copy " +
                    std::to_string(stats.zero_copy_calls) + "); fallback: undeclared " +
                    std::to_string(stats.fallback_undeclared) + ", over cutoff " +
                    std::to_string(stats.fallback_over_cutoff) + ", P2P disabled " +
                    std::to_string(stats.fallback_p2p_disabled) + ", node layout " +
                    std::to_string(stats.fallback_node_layout) + "\n";
  if (!stats.plans.empty()) {
    std::size_t name_width = 4;
    for (const PlanStats& p : stats.plans) name_width = std::max(name_width, p.name.size());
    out += padded("plan", name_width) + "  " + padded("operation", 18) + "  " +
           padded("route", 14) + "  " + padded("protocol", 8) + "  " + padded("why fallback", 12) +
           "        hits   fallbacks\n";
    for (const PlanStats& p : stats.plans) {
      out += padded(p.name, name_width) + "  " + padded(to_string(p.operation), 18) + "  " +
             padded(to_string(p.route), 14) + "  " +
             padded(p.route == Route::fallback ? "-" : to_string(p.protocol), 8) + "  " +
             padded(p.route == Route::fallback ? to_string(p.route_reason) : "-", 12) + "  " +
             right(p.hits, 10) + "  " + right(p.fallbacks, 10) + "\n";
    }
  }
  if (!stats.undeclared.empty()) {
    out += "undeclared keys, most calls first (declare them to take a P2P route):\n";
    for (const UndeclaredKeyStats& k : stats.undeclared) {
      out += right(k.calls, 10) + " calls  " + k.key;
      if (k.overcount > 0) out += "  (up to " + std::to_string(k.overcount) + " of other keys)";
      out += "\n";
    }
  }
  return out;
}

}  // namespace peerplan
