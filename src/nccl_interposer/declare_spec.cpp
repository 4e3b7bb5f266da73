// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_NCCL_DECLARE: groups "types:sizes[:step]" separated by ';', e.g.
// "bf16,f16,f32:1K-64M:x2;f32:3M".
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"
#include "nccl_interposer/size_ranges.hpp"
#include "nccl_interposer/text_fields.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

constexpr std::string_view kVariable = "PEERPLAN_NCCL_DECLARE";
constexpr std::string_view kForm =
    "write types:sizes[:step] groups separated by ';', e.g. bf16,f32:1K-64M:x2;f16:3M";

void append_group(std::string_view group, std::vector<DeclaredBuffer>& out) {
  const std::vector<std::string_view> parts = split(group, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    throw InvalidArgument("it has " + std::to_string(parts.size()) +
                          " ':'-separated parts, not 2 or 3; " + std::string(kForm));
  }
  const std::vector<DataType> dtypes = parse_dtype_list(trim(parts[0]));
  const std::string_view sizes = trim(parts[1]);
  const std::string_view step = parts.size() == 3 ? trim(parts[2]) : std::string_view{};
  // Without a step, expand_sizes takes one size only ("4", or "4K-4K").
  append_buffers_of_bytes(dtypes, expand_sizes(sizes, step), out, step.empty());
}

}  // namespace

std::vector<DeclaredBuffer> parse_declare_spec(std::string_view spec) {
  std::vector<DeclaredBuffer> buffers;
  // Blank groups are skipped, so a trailing ';' is harmless.
  for (const std::string_view piece : split(spec, ';')) {
    const std::string_view group = trim(piece);
    if (group.empty()) continue;
    try {
      append_group(group, buffers);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(std::string(kVariable) + ": in " + quoted(group) + ": " + error.what());
    }
  }
  sort_and_dedup(buffers);
  return buffers;
}

}  // namespace peerplan::nccl_interposer
