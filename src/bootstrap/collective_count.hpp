// SPDX-License-Identifier: Apache-2.0
// How many collective round trips this process has made through the
// bootstrap layer: every bounded allgather or broadcast (world or node-local
// lane, barriers and agreements included) and every bounded duplication of
// a communicator. Tests read the difference around Communicator::create so
// that the number of exchanges at create cannot grow unnoticed.
#pragma once

#include <cstdint>

namespace peerplan::bootstrap {

// Process-wide, every thread together; never reset.
std::uint64_t collectives_made() noexcept;

namespace detail {
// Called once per round trip by timed_exchange.cpp and bounded_dup.cpp.
void count_collective() noexcept;
}  // namespace detail

}  // namespace peerplan::bootstrap
