// The Config field table behind the INFO log of the config and the
// cross-rank agreement check: every field appears once, with the variable
// that sets it, as text that variable accepts; exactly the fields that
// change routing or the kernels' protocols are marked agreed.
#include "core/config_fields.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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
}

TEST(ConfigFields, KernelChoicesAsTheVariablesWriteThem) {
  Config c;
  c.kernels.one_shot_max_blocks = 80;
  c.kernels.one_shot_lamport_above_bytes = kLamportNever;
  c.kernels.fused_lamport_above_bytes = kLamportAlways;
  c.kernels.fused_ll_max_bytes = 0;
  c.kernels.row_clusters = RowClusters::off;
  const auto fields = config_fields(c);
  EXPECT_EQ(field(fields, "kernels.one_shot_max_blocks").value, "80");
  EXPECT_EQ(field(fields, "kernels.one_shot_lamport_above_bytes").value, "ll");
  EXPECT_EQ(field(fields, "kernels.fused_lamport_above_bytes").value, "lamport");
  EXPECT_EQ(field(fields, "kernels.fused_ll_max_bytes").value, "0");
  EXPECT_EQ(field(fields, "kernels.row_clusters").value, "off");
  c.kernels.one_shot_lamport_above_bytes = 16384;
  EXPECT_EQ(field(config_fields(c), "kernels.one_shot_lamport_above_bytes").value, "16384");

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
  // Launch shapes no peer depends on (no per-block flags; same bits).
  EXPECT_FALSE(field(fields, "kernels.one_shot_max_blocks").agreed);
  EXPECT_FALSE(field(fields, "kernels.row_clusters").agreed);
  // As before the kernel knobs joined the table.
  for (const char* name : {"backend", "timeout_ms", "cutoffs.one_shot_max_bytes",
                           "cutoffs.two_shot_min_bytes", "cutoffs.two_shot_max_bytes",
                           "cutoffs.fused_max_bytes", "transfer_mode", "disable_p2p", "p2p_level",
                           "expected_world_size", "fallback"})
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

TEST(ConfigFields, ProtocolText) {
  EXPECT_EQ(protocol_text(std::nullopt), "auto");
  EXPECT_EQ(protocol_text(kLamportNever), "ll");
  EXPECT_EQ(protocol_text(kLamportAlways), "lamport");
  EXPECT_EQ(protocol_text(4096), "4096");
  EXPECT_EQ(bytes_or_auto(kAutoCutoff), "auto");
  EXPECT_EQ(bytes_or_auto(0), "0");
}

}  // namespace
}  // namespace peerplan::core
