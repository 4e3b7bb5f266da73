// SPDX-License-Identifier: Apache-2.0
// Call-argument validation end to end: what all_reduce and fused_add_rms_norm
// accept and reject, on a declared key (a hit) and on an undeclared one (the
// fallback). Every rejection is an InvalidArgument whose message names the
// argument or layout field and says what to change; it happens before anything
// is read, written, reduced or counted, and the communicator stays usable. The
// rules are those of declare() (one validation serves both paths), widened for
// undeclared calls to what the fallback serves: zero-element calls, any order
// of non-overlapping dimensions, an inner stride other than 1 (all-reduce
// only).
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

constexpr float kEps = 1e-6f;
constexpr std::int64_t kBig = std::int64_t{1} << 62;

std::uint64_t total_calls(const Stats& s) {
  return s.p2p_calls + s.fallback_undeclared + s.fallback_over_cutoff + s.fallback_p2p_disabled;
}

class CallValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = create_on_world();
    comm_->declare(std::vector<Declaration>{
        Declaration::all_reduce("declared_ar", DataType::f32, TensorLayout{2, 64}),
        Declaration::fused_add_rms_norm("declared_norm", DataType::f32, TensorLayout{2, 64},
                                        weight_.data(), kEps)});
  }
  void TearDown() override {
    // After every rejection the communicator still works.
    const AllReduceOutcome o = run_all_reduce(*comm_, DataType::f32, TensorLayout{3, 40},
                                              Inputs::integers, false, next_seed());
    expect_all_reduce_correct(o, "a valid call after the rejected ones");
    comm_->close();
  }

  // Runs `call`, which must throw InvalidArgument whose message holds every
  // piece of `expected`. Nothing may have been written to `untouched` (the
  // call's buffers) nor counted in the statistics. With `same_everywhere`,
  // the message must be the same on every rank (layout problems do not
  // depend on the rank; pointer problems print this rank's pointers).
  template <class Call>
  void expect_invalid(const std::string& what, Call&& call,
                      std::initializer_list<std::string> expected, bool same_everywhere = true) {
    const std::vector<float> before = buffer_;
    const std::uint64_t calls_before = total_calls(comm_->stats());
    std::string message;
    ErrorCode code = ErrorCode::ok;
    try {
      call();
    } catch (const Error& e) {
      message = e.what();
      code = e.code();
    } catch (const std::exception& e) {
      message = std::string("not a peerplan::Error: ") + e.what();
      code = ErrorCode::internal;
    }
    EXPECT_EQ(code, ErrorCode::invalid_argument)
        << what << ": " << (message.empty() ? std::string("accepted") : message);
    for (const std::string& piece : expected) {
      EXPECT_NE(message.find(piece), std::string::npos)
          << what << ": the message should contain \"" << piece << "\"; got: " << message;
    }
    EXPECT_EQ(buffer_, before) << what << ": the rejected call wrote into its buffers";
    EXPECT_EQ(total_calls(comm_->stats()), calls_before) << what << ": a rejected call was counted";
    if (same_everywhere) {
      const auto differing = ranks_differing_from_rank0(fnv1a(message));
      EXPECT_TRUE(differing.empty()) << what << ": the message differs from rank 0's on ranks "
                                     << join(differing) << "; here: " << message;
    }
  }

  void all_reduce_rejected(const std::string& what, const TensorLayout& layout,
                           std::initializer_list<std::string> expected,
                           DataType dtype = DataType::f32) {
    expect_invalid(
        what, [&] { comm_->all_reduce(data(), data(), dtype, layout); }, expected);
  }
  void fused_rejected(const std::string& what, const TensorLayout& layout,
                      std::initializer_list<std::string> expected, DataType dtype = DataType::f32) {
    expect_invalid(
        what,
        [&] {
          comm_->fused_add_rms_norm(data(), residual_.data(), weight_.data(), kEps, dtype, layout);
        },
        expected);
  }

  float* data() { return buffer_.data(); }

  std::unique_ptr<Communicator> comm_;
  Buffer weight_ = make_weight(DataType::f32, 64, 99);
  // 64-byte aligned by the allocator (std::vector<float> of this size is
  // allocated by operator new, which aligns to 16 at least).
  std::vector<float> buffer_ = std::vector<float>(4096, 1.0f);
  std::vector<float> residual_ = std::vector<float>(4096, 0.5f);
};

// ---------------------------------------------------------------- shapes

TEST_F(CallValidation, ByteSpanOverflowingIsRejected) {
  // 2^62 + 16 floats: the byte count wraps to 64 bytes.
  all_reduce_rejected("[2^62 + 16]", TensorLayout{kBig + 16}, {"all_reduce", "layout", "bytes"});
  fused_rejected("fused [2^62, 64]", TensorLayout{kBig, 64},
                 {"fused_add_rms_norm", "layout", "bytes"});
}

TEST_F(CallValidation, ElementCountWrappingIsRejected) {
  // The element count wraps to 2^63 (negative) and to 0: no silent no-op.
  all_reduce_rejected("[2^62, 2]", TensorLayout{kBig, 2}, {"layout", "bytes"});
  all_reduce_rejected("[2^32, 2^32]", TensorLayout{std::int64_t{1} << 32, std::int64_t{1} << 32},
                      {"layout", "bytes"});
}

TEST_F(CallValidation, TensorLargerThanAnyRankCanAddressIsRejected) {
  // 2^52 bytes: no overflow, but no rank has that much memory (the fallback
  // threw std::bad_alloc staging it).
  all_reduce_rejected("[2^40, 1024]", TensorLayout{std::int64_t{1} << 40, 1024},
                      {"layout", "bytes", "2^48"});
}

TEST_F(CallValidation, NegativeDimensionIsRejected) {
  all_reduce_rejected("[4, -64]", TensorLayout{4, -64}, {"layout.shape[1] is -64"});
}

TEST_F(CallValidation, RankZeroLayoutIsRejected) {
  all_reduce_rejected("rank 0", TensorLayout{}, {"layout.rank is 0"});
  fused_rejected("fused rank 0", TensorLayout{}, {"layout.rank is 0"});
}

// ------------------------------------------------------------------ dtype

TEST_F(CallValidation, UnknownDtypeIsRejectedBeforeAnythingElse) {
  const auto bad = static_cast<DataType>(7);
  all_reduce_rejected("undeclared", TensorLayout{3, 40}, {"all_reduce", "dtype", "7"}, bad);
  // A layout that would be rejected too: the dtype is reported first.
  all_reduce_rejected("bad layout too", TensorLayout{4, -64}, {"dtype"}, bad);
  fused_rejected("fused", TensorLayout{2, 64}, {"fused_add_rms_norm", "dtype", "7"}, bad);
}

// ---------------------------------------------------------------- strides

TEST_F(CallValidation, ZeroStrideIsRejected) {
  all_reduce_rejected("broadcast rows", strided_layout({4, 64}, {0, 1}),
                      {"layout.strides[0] is 0", "positive"});
  all_reduce_rejected("broadcast elements", strided_layout({4, 64}, {64, 0}),
                      {"layout.strides[1] is 0", "positive"});
}

TEST_F(CallValidation, NegativeStrideIsRejected) {
  // A reversed view whose first element is the last in memory: the
  // fallback wrote before the pointer.
  all_reduce_rejected("reversed rows", strided_layout({4, 64}, {-64, 1}),
                      {"layout.strides[0] is -64", "positive"});
  fused_rejected("fused reversed rows", strided_layout({2, 64}, {-64, 1}),
                 {"layout.strides[0] is -64", "positive"});
}

TEST_F(CallValidation, OverlappingStridesAreRejected) {
  all_reduce_rejected("rows overlapping", strided_layout({4, 64}, {32, 1}),
                      {"layout.strides[0] is 32", "at least 64", "overlap"});
  all_reduce_rejected("two dimensions with one stride", strided_layout({8, 8}, {1, 1}),
                      {"overlap"});
  fused_rejected("fused rows overlapping", strided_layout({2, 64}, {16, 1}),
                 {"layout.strides[0] is 16", "at least 64", "overlap"});
}

TEST_F(CallValidation, FusedRowsMustBeContiguous) {
  fused_rejected("column-major rows", strided_layout({4, 8}, {1, 4}),
                 {"layout.strides[1] is 4", "contiguous"});
}

// --------------------------------------------------------------- pointers

TEST_F(CallValidation, NullPointersAreRejected) {
  expect_invalid("null in",
                 [&] {
                   comm_->all_reduce(nullptr, data(), DataType::f32, {2, 64});
                 },
                 {"in", "null"});
  expect_invalid("null out (undeclared)",
                 [&] {
                   comm_->all_reduce(data(), nullptr, DataType::f32, {3, 40});
                 },
                 {"out", "null"});
  expect_invalid(
      "null residual",
      [&] {
        comm_->fused_add_rms_norm(data(), nullptr, weight_.data(), kEps, DataType::f32, {2, 64});
      },
      {"residual", "null"});
  expect_invalid(
      "null weight",
      [&] {
        comm_->fused_add_rms_norm(data(), residual_.data(), nullptr, kEps, DataType::f32, {2, 64});
      },
      {"weight", "null"});
}

TEST_F(CallValidation, PointerMisalignedAgainstTheDeclarationIsRejected) {
  // The declared plans promise 16-byte aligned pointers; 4 bytes off is a
  // valid float address but breaks that promise.
  expect_invalid(
      "in 4 bytes off",
      [&] {
        comm_->all_reduce(data() + 1, data() + 1, DataType::f32, {2, 64});
      },
      {"all_reduce", "in", "16-byte", "declared_ar"}, false);
  expect_invalid(
      "out 4 bytes off",
      [&] {
        comm_->all_reduce(data(), data() + 129, DataType::f32, {2, 64});
      },
      {"out", "16-byte", "declared_ar"}, false);
  expect_invalid(
      "inout 4 bytes off",
      [&] {
        comm_->fused_add_rms_norm(data() + 1, residual_.data(), weight_.data(), kEps, DataType::f32,
                                  {2, 64});
      },
      {"fused_add_rms_norm", "inout", "16-byte", "declared_norm"}, false);
  expect_invalid(
      "residual 4 bytes off",
      [&] {
        comm_->fused_add_rms_norm(data(), residual_.data() + 1, weight_.data(), kEps, DataType::f32,
                                  {2, 64});
      },
      {"residual", "16-byte", "declared_norm"}, false);
}

TEST_F(CallValidation, LargerDeclaredAlignmentIsEnforced) {
  auto declaration = Declaration::all_reduce("aligned_256", DataType::f32, TensorLayout{1, 64});
  declaration.input_alignment = 256;
  comm_->declare(std::vector<Declaration>{declaration});
  auto* aligned =
      reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(data()) + 255) / 256 * 256);
  expect_invalid(
      "16 bytes off a 256-byte promise",
      [&] {
        comm_->all_reduce(aligned + 4, aligned + 4, DataType::f32, {1, 64});
      },
      {"in", "256-byte", "aligned_256"}, false);
  EXPECT_NO_THROW(comm_->all_reduce(aligned, aligned, DataType::f32, {1, 64}));
}

TEST_F(CallValidation, PointerNotAlignedToItsElementIsRejected) {
  auto* odd = reinterpret_cast<float*>(reinterpret_cast<std::byte*>(data()) + 1);
  expect_invalid(
      "undeclared, in 1 byte off",
      [&] {
        comm_->all_reduce(odd, data(), DataType::f32, {3, 40});
      },
      {"in", "4-byte"}, false);
  expect_invalid(
      "undeclared fused, weight 1 byte off",
      [&] {
        auto* weight = reinterpret_cast<const std::byte*>(weight_.data()) + 1;
        comm_->fused_add_rms_norm(data(), residual_.data(), weight, kEps, DataType::f32, {3, 64});
      },
      {"weight", "4-byte"}, false);
}

TEST_F(CallValidation, UndeclaredCallsMayUseElementAlignedPointers) {
  // The fallback needs element alignment only.
  EXPECT_NO_THROW(comm_->all_reduce(data() + 1, data() + 1, DataType::f32, {3, 40}));
}

TEST_F(CallValidation, FusedResidualOverlappingInoutIsRejected) {
  expect_invalid(
      "declared, residual == inout",
      [&] {
        comm_->fused_add_rms_norm(data(), data(), weight_.data(), kEps, DataType::f32, {2, 64});
      },
      {"residual", "overlap", "inout"}, false);
  expect_invalid(
      "declared, residual = second row of inout",
      [&] {
        comm_->fused_add_rms_norm(data(), data() + 64, weight_.data(), kEps, DataType::f32,
                                  {2, 64});
      },
      {"residual", "overlap"}, false);
  expect_invalid(
      "undeclared, inout inside residual",
      [&] {
        comm_->fused_add_rms_norm(data() + 96, data(), weight_.data(), kEps, DataType::f32,
                                  {3, 64});
      },
      {"residual", "overlap"}, false);
  // Adjacent is fine.
  EXPECT_NO_THROW(comm_->fused_add_rms_norm(data(), data() + 128, weight_.data(), kEps,
                                            DataType::f32, {2, 64}));
}

// The pieces of a two-shot, the staged kernels and NCCL write sums while
// input further on is still to be read: out is in, or apart from it.
TEST_F(CallValidation, AllReduceOutOverlappingInWithoutBeingItIsRejected) {
  expect_invalid(
      "declared, out = in + 4 floats (16 bytes: aligned)",
      [&] {
        comm_->all_reduce(data(), data() + 4, DataType::f32, {2, 64});
      },
      {"out", "overlaps in", "out == in"}, false);
  expect_invalid(
      "declared, out = in - 4 floats",
      [&] {
        comm_->all_reduce(data() + 4, data(), DataType::f32, {2, 64});
      },
      {"out", "overlaps in"}, false);
  expect_invalid(
      "undeclared, out = in + 1 float",
      [&] {
        comm_->all_reduce(data(), data() + 1, DataType::f32, {3, 40});
      },
      {"out", "overlaps in"}, false);
  // In place and adjacent are fine.
  EXPECT_NO_THROW(comm_->all_reduce(data(), data(), DataType::f32, {2, 64}));
  EXPECT_NO_THROW(comm_->all_reduce(data(), data() + 128, DataType::f32, {2, 64}));
  EXPECT_NO_THROW(comm_->all_reduce(data() + 120, data(), DataType::f32, {3, 40}));
}

TEST_F(CallValidation, FusedEpsMustBeFiniteAndNonNegative) {
  expect_invalid("eps -1",
                 [&] {
                   comm_->fused_add_rms_norm(data(), residual_.data(), weight_.data(), -1.0f,
                                             DataType::f32, {2, 64});
                 },
                 {"eps"});
  // A value six decimals would print as -0.000000, which is accepted.
  expect_invalid("eps -1e-9",
                 [&] {
                   comm_->fused_add_rms_norm(data(), residual_.data(), weight_.data(), -1e-9f,
                                             DataType::f32, {3, 64});
                 },
                 {"eps is -1e-09"});
}

// ------------------------------------------------------ what is accepted

TEST_F(CallValidation, ZeroElementCallsAreNoOps) {
  const Stats before = comm_->stats();
  // Null pointers and any strides: there is no element to read or write.
  EXPECT_NO_THROW(comm_->all_reduce(nullptr, nullptr, DataType::f32, {0, 64}));
  EXPECT_NO_THROW(
      comm_->all_reduce(data(), data(), DataType::f32, strided_layout({4, 0}, {-3, 0})));
  EXPECT_NO_THROW(
      comm_->fused_add_rms_norm(nullptr, nullptr, nullptr, kEps, DataType::f32, {0, 64}));
  EXPECT_EQ(buffer_, std::vector<float>(4096, 1.0f));
  EXPECT_EQ(comm_->stats().fallback_undeclared, before.fallback_undeclared + 3);
}

TEST_F(CallValidation, UndeclaredCallsTakeAnyNonOverlappingOrder) {
  // Column-major, and an inner stride of 2: the fallback serves both.
  for (const TensorLayout& layout :
       {strided_layout({24, 3}, {1, 24}), strided_layout({3, 20}, {48, 2}),
        strided_layout({2, 3, 8}, {8, 16, 1})}) {
    const AllReduceOutcome o =
        run_all_reduce(*comm_, DataType::f32, layout, Inputs::integers, false, next_seed());
    EXPECT_EQ(o.result.reason, FallbackReason::undeclared);
    expect_all_reduce_correct(o, "layout " + layout.to_string());
  }
}

}  // namespace
}  // namespace peerplan::comm_test
