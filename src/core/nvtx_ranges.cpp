// SPDX-License-Identifier: Apache-2.0
#include "core/nvtx_ranges.hpp"

#if PEERPLAN_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace peerplan::core::nvtx {

#if PEERPLAN_HAVE_NVTX

namespace {

nvtxDomainHandle_t native(Domain domain) noexcept {
  return static_cast<nvtxDomainHandle_t>(const_cast<void*>(domain.handle));
}

nvtxEventAttributes_t attributes(Colour colour, std::uint64_t payload) noexcept {
  nvtxEventAttributes_t event{};
  event.version = NVTX_VERSION;
  event.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  event.colorType = NVTX_COLOR_ARGB;
  event.color = static_cast<std::uint32_t>(colour);
  if (payload != 0) {
    event.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    event.payload.ullValue = payload;
  }
  return event;
}

}  // namespace

bool built() noexcept { return true; }

Domain domain(bool enabled) noexcept {
  if (!enabled) return {};
  // The first NVTX call of the process looks for a tool; without one,
  // nvtxDomainCreateA returns null and so does every later call here.
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("peerplan");
  return {handle};
}

Message register_message(Domain domain, const char* text) noexcept {
  if (!domain) return {};
  return {nvtxDomainRegisterStringA(native(domain), text)};
}

void push(Domain domain, Colour colour, const char* text, std::uint64_t payload) noexcept {
  if (!domain) return;
  nvtxEventAttributes_t event = attributes(colour, payload);
  if (text != nullptr) {
    event.messageType = NVTX_MESSAGE_TYPE_ASCII;
    event.message.ascii = text;
  }
  nvtxDomainRangePushEx(native(domain), &event);
}

void push(Domain domain, Colour colour, Message message, std::uint64_t payload) noexcept {
  if (!domain) return;
  nvtxEventAttributes_t event = attributes(colour, payload);
  if (message.handle != nullptr) {
    event.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    event.message.registered = static_cast<nvtxStringHandle_t>(const_cast<void*>(message.handle));
  }
  nvtxDomainRangePushEx(native(domain), &event);
}

void pop(Domain domain) noexcept {
  if (domain) nvtxDomainRangePop(native(domain));
}

#else  // no NVTX headers: ranges compiled out

bool built() noexcept { return false; }
Domain domain(bool) noexcept { return {}; }
Message register_message(Domain, const char*) noexcept { return {}; }
void push(Domain, Colour, const char*, std::uint64_t) noexcept {}
void push(Domain, Colour, Message, std::uint64_t) noexcept {}
void pop(Domain) noexcept {}

#endif

}  // namespace peerplan::core::nvtx
