// SPDX-License-Identifier: Apache-2.0
// Declarations that can never be hit: when several declarations of one set
// share a key, the first declared wins (docs/design.md, The lookup contract,
// point 5), so the later ones are dead. Finding them lets declare() warn the
// user.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "peerplan/declaration.hpp"

namespace peerplan::plan {

struct RepeatedKey {
  std::size_t repeat = 0;  // position of the declaration that is never hit
  std::size_t first = 0;   // position of the earlier one with the same key
};

// In declaration order of the repeats; empty when every key is distinct.
std::vector<RepeatedKey> find_repeated_keys(std::span<const Declaration> declarations);

}  // namespace peerplan::plan
