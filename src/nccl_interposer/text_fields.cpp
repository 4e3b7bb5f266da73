// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/text_fields.hpp"

namespace peerplan::nccl_interposer {

std::string_view trim(std::string_view text) noexcept {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(separator, start);
    pieces.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return pieces;
    start = end + 1;
  }
}

std::string quoted(std::string_view text) {
  // Built by appending: GCC 12 warns, wrongly, about "'" + std::string(...) at -O3.
  std::string out = "'";
  out.append(text);
  out += '\'';
  return out;
}

}  // namespace peerplan::nccl_interposer
