// SPDX-License-Identifier: Apache-2.0
#include "sweep_plan.hpp"

#include <optional>
#include <string>

#include "core/value_parsing.hpp"
#include "peerplan/errors.hpp"
#include "plan/layout_rules.hpp"

namespace peerplan::tune {

std::size_t max_message_bytes() noexcept { return static_cast<std::size_t>(plan::kMaxSpanBytes); }

namespace {

const std::string kSizeSyntax = "a byte count with an optional K, M or G suffix (e.g. 1K, 256M)";

std::string limit_text() {
  return std::to_string(max_message_bytes()) +
         " bytes (256 TiB, the largest tensor a "
         "communicator declares)";
}

std::size_t size_of(const std::string& option, const std::string& text) {
  const std::optional<std::size_t> bytes = core::parse_size(text);
  if (!bytes) throw InvalidArgument(option + " " + text + ": expected " + kSizeSyntax);
  return *bytes;
}

}  // namespace

SweepPlan make_plan(const Options& options) {
  SweepPlan plan;
  const std::size_t min_bytes = size_of("-b", options.min_text);
  const std::size_t max_bytes = size_of("-e", options.max_text);
  const std::size_t protocols_max = size_of("--protocols-max", options.protocols_max_text);
  if (min_bytes < 16 || min_bytes % 16 != 0)
    throw InvalidArgument("-b " + options.min_text +
                          ": -b must be a multiple of 16 bytes, at least 16 (P2P messages are "
                          "whole 16-byte packs)");
  if (max_bytes > max_message_bytes())
    throw InvalidArgument("-e " + options.max_text + ": at most " + limit_text() + "; lower -e");
  if (max_bytes < min_bytes)
    throw InvalidArgument("-b " + options.min_text + " -e " + options.max_text +
                          ": -b must be <= -e");
  const auto dtype = parse_data_type(options.dtype_text);
  if (!dtype) throw InvalidArgument("--dtype " + options.dtype_text + ": use f16, bf16 or f32");
  // hidden * element size is compared only once it is known not to overflow.
  const auto esize = static_cast<std::int64_t>(element_size(*dtype));
  const std::string hidden = "--hidden " + std::to_string(options.hidden);
  if (options.hidden < 1)
    throw InvalidArgument(hidden + ": a row must hold at least one element; use a positive count");
  if (options.hidden > static_cast<std::int64_t>(max_message_bytes()) / esize)
    throw InvalidArgument(hidden + ": a row of " + options.dtype_text +
                          " elements may span at "
                          "most " +
                          limit_text() + "; lower --hidden");
  if (options.hidden * esize % 16 != 0)
    throw InvalidArgument(hidden + ": a row must be a multiple of 16 bytes (" +
                          std::to_string(16 / esize) + " " + options.dtype_text +
                          " elements); use a multiple of " + std::to_string(16 / esize));
  if (options.timing.iters < 1)
    throw InvalidArgument("-n " + std::to_string(options.timing.iters) + ": at least 1 call");
  if (options.timing.batches < 1)
    throw InvalidArgument("--batches " + std::to_string(options.timing.batches) +
                          ": at least 1 batch");
  if (options.timing.warmup < 0)
    throw InvalidArgument("-w " + std::to_string(options.timing.warmup) + ": at least 0 calls");
  plan.min_bytes = min_bytes;
  plan.max_bytes = max_bytes;
  plan.dtype = *dtype;
  plan.hidden = options.hidden;
  plan.protocols_max_bytes = protocols_max;
  plan.timing = options.timing;
  plan.timing.graph = options.graph != 0;
  return plan;
}

}  // namespace peerplan::tune
