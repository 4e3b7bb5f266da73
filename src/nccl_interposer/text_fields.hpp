// SPDX-License-Identifier: Apache-2.0
// Small text helpers of the interposer's parsers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace peerplan::nccl_interposer {

// Without leading and trailing spaces and tabs (and a '\r' of CRLF files).
std::string_view trim(std::string_view text) noexcept;

// The pieces between separators; "a,,b" gives an empty middle piece and ""
// gives one empty piece.
std::vector<std::string_view> split(std::string_view text, char separator);

// 'text', for messages.
std::string quoted(std::string_view text);

}  // namespace peerplan::nccl_interposer
