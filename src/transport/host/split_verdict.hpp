// SPDX-License-Identifier: Apache-2.0
// The message of a verdict whose word did not reach every rank the same way:
// this rank stalled between two of its messages and passed its deadline, so
// some ranks got "ok" and others its late word (TimedExchange::allgather_by).
// No rank can undo what it got: the message says which rank got what.
#pragma once

#include <chrono>
#include <string>

#include "bootstrap/timed_exchange.hpp"

namespace peerplan::transport::host {

// "this rank was stalled ...: rank 0 got its 'ok' in time: ...; ranks 2, 3
// got '<late_word>': the call fails there; this rank fails it". `said` has
// some rank in `late` or `unsure`. mpi_tests/fault reads the rank lists.
std::string describe_split_verdict(const bootstrap::detail::TimedExchange::Said& said,
                                   std::chrono::milliseconds timeout, const char* late_word);

}  // namespace peerplan::transport::host
