// SPDX-License-Identifier: Apache-2.0
#include "communicator/call_ranges.hpp"

#include <cstdio>
#include <string>

namespace peerplan::communicator {

core::nvtx::Message register_plan_message(core::nvtx::Domain domain, const Declaration& declared,
                                          const routing::RouteDecision& decision) {
  if (!domain) return {};
  std::string text = std::string(to_string(declared.operation)) + " '" + declared.name + "': ";
  if (decision.route == Route::fallback) {
    text += std::string("fallback (") + to_string(decision.reason) + ")";
  } else {
    text += std::string(to_string(decision.route)) + ' ' + to_string(decision.protocol);
  }
  text += ", " + std::to_string(decision.message_bytes) + " B";
  return core::nvtx::register_message(domain, text.c_str());
}

void CallRange::push(Operation op, const PreparedPlan* plan, DataType dtype,
                     const TensorLayout& layout) noexcept {
  using core::nvtx::Colour;
  if (plan != nullptr) {
    const Colour colour = plan->route == Route::fallback ? Colour::fallback : Colour::p2p;
    core::nvtx::push(domain_, colour, plan->nvtx_message, plan->message_bytes);
    return;
  }
  // Undeclared: "all_reduce undeclared: fallback, bf16 [8, 4096], 65536 B",
  // on the stack (a shape too long for the buffer is cut short).
  const auto elements = layout.numel();
  const std::uint64_t bytes =
      elements > 0 ? static_cast<std::uint64_t>(elements) * element_size(dtype) : 0;
  char text[192];
  int used = std::snprintf(text, sizeof text, "%s undeclared: fallback, %s [", to_string(op),
                           to_string(dtype));
  for (int i = 0; i < layout.rank() && used > 0 && used < static_cast<int>(sizeof text); ++i) {
    used += std::snprintf(text + used, sizeof text - used, i == 0 ? "%lld" : ", %lld",
                          static_cast<long long>(layout.dim(i)));
  }
  if (used > 0 && used < static_cast<int>(sizeof text)) {
    std::snprintf(text + used, sizeof text - used, "], %llu B",
                  static_cast<unsigned long long>(bytes));
  }
  core::nvtx::push(domain_, Colour::fallback, text, bytes);
}

}  // namespace peerplan::communicator
