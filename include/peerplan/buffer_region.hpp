// SPDX-License-Identifier: Apache-2.0
// A region of device memory an application registers with a communicator
// for zero-copy peer reads (Communicator::register_buffers).
#pragma once

#include <cstddef>

namespace peerplan {

struct BufferRegion {
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace peerplan
