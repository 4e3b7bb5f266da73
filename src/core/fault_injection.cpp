// SPDX-License-Identifier: Apache-2.0
#include "core/fault_injection.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/log.hpp"
#include "core/value_parsing.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::fault {
namespace {

// 0 to INT_MAX, or nothing: a value past an int must not wrap onto a small
// one (a rank of 2^32 + 1 is not rank 1).
std::optional<int> int_in_range(std::string_view text) {
  const auto value = core::parse_integer(text);
  if (!value || *value < 0 || *value > INT_MAX) return std::nullopt;
  return static_cast<int>(*value);
}

// Every point the library reaches, in lifecycle order.
constexpr std::array<std::string_view, 10> kFaultPoints{
    "bootstrap.duplicated",    // the bootstrap duplicated the user's communicator, nothing more
    "create.after_bootstrap",  // the bootstrap's private communicator exists
    "shm.created",             // a shared-memory segment exists, not yet unlinked
    "declare.before_reserve",  // declarations agreed, staging not yet prepared
    "fallback.posted",         // the MPI fallback posted its reduction
    "fallback.reduced",        // the MPI fallback's reduction completed here
    "p2p.arrived",             // the host P2P transport published its input
    "p2p.expired",             // a host P2P wait expired, not yet recorded as failed
    "hier.summed",             // host hierarchical route: shard summed across nodes, not shared
    "verdict.first_sent",      // a verdict's word reached its first peer (bootstrap/timed_exchange)
};

enum class Action { kill, stop, sleep, abort };

struct Rule {
  std::string point;
  int rank = -1;
  Action action = Action::kill;
  int sleep_ms = 0;
  bool fired = false;
};

struct Parsed {
  std::vector<Rule> rules;
  std::string error;  // non-empty: malformed
};

Parsed parse(const char* text) {
  Parsed parsed;
  if (text == nullptr || *text == '\0') return parsed;
  const std::string all(text);
  std::size_t begin = 0;
  while (begin <= all.size()) {
    const std::size_t end = std::min(all.find(',', begin), all.size());
    const std::string item = all.substr(begin, end - begin);
    begin = end + 1;
    const std::size_t at = item.find('@');
    const std::size_t colon = item.find(':', at == std::string::npos ? 0 : at);
    if (at == std::string::npos || colon == std::string::npos) {
      parsed.error = "'" + item + "' is not <point>@<rank>:<action>";
      return parsed;
    }
    Rule rule;
    rule.point = item.substr(0, at);
    bool known = false;
    for (auto point : kFaultPoints) known = known || point == rule.point;
    if (!known) {
      parsed.error = "'" + rule.point + "' is not a fault point (known: ";
      for (std::size_t i = 0; i < kFaultPoints.size(); ++i) {
        parsed.error += (i ? ", " : "") + std::string(kFaultPoints[i]);
      }
      parsed.error += ")";
      return parsed;
    }
    const std::string rank_text = item.substr(at + 1, colon - at - 1);
    const auto rank = int_in_range(rank_text);
    if (!rank) {
      parsed.error = "'" + rank_text + "' in '" + item + "' is not a rank";
      return parsed;
    }
    rule.rank = *rank;
    const std::string action = item.substr(colon + 1);
    if (action == "kill") {
      rule.action = Action::kill;
    } else if (action == "stop") {
      rule.action = Action::stop;
    } else if (action == "abort") {
      rule.action = Action::abort;
    } else if (action.rfind("sleep=", 0) == 0) {
      rule.action = Action::sleep;
      const auto ms = int_in_range(std::string_view(action).substr(6));
      if (!ms) {
        parsed.error = "'" + action + "' in '" + item + "' needs a number of milliseconds";
        return parsed;
      }
      rule.sleep_ms = *ms;
    } else {
      parsed.error = "'" + action + "' in '" + item + "' is not kill, stop, abort or sleep=<ms>";
      return parsed;
    }
    parsed.rules.push_back(rule);
    if (end == all.size()) break;
  }
  return parsed;
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

Parsed& configuration() {
  static Parsed parsed = parse(std::getenv("PEERPLAN_FAULT_INJECT"));
  return parsed;
}

std::atomic<bool>& armed_flag() {
  static std::atomic<bool> flag{[] {
    const std::lock_guard lock(mutex());
    return !configuration().rules.empty();
  }()};
  return flag;
}

}  // namespace

bool armed() noexcept { return armed_flag().load(std::memory_order_relaxed); }

void reach(std::string_view point, int rank) {
  Rule hit;
  {
    const std::lock_guard lock(mutex());
    bool found = false;
    for (Rule& rule : configuration().rules) {
      if (!rule.fired && rule.point == point && rule.rank == rank) {
        rule.fired = true;
        hit = rule;
        found = true;
        break;
      }
    }
    if (!found) return;
  }
  log::warn("PEERPLAN_FAULT_INJECT: rank " + std::to_string(rank) + " at " + std::string(point));
  switch (hit.action) {
    case Action::kill:
      ::kill(::getpid(), SIGKILL);
      break;
    case Action::stop:
      ::kill(::getpid(), SIGSTOP);
      break;
    case Action::abort:
      std::abort();
    case Action::sleep:
      std::this_thread::sleep_for(std::chrono::milliseconds(hit.sleep_ms));
      break;
  }
}

void check_configuration() {
  armed();  // parse once
  const std::lock_guard lock(mutex());
  if (!configuration().error.empty()) {
    throw InvalidArgument("PEERPLAN_FAULT_INJECT (a test-only variable): " + configuration().error +
                          "; unset it outside fault-injection tests");
  }
}

void reload_for_tests() {
  armed();  // make sure the statics exist before replacing them
  const std::lock_guard lock(mutex());
  configuration() = parse(std::getenv("PEERPLAN_FAULT_INJECT"));
  armed_flag().store(!configuration().rules.empty(), std::memory_order_relaxed);
}

}  // namespace peerplan::fault
