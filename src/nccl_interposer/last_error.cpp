// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/last_error.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "nccl_interposer/real_nccl.hpp"

namespace peerplan::nccl_interposer {
namespace {

struct LastError {
  std::mutex mutex;
  bool is_peerplan = false;
  char text[1024] = {};   // returned to callers: never freed or moved
  std::string nccl_then;  // NCCL's own last error when peerplan's was recorded
};

LastError& last_error() {
  static auto* state = new LastError;  // a watchdog may ask during exit
  return *state;
}

std::string nccl_text(ncclComm_t comm) {
  const auto get = real_nccl().get_last_error;
  const char* text = get != nullptr ? get(comm) : nullptr;
  return text != nullptr ? text : "";
}

}  // namespace

void record_peerplan_error(std::string_view text) noexcept {
  LastError& error = last_error();
  try {
    const std::string nccl_now = nccl_text(nullptr);
    const std::scoped_lock lock(error.mutex);
    const std::string full = "peerplan: " + std::string(text);
    const std::size_t length = std::min(full.size(), sizeof(error.text) - 1);
    std::memcpy(error.text, full.data(), length);
    error.text[length] = '\0';
    error.nccl_then = nccl_now;
    error.is_peerplan = true;
  } catch (...) {
    // Out of memory: NCCL's text stays the answer.
  }
}

ncclResult_t note_nccl_result(ncclResult_t result) noexcept {
  if (result != ncclSuccess && result != ncclInProgress) {
    LastError& error = last_error();
    const std::scoped_lock lock(error.mutex);
    error.is_peerplan = false;
  }
  return result;
}

const char* last_error_text(ncclComm_t comm) noexcept {
  const auto get = real_nccl().get_last_error;
  const char* nccl_now = get != nullptr ? get(comm) : nullptr;
  if (nccl_now == nullptr) nccl_now = "";
  LastError& error = last_error();
  const std::scoped_lock lock(error.mutex);
  // NCCL keeps one text for the process (its comm argument is ignored), so
  // a changed text is a newer failure.
  if (error.is_peerplan && error.nccl_then == nccl_now) return error.text;
  error.is_peerplan = false;
  return nccl_now;
}

}  // namespace peerplan::nccl_interposer
