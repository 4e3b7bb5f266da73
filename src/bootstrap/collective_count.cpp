// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/collective_count.hpp"

#include <atomic>

namespace peerplan::bootstrap {
namespace {

std::atomic<std::uint64_t> collectives{0};

}  // namespace

std::uint64_t collectives_made() noexcept { return collectives.load(std::memory_order_relaxed); }

namespace detail {
void count_collective() noexcept { collectives.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace peerplan::bootstrap
