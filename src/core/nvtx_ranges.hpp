// SPDX-License-Identifier: Apache-2.0
// NVTX ranges in a "peerplan" domain, so that a profiler (Nsight Systems)
// shows each lifecycle step and each call with its plan, route and size
// (docs/profiling.md). NVTX v3 is header-only and calls nothing unless a
// tool injected itself (NVTX_INJECTION64_PATH, which nsys sets); this header
// keeps NVTX's own headers and types out of the files that mark ranges.
#pragma once

#include <cstdint>

namespace peerplan::core::nvtx {

// Whether this build has NVTX (the CUDA toolkit's nvtx3 headers were found
// at configure time); without it every function here does nothing.
bool built() noexcept;

// nvtxDomainHandle_t: null when ranges are off or no tool is attached.
struct Domain {
  const void* handle = nullptr;
  explicit operator bool() const noexcept { return handle != nullptr; }
};

// nvtxStringHandle_t: a message the tool keeps, so a range passes only
// its handle (no text is built or copied per call).
struct Message {
  const void* handle = nullptr;
};

// ARGB colours of the ranges.
enum class Colour : std::uint32_t {
  lifecycle = 0xFF5B8DEFu,  // create, declare, (de)register_buffers, close
  p2p = 0xFF76B900u,        // a call on a P2P route
  fallback = 0xFFE8710Au,   // a call on the fallback, declared or not
};

// The process's "peerplan" domain when `enabled`, this build has NVTX and a
// tool is attached; else null, and then every range on it costs one
// branch. Made once per process, on the first call with `enabled`: with
// ranges off peerplan never even creates its domain.
Domain domain(bool enabled) noexcept;

// `text` registered in `domain`; null when `domain` is null.
Message register_message(Domain domain, const char* text) noexcept;

// Push and pop on this thread. Each does nothing on a null domain. The
// payload, when not 0, travels as an unsigned 64-bit number (a byte or
// item count); a null message pushes a range without text.
void push(Domain domain, Colour colour, const char* text, std::uint64_t payload = 0) noexcept;
void push(Domain domain, Colour colour, Message message, std::uint64_t payload = 0) noexcept;
void pop(Domain domain) noexcept;

// A range from construction to destruction (push/pop: ranges of one
// thread nest).
class Range {
 public:
  Range(Domain domain, Colour colour, const char* text, std::uint64_t payload = 0) noexcept
      : domain_(domain) {
    if (domain_) push(domain_, colour, text, payload);
  }
  Range(Domain domain, Colour colour, Message message, std::uint64_t payload = 0) noexcept
      : domain_(domain) {
    if (domain_) push(domain_, colour, message, payload);
  }
  ~Range() {
    if (domain_) pop(domain_);
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  Domain domain_;
};

}  // namespace peerplan::core::nvtx
