// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/bounded_wait.hpp"

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace peerplan::transport::cuda {
namespace {

// One piece of work on a detached helper thread. Shared between the thread
// and its waiters, so that a waiter that gives up leaves it to the thread.
class Job {
 public:
  static std::shared_ptr<Job> start(std::function<void()> work) {
    auto job = std::make_shared<Job>();
    job->work_ = std::move(work);
    try {
      std::thread([job] { job->run(); }).detach();
    } catch (const std::system_error&) {
      return nullptr;
    }
    return job;
  }

  bool wait_until(TeardownClock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_cv_.wait_until(lock, deadline, [this] { return done_; });
  }

  bool done() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }

 private:
  void run() {
    work_();
    work_ = nullptr;  // what it captured goes now, not with the last waiter
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
  }

  std::function<void()> work_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

}  // namespace

bool run_until(std::function<void()> work, TeardownClock::time_point deadline) {
  const auto job = Job::start(std::move(work));
  return job != nullptr && job->wait_until(deadline);
}

bool device_idle_by(int device, TeardownClock::time_point deadline) {
  // Never destroyed: a detached drain may outlive every other object.
  static auto* mutex = new std::mutex;
  static auto* draining = new std::map<int, std::shared_ptr<Job>>;
  while (true) {
    std::shared_ptr<Job> job;
    bool fresh = false;
    {
      std::lock_guard<std::mutex> lock(*mutex);
      auto& slot = (*draining)[device];
      if (slot == nullptr || slot->done()) {
        slot = Job::start([device] {
          if (cudaSetDevice(device) == cudaSuccess) cudaDeviceSynchronize();
          cudaGetLastError();
        });
        fresh = true;
      }
      job = slot;
    }
    if (job == nullptr) return false;  // no helper thread: cannot wait boundedly
    if (!job->wait_until(deadline)) return false;
    // A drain that began before this call covers only part of what this
    // call must wait for: start a fresh one with the time left.
    if (fresh) return true;
  }
}

int device_of(const void* pointer) noexcept {
  if (pointer != nullptr) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, pointer) == cudaSuccess && attributes.device >= 0) {
      return attributes.device;
    }
    cudaGetLastError();
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    device = 0;
  }
  return device;
}

std::string milliseconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

}  // namespace peerplan::transport::cuda
