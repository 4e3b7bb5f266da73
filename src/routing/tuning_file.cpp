// SPDX-License-Identifier: Apache-2.0
#include "routing/tuning_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/value_parsing.hpp"
#include "core/window_text.hpp"
#include "peerplan/errors.hpp"
#include "routing/cutoffs.hpp"

namespace peerplan::routing {
namespace {

constexpr std::string_view kHeaderWord = "peerplan-tuning";
constexpr std::string_view kEntrySection = "[entry]";
constexpr std::string_view kFingerprintKey = "fingerprint";
constexpr std::string_view kMeasuredKey = "measured";
constexpr std::string_view kOneShotGridKey = "one_shot_grid";

std::string_view trim(std::string_view text) noexcept {
  const auto blank = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

// 'text', for messages. (Built by appending: GCC 12 warns, wrongly, about
// "'" + std::string(...) at -O3.)
std::string in_quotes(std::string_view text) {
  std::string out = "'";
  out.append(text);
  out += '\'';
  return out;
}

std::string known_keys() {
  std::string keys(kFingerprintKey);
  for (const CutoffField& field : kCutoffFields) keys += std::string(", ") + field.name;
  for (const WindowField& field : kWindowFields) keys += std::string(", ") + field.name;
  return keys + ", " + std::string(kOneShotGridKey) + ", " + std::string(kMeasuredKey);
}

bool is_known_key(std::string_view key) noexcept {
  return key == kFingerprintKey || key == kMeasuredKey || key == kOneShotGridKey ||
         find_byte_field(kCutoffFields, key) != nullptr || find_window_field(key) != nullptr;
}

// Protocol keys of files written before the windows had one syntax, and
// the line that replaces each (peerplan_tune writes the new keys).
struct RenamedKey {
  std::string_view old_key;
  std::string_view replacement;
};
constexpr RenamedKey kRenamedKeys[] = {
    {"one_shot_ll_max_bytes", "one_shot_lamport = N.. (Lamport above N bytes)"},
    {"fused_lamport_after_bytes", "fused_lamport = A..B (Lamport above A, up to B bytes)"},
    {"fused_lamport_max_bytes", "fused_lamport = A..B (Lamport above A, up to B bytes)"},
    {"fused_ll_max_bytes", "fused_ll = N (LL lines up to N bytes; never for 0)"},
    {"two_shot_dma_after_bytes", "two_shot_dma = N.. (copy engines above N bytes)"},
    {"two_shot_lamport_max_bytes", "two_shot_lamport = N (Lamport up to N bytes; never for 0)"},
};

const RenamedKey* find_renamed_key(std::string_view key) noexcept {
  for (const RenamedKey& renamed : kRenamedKeys)
    if (renamed.old_key == key) return &renamed;
  return nullptr;
}

// The entry's windows that are set, as "name = window" lines.
void write_set_windows(std::ostream& text, const ProtocolTuning& tuning) {
  for (const WindowField& field : kWindowFields) {
    if (const std::optional<Window>& window = tuning.*field.tuned)
      text << field.name << " = " << core::window_text(*window) << '\n';
  }
}

// The entry's fields that are set, as "name = value" lines.
template <class Struct, std::size_t N>
void write_set_fields(std::ostream& text, const Struct& value,
                      const std::array<ByteField<Struct>, N>& fields) {
  for (const ByteField<Struct>& field : fields) {
    const std::size_t bytes = value.*field.member;
    if (bytes != kAutoCutoff) text << field.name << " = " << bytes << '\n';
  }
}

class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {}

  TuningFile parse(std::string_view text) {
    int number = 0;
    for (std::size_t start = 0; start <= text.size();) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      read_line(trim(text.substr(start, end - start)), ++number);
      start = end + 1;
    }
    if (!seen_header_) {
      fail(1, "the file has no header line",
           "the first line that is not blank or a comment must be '" + header_line() +
               "'; is this a tuning file written by peerplan_tune?");
    }
    finish_entry();
    return std::move(file_);
  }

 private:
  static std::string header_line() {
    return std::string(kHeaderWord) + " " + std::to_string(kTuningFileVersion);
  }

  [[noreturn]] void fail(int line, const std::string& problem, const std::string& fix) const {
    throw InvalidArgument("tuning file " + source_ + ", line " + std::to_string(line) + ": " +
                          problem + "; " + fix);
  }

  void read_line(std::string_view line, int number) {
    if (line.empty() || line.front() == '#') return;
    if (!seen_header_) return read_header(line, number);
    if (line.front() == '[') return read_section(line, number);
    read_key_value(line, number);
  }

  void read_header(std::string_view line, int number) {
    std::istringstream words{std::string(line)};
    std::string word, version, extra;
    words >> word >> version >> extra;
    if (word != kHeaderWord || version.empty() || !extra.empty()) {
      fail(number, "expected the header " + in_quotes(header_line()) + ", found " + in_quotes(line),
           "is this a tuning file written by peerplan_tune? Its first line that is not blank or "
           "a comment must be the header");
    }
    if (version != std::to_string(kTuningFileVersion)) {
      fail(number, "format version " + version + " is not supported",
           "this peerplan reads version " + std::to_string(kTuningFileVersion) +
               "; regenerate the file with this build's peerplan_tune");
    }
    seen_header_ = true;
  }

  void read_section(std::string_view line, int number) {
    if (line != kEntrySection) {
      fail(number, "unknown section " + in_quotes(line),
           "the only section is '[entry]' (one per machine fingerprint)");
    }
    finish_entry();
    current_.emplace();
    current_->line = number;
    key_lines_.clear();
  }

  void read_key_value(std::string_view line, int number) {
    const auto equals = line.find('=');
    const std::string key(trim(line.substr(0, equals)));
    // Keys are single words: "fingerprint host ranks=2" lacks its '='.
    if (equals == std::string_view::npos || key.empty() ||
        key.find_first_of(" \t") != std::string::npos) {
      fail(number, in_quotes(line) + " is not 'key = value'",
           "write 'key = value', '[entry]', or start a comment with '#'");
    }
    const std::string_view value = trim(line.substr(equals + 1));
    if (const RenamedKey* renamed = find_renamed_key(key)) {
      fail(number, "the key '" + key + "' was renamed",
           "write " + std::string(renamed->replacement) + ", or run peerplan_tune again");
    }
    if (!is_known_key(key)) {
      fail(number, "unknown key '" + key + "'", "the keys are " + known_keys());
    }
    if (!current_) {
      fail(number, "'" + key + "' is outside an entry",
           "put '[entry]' on a line before the entry's keys");
    }
    if (const auto earlier = key_lines_.find(key); earlier != key_lines_.end()) {
      fail(number,
           "'" + key + "' is set again in the entry of line " + std::to_string(current_->line) +
               " (first on line " + std::to_string(earlier->second) + ")",
           "keep one of the two lines");
    }
    key_lines_.emplace(key, number);
    if (key == kFingerprintKey) {
      if (value.empty()) {
        fail(number, "the fingerprint is empty",
             "copy the machine's fingerprint (Communicator::topology_fingerprint(), or the INFO "
             "line of PEERPLAN_DEBUG=INFO) after 'fingerprint ='");
      }
      current_->fingerprint = std::string(value);
    } else if (key == kMeasuredKey) {
      current_->measured = std::string(value);
    } else if (key == kOneShotGridKey) {
      current_->shapes.one_shot_grid = parse_grid(value, number);
    } else if (const CutoffField* cutoff = find_byte_field(kCutoffFields, key)) {
      current_->cutoffs.*cutoff->member = parse_cutoff(key, value, number);
    } else {
      current_->protocols.*find_window_field(key)->tuned = parse_window(key, value, number);
    }
  }

  std::size_t parse_cutoff(const std::string& key, std::string_view value, int number) const {
    if (core::equals_ignore_case(value, "auto")) return kAutoCutoff;
    const auto bytes = core::parse_size(value);
    if (!bytes) {
      fail(number, "'" + key + " = " + std::string(value) + "' is not a byte count",
           "write a number of bytes with an optional K, M or G suffix (e.g. 65536 or 64K), 0 "
           "(no route, or no lower bound for two_shot_min_bytes), or auto");
    }
    // kAutoCutoff's own number would silently mean auto (PEERPLAN_*_BYTES refuses it too).
    if (*bytes == kAutoCutoff) {
      fail(number, "'" + key + " = " + std::string(value) + "' is the number that stands for auto",
           "write auto, or a smaller byte count");
    }
    // Pieces round down to multiples of 256: 1..255 would silently never split.
    if (key == "two_shot_chunk_bytes" && *bytes > 0 && *bytes < kTwoShotPieceAlignment) {
      fail(number,
           "'" + key + " = " + std::string(value) +
               "' would never split (pieces are rounded down to a multiple of 256 bytes)",
           "use 0 to never split, or at least 256");
    }
    return *bytes;
  }

  std::optional<Window> parse_window(const std::string& key, std::string_view value,
                                     int number) const {
    const core::WindowSetting setting = core::parse_window(value);
    if (!setting.ok()) {
      fail(number, "'" + key + " = " + std::string(value) + "' is not a window: " + setting.problem,
           "write " + std::string(core::kWindowSyntax));
    }
    return setting.window;
  }

  // "auto" (like the byte keys) means no steps: the transport's default
  // grid at every size. An empty value is rejected as the byte keys' is:
  // more likely a value lost in editing than a wish for the default.
  std::vector<GridStep> parse_grid(std::string_view value, int number) const {
    const std::string fix =
        "write space-separated <size>:<blocks> steps with increasing sizes (K, M or G "
        "suffixes) and blocks from 1 to " +
        std::to_string(kOneShotMaxBlocksLimit) +
        ", e.g. 'one_shot_grid = 64K:8 1M:64', or auto (the transport's default grid)";
    if (core::equals_ignore_case(value, "auto")) return {};
    if (value.empty()) fail(number, "'" + std::string(kOneShotGridKey) + "' is empty", fix);
    std::string problem;
    auto steps = parse_one_shot_grid(value, problem);
    if (!steps) {
      fail(number,
           "'" + std::string(kOneShotGridKey) + " = " + std::string(value) +
               "' is not a one-shot grid: " + problem,
           fix);
    }
    return std::move(*steps);
  }

  void finish_entry() {
    if (!current_) return;
    if (current_->fingerprint.empty()) {
      fail(current_->line, "the entry has no fingerprint",
           "add 'fingerprint = ...' with the machine's fingerprint "
           "(Communicator::topology_fingerprint(), or PEERPLAN_DEBUG=INFO prints it)");
    }
    for (const TuningEntry& other : file_.entries) {
      if (other.fingerprint == current_->fingerprint) {
        fail(
            current_->line,
            "the entry has the same fingerprint as the entry of line " + std::to_string(other.line),
            "delete one of the two entries (peerplan_tune replaces its machine's entry)");
      }
    }
    file_.entries.push_back(std::move(*current_));
    current_.reset();
  }

  const std::string& source_;
  TuningFile file_;
  bool seen_header_ = false;
  std::optional<TuningEntry> current_;
  std::map<std::string, int> key_lines_;  // key -> line, in the current entry
};

std::string one_line(std::string_view text) {
  std::string line(text);
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  return std::string(trim(line));
}

}  // namespace

TuningFile parse_tuning_file(std::string_view text, const std::string& source) {
  return Parser(source).parse(text);
}

TuningFile read_tuning_file(const std::string& path) {
  const auto fail = [&path](const std::string& problem) {
    throw InvalidArgument("tuning file " + path + " " + problem +
                          "; fix the path in Config::tuning_file / PEERPLAN_TUNING_FILE, or unset "
                          "it to use the built-in cutoffs");
  };
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) fail("is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(std::filesystem::exists(path, error) ? "cannot be opened (permissions?)"
                                              : "does not exist");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("could not be read to the end");
  return parse_tuning_file(text.str(), path);
}

const TuningEntry* find_entry(const TuningFile& file, std::string_view fingerprint) noexcept {
  for (const TuningEntry& entry : file.entries)
    if (entry.fingerprint == fingerprint) return &entry;
  return nullptr;
}

void upsert_entry(TuningFile& file, TuningEntry entry) {
  for (TuningEntry& existing : file.entries) {
    if (existing.fingerprint == entry.fingerprint) {
      existing = std::move(entry);
      return;
    }
  }
  file.entries.push_back(std::move(entry));
}

std::string format_tuning_file(const TuningFile& file, std::string_view comment) {
  std::ostringstream text;
  for (std::size_t start = 0; start < comment.size();) {
    const std::size_t end = std::min(comment.find('\n', start), comment.size());
    const std::string_view line = comment.substr(start, end - start);
    text << '#' << (line.empty() ? "" : " ") << line << '\n';
    start = end + 1;
  }
  text << kHeaderWord << ' ' << kTuningFileVersion << '\n';
  for (const TuningEntry& entry : file.entries) {
    text << '\n' << kEntrySection << '\n';
    text << kFingerprintKey << " = " << one_line(entry.fingerprint) << '\n';
    write_set_fields(text, entry.cutoffs, kCutoffFields);
    write_set_windows(text, entry.protocols);
    // No steps: the key is left out, like an automatic cutoff.
    if (!entry.shapes.one_shot_grid.empty()) {
      text << kOneShotGridKey << " = " << describe_one_shot_grid(entry.shapes.one_shot_grid)
           << '\n';
    }
    if (const std::string measured = one_line(entry.measured); !measured.empty())
      text << kMeasuredKey << " = " << measured << '\n';
  }
  return text.str();
}

}  // namespace peerplan::routing
