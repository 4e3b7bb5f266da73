// SPDX-License-Identifier: Apache-2.0
#include "topology/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <system_error>

#include "peerplan/errors.hpp"

// hwloc 2.0 named the flag WHOLE_SYSTEM; 2.1 renamed it.
#if HWLOC_API_VERSION < 0x00020100
#define HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED HWLOC_TOPOLOGY_FLAG_WHOLE_SYSTEM
#endif

namespace peerplan::topology {
namespace {

// hwloc declares its PCI attributes as a struct nested in the attribute union.
using PciAttributes = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* bitmap) const noexcept { hwloc_bitmap_free(bitmap); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

Bitmap make_bitmap() {
  Bitmap bitmap(hwloc_bitmap_alloc());
  if (!bitmap) throw std::bad_alloc();
  return bitmap;
}

std::string list_string(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) throw std::bad_alloc();
  std::string result(text);
  std::free(text);
  return result;
}

std::string errno_text(int error) { return std::generic_category().message(error); }

int package_id(hwloc_obj_t package) {
  return package->os_index != HWLOC_UNKNOWN_INDEX ? static_cast<int>(package->os_index)
                                                  : static_cast<int>(package->logical_index);
}

// NUMA nodes and packages whose CPUs intersect `cpus`. hwloc gives a NUMA
// node without CPUs (CXL or HBM memory) the cpuset of the object it hangs
// from, so such nodes are listed too; local_numa_node() sets them aside.
std::vector<int> numa_nodes_near(hwloc_topology_t topology, hwloc_const_cpuset_t cpus) {
  std::vector<int> nodes;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node))
    if (node->cpuset != nullptr && hwloc_bitmap_intersects(node->cpuset, cpus))
      nodes.push_back(static_cast<int>(node->os_index));
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

// Plain DRAM as hwloc marks it: no subtype, or "DRAM" where it also marks
// HBM, MCDRAM, NVM or CXL memory.
bool is_plain_memory(hwloc_obj_t node) noexcept {
  return node->subtype == nullptr || std::strcmp(node->subtype, "DRAM") == 0;
}

// The NUMA node local to an I/O device whose locality is `cpus`, or -1 when
// its CPUs span several. Nothing in hwloc 2.x (live or XML) marks a NUMA node
// as CPU-less: a CXL/HBM node only shares the cpuset of the object it hangs
// from. So a node attached higher up (its cpuset strictly contains another
// candidate's, e.g. machine-wide CXL) is farther and set aside, and nodes
// left with one and the same cpuset are one locality: the plain DRAM one,
// then the lowest OS index (Linux numbers CPU-less nodes last) stands for
// it. Every GPU of that locality gets the same node, so NODE/SYS holds.
int local_numa_node(hwloc_topology_t topology, hwloc_const_cpuset_t cpus) {
  std::vector<hwloc_obj_t> near;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node))
    if (node->cpuset != nullptr && hwloc_bitmap_intersects(node->cpuset, cpus))
      near.push_back(node);
  const auto farther = [&near](hwloc_obj_t node) {
    return std::any_of(near.begin(), near.end(), [node](hwloc_obj_t other) {
      return hwloc_bitmap_isincluded(other->cpuset, node->cpuset) &&
             !hwloc_bitmap_isequal(other->cpuset, node->cpuset);
    });
  };
  hwloc_obj_t best = nullptr;
  for (hwloc_obj_t node : near) {
    if (farther(node)) continue;
    if (best != nullptr && !hwloc_bitmap_isequal(best->cpuset, node->cpuset)) return -1;
    if (best == nullptr || (is_plain_memory(node) && !is_plain_memory(best)) ||
        (is_plain_memory(node) == is_plain_memory(best) && node->os_index < best->os_index))
      best = node;
  }
  return best != nullptr ? static_cast<int>(best->os_index) : -1;
}

std::vector<int> packages_near(hwloc_topology_t topology, hwloc_const_cpuset_t cpus) {
  std::vector<int> packages;
  for (hwloc_obj_t package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, nullptr);
       package != nullptr;
       package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, package))
    if (hwloc_bitmap_intersects(package->cpuset, cpus)) packages.push_back(package_id(package));
  std::sort(packages.begin(), packages.end());
  return packages;
}

CpuBinding describe_cpus(hwloc_topology_t topology, hwloc_const_cpuset_t cpus, bool live) {
  CpuBinding binding;
  binding.cpus = list_string(cpus);
  binding.numa_nodes = numa_nodes_near(topology, cpus);
  binding.packages = packages_near(topology, cpus);
  binding.live = live;
  return binding;
}

// GPU vendors whose display/3D controllers are compute devices. Servers also
// carry a BMC VGA device (ASPEED, Matrox) that is class 0x03 too but not a GPU.
bool is_gpu(const PciAttributes& pci) noexcept {
  constexpr std::uint16_t nvidia = 0x10de, amd = 0x1002, intel = 0x8086;
  const bool display_class = (pci.class_id >> 8) == 0x03;
  const bool gpu_vendor = pci.vendor_id == nvidia || pci.vendor_id == amd || pci.vendor_id == intel;
  return display_class && gpu_vendor;
}

PciAddress address_of(const PciAttributes& pci) noexcept {
  return PciAddress{static_cast<std::uint32_t>(pci.domain), pci.bus, pci.dev, pci.func};
}

// Root ports hang off the host bridge; below them PCIe switches alternate an
// upstream port and its downstream ports. So a bridge's role follows from its
// level under the host bridge (1 = root port, even = upstream, odd = downstream),
// which is how the tree reads whatever the bridges' vendors.
PciPortRole role_at_level(std::size_t level) noexcept {
  if (level <= 1) return PciPortRole::root_port;
  return level % 2 == 0 ? PciPortRole::switch_upstream : PciPortRole::switch_downstream;
}

GpuLocation locate_gpu(hwloc_topology_t topology, hwloc_obj_t device) {
  const auto& pci = device->attr->pcidev;
  GpuLocation gpu;
  gpu.address = address_of(pci);
  gpu.vendor_id = pci.vendor_id;
  gpu.device_id = pci.device_id;
  gpu.class_id = pci.class_id;
  // hwloc gives GB/s as a float (0 where the OS does not say).
  if (pci.linkspeed > 0.0f)
    gpu.pcie_mb_per_s = static_cast<std::uint32_t>(std::lround(pci.linkspeed * 1000.0));

  for (hwloc_obj_t parent = device->parent; parent != nullptr && parent->type == HWLOC_OBJ_BRIDGE;
       parent = parent->parent) {
    const auto& bridge = parent->attr->bridge;
    if (bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      char name[48];
      std::snprintf(name, sizeof name, "%04x:[%02x-%02x]",
                    static_cast<unsigned>(bridge.downstream.pci.domain),
                    static_cast<unsigned>(bridge.downstream.pci.secondary_bus),
                    static_cast<unsigned>(bridge.downstream.pci.subordinate_bus));
      gpu.host_bridge = name;
      break;
    }
    const auto& upstream = bridge.upstream.pci;
    gpu.bridges.push_back(PciBridge{address_of(upstream), upstream.vendor_id, upstream.device_id,
                                    PciPortRole::root_port});
  }
  const std::size_t count = gpu.bridges.size();
  for (std::size_t k = 0; k < count; ++k) gpu.bridges[k].role = role_at_level(count - k);

  // I/O objects hang below the CPU-side object they are local to.
  const hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topology, device);
  if (local != nullptr && local->cpuset != nullptr) {
    gpu.local_cpus = list_string(local->cpuset);
    gpu.numa_node = local_numa_node(topology, local->cpuset);
    const auto packages = packages_near(topology, local->cpuset);
    if (packages.size() == 1) gpu.package = packages.front();
  }
  return gpu;
}

std::string topology_file_error(const std::string& path, const std::string& problem) {
  return "topology file '" + path + "' " + problem +
         ". It must be an hwloc XML export of the machine to describe, written there with "
         "`lstopo file.xml` (or `lstopo-no-graphics --of xml file.xml`); it is read because "
         "Config::topology_file or PEERPLAN_TOPO_FILE names it (leave both unset to use this "
         "machine)";
}

// The version an hwloc XML file declares (<topology version="3.0">), or ""
// when its start does not hold one.
std::string xml_format_version(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  const auto tag = head.find("<topology");
  if (tag == std::string::npos) return {};
  const auto end = head.find('>', tag);
  const std::string key = "version=\"";
  const auto start = head.find(key, tag);
  if (start == std::string::npos || start > end) return {};
  const auto close = head.find('"', start + key.size());
  if (close == std::string::npos || close > end) return {};
  return head.substr(start + key.size(), close - start - key.size());
}

// Why a file hwloc would not load failed, when its format version is newer
// than this hwloc reads (hwloc 3.x writes version 3.0 by default); "" else.
std::string newer_format_problem(const std::string& path) {
  const std::string version = xml_format_version(path);
  const unsigned ours = hwloc_get_api_version() >> 16;
  if (version.empty() || std::atoi(version.c_str()) <= static_cast<int>(ours)) return {};
  return "topology file '" + path + "' is an hwloc XML export in format version " + version +
         " (written by hwloc " + version.substr(0, version.find('.')) + ".x), which the hwloc " +
         std::to_string(ours) +
         ".x peerplan uses cannot read. Export it again on that machine in the version 2 "
         "format with `lstopo --export-xml-flags v2 file.xml`; it is read because "
         "Config::topology_file or PEERPLAN_TOPO_FILE names it (leave both unset to use this "
         "machine)";
}

// A fresh handle with I/O discovery on: without it hwloc reports no PCI
// devices at all. KEEP_IMPORTANT keeps GPUs, NICs, storage and the bridges
// leading to them, and drops empty bridges and uninteresting devices.
hwloc_topology_t new_io_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0)
    throw SystemError("hwloc_topology_init failed: " + errno_text(errno));
  // Keep the CPUs and NUMA nodes this process may not use: a rank confined
  // by its cgroup (Slurm ConstrainCores) to one socket would otherwise lose
  // the other socket, and the GPUs there their NUMA node and package. The
  // same holds for an XML written by such a process (allowed_cpuset).
  if (hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0) {
    const int error = errno;
    hwloc_topology_destroy(raw);
    throw SystemError("hwloc could not be told to keep disallowed CPUs: " + errno_text(error));
  }
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    const int error = errno;
    hwloc_topology_destroy(raw);
    throw SystemError("hwloc could not enable I/O discovery: " + errno_text(error));
  }
  return raw;
}

}  // namespace

void Topology::HwlocDeleter::operator()(hwloc_topology* topology) const noexcept {
  hwloc_topology_destroy(topology);
}

Topology::Topology(Handle handle, bool live, std::string source)
    : handle_(std::move(handle)), live_(live), source_(std::move(source)) {
  hwloc_topology_t topology = handle_.get();
  for (hwloc_obj_t device = hwloc_get_next_pcidev(topology, nullptr); device != nullptr;
       device = hwloc_get_next_pcidev(topology, device))
    if (is_gpu(device->attr->pcidev)) gpus_.push_back(locate_gpu(topology, device));
  std::sort(gpus_.begin(), gpus_.end(),
            [](const GpuLocation& a, const GpuLocation& b) { return a.address < b.address; });
}

Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

Topology Topology::load_live() {
  Handle handle(new_io_topology());
  if (hwloc_topology_load(handle.get()) != 0)
    throw SystemError("hwloc could not discover this machine's topology: " + errno_text(errno) +
                      ". Set PEERPLAN_TOPO_FILE to an hwloc XML export (`lstopo file.xml`) "
                      "to describe it instead");
  return Topology(std::move(handle), true, "live machine");
}

Topology Topology::load_xml(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    throw InvalidArgument(topology_file_error(path, "does not exist"));
  if (!std::filesystem::is_regular_file(status))
    throw InvalidArgument(topology_file_error(path, "is not a regular file"));

  Handle handle(new_io_topology());
  if (hwloc_topology_set_xml(handle.get(), path.c_str()) != 0)
    throw InvalidArgument(topology_file_error(path, "cannot be read (" + errno_text(errno) + ")"));
  if (hwloc_topology_load(handle.get()) != 0) {
    if (auto problem = newer_format_problem(path); !problem.empty())
      throw InvalidArgument(std::move(problem));
    throw InvalidArgument(topology_file_error(path, "could not be parsed as an hwloc topology"));
  }
  return Topology(std::move(handle), false, path);
}

Topology Topology::load(const std::string& topology_file) {
  return topology_file.empty() ? load_live() : load_xml(topology_file);
}

namespace {

// What identifies the content of a topology file without reading it.
struct FileStamp {
  std::uintmax_t size = 0;
  std::filesystem::file_time_type modified{};
  bool operator==(const FileStamp&) const = default;
};

std::optional<FileStamp> stamp_of(const std::string& path) {
  std::error_code error;
  FileStamp stamp;
  stamp.size = std::filesystem::file_size(path, error);
  if (error) return std::nullopt;
  stamp.modified = std::filesystem::last_write_time(path, error);
  if (error) return std::nullopt;
  return stamp;
}

struct CachedTopology {
  FileStamp stamp;  // unused for the live machine
  std::shared_ptr<const Topology> topology;
};

// Never destroyed: a communicator created (or destroyed) from another
// static's destructor must still find it. Reachable from here, so leak
// checkers do not count it.
struct TopologyCache {
  std::mutex mutex;
  std::shared_ptr<const Topology> live;
  std::map<std::string, CachedTopology> files;
};

TopologyCache& topology_cache() {
  static auto* cache = new TopologyCache;
  return *cache;
}

}  // namespace

std::shared_ptr<const Topology> Topology::shared(const std::string& topology_file) {
  TopologyCache& cache = topology_cache();
  // Loads happen under the lock: concurrent first calls load once, and a
  // load is rare (once per process and source).
  const std::lock_guard lock(cache.mutex);
  if (topology_file.empty()) {
    if (!cache.live) cache.live = std::make_shared<const Topology>(load_live());
    return cache.live;
  }
  const auto stamp = stamp_of(topology_file);
  if (!stamp) {
    cache.files.erase(topology_file);
    return std::make_shared<const Topology>(load_xml(topology_file));  // throws the helpful error
  }
  if (const auto it = cache.files.find(topology_file);
      it != cache.files.end() && it->second.stamp == *stamp)
    return it->second.topology;
  auto topology = std::make_shared<const Topology>(load_xml(topology_file));
  cache.files[topology_file] = CachedTopology{*stamp, topology};
  return topology;
}

CpuBinding Topology::process_binding() const {
  hwloc_topology_t topology = handle_.get();
  if (!live_) return describe_cpus(topology, hwloc_topology_get_topology_cpuset(topology), false);

  Bitmap bound = make_bitmap();
  if (hwloc_get_cpubind(topology, bound.get(), HWLOC_CPUBIND_PROCESS) != 0 ||
      hwloc_bitmap_iszero(bound.get()))
    hwloc_bitmap_copy(bound.get(), hwloc_topology_get_allowed_cpuset(topology));
  CpuBinding binding = describe_cpus(topology, bound.get(), true);

  Bitmap last = make_bitmap();
  if (hwloc_get_last_cpu_location(topology, last.get(), HWLOC_CPUBIND_THREAD) == 0)
    binding.last_cpu = hwloc_bitmap_first(last.get());
  return binding;
}

CpuBinding Topology::locality_of(std::string_view cpu_list) const {
  hwloc_topology_t topology = handle_.get();
  const std::string text(cpu_list);
  const std::string machine = list_string(hwloc_topology_get_complete_cpuset(topology));
  Bitmap cpus = make_bitmap();
  if (text.find_first_not_of("0123456789,-") != std::string::npos ||
      hwloc_bitmap_list_sscanf(cpus.get(), text.c_str()) != 0 || hwloc_bitmap_iszero(cpus.get()))
    throw InvalidArgument("CPU list '" + text + "' is not a list of CPU numbers like \"0-3,8\"");
  if (!hwloc_bitmap_isincluded(cpus.get(), hwloc_topology_get_complete_cpuset(topology)))
    throw InvalidArgument("CPU list '" + text + "' names CPUs that " + source_ +
                          " does not have (its CPUs are " + machine + ")");
  return describe_cpus(topology, cpus.get(), live_);
}

std::optional<GpuLocation> Topology::find_gpu(std::string_view bus_id) const {
  const auto address = PciAddress::parse(bus_id);
  if (!address)
    throw InvalidArgument("'" + std::string(bus_id) +
                          "' is not a PCI bus id; expected domain:bus:device.function such as "
                          "0000:17:00.0 (as cudaDeviceGetPCIBusId or nvidia-smi print it)");
  for (const auto& gpu : gpus_)
    if (gpu.address == *address) return gpu;
  return std::nullopt;
}

int Topology::pu_count() const { return hwloc_get_nbobjs_by_type(handle_.get(), HWLOC_OBJ_PU); }
int Topology::numa_node_count() const {
  return hwloc_get_nbobjs_by_type(handle_.get(), HWLOC_OBJ_NUMANODE);
}
int Topology::package_count() const {
  return hwloc_get_nbobjs_by_type(handle_.get(), HWLOC_OBJ_PACKAGE);
}

}  // namespace peerplan::topology
