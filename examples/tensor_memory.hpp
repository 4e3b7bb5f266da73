// SPDX-License-Identifier: Apache-2.0
// Where the example's tensors live: host memory on the host backend, GPU
// memory on the cuda backend (peerplan works on the pointers it is given,
// like NCCL). Values travel as host vectors of float; the example uses f32.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "peerplan/config.hpp"

#if PEERPLAN_EXAMPLE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

class TensorMemory {
 public:
  TensorMemory(peerplan::Backend backend, std::size_t elements)
      : on_gpu_(backend == peerplan::Backend::cuda), elements_(elements) {
    if (!on_gpu_) {
      host_.resize(elements);
      return;
    }
#if PEERPLAN_EXAMPLE_WITH_CUDA
    check(cudaMalloc(&device_, elements * sizeof(float)), "cudaMalloc");
#else
    throw std::runtime_error(
        "the cuda backend was selected but this example was built without CUDA");
#endif
  }
  ~TensorMemory() {
#if PEERPLAN_EXAMPLE_WITH_CUDA
    if (device_ != nullptr) cudaFree(device_);
#endif
  }
  TensorMemory(const TensorMemory&) = delete;
  TensorMemory& operator=(const TensorMemory&) = delete;

  float* data() { return on_gpu_ ? static_cast<float*>(device_) : host_.data(); }

  void upload(const std::vector<float>& values) {
    if (!on_gpu_) {
      host_ = values;
      return;
    }
#if PEERPLAN_EXAMPLE_WITH_CUDA
    check(cudaMemcpy(device_, values.data(), elements_ * sizeof(float), cudaMemcpyHostToDevice),
          "cudaMemcpy to the GPU");
#endif
  }

  std::vector<float> download() {
    if (!on_gpu_) return host_;
    std::vector<float> values(elements_);
#if PEERPLAN_EXAMPLE_WITH_CUDA
    check(cudaMemcpy(values.data(), device_, elements_ * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy from the GPU");
#endif
    return values;
  }

  // Waits for the GPU work queued so far (a no-op on the host backend), so
  // that a host timer around a call measures the call.
  void synchronize() {
#if PEERPLAN_EXAMPLE_WITH_CUDA
    if (on_gpu_) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
  }

 private:
#if PEERPLAN_EXAMPLE_WITH_CUDA
  static void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) {
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
    }
  }
#endif

  bool on_gpu_;
  std::size_t elements_;
  std::vector<float> host_;
  void* device_ = nullptr;
};
