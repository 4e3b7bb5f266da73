// SPDX-License-Identifier: Apache-2.0
// Cross-rank agreement on a declared set (docs/design.md, Declare). Every rank
// must declare the same plans in the same order; weight addresses differ
// per rank and are left out. A disagreement fails declare() on every rank
// with a message naming the first differing declaration and the ranks that
// differ from rank 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "peerplan/declaration.hpp"

namespace peerplan::communicator {

// One line describing the rank-invariant fields of a declaration, e.g.
// "'attn_out' all_reduce bf16 [4, 4096] strides [4096, 1] align 16".
std::string describe_invariant_fields(const Declaration& declaration);

// A 64-bit digest of the rank-invariant fields in their key's canonical form
// (stable across processes): declarations whose keys are equal agree even
// where describe_invariant_fields differs - the stride of a size-1
// dimension, implicit and explicit row-major strides, eps -0.0 and +0.0.
std::uint64_t invariant_digest(const Declaration& declaration);

// Compares the declared sets of all ranks. Returns nullopt when every rank
// declared the same, else the message every rank throws (identical on every
// rank: it is computed from the same gathered data). Collective.
std::optional<std::string> find_declaration_mismatch(bootstrap::Bootstrap& bootstrap,
                                                     std::span<const Declaration> declarations);

}  // namespace peerplan::communicator
