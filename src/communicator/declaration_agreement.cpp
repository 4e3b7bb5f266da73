// SPDX-License-Identifier: Apache-2.0
#include "communicator/declaration_agreement.hpp"

#include <cstring>
#include <sstream>

#include "peerplan/dtype.hpp"
#include "peerplan/operation.hpp"
#include "peerplan/plan_key.hpp"

namespace peerplan::communicator {
namespace {

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string to_text(const bootstrap::Blob& blob) {
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (std::size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  return out.str();
}

}  // namespace

std::string describe_invariant_fields(const Declaration& d) {
  std::ostringstream out;
  out << "'" << d.name << "' " << to_string(d.operation) << ' ' << to_string(d.dtype) << ' '
      << d.layout.to_string() << " align " << d.input_alignment;
  for (const auto& weight : d.weights) out << " weight[" << weight.length << "]";
  if (d.eps) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &*d.eps, sizeof bits);
    out << " eps " << *d.eps << " (0x" << std::hex << bits << std::dec << ")";
  }
  return out.str();
}

std::uint64_t invariant_digest(const Declaration& declaration) {
  // The key's shape, strides and eps, not the declaration's text: the lookup
  // treats keys that compare equal alike, so must the agreement. The weight
  // address (per rank) is left out; weight lengths stay.
  const PlanKey key = make_key(declaration);
  std::ostringstream out;
  out << declaration.name << '\n'
      << static_cast<int>(key.operation) << ' ' << static_cast<int>(key.dtype) << ' '
      << static_cast<int>(key.rank) << " eps " << key.eps_bits << " align "
      << declaration.input_alignment;
  for (int d = 0; d < key.rank; ++d) out << ' ' << key.shape[d] << ':' << key.strides[d];
  for (const auto& weight : declaration.weights) out << " weight[" << weight.length << "]";
  // FNV-1a: stable across processes and builds, unlike std::hash.
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : out.str()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::optional<std::string> find_declaration_mismatch(bootstrap::Bootstrap& bootstrap,
                                                     std::span<const Declaration> declarations) {
  // First round: cheap digests. Everyone compares everyone's list with rank 0's.
  std::vector<std::uint64_t> digests;
  digests.reserve(declarations.size());
  for (const auto& d : declarations) digests.push_back(invariant_digest(d));
  auto gathered = bootstrap.allgather(std::as_bytes(std::span(digests)));

  const auto digests_of = [&](int rank) {
    std::vector<std::uint64_t> list(gathered[rank].size() / sizeof(std::uint64_t));
    // An empty declared set has no data pointer: memcpy must not see it.
    if (!list.empty()) {
      std::memcpy(list.data(), gathered[rank].data(), list.size() * sizeof(std::uint64_t));
    }
    return list;
  };
  const auto reference = digests_of(0);
  std::size_t first_difference = SIZE_MAX;
  for (int rank = 1; rank < bootstrap.size(); ++rank) {
    const auto list = digests_of(rank);
    const std::size_t common = std::min(list.size(), reference.size());
    std::size_t i = 0;
    while (i < common && list[i] == reference[i]) ++i;
    if (i < common || list.size() != reference.size())
      first_difference = std::min(first_difference, i);
  }
  if (first_difference == SIZE_MAX) return std::nullopt;

  // Second round (only on a mismatch, which every rank now knows about):
  // gather the readable description of the first differing declaration.
  const std::string mine = first_difference < declarations.size()
                               ? describe_invariant_fields(declarations[first_difference])
                               : std::string("(none: this rank declares only ") +
                                     std::to_string(declarations.size()) + " plans)";
  auto descriptions = bootstrap.allgather(as_bytes(mine));

  std::vector<int> differing;
  for (int rank = 1; rank < bootstrap.size(); ++rank) {
    const auto list = digests_of(rank);
    const bool same = list.size() > first_difference && reference.size() > first_difference &&
                      list[first_difference] == reference[first_difference];
    if (!same) differing.push_back(rank);
  }
  std::ostringstream message;
  message << "declare: ranks declared different plan sets; first difference at declarations["
          << first_difference << "]: rank 0 has " << to_text(descriptions[0]);
  for (int rank : differing) message << "; rank " << rank << " has " << to_text(descriptions[rank]);
  message << " (ranks differing from rank 0: " << format_ranks(differing)
          << "). Every rank must declare the same plans in the same order; only weight "
             "addresses may differ.";
  return message.str();
}

}  // namespace peerplan::communicator
