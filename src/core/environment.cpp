// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_* environment variables: each overrides one Config field. The
// table of variables, fields, values and defaults: docs/configuration.md.
//
// Keywords are case-insensitive. A size is a byte count with an optional
// K, M or G suffix (KiB multiples: 512K = 524288); a protocol window takes
// the syntax of core/window_text.hpp. A boolean is one of 0/1, true/false,
// yes/no, on/off. "auto" leaves the choice to the tuning file, else the
// built-in default (routing/defaults.hpp).
//
// A variable set to the empty string counts as unset, so `PEERPLAN_DEBUG=`
// on a command line restores the default instead of failing. Any other
// value must parse completely; every bad variable is reported in one
// InvalidArgument, each with its value and what it accepts, rather than
// being ignored (a typo in a cutoff would otherwise go unnoticed).
#include "core/environment.hpp"

#include <array>
#include <climits>
#include <cstdlib>
#include <optional>

#include "core/log_subsystems.hpp"
#include "core/value_parsing.hpp"
#include "core/window_text.hpp"
#include "peerplan/errors.hpp"

namespace peerplan {
namespace {

using core::enum_names;
using core::parse_bool;
using core::parse_enum;
using core::parse_integer;
using core::parse_size;

constexpr std::array kBackends{Backend::automatic, Backend::cuda, Backend::host};
constexpr std::array kLogLevels{LogLevel::none, LogLevel::warn, LogLevel::info, LogLevel::trace};
constexpr std::array kTransferModes{TransferMode::automatic, TransferMode::pull,
                                    TransferMode::push};
constexpr std::array kP2PLevels{P2PLevel::automatic, P2PLevel::loc, P2PLevel::nvl,  P2PLevel::pix,
                                P2PLevel::pxb,       P2PLevel::phb, P2PLevel::node, P2PLevel::sys};
constexpr std::array kRowClusters{RowClusters::automatic, RowClusters::on, RowClusters::off};
constexpr std::array kFallbacks{Fallback::automatic, Fallback::nccl, Fallback::mpi};

// Applies a value to the config. Returns what it changed, in words, for
// the INFO log; nullopt when the value is not acceptable.
using Applier = std::optional<std::string> (*)(Config&, std::string_view value);

// Why a rejected value is wrong, where more can be said than what the
// variable accepts ("" otherwise).
using Explainer = std::string (*)(std::string_view value);

struct Variable {
  const char* name;
  std::string accepted;  // shown when the value is rejected
  Applier apply;
  Explainer explain = nullptr;
};

std::optional<int> parse_int_in(std::string_view text, std::int64_t lo, std::int64_t hi) {
  const auto value = parse_integer(text);
  if (!value || *value < lo || *value > hi) return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<std::size_t> parse_cutoff(std::string_view text) {
  if (core::equals_ignore_case(text, "auto")) return kAutoCutoff;
  const auto bytes = parse_size(text);
  // kAutoCutoff's own number would silently mean auto.
  if (bytes == kAutoCutoff) return std::nullopt;
  return bytes;
}

enum class Bound { max, min };

// 0 disables a route through its maximum but only removes the lower bound
// of two-shot's window.
std::string describe_cutoff(const char* route, Bound bound, std::size_t bytes) {
  const std::string what = std::string(route) + (bound == Bound::max ? " max" : " min");
  if (bytes == kAutoCutoff) return what + " = default for the world size";
  if (bytes == 0 && bound == Bound::max) return std::string(route) + " route disabled";
  if (bytes == 0) return what + " 0: no lower bound";
  return what + " " + std::to_string(bytes) + " bytes";
}

template <std::size_t RouteCutoffs::*Field>
std::optional<std::string> apply_cutoff(Config& config, std::string_view value, const char* route,
                                        Bound bound = Bound::max) {
  const auto bytes = parse_cutoff(value);
  if (!bytes) return std::nullopt;
  config.cutoffs.*Field = *bytes;
  return describe_cutoff(route, bound, *bytes);
}

const std::string kSizeAccepted =
    "a byte count with an optional K, M or G suffix (e.g. 524288 or 512K), 0 to disable the "
    "route, or auto";
const std::string kMinSizeAccepted =
    "a byte count with an optional K, M or G suffix (e.g. 524288 or 512K), 0 for no lower "
    "bound, or auto";

// A protocol window of KernelChoices, in the window syntax; `name` is the
// field's, for the effect line.
template <std::optional<Window> KernelChoices::*Field>
std::optional<std::string> apply_window(Config& config, std::string_view value, const char* name) {
  const core::WindowSetting setting = core::parse_window(value);
  if (!setting.ok()) return std::nullopt;
  config.kernels.*Field = setting.window;
  if (!setting.window) return std::string(name) + " = the tuning file's or the built-in window";
  return std::string(name) + " = " + core::window_text(*setting.window);
}

const std::string kWindowAccepted = std::string(core::kWindowSyntax);

const std::string kBooleanAccepted = "one of 0|1|true|false|yes|no|on|off (case-insensitive)";

// A boolean field of Config; `on` and `off` are the effect lines.
template <bool Config::*Field>
std::optional<std::string> apply_boolean(Config& config, std::string_view value, const char* on,
                                         const char* off) {
  const auto set = parse_bool(value);
  if (!set) return std::nullopt;
  config.*Field = *set;
  return std::string(*set ? on : off);
}

// The parser's own reason: "0" and "4M..64K" are well-formed but hold no
// message, which the syntax alone does not tell.
std::string window_problem(std::string_view value) { return core::parse_window(value).problem; }

// Pieces are rounded down to multiples of 256 bytes: 1..255 would round to
// none and silently never split, the opposite of asking for small pieces.
bool is_piece_below_alignment(std::size_t bytes) {
  return bytes > 0 && bytes < kTwoShotPieceAlignment;
}

std::string chunk_problem(std::string_view value) {
  const auto bytes = parse_size(value);
  if (!bytes || !is_piece_below_alignment(*bytes)) return {};
  return "pieces are rounded down to a multiple of 256 bytes, so " + std::string(value) +
         " would never split: use 0 to never split, or at least 256";
}

// Variables of earlier versions, refused with what replaces them: set and
// silently ignored, they would change nothing without anyone noticing.
struct RenamedVariable {
  const char* name;
  const char* replacement;
};
constexpr RenamedVariable kRenamedVariables[] = {
    {"PEERPLAN_ONE_SHOT_PROTOCOL",
     "PEERPLAN_ONE_SHOT_LAMPORT, the one-shot's Lamport window (ll -> never, lamport -> all, "
     "N -> N..)"},
    {"PEERPLAN_FUSED_PROTOCOL",
     "PEERPLAN_FUSED_LAMPORT, the fused op's Lamport window (ll -> never, lamport -> all, "
     "N -> N..)"},
    {"PEERPLAN_FUSED_LL_MAX_BYTES",
     "PEERPLAN_FUSED_LL, the fused op's LL window (0 -> never, N -> N)"},
    {"PEERPLAN_TWO_SHOT_PROTOCOL",
     "PEERPLAN_TWO_SHOT_DMA, the two-shot's copy-engine window (staged -> never, dma -> all, "
     "N -> N..)"},
    {"PEERPLAN_TWO_SHOT_LAMPORT_MAX_BYTES",
     "PEERPLAN_TWO_SHOT_LAMPORT, the two-shot's Lamport window (off or 0 -> never, all -> "
     "all, N -> N)"},
};

template <typename Enum, std::size_t N>
std::string one_of(const std::array<Enum, N>& values) {
  return "one of " + enum_names(values) + " (case-insensitive)";
}

const std::vector<Variable>& variables() {
  static const std::vector<Variable> table{
      {"PEERPLAN_DEBUG", one_of(kLogLevels),
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto level = parse_enum(v, kLogLevels);
         if (!level) return std::nullopt;
         c.log_level = *level;
         return std::string("log level ") + to_string(*level);
       }},
      // Opened by create(), which falls back to stderr when it cannot.
      {"PEERPLAN_DEBUG_FILE",
       "the path of the log file; %h is the short host name, %p the process id, %% a '%'",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         c.log_file = std::string(v);
         return "log file " + c.log_file;
       }},
      {"PEERPLAN_DEBUG_SUBSYS",
       "a comma list of " + log::subsystem_names() +
           " (case-insensitive); a leading ^ selects all but those",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         if (!log::parse_subsystems(v)) return std::nullopt;
         c.log_subsystems = std::string(v);
         return "log subsystems " + c.log_subsystems;
       }},
      {"PEERPLAN_BACKEND", one_of(kBackends),
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto backend = parse_enum(v, kBackends);
         if (!backend) return std::nullopt;
         c.backend = *backend;
         return std::string("backend ") + to_string(*backend);
       }},
      {"PEERPLAN_DEVICE", "an integer >= -1 (-1 = the local rank)",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto device = parse_int_in(v, -1, INT_MAX);
         if (!device) return std::nullopt;
         c.device = *device;
         return *device < 0 ? std::string("device = local rank")
                            : "device " + std::to_string(*device);
       }},
      {"PEERPLAN_TIMEOUT_MS", "an integer number of milliseconds from 1 to 2147483647",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         static_assert(kMaxTimeout.count() == INT_MAX, "the accepted text above");
         const auto ms = parse_int_in(v, 1, INT_MAX);
         if (!ms) return std::nullopt;
         c.timeout = std::chrono::milliseconds(*ms);
         return "timeout " + std::to_string(*ms) + " ms";
       }},
      {"PEERPLAN_ONE_SHOT_MAX_BYTES", kSizeAccepted,
       [](Config& c, std::string_view v) {
         return apply_cutoff<&RouteCutoffs::one_shot_max_bytes>(c, v, "one-shot");
       }},
      {"PEERPLAN_TWO_SHOT_MIN_BYTES", kMinSizeAccepted,
       [](Config& c, std::string_view v) {
         return apply_cutoff<&RouteCutoffs::two_shot_min_bytes>(c, v, "two-shot", Bound::min);
       }},
      {"PEERPLAN_TWO_SHOT_MAX_BYTES", kSizeAccepted,
       [](Config& c, std::string_view v) {
         return apply_cutoff<&RouteCutoffs::two_shot_max_bytes>(c, v, "two-shot");
       }},
      {"PEERPLAN_FUSED_MAX_BYTES", kSizeAccepted,
       [](Config& c, std::string_view v) {
         return apply_cutoff<&RouteCutoffs::fused_max_bytes>(c, v, "fused one-shot");
       }},
      {"PEERPLAN_TWO_SHOT_CHUNK_BYTES",
       "a byte count of at least 256 with an optional K, M or G suffix (e.g. 67108864 or 64M; "
       "rounded down to a multiple of 256), 0 to never split a two-shot, or auto",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto bytes = parse_cutoff(v);
         if (!bytes || is_piece_below_alignment(*bytes)) return std::nullopt;
         c.cutoffs.two_shot_chunk_bytes = *bytes;
         if (*bytes == kAutoCutoff)
           return std::string("two-shot pieces = default for the world size");
         if (*bytes == 0) return std::string("two-shot never split");
         return "two-shot pieces of " +
                std::to_string(*bytes / kTwoShotPieceAlignment * kTwoShotPieceAlignment) + " bytes";
       },
       chunk_problem},
      {"PEERPLAN_TRANSFER_MODE", one_of(kTransferModes),
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto mode = parse_enum(v, kTransferModes);
         if (!mode) return std::nullopt;
         c.transfer_mode = *mode;
         return std::string("transfer mode ") + to_string(*mode);
       }},
      {"PEERPLAN_DISABLE_P2P", kBooleanAccepted,
       [](Config& c, std::string_view v) {
         return apply_boolean<&Config::disable_p2p>(
             c, v, "P2P disabled: every call takes the fallback", "P2P allowed");
       }},
      {"PEERPLAN_P2P_LEVEL", one_of(kP2PLevels),
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto level = parse_enum(v, kP2PLevels);
         if (!level) return std::nullopt;
         c.p2p_level = *level;
         if (*level == P2PLevel::automatic)
           return std::string("P2P allowed up to link class NODE (the default, auto)");
         return std::string("P2P allowed up to link class ") + to_string(*level);
       }},
      // Existence is checked where the file is read, with hwloc's own error.
      {"PEERPLAN_TOPO_FILE", "the path of an hwloc XML topology file",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         c.topology_file = std::string(v);
         return "topology read from " + c.topology_file;
       }},
      // Read and checked by create(), which names the line of any error.
      {"PEERPLAN_TUNING_FILE", "the path of a tuning file written by peerplan_tune",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         c.tuning_file = std::string(v);
         return "tuning file " + c.tuning_file;
       }},
      {"PEERPLAN_WORLD_SIZE", "an integer >= 0 (0 = not checked)",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto size = parse_int_in(v, 0, INT_MAX);
         if (!size) return std::nullopt;
         c.expected_world_size = *size;
         return *size == 0 ? std::string("world size not checked")
                           : "create() requires exactly " + std::to_string(*size) + " ranks";
       }},
      // The CUDA backend's kernel knobs (KernelChoices).
      {"PEERPLAN_ONE_SHOT_MAX_BLOCKS",
       "an integer from 1 to " + std::to_string(kOneShotMaxBlocksLimit) +
           ", or auto (one block per multiprocessor)",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         if (core::equals_ignore_case(v, "auto")) {
           c.kernels.one_shot_max_blocks = 0;
           return std::string("one-shot grid = one block per multiprocessor");
         }
         const auto blocks = parse_int_in(v, 1, kOneShotMaxBlocksLimit);
         if (!blocks) return std::nullopt;
         c.kernels.one_shot_max_blocks = *blocks;
         return "one-shot grid at most " + std::to_string(*blocks) + " blocks";
       }},
      {"PEERPLAN_ONE_SHOT_LAMPORT", kWindowAccepted,
       [](Config& c, std::string_view v) {
         return apply_window<&KernelChoices::one_shot_lamport>(c, v, "one_shot_lamport");
       },
       window_problem},
      {"PEERPLAN_FUSED_LAMPORT", kWindowAccepted,
       [](Config& c, std::string_view v) {
         return apply_window<&KernelChoices::fused_lamport>(c, v, "fused_lamport");
       },
       window_problem},
      {"PEERPLAN_FUSED_LL", kWindowAccepted,
       [](Config& c, std::string_view v) {
         return apply_window<&KernelChoices::fused_ll>(c, v, "fused_ll");
       },
       window_problem},
      {"PEERPLAN_ROW_CLUSTERS",
       "one of auto|on|off or a boolean 0|1|true|false|yes|no (case-insensitive)",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         auto clusters = parse_enum(v, kRowClusters);
         if (!clusters) {
           const auto on = parse_bool(v);
           if (!on) return std::nullopt;
           clusters = *on ? RowClusters::on : RowClusters::off;
         }
         c.kernels.row_clusters = *clusters;
         switch (*clusters) {
           case RowClusters::on:
             return std::string("row clusters on (required of the GPU)");
           case RowClusters::off:
             return std::string("row clusters off: one block per row");
           case RowClusters::automatic:
             break;
         }
         return std::string("row clusters where the GPU has them");
       }},
      {"PEERPLAN_TWO_SHOT_DMA", kWindowAccepted,
       [](Config& c, std::string_view v) {
         return apply_window<&KernelChoices::two_shot_dma>(c, v, "two_shot_dma");
       },
       window_problem},
      {"PEERPLAN_TWO_SHOT_LAMPORT", kWindowAccepted,
       [](Config& c, std::string_view v) {
         return apply_window<&KernelChoices::two_shot_lamport>(c, v, "two_shot_lamport");
       },
       window_problem},
      {"PEERPLAN_FALLBACK", one_of(kFallbacks),
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto fallback = parse_enum(v, kFallbacks);
         if (!fallback) return std::nullopt;
         c.fallback = *fallback;
         return std::string("fallback ") + to_string(*fallback);
       }},
      {"PEERPLAN_TRACK_UNDECLARED", "an integer from 0 (off) to 1024",
       [](Config& c, std::string_view v) -> std::optional<std::string> {
         const auto keys = parse_int_in(v, 0, kMaxUndeclaredKeysTracked);
         if (!keys) return std::nullopt;
         c.undeclared_keys_tracked = *keys;
         return *keys == 0
                    ? std::string("undeclared keys not tracked")
                    : "Stats keep the " + std::to_string(*keys) + " most frequent undeclared keys";
       }},
      {"PEERPLAN_NVTX", kBooleanAccepted,
       [](Config& c, std::string_view v) {
         return apply_boolean<&Config::nvtx>(c, v, "NVTX ranges on", "NVTX ranges off");
       }},
      {"PEERPLAN_CHECK_CALLS", kBooleanAccepted,
       [](Config& c, std::string_view v) {
         return apply_boolean<&Config::check_calls>(c, v, "calls compared across ranks",
                                                    "calls not compared");
       }},
  };
  return table;
}

}  // namespace

Config apply_environment_from(Config config, const EnvironmentLookup& lookup,
                              std::vector<std::string>* applied, std::string_view setter) {
  std::vector<std::string> lines;
  std::string errors;
  for (const RenamedVariable& renamed : kRenamedVariables) {
    const char* raw = lookup(renamed.name);
    if (raw == nullptr || *raw == '\0') continue;
    if (!errors.empty()) errors += "; ";
    errors += std::string(renamed.name) + "=\"" + raw + "\" is no longer read: set " +
              renamed.replacement + " instead";
  }
  for (const Variable& variable : variables()) {
    const char* raw = lookup(variable.name);
    if (raw == nullptr || *raw == '\0') continue;
    const std::string_view value(raw);
    if (const auto effect = variable.apply(config, value)) {
      lines.push_back(std::string(variable.name) + "=" + raw + " (" + *effect + ")");
    } else {
      if (!errors.empty()) errors += "; ";
      errors += std::string(variable.name) + "=\"" + raw + "\" is not valid: ";
      if (variable.explain != nullptr) {
        if (const std::string problem = variable.explain(value); !problem.empty())
          errors += problem + "; ";
      }
      errors += "expected " + variable.accepted;
    }
  }
  if (!errors.empty() && setter.empty())
    throw InvalidArgument(errors + ". Fix or unset the variable (an empty value counts as unset).");
  // Not the environment: "unset the variable" would send the reader there.
  if (!errors.empty())
    throw InvalidArgument(std::string(setter) + ": " + errors +
                          ". Fix the value, or leave the setting out (an empty value counts as "
                          "unset).");
  if (applied != nullptr) applied->insert(applied->end(), lines.begin(), lines.end());
  return config;
}

Config apply_environment(Config config, std::vector<std::string>* applied) {
  return apply_environment_from(
      std::move(config), [](const char* name) { return std::getenv(name); }, applied);
}

Config apply_environment(Config config) { return apply_environment(std::move(config), nullptr); }

std::vector<std::string_view> retired_environment_variable_names() {
  std::vector<std::string_view> names;
  for (const RenamedVariable& renamed : kRenamedVariables) names.emplace_back(renamed.name);
  return names;
}

std::vector<std::string_view> environment_variable_names() {
  std::vector<std::string_view> names;
  for (const Variable& variable : variables()) names.emplace_back(variable.name);
  return names;
}

}  // namespace peerplan
