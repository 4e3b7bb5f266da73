// SPDX-License-Identifier: Apache-2.0
// Helpers of the interposer's tests: the message of the InvalidArgument a
// call throws, whether a message says everything it should, and printing
// of declared buffers in failures.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {

inline void PrintTo(const DeclaredBuffer& buffer, std::ostream* out) {
  *out << "{" << to_string(buffer.dtype) << ", " << buffer.count << "}";
}

namespace test {

using Buffers = std::vector<DeclaredBuffer>;
using Sizes = std::vector<std::size_t>;

template <class Call>
std::string invalid_argument_message(Call&& call) {
  try {
    call();
  } catch (const InvalidArgument& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "threw something other than InvalidArgument: " << error.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// Whether `text` holds every one of `parts`.
inline ::testing::AssertionResult says(const std::string& text,
                                       std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) {
    if (text.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << text << "' does not say '" << part << "'";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace test
}  // namespace peerplan::nccl_interposer
