// SPDX-License-Identifier: Apache-2.0
#include "tunable_machine.hpp"

#include <charconv>

namespace peerplan::tune {

int nodes_in_fingerprint(std::string_view fingerprint) noexcept {
  constexpr std::string_view word = " nodes=";
  const std::size_t at = fingerprint.find(word);
  if (at == std::string_view::npos) return 1;
  const std::string_view rest = fingerprint.substr(at + word.size());
  int nodes = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), nodes);
  return error == std::errc{} && nodes > 1 ? nodes : 1;
}

}  // namespace peerplan::tune
