// SPDX-License-Identifier: Apache-2.0
// apply_protocol_tuning: a tuning entry's windows move a tunable
// transport's windows, field by field; an explicit Config window wins; a
// transport whose windows are fixed (the host backend) or that pulls (the
// one-shot and the two-shot) keeps its own; never closes the fused
// Lamport window and the two-shot's. And the router then chooses by the
// moved windows.
#include "routing/protocol_tuning.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include "cuda_push_windows.hpp"

#include "routing/router.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

ProtocolWindows cuda_push() { return test::cuda_push_windows(); }

ProtocolTuning every_field() {
  ProtocolTuning t;
  t.one_shot_lamport = Window::above_bytes(256 * kKiB);
  t.fused_lamport = Window{16 * kKiB, 8 * kMiB};
  t.fused_ll = Window::up_to_bytes(512 * kKiB);
  t.two_shot_dma = Window::above_bytes(32 * kMiB);
  t.two_shot_lamport = Window::up_to_bytes(1 * kMiB);
  return t;
}

TEST(ProtocolTuning, AnEmptyEntryChangesNothing) {
  EXPECT_TRUE(is_empty(ProtocolTuning{}));
  EXPECT_FALSE(is_empty(every_field()));
  EXPECT_EQ(apply_protocol_tuning(cuda_push(), ProtocolTuning{}, KernelChoices{}), cuda_push());
}

TEST(ProtocolTuning, EveryFieldMovesItsWindow) {
  const ProtocolWindows w = apply_protocol_tuning(cuda_push(), every_field(), KernelChoices{});
  EXPECT_EQ(w.one_shot_lamport, Window::above_bytes(256 * kKiB));
  EXPECT_EQ(w.fused_lamport, (Window{16 * kKiB, 8 * kMiB}));
  EXPECT_EQ(w.fused_ll, Window::up_to_bytes(512 * kKiB));
  EXPECT_EQ(w.two_shot_dma, Window::above_bytes(32 * kMiB));
  EXPECT_EQ(w.two_shot_lamport, Window::up_to_bytes(1 * kMiB));
  EXPECT_TRUE(w.lines && w.tunable && w.fused_two_shot && !w.pull) << "capabilities stay";
}

TEST(ProtocolTuning, OneFieldAtATime) {
  ProtocolTuning t;
  t.fused_ll = Window::never();
  ProtocolWindows expected = cuda_push();
  expected.fused_ll = Window::never();
  EXPECT_EQ(apply_protocol_tuning(cuda_push(), t, KernelChoices{}), expected);
  // The fused Lamport window moves whole, both its ends.
  t = ProtocolTuning{};
  t.fused_lamport = Window{0, 16 * kMiB};
  expected = cuda_push();
  expected.fused_lamport = Window{0, 16 * kMiB};
  EXPECT_EQ(apply_protocol_tuning(cuda_push(), t, KernelChoices{}), expected);
  // The copy-engine window alone, at every size or above a size.
  for (const Window dma : {Window::every_size(), Window::above_bytes(16 * kMiB)}) {
    t = ProtocolTuning{};
    t.two_shot_dma = dma;
    expected = cuda_push();
    expected.two_shot_dma = dma;
    EXPECT_EQ(apply_protocol_tuning(cuda_push(), t, KernelChoices{}), expected) << dma.above;
  }
  // The two-shot's Lamport window alone, on a transport that has it shut.
  ASSERT_EQ(cuda_push().two_shot_lamport, Window::never());
  for (const std::size_t max : {256 * kKiB, 64 * kMiB}) {
    t = ProtocolTuning{};
    t.two_shot_lamport = Window::up_to_bytes(max);
    expected = cuda_push();
    expected.two_shot_lamport = Window::up_to_bytes(max);
    EXPECT_EQ(apply_protocol_tuning(cuda_push(), t, KernelChoices{}), expected) << max;
  }
}

TEST(ProtocolTuning, NeverClosesTheTwoShotLamportWindow) {
  ProtocolWindows open = cuda_push();
  open.two_shot_lamport = Window::up_to_bytes(512 * kKiB);  // a transport whose default is open
  ProtocolTuning t;
  t.two_shot_lamport = Window::never();
  const ProtocolWindows w = apply_protocol_tuning(open, t, KernelChoices{});
  EXPECT_TRUE(w.two_shot_lamport.is_never());
  ProtocolWindows expected = open;
  expected.two_shot_lamport = Window::never();
  EXPECT_EQ(w, expected) << "no other window moves";
}

TEST(ProtocolTuning, NeverClosesTheFusedLamportWindow) {
  ProtocolTuning t;
  t.fused_lamport = Window::never();
  const ProtocolWindows w = apply_protocol_tuning(cuda_push(), t, KernelChoices{});
  EXPECT_TRUE(w.fused_lamport.is_never());
  const auto fused =
      Declaration::fused_add_rms_norm("f", DataType::bf16, TensorLayout{64, 7168}, nullptr, 1e-6f);
  EXPECT_EQ(choose_protocol(Route::fused_one_shot, fused, message_bytes(fused), w).protocol,
            Protocol::ll)
      << "917504 bytes: inside the default Lamport window, LL once it is closed";
}

TEST(ProtocolTuning, AnExplicitConfigWindowWins) {
  KernelChoices kernels;
  kernels.one_shot_lamport = Window::never();
  kernels.fused_lamport = Window::above_bytes(32 * kKiB);
  kernels.fused_ll = Window::up_to_bytes(1 * kMiB);
  kernels.two_shot_dma = Window::never();
  kernels.two_shot_lamport = Window::never();
  // The transport's windows already hold the config's values; the file's
  // must not replace them.
  EXPECT_EQ(apply_protocol_tuning(cuda_push(), every_field(), kernels), cuda_push());
  KernelChoices only_ll;
  only_ll.fused_ll = Window::up_to_bytes(1 * kMiB);
  const ProtocolWindows w = apply_protocol_tuning(cuda_push(), every_field(), only_ll);
  EXPECT_EQ(w.fused_ll, Window::up_to_bytes(2 * kMiB)) << "the config's (transport's) value";
  EXPECT_EQ(w.one_shot_lamport, Window::above_bytes(256 * kKiB))
      << "the file's: the config left it automatic";
  EXPECT_EQ(w.two_shot_dma, Window::above_bytes(32 * kMiB))
      << "the file's: the config left it automatic";
  EXPECT_EQ(w.two_shot_lamport, Window::up_to_bytes(1 * kMiB))
      << "the file's: the config left it automatic";
  // Each explicit two-shot choice keeps the transport's window (which
  // already holds it), even one that happens to equal the file's.
  for (const Window above : {Window::never(), Window::every_size(), Window::above_bytes(32 * kMiB),
                             Window::above_bytes(64 * kMiB)}) {
    KernelChoices dma;
    dma.two_shot_dma = above;
    EXPECT_EQ(apply_protocol_tuning(cuda_push(), every_field(), dma).two_shot_dma, Window::never())
        << above.above;
  }
  // Likewise for the two-shot's Lamport window: the transport's window
  // (here shut) stays, whatever the config chose.
  for (const Window max : {Window::never(), Window::every_size(), Window::up_to_bytes(1 * kMiB)}) {
    KernelChoices lamport;
    lamport.two_shot_lamport = max;
    const ProtocolWindows moved = apply_protocol_tuning(cuda_push(), every_field(), lamport);
    EXPECT_EQ(moved.two_shot_lamport, Window::never()) << max.up_to;
    EXPECT_EQ(moved.two_shot_dma, Window::above_bytes(32 * kMiB))
        << "the other two-shot window moves";
  }
}

TEST(ProtocolTuning, FixedWindowsAndPullKeepTheirOwn) {
  EXPECT_EQ(apply_protocol_tuning(ProtocolWindows{}, every_field(), KernelChoices{}),
            ProtocolWindows{})
      << "the host backend's single protocol";
  EXPECT_EQ(apply_protocol_tuning(ProtocolWindows{}, every_field(), KernelChoices{}).two_shot_dma,
            Window::never())
      << "the host two-shot has no copy-engine protocol";
  ProtocolWindows pull = cuda_push();
  pull.pull = true;
  pull.lines = false;
  pull.one_shot_lamport = Window::never();
  const ProtocolWindows w = apply_protocol_tuning(pull, every_field(), KernelChoices{});
  EXPECT_EQ(w.one_shot_lamport, Window::never()) << "pull has one one-shot protocol";
  EXPECT_EQ(w.fused_ll, Window::up_to_bytes(512 * kKiB)) << "the fused op pushes in pull mode too";
  EXPECT_EQ(w.two_shot_dma, Window::never()) << "the pull two-shot has one protocol";
  EXPECT_EQ(w.two_shot_lamport, Window::never()) << "the pull two-shot has one protocol";
  ProtocolWindows pull_with_lines = cuda_push();
  pull_with_lines.pull = true;
  EXPECT_EQ(apply_protocol_tuning(pull_with_lines, every_field(), KernelChoices{}).two_shot_lamport,
            Window::never())
      << "pulling alone keeps the window shut";
  // A tunable push transport without the Lamport region cannot open it.
  ProtocolWindows no_lines = cuda_push();
  no_lines.lines = false;
  EXPECT_EQ(apply_protocol_tuning(no_lines, every_field(), KernelChoices{}).two_shot_lamport,
            Window::never());
  EXPECT_EQ(
      apply_protocol_tuning(ProtocolWindows{}, every_field(), KernelChoices{}).two_shot_lamport,
      Window::never())
      << "the host two-shot has no Lamport protocol";
}

TEST(ProtocolTuning, TheRouterChoosesByTheMovedWindows) {
  const auto all_reduce =
      Declaration::all_reduce("ar", DataType::bf16, TensorLayout{std::int64_t{64} * 1024});
  const std::size_t bytes = message_bytes(all_reduce);  // 128 KiB
  EXPECT_EQ(choose_protocol(Route::one_shot, all_reduce, bytes, cuda_push()).protocol,
            Protocol::lamport);
  const ProtocolWindows tuned = apply_protocol_tuning(cuda_push(), every_field(), KernelChoices{});
  EXPECT_EQ(choose_protocol(Route::one_shot, all_reduce, bytes, tuned).protocol, Protocol::ll);

  // The file's copy-engine window starts above 32 MiB; the transport's is empty.
  const auto two_shot_of = [](std::size_t bytes, const ProtocolWindows& w) {
    const auto d = Declaration::all_reduce("ar", DataType::bf16,
                                           TensorLayout{static_cast<std::int64_t>(bytes / 2)});
    return choose_protocol(Route::two_shot, d, message_bytes(d), w).protocol;
  };
  EXPECT_EQ(two_shot_of(64 * kMiB, cuda_push()), Protocol::staged);
  EXPECT_EQ(two_shot_of(64 * kMiB, tuned), Protocol::dma);
  EXPECT_EQ(two_shot_of(32 * kMiB, tuned), Protocol::staged) << "the window starts above it";
}

TEST(ProtocolTuning, DescribeNamesEveryField) {
  EXPECT_EQ(describe_protocol_tuning(ProtocolTuning{}),
            "one_shot_lamport=auto fused_lamport=auto fused_ll=auto two_shot_dma=auto "
            "two_shot_lamport=auto");
  EXPECT_EQ(describe_protocol_tuning(every_field()),
            "one_shot_lamport=256K.. fused_lamport=16K..8M fused_ll=512K two_shot_dma=32M.. "
            "two_shot_lamport=1M");
}

TEST(ProtocolTuning, DescribeWindowsNamesThoseTheTransportRuns) {
  EXPECT_EQ(describe_protocol_windows(cuda_push()),
            "one_shot_lamport=64K.. fused_lamport=64K..4M fused_ll=2M two_shot_dma=never "
            "two_shot_lamport=never");
  ProtocolWindows pull = cuda_push();
  pull.pull = true;
  pull.lines = false;
  EXPECT_EQ(describe_protocol_windows(pull), "fused_lamport=64K..4M fused_ll=2M")
      << "pull has one one-shot and one two-shot protocol";
}

TEST(ProtocolTuning, TheConfiguredWindowsApplyWhereTheTransportRunsThem) {
  KernelChoices kernels;
  kernels.one_shot_lamport = Window::every_size();
  kernels.fused_ll = Window::never();
  kernels.two_shot_dma = Window::above_bytes(16 * kMiB);
  ProtocolWindows expected = cuda_push();
  expected.one_shot_lamport = Window::every_size();
  expected.fused_ll = Window::never();
  expected.two_shot_dma = Window::above_bytes(16 * kMiB);
  EXPECT_EQ(apply_configured_windows(cuda_push(), kernels), expected);
  ProtocolWindows pull = cuda_push();
  pull.pull = true;
  pull.lines = false;
  pull.one_shot_lamport = Window::never();
  const ProtocolWindows w = apply_configured_windows(pull, kernels);
  EXPECT_EQ(w.one_shot_lamport, Window::never()) << "pull has one one-shot protocol";
  EXPECT_EQ(w.two_shot_dma, Window::never()) << "the pull two-shot has one protocol";
  EXPECT_EQ(w.fused_ll, Window::never()) << "the fused op pushes in pull mode too";
}

}  // namespace
}  // namespace peerplan::routing
