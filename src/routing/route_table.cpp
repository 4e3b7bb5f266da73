// SPDX-License-Identifier: Apache-2.0
// format_route_table: the INFO-level table users read to see which of their
// declarations run on which route, and why the others fall back. A fused
// declaration's row shows its weight address and eps too ("norm" column):
// its calls hit only with that very pointer and eps, and the TRACE line of
// each call prints them in the same form (plan/norm_text.hpp) to compare.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "peerplan/plan_key.hpp"
#include "plan/norm_text.hpp"
#include "routing/router.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t kColumns = 9;
using Row = std::array<std::string, kColumns>;

void append_list(std::string& out, const TensorLayout& layout, bool strides) {
  out += '[';
  for (int i = 0; i < layout.rank(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(strides ? layout.stride(i) : layout.dim(i));
  }
  out += ']';
}

// "[8, 4096]", plus the strides when they are not the contiguous ones
// (they are part of the key, and a padded layout is worth noticing).
std::string shape_text(const TensorLayout& layout) {
  std::string text;
  append_list(text, layout, false);
  if (!layout.is_contiguous()) {
    text += " strides ";
    append_list(text, layout, true);
  }
  return text;
}

// "weight 0x7f.. eps 1e-06" for a fused declaration, "-" for an all-reduce.
std::string norm_column(const Declaration& declaration) {
  const std::string text = plan::norm_text(make_key(declaration));
  return text.empty() ? std::string("-") : text;
}

Row make_row(const Declaration& declaration, const RouteDecision& decision) {
  return {declaration.name,
          to_string(declaration.operation),
          to_string(declaration.dtype),
          shape_text(declaration.layout),
          norm_column(declaration),
          std::to_string(decision.message_bytes),
          to_string(decision.route),
          decision.route == Route::fallback ? "-" : to_string(decision.protocol),
          decision.reason == FallbackReason::none ? "-" : to_string(decision.reason)};
}

}  // namespace

std::string format_route_table(std::span<const Declaration> declarations,
                               std::span<const RouteDecision> decisions,
                               std::span<const std::string> launches) {
  std::vector<Row> rows;
  rows.push_back({"name", "op", "dtype", "shape", "norm", "bytes", "route", "protocol", "reason"});
  const std::size_t paired = std::min(declarations.size(), decisions.size());
  for (std::size_t i = 0; i < paired; ++i) rows.push_back(make_row(declarations[i], decisions[i]));

  std::array<std::size_t, kColumns> width{};
  for (const Row& row : rows)
    for (std::size_t c = 0; c < kColumns; ++c) width[c] = std::max(width[c], row[c].size());

  std::string table;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    for (std::size_t c = 0; c < kColumns; ++c) {
      table += row[c];
      // Pad all but the last column; no trailing blanks.
      if (c + 1 < kColumns) table.append(width[c] - row[c].size() + 2, ' ');
    }
    table += '\n';
    // What the transport prepared for the plan, once per plan (the
    // counterpart of NCCL's TUNING lines): the launch every hit makes.
    const std::size_t plan = r - 1;
    if (r > 0 && plan < launches.size() && !launches[plan].empty())
      table += "  launch: " + launches[plan] + '\n';
  }
  if (declarations.size() != decisions.size()) {
    table += std::string("(") + std::to_string(declarations.size()) + " declarations but " +
             std::to_string(decisions.size()) + " route decisions; only the first " +
             std::to_string(paired) + " are shown)\n";
  }
  return table;
}

}  // namespace peerplan::routing
