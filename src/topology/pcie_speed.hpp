// SPDX-License-Identifier: Apache-2.0
// A PCIe link's bandwidth from its generation and width, per direction, in
// hwloc's terms (GB/s = lane rate x lanes x line-code efficiency / 8), as
// MB/s: NVML gives a link's generation and width, hwloc its speed.
#pragma once

#include <cstdint>

namespace peerplan::topology {

// MB/s per direction of a PCIe `generation` (1 to 6) link of `width` lanes
// (31508 for 4.0 x16); 0 for a generation or width it does not know.
std::uint32_t pcie_mb_per_s(unsigned generation, unsigned width) noexcept;

}  // namespace peerplan::topology
