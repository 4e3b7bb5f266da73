// SPDX-License-Identifier: Apache-2.0
// The MPI fallback on its own: MPI errors never abort the job, a bad dtype is
// rejected before any MPI call, and the communicator the fallback owns is
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
  // Ranks that make different kinds of call: Mismatch on every rank. Only
  // at 2 ranks, where both kinds post the same MPI collective; beyond, one
  // rank's allgather would meet the others' allreduce, which MPI does not
  // define.
  if (world_size() == 2) {
    std::vector<float> data(64, 1.0f);
    EXPECT_THROW(fallback.all_reduce_contiguous(data.data(), DataType::f32, 64, world_rank() == 0),
                 Mismatch);
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
