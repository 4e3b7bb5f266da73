// SPDX-License-Identifier: Apache-2.0
#include "communicator/rank_card.hpp"

#include <array>
#include <string_view>

#include "peerplan/errors.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::communicator {
namespace {

constexpr std::array<char, 4> kMagic{'P', 'P', 'R', 'C'};

class Writer {
 public:
  void u8(std::uint8_t value) { bytes_.push_back(static_cast<std::byte>(value)); }
  void u32(std::uint32_t value) {
    for (int shift = 0; shift < 32; shift += 8) u8(static_cast<std::uint8_t>(value >> shift));
  }
  void i32(std::int32_t value) { u32(static_cast<std::uint32_t>(value)); }
  void text(std::string_view value) {
    u32(static_cast<std::uint32_t>(value.size()));
    for (char c : value) u8(static_cast<std::uint8_t>(c));
  }
  void optional_text(const std::optional<std::string>& value) {
    u8(value ? 1 : 0);
    if (value) text(*value);
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

// Reads fields in order; `field` names the one being read, for the error.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : rest_(bytes) {}

  std::uint8_t u8(const char* field) {
    need(1, field);
    const auto value = static_cast<std::uint8_t>(rest_[0]);
    rest_ = rest_.subspan(1);
    return value;
  }
  std::uint32_t u32(const char* field) {
    need(4, field);
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= static_cast<std::uint32_t>(rest_[i]) << (8 * i);
    rest_ = rest_.subspan(4);
    return value;
  }
  std::int32_t i32(const char* field) { return static_cast<std::int32_t>(u32(field)); }
  bool flag(const char* field) {
    const std::uint8_t value = u8(field);
    if (value > 1)
      fail(std::string("field '") + field + "' is " + std::to_string(value) + ", not 0 or 1");
    return value == 1;
  }
  std::string text(const char* field) {
    const std::uint32_t size = u32(field);
    need(size, field);
    std::string value(reinterpret_cast<const char*>(rest_.data()), size);
    rest_ = rest_.subspan(size);
    return value;
  }
  std::optional<std::string> optional_text(const char* field) {
    if (!flag(field)) return std::nullopt;
    return text(field);
  }
  // A count of items, each at least `min_item_bytes` long: a garbage count
  // is caught here rather than by reserving memory for it.
  std::uint32_t count(const char* field, std::size_t min_item_bytes) {
    const std::uint32_t n = u32(field);
    if (static_cast<std::uint64_t>(n) * min_item_bytes > rest_.size()) {
      fail(std::string("field '") + field + "' says " + std::to_string(n) +
           " items, more than the " + std::to_string(rest_.size()) + " bytes left can hold");
    }
    return n;
  }
  void finish() {
    if (!rest_.empty()) fail(std::to_string(rest_.size()) + " bytes follow the last field");
  }
  [[noreturn]] static void fail(const std::string& what) {
    throw Mismatch("not a rank card this build can read: " + what +
                   "; every rank must run the same peerplan build");
  }

 private:
  void need(std::size_t bytes, const char* field) {
    if (rest_.size() < bytes) {
      fail(std::string("truncated in field '") + field + "' (" + std::to_string(bytes) +
           " bytes needed, " + std::to_string(rest_.size()) + " left)");
    }
  }
  std::span<const std::byte> rest_;
};

void put_address(Writer& out, const topology::PciAddress& address) {
  out.text(address.to_string());
}

topology::PciAddress get_address(Reader& in, const char* field) {
  const std::string text = in.text(field);
  const auto address = topology::PciAddress::parse(text);
  if (!address)
    Reader::fail(std::string("field '") + field + "' is '" + text + "', not a PCI address");
  return *address;
}

void put_location(Writer& out, const std::optional<topology::GpuLocation>& location) {
  out.u8(location ? 1 : 0);
  if (!location) return;
  put_address(out, location->address);
  out.u32(location->vendor_id);
  out.u32(location->device_id);
  out.u32(location->class_id);
  out.u32(static_cast<std::uint32_t>(location->bridges.size()));
  for (const auto& bridge : location->bridges) {
    put_address(out, bridge.address);
    out.u32(bridge.vendor_id);
    out.u32(bridge.device_id);
    out.u8(static_cast<std::uint8_t>(bridge.role));
  }
  out.text(location->host_bridge);
  out.i32(location->numa_node);
  out.i32(location->package);
  out.text(location->local_cpus);
  out.u32(location->pcie_mb_per_s);
}

std::uint16_t get_u16(Reader& in, const char* field) {
  const std::uint32_t value = in.u32(field);
  if (value > 0xffff) Reader::fail(std::string("field '") + field + "' does not fit 16 bits");
  return static_cast<std::uint16_t>(value);
}

std::optional<topology::GpuLocation> get_location(Reader& in) {
  if (!in.flag("gpu_location")) return std::nullopt;
  topology::GpuLocation location;
  location.address = get_address(in, "gpu_location.address");
  location.vendor_id = get_u16(in, "gpu_location.vendor_id");
  location.device_id = get_u16(in, "gpu_location.device_id");
  location.class_id = get_u16(in, "gpu_location.class_id");
  for (std::uint32_t n = in.count("gpu_location.bridges", 13); n > 0; --n) {
    topology::PciBridge bridge;
    bridge.address = get_address(in, "gpu_location.bridges.address");
    bridge.vendor_id = get_u16(in, "gpu_location.bridges.vendor_id");
    bridge.device_id = get_u16(in, "gpu_location.bridges.device_id");
    const std::uint8_t role = in.u8("gpu_location.bridges.role");
    if (role > static_cast<std::uint8_t>(topology::PciPortRole::switch_downstream))
      Reader::fail("field 'gpu_location.bridges.role' is " + std::to_string(role));
    bridge.role = static_cast<topology::PciPortRole>(role);
    location.bridges.push_back(bridge);
  }
  location.host_bridge = in.text("gpu_location.host_bridge");
  location.numa_node = in.i32("gpu_location.numa_node");
  location.package = in.i32("gpu_location.package");
  location.local_cpus = in.text("gpu_location.local_cpus");
  location.pcie_mb_per_s = in.u32("gpu_location.pcie_mb_per_s");
  return location;
}

}  // namespace

bool operator==(const RankCard& a, const RankCard& b) {
  // GpuLocation has no comparison of its own: its encoding stands in.
  return encode_rank_card(a) == encode_rank_card(b);
}

std::vector<std::byte> encode_rank_card(const RankCard& card) {
  Writer out;
  for (char c : kMagic) out.u8(static_cast<std::uint8_t>(c));
  out.u32(RankCard::kVersion);
  out.text(card.node_key);
  out.text(card.machine_key);
  out.optional_text(card.settings_error);
  out.u32(static_cast<std::uint32_t>(card.agreed_settings.size()));
  for (const auto& setting : card.agreed_settings) {
    out.text(setting.name);
    out.text(setting.variable);
    out.text(setting.value);
  }
  out.text(card.tuning_file);
  out.text(card.tuning_digest);
  out.optional_text(card.tuning_error);
  out.u32(static_cast<std::uint32_t>(card.tuning_entries.size()));
  for (const auto& entry : card.tuning_entries) {
    out.text(entry.fingerprint);
    out.text(entry.effect);
  }
  out.optional_text(card.topology_error);
  out.u8(card.sees_gpu ? 1 : 0);
  out.optional_text(card.gpu_error);
  out.text(card.gpu.bus_id);
  out.text(card.gpu.name);
  out.i32(card.gpu.nvlinks.switch_links);
  out.u32(static_cast<std::uint32_t>(card.gpu.nvlinks.gpu_peers.size()));
  for (const auto& peer : card.gpu.nvlinks.gpu_peers) out.text(peer.to_string());
  out.u32(card.gpu.pcie_max_mb_per_s);
  put_location(out, card.gpu_location);
  return out.take();
}

RankCard decode_rank_card(std::span<const std::byte> bytes) {
  Reader in(bytes);
  for (char c : kMagic) {
    if (in.u8("magic") != static_cast<std::uint8_t>(c))
      Reader::fail("it does not start with the card's magic bytes");
  }
  const std::uint32_t version = in.u32("version");
  if (version != RankCard::kVersion) {
    Reader::fail("it is version " + std::to_string(version) + ", this build reads version " +
                 std::to_string(RankCard::kVersion));
  }
  RankCard card;
  card.node_key = in.text("node_key");
  card.machine_key = in.text("machine_key");
  card.settings_error = in.optional_text("settings_error");
  for (std::uint32_t n = in.count("agreed_settings", 12); n > 0; --n) {
    CardSetting setting;
    setting.name = in.text("agreed_settings.name");
    setting.variable = in.text("agreed_settings.variable");
    setting.value = in.text("agreed_settings.value");
    card.agreed_settings.push_back(std::move(setting));
  }
  card.tuning_file = in.text("tuning_file");
  card.tuning_digest = in.text("tuning_digest");
  card.tuning_error = in.optional_text("tuning_error");
  for (std::uint32_t n = in.count("tuning_entries", 8); n > 0; --n) {
    CardTuningEntry entry;
    entry.fingerprint = in.text("tuning_entries.fingerprint");
    entry.effect = in.text("tuning_entries.effect");
    card.tuning_entries.push_back(std::move(entry));
  }
  card.topology_error = in.optional_text("topology_error");
  card.sees_gpu = in.flag("sees_gpu");
  card.gpu_error = in.optional_text("gpu_error");
  card.gpu.bus_id = in.text("gpu.bus_id");
  card.gpu.name = in.text("gpu.name");
  card.gpu.nvlinks.switch_links = in.i32("gpu.nvlinks.switch_links");
  for (std::uint32_t n = in.count("gpu.nvlinks.gpu_peers", 4); n > 0; --n) {
    const std::string text = in.text("gpu.nvlinks.gpu_peers");
    const auto peer = topology::PciAddress::parse(text);
    if (!peer) Reader::fail("NVLink peer '" + text + "' is not a PCI address");
    card.gpu.nvlinks.gpu_peers.push_back(*peer);
  }
  card.gpu.pcie_max_mb_per_s = in.u32("gpu.pcie_max_mb_per_s");
  card.gpu_location = get_location(in);
  in.finish();
  return card;
}

}  // namespace peerplan::communicator
