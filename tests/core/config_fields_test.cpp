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
  EXPECT_EQ(field(fields, "kernels.one_shot_lamport").value, "auto");
  EXPECT_EQ(field(fields, "kernels.fused_lamport").value, "auto");
  EXPECT_EQ(field(fields, "kernels.fused_ll").value, "auto");
  EXPECT_EQ(field(fields, "kernels.row_clusters").value, "auto");
  EXPECT_EQ(field(fields, "kernels.two_shot_dma").value, "auto");
  EXPECT_EQ(field(fields, "kernels.two_shot_lamport").value, "auto");
}

TEST(ConfigFields, KernelChoicesAsTheVariablesWriteThem) {
  Config c;
  c.kernels.one_shot_max_blocks = 80;
  c.kernels.one_shot_lamport = Window::never();
  c.kernels.fused_lamport = Window::every_size();
  c.kernels.fused_ll = Window::never();
  c.kernels.row_clusters = RowClusters::off;
  c.kernels.two_shot_dma = Window::never();
  c.kernels.two_shot_lamport = Window::never();
  const auto fields = config_fields(c);
  EXPECT_EQ(field(fields, "kernels.one_shot_max_blocks").value, "80");
  EXPECT_EQ(field(fields, "kernels.one_shot_lamport").value, "never");
  EXPECT_EQ(field(fields, "kernels.one_shot_lamport").variable,
            std::string("PEERPLAN_ONE_SHOT_LAMPORT"));
  EXPECT_EQ(field(fields, "kernels.fused_lamport").value, "all");
  EXPECT_EQ(field(fields, "kernels.fused_lamport").variable, std::string("PEERPLAN_FUSED_LAMPORT"));
  EXPECT_EQ(field(fields, "kernels.fused_ll").value, "never");
  EXPECT_EQ(field(fields, "kernels.fused_ll").variable, std::string("PEERPLAN_FUSED_LL"));
  EXPECT_EQ(field(fields, "kernels.row_clusters").value, "off");
  EXPECT_EQ(field(fields, "kernels.two_shot_dma").value, "never");
  EXPECT_EQ(field(fields, "kernels.two_shot_dma").variable, std::string("PEERPLAN_TWO_SHOT_DMA"));
  EXPECT_EQ(field(fields, "kernels.two_shot_lamport").value, "never");
  EXPECT_EQ(field(fields, "kernels.two_shot_lamport").variable,
            std::string("PEERPLAN_TWO_SHOT_LAMPORT"));
  c.kernels.one_shot_lamport = Window::above_bytes(16384);
  EXPECT_EQ(field(config_fields(c), "kernels.one_shot_lamport").value, "16K..");
  c.kernels.two_shot_dma = Window::every_size();
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_dma").value, "all");
  c.kernels.two_shot_dma = Window::above_bytes(std::size_t{16} << 20);
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_dma").value, "16M..");
  c.kernels.two_shot_lamport = Window::every_size();
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_lamport").value, "all");
  c.kernels.two_shot_lamport = Window::up_to_bytes(std::size_t{1} << 20);
  EXPECT_EQ(field(config_fields(c), "kernels.two_shot_lamport").value, "1M");
  c.kernels.fused_lamport = Window{65536, 4u << 20};
  EXPECT_EQ(field(config_fields(c), "kernels.fused_lamport").value, "64K..4M");
  c.kernels.fused_ll = Window::up_to_bytes(1000);
  EXPECT_EQ(field(config_fields(c), "kernels.fused_ll").value, "1000");

  // Each value, given back to its variable, gives the same field.
  for (const auto& f : config_fields(c)) {
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
  EXPECT_TRUE(field(fields, "kernels.one_shot_lamport").agreed);
  EXPECT_TRUE(field(fields, "kernels.fused_lamport").agreed);
  EXPECT_TRUE(field(fields, "kernels.fused_ll").agreed);
  EXPECT_TRUE(field(fields, "kernels.two_shot_dma").agreed);
  EXPECT_TRUE(field(fields, "kernels.two_shot_lamport").agreed);
  // Launch shapes no peer depends on (no per-block flags; same bits).
  EXPECT_FALSE(field(fields, "kernels.one_shot_max_blocks").agreed);
  EXPECT_FALSE(field(fields, "kernels.row_clusters").agreed);
  // As before the kernel knobs joined the table.
  for (const char* name :
       {"backend", "timeout_ms", "cutoffs.one_shot_max_bytes", "cutoffs.two_shot_min_bytes",
        "cutoffs.two_shot_max_bytes", "cutoffs.fused_max_bytes", "transfer_mode", "disable_p2p",
        "p2p_level", "expected_world_size", "fallback"})
    EXPECT_TRUE(field(fields, name).agreed) << name;
  for (const char* name :
       {"device", "log_level", "log_file", "log_subsystems", "topology_file", "tuning_file"})
    EXPECT_FALSE(field(fields, name).agreed) << name;
}

TEST(ConfigFields, DescribeConfigListsEveryField) {
  Config c;
  c.kernels.fused_lamport = Window::above_bytes(65536);
  const std::string line = describe_config(c);
  for (const auto& f : config_fields(c))
    EXPECT_NE(line.find(f.name + "="), std::string::npos) << f.name << " missing from " << line;
  EXPECT_NE(line.find("kernels.fused_lamport=64K.."), std::string::npos) << line;
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
                                        "kernels.one_shot_lamport",
                                        "kernels.fused_lamport",
                                        "kernels.fused_ll",
                                        "kernels.two_shot_dma",
                                        "kernels.two_shot_lamport",
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
  // kAutoCutoff in every cutoff, kNoLimit at both ends of every window.
  Config c;
  c.cutoffs = RouteCutoffs{kAutoCutoff, kAutoCutoff, kAutoCutoff, kAutoCutoff};
  for (const Window window : {Window{kNoLimit, kNoLimit}, Window::every_size(),
                              Window::above_bytes(kNoLimit), Window::up_to_bytes(kNoLimit)}) {
    c.kernels.fused_ll = window;
    c.kernels.one_shot_lamport = window;
    c.kernels.fused_lamport = window;
    c.kernels.two_shot_dma = window;
    c.kernels.two_shot_lamport = window;
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
  set.log_file = "/tmp/peerplan.%h.%p.log";
  set.log_subsystems = "^CALL,TRANSPORT";
  set.topology_file = "/tmp/topo.xml";
  set.tuning_file = "/tmp/peerplan.tune";
  set.expected_world_size = 4;
  set.kernels.one_shot_lamport = Window::every_size();
  set.kernels.fused_lamport = Window{64u << 10, 4u << 20};
  set.kernels.fused_ll = Window::up_to_bytes(1u << 20);
  set.kernels.two_shot_dma = Window::above_bytes(8u << 20);
  set.kernels.two_shot_lamport = Window::up_to_bytes(256u << 10);
  set.fallback = Fallback::mpi;
  set.nvtx = false;
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

TEST(ConfigFields, BytesOrAuto) {
  EXPECT_EQ(bytes_or_auto(kAutoCutoff), "auto");
  EXPECT_EQ(bytes_or_auto(0), "0");
}

}  // namespace
}  // namespace peerplan::core
