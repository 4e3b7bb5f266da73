// SPDX-License-Identifier: Apache-2.0
// Times one kind of call on whichever backend the communicators run on:
// CUDA events (optionally CUDA-graph replays) on a stream of its own on the
// cuda backend, a steady clock on the host backend. Every rank gets the
// slowest rank's median (both helpers agree over MPI_COMM_WORLD).
#pragma once

#include <functional>

#include "peerplan/communicator.hpp"

namespace peerplan::tune {

struct TimingPlan {
  int iters = 20;      // calls per timed batch
  int warmup = 5;      // untimed calls first
  int batches = 5;     // the median batch counts
  bool graph = false;  // cuda backend: replay CUDA graphs of captured calls
};

class CallTimer {
 public:
  CallTimer(Backend backend, TimingPlan plan);
  ~CallTimer();
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

  // The stream calls must be issued on (nullptr on the host backend).
  StreamHandle stream() const noexcept { return stream_; }
  // Median time per call (µs). Collective. `capturable` false times the
  // calls eagerly even when the plan replays graphs: the MPI fallback (where
  // ranks share a GPU) runs on the host and refuses capture.
  double time(const std::function<void()>& call, bool capturable = true);
  // Waits until the calls issued so far have run (a no-op on the host).
  void synchronize();

 private:
  Backend backend_;
  TimingPlan plan_;
  StreamHandle stream_ = nullptr;
};

}  // namespace peerplan::tune
