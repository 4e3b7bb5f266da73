// SPDX-License-Identifier: Apache-2.0
// Checks of Config values that no single layer owns. Values from the
// environment are range-checked while parsed (environment.cpp); these
// catch the same mistakes made in code, before anything is set up.
#pragma once

#include "peerplan/config.hpp"

namespace peerplan::core {

// Throws InvalidArgument naming every out-of-range field, its value, what
// it accepts and the variable that sets it. Not collective: the
// communicator runs it on every rank together (communicator/card_decisions.hpp).
void validate_config(const Config& config);

}  // namespace peerplan::core
