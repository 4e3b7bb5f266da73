// SPDX-License-Identifier: Apache-2.0
// Tuning files: per-machine route cutoffs measured by peerplan_tune, read by
// create() when Config::tuning_file / PEERPLAN_TUNING_FILE names one.
//
// A line-based text format, parsed here (the library depends on no parser):
//
//   # peerplan tuning file (written by peerplan_tune on 2025-06-01)
//   peerplan-tuning 1
//
//   [entry]
//   fingerprint = cuda ranks=2 gpu="NVIDIA H200" links=NV18
//   one_shot_max_bytes = 65536
//   two_shot_min_bytes = 1048576
//   two_shot_max_bytes = 16777216
//   fused_max_bytes = 3670016
//   one_shot_lamport = 64K..
//   fused_lamport = 64K..4M
//   fused_ll = 2M
//   two_shot_dma = 64M..
//   two_shot_lamport = 256K
//   one_shot_grid = 64K:8 1M:64
//   measured = peerplan_tune 0.1.0, 2025-06-01T12:00:00Z, bf16, CUDA graphs
//
// - Lines are trimmed of surrounding blanks and of a trailing '\r' (files
//   edited on Windows work). Blank lines and lines starting with '#' are
//   ignored; '#' elsewhere is part of the value.
// - The first other line is the header "peerplan-tuning 1" (the format's
//   version).
// - "[entry]" starts an entry; "key = value" lines belong to the entry
//   above them. Keys: fingerprint (required; compared exactly with
//   Communicator::topology_fingerprint(), see routing/fingerprint.hpp),
//   one_shot_max_bytes, two_shot_min_bytes, two_shot_max_bytes,
//   fused_max_bytes (byte counts with an optional K/M/G suffix, or "auto"),
//   the protocol windows one_shot_lamport, fused_lamport, fused_ll,
//   two_shot_dma and two_shot_lamport (routing/protocol_tuning.hpp; the
//   window syntax of core/window_text.hpp: never, all, N, A..B, A..);
//   a key left out or "auto" keeps the built-in value (the protocol keys
//   of older files are refused with the line that replaces them),
//   one_shot_grid (the one-shot kernels' largest grid by message size,
//   routing/launch_shape_tuning.hpp: space-separated "<size>:<blocks>"
//   steps with increasing sizes, blocks 1..kOneShotMaxBlocksLimit; a
//   message above the last step, or any message when the key is left out
//   or "auto", keeps the transport's default of one block per
//   multiprocessor; KernelChoices::one_shot_max_blocks wins over it),
//   and measured (free text: what measured it, when, how). Each key at most
//   once per entry, and each fingerprint in one entry only.
// Anything else is an error naming the file, the line and what to change:
// a file that silently failed to apply would leave the cutoffs at the
// defaults without anyone noticing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "peerplan/config.hpp"
#include "routing/launch_shape_tuning.hpp"
#include "routing/protocol_tuning.hpp"

namespace peerplan::routing {

inline constexpr int kTuningFileVersion = 1;

struct TuningEntry {
  std::string fingerprint;
  RouteCutoffs cutoffs;  // fields the entry leaves out stay kAutoCutoff
  std::string measured;
  int line = 0;  // line of its "[entry]" (0: not read from a file)
  // Last, so that brace initialisations of the fields above keep their
  // meaning. Windows the entry leaves out stay nullopt.
  ProtocolTuning protocols;
  // The kernels' launch shapes (no steps: the transport's defaults).
  LaunchShapeTuning shapes;

  friend bool operator==(const TuningEntry&, const TuningEntry&) = default;
};

struct TuningFile {
  std::vector<TuningEntry> entries;  // in file order
};

// Parses the text of a tuning file. `source` names it in error messages
// (the path). Throws InvalidArgument("tuning file <source>, line <n>:
// <problem>; <what to change>").
TuningFile parse_tuning_file(std::string_view text, const std::string& source);

// Reads and parses the file at `path`; InvalidArgument naming the path when
// it cannot be read.
TuningFile read_tuning_file(const std::string& path);

// The entry whose fingerprint is exactly `fingerprint`, or nullptr.
const TuningEntry* find_entry(const TuningFile& file, std::string_view fingerprint) noexcept;

// Replaces the entry with `entry`'s fingerprint, or appends `entry`.
void upsert_entry(TuningFile& file, TuningEntry entry);

// The file's text: `comment` (each of its lines prefixed with "# "), the
// header, then every entry; parse_tuning_file reads it back to the same
// entries (apart from `line`). Cutoffs at kAutoCutoff, windows left auto
// and a one-shot grid without steps are left out. Line breaks inside a
// fingerprint or measured text become spaces.
std::string format_tuning_file(const TuningFile& file, std::string_view comment = {});

}  // namespace peerplan::routing
