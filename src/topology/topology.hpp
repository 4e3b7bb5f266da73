// SPDX-License-Identifier: Apache-2.0
// The machine as hwloc sees it, with I/O discovery on: CPUs, NUMA nodes,
// packages and the PCIe tree down to the GPUs. Loaded from the live machine
// or from an hwloc XML export (Config::topology_file / PEERPLAN_TOPO_FILE),
// which is how the layer is tested without the hardware.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/gpu_location.hpp"

struct hwloc_topology;  // hwloc's handle; hwloc headers stay inside topology.cpp

namespace peerplan::topology {

// A set of CPUs and where it lies.
struct CpuBinding {
  std::string cpus;             // OS indexes in list format: "0-3,8"
  std::vector<int> numa_nodes;  // OS indexes of the NUMA nodes local to those CPUs
  std::vector<int> packages;    // physical packages (sockets) those CPUs belong to
  int last_cpu = -1;            // CPU the calling thread last ran on; -1 if unknown
  bool live = false;            // false: from an XML file, not this process's binding
};

class Topology {
 public:
  // Discovers the machine this process runs on. Throws SystemError if hwloc
  // cannot.
  static Topology load_live();
  // Reads an hwloc XML export. Throws InvalidArgument naming the file when it
  // is missing or not an hwloc XML topology.
  static Topology load_xml(const std::string& path);
  // load_live() when topology_file is empty, else load_xml(topology_file).
  static Topology load(const std::string& topology_file);
  // Like load(), but loaded once per process and per source, then shared:
  // the live machine is discovered on the first call only (hwloc's
  // discovery costs milliseconds and leaves ~1 KiB behind in hwloc's
  // internals on every load, so a process creating many communicators must
  // not repeat it); an XML file is re-read only when its size or
  // modification time changed since it was cached. Errors are not cached
  // (a missing file fails on every call, as with load()). Thread-safe; the
  // result is immutable and every const member may be called from several
  // threads at once.
  static std::shared_ptr<const Topology> shared(const std::string& topology_file);

  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  ~Topology();

  bool is_live() const noexcept { return live_; }
  // "live machine" or the XML path, for messages.
  const std::string& source() const noexcept { return source_; }

  // The CPUs this process is bound to (hwloc_get_cpubind), their NUMA nodes
  // and packages, and the CPU it last ran on. An XML topology describes some
  // other machine, so there this is the whole machine with live == false.
  CpuBinding process_binding() const;
  // Where a given CPU list ("0-3,8") lies. Throws InvalidArgument if the list
  // cannot be parsed or names no CPU of this machine.
  CpuBinding locality_of(std::string_view cpu_list) const;

  // GPUs (NVIDIA, AMD or Intel display / 3D controllers; the BMC's VGA
  // device of servers is not one), in PCI bus id order like CUDA with
  // CUDA_DEVICE_ORDER=PCI_BUS_ID and nvidia-smi.
  const std::vector<GpuLocation>& gpus() const noexcept { return gpus_; }
  // The GPU at a PCI bus id in any of the spellings PciAddress::parse takes
  // ("0000:17:00.0", CUDA's "00000000:17:00.0", any case). nullopt if no GPU
  // is there; throws InvalidArgument if bus_id is not a PCI bus id.
  std::optional<GpuLocation> find_gpu(std::string_view bus_id) const;

  int pu_count() const;
  int numa_node_count() const;
  int package_count() const;

 private:
  struct HwlocDeleter {
    void operator()(hwloc_topology* topology) const noexcept;
  };
  using Handle = std::unique_ptr<hwloc_topology, HwlocDeleter>;

  Topology(Handle handle, bool live, std::string source);

  Handle handle_;
  bool live_ = false;
  std::string source_;
  std::vector<GpuLocation> gpus_;
};

}  // namespace peerplan::topology
