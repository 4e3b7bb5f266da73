// SPDX-License-Identifier: Apache-2.0
// Named byte-count fields of a struct (the route cutoffs, the protocol
// windows): one name per field for the tuning file, the logs and the
// create-time agreement, and what every one of those does with them.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "peerplan/config.hpp"

namespace peerplan::routing {

template <class Struct>
struct ByteField {
  const char* name;
  std::size_t Struct::*member;
};

// The field called `name`, or nullptr.
template <class Struct, std::size_t N>
const ByteField<Struct>* find_byte_field(const std::array<ByteField<Struct>, N>& fields,
                                         std::string_view name) noexcept {
  for (const ByteField<Struct>& field : fields)
    if (name == field.name) return &field;
  return nullptr;
}

// "name=value name=auto ...": every field in table order, kAutoCutoff as auto.
template <class Struct, std::size_t N>
std::string describe_byte_fields(const Struct& value,
                                 const std::array<ByteField<Struct>, N>& fields) {
  std::string text;
  for (const ByteField<Struct>& field : fields) {
    if (!text.empty()) text += ' ';
    const std::size_t bytes = value.*field.member;
    text += std::string(field.name) + '=' +
            (bytes == kAutoCutoff ? std::string("auto") : std::to_string(bytes));
  }
  return text;
}

}  // namespace peerplan::routing
