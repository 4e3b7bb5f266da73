// SPDX-License-Identifier: Apache-2.0
// The host P2P transport with threads standing in for ranks (ThreadBootstrap):
// every route and dtype on exactly summable inputs, bit-identical results,
// strided layouts, back-to-back calls through both staging slots, nothing
// left in /dev/shm, and the timeout path with its resynchronisation. The
// same properties are tested across real processes in
// mpi_tests/transport_host_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "peerplan/errors.hpp"
#include "peerplan/layout.hpp"
#include "thread_bootstrap.hpp"
#include "transport/host/element.hpp"
#include "transport/host/host_peer_transport.hpp"
#include "transport/host/rms_norm.hpp"
#include "transport/host/strided_copy.hpp"
#include "transport/one_time_plan.hpp"

namespace peerplan::transport::host {
namespace {

using testing::run_ranks;
using transport::all_reduce_once;
using transport::fused_add_rms_norm_once;
using namespace std::chrono_literals;

struct Buffer {
  DataType dtype;
  std::vector<std::byte> bytes;
  Buffer(DataType d, std::int64_t n)
      : dtype(d), bytes(static_cast<std::size_t>(n) * element_size(d)) {}
  float get(std::int64_t i) const {
    return load_as_float(dtype, bytes.data() + i * element_size(dtype));
  }
  void set(std::int64_t i, float v) {
    store_from_float(dtype, v, bytes.data() + i * element_size(dtype));
  }
  void* data() { return bytes.data(); }
};

std::int64_t span_of(const TensorLayout& layout) {
  std::int64_t last = 0;
  for (int d = 0; d < layout.rank(); ++d) last += (layout.dim(d) - 1) * layout.stride(d);
  return last + 1;
}

// Small integers: every partial sum is exact in every dtype.
float integer_input(int rank, std::int64_t i, int salt) {
  return static_cast<float>((i * 7 + rank * 3 + salt) % 11 - 5);
}

std::vector<std::int64_t> logical_offsets(const TensorLayout& layout) {
  std::vector<std::int64_t> offsets;
  for (std::int64_t i = 0; i < layout.numel(); ++i) {
    std::int64_t rest = i, offset = 0;
    for (int d = layout.rank() - 1; d >= 0; --d) {
      offset += (rest % layout.dim(d)) * layout.stride(d);
      rest /= layout.dim(d);
    }
    offsets.push_back(offset);
  }
  return offsets;
}

const DataType kDtypes[] = {DataType::f16, DataType::bf16, DataType::f32};

TEST(HostPeerTransport, AllReduceIsExactOnIntegerInputsForEveryRouteDtypeAndWorldSize) {
  for (int n : {1, 2, 3, 4}) {
    std::vector<TensorLayout> layouts{
        TensorLayout{1},
        TensorLayout{n + 1},
        TensorLayout{1000},
        TensorLayout{3, 1367},
        TensorLayout::strided(std::vector<std::int64_t>{3, 5}, std::vector<std::int64_t>{8, 1}),
        TensorLayout::strided(std::vector<std::int64_t>{4, 3}, std::vector<std::int64_t>{1, 4})};
    run_ranks(n, [&](int rank, bootstrap::Bootstrap& bootstrap) {
      HostPeerTransport transport(bootstrap, 20s);
      transport.reserve(3 * 1367 * 4);
      int salt = 0;
      for (const TensorLayout& layout : layouts) {
        const auto offsets = logical_offsets(layout);
        for (DataType dtype : kDtypes) {
          for (Route route : {Route::one_shot, Route::two_shot}) {
            for (bool in_place : {false, true}) {
              ++salt;
              Buffer in(dtype, span_of(layout)), out(dtype, span_of(layout));
              for (std::int64_t k = 0; k < span_of(layout); ++k) out.set(k, 123.0f);
              for (std::size_t i = 0; i < offsets.size(); ++i) {
                in.set(offsets[i], integer_input(rank, i, salt));
              }
              Buffer& target = in_place ? in : out;
              all_reduce_once(transport, route, Protocol::staged,
                              {in.data(), target.data(), dtype, &layout, nullptr});
              int wrong = 0;
              for (std::size_t i = 0; i < offsets.size(); ++i) {
                float exact = 0;
                for (int r = 0; r < n; ++r) exact += integer_input(r, i, salt);
                if (target.get(offsets[i]) != exact) ++wrong;
              }
              EXPECT_EQ(wrong, 0) << "rank " << rank << " n=" << n << " " << layout.to_string()
                                  << " route " << static_cast<int>(route) << " dtype "
                                  << static_cast<int>(dtype) << " in_place " << in_place;
              if (!in_place && layout.to_string().find("[3, 5]") != std::string::npos) {
                for (std::int64_t k = 0; k < span_of(layout); ++k) {
                  if (k % 8 >= 5) {
                    EXPECT_EQ(out.get(k), 123.0f) << "padding written";
                  }
                }
              }
            }
          }
        }
      }
    });
  }
}

TEST(HostPeerTransport, ResultsAreBitIdenticalAcrossRanksOnArbitraryInputs) {
  const int n = 3;
  const std::int64_t count = 2501;
  std::mutex mutex;
  std::vector<std::vector<std::byte>> results(n * 6);
  run_ranks(n, [&](int rank, bootstrap::Bootstrap& bootstrap) {
    HostPeerTransport transport(bootstrap, 20s);
    transport.reserve(count * 4);
    const TensorLayout layout{count};
    int which = 0;
    for (DataType dtype : kDtypes) {
      for (Route route : {Route::one_shot, Route::two_shot}) {
        Buffer in(dtype, count), out(dtype, count);
        for (std::int64_t i = 0; i < count; ++i) {
          in.set(i, std::sin(static_cast<float>(i * 13 + rank * 101)) * 1000.0f / (i % 7 + 1));
        }
        all_reduce_once(transport, route, Protocol::staged,
                        {in.data(), out.data(), dtype, &layout, nullptr});
        std::lock_guard lock(mutex);
        results[which++ * n + rank] = out.bytes;
      }
    }
  });
  for (int which = 0; which < 6; ++which) {
    for (int r = 1; r < n; ++r) EXPECT_EQ(results[which * n + r], results[which * n]) << which;
  }
}

TEST(HostPeerTransport, FusedEqualsStandaloneAddRmsNormOfTheExactSum) {
  for (int n : {2, 3}) {
    run_ranks(n, [&](int rank, bootstrap::Bootstrap& bootstrap) {
      HostPeerTransport transport(bootstrap, 20s);
      transport.reserve(64 * 1024);
      const std::int64_t rows = 3, hidden = 96, row_stride = 100;
      const TensorLayout dense{rows, hidden};
      const TensorLayout padded = TensorLayout::strided(std::vector<std::int64_t>{rows, hidden},
                                                        std::vector<std::int64_t>{row_stride, 1});
      for (const TensorLayout* layout : {&dense, &padded}) {
        const auto offsets = logical_offsets(*layout);
        for (DataType dtype : kDtypes) {
          Buffer inout(dtype, span_of(*layout)), residual(dtype, span_of(*layout)),
              weight(dtype, hidden);
          Buffer expected_out(dtype, span_of(*layout)), expected_residual(dtype, span_of(*layout));
          Buffer exact_sum(dtype, rows * hidden);
          for (std::int64_t j = 0; j < hidden; ++j) weight.set(j, 0.5f + 0.01f * j);
          for (std::size_t i = 0; i < offsets.size(); ++i) {
            inout.set(offsets[i], integer_input(rank, i, 1));
            residual.set(offsets[i], integer_input(7, i, 2));
            expected_residual.set(offsets[i], integer_input(7, i, 2));
            float sum = 0;
            for (int r = 0; r < n; ++r) sum += integer_input(r, i, 1);
            exact_sum.set(i, sum);
          }
          add_rms_norm(dtype, *layout, exact_sum.data(), expected_out.data(),
                       expected_residual.data(), weight.data(), 1e-5f);
          fused_add_rms_norm_once(
              transport, Route::fused_one_shot, Protocol::staged,
              {inout.data(), residual.data(), weight.data(), 1e-5f, dtype, layout, nullptr});
          for (std::size_t i = 0; i < offsets.size(); ++i) {
            ASSERT_EQ(inout.get(offsets[i]), expected_out.get(offsets[i])) << i;
            ASSERT_EQ(residual.get(offsets[i]), expected_residual.get(offsets[i])) << i;
          }
        }
      }
    });
  }
}

TEST(HostPeerTransport, ThousandsOfBackToBackCallsThroughBothSlots) {
  const int n = 3;
  run_ranks(n, [&](int rank, bootstrap::Bootstrap& bootstrap) {
    HostPeerTransport transport(bootstrap, 20s);
    transport.reserve(4096);
    int wrong = 0;
    for (int call = 0; call < 2000; ++call) {
      // Sizes and routes vary so that a clobbered slot shows in the values.
      const std::int64_t count = 1 + (call * 37) % 300;
      const TensorLayout layout{count};
      Buffer in(DataType::f32, count), out(DataType::f32, count);
      for (std::int64_t i = 0; i < count; ++i) in.set(i, static_cast<float>(call + rank * i));
      all_reduce_once(transport, call % 3 == 0 ? Route::two_shot : Route::one_shot,
                      Protocol::staged, {in.data(), out.data(), DataType::f32, &layout, nullptr});
      for (std::int64_t i = 0; i < count; ++i) {
        const float exact = static_cast<float>(n * call + i * (n * (n - 1) / 2));
        if (out.get(i) != exact) ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "rank " << rank;
    EXPECT_EQ(transport.epoch(), 2000u);
  });
}

std::vector<std::string> shm_entries_with_prefix(const std::string& prefix) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix.substr(1), 0) == 0) found.push_back(name);
  }
  return found;
}

TEST(HostPeerTransport, NothingStaysInDevShmAfterSetupOrClose) {
  run_ranks(3, [&](int, bootstrap::Bootstrap& bootstrap) {
    HostPeerTransport transport(bootstrap, 20s);
    const std::string prefix = transport.segment_name_prefix();
    EXPECT_EQ(prefix.rfind("/peerplan-", 0), 0u) << prefix;
    transport.reserve(1 << 20);
    bootstrap.barrier();  // every rank has finished its setup
    EXPECT_EQ(shm_entries_with_prefix(prefix), std::vector<std::string>{});
    transport.reserve(1 << 16);  // re-creation
    EXPECT_EQ(transport.capacity_bytes(), 1u << 16);
    bootstrap.barrier();
    EXPECT_EQ(shm_entries_with_prefix(prefix), std::vector<std::string>{});
    transport.close();
    transport.close();  // idempotent
    EXPECT_EQ(shm_entries_with_prefix(prefix), std::vector<std::string>{});
  });
}

TEST(HostPeerTransport, MisuseIsReportedClearly) {
  run_ranks(2, [&](int, bootstrap::Bootstrap& bootstrap) {
    HostPeerTransport transport(bootstrap, 20s);
    const TensorLayout layout{64};
    Buffer in(DataType::f32, 64), out(DataType::f32, 64);
    const AllReduceArgs args{in.data(), out.data(), DataType::f32, &layout, nullptr};
    EXPECT_THROW(all_reduce_once(transport, Route::one_shot, Protocol::staged, args),
                 InvalidUsage);  // nothing reserved
    transport.reserve(128);
    EXPECT_THROW(all_reduce_once(transport, Route::one_shot, Protocol::staged, args),
                 InvalidArgument);  // 256 > 128
    EXPECT_THROW(all_reduce_once(transport, Route::fused_one_shot, Protocol::staged, args),
                 InvalidArgument);
    transport.close();
    EXPECT_THROW(all_reduce_once(transport, Route::one_shot, Protocol::staged, args), InvalidUsage);
    EXPECT_THROW(transport.reserve(128), InvalidUsage);
  });
}

TEST(HostPeerTransport, AStoppedRankMakesTheOthersTimeOutThenReserveResynchronises) {
  const int n = 3;
  const auto timeout = 300ms;
  std::atomic<int> timeouts{0};
  std::atomic<long long> longest_wait_ms{0};
  run_ranks(n, [&](int rank, bootstrap::Bootstrap& bootstrap) {
    HostPeerTransport transport(bootstrap, timeout);
    transport.reserve(1024);
    const TensorLayout layout{16};
    Buffer in(DataType::f32, 16), out(DataType::f32, 16);
    for (int i = 0; i < 16; ++i) in.set(i, 1.0f);
    const AllReduceArgs args{in.data(), out.data(), DataType::f32, &layout, nullptr};
    all_reduce_once(transport, Route::one_shot, Protocol::staged, args);  // a healthy call first
    if (rank != 0) {
      const auto start = std::chrono::steady_clock::now();
      try {
        all_reduce_once(transport, Route::one_shot, Protocol::staged, args);
        ADD_FAILURE() << "rank " << rank << " completed a call rank 0 never made";
      } catch (const Timeout& e) {
        const auto elapsed = std::chrono::steady_clock::now() - start;
        // A rank may fail before its own deadline when a peer that started
        // earlier gave up first (it raises `abandoned`): only the longest
        // wait must have reached the timeout, and none may exceed the bound.
        EXPECT_LT(elapsed, timeout + 2s) << "the timeout is not a bound";
        const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
        long long seen = longest_wait_ms.load();
        while (ms > seen && !longest_wait_ms.compare_exchange_weak(seen, ms)) {
        }
        EXPECT_NE(std::string(e.what()).find("rank(s) 0 "), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("PEERPLAN_TIMEOUT_MS"), std::string::npos);
        ++timeouts;
      }
      EXPECT_TRUE(transport.broken());
      EXPECT_THROW(all_reduce_once(transport, Route::one_shot, Protocol::staged, args),
                   InvalidUsage);
    }
    bootstrap.barrier();  // rank 0 wakes up only after the others gave up
    if (rank == 0) {
      // Late: the peers abandoned this call, so it must fail, not compute.
      EXPECT_THROW(all_reduce_once(transport, Route::one_shot, Protocol::staged, args), Timeout);
    }
    transport.reserve(1024);  // every rank: rebuilds because some are broken
    EXPECT_FALSE(transport.broken());
    EXPECT_EQ(transport.epoch(), 0u);
    for (int call = 0; call < 5; ++call) {
      all_reduce_once(transport, call % 2 ? Route::two_shot : Route::one_shot, Protocol::staged,
                      args);
      for (int i = 0; i < 16; ++i) EXPECT_EQ(out.get(i), static_cast<float>(n));
    }
  });
  EXPECT_EQ(timeouts.load(), n - 1);
  EXPECT_GE(longest_wait_ms.load(), timeout.count()) << "nobody waited the full timeout";
}

}  // namespace
}  // namespace peerplan::transport::host
