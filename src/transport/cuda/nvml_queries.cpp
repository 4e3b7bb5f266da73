// SPDX-License-Identifier: Apache-2.0
// What NVML says of a GPU's links (NVLink ends, the PCIe link's capacity),
// NVML opened with dlopen. The few NVML declarations used are written out
// here: nvml.h is not part of every CUDA toolkit install, and these entry
// points and structs are stable C ABI (the _v2 suffixes are NVML's own
// versioning).
#include <dlfcn.h>

#include "topology/pcie_speed.hpp"
#include "transport/cuda/gpu_identity.hpp"

namespace peerplan::transport::cuda {
namespace {

using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS = 0
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;           // nvmlEnableState_t
constexpr unsigned kNvmlNvlinkDeviceSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH
// NVML_NVLINK_MAX_LINKS of current drivers (18 on Hopper and Blackwell);
// links past a device's count report an error and are skipped.
constexpr unsigned kMaxLinks = 18;

struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};

class Nvml {
 public:
  Nvml() {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return;
    load(init_, "nvmlInit_v2");
    load(shutdown_, "nvmlShutdown");
    load(by_bus_id_, "nvmlDeviceGetHandleByPciBusId_v2");
    load(link_state_, "nvmlDeviceGetNvLinkState");
    load(remote_pci_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    load(remote_type_, "nvmlDeviceGetNvLinkRemoteDeviceType");  // newer drivers only
    load(max_generation_, "nvmlDeviceGetMaxPcieLinkGeneration");
    load(max_width_, "nvmlDeviceGetMaxPcieLinkWidth");
    initialised_ =
        init_ && shutdown_ && by_bus_id_ && link_state_ && remote_pci_ && init_() == kNvmlSuccess;
  }
  ~Nvml() {
    if (initialised_) shutdown_();
    if (library_ != nullptr) dlclose(library_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  topology::NvlinkEnds ends_of(const std::string& pci_bus_id) const {
    topology::NvlinkEnds ends;
    NvmlDevice device = nullptr;
    if (!initialised_ || by_bus_id_(pci_bus_id.c_str(), &device) != kNvmlSuccess) return ends;
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      int active = 0;
      if (link_state_(device, link, &active) != kNvmlSuccess || active != kNvmlFeatureEnabled)
        continue;
      unsigned type = 0;
      if (remote_type_ && remote_type_(device, link, &type) == kNvmlSuccess &&
          type == kNvmlNvlinkDeviceSwitch) {
        ++ends.switch_links;
        continue;
      }
      NvmlPciInfo remote{};
      if (remote_pci_(device, link, &remote) != kNvmlSuccess) continue;
      if (const auto peer = topology::PciAddress::parse(remote.bus_id))
        ends.gpu_peers.push_back(*peer);
    }
    return ends;
  }

  // The most the GPU's PCIe link can carry (the generation and width the GPU
  // and the slot both support), not its current state: an idle GPU may run
  // its link slower. 0 when NVML cannot say.
  std::uint32_t pcie_max_mb_per_s(const std::string& pci_bus_id) const {
    NvmlDevice device = nullptr;
    unsigned generation = 0, width = 0;
    if (!initialised_ || !max_generation_ || !max_width_ ||
        by_bus_id_(pci_bus_id.c_str(), &device) != kNvmlSuccess ||
        max_generation_(device, &generation) != kNvmlSuccess ||
        max_width_(device, &width) != kNvmlSuccess)
      return 0;
    return topology::pcie_mb_per_s(generation, width);
  }

 private:
  template <class Function>
  void load(Function*& function, const char* name) {
    function = reinterpret_cast<Function*>(dlsym(library_, name));
  }

  void* library_ = nullptr;
  bool initialised_ = false;
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*by_bus_id_)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*link_state_)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*remote_pci_)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  NvmlReturn (*remote_type_)(NvmlDevice, unsigned, unsigned*) = nullptr;
  NvmlReturn (*max_generation_)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*max_width_)(NvmlDevice, unsigned*) = nullptr;
};

}  // namespace

NvmlLinks query_nvml_links(const std::string& pci_bus_id) noexcept {
  try {
    const Nvml nvml;
    return {nvml.ends_of(pci_bus_id), nvml.pcie_max_mb_per_s(pci_bus_id)};
  } catch (...) {
    return {};
  }
}

}  // namespace peerplan::transport::cuda
