// SPDX-License-Identifier: Apache-2.0
// The declarations the interposer makes of the declared sizes, and the
// sizes it leaves to NCCL because peerplan cannot declare them.
#include <cstdint>
#include <span>
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/errors.hpp"
#include "plan/validation.hpp"

namespace peerplan::nccl_interposer {
namespace {

// More lines than this in one message are counted, not listed: a range with
// an adding step may name up to 1024 sizes.
constexpr std::size_t kListedSizes = 32;

// peerplan's message without the position and name validate_declarations
// puts first, which would speak of a declared set the user never wrote.
std::string without_position(std::string message, const std::string& name) {
  const std::string prefix = "declarations[0] (\"" + name + "\"): ";
  if (message.starts_with(prefix)) message.erase(0, prefix.size());
  return message;
}

}  // namespace

std::string plan_name(const DeclaredBuffer& buffer) {
  return std::string("nccl_") + to_string(buffer.dtype) + "_" + std::to_string(buffer.count);
}

Declaration declaration_for(const DeclaredBuffer& buffer) {
  return Declaration::all_reduce(plan_name(buffer), buffer.dtype,
                                 TensorLayout{static_cast<std::int64_t>(buffer.count)});
}

DeclarationSet make_declarations(std::span<const DeclaredBuffer> buffers) {
  DeclarationSet set;
  set.declared.reserve(buffers.size());
  set.declarations.reserve(buffers.size());
  for (const DeclaredBuffer& buffer : buffers) {
    Declaration declaration = declaration_for(buffer);
    // peerplan's own rules, as declare() applies them, one declaration at a
    // time: no copy of the 16-byte rule (or any other) to drift from them.
    try {
      plan::validate_declarations(std::span<const Declaration>(&declaration, 1));
    } catch (const InvalidArgument& error) {
      set.not_declarable.push_back({buffer, without_position(error.what(), declaration.name)});
      continue;
    }
    set.declared.push_back(buffer);
    set.declarations.push_back(std::move(declaration));
  }
  return set;
}

std::string not_declarable_message(std::span<const NotDeclarable> left_out, bool named) {
  std::string lines;
  std::size_t sizes = 0;
  for (const NotDeclarable& size : left_out) {
    if (size.buffer.named != named) continue;
    if (++sizes > kListedSizes) continue;
    lines += "\n  " + plan_name(size.buffer) + " (" +
             std::to_string(size.buffer.count * element_size(size.buffer.dtype)) +
             " bytes): " + size.reason;
  }
  if (sizes == 0) return {};
  if (sizes > kListedSizes) {
    lines += "\n  and " + std::to_string(sizes - kListedSizes) + " more";
  }
  const bool one = sizes == 1;
  return "NCCL interposer: " + std::to_string(sizes) +
         (one ? " declared size is" : " declared sizes are") + " left to NCCL, " +
         (one ? "its" : "their") + " calls counted as not_declarable, since peerplan's declare " +
         "refuses " + (one ? "it" : "them") + " (and would refuse the whole set with " +
         (one ? "it" : "them") + "):" + lines;
}

}  // namespace peerplan::nccl_interposer
