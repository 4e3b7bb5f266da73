// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/test_epoch_start.hpp"

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include "peerplan/errors.hpp"

namespace peerplan::transport::cuda {

std::optional<std::uint32_t> parse_test_epoch_start(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string_view value(text);
  std::uint32_t start = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), start);
  if (error != std::errc() || end != value.data() + value.size()) {
    throw InvalidArgument("PEERPLAN_TEST_EPOCH_START='" + std::string(value) +
                          "' is not a decimal number from 0 to 4294967295. It is for tests "
                          "only (the epochs' starting count): unset it");
  }
  return start;
}

std::optional<std::uint32_t> test_epoch_start() {
  return parse_test_epoch_start(std::getenv("PEERPLAN_TEST_EPOCH_START"));
}

}  // namespace peerplan::transport::cuda
