// Validation of a declared set (DESIGN §4 step 2), before anything is
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
// Rules: non-empty, unique names; a known operation; dtype f16, bf16 or f32;
// rank 1..8; every dimension positive; explicit strides positive for
// dimensions of size > 1, innermost stride 1 (unless the innermost dimension
// has size 1), non-overlapping in row-major order; 16-byte alignment (the
// innermost run last_dim * element_size and every outer stride, in bytes,
// multiples of 16; input_alignment a power of two >= 16); a byte extent that
// fits in 63 bits; fused add+RMSNorm: exactly one non-null weight of length
// last_dim and an eps that is present, finite and >= 0; all-reduce: no
// weight and no eps.
void validate_declarations(std::span<const Declaration> declarations);

}  // namespace peerplan::plan
