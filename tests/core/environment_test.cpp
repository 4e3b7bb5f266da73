// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_* overrides: every variable with good and bad values (through an
// injected lookup), the effect lines logged at INFO, and the real process
// environment through setenv. The CUDA kernel knobs (Config::kernels) are
// parsed here like the rest, whatever backend will run.
#include "core/environment.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "peerplan/errors.hpp"

namespace peerplan {
namespace {

using Vars = std::map<std::string, std::string>;

Config apply(const Vars& vars, Config base = {}, std::vector<std::string>* applied = nullptr) {
  return apply_environment_from(
      std::move(base),
      [&vars](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      applied);
}

Config with(const std::string& name, const std::string& value) { return apply({{name, value}}); }

// The InvalidArgument message for one bad variable; fails the test if the
// value was accepted.
std::string rejection(const std::string& name, const std::string& value) {
  try {
    with(name, value);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << name << "=\"" << value << "\" was accepted";
  return {};
}

// A rejection must name the variable, quote the value and list what is
// accepted (`accepted_hint` is one word of that list).
void expect_rejected(const std::string& name, const std::string& value,
                     const std::string& accepted_hint) {
  const std::string message = rejection(name, value);
  EXPECT_NE(message.find(name), std::string::npos) << message;
  EXPECT_NE(message.find('"' + value + '"'), std::string::npos) << message;
  EXPECT_NE(message.find(accepted_hint), std::string::npos) << message;
}

TEST(Environment, ReadsExactlyTheDocumentedVariables) {
  // The list in include/peerplan/config.hpp's apply_environment comment.
  const std::vector<std::string_view> documented{"PEERPLAN_DEBUG",
                                                 "PEERPLAN_DEBUG_FILE",
                                                 "PEERPLAN_DEBUG_SUBSYS",
                                                 "PEERPLAN_BACKEND",
                                                 "PEERPLAN_DEVICE",
                                                 "PEERPLAN_TIMEOUT_MS",
                                                 "PEERPLAN_ONE_SHOT_MAX_BYTES",
                                                 "PEERPLAN_TWO_SHOT_MIN_BYTES",
                                                 "PEERPLAN_TWO_SHOT_MAX_BYTES",
                                                 "PEERPLAN_FUSED_MAX_BYTES",
                                                 "PEERPLAN_TWO_SHOT_CHUNK_BYTES",
                                                 "PEERPLAN_TRANSFER_MODE",
                                                 "PEERPLAN_DISABLE_P2P",
                                                 "PEERPLAN_P2P_LEVEL",
                                                 "PEERPLAN_TOPO_FILE",
                                                 "PEERPLAN_TUNING_FILE",
                                                 "PEERPLAN_WORLD_SIZE",
                                                 "PEERPLAN_ONE_SHOT_MAX_BLOCKS",
                                                 "PEERPLAN_ONE_SHOT_LAMPORT",
                                                 "PEERPLAN_FUSED_LAMPORT",
                                                 "PEERPLAN_FUSED_LL",
                                                 "PEERPLAN_ROW_CLUSTERS",
                                                 "PEERPLAN_TWO_SHOT_DMA",
                                                 "PEERPLAN_TWO_SHOT_LAMPORT",
                                                 "PEERPLAN_FALLBACK",
                                                 "PEERPLAN_TRACK_UNDECLARED",
                                                 "PEERPLAN_NVTX",
                                                 "PEERPLAN_CHECK_CALLS"};
  EXPECT_EQ(environment_variable_names(), documented);

  // And it looks each of them up (no more, no fewer).
  std::vector<std::string> asked;
  apply_environment_from(Config{}, [&asked](const char* name) -> const char* {
    asked.emplace_back(name);
    return nullptr;
  });
  // The retired protocol variables first, to refuse them (RetiredVariables).
  std::vector<std::string> expected_asked{
      "PEERPLAN_ONE_SHOT_PROTOCOL", "PEERPLAN_FUSED_PROTOCOL", "PEERPLAN_FUSED_LL_MAX_BYTES",
      "PEERPLAN_TWO_SHOT_PROTOCOL", "PEERPLAN_TWO_SHOT_LAMPORT_MAX_BYTES"};
  expected_asked.insert(expected_asked.end(), documented.begin(), documented.end());
  EXPECT_EQ(asked, expected_asked);
}

TEST(Environment, NothingSetLeavesTheConfigAsGiven) {
  Config code;
  code.timeout = std::chrono::milliseconds(777);
  code.cutoffs.two_shot_max_bytes = 12345;
  code.log_level = LogLevel::trace;
  code.topology_file = "/from/code.xml";
  std::vector<std::string> applied;
  const Config result = apply({}, code, &applied);
  EXPECT_EQ(result.timeout, code.timeout);
  EXPECT_EQ(result.cutoffs, code.cutoffs);
  EXPECT_EQ(result.log_level, LogLevel::trace);
  EXPECT_EQ(result.topology_file, "/from/code.xml");
  EXPECT_TRUE(applied.empty());
}

TEST(Environment, EmptyValueCountsAsUnset) {
  Config code;
  code.timeout = std::chrono::milliseconds(42);
  std::vector<std::string> applied;
  const Config result =
      apply({{"PEERPLAN_TIMEOUT_MS", ""}, {"PEERPLAN_DEBUG", ""}}, code, &applied);
  EXPECT_EQ(result.timeout.count(), 42);
  EXPECT_EQ(result.log_level, code.log_level);
  EXPECT_TRUE(applied.empty());
}

TEST(Environment, EnvironmentOverridesCodeOnlyForVariablesSet) {
  Config code;
  code.timeout = std::chrono::milliseconds(42);
  code.device = 3;
  const Config result = apply({{"PEERPLAN_TIMEOUT_MS", "5000"}}, code);
  EXPECT_EQ(result.timeout.count(), 5000);
  EXPECT_EQ(result.device, 3);
}

TEST(Environment, Debug) {
  EXPECT_EQ(with("PEERPLAN_DEBUG", "NONE").log_level, LogLevel::none);
  EXPECT_EQ(with("PEERPLAN_DEBUG", "warn").log_level, LogLevel::warn);
  EXPECT_EQ(with("PEERPLAN_DEBUG", "Info").log_level, LogLevel::info);
  EXPECT_EQ(with("PEERPLAN_DEBUG", "TRACE").log_level, LogLevel::trace);
  expect_rejected("PEERPLAN_DEBUG", "LOUD", "NONE|WARN|INFO|TRACE");
  expect_rejected("PEERPLAN_DEBUG", "INFO ", "TRACE");
  expect_rejected("PEERPLAN_DEBUG", "2", "TRACE");
}

TEST(Environment, Backend) {
  EXPECT_EQ(with("PEERPLAN_BACKEND", "auto").backend, Backend::automatic);
  EXPECT_EQ(with("PEERPLAN_BACKEND", "CUDA").backend, Backend::cuda);
  EXPECT_EQ(with("PEERPLAN_BACKEND", "host").backend, Backend::host);
  expect_rejected("PEERPLAN_BACKEND", "gpu", "auto|cuda|host");
  expect_rejected("PEERPLAN_BACKEND", "automatic ", "auto|cuda|host");
}

TEST(Environment, Device) {
  EXPECT_EQ(with("PEERPLAN_DEVICE", "-1").device, -1);
  EXPECT_EQ(with("PEERPLAN_DEVICE", "0").device, 0);
  EXPECT_EQ(with("PEERPLAN_DEVICE", "7").device, 7);
  EXPECT_EQ(with("PEERPLAN_DEVICE", "2147483647").device, 2147483647);
  for (const char* bad : {"-2", "x", "1.0", "2147483648", "gpu0"})
    expect_rejected("PEERPLAN_DEVICE", bad, "integer");
}

TEST(Environment, TimeoutMs) {
  EXPECT_EQ(with("PEERPLAN_TIMEOUT_MS", "1").timeout.count(), 1);
  EXPECT_EQ(with("PEERPLAN_TIMEOUT_MS", "5000").timeout.count(), 5000);
  EXPECT_EQ(with("PEERPLAN_TIMEOUT_MS", "2147483647").timeout.count(), 2147483647);
  for (const char* bad : {"0", "-5", "5000ms", "5s", "1e3", "2147483648", " 5000"})
    expect_rejected("PEERPLAN_TIMEOUT_MS", bad, "milliseconds");
}

class CutoffVariable
    : public testing::TestWithParam<std::pair<const char*, std::size_t RouteCutoffs::*>> {};

TEST_P(CutoffVariable, SizesSuffixesZeroAndAuto) {
  const auto [name, field] = GetParam();
  EXPECT_EQ(with(name, "524288").cutoffs.*field, 524288u);
  EXPECT_EQ(with(name, "512K").cutoffs.*field, 512u * 1024);
  EXPECT_EQ(with(name, "8m").cutoffs.*field, 8u << 20);
  EXPECT_EQ(with(name, "1G").cutoffs.*field, std::size_t{1} << 30);
  EXPECT_EQ(with(name, "0").cutoffs.*field, 0u);
  EXPECT_EQ(with(name, "auto").cutoffs.*field, kAutoCutoff);
  EXPECT_EQ(with(name, "AUTO").cutoffs.*field, kAutoCutoff);

  // Only the named field changes.
  const RouteCutoffs changed = with(name, "4K").cutoffs;
  RouteCutoffs expected;
  expected.*field = 4096;
  EXPECT_EQ(changed, expected);

  for (const char* bad :
       {"1.5M", "-1", "512KB", "K", "99999999999999999999", "17179869184G", "none",
        "18446744073709551615"})  // the last is kAutoCutoff's number: it would mean auto
    expect_rejected(name, bad, "512K");
}

INSTANTIATE_TEST_SUITE_P(
    Environment, CutoffVariable,
    testing::Values(std::pair{"PEERPLAN_ONE_SHOT_MAX_BYTES", &RouteCutoffs::one_shot_max_bytes},
                    std::pair{"PEERPLAN_TWO_SHOT_MIN_BYTES", &RouteCutoffs::two_shot_min_bytes},
                    std::pair{"PEERPLAN_TWO_SHOT_MAX_BYTES", &RouteCutoffs::two_shot_max_bytes},
                    std::pair{"PEERPLAN_FUSED_MAX_BYTES", &RouteCutoffs::fused_max_bytes}),
    [](const auto& info) { return std::string(info.param.first).substr(9); });

// Pieces below 256 bytes round down to none: 1..255 would silently mean
// "never split", the opposite of asking for small pieces.
TEST(Environment, TwoShotChunkBytes) {
  const char* name = "PEERPLAN_TWO_SHOT_CHUNK_BYTES";
  EXPECT_EQ(with(name, "0").cutoffs.two_shot_chunk_bytes, 0u);
  EXPECT_EQ(with(name, "256").cutoffs.two_shot_chunk_bytes, 256u);
  EXPECT_EQ(with(name, "64M").cutoffs.two_shot_chunk_bytes, std::size_t{64} << 20);
  EXPECT_EQ(with(name, "auto").cutoffs.two_shot_chunk_bytes, kAutoCutoff);
  for (const char* small : {"1", "255", "100"}) {
    expect_rejected(name, small, "at least 256");
    const std::string message = rejection(name, small);
    EXPECT_NE(message.find("use 0 to never split, or at least 256"), std::string::npos) << message;
  }
  for (const char* bad : {"18446744073709551615", "64MB", "-1"}) expect_rejected(name, bad, "64M");
  std::vector<std::string> applied;
  apply({{name, "0"}}, Config{}, &applied);
  apply({{name, "4097"}}, Config{}, &applied);
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0], std::string(name) + "=0 (two-shot never split)");
  EXPECT_EQ(applied[1], std::string(name) + "=4097 (two-shot pieces of 4096 bytes)");
}

TEST(Environment, TransferMode) {
  EXPECT_EQ(with("PEERPLAN_TRANSFER_MODE", "auto").transfer_mode, TransferMode::automatic);
  EXPECT_EQ(with("PEERPLAN_TRANSFER_MODE", "pull").transfer_mode, TransferMode::pull);
  EXPECT_EQ(with("PEERPLAN_TRANSFER_MODE", "PUSH").transfer_mode, TransferMode::push);
  expect_rejected("PEERPLAN_TRANSFER_MODE", "both", "auto|pull|push");
}

TEST(Environment, DisableP2P) {
  for (const char* yes : {"1", "true", "YES", "on"})
    EXPECT_TRUE(with("PEERPLAN_DISABLE_P2P", yes).disable_p2p) << yes;
  Config enabled_in_code;
  enabled_in_code.disable_p2p = true;
  for (const char* no : {"0", "False", "no", "OFF"})
    EXPECT_FALSE(apply({{"PEERPLAN_DISABLE_P2P", no}}, enabled_in_code).disable_p2p) << no;
  for (const char* bad : {"2", "y", "enable"})
    expect_rejected("PEERPLAN_DISABLE_P2P", bad, "true|false");
}

TEST(Environment, P2PLevel) {
  const std::pair<const char*, P2PLevel> levels[] = {
      {"LOC", P2PLevel::loc}, {"nvl", P2PLevel::nvl},       {"PIX", P2PLevel::pix},
      {"pxb", P2PLevel::pxb}, {"Phb", P2PLevel::phb},       {"NODE", P2PLevel::node},
      {"sys", P2PLevel::sys}, {"AUTO", P2PLevel::automatic}};
  for (const auto& [text, level] : levels)
    EXPECT_EQ(with("PEERPLAN_P2P_LEVEL", text).p2p_level, level) << text;
  expect_rejected("PEERPLAN_P2P_LEVEL", "NV1", "auto|LOC|NVL|PIX|PXB|PHB|NODE|SYS");
  expect_rejected("PEERPLAN_P2P_LEVEL", "3", "PHB");
  expect_rejected("PEERPLAN_P2P_LEVEL", "X", "auto|LOC");  // nvidia-smi's "same GPU" is LOC here
}

TEST(Environment, P2PLevelDefaultsToAutoAndCanBeSetBackToIt) {
  EXPECT_EQ(Config{}.p2p_level, P2PLevel::automatic);
  EXPECT_STREQ(to_string(Config{}.p2p_level), "auto");
  Config sys_in_code;
  sys_in_code.p2p_level = P2PLevel::sys;
  EXPECT_EQ(apply({{"PEERPLAN_P2P_LEVEL", "auto"}}, sys_in_code).p2p_level, P2PLevel::automatic);
  EXPECT_EQ(apply({{"PEERPLAN_P2P_LEVEL", ""}}, sys_in_code).p2p_level, P2PLevel::sys);
}

TEST(Environment, TopoFile) {
  EXPECT_EQ(with("PEERPLAN_TOPO_FILE", "/tmp/two gpus.xml").topology_file, "/tmp/two gpus.xml");
}

TEST(Environment, TwoShotMinDescribesALowerBound) {
  // 0 is "no lower bound" here, not "route disabled" as for the maxima.
  std::vector<std::string> applied;
  apply({{"PEERPLAN_TWO_SHOT_MIN_BYTES", "0"}}, Config{}, &applied);
  apply({{"PEERPLAN_TWO_SHOT_MIN_BYTES", "1M"}}, Config{}, &applied);
  apply({{"PEERPLAN_TWO_SHOT_MIN_BYTES", "auto"}}, Config{}, &applied);
  ASSERT_EQ(applied.size(), 3u);
  EXPECT_EQ(applied[0], "PEERPLAN_TWO_SHOT_MIN_BYTES=0 (two-shot min 0: no lower bound)");
  EXPECT_EQ(applied[1], "PEERPLAN_TWO_SHOT_MIN_BYTES=1M (two-shot min 1048576 bytes)");
  EXPECT_EQ(applied[2],
            "PEERPLAN_TWO_SHOT_MIN_BYTES=auto (two-shot min = default for the world size)");
}

TEST(Environment, TuningFile) {
  EXPECT_EQ(with("PEERPLAN_TUNING_FILE", "/etc/peerplan/node 1.tune").tuning_file,
            "/etc/peerplan/node 1.tune");
  EXPECT_TRUE(Config{}.tuning_file.empty());
  Config code;
  code.tuning_file = "/from/code.tune";
  EXPECT_EQ(apply({{"PEERPLAN_TUNING_FILE", "/from/env.tune"}}, code).tuning_file,
            "/from/env.tune");
  EXPECT_EQ(apply({}, code).tuning_file, "/from/code.tune");
}

TEST(Environment, WorldSize) {
  EXPECT_EQ(with("PEERPLAN_WORLD_SIZE", "0").expected_world_size, 0);
  EXPECT_EQ(with("PEERPLAN_WORLD_SIZE", "4").expected_world_size, 4);
  for (const char* bad : {"-1", "four", "4.0"})
    expect_rejected("PEERPLAN_WORLD_SIZE", bad, "integer");
}

TEST(Environment, TrackUndeclared) {
  EXPECT_EQ(with("PEERPLAN_TRACK_UNDECLARED", "0").undeclared_keys_tracked, 0);
  EXPECT_EQ(with("PEERPLAN_TRACK_UNDECLARED", "16").undeclared_keys_tracked, 16);
  EXPECT_EQ(with("PEERPLAN_TRACK_UNDECLARED", "1024").undeclared_keys_tracked, 1024);
  for (const char* bad : {"-1", "1025", "many"})
    expect_rejected("PEERPLAN_TRACK_UNDECLARED", bad, "1024");
}

TEST(Environment, Nvtx) {
  EXPECT_TRUE(Config{}.nvtx);
  EXPECT_FALSE(with("PEERPLAN_NVTX", "0").nvtx);
  EXPECT_FALSE(with("PEERPLAN_NVTX", "off").nvtx);
  EXPECT_TRUE(with("PEERPLAN_NVTX", "1").nvtx);
  for (const char* bad : {"2", "nsys"}) expect_rejected("PEERPLAN_NVTX", bad, "true");
}

// --- the CUDA backend's kernel knobs (KernelChoices) ---------------------

TEST(Environment, OneShotMaxBlocks) {
  EXPECT_EQ(with("PEERPLAN_ONE_SHOT_MAX_BLOCKS", "1").kernels.one_shot_max_blocks, 1);
  EXPECT_EQ(with("PEERPLAN_ONE_SHOT_MAX_BLOCKS", "132").kernels.one_shot_max_blocks, 132);
  EXPECT_EQ(with("PEERPLAN_ONE_SHOT_MAX_BLOCKS", "1024").kernels.one_shot_max_blocks, 1024);
  Config code;
  code.kernels.one_shot_max_blocks = 40;
  for (const char* automatic : {"auto", "AUTO", "Auto"}) {
    EXPECT_EQ(
        apply({{"PEERPLAN_ONE_SHOT_MAX_BLOCKS", automatic}}, code).kernels.one_shot_max_blocks, 0)
        << automatic;
  }
  // 0 is the field's "auto" but not a block count to type: auto says it.
  for (const char* bad : {"0", "1025", "-1", "64 ", "1K", "80.0", "one", "99999999999"})
    expect_rejected("PEERPLAN_ONE_SHOT_MAX_BLOCKS", bad, "1 to 1024");
  const std::string zero = rejection("PEERPLAN_ONE_SHOT_MAX_BLOCKS", "0");
  EXPECT_NE(zero.find("or auto (one block per multiprocessor)"), std::string::npos) << zero;
}

// A protocol window variable and the KernelChoices field it sets.
struct WindowVariable {
  const char* name;
  std::optional<Window> KernelChoices::*field;
  const char* field_name;
};

class WindowVariables : public testing::TestWithParam<WindowVariable> {};

TEST_P(WindowVariables, EverySpellingOfAWindow) {
  const auto [name, field, field_name] = GetParam();
  const auto window = [&](const char* value) { return with(name, value).kernels.*field; };
  for (const char* never : {"never", "NEVER", "off", "Off"})
    EXPECT_EQ(window(never), Window::never()) << never;
  for (const char* all : {"all", "ALL", "All"}) EXPECT_EQ(window(all), Window::every_size()) << all;
  EXPECT_EQ(window("65536"), Window::up_to_bytes(65536));
  EXPECT_EQ(window("64K"), Window::up_to_bytes(65536));
  EXPECT_EQ(window("4m"), Window::up_to_bytes(std::size_t{4} << 20));
  EXPECT_EQ(window("64K..4M"), (Window{65536, std::size_t{4} << 20}));
  EXPECT_EQ(window("16M.."), Window::above_bytes(std::size_t{16} << 20));
  EXPECT_EQ(window("1G.."), Window::above_bytes(std::size_t{1} << 30));
  // auto resets a value given in code.
  Config code;
  code.kernels.*field = Window::up_to_bytes(1234);
  for (const char* automatic : {"auto", "AUTO"})
    EXPECT_EQ(apply({{name, automatic}}, code).kernels.*field, std::nullopt) << automatic;

  // Only the field changes.
  KernelChoices expected;
  expected.*field = Window::up_to_bytes(4096);
  EXPECT_EQ(with(name, "4K").kernels, expected);
  EXPECT_EQ(with(name, "4K").cutoffs, RouteCutoffs{});

  // The keywords of the retired variables are not windows; nor is 0, nor
  // a range the wrong way round.
  for (const char* bad :
       {"ll", "lamport", "staged", "dma", "0", "4M..64K", "64K..64K", "-1", "1.5M", "64KB", "all ",
        " never", "64K-4M", "..4M", "99999999999999999999"})
    expect_rejected(name, bad, "auto, never (or off), all, a size N");
  const std::string message = rejection(name, "4M..64K");
  EXPECT_NE(message.find("A < B"), std::string::npos) << message;
  // The parser's own reason comes with the syntax, as in the tuning file.
  EXPECT_NE(message.find("its start must be below its end"), std::string::npos) << message;
  const std::string zero = rejection(name, "0");
  EXPECT_NE(zero.find("holds no message: write never"), std::string::npos) << zero;
  const std::string typo = rejection(name, "64KB");
  EXPECT_NE(typo.find("'64KB' is not a byte count"), std::string::npos) << typo;

  // The effect line names the field, in the window syntax.
  std::vector<std::string> applied;
  for (const char* value : {"never", "all", "1M", "64K..4M", "16M..", "auto"})
    apply({{name, value}}, Config{}, &applied);
  ASSERT_EQ(applied.size(), 6u);
  const std::string prefix = std::string(name) + "=";
  const std::string field_text = std::string(" (") + field_name + " = ";
  EXPECT_EQ(applied[0], prefix + "never" + field_text + "never)");
  EXPECT_EQ(applied[1], prefix + "all" + field_text + "all)");
  EXPECT_EQ(applied[2], prefix + "1M" + field_text + "1M)");
  EXPECT_EQ(applied[3], prefix + "64K..4M" + field_text + "64K..4M)");
  EXPECT_EQ(applied[4], prefix + "16M.." + field_text + "16M..)");
  EXPECT_EQ(applied[5], prefix + "auto" + field_text + "the tuning file's or the built-in window)");
}

INSTANTIATE_TEST_SUITE_P(
    Environment, WindowVariables,
    testing::Values(
        WindowVariable{"PEERPLAN_ONE_SHOT_LAMPORT", &KernelChoices::one_shot_lamport,
                       "one_shot_lamport"},
        WindowVariable{"PEERPLAN_FUSED_LAMPORT", &KernelChoices::fused_lamport, "fused_lamport"},
        WindowVariable{"PEERPLAN_FUSED_LL", &KernelChoices::fused_ll, "fused_ll"},
        WindowVariable{"PEERPLAN_TWO_SHOT_DMA", &KernelChoices::two_shot_dma, "two_shot_dma"},
        WindowVariable{"PEERPLAN_TWO_SHOT_LAMPORT", &KernelChoices::two_shot_lamport,
                       "two_shot_lamport"}),
    [](const auto& info) { return std::string(info.param.name).substr(9); });

// The protocol variables of earlier versions are refused, each naming the
// variable that replaced it and how its values translate: set and ignored,
// they would silently change nothing.
TEST(Environment, RetiredVariablesNameTheirReplacement) {
  const std::pair<const char*, const char*> retired[] = {
      {"PEERPLAN_ONE_SHOT_PROTOCOL", "set PEERPLAN_ONE_SHOT_LAMPORT"},
      {"PEERPLAN_FUSED_PROTOCOL", "set PEERPLAN_FUSED_LAMPORT"},
      {"PEERPLAN_FUSED_LL_MAX_BYTES", "set PEERPLAN_FUSED_LL"},
      {"PEERPLAN_TWO_SHOT_PROTOCOL", "set PEERPLAN_TWO_SHOT_DMA"},
      {"PEERPLAN_TWO_SHOT_LAMPORT_MAX_BYTES", "set PEERPLAN_TWO_SHOT_LAMPORT"},
  };
  for (const auto& [old_name, replacement] : retired) {
    const std::string message = rejection(old_name, "64K");
    EXPECT_NE(message.find(std::string(old_name) + "=\"64K\" is no longer read"), std::string::npos)
        << message;
    EXPECT_NE(message.find(replacement), std::string::npos) << message;
    // Empty still counts as unset.
    EXPECT_NO_THROW(with(old_name, ""));
  }
  const std::string message = rejection("PEERPLAN_ONE_SHOT_PROTOCOL", "ll");
  EXPECT_NE(message.find("ll -> never, lamport -> all, N -> N.."), std::string::npos) << message;
}

TEST(Environment, Fallback) {
  EXPECT_EQ(with("PEERPLAN_FALLBACK", "mpi").fallback, Fallback::mpi);
  EXPECT_EQ(with("PEERPLAN_FALLBACK", "NCCL").fallback, Fallback::nccl);
  Config code;
  code.fallback = Fallback::mpi;
  EXPECT_EQ(apply({{"PEERPLAN_FALLBACK", "auto"}}, code).fallback, Fallback::automatic);
  for (const char* bad : {"gloo", "1", "mpi ", "host"})
    expect_rejected("PEERPLAN_FALLBACK", bad, "auto|nccl|mpi");
}

TEST(Environment, RowClusters) {
  for (const char* on : {"on", "ON", "1", "true", "Yes"})
    EXPECT_EQ(with("PEERPLAN_ROW_CLUSTERS", on).kernels.row_clusters, RowClusters::on) << on;
  for (const char* off : {"off", "Off", "0", "FALSE", "no"})
    EXPECT_EQ(with("PEERPLAN_ROW_CLUSTERS", off).kernels.row_clusters, RowClusters::off) << off;
  Config code;
  code.kernels.row_clusters = RowClusters::off;
  EXPECT_EQ(apply({{"PEERPLAN_ROW_CLUSTERS", "auto"}}, code).kernels.row_clusters,
            RowClusters::automatic);
  for (const char* bad : {"2", "clusters", "enabled", "auto ", "-1"})
    expect_rejected("PEERPLAN_ROW_CLUSTERS", bad, "auto|on|off");

  std::vector<std::string> applied;
  for (const char* value : {"1", "off", "AUTO"})
    apply({{"PEERPLAN_ROW_CLUSTERS", value}}, Config{}, &applied);
  ASSERT_EQ(applied.size(), 3u);
  EXPECT_EQ(applied[0], "PEERPLAN_ROW_CLUSTERS=1 (row clusters on (required of the GPU))");
  EXPECT_EQ(applied[1], "PEERPLAN_ROW_CLUSTERS=off (row clusters off: one block per row)");
  EXPECT_EQ(applied[2], "PEERPLAN_ROW_CLUSTERS=AUTO (row clusters where the GPU has them)");
}

TEST(Environment, OneShotMaxBlocksDescribesItsEffect) {
  std::vector<std::string> applied;
  apply({{"PEERPLAN_ONE_SHOT_MAX_BLOCKS", "80"}}, Config{}, &applied);
  apply({{"PEERPLAN_ONE_SHOT_MAX_BLOCKS", "auto"}}, Config{}, &applied);
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0], "PEERPLAN_ONE_SHOT_MAX_BLOCKS=80 (one-shot grid at most 80 blocks)");
  EXPECT_EQ(applied[1],
            "PEERPLAN_ONE_SHOT_MAX_BLOCKS=auto (one-shot grid = one block per multiprocessor)");
}

TEST(Environment, KernelKnobsUnsetOrEmptyLeaveTheCodesChoices) {
  Config code;
  code.kernels.one_shot_max_blocks = 64;
  code.kernels.one_shot_lamport = Window::never();
  code.kernels.fused_lamport = Window::above_bytes(128);
  code.kernels.fused_ll = Window::never();
  code.kernels.row_clusters = RowClusters::off;
  code.kernels.two_shot_dma = Window::never();
  code.kernels.two_shot_lamport = Window::up_to_bytes(64 << 10);
  std::vector<std::string> applied;
  const Config result = apply({{"PEERPLAN_ONE_SHOT_MAX_BLOCKS", ""},
                               {"PEERPLAN_ONE_SHOT_LAMPORT", ""},
                               {"PEERPLAN_FUSED_LAMPORT", ""},
                               {"PEERPLAN_FUSED_LL", ""},
                               {"PEERPLAN_ROW_CLUSTERS", ""},
                               {"PEERPLAN_TWO_SHOT_DMA", ""},
                               {"PEERPLAN_TWO_SHOT_LAMPORT", ""}},
                              code, &applied);
  EXPECT_EQ(result.kernels, code.kernels);
  EXPECT_TRUE(applied.empty());
  EXPECT_EQ(apply({}, code).kernels, code.kernels);
  // And the defaults are every knob's "auto".
  const KernelChoices defaults;
  EXPECT_EQ(defaults.one_shot_max_blocks, 0);
  EXPECT_EQ(defaults.one_shot_lamport, std::nullopt);
  EXPECT_EQ(defaults.fused_lamport, std::nullopt);
  EXPECT_EQ(defaults.fused_ll, std::nullopt);
  EXPECT_EQ(defaults.row_clusters, RowClusters::automatic);
  EXPECT_EQ(defaults.two_shot_dma, std::nullopt);
  EXPECT_EQ(defaults.two_shot_lamport, std::nullopt);
}

TEST(Environment, BadKernelKnobsAreReportedTogether) {
  try {
    apply({{"PEERPLAN_ONE_SHOT_MAX_BLOCKS", "0"},
           {"PEERPLAN_FUSED_LAMPORT", "fast"},
           {"PEERPLAN_ROW_CLUSTERS", "maybe"}});
    FAIL() << "accepted three bad values";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("PEERPLAN_ONE_SHOT_MAX_BLOCKS=\"0\""), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_FUSED_LAMPORT=\"fast\""), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_ROW_CLUSTERS=\"maybe\""), std::string::npos) << message;
  }
}

TEST(Environment, EveryEnumNameParsesBackToItsValue) {
  // What the logs print (to_string) can be pasted back into the environment.
  for (auto level : {LogLevel::none, LogLevel::warn, LogLevel::info, LogLevel::trace})
    EXPECT_EQ(with("PEERPLAN_DEBUG", to_string(level)).log_level, level);
  for (auto backend : {Backend::automatic, Backend::cuda, Backend::host})
    EXPECT_EQ(with("PEERPLAN_BACKEND", to_string(backend)).backend, backend);
  for (auto mode : {TransferMode::automatic, TransferMode::pull, TransferMode::push})
    EXPECT_EQ(with("PEERPLAN_TRANSFER_MODE", to_string(mode)).transfer_mode, mode);
  for (auto level : {P2PLevel::loc, P2PLevel::nvl, P2PLevel::pix, P2PLevel::pxb, P2PLevel::phb,
                     P2PLevel::node, P2PLevel::sys, P2PLevel::automatic})
    EXPECT_EQ(with("PEERPLAN_P2P_LEVEL", to_string(level)).p2p_level, level);
  for (auto clusters : {RowClusters::automatic, RowClusters::on, RowClusters::off})
    EXPECT_EQ(with("PEERPLAN_ROW_CLUSTERS", to_string(clusters)).kernels.row_clusters, clusters);
}

TEST(Environment, ReportsEveryBadVariableAtOnce) {
  try {
    apply({{"PEERPLAN_DEBUG", "LOUD"}, {"PEERPLAN_TIMEOUT_MS", "soon"}, {"PEERPLAN_DEVICE", "1"}});
    FAIL() << "accepted two bad values";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("PEERPLAN_DEBUG=\"LOUD\""), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_TIMEOUT_MS=\"soon\""), std::string::npos) << message;
    EXPECT_EQ(message.find("PEERPLAN_DEVICE"), std::string::npos) << message;
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

TEST(Environment, AppliedLinesDescribeEachOverrideInOrder) {
  std::vector<std::string> applied;
  apply({{"PEERPLAN_TIMEOUT_MS", "5000"},
         {"PEERPLAN_DEBUG", "info"},
         {"PEERPLAN_ONE_SHOT_MAX_BYTES", "512K"},
         {"PEERPLAN_FUSED_MAX_BYTES", "0"},
         {"PEERPLAN_DISABLE_P2P", "1"}},
        Config{}, &applied);
  ASSERT_EQ(applied.size(), 5u);
  // Applied in the documented order, whatever order they were set in.
  EXPECT_EQ(applied[0], "PEERPLAN_DEBUG=info (log level INFO)");
  EXPECT_EQ(applied[1], "PEERPLAN_TIMEOUT_MS=5000 (timeout 5000 ms)");
  EXPECT_EQ(applied[2], "PEERPLAN_ONE_SHOT_MAX_BYTES=512K (one-shot max 524288 bytes)");
  EXPECT_EQ(applied[3], "PEERPLAN_FUSED_MAX_BYTES=0 (fused one-shot route disabled)");
  EXPECT_EQ(applied[4].rfind("PEERPLAN_DISABLE_P2P=1 (P2P disabled", 0), 0u) << applied[4];
}

TEST(Environment, NoAppliedLinesWhenAValueIsRejected) {
  std::vector<std::string> applied;
  EXPECT_THROW(
      apply({{"PEERPLAN_TIMEOUT_MS", "5000"}, {"PEERPLAN_DEVICE", "x"}}, Config{}, &applied),
      InvalidArgument);
  EXPECT_TRUE(applied.empty());
}

// --- the real process environment ---------------------------------------

// Sets or unsets one variable for the lifetime of the guard.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedVariable() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

class ProcessEnvironment : public testing::Test {
 protected:
  // Whatever PEERPLAN_* the test runner inherited must not leak in.
  void SetUp() override {
    for (std::string_view name : environment_variable_names())
      cleared_.push_back(std::make_unique<ScopedVariable>(std::string(name).c_str(), nullptr));
  }
  std::vector<std::unique_ptr<ScopedVariable>> cleared_;
};

TEST_F(ProcessEnvironment, PublicApplyEnvironmentReadsSetenv) {
  ScopedVariable timeout("PEERPLAN_TIMEOUT_MS", "1234");
  ScopedVariable debug("PEERPLAN_DEBUG", "trace");
  ScopedVariable level("PEERPLAN_P2P_LEVEL", "PIX");
  const Config config = apply_environment(Config{});
  EXPECT_EQ(config.timeout.count(), 1234);
  EXPECT_EQ(config.log_level, LogLevel::trace);
  EXPECT_EQ(config.p2p_level, P2PLevel::pix);
  EXPECT_EQ(config.device, Config{}.device);
}

TEST_F(ProcessEnvironment, AppliedLinesFromTheRealEnvironment) {
  ScopedVariable two_shot("PEERPLAN_TWO_SHOT_MAX_BYTES", "16M");
  std::vector<std::string> applied;
  const Config config = apply_environment(Config{}, &applied);
  EXPECT_EQ(config.cutoffs.two_shot_max_bytes, 16u << 20);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0], "PEERPLAN_TWO_SHOT_MAX_BYTES=16M (two-shot max 16777216 bytes)");
}

TEST_F(ProcessEnvironment, BadRealValueThrowsNamingTheVariable) {
  ScopedVariable world("PEERPLAN_WORLD_SIZE", "many");
  try {
    apply_environment(Config{});
    FAIL() << "accepted PEERPLAN_WORLD_SIZE=many";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_WORLD_SIZE=\"many\""), std::string::npos)
        << e.what();
  }
}

TEST_F(ProcessEnvironment, UnsetEnvironmentChangesNothing) {
  Config code;
  code.backend = Backend::host;
  code.cutoffs.one_shot_max_bytes = 1000;
  const Config config = apply_environment(code);
  EXPECT_EQ(config.backend, Backend::host);
  EXPECT_EQ(config.cutoffs, code.cutoffs);
}

}  // namespace
}  // namespace peerplan
