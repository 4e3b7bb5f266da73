// SPDX-License-Identifier: Apache-2.0
// What NVML says of each visible GPU's links (query_nvml_links), on a GPU
// host: the PCIe link's capacity is known and at least the speed the link
// runs at now, as the live hwloc topology reads it. Skips without a GPU or
// without NVML.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "topology/topology.hpp"
#include "transport/cuda/gpu_identity.hpp"

namespace peerplan::transport::cuda {
namespace {

TEST(NvmlLinks, EachGpusPcieCapacityIsKnownAndNoLessThanItsCurrentSpeed) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no GPU visible";
  }
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) GTEST_SKIP() << "no libnvidia-ml.so.1";
  dlclose(nvml);
  const auto live = topology::Topology::load_live();
  for (int device = 0; device < devices; ++device) {
    char bus_id[64] = {};
    ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device), cudaSuccess);
    const NvmlLinks links = query_nvml_links(bus_id);
    EXPECT_GT(links.pcie_max_mb_per_s, 0u) << bus_id;
    const auto located = live.find_gpu(bus_id);
    if (located && located->pcie_mb_per_s > 0) {
      EXPECT_GE(links.pcie_max_mb_per_s, located->pcie_mb_per_s) << bus_id;
    }
    std::printf("GPU %d (%s): PCIe capacity %u MB/s (NVML), now %u MB/s (hwloc)\n", device, bus_id,
                links.pcie_max_mb_per_s, located ? located->pcie_mb_per_s : 0u);
  }
}

}  // namespace
}  // namespace peerplan::transport::cuda
