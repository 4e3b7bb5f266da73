// SPDX-License-Identifier: Apache-2.0
// Validation of a declared set (docs/design.md, Declare), before anything is
// routed, registered or indexed.
#pragma once

#include <span>

#include "peerplan/declaration.hpp"

namespace peerplan::plan {

// Throws InvalidArgument at the first problem, in declaration order. The
// message names the declaration by position and name
// ("declarations[3] (\"attn_out\")"), the field ("layout.strides[1]"), the
// value found, and what to change.
//
// Rules: non-empty, unique names; a known operation; dtype f16, bf16 or
// f32; the layout rules of LayoutUse::declaration (layout_rules.hpp: rank
// 1..8, every dimension positive, positive strides, innermost stride 1,
// row-major and non-overlapping, rows and outer strides multiples of 16
// bytes, a byte span of at most 2^48); input_alignment a power of two
// >= 16; fused add+RMSNorm: exactly one non-null weight of length last_dim,
// aligned to its element size, and an eps that is present, finite and
// >= 0; all-reduce: no weight and no eps. The call path checks calls that
// miss the index against the same layout rules (widened to what the
// fallback serves), so declarations and calls never disagree.
void validate_declarations(std::span<const Declaration> declarations);

}  // namespace peerplan::plan
