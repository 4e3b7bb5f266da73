// SPDX-License-Identifier: Apache-2.0
// peerplan's NVTX ranges, end to end on the host backend: this binary runs
// with NVTX_INJECTION64_PATH set to the recorder (nvtx_recorder.cpp), which
// NVTX's loader attaches exactly as it would a profiler's injection. The
// test reads what the recorder saw through the recorder's own copy, dlopen()ed
// from the same path.
#include <dlfcn.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "peerplan/peerplan.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan {
namespace {

using mpi_test::test_comm;

// Every line the recorder holds (nvtx_recorder.cpp says their form).
std::vector<std::string> recorded() {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  if (path == nullptr) {
    ADD_FAILURE() << "NVTX_INJECTION64_PATH is not set: run this test through ctest";
    return {};
  }
  static void* library = dlopen(path, RTLD_NOW);
  if (library == nullptr) {
    ADD_FAILURE() << "cannot load " << path << ": " << dlerror();
    return {};
  }
  using Events = const char* (*)();
  const auto events = reinterpret_cast<Events>(dlsym(library, "nvtx_recorder_events"));
  if (events == nullptr) {
    ADD_FAILURE() << path << " has no nvtx_recorder_events";
    return {};
  }
  std::vector<std::string> lines;
  std::istringstream in(events());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The recorder's lines about the peerplan domain from `from` on.
std::vector<std::string> peerplan_lines(std::size_t from) {
  const auto all = recorded();
  std::vector<std::string> lines;
  for (std::size_t i = from; i < all.size(); ++i) {
    if (all[i].starts_with("push peerplan ") || all[i] == "pop peerplan" ||
        all[i] == "domain peerplan")
      lines.push_back(all[i]);
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += "\n  " + line;
  return text;
}

constexpr const char* kLifecycle = "ff5b8def";
constexpr const char* kP2P = "ff76b900";
constexpr const char* kFallback = "ffe8710a";

// A whole life on the host backend: a declared all-reduce on a P2P route,
// one the cutoffs send to the fallback, a fused call, an undeclared call.
void run_workload(Config config) {
  config.backend = Backend::host;
  config.cutoffs.one_shot_max_bytes = 4096;
  config.cutoffs.two_shot_max_bytes = 0;  // "large" takes the fallback
  auto comm = Communicator::create(test_comm(), config);
  std::vector<float> weight(64, 1.0f);
  const std::vector<Declaration> declarations{
      Declaration::all_reduce("small", DataType::f32, TensorLayout{256}),
      Declaration::all_reduce("large", DataType::f32, TensorLayout{4096}),
      Declaration::fused_add_rms_norm("norm", DataType::f32, TensorLayout{2, 64}, weight.data(),
                                      1e-5f)};
  comm->declare(declarations);
  comm->register_buffers(std::vector<BufferRegion>{});
  std::vector<float> in(4096, 1.0f), out(4096), residual(128, 0.0f);
  comm->all_reduce(in.data(), out.data(), DataType::f32, TensorLayout{256});
  comm->all_reduce(in.data(), out.data(), DataType::f32, TensorLayout{4096});
  comm->fused_add_rms_norm(out.data(), residual.data(), weight.data(), 1e-5f, DataType::f32,
                           TensorLayout{2, 64});
  comm->all_reduce(in.data(), out.data(), DataType::f32, TensorLayout{3, 5});
  comm->close();
}

struct Push {
  std::string colour;
  std::string payload;
  std::string text;
};

// "push peerplan <colour> <payload> <text>"; nullopt for any other line.
std::optional<Push> parse_push(const std::string& line) {
  const std::string head = "push peerplan ";
  if (!line.starts_with(head)) return std::nullopt;
  std::istringstream in(line.substr(head.size()));
  Push push;
  in >> push.colour >> push.payload;
  std::getline(in >> std::ws, push.text);
  return push;
}

TEST(NvtxRanges, EveryStepAndCallIsARangeInThePeerplanDomain) {
  const std::size_t mark = recorded().size();
  run_workload(Config{});
  auto lines = peerplan_lines(mark);
  // The domain is made once per process, on the first communicator with
  // ranges on (possibly in another test of this binary).
  std::erase(lines, std::string("domain peerplan"));
  const auto all = recorded();
  EXPECT_EQ(std::count(all.begin(), all.end(), std::string("domain peerplan")), 1) << joined(all);

  // Balanced, never nested (no step calls another that marks a range).
  int depth = 0;
  std::vector<Push> pushes;
  for (const auto& line : lines) {
    if (const auto push = parse_push(line)) {
      EXPECT_EQ(depth, 0) << "nested range at " << line << joined(lines);
      ++depth;
      pushes.push_back(*push);
    } else {
      ASSERT_EQ(line, "pop peerplan") << joined(lines);
      --depth;
      ASSERT_GE(depth, 0) << "pop without push" << joined(lines);
    }
  }
  EXPECT_EQ(depth, 0) << joined(lines);

  ASSERT_EQ(pushes.size(), 8u) << joined(lines);
  const auto expect_push = [&](std::size_t i, const char* colour, const std::string& payload,
                               const std::string& start, const std::string& end) {
    const Push& p = pushes[i];
    EXPECT_EQ(p.colour, colour) << p.text;
    EXPECT_EQ(p.payload, payload) << p.text;
    EXPECT_TRUE(p.text.starts_with(start)) << "\"" << p.text << "\" should start with " << start;
    EXPECT_TRUE(p.text.ends_with(end)) << "\"" << p.text << "\" should end with " << end;
  };
  expect_push(0, kLifecycle, "-", "create", "create");
  expect_push(1, kLifecycle, "3", "declare", "declare");
  expect_push(2, kLifecycle, "-", "register_buffers", "register_buffers");
  // Declared: the plan's name, route and protocol, and its bytes.
  expect_push(3, kP2P, "1024", "all_reduce 'small': one_shot ", ", 1024 B");
  expect_push(4, kFallback, "16384", "all_reduce 'large': fallback (", ", 16384 B");
  expect_push(5, kP2P, "512", "fused_add_rms_norm 'norm': fused_", ", 512 B");
  expect_push(6, kFallback, "60", "all_reduce undeclared: fallback, f32 [3, 5]", ", 60 B");
  expect_push(7, kLifecycle, "-", "close", "close");
}

TEST(NvtxRanges, OffMakesNoPeerplanRanges) {
  // Through the environment, as PEERPLAN_NVTX=0 on a command line.
  ASSERT_EQ(setenv("PEERPLAN_NVTX", "0", 1), 0);
  std::size_t mark = recorded().size();
  run_workload(Config{});
  unsetenv("PEERPLAN_NVTX");
  EXPECT_EQ(peerplan_lines(mark), std::vector<std::string>{}) << joined(peerplan_lines(mark));

  // Through Config.
  Config off;
  off.nvtx = false;
  mark = recorded().size();
  run_workload(off);
  EXPECT_EQ(peerplan_lines(mark), std::vector<std::string>{}) << joined(peerplan_lines(mark));

  // The recorder is attached: with ranges on, the same run shows them.
  mark = recorded().size();
  run_workload(Config{});
  EXPECT_FALSE(peerplan_lines(mark).empty());
}

}  // namespace
}  // namespace peerplan
