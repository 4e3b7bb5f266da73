// SPDX-License-Identifier: Apache-2.0
// The config checks of Communicator::create that come before anything is
// set up: values in range on every rank, and the fields every rank must
// share (core/config_fields.hpp marks them) the same on every rank. The
// one place where cross-rank agreement of Config is checked; the
// transports trust it.
#pragma once

#include "bootstrap/bootstrap.hpp"
#include "peerplan/config.hpp"

namespace peerplan::communicator {

// Collective. First core::validate_config on every rank: when it fails on
// any rank, throws InvalidArgument on every rank naming the ranks and the
// fields. Then compares the agreed fields with rank 0's: throws Mismatch on
// every rank naming each differing field, its variable, and which ranks
// hold which value.
void check_config(bootstrap::Bootstrap& bootstrap, const Config& config);

}  // namespace peerplan::communicator
