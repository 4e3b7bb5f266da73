// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/device_error_text.hpp"

#include <cstdint>

#include "give_up_mark.cuh"

namespace peerplan::transport::cuda {
namespace {

using cuda_kernels::ErrorCode;
using cuda_kernels::Phase;

const char* phase_text(std::uint32_t phase) {
  switch (static_cast<Phase>(phase)) {
    case Phase::arrive:
      return "stage their input (flag barrier 'arrive')";
    case Phase::reduced:
      return "reduce their shard (two-shot barrier 'reduced')";
    case Phase::done:
      return "finish reading this rank's registered input (pull barrier 'done')";
    case Phase::none:
      break;
  }
  return "?";
}

std::string call_text(std::uint32_t call) { return "P2P call #" + std::to_string(call); }

// A kernel found at its start (call `call`) that a peer had given up on that
// call or an earlier one. An earlier one is a call this rank's kernel had
// begun and then completed after the peer's give-up: it returned, but the
// peers failed it, and on the pull routes and the copy-engine two-shot its
// reads may have met data of another call.
std::string late_text(std::uint32_t call, std::uint32_t mark, const char* what,
                      const std::string& peer) {
  const std::string found =
      std::string(" (detected at ") + what + ", the start of " + call_text(call) + ") ";
  const std::uint32_t given_up = cuda_kernels::call_given_up(call, mark);
  if (mark == 0 || given_up == call || cuda_kernels::ambiguous_wrap_mark(call, mark)) {
    std::string text = call_text(call) + " (detected at " + what +
                       ") failed: this rank reached it late, after rank " + peer +
                       " had given up on it at its own timeout";
    if (cuda_kernels::ambiguous_wrap_mark(call, mark)) {
      text +=
          " (or on the call before it, #4294967295, which this rank completed: the rank's "
          "word names either, so treat the outputs of both calls as unspecified)";
    }
    return text;
  }
  return call_text(given_up) + found + "failed: rank " + peer +
         " gave up on it at its own timeout while this rank was still in it. This rank's call "
         "returned, but the call failed: its outputs are unspecified, as for any failed call";
}

}  // namespace

std::string describe_device_error(const cuda_kernels::DeviceError& word, const char* what,
                                  const std::vector<int>& global_ranks,
                                  std::chrono::milliseconds timeout) {
  // kLatePeer + q: the kernel found at its start that rank q had given up.
  const bool late = word.peer >= cuda_kernels::kLatePeer;
  const std::uint32_t peer = late ? word.peer - cuda_kernels::kLatePeer : word.peer;
  const std::string peer_name =
      peer < global_ranks.size() ? std::to_string(global_ranks[peer]) : "?";
  const std::string head = call_text(word.epoch) + " (detected at " + what + ") ";
  switch (static_cast<ErrorCode>(word.code)) {
    case ErrorCode::unregistered_buffer:
      return head + "failed: rank " + peer_name +
             " named a registered buffer that this rank has no mapping of";
    case ErrorCode::node_shard_missing:
      return head +
             "failed: on another node, the rank with this rank's local rank did not complete "
             "its node's part of the call (a rank of that node gave up on it, or was late), "
             "so the sum between nodes that this rank received is not this call's; the "
             "ranks of that node raise Timeout naming the rank they waited for";
    case ErrorCode::timeout:
      return head + "timed out after " + std::to_string(timeout.count()) + " ms waiting for rank " +
             peer_name + " to " + phase_text(word.phase);
    case ErrorCode::peer_gave_up:
    case ErrorCode::none:
      break;
  }
  if (late) return late_text(word.epoch, word.peer_mark, what, peer_name);
  return head + "failed: rank " + peer_name +
         " gave up on it after its own timeout while this rank waited for it to " +
         phase_text(word.phase);
}

}  // namespace peerplan::transport::cuda
