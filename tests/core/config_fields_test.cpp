// SPDX-License-Identifier: Apache-2.0
// The Config field table behind the INFO log of the config and the
// cross-rank agreement check: every field appears once, with the variable
// that sets it, as text that variable accepts; exactly the fields that
// change routing or the kernels' protocols are marked agreed.
#include "core/config_fields.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <string>

#include "core/environment.hpp"

namespace peerplan::core {
namespace {

const ConfigField& field(const std::vector<ConfigField>& fields, const std::string& name) {
  const auto it = std::find_if(fields.begin(), fields.end(),
                               [&](const ConfigField& f) { return f.name == name; });
  if (it == fields.end()) throw std::runtime_error("no field " + name);
  return *it;
}

TEST(ConfigFields, OneFieldPerEnvironmentVariable) {
  std::set<std::string> variables;
  for (const auto& f : config_fields(Config{}))
    EXPECT_TRUE(variables.insert(f.variable).second) << "twice: " << f.variable;
  std::set<std::string> read;
  for (auto name : environment_variable_names()) read.emplace(name);
  EXPECT_EQ(variables, read) << "a Config field without its variable, or the reverse";
}

TEST(ConfigFields, KernelChoicesDefaultToAuto) {
  const auto fields = config_fields(Config{});
  EXPECT_EQ(field(fields, "kernels.one_shot_max_blocks").value, "auto");
  EXPECT_EQ(field(fields, "kernels.one_shot_lamport_above_bytes").value, "auto");
  EXPECT_EQ(field(fields, "kernels.fused_lamport_above_bytes").value, "auto");
  EXPECT_EQ(field(fields, "kernels.fused_ll_max_bytes").value, "auto");
  EXPECT_EQ(field(fields, "kernels.row_clusters").value, "auto");
  EXPECT_EQ(field(fields, "kernels.two_shot_dma_above_bytes").value, "auto");
  EXPECT_EQ(field(fields, "kernels.two_shot_lamport_max_bytes").value, "auto");
}

TEST(ConfigFields, KernelChoicesAsTheVariablesWriteThem) {
  Config c;
  c.kernels.one_shot_max_blocks = 80;
  c.kernels.one_shot_lamport_above_bytes = kLamportNever;
  c.kernels.fused_lamport_above_bytes = kLamportAlways;
  c.kernels.fused_ll_max_bytes = 0;
  c.kernels.row_clusters = RowClusters::off;
  c.kernels.two_shot_dma_above_bytes = kDmaNever;
  c.kernels.two_shot_lamport_max_bytes = kTwoShotLamportNever;
  const auto fields = config_fields(c);
  EXPECT_EQ(field(fields, "kernels.one_shot_max_blocks").value, "80");
  EXPECT_EQ(field(fields, "kernels.one_shot_lamport_above_bytes").value, "ll");
  EXPECT_EQ(field(fields, "kernels.fused_lamport_above_bytes").value, "lamport");
  EXPECT_EQ(field(fields, "kernels.fused_ll_max_bytes").value, "0");
  EXPECT_EQ(field(fields, "kernels.row_clusters").value, "off");
  EXPECT_EQ(field(fields, "kernels.two_shot_dma_above_bytes").value, "staged");
  EXPECT_EQ(field(fields, "kernels.two_shot_dma_above_bytes").variable,
            std::string("PEERPLAN_TWO_SHOT_PROTOCOL"));
  EXPECT_EQ(field(fields, "kernels.two_shot_lamport_max_bytes").value, "off");
  EXPECT_EQ(field(fields, "kernels.two_shot_lamport_max_bytes").variable,
            std::string("PEERPLAN_TWO_SHOT_LAMPORT_MAX_BYTES"));
  c.kernels.one_shot_lamport_above_bytes = 16384;
  EXPECT_EQ(field(config_fields(c), "kernels.one_shot_lamport_above_bytes").value, "16384");
  c.kernels.two_shot_dma_above_bytes = kDmaAlways;
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_dma_above_bytes").value, "dma");
  c.kernels.two_shot_dma_above_bytes = std::size_t{16} << 20;
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_dma_above_bytes").value, "16777216");
  c.kernels.two_shot_lamport_max_bytes = kTwoShotLamportAlways;
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_lamport_max_bytes").value, "all");
  c.kernels.two_shot_lamport_max_bytes = std::size_t{1} << 20;
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_lamport_max_bytes").value, "1048576");

  // Each value, given back to its variable, gives the same field.
  for (const auto& f : fields) {
    if (f.name.rfind("kernels.", 0) != 0) continue;
    const Config back = apply_environment_from(Config{}, [&](const char* name) -> const char* {
      return f.variable == std::string(name) ? f.value.c_str() : nullptr;
    });
    EXPECT_EQ(field(config_fields(back), f.name).value, f.value) << f.name;
  }
}

TEST(ConfigFields, AgreedAreThoseThatChangeWhatPeersRun) {
  const auto fields = config_fields(Config{});
  // Sender and receiver must run the same protocol.
  EXPECT_TRUE(field(fields, "kernels.one_shot_lamport_above_bytes").agreed);
  EXPECT_TRUE(field(fields, "kernels.fused_lamport_above_bytes").agreed);
  EXPECT_TRUE(field(fields, "kernels.fused_ll_max_bytes").agreed);
  EXPECT_TRUE(field(fields, "kernels.two_shot_dma_above_bytes").agreed);
  EXPECT_TRUE(field(fields, "kernels.two_shot_lamport_max_bytes").agreed);
  // Launch shapes no peer depends on (no per-block flags; same bits).
  EXPECT_FALSE(field(fields, "kernels.one_shot_max_blocks").agreed);
  EXPECT_FALSE(field(fields, "kernels.row_clusters").agreed);
  // As before the kernel knobs joined the table.
  for (const char* name :
       {"backend", "timeout_ms", "cutoffs.one_shot_max_bytes", "cutoffs.two_shot_min_bytes",
        "cutoffs.two_shot_max_bytes", "cutoffs.fused_max_bytes", "transfer_mode", "disable_p2p",
        "p2p_level", "expected_world_size", "fallback"})
    EXPECT_TRUE(field(fields, name).agreed) << name;
  for (const char* name : {"device", "log_level", "topology_file", "tuning_file"})
    EXPECT_FALSE(field(fields, name).agreed) << name;
}

TEST(ConfigFields, DescribeConfigListsEveryField) {
  Config c;
  c.kernels.fused_lamport_above_bytes = 65536;
  const std::string line = describe_config(c);
  for (const auto& f : config_fields(c))
    EXPECT_NE(line.find(f.name + "="), std::string::npos) << f.name << " missing from " << line;
  EXPECT_NE(line.find("kernels.fused_lamport_above_bytes=65536"), std::string::npos) << line;
  EXPECT_NE(line.find("kernels.row_clusters=auto"), std::string::npos) << line;
  EXPECT_NE(line.find("cutoffs.one_shot_max_bytes=auto"), std::string::npos) << line;
  EXPECT_NE(line.find("topology_file=\"\""), std::string::npos) << line;
}

// A create() mismatch quotes these values ("is auto on rank 0 but 65536 on
// rank 2"): an agreed field left at its "the backend decides" value must read
// "auto", never the sentinel behind it (kAutoCutoff is SIZE_MAX, which would
// print as 18446744073709551615).
TEST(ConfigFields, EveryAgreedFieldShowsItsAutoValueAsAuto) {
  const std::set<std::string> automatic{"backend",
                                        "cutoffs.one_shot_max_bytes",
                                        "cutoffs.two_shot_max_bytes",
                                        "cutoffs.fused_max_bytes",
                                        "cutoffs.two_shot_min_bytes",
                                        "cutoffs.two_shot_chunk_bytes",
                                        "transfer_mode",
                                        "p2p_level",
                                        "kernels.one_shot_lamport_above_bytes",
                                        "kernels.fused_lamport_above_bytes",
                                        "kernels.fused_ll_max_bytes",
                                        "kernels.two_shot_dma_above_bytes",
                                        "kernels.two_shot_lamport_max_bytes",
                                        "fallback"};
  // Config{} holds every auto value; the agreed fields without one are
  // plain numbers or booleans (timeout, disable_p2p, expected_world_size).
  for (const auto& f : config_fields(Config{})) {
    if (!f.agreed) continue;
    if (automatic.count(f.name) != 0) {
      EXPECT_EQ(f.value, "auto") << f.name;
    } else {
      EXPECT_NE(f.value, "auto") << f.name << " has an auto value this test does not know of";
    }
  }
  for (const auto& name : automatic)
    EXPECT_TRUE(field(config_fields(Config{}), name).agreed) << name;
}

TEST(ConfigFields, NoFieldShowsASentinelNumber) {
  // Every sentinel peerplan uses, in every size field at once.
  for (const std::size_t sentinel : {kAutoCutoff, kLamportNever, kLamportAlways}) {
    Config c;
    c.cutoffs = RouteCutoffs{sentinel, sentinel, sentinel, sentinel};
    c.kernels.fused_ll_max_bytes = sentinel;
    c.kernels.one_shot_lamport_above_bytes = sentinel;
    c.kernels.fused_lamport_above_bytes = sentinel;
    c.kernels.two_shot_dma_above_bytes = sentinel;
    c.kernels.two_shot_lamport_max_bytes = sentinel;
    for (const auto& f : config_fields(c)) {
      EXPECT_EQ(f.value.find(std::to_string(std::numeric_limits<std::size_t>::max())),
                std::string::npos)
          << f.name << "=" << f.value;
    }
  }
}

// What a mismatch message shows can be pasted into the variable it names on
// every rank: each field, at its default and at a set value, reads back as
// itself (the test above covers the kernel knobs the same way).
TEST(ConfigFields, EveryFieldReadsBackThroughItsVariable) {
  Config set;
  set.backend = Backend::host;
  set.device = 3;
  set.timeout = std::chrono::milliseconds(1234);
  set.cutoffs = RouteCutoffs{65536, 8u << 20, 0, 4096};
  set.transfer_mode = TransferMode::pull;
  set.disable_p2p = true;
  set.p2p_level = P2PLevel::sys;
  set.log_level = LogLevel::info;
  set.topology_file = "/tmp/topo.xml";
  set.tuning_file = "/tmp/peerplan.tune";
  set.expected_world_size = 4;
  set.kernels.one_shot_lamport_above_bytes = kLamportAlways;
  set.kernels.fused_ll_max_bytes = 1u << 20;
  set.kernels.two_shot_dma_above_bytes = 8u << 20;
  set.kernels.two_shot_lamport_max_bytes = 256u << 10;
  set.fallback = Fallback::mpi;
  for (const Config& config : {Config{}, set}) {
    for (const auto& f : config_fields(config)) {
      if (f.value.empty()) continue;  // an empty variable counts as unset
      const Config back = apply_environment_from(Config{}, [&](const char* name) -> const char* {
        return f.variable == std::string(name) ? f.value.c_str() : nullptr;
      });
      EXPECT_EQ(field(config_fields(back), f.name).value, f.value) << f.variable << "=" << f.value;
    }
  }
}

TEST(ConfigFields, ProtocolText) {
  EXPECT_EQ(protocol_text(std::nullopt), "auto");
  EXPECT_EQ(protocol_text(kLamportNever), "ll");
  EXPECT_EQ(protocol_text(kLamportAlways), "lamport");
  EXPECT_EQ(protocol_text(4096), "4096");
  EXPECT_EQ(two_shot_protocol_text(std::nullopt), "auto");
  EXPECT_EQ(two_shot_protocol_text(kDmaNever), "staged");
  EXPECT_EQ(two_shot_protocol_text(kDmaAlways), "dma");
  EXPECT_EQ(two_shot_protocol_text(std::size_t{16} << 20), "16777216");
  EXPECT_EQ(two_shot_lamport_text(std::nullopt), "auto");
  EXPECT_EQ(two_shot_lamport_text(kTwoShotLamportNever), "off");
  EXPECT_EQ(two_shot_lamport_text(kTwoShotLamportAlways), "all");
  EXPECT_EQ(two_shot_lamport_text(std::size_t{1} << 20), "1048576");
  EXPECT_EQ(bytes_or_auto(kAutoCutoff), "auto");
  EXPECT_EQ(bytes_or_auto(0), "0");
}

}  // namespace
}  // namespace peerplan::core
