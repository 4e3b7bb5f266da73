// SPDX-License-Identifier: Apache-2.0
// Plan files (PEERPLAN_PLAN_FILE), in the tuning file's manner: a header
// line "peerplan-plans 1", '#' comments, then one entry a line:
//   all_reduce dtype=bf16 bytes=1M
//   all_reduce dtype=f32 count=524288
//   all_reduce dtype=bf16,f16 bytes=1K-64M step=x2
// docs/nccl-interposer.md describes the format for users.
#include <map>
#include <optional>
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"
#include "nccl_interposer/size_ranges.hpp"
#include "nccl_interposer/text_fields.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

constexpr std::string_view kHeaderWord = "peerplan-plans";
constexpr std::string_view kVersion = "1";
constexpr std::string_view kOperation = "all_reduce";
constexpr std::string_view kEntryExample = "all_reduce dtype=bf16 bytes=1M";

std::string header_line() { return std::string(kHeaderWord) + " " + std::string(kVersion); }

// The line's words, blanks between them.
std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  for (std::size_t start = 0; start < line.size();) {
    const std::size_t begin = line.find_first_not_of(" \t", start);
    if (begin == std::string_view::npos) break;
    const std::size_t end = std::min(line.find_first_of(" \t", begin), line.size());
    words.push_back(line.substr(begin, end - begin));
    start = end;
  }
  return words;
}

void check_header(std::string_view line) {
  const std::vector<std::string_view> words = words_of(line);
  if (words.size() != 2 || words[0] != kHeaderWord) {
    throw InvalidArgument("expected the header " + quoted(header_line()) + ", found " +
                          quoted(line) +
                          "; the first line that is not blank or a comment must be the header");
  }
  if (words[1] != kVersion) {
    throw InvalidArgument("format version " + std::string(words[1]) +
                          " is not supported; this peerplan reads " + quoted(header_line()));
  }
}

void append_entry(std::string_view line, std::vector<DeclaredBuffer>& out) {
  const std::vector<std::string_view> words = words_of(line);
  if (words[0] != kOperation) {
    throw InvalidArgument("an entry starts with the operation " + std::string(kOperation) +
                          ", not " + quoted(words[0]) +
                          "; the interposer takes all-reduces only, e.g. " +
                          std::string(kEntryExample));
  }
  std::map<std::string_view, std::string_view> values;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::size_t equals = words[i].find('=');
    if (equals == std::string_view::npos || equals == 0) {
      throw InvalidArgument(quoted(words[i]) + " is not key=value; write entries like " +
                            std::string(kEntryExample) + " (no blanks around '=')");
    }
    const std::string_view key = words[i].substr(0, equals);
    if (key != "dtype" && key != "bytes" && key != "count" && key != "step") {
      throw InvalidArgument("unknown key " + quoted(key) +
                            "; the keys are dtype, bytes or count, and step");
    }
    if (!values.emplace(key, words[i].substr(equals + 1)).second)
      throw InvalidArgument("the key " + quoted(key) + " is given twice; keep one");
  }
  if (!values.contains("dtype")) {
    throw InvalidArgument(
        "the entry has no dtype; add dtype=bf16, f16 or f32 (or a list, "
        "dtype=bf16,f32)");
  }
  const bool has_bytes = values.contains("bytes");
  if (has_bytes == values.contains("count")) {
    throw InvalidArgument(std::string(has_bytes ? "both bytes and count are given"
                                                : "the entry has neither bytes nor count") +
                          "; give one: bytes=<size of the whole buffer> or count=<elements>");
  }
  const std::vector<DataType> dtypes = parse_dtype_list(values["dtype"]);
  const std::string_view step = values.contains("step") ? values["step"] : std::string_view{};
  const std::string_view written = has_bytes ? values["bytes"] : values["count"];
  const std::vector<std::size_t> sizes =
      expand_sizes(written, step, has_bytes ? SizeUnit::bytes : SizeUnit::elements);
  const bool named = step.empty();  // expand_sizes takes one size only then
  if (has_bytes) return append_buffers_of_bytes(dtypes, sizes, out, named);
  for (const DataType dtype : dtypes)
    for (const std::size_t count : sizes) out.push_back({dtype, count, named});
}

}  // namespace

std::vector<DeclaredBuffer> parse_plan_file(std::string_view text, std::string_view path) {
  std::vector<DeclaredBuffer> buffers;
  bool seen_header = false;
  int number = 0;
  for (const std::string_view raw : split(text, '\n')) {
    ++number;
    // A '#' starts a comment, on a line of its own or after an entry.
    const std::string_view line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    try {
      if (seen_header) {
        append_entry(line, buffers);
      } else {
        check_header(line);
        seen_header = true;
      }
    } catch (const InvalidArgument& error) {
      throw InvalidArgument("plan file " + std::string(path) + ":" + std::to_string(number) + ": " +
                            error.what());
    }
  }
  if (!seen_header) {
    throw InvalidArgument("plan file " + std::string(path) +
                          ":1: the file has no header line; its first line that is not blank or "
                          "a comment must be " +
                          quoted(header_line()));
  }
  sort_and_dedup(buffers);
  return buffers;
}

}  // namespace peerplan::nccl_interposer
