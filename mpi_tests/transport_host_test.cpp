// SPDX-License-Identifier: Apache-2.0
// The host backend across real processes (2, 3, 4 ranks): the P2P transport
// over POSIX shared memory (one-shot, two-shot, fused) and the MPI fallback,
// for f16/bf16/f32, dense and strided layouts, sizes that do not divide by
// the world size. Every rank can compute every other rank's input (inputs
// are a function of rank and index), so each checks against a float64
// reference on its own; exactly summable inputs count #wrong, which must be 0.
#include <mpi.h>
#include <sys/statvfs.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/mpi_bootstrap.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/layout.hpp"
#include "support/mpi_test_support.hpp"
#include "transport/host/element.hpp"
#include "transport/host/host_peer_transport.hpp"
#include "transport/host/mpi_fallback.hpp"
#include "transport/host/rms_norm.hpp"
#include "transport/host/strided_copy.hpp"
#include "transport/one_time_plan.hpp"

namespace {

using namespace peerplan;
using namespace peerplan::transport;
using namespace std::chrono_literals;
using peerplan::mpi_test::world_rank;
using peerplan::mpi_test::world_size;

constexpr std::size_t kCapacity = 256 * 1024;
constexpr auto kGenerousTimeout = 60s;

// ---- data --------------------------------------------------------------

struct Buffer {
  DataType dtype;
  std::vector<std::byte> bytes;
  Buffer(DataType d, std::int64_t n)
      : dtype(d), bytes(static_cast<std::size_t>(n) * element_size(d)) {}
  float get(std::int64_t i) const {
    return host::load_as_float(dtype, bytes.data() + i * element_size(dtype));
  }
  void set(std::int64_t i, float v) {
    host::store_from_float(dtype, v, bytes.data() + i * element_size(dtype));
  }
  void* data() { return bytes.data(); }
};

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Small integers: every partial sum is exact in every dtype.
float integer_value(int rank, std::int64_t i, int salt) {
  return static_cast<float>(static_cast<int>(mix(rank * 1000003ull + i * 31 + salt) % 13) - 6);
}
// Arbitrary values in [-1, 1), rounded to the dtype (that is the input).
float random_value(DataType dtype, int rank, std::int64_t i, int salt) {
  const double unit =
      static_cast<double>(mix(rank * 7777777ull + i * 131 + salt * 977) >> 11) * 0x1p-53;
  return host::round_to(dtype, static_cast<float>(2 * unit - 1));
}

std::int64_t span_of(const TensorLayout& layout) {
  std::int64_t last = 0;
  for (int d = 0; d < layout.rank(); ++d) last += (layout.dim(d) - 1) * layout.stride(d);
  return last + 1;
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

TensorLayout strided(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  return TensorLayout::strided(shape, strides);
}

// All-reduce layouts: 1 element, counts that are not multiples of the world
// size, padded rows, a transposed and a 3-D strided tensor.
std::vector<TensorLayout> all_reduce_layouts(int n) {
  return {TensorLayout{1},           TensorLayout{n + 1},
          TensorLayout{37 * n + 1},  TensorLayout{4096},
          TensorLayout{3, 6007},     strided({5, 100}, {128, 1}),
          strided({64, 3}, {1, 64}), strided({2, 3, 50}, {400, 128, 2})};
}
// Fused layouts: the last dimension is the hidden size.
std::vector<TensorLayout> fused_layouts() {
  return {TensorLayout{1, 7}, TensorLayout{4, 1024}, strided({3, 500}, {512, 1}), TensorLayout{1}};
}

const DataType kDtypes[] = {DataType::f16, DataType::bf16, DataType::f32};

const char* name(DataType dtype) {
  return dtype == DataType::f16 ? "f16" : dtype == DataType::bf16 ? "bf16" : "f32";
}

// Unit roundoff of each dtype (half an ulp, relative).
double unit_roundoff(DataType dtype) {
  return dtype == DataType::bf16 ? 0x1p-8 : dtype == DataType::f16 ? 0x1p-11 : 0x1p-24;
}

enum class Way { one_shot, two_shot, fallback };
const char* name(Way way) {
  return way == Way::one_shot ? "one-shot" : way == Way::two_shot ? "two-shot" : "fallback";
}

std::uint64_t fnv1a(const std::vector<std::byte>& bytes) {
  std::uint64_t hash = 1469598103934665603ull;
  for (std::byte b : bytes) hash = (hash ^ static_cast<unsigned char>(b)) * 1099511628211ull;
  return hash;
}

// True when every rank passes the same value.
bool same_on_every_rank(std::uint64_t value) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (std::uint64_t v : all) {
    if (v != all[0]) return false;
  }
  return true;
}

// ---- fixture ------------------------------------------------------------

class HostTransport : public ::testing::Test {
 protected:
  void SetUp() override { build(kGenerousTimeout); }
  void TearDown() override { teardown(); }

  void build(std::chrono::milliseconds timeout) {
    bootstrap_ = bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, kGenerousTimeout);
    PEERPLAN_MPI_SKIP_IF(bootstrap_->num_nodes() != 1,
                         "the host P2P transport is used only when the job is on one node");
    p2p_ = std::make_unique<host::HostPeerTransport>(*bootstrap_, timeout);
    p2p_->reserve(kCapacity);
    fallback_ = std::make_unique<host::MpiFallback>(
        bootstrap::OwnedComm::duplicate(MPI_COMM_WORLD, kGenerousTimeout, "test"), timeout);
  }
  void teardown() {
    if (fallback_) fallback_->close();
    fallback_.reset();
    p2p_.reset();
    bootstrap_.reset();
  }

  void all_reduce(Way way, Buffer& in, Buffer& out, const TensorLayout& layout) {
    const AllReduceArgs args{in.data(), out.data(), in.dtype, &layout, nullptr};
    if (way == Way::fallback)
      fallback_->all_reduce(args);
    else
      all_reduce_once(*p2p_, way == Way::one_shot ? Route::one_shot : Route::two_shot,
                      Protocol::staged, args);
  }
  void fused(Way way, Buffer& inout, Buffer& residual, Buffer& weight, float eps,
             const TensorLayout& layout) {
    const FusedArgs args{inout.data(), residual.data(), weight.data(), eps,
                         inout.dtype,  &layout,         nullptr};
    if (way == Way::fallback)
      fallback_->fused_add_rms_norm(args);
    else
      fused_add_rms_norm_once(*p2p_, Route::fused_one_shot, Protocol::staged, args);
  }

  int n() const { return world_size(); }
  int rank() const { return world_rank(); }

  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::unique_ptr<host::HostPeerTransport> p2p_;
  std::unique_ptr<host::MpiFallback> fallback_;
};

// ---- all-reduce ----------------------------------------------------------

TEST_F(HostTransport, AllReduceOfExactlySummableInputsHasNoWrongElement) {
  int salt = 0;
  for (const TensorLayout& layout : all_reduce_layouts(n())) {
    const auto offsets = logical_offsets(layout);
    for (DataType dtype : kDtypes) {
      for (Way way : {Way::one_shot, Way::two_shot, Way::fallback}) {
        for (bool in_place : {false, true}) {
          ++salt;
          Buffer in(dtype, span_of(layout)), out(dtype, span_of(layout));
          for (std::size_t i = 0; i < offsets.size(); ++i) {
            in.set(offsets[i], integer_value(rank(), i, salt));
          }
          Buffer& target = in_place ? in : out;
          all_reduce(way, in, target, layout);
          int wrong = 0;
          for (std::size_t i = 0; i < offsets.size(); ++i) {
            double exact = 0;
            for (int r = 0; r < n(); ++r) exact += integer_value(r, i, salt);
            if (target.get(offsets[i]) != exact) ++wrong;
          }
          EXPECT_EQ(wrong, 0) << name(way) << " " << name(dtype) << " " << layout.to_string()
                              << (in_place ? " in place" : "");
        }
      }
    }
  }
}

TEST_F(HostTransport, AllReduceMatchesFloat64ReferenceWithinDtypeTolerance) {
  int salt = 1000;
  for (const TensorLayout& layout : all_reduce_layouts(n())) {
    const auto offsets = logical_offsets(layout);
    for (DataType dtype : kDtypes) {
      for (Way way : {Way::one_shot, Way::two_shot, Way::fallback}) {
        ++salt;
        Buffer in(dtype, span_of(layout)), out(dtype, span_of(layout));
        for (std::size_t i = 0; i < offsets.size(); ++i) {
          in.set(offsets[i], random_value(dtype, rank(), i, salt));
        }
        all_reduce(way, in, out, layout);
        const double u = unit_roundoff(dtype);
        int wrong = 0;
        double worst = 0;
        for (std::size_t i = 0; i < offsets.size(); ++i) {
          double exact = 0, magnitude = 0;
          for (int r = 0; r < n(); ++r) {
            const double x = random_value(dtype, r, i, salt);
            exact += x;
            magnitude += std::abs(x);
          }
          // P2P: fp32 accumulation (n * 2^-24 relative to sum |x|) and one
          // rounding to the dtype. The fallback's 16-bit ops round after each
          // pairwise addition: up to n roundings.
          const double accumulation = way == Way::fallback && dtype != DataType::f32
                                          ? n() * u * magnitude
                                          : n() * 0x1p-24 * magnitude;
          const double bound = u * std::abs(exact) + accumulation + 0x1p-24;
          const double error = std::abs(out.get(offsets[i]) - exact);
          worst = std::max(worst, error / bound);
          if (error > bound) ++wrong;
        }
        EXPECT_EQ(wrong, 0) << name(way) << " " << name(dtype) << " " << layout.to_string()
                            << " worst error/bound " << worst;
      }
    }
  }
}

TEST_F(HostTransport, P2PResultsAreBitIdenticalOnEveryRank) {
  int salt = 2000;
  for (const TensorLayout& layout : all_reduce_layouts(n())) {
    const auto offsets = logical_offsets(layout);
    for (DataType dtype : kDtypes) {
      for (Way way : {Way::one_shot, Way::two_shot}) {
        ++salt;
        Buffer in(dtype, span_of(layout)), out(dtype, span_of(layout));
        for (std::size_t i = 0; i < offsets.size(); ++i) {
          in.set(offsets[i], random_value(dtype, rank(), i, salt) * 1000.0f / (1 + i % 7));
        }
        all_reduce(way, in, out, layout);
        Buffer packed(dtype, layout.numel());
        host::pack(layout, element_size(dtype), out.data(), packed.data());
        EXPECT_TRUE(same_on_every_rank(fnv1a(packed.bytes)))
            << name(way) << " " << name(dtype) << " " << layout.to_string();
      }
    }
  }
  // Fused too: both the normalised output and the updated residual.
  for (const TensorLayout& layout : fused_layouts()) {
    const auto offsets = logical_offsets(layout);
    for (DataType dtype : kDtypes) {
      ++salt;
      Buffer inout(dtype, span_of(layout)), residual(dtype, span_of(layout)),
          weight(dtype, layout.last_dim());
      for (std::size_t i = 0; i < offsets.size(); ++i) {
        inout.set(offsets[i], random_value(dtype, rank(), i, salt));
        residual.set(offsets[i], random_value(dtype, 99, i, salt));
      }
      for (std::int64_t j = 0; j < layout.last_dim(); ++j) weight.set(j, 1.0f + 0.001f * j);
      fused(Way::one_shot, inout, residual, weight, 1e-6f, layout);
      EXPECT_TRUE(same_on_every_rank(fnv1a(inout.bytes) ^ (fnv1a(residual.bytes) * 3)))
          << "fused " << name(dtype) << " " << layout.to_string();
    }
  }
}

TEST_F(HostTransport, FallbackEqualsP2PWithinRoundingAndExactlyOnIntegers) {
  int salt = 3000;
  for (const TensorLayout& layout : all_reduce_layouts(n())) {
    const auto offsets = logical_offsets(layout);
    for (DataType dtype : kDtypes) {
      for (bool integers : {true, false}) {
        ++salt;
        Buffer in(dtype, span_of(layout)), by_p2p(dtype, span_of(layout)),
            by_fallback(dtype, span_of(layout));
        double magnitude_bound = 0;
        for (std::size_t i = 0; i < offsets.size(); ++i) {
          const float x =
              integers ? integer_value(rank(), i, salt) : random_value(dtype, rank(), i, salt);
          in.set(offsets[i], x);
          magnitude_bound = std::max(magnitude_bound, static_cast<double>(std::abs(x)));
        }
        all_reduce(Way::one_shot, in, by_p2p, layout);
        all_reduce(Way::fallback, in, by_fallback, layout);
        // Inputs within [-1, 1]: sums of magnitude <= n.
        const double tolerance = integers ? 0.0 : 2.0 * n() * n() * unit_roundoff(dtype);
        int differ = 0;
        for (std::int64_t off : offsets) {
          if (std::abs(by_p2p.get(off) - by_fallback.get(off)) > tolerance) ++differ;
        }
        EXPECT_EQ(differ, 0) << name(dtype) << " " << layout.to_string()
                             << (integers ? " integers" : " random");
      }
    }
  }
}

// ---- fused add + RMSNorm --------------------------------------------------

TEST_F(HostTransport, FusedMatchesFloat64ReferenceOnBothPaths) {
  int salt = 4000;
  const float eps = 1e-6f;
  for (const TensorLayout& layout : fused_layouts()) {
    const auto offsets = logical_offsets(layout);
    const std::int64_t hidden = layout.last_dim();
    const std::int64_t rows = layout.numel() / hidden;
    for (DataType dtype : kDtypes) {
      for (Way way : {Way::one_shot, Way::fallback}) {
        ++salt;
        Buffer inout(dtype, span_of(layout)), residual(dtype, span_of(layout)),
            weight(dtype, hidden);
        for (std::size_t i = 0; i < offsets.size(); ++i) {
          inout.set(offsets[i], random_value(dtype, rank(), i, salt));
          residual.set(offsets[i], random_value(dtype, 99, i, salt));
        }
        for (std::int64_t j = 0; j < hidden; ++j) {
          weight.set(j, 0.5f + std::abs(random_value(dtype, 98, j, salt)));
        }
        fused(way, inout, residual, weight, eps, layout);
        const double u = unit_roundoff(dtype);
        int wrong = 0;
        for (std::int64_t row = 0; row < rows; ++row) {
          std::vector<double> r(static_cast<std::size_t>(hidden)), magnitude(r.size());
          double squares = 0;
          for (std::int64_t j = 0; j < hidden; ++j) {
            const std::int64_t i = row * hidden + j;
            double sum = 0;
            for (int q = 0; q < n(); ++q) {
              sum += random_value(dtype, q, i, salt);
              magnitude[j] += std::abs(random_value(dtype, q, i, salt));
            }
            const double res = random_value(dtype, 99, i, salt);
            r[j] = sum + res;
            magnitude[j] += std::abs(res);
            squares += r[j] * r[j];
            // residual = round(s + residual): within the sum's error plus one rounding.
            const double res_error = std::abs(residual.get(offsets[i]) - r[j]);
            if (res_error > 2 * n() * u * magnitude[j] + u * std::abs(r[j]) + 1e-6) ++wrong;
          }
          const double rms = std::sqrt(squares / hidden + eps);
          for (std::int64_t j = 0; j < hidden; ++j) {
            const double w = weight.get(j);
            const double expected = r[j] / rms * w;
            // Error in r propagates scaled by w / rms (the rms itself moves
            // by at most the average of those errors), then one rounding.
            const double bound =
                4 * n() * u * magnitude[j] * w / rms + 2 * u * std::abs(expected) + 1e-5;
            if (std::abs(inout.get(offsets[row * hidden + j]) - expected) > bound) ++wrong;
          }
        }
        EXPECT_EQ(wrong, 0) << "fused " << name(way) << " " << name(dtype) << " "
                            << layout.to_string();
      }
    }
  }
}

TEST_F(HostTransport, FusedOnExactSumsIsIdenticalOnBothPathsAndToTheStandaloneOp) {
  int salt = 5000;
  for (const TensorLayout& layout : fused_layouts()) {
    const auto offsets = logical_offsets(layout);
    const std::int64_t hidden = layout.last_dim();
    for (DataType dtype : kDtypes) {
      ++salt;
      Buffer weight(dtype, hidden), exact_sum(dtype, layout.numel());
      for (std::int64_t j = 0; j < hidden; ++j) weight.set(j, 0.75f + 0.01f * (j % 50));
      Buffer expected_out(dtype, span_of(layout)), expected_residual(dtype, span_of(layout));
      std::vector<std::unique_ptr<Buffer>> inouts, residuals;
      for (int path = 0; path < 2; ++path) {
        inouts.push_back(std::make_unique<Buffer>(dtype, span_of(layout)));
        residuals.push_back(std::make_unique<Buffer>(dtype, span_of(layout)));
      }
      for (std::size_t i = 0; i < offsets.size(); ++i) {
        float sum = 0;
        for (int r = 0; r < n(); ++r) sum += integer_value(r, i, salt);
        exact_sum.set(i, sum);
        expected_residual.set(offsets[i], integer_value(99, i, salt));
        for (int path = 0; path < 2; ++path) {
          inouts[path]->set(offsets[i], integer_value(rank(), i, salt));
          residuals[path]->set(offsets[i], integer_value(99, i, salt));
        }
      }
      host::add_rms_norm(dtype, layout, exact_sum.data(), expected_out.data(),
                         expected_residual.data(), weight.data(), 1e-5f);
      fused(Way::one_shot, *inouts[0], *residuals[0], weight, 1e-5f, layout);
      fused(Way::fallback, *inouts[1], *residuals[1], weight, 1e-5f, layout);
      int wrong = 0;
      for (std::int64_t off : offsets) {
        for (int path = 0; path < 2; ++path) {
          if (inouts[path]->get(off) != expected_out.get(off)) ++wrong;
          if (residuals[path]->get(off) != expected_residual.get(off)) ++wrong;
        }
      }
      EXPECT_EQ(wrong, 0) << name(dtype) << " " << layout.to_string();
    }
  }
}

// ---- many calls, double buffering ------------------------------------------

TEST_F(HostTransport, ThousandsOfBackToBackCallsAlternatingRoutes) {
  const int calls = 3000;
  int wrong = 0;
  const std::int64_t hidden = 64;
  Buffer weight(DataType::bf16, hidden);
  for (std::int64_t j = 0; j < hidden; ++j) weight.set(j, 1.0f);
  for (int call = 0; call < calls; ++call) {
    // Sizes change every call so that reading a stale or clobbered slot
    // shows in the values; every fourth call goes through MPI in between.
    const std::int64_t count = 1 + (call * 37) % 700;
    const TensorLayout layout{count};
    const int kind = call % 4;
    if (kind == 3) {
      const TensorLayout rows{1 + call % 3, hidden};
      const auto total = rows.numel();
      Buffer inout(DataType::bf16, total), residual(DataType::bf16, total);
      for (std::int64_t i = 0; i < total; ++i) {
        inout.set(i, static_cast<float>((call + i + rank()) % 5));
        residual.set(i, 1.0f);
      }
      fused(call % 8 == 3 ? Way::fallback : Way::one_shot, inout, residual, weight, 0.0f, rows);
      for (std::int64_t i = 0; i < total; ++i) {
        float expected = 1.0f;
        for (int r = 0; r < n(); ++r) expected += static_cast<float>((call + i + r) % 5);
        if (residual.get(i) != expected) ++wrong;
      }
      continue;
    }
    Buffer in(DataType::f32, count), out(DataType::f32, count);
    for (std::int64_t i = 0; i < count; ++i) in.set(i, static_cast<float>(call + rank() * i));
    all_reduce(kind == 0   ? Way::one_shot
               : kind == 1 ? Way::two_shot
                           : Way::fallback,
               in, out, layout);
    for (std::int64_t i = 0; i < count; ++i) {
      const float exact = static_cast<float>(n() * call + i * (n() * (n() - 1) / 2));
      if (out.get(i) != exact) ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0);
  // Kinds 0 and 1 and every other fused call went P2P.
  EXPECT_EQ(p2p_->epoch(), static_cast<std::uint64_t>(calls / 4 * 2 + calls / 8));
}

// ---- /dev/shm hygiene ------------------------------------------------------

std::vector<std::string> dev_shm_entries(const std::string& prefix) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix.substr(1), 0) == 0) found.push_back(file);
  }
  return found;
}

// Mappings of this process whose file is a (deleted) segment of `prefix`.
int deleted_mappings(const std::string& prefix) {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm" + prefix) != std::string::npos &&
        line.find("(deleted)") != std::string::npos) {
      ++count;
    }
  }
  return count;
}

TEST_F(HostTransport, NoSegmentIsLeftInDevShmAfterSetupAndClose) {
  const std::string prefix = p2p_->segment_name_prefix();
  // Every rank of the job (one node) uses one prefix: it names the job.
  EXPECT_TRUE(same_on_every_rank(std::hash<std::string>{}(prefix)));
  MPI_Barrier(MPI_COMM_WORLD);  // every rank has finished its setup
  // Set up: every segment mapped here, none left with a name.
  EXPECT_EQ(deleted_mappings(prefix), n());
  EXPECT_EQ(dev_shm_entries(prefix), std::vector<std::string>{});
  p2p_->reserve(kCapacity / 2);  // re-created
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(deleted_mappings(prefix), n());
  EXPECT_EQ(dev_shm_entries(prefix), std::vector<std::string>{});
  p2p_->close();
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(deleted_mappings(prefix), 0);
  EXPECT_EQ(dev_shm_entries(prefix), std::vector<std::string>{});
}

TEST_F(HostTransport, TwoTransportsOfOneJobNeverShareNames) {
  host::HostPeerTransport second(*bootstrap_, kGenerousTimeout);
  EXPECT_NE(second.segment_name_prefix(), p2p_->segment_name_prefix());
  second.reserve(4096);
  const TensorLayout layout{10};
  Buffer in(DataType::f32, 10), out(DataType::f32, 10);
  for (int i = 0; i < 10; ++i) in.set(i, 1.0f);
  all_reduce_once(second, Route::one_shot, Protocol::staged,
                  {in.data(), out.data(), DataType::f32, &layout, nullptr});
  EXPECT_EQ(out.get(9), static_cast<float>(n()));
}

TEST_F(HostTransport, SegmentsDevShmCannotHoldFailOnEveryRankAndLeaveNothing) {
  struct statvfs fs {};
  const bool known = ::statvfs("/dev/shm", &fs) == 0;
  const std::uint64_t total = known ? static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize : 0;
  PEERPLAN_MPI_SKIP_IF(total == 0 || total > (std::uint64_t{1} << 44),
                       "/dev/shm has no size limit to exceed safely");
  const std::string prefix = p2p_->segment_name_prefix();
  std::uint64_t requested = 2 * total;  // same on every rank
  MPI_Allreduce(MPI_IN_PLACE, &requested, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  try {
    p2p_->reserve(static_cast<std::size_t>(requested));
    ADD_FAILURE() << "reserved twice the size of /dev/shm";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/shm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--shm-size"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p2p_->capacity_bytes(), 0u);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(dev_shm_entries(prefix), std::vector<std::string>{});
  EXPECT_EQ(deleted_mappings(prefix), 0);
  // A reasonable size works again.
  p2p_->reserve(4096);
  const TensorLayout layout{3};
  Buffer in(DataType::f32, 3), out(DataType::f32, 3);
  for (int i = 0; i < 3; ++i) in.set(i, 2.0f);
  all_reduce(Way::one_shot, in, out, layout);
  EXPECT_EQ(out.get(2), 2.0f * n());
}

TEST_F(HostTransport, ReserveWithDifferentSizesOnSomeRankFailsEverywhereWithMismatch) {
  const std::string prefix = p2p_->segment_name_prefix();
  EXPECT_THROW(p2p_->reserve(rank() == 0 ? 8192 : 4096), Mismatch);
  EXPECT_EQ(p2p_->capacity_bytes(), 0u);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(dev_shm_entries(prefix), std::vector<std::string>{});
  p2p_->reserve(4096);
  EXPECT_EQ(p2p_->capacity_bytes(), 4096u);
}

// ---- ranks that make different calls ---------------------------------------

// Rank 0 makes another call than its peers (another count, route or eps):
// every rank raises Mismatch at once, listing each rank's call, and writes
// nothing; the transport stays usable. Before the check, the one-shot read
// the shorter rank's slot past its input and returned wrong sums.
TEST_F(HostTransport, RanksThatMakeDifferentP2PCallsAllRaiseMismatchAndWriteNothing) {
  constexpr std::int64_t kShort = 1024, kLong = 2048;
  const std::int64_t count = rank() == 0 ? kShort : kLong;
  const TensorLayout layout{count};
  Buffer in(DataType::f32, count), out(DataType::f32, count);
  for (std::int64_t i = 0; i < count; ++i) {
    in.set(i, 1.0f);
    out.set(i, -7.0f);
  }
  auto expect_mismatch = [&](const char* scenario, auto&& call) {
    const auto start = std::chrono::steady_clock::now();
    try {
      call();
      ADD_FAILURE() << scenario << ": completed a call that the ranks made differently";
    } catch (const Mismatch& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("different calls"), std::string::npos) << scenario << ": " << message;
      for (int r = 0; r < n(); ++r) {
        EXPECT_NE(message.find("rank " + std::to_string(r) + ":"), std::string::npos)
            << scenario << ": the message must list rank " << r << "'s call: " << message;
      }
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s)
        << scenario << ": found at the arrival, not after a timeout";
    EXPECT_FALSE(p2p_->broken()) << scenario;
  };
  expect_mismatch("counts", [&] { all_reduce(Way::one_shot, in, out, layout); });
  expect_mismatch("routes and counts", [&] {
    all_reduce(rank() == 0 ? Way::one_shot : Way::two_shot, in, out, layout);
  });
  Buffer residual(DataType::f32, count), weight(DataType::f32, kShort);
  for (std::int64_t i = 0; i < kShort; ++i) weight.set(i, 1.0f);
  const TensorLayout row{1, kShort};
  expect_mismatch("eps", [&] {
    fused(Way::one_shot, out, residual, weight, rank() == 0 ? 1e-6f : 1e-5f, row);
  });
  for (std::int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(out.get(i), -7.0f) << "element " << i << " written by a call that failed";
    ASSERT_EQ(residual.get(i), 0.0f) << "residual element " << i << " written";
  }
  // The same call everywhere works, on both routes, in the slots that follow.
  const TensorLayout same{kShort};
  for (int call = 0; call < 4; ++call) {
    all_reduce(call % 2 ? Way::two_shot : Way::one_shot, in, out, same);
    EXPECT_EQ(out.get(kShort - 1), static_cast<float>(n())) << "call " << call;
  }
}

// ---- a rank that stops participating --------------------------------------

TEST_F(HostTransport, P2PTimesOutWithinTheBoundWhenARankStopsThenResynchronises) {
  teardown();
  const auto timeout = 500ms;
  build(timeout);
  const int stopped = n() - 1;
  const TensorLayout layout{32};
  Buffer in(DataType::f32, 32), out(DataType::f32, 32);
  for (int i = 0; i < 32; ++i) in.set(i, 1.0f);
  all_reduce(Way::one_shot, in, out, layout);  // healthy first

  long long waited_ms = 0;
  if (rank() != stopped) {
    const auto start = std::chrono::steady_clock::now();
    try {
      all_reduce(Way::two_shot, in, out, layout);
      ADD_FAILURE() << "completed a call that rank " << stopped << " never made";
    } catch (const Timeout& e) {
      const auto elapsed = std::chrono::steady_clock::now() - start;
      waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
      EXPECT_LT(elapsed, timeout + 3s) << "the timeout did not bound the wait";
      const std::string message = e.what();
      EXPECT_NE(message.find("rank(s) " + std::to_string(stopped)), std::string::npos) << message;
      EXPECT_NE(message.find("call #2"), std::string::npos) << message;
      EXPECT_NE(message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << message;
    }
    EXPECT_TRUE(p2p_->broken());
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the stopped rank comes back after the others gave up
  // A rank that started its call later may fail before its own deadline,
  // because a peer that gave up first raised `abandoned`: the longest wait
  // is the one that must have reached the timeout.
  MPI_Allreduce(MPI_IN_PLACE, &waited_ms, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_GE(waited_ms, timeout.count()) << "nobody waited the full timeout";
  if (rank() == stopped) {
    // Its peers abandoned this call: it must fail at once, not compute.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(all_reduce(Way::two_shot, in, out, layout), Timeout);
    EXPECT_LT(std::chrono::steady_clock::now() - start, timeout);
  }
  p2p_->reserve(kCapacity);  // collective: rebuilds everywhere, epochs reset
  EXPECT_FALSE(p2p_->broken());
  for (int call = 0; call < 20; ++call) {
    all_reduce(call % 2 ? Way::two_shot : Way::one_shot, in, out, layout);
    EXPECT_EQ(out.get(31), static_cast<float>(n()));
  }
}

// The ranks a message names after "waiting for rank(s) ", up to " to ".
std::vector<std::string> awaited_ranks_named(const std::string& message) {
  const std::string head = "waiting for rank(s) ";
  const auto start = message.find(head);
  if (start == std::string::npos) return {};
  const auto end = message.find(" to ", start);
  std::vector<std::string> ranks;
  std::string item;
  for (char c : message.substr(start + head.size(), end - start - head.size())) {
    if (c >= '0' && c <= '9') {
      item += c;
    } else if (!item.empty()) {
      ranks.push_back(item);
      item.clear();
    }
  }
  if (!item.empty()) ranks.push_back(item);
  return ranks;
}

TEST_F(HostTransport, P2PRanksThatLearnOfATimeoutLateStillNameTheRankThatWasLate) {
  if (n() < 3) GTEST_SKIP() << "needs a rank that gives up, a late rank, and one that looks last";
  teardown();
  const auto timeout = 300ms;
  build(timeout);
  const TensorLayout layout{32};
  Buffer in(DataType::f32, 32), out(DataType::f32, 32);
  for (int i = 0; i < 32; ++i) in.set(i, 1.0f);
  all_reduce(Way::one_shot, in, out, layout);  // healthy first

  // In turn: rank 0 alone (it gives up), then the late rank, then the rest.
  // The last ones find every rank arrived: they can name the late rank
  // only from what rank 0 recorded when it gave up.
  const int late = n() - 1;
  const auto fail_call = [&] {
    try {
      all_reduce(Way::one_shot, in, out, layout);
      ADD_FAILURE() << "completed a call that rank 0 gave up on";
      return std::string();
    } catch (const Timeout& e) {
      return std::string(e.what());
    }
  };
  int token = 0;
  std::string message;
  if (rank() == 0) {
    message = fail_call();
    MPI_Send(&token, 1, MPI_INT, late, 0, MPI_COMM_WORLD);
  } else if (rank() == late) {
    MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    message = fail_call();
    for (int r = 1; r < late; ++r) MPI_Send(&token, 1, MPI_INT, r, 0, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&token, 1, MPI_INT, late, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    message = fail_call();
  }
  const std::vector<std::string> named = awaited_ranks_named(message);
  EXPECT_NE(std::find(named.begin(), named.end(), std::to_string(late)), named.end())
      << "rank " << late << " was late, but the message names it nowhere as awaited: " << message;
  if (rank() != 0) {
    EXPECT_NE(message.find("rank(s) 0 gave up on it"), std::string::npos) << message;
  }
  if (rank() == late) {
    EXPECT_NE(message.find(std::to_string(late) + " (this rank)"), std::string::npos) << message;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  p2p_->reserve(kCapacity);
  all_reduce(Way::one_shot, in, out, layout);
  EXPECT_EQ(out.get(31), static_cast<float>(n()));
}

TEST_F(HostTransport, FallbackTimesOutWithinTheBoundWhenARankStopsThenResynchronises) {
  teardown();
  const auto timeout = 500ms;
  build(timeout);
  const int stopped = n() - 1;
  const TensorLayout layout{1000};
  Buffer in(DataType::bf16, 1000), out(DataType::bf16, 1000);
  for (int i = 0; i < 1000; ++i) in.set(i, 1.0f);
  all_reduce(Way::fallback, in, out, layout);

  if (rank() != stopped) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(all_reduce(Way::fallback, in, out, layout), Timeout);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_GE(elapsed, timeout);
    EXPECT_LT(elapsed, timeout + timeout / 2 + 3s);    // the wait, then a short roll call
    for (int i = 0; i < 1000; ++i) out.set(i, -1.0f);  // MPI must not write here any more
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == stopped) {
    // Late, it makes the matching call: the peers' abandoned reductions
    // complete into buffers the fallback kept alive. Its own reduction
    // completes too, but the others gave up on this call, so it must not
    // return a result they did not get: Timeout, naming them.
    try {
      all_reduce(Way::fallback, in, out, layout);
      ADD_FAILURE() << "the late call must raise Timeout: the others gave up on it";
    } catch (const Timeout& e) {
      const std::string message = e.what();
      for (int r = 0; r < n(); ++r) {
        if (r == stopped) continue;
        EXPECT_NE(message.find(std::to_string(r)), std::string::npos)
            << "the message must name rank " << r << ", which gave up: " << message;
      }
      EXPECT_NE(message.find("gave up"), std::string::npos) << message;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Later calls line up again on every rank.
  for (int call = 0; call < 5; ++call) {
    all_reduce(Way::fallback, in, out, layout);
    EXPECT_EQ(out.get(999), static_cast<float>(n()));
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (fallback_->pending_abandoned() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(fallback_->pending_abandoned(), 0u);
  if (rank() != stopped) {
    // The user's buffer was untouched by the late completion: this rank's
    // `out` has been rewritten by the later calls only.
    EXPECT_EQ(out.get(0), static_cast<float>(n()));
  }
}

TEST_F(HostTransport, FallbackRejectsUseAfterClose) {
  fallback_->close();
  fallback_->close();  // idempotent
  const TensorLayout layout{4};
  Buffer in(DataType::f32, 4), out(DataType::f32, 4);
  EXPECT_THROW(all_reduce(Way::fallback, in, out, layout), InvalidUsage);
}

}  // namespace
