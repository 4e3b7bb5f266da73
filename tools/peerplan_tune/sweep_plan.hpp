// SPDX-License-Identifier: Apache-2.0
// What the tool is asked to measure: its command-line options as given
// (Options) and, checked, what the sweep runs (SweepPlan). make_plan checks
// every value before anything is measured, so that a value the tool cannot
// use is refused at once (exit status 2), naming the option and what to
// change, never after a sweep or as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "call_timer.hpp"
#include "peerplan/dtype.hpp"

namespace peerplan::tune {

// The command line, as given (sizes as text: K, M and G suffixes).
struct Options {
  std::string out = "peerplan.tune";
  std::string min_text = "1K";
  std::string max_text = "256M";
  std::string dtype_text = "bf16";
  std::string protocols_max_text = "16M";
  std::int64_t hidden = 7168;
  int graph = 0;
  TimingPlan timing;
  std::string json_path;
  // Ranks sharing a GPU: measure anyway (to check the tool's paths on one
  // GPU), write no file.
  bool allow_shared_gpus = false;
};

struct SweepPlan {
  std::size_t min_bytes = 1024;  // all-reduce sizes: min_bytes, 2 x, 4 x, ... up to max_bytes
  std::size_t max_bytes = 1024;
  DataType dtype = DataType::bf16;
  std::int64_t hidden = 7168;  // fused op: rows of this many elements, as many as fit a size
  // Protocol sweep: the sizes above up to this many bytes (0: none, the
  // two-shot's protocols included, which are timed at every size). The
  // LL communicators stage every size as LL lines, twice its bytes.
  std::size_t protocols_max_bytes = std::size_t{16} << 20;
  TimingPlan timing;
};

// The largest message (-e) and row (--hidden elements) the tool takes:
// the largest tensor a communicator declares, 2^48 bytes
// (plan::kMaxSpanBytes).
std::size_t max_message_bytes() noexcept;

// The plan of `options`. Throws InvalidArgument naming the option and
// what to change when a value cannot be used: a size that is not a byte
// count (digits, optionally K, M or G) or is out of range (-b at least 16
// and a multiple of 16, -b <= -e <= max_message_bytes()), an unknown
// --dtype, a --hidden row that is not a positive multiple of 16 bytes or
// spans more than max_message_bytes() (checked without overflow), or
// counts below 1 (-n, --batches) or 0 (-w).
SweepPlan make_plan(const Options& options);

}  // namespace peerplan::tune
