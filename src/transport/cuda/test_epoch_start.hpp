// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_TEST_EPOCH_START (tests only): the count of calls the staging
// slabs' epochs start from, instead of 0, so that a GPU test runs every
// protocol across the epochs' 2^32 wrap in a few calls
// (mpi_tests/cuda_epoch_wrap_test.cpp). Read each time reserve() creates
// the slabs; every rank must set the same value.
#pragma once

#include <cstdint>
#include <optional>

namespace peerplan::transport::cuda {

// The value of `text` (the variable's, null when unset): nullopt when unset
// or empty; throws InvalidArgument when it is not a decimal number below 2^32.
std::optional<std::uint32_t> parse_test_epoch_start(const char* text);

// The variable as the process has it now.
std::optional<std::uint32_t> test_epoch_start();

}  // namespace peerplan::transport::cuda
