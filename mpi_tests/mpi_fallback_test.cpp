// SPDX-License-Identifier: Apache-2.0
// The MPI fallback on its own: MPI errors never abort the job, a bad dtype is
// rejected before any MPI call, ranks that make different calls get Mismatch
// before anything is posted, and the communicator the fallback owns is
// duplicated within the timeout.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bounded_dup.hpp"
#include "bootstrap/owned_comm.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/layout.hpp"
#include "support/mpi_test_support.hpp"
#include "transport/host/element.hpp"
#include "transport/host/mpi_fallback.hpp"
#include "transport/host/reduce.hpp"

namespace peerplan {
namespace {

using namespace std::chrono_literals;
using mpi_test::test_comm;
using mpi_test::world_rank;
using mpi_test::world_size;
using transport::AllReduceArgs;
using transport::FusedArgs;
using transport::host::MpiFallback;

constexpr auto kTimeout = 2000ms;

MpiFallback make_fallback() {
  return MpiFallback(bootstrap::OwnedComm::duplicate(MPI_COMM_WORLD, kTimeout, "test"), kTimeout);
}

bool returns_errors(MPI_Comm comm) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(comm, &handler);
  return handler == MPI_ERRORS_RETURN;
}

TEST(MpiFallback, ItsCommunicatorReturnsErrors) {
  // Even when handed a duplicate that would abort (the default handler).
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL);
  MpiFallback fallback(bootstrap::OwnedComm::adopt(dup), kTimeout);
  ASSERT_NE(fallback.comm(), MPI_COMM_NULL);
  EXPECT_TRUE(returns_errors(fallback.comm()))
      << "the fallback's communicator must use MPI_ERRORS_RETURN, so that an MPI error "
         "becomes MpiError instead of aborting the job";
  fallback.close();
  EXPECT_EQ(fallback.comm(), MPI_COMM_NULL) << "close() frees the communicator it owns";
}

TEST(MpiFallback, UnknownDtypeIsInvalidArgumentBeforeAnyMpiCall) {
  MpiFallback fallback = make_fallback();
  const TensorLayout layout{4};
  float in[4] = {1, 1, 1, 1};
  float out[4] = {};
  float residual[4] = {};
  const float weight[4] = {1, 1, 1, 1};
  for (int value : {3, 7, 255}) {
    const auto dtype = static_cast<DataType>(value);
    try {
      fallback.all_reduce(AllReduceArgs{in, out, dtype, &layout, nullptr});
      ADD_FAILURE() << "dtype " << value << ": all_reduce returned";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("dtype"), std::string::npos) << e.what();
    }
    EXPECT_THROW(fallback.fused_add_rms_norm(
                     FusedArgs{in, residual, weight, 1e-6f, dtype, &layout, nullptr}),
                 InvalidArgument)
        << "dtype " << value;
  }
  // Nothing was posted: the fallback still works, on every rank alike.
  fallback.all_reduce(AllReduceArgs{in, out, DataType::f32, &layout, nullptr});
  EXPECT_EQ(out[3], static_cast<float>(world_size()));
}

// Rank r's value at i: exactly representable in every dtype, but their sum
// is not, so that the rounding of the sum shows.
float contiguous_input(int r, std::int64_t i) {
  return static_cast<float>(((r * 7919 + i * 104729) % 2001) - 1000) / 64.0f +
         0.001953125f * static_cast<float>(r + 1);
}

// all_reduce_contiguous (the CUDA backend's MPI fallback stages GPU tensors
// through it): the all-reduce part of a fused call gives exactly the P2P
// kernels' sum (rank order, fp32, one rounding) at every world size; the
// plain all-reduce gives MPI's sum, the same on every rank.
TEST(MpiFallback, ContiguousReductionOfTheFusedOpIsTheRankOrderSumRoundedOnce) {
  MpiFallback fallback = make_fallback();
  using transport::host::load_as_float;
  using transport::host::store_from_float;
  for (DataType dtype : {DataType::f16, DataType::bf16, DataType::f32}) {
    for (std::int64_t count : {1, 13, 4096, 100003}) {
      const std::size_t e = element_size(dtype);
      std::vector<std::vector<std::byte>> inputs(static_cast<std::size_t>(world_size()));
      for (int r = 0; r < world_size(); ++r) {
        inputs[r].resize(static_cast<std::size_t>(count) * e);
        for (std::int64_t i = 0; i < count; ++i)
          store_from_float(dtype, contiguous_input(r, i), inputs[r].data() + i * e);
      }
      std::vector<const void*> sources;
      for (const auto& in : inputs) sources.push_back(in.data());
      std::vector<std::byte> expected(static_cast<std::size_t>(count) * e);
      transport::host::reduce_sources(dtype, sources.data(), world_size(), 0, count,
                                      expected.data());

      std::vector<std::byte> fused = inputs[world_rank()];
      fallback.all_reduce_contiguous(fused.data(), dtype, count, /*for_fused=*/true);
      EXPECT_EQ(fused, expected) << to_string(dtype) << " x" << count;

      std::vector<std::byte> plain = inputs[world_rank()];
      fallback.all_reduce_contiguous(plain.data(), dtype, count, /*for_fused=*/false);
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < count; ++i) {
        const double want = load_as_float(dtype, expected.data() + i * e);
        const double got = load_as_float(dtype, plain.data() + i * e);
        // MPI rounds after every pairwise add, in its own order: each
        // rounding errs by half a unit of a partial sum, which the sum of
        // magnitudes bounds.
        double magnitudes = 0;
        for (int r = 0; r < world_size(); ++r) magnitudes += std::fabs(contiguous_input(r, i));
        const double unit = dtype == DataType::bf16  ? 0x1p-8
                            : dtype == DataType::f16 ? 0x1p-11
                                                     : 0x1p-24;
        const double tolerance = world_size() * magnitudes * unit;
        if (!(std::fabs(got - want) <= tolerance)) ++wrong;
      }
      EXPECT_EQ(wrong, 0) << to_string(dtype) << " x" << count;
      std::vector<std::byte> all(plain.size() * static_cast<std::size_t>(world_size()));
      MPI_Allgather(plain.data(), static_cast<int>(plain.size()), MPI_BYTE, all.data(),
                    static_cast<int>(plain.size()), MPI_BYTE, test_comm());
      for (int r = 1; r < world_size(); ++r)
        EXPECT_EQ(std::memcmp(all.data(), all.data() + r * plain.size(), plain.size()), 0)
            << "rank " << r << " got other bits, " << to_string(dtype) << " x" << count;
    }
  }
  // Ranks that make different kinds of call: Mismatch on every rank, at
  // every size (the ranks compare their calls before posting: beyond 2
  // ranks the fused op's allgather would meet the others' allreduce).
  std::vector<float> data(64, 1.0f);
  EXPECT_THROW(fallback.all_reduce_contiguous(data.data(), DataType::f32, 64, world_rank() == 0),
               Mismatch);
  EXPECT_EQ(data, std::vector<float>(64, 1.0f)) << "a Mismatch must leave the buffer untouched";
}

// Runs `call` on every rank; expects Mismatch quoting `quoted`, well within
// the timeout (the ranks compare their calls before posting anything).
template <typename Call>
void expect_mismatch(Call&& call, const std::vector<std::string>& quoted) {
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
    ADD_FAILURE() << "expected Mismatch: the ranks made different calls";
  } catch (const Mismatch& e) {
    for (const std::string& text : quoted)
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeout / 2);
}

// An all_reduce that must still work, on every rank alike.
void expect_working_all_reduce(MpiFallback& fallback, std::int64_t count) {
  const TensorLayout layout{count};
  std::vector<float> in(static_cast<std::size_t>(count), 1.0f);
  std::vector<float> out(static_cast<std::size_t>(count), 0.0f);
  fallback.all_reduce(AllReduceArgs{in.data(), out.data(), DataType::f32, &layout, nullptr});
  EXPECT_EQ(out, std::vector<float>(out.size(), static_cast<float>(world_size())))
      << "the fallback must work after a Mismatch";
}

// Different counts (or dtypes) would make MPI write past the smaller rank's
// buffer (the process died in MPI_Testall with "free(): invalid pointer")
// or abort the whole job (MPI_ERR_TRUNCATE goes to MPI_COMM_WORLD's fatal
// handler): Mismatch on every rank instead, with no buffer touched.
TEST(MpiFallback, DifferentCountsOrDtypesAreMismatchWithNothingPosted) {
  MpiFallback fallback = make_fallback();
  struct Case {
    std::int64_t rank1_count, others_count;
    DataType rank1_dtype;
  };
  // A call without elements takes part too (it returned alone: success on
  // its rank, a timeout on the others).
  for (const Case c :
       {Case{100000, 64, DataType::f32}, Case{3, 5, DataType::f32}, Case{5, 3, DataType::f32},
        Case{64, 64, DataType::f16}, Case{0, 16, DataType::f32}, Case{16, 0, DataType::f32}}) {
    const bool odd_one = world_rank() == 1;
    const std::int64_t count = odd_one ? c.rank1_count : c.others_count;
    const DataType dtype = odd_one ? c.rank1_dtype : DataType::f32;
    const TensorLayout layout{count};
    // Room past the end, so that a write beyond `count` would show.
    const std::size_t bytes = static_cast<std::size_t>(count) * element_size(dtype) + 4096;
    std::vector<std::byte> in(bytes, std::byte{0x3c});
    std::vector<std::byte> out(bytes, std::byte{0x5a});
    const auto in_before = in;
    const auto out_before = out;
    expect_mismatch(
        [&] {
          fallback.all_reduce(AllReduceArgs{in.data(), out.data(), dtype, &layout, nullptr});
        },
        {"different fallback calls", std::to_string(c.rank1_count) + " " + to_string(c.rank1_dtype),
         std::to_string(c.others_count) + " f32"});
    EXPECT_EQ(in, in_before) << "count " << count;
    EXPECT_EQ(out, out_before) << "count " << count << ": a Mismatch must not touch out";
    EXPECT_EQ(fallback.pending_abandoned(), 0u) << "nothing may have been posted";
    expect_working_all_reduce(fallback, 1000);
  }
}

// The fused op's all-reduce at 3+ ranks is an MPI_Iallgather: a fused call
// on rank 0 against plain ones elsewhere would pair an allgather with
// allreduces. Mismatch on every rank instead.
TEST(MpiFallback, FusedAgainstPlainCallsIsMismatchWithNothingPosted) {
  MpiFallback fallback = make_fallback();
  const TensorLayout layout{2, 32};
  std::vector<float> a(64, 1.5f), b(64, 2.5f);
  const std::vector<float> weight(32, 1.0f);
  if (world_rank() == 0) {
    expect_mismatch(
        [&] {
          fallback.fused_add_rms_norm(
              FusedArgs{a.data(), b.data(), weight.data(), 1e-6f, DataType::f32, &layout, nullptr});
        },
        {"fused_add_rms_norm (all-reduce part) of 64 f32", "all_reduce of 64 f32"});
  } else {
    expect_mismatch(
        [&] {
          fallback.all_reduce(AllReduceArgs{a.data(), b.data(), DataType::f32, &layout, nullptr});
        },
        {"fused_add_rms_norm (all-reduce part) of 64 f32", "all_reduce of 64 f32"});
  }
  EXPECT_EQ(a, std::vector<float>(64, 1.5f)) << "a Mismatch must not touch inout / in";
  EXPECT_EQ(b, std::vector<float>(64, 2.5f)) << "a Mismatch must not touch residual / out";
  EXPECT_EQ(fallback.pending_abandoned(), 0u) << "nothing may have been posted";
  expect_working_all_reduce(fallback, 64);
}

// A rank makes its call after the others gave up on it (past their timeout
// and roll call), with the same count or another one: every rank raises
// (Timeout, or Mismatch on the late rank that saw the calls differ),
// nothing crashes, and later calls line up again: the ranks that gave up
// learn the calls at their next call and post the reduction the late rank
// posted, or none where the calls differed.
TEST(MpiFallback, ALateRankFailsWithTheOthersThenCallsLineUpAgain) {
  const auto timeout = 300ms;
  MpiFallback fallback(bootstrap::OwnedComm::duplicate(MPI_COMM_WORLD, kTimeout, "test"), timeout);
  const int late = world_size() - 1;
  for (const std::int64_t late_count : {std::int64_t{64}, std::int64_t{100000}}) {
    const std::int64_t count = world_rank() == late ? late_count : 64;
    std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
    if (world_rank() == late) std::this_thread::sleep_for(3 * timeout);
    const auto start = std::chrono::steady_clock::now();
    try {
      fallback.all_reduce_contiguous(data.data(), DataType::f32, count, false);
      ADD_FAILURE() << "a call the others gave up on returned (late count " << late_count << ")";
    } catch (const Mismatch& e) {
      EXPECT_TRUE(world_rank() == late && late_count != 64) << e.what();
    } catch (const Timeout& e) {
      EXPECT_TRUE(world_rank() != late || late_count == 64) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2 * timeout + 2s);
    EXPECT_EQ(data, std::vector<float>(data.size(), 1.0f)) << "a failed call leaves data alone";
    MPI_Barrier(test_comm());
    expect_working_all_reduce(fallback, 1000);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (fallback.pending_abandoned() != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    EXPECT_EQ(fallback.pending_abandoned(), 0u) << "late count " << late_count;
    MPI_Barrier(test_comm());
  }
}

TEST(MpiFallback, DuplicateReturnsErrorsAndIsBoundedByTheTimeout) {
  // Never freed (below): made like every communicator peerplan keeps on
  // purpose, so the sanitizer stage's suppression of those covers it.
  const MPI_Comm parent = bootstrap::duplicate_within(MPI_COMM_WORLD, 30s, "test parent");
  {
    auto owned = bootstrap::OwnedComm::duplicate(parent, kTimeout, "test");
    EXPECT_TRUE(returns_errors(owned.get()));
  }
  // The last rank joins only after the others' bound: they raise Timeout
  // within it instead of blocking in MPI_Comm_dup until it arrives.
  const int late = world_size() - 1;
  const auto bound = 500ms;
  if (world_rank() == late) {
    std::this_thread::sleep_for(bound + 1000ms);
    // Its own duplication may complete against the others' abandoned ones
    // (they keep MPI progressing in the barrier below) or time out. The
    // result is never freed (MPI_Comm_free is collective; the others' side
    // of it is kept until exit).
    try {
      (void)bootstrap::duplicate_within(parent, 5s, "test");
    } catch (const Timeout&) {
    }
  } else {
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)bootstrap::OwnedComm::duplicate(parent, bound, "test");
      ADD_FAILURE() << "expected Timeout: a rank did not join";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << e.what();
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_GE(elapsed, bound);
    EXPECT_LT(elapsed, bound + 2500ms);
  }
  MPI_Barrier(test_comm());
  // Whatever MPI completes later writes a handle that is kept until exit
  // (never freed), so MPI_Finalize at the end of this binary must return.
  EXPECT_LE(bootstrap::abandoned_duplications(), 1u);
  // `parent` stays alive: an abandoned duplication may still use it.
}

}  // namespace
}  // namespace peerplan
