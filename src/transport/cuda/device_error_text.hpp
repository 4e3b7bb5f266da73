// SPDX-License-Identifier: Apache-2.0
// What a kernel's error word (cuda_kernels::DeviceError) says happened, in
// the words the next call's Timeout or InvalidUsage gives (the backend's
// prefix and advice are the caller's). Pure, so that CI checks every case
// without a GPU.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "collective_kernels.hpp"

namespace peerplan::transport::cuda {

// `what`: the call that found the word; `global_ranks`: each local rank's
// global rank; `timeout`: the kernels' wait limit.
std::string describe_device_error(const cuda_kernels::DeviceError& word, const char* what,
                                  const std::vector<int>& global_ranks,
                                  std::chrono::milliseconds timeout);

}  // namespace peerplan::transport::cuda
