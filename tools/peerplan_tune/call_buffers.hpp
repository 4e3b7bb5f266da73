// SPDX-License-Identifier: Apache-2.0
// Memory the measured calls read and write: host memory on the host
// backend, device memory of the rank's GPU on the cuda backend (the
// communicator has selected that GPU by then). Contents are zeros: values
// do not change the time of a reduction, and zeros keep the fused op's
// residual finite however often it runs.
#pragma once

#include <cstddef>
#include <memory>

#include "peerplan/config.hpp"

namespace peerplan::tune {

class CallBuffer {
 public:
  CallBuffer(Backend backend, std::size_t bytes);
  ~CallBuffer();
  CallBuffer(const CallBuffer&) = delete;
  CallBuffer& operator=(const CallBuffer&) = delete;

  void* data() const noexcept { return data_; }

 private:
  Backend backend_;
  void* data_ = nullptr;
};

}  // namespace peerplan::tune
