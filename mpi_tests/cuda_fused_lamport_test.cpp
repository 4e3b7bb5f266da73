// SPDX-License-Identifier: Apache-2.0
// The fused all-reduce + residual add + RMSNorm on the Lamport protocol
// (cuda/fused_lamport.cu) on real GPUs. Each check runs the same inputs
// through a communicator whose fused op takes the Lamport kernel
// (PEERPLAN_FUSED_LAMPORT=all, read at create), one that keeps LL
// lines and the staged paths (=never), and the fallback (NCCL + the add/RMSNorm
// kernel: the same op under another eps, an undeclared key), and requires:
// the float64 reference within the fused op's rounding, the same bytes on
// every rank, the same bytes from Lamport and LL, and at two ranks the same
// bytes as the fallback (NCCL's two-rank sum is one fp32 add too); padding
// between strided rows untouched. Covered: every dtype; rows 1, 3, 16, 64,
// 257 and 1024 of hidden 7168, odd hiddens (4104: 513 or 1026 packs), rows
// of one pack, rows long enough that a thread has more packs than it keeps
// in registers, strided rows, inputs holding the sentinel's bit pattern;
// 200 back-to-back calls mixing fused Lamport, fused LL, Lamport one-shot
// and LL one-shot calls of every dtype on one communicator (the region's
// reset across ops and dtypes); CUDA-graph capture + 100 replays with new
// inputs and eager calls in between (64 calls and 30 replays where ranks
// share a GPU); a rank that skips a call, on either protocol (the others
// raise Timeout at their next call, their rows untouched by the failed call;
// declare recovers);
// ranks that disagree on the protocol. The fallback is NCCL, or MPI where
// ranks share a GPU: both give the same bits at two ranks. Any world size
// from 2 to 8, one GPU per rank or shared. Skipped (on every rank) without
// GPUs.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_bitwise_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr const char* kFusedProtocol = "PEERPLAN_FUSED_LAMPORT";
constexpr const char* kOneShotProtocol = "PEERPLAN_ONE_SHOT_LAMPORT";
// Mixed communicators: LL up to this many bytes, Lamport above, for the
// one-shot and the fused op alike.
constexpr const char* kMixedThreshold = "16384..";

// Fused plans up to 32 MiB on the fused route, all-reduces up to 32 MiB
// one-shot.
Config routes_config() {
  Config c;
  c.cutoffs.one_shot_max_bytes = 32u << 20;
  c.cutoffs.two_shot_max_bytes = 0;
  c.cutoffs.fused_max_bytes = 32u << 20;
  return c;
}

// A communicator created with the Lamport windows PEERPLAN_FUSED_LAMPORT =
// `fused` and PEERPLAN_ONE_SHOT_LAMPORT = `one_shot` (both read at create):
// "never" keeps LL lines, "all" is Lamport at every size.
std::unique_ptr<Communicator> create_with(const std::string& fused, const std::string& one_shot,
                                          Config config = routes_config()) {
  setenv(kFusedProtocol, fused.c_str(), 1);
  setenv(kOneShotProtocol, one_shot.c_str(), 1);
  struct Unset {
    ~Unset() {
      unsetenv(kFusedProtocol);
      unsetenv(kOneShotProtocol);
    }
  } unset;
  return create_cuda(std::move(config));
}

// Logical (row-major) bytes laid out as `layout`, padding all-ones.
std::vector<std::uint8_t> scatter(DataType dtype, const TensorLayout& layout,
                                  const std::vector<std::uint8_t>& logical) {
  const std::size_t e = element_size(dtype);
  std::vector<std::uint8_t> strided(static_cast<std::size_t>(extent_of(layout)) * e, 0xff);
  for (std::int64_t i = 0; i < layout.numel(); ++i) {
    std::memcpy(&strided[static_cast<std::size_t>(offset_in(layout, i)) * e], &logical[i * e], e);
  }
  return strided;
}

// The logical bytes of a strided buffer; `padding_written` counts padding
// bytes that are no longer all-ones.
std::vector<std::uint8_t> gather(DataType dtype, const TensorLayout& layout,
                                 const std::vector<std::uint8_t>& strided,
                                 std::int64_t& padding_written) {
  const std::size_t e = element_size(dtype);
  std::vector<std::uint8_t> logical(static_cast<std::size_t>(layout.numel()) * e);
  std::vector<bool> element(static_cast<std::size_t>(extent_of(layout)), false);
  for (std::int64_t i = 0; i < layout.numel(); ++i) {
    const std::int64_t o = offset_in(layout, i);
    element[static_cast<std::size_t>(o)] = true;
    std::memcpy(&logical[i * e], &strided[static_cast<std::size_t>(o) * e], e);
  }
  for (std::size_t o = 0; o < element.size(); ++o) {
    if (element[o]) continue;
    for (std::size_t b = 0; b < e; ++b) padding_written += strided[o * e + b] != 0xff;
  }
  return logical;
}

// One fused call's data: every rank's input, the replicated residual and
// the weight (logical bytes).
struct FusedData {
  std::vector<std::vector<std::uint8_t>> inputs;  // by rank
  std::vector<std::uint8_t> residual;
  std::vector<std::uint8_t> weight;
};

// Sets some elements of `bytes` to all ones (the sentinel's pattern, a NaN)
// - single elements and a whole 16-byte pack - in row `row`.
void put_sentinels(DataType dtype, std::int64_t hidden, std::int64_t row,
                   std::vector<std::uint8_t>& bytes) {
  const std::size_t e = element_size(dtype);
  const std::int64_t pack = static_cast<std::int64_t>(16 / e);
  for (std::int64_t j : {std::int64_t{1}, hidden / 2 + 3, hidden - 1}) {
    std::memset(&bytes[static_cast<std::size_t>(row * hidden + j) * e], 0xff, e);
  }
  std::memset(&bytes[static_cast<std::size_t>(row * hidden + 2 * pack) * e], 0xff, 16);
}

FusedData fused_data(DataType dtype, std::int64_t rows, std::int64_t hidden, std::uint64_t seed,
                     bool sentinels = false) {
  FusedData d;
  for (int r = 0; r < size(); ++r) {
    d.inputs.push_back(random_tensor(dtype, rows * hidden, seed, r));
    if (sentinels && r == 0 && rows > 1) put_sentinels(dtype, hidden, 1, d.inputs.back());
  }
  d.residual = random_tensor(dtype, rows * hidden, seed, -1);  // replicated, as in TP
  d.weight = random_tensor(dtype, hidden, seed, -2);
  return d;
}

struct FusedResult {
  std::vector<std::uint8_t> out, residual;  // logical
  CallResult result;
  std::int64_t padding_written = 0;
};

// One fused call through `comm` on fresh buffers laid out as `layout`
// (synchronised). `eps` selects the plan (another eps: the fallback).
FusedResult run_fused(Communicator& comm, DataType dtype, const TensorLayout& layout,
                      const void* weight, float eps, const FusedData& data) {
  const auto inout_bytes = scatter(dtype, layout, data.inputs[static_cast<std::size_t>(rank())]);
  const auto residual_bytes = scatter(dtype, layout, data.residual);
  DeviceBuffer inout(inout_bytes.size()), residual(residual_bytes.size());
  inout.upload(inout_bytes);
  residual.upload(residual_bytes);
  FusedResult run;
  run.result =
      comm.fused_add_rms_norm(inout.ptr, residual.ptr, weight, eps, dtype, layout, nullptr);
  check_cuda(cudaDeviceSynchronize(), "fused");
  run.out = gather(dtype, layout, inout.download(inout.bytes), run.padding_written);
  run.residual = gather(dtype, layout, residual.download(residual.bytes), run.padding_written);
  return run;
}

// Elements whose residual or output is off the float64 reference beyond
// the fused op's rounding; rows holding a NaN input must give NaN outputs
// (every element) and NaN residuals where an input was NaN.
std::int64_t count_fused_wrong(DataType dtype, std::int64_t rows, std::int64_t hidden,
                               const FusedData& d, float eps, const FusedResult& got,
                               std::string& first) {
  std::int64_t wrong = 0;
  std::vector<double> r_ref(static_cast<std::size_t>(hidden));
  for (std::int64_t row = 0; row < rows; ++row) {
    double squares = 0;
    bool nan_row = false;
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      double s = value_at(dtype, d.residual, i);
      for (const auto& input : d.inputs) s += value_at(dtype, input, i);
      r_ref[static_cast<std::size_t>(j)] = s;
      nan_row = nan_row || std::isnan(s);
      squares += s * s;
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(hidden) + eps);
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      const double r = r_ref[static_cast<std::size_t>(j)];
      const double out_ref = r * inv * value_at(dtype, d.weight, j);
      const double r_got = value_at(dtype, got.residual, i);
      const double o_got = value_at(dtype, got.out, i);
      const bool ok = nan_row
                          ? std::isnan(o_got) &&
                                (std::isnan(r) ? std::isnan(r_got)
                                               : std::fabs(r_got - r) <= fused_tolerance(dtype, r))
                          : std::fabs(r_got - r) <= fused_tolerance(dtype, r) &&
                                std::fabs(o_got - out_ref) <= fused_tolerance(dtype, out_ref);
      if (!ok && wrong++ == 0) {
        first = "element " + std::to_string(i) + ": residual " + std::to_string(r_got) + " vs " +
                std::to_string(r) + ", out " + std::to_string(o_got) + " vs " +
                std::to_string(out_ref);
      }
    }
  }
  return wrong;
}

std::unique_ptr<DeviceBuffer> device_copy(const std::vector<std::uint8_t>& host) {
  auto buffer = std::make_unique<DeviceBuffer>(host.size());
  buffer->upload(host);
  return buffer;
}

struct FusedCase {
  DataType dtype;
  TensorLayout layout;  // [rows, hidden], maybe with a row stride
  bool sentinels = false;
  std::int64_t rows() const { return layout.dim(0); }
  std::int64_t hidden() const { return layout.dim(1); }
};

TensorLayout rows_of(std::int64_t rows, std::int64_t hidden, std::int64_t row_stride = 0) {
  if (row_stride == 0) return TensorLayout({rows, hidden});
  return TensorLayout::strided(std::vector<std::int64_t>{rows, hidden},
                               std::vector<std::int64_t>{row_stride, 1});
}

std::vector<FusedCase> every_case() {
  std::vector<FusedCase> cases;
  for (DataType dtype : {DataType::bf16, DataType::f16, DataType::f32}) {
    const std::int64_t pack = static_cast<std::int64_t>(16 / element_size(dtype));
    for (std::int64_t rows : {1, 3, 16, 64, 257, 1024})
      cases.push_back({dtype, rows_of(rows, 7168)});
    for (std::int64_t rows : {1, 3, 257}) cases.push_back({dtype, rows_of(rows, 4104)});
    // One pack a row: only the first split's first thread has work.
    for (std::int64_t rows : {1, 1024}) cases.push_back({dtype, rows_of(rows, pack)});
    // Three packs for some threads (more than the two kept in registers).
    cases.push_back({dtype, rows_of(3, dtype == DataType::f32 ? 12288 : 20480)});
    // Padded rows, and the sentinel's pattern among the inputs.
    cases.push_back({dtype, rows_of(257, 4104, 4112)});
    cases.push_back({dtype, rows_of(3, 7168), true});
  }
  return cases;
}

TEST(CudaFusedLamport, EveryDtypeRowsAndHiddenMatchFloat64AndLLAndFallbackBitForBit) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto lamport = create_with("all", "auto");
  auto ll = create_with("never", "auto");
  ASSERT_TRUE(lamport->p2p_enabled() && ll->p2p_enabled()) << lamport->p2p_disabled_reason();
  const float eps = 1e-6f;
  const auto cases = every_case();
  std::vector<FusedData> data;
  std::vector<std::unique_ptr<DeviceBuffer>> weights;
  std::vector<Declaration> declared;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    data.push_back(fused_data(cases[c].dtype, cases[c].rows(), cases[c].hidden(), next_seed(),
                              cases[c].sentinels));
    weights.push_back(device_copy(data.back().weight));
    declared.push_back(Declaration::fused_add_rms_norm("c" + std::to_string(c), cases[c].dtype,
                                                       cases[c].layout, weights.back()->ptr, eps));
  }
  lamport->declare(declared);
  ll->declare(declared);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const FusedCase& fc = cases[c];
    SCOPED_TRACE(std::string(to_string(fc.dtype)) + " " + fc.layout.to_string() +
                 (fc.sentinels ? " with sentinels" : ""));
    const FusedResult by_lamport =
        run_fused(*lamport, fc.dtype, fc.layout, weights[c]->ptr, eps, data[c]);
    const FusedResult by_ll = run_fused(*ll, fc.dtype, fc.layout, weights[c]->ptr, eps, data[c]);
    // Another eps is another key: the same data through the fallback
    // (NCCL or MPI) + add/RMSNorm.
    const float other_eps = eps * 1.0000001f + 1e-12f;
    const FusedResult by_fallback =
        run_fused(*lamport, fc.dtype, fc.layout, weights[c]->ptr, other_eps, data[c]);
    EXPECT_TRUE(is_fused_p2p(by_lamport.result.route)) << to_string(by_lamport.result.route);
    EXPECT_TRUE(is_fused_p2p(by_ll.result.route)) << to_string(by_ll.result.route);
    EXPECT_EQ(by_fallback.result.route, Route::fallback);
    EXPECT_EQ(by_lamport.padding_written, 0) << "padding bytes written";
    std::string first;
    EXPECT_EQ(count_fused_wrong(fc.dtype, fc.rows(), fc.hidden(), data[c], eps, by_lamport, first),
              0)
        << "Lamport, first: " << first;
    EXPECT_EQ(first_difference(fc.dtype, by_lamport.out, by_ll.out), "")
        << "outputs: Lamport vs LL";
    EXPECT_EQ(first_difference(fc.dtype, by_lamport.residual, by_ll.residual), "")
        << "residuals: Lamport vs LL";
    if (size() == 2) {
      EXPECT_EQ(first_difference(fc.dtype, by_lamport.out, by_fallback.out), "")
          << "outputs: Lamport vs fallback";
      EXPECT_EQ(first_difference(fc.dtype, by_lamport.residual, by_fallback.residual), "")
          << "residuals: Lamport vs fallback";
    }
    EXPECT_TRUE(same_on_every_rank(by_lamport.out));
    EXPECT_TRUE(same_on_every_rank(by_lamport.residual));
  }
  lamport->close();
  ll->close();
}

TEST(CudaFusedLamport, ShortRowsGiveTheSameBitsWhenSomeRanksWeightIsMisaligned) {
  // With row clusters, rows of at most two packs per thread run a kernel of
  // their own (cuda/fused_ll_short.cu, cuda/fused_lamport_short.cu) when
  // the call's tensors are 16-byte aligned, the general kernel when one is
  // not.
  // A declared call's inout and residual are (input_alignment), its weight
  // need only be element-aligned. Each rank picks for itself: here the odd
  // ranks' weight is one element off, so the two kernels meet in one call,
  // and every bit must match the call where all are aligned.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  for (const char* lamport : {"never", "all"}) {
    SCOPED_TRACE(std::string("fused Lamport: ") + lamport);
    auto aligned_comm = create_with(lamport, "auto");
    auto mixed_comm = create_with(lamport, "auto");
    ASSERT_TRUE(aligned_comm->p2p_enabled()) << aligned_comm->p2p_disabled_reason();
    const float eps = 1e-6f;
    std::vector<FusedCase> cases;
    for (DataType dtype : {DataType::bf16, DataType::f16, DataType::f32}) {
      const std::int64_t pack = static_cast<std::int64_t>(16 / element_size(dtype));
      // 1024 packs: every thread of the cluster has one; 513: one split
      // short; 2048: every thread has two; 1537: some threads two, some one.
      for (std::int64_t hidden : {1024 * pack, 513 * pack, pack, 2048 * pack, 1537 * pack})
        for (std::int64_t rows : {1, 3, 130}) cases.push_back({dtype, rows_of(rows, hidden)});
    }
    std::vector<FusedData> data;
    std::vector<std::unique_ptr<DeviceBuffer>> weights, shifted_weights;
    std::vector<const void*> mixed_weight;
    std::vector<Declaration> aligned_declared, mixed_declared;
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const FusedCase& fc = cases[c];
      data.push_back(fused_data(fc.dtype, fc.rows(), fc.hidden(), next_seed()));
      weights.push_back(device_copy(data.back().weight));
      const std::size_t e = element_size(fc.dtype);
      auto shifted = data.back().weight;
      shifted.insert(shifted.begin(), e, std::uint8_t{0});
      shifted_weights.push_back(device_copy(shifted));
      mixed_weight.push_back(rank() % 2 == 1
                                 ? static_cast<const char*>(shifted_weights.back()->ptr) + e
                                 : weights.back()->ptr);
      const std::string name = "c" + std::to_string(c);
      aligned_declared.push_back(
          Declaration::fused_add_rms_norm(name, fc.dtype, fc.layout, weights.back()->ptr, eps));
      mixed_declared.push_back(
          Declaration::fused_add_rms_norm(name, fc.dtype, fc.layout, mixed_weight.back(), eps));
    }
    aligned_comm->declare(aligned_declared);
    mixed_comm->declare(mixed_declared);
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const FusedCase& fc = cases[c];
      SCOPED_TRACE(std::string(to_string(fc.dtype)) + " " + fc.layout.to_string());
      const FusedResult aligned =
          run_fused(*aligned_comm, fc.dtype, fc.layout, weights[c]->ptr, eps, data[c]);
      const FusedResult mixed =
          run_fused(*mixed_comm, fc.dtype, fc.layout, mixed_weight[c], eps, data[c]);
      EXPECT_TRUE(is_fused_p2p(aligned.result.route)) << to_string(aligned.result.route);
      EXPECT_TRUE(is_fused_p2p(mixed.result.route)) << to_string(mixed.result.route);
      std::string first;
      EXPECT_EQ(count_fused_wrong(fc.dtype, fc.rows(), fc.hidden(), data[c], eps, aligned, first),
                0)
          << "first: " << first;
      EXPECT_EQ(first_difference(fc.dtype, aligned.out, mixed.out), "") << "outputs";
      EXPECT_EQ(first_difference(fc.dtype, aligned.residual, mixed.residual), "") << "residuals";
      EXPECT_TRUE(same_on_every_rank(mixed.out));
      EXPECT_TRUE(same_on_every_rank(mixed.residual));
    }
    aligned_comm->close();
    mixed_comm->close();
  }
}

TEST(CudaFusedLamport, RowClustersAndOneBlockPerRowGiveTheSameBits) {
  // RowClusters::off runs the Lamport kernel's rows in one block of 1024
  // threads (as on GPUs without clusters): the same rounding order.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const float eps = 1e-5f;
  const std::vector<FusedCase> cases{{DataType::bf16, rows_of(3, 7168)},
                                     {DataType::f32, rows_of(2, 12288)},
                                     {DataType::f16, rows_of(300, 4104)},
                                     {DataType::bf16, rows_of(1024, 8)}};
  std::vector<FusedData> data;
  for (const auto& fc : cases)
    data.push_back(fused_data(fc.dtype, fc.rows(), fc.hidden(), next_seed()));
  std::vector<std::vector<FusedResult>> runs(2);
  for (int clusters : {1, 0}) {
    Config config = routes_config();
    config.kernels.row_clusters = clusters ? RowClusters::automatic : RowClusters::off;
    auto comm = create_with("all", "auto", config);
    std::vector<std::unique_ptr<DeviceBuffer>> weights;
    std::vector<Declaration> declared;
    for (std::size_t c = 0; c < cases.size(); ++c) {
      weights.push_back(device_copy(data[c].weight));
      declared.push_back(Declaration::fused_add_rms_norm(
          "c" + std::to_string(c), cases[c].dtype, cases[c].layout, weights.back()->ptr, eps));
    }
    comm->declare(declared);
    for (std::size_t c = 0; c < cases.size(); ++c) {
      runs[clusters].push_back(
          run_fused(*comm, cases[c].dtype, cases[c].layout, weights[c]->ptr, eps, data[c]));
      EXPECT_TRUE(is_fused_p2p(runs[clusters].back().result.route));
    }
    comm->close();
  }
  for (std::size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(first_difference(cases[c].dtype, runs[0][c].out, runs[1][c].out), "") << "case " << c;
    EXPECT_EQ(first_difference(cases[c].dtype, runs[0][c].residual, runs[1][c].residual), "")
        << "case " << c;
  }
}

// ------------------------------------------------ calls of every kind mixed

// A call of the mixed sequences: a fused op of [rows, hidden] or an
// all-reduce of `count` elements.
struct Shape {
  DataType dtype;
  bool fused;
  std::int64_t rows;    // fused
  std::int64_t hidden;  // fused; all-reduce: the element count
  std::int64_t count() const { return fused ? rows * hidden : hidden; }
  std::size_t bytes() const { return static_cast<std::size_t>(count()) * element_size(dtype); }
  TensorLayout layout() const {
    return fused ? TensorLayout({rows, hidden}) : TensorLayout({hidden});
  }
};

// Byte sizes on both sides of kMixedThreshold (16384 bytes, itself LL).
constexpr std::array<Shape, 8> kShapes{{{DataType::bf16, true, 3, 7168},    // 43008 B: Lamport
                                        {DataType::f32, false, 1, 70000},   // 280000 B: Lamport
                                        {DataType::f16, true, 1, 4096},     // 8192 B: LL
                                        {DataType::bf16, false, 1, 4104},   // 8208 B: LL
                                        {DataType::f32, true, 1, 4104},     // 16416 B: Lamport
                                        {DataType::bf16, true, 16, 8},      // 256 B: LL
                                        {DataType::f16, false, 1, 8200},    // 16400 B: Lamport
                                        {DataType::f32, true, 64, 1024}}};  // 256 KiB: Lamport

std::vector<Declaration> shape_declarations(
    const std::vector<std::unique_ptr<DeviceBuffer>>& weights, float eps) {
  std::vector<Declaration> declared;
  for (std::size_t s = 0; s < kShapes.size(); ++s) {
    const Shape& shape = kShapes[s];
    declared.push_back(
        shape.fused
            ? Declaration::fused_add_rms_norm("s" + std::to_string(s), shape.dtype, shape.layout(),
                                              weights[s]->ptr, eps)
            : Declaration::all_reduce("s" + std::to_string(s), shape.dtype, shape.layout()));
  }
  return declared;
}

// Per shape: a weight (fused shapes) and kSets sets of inputs.
struct ShapeSets {
  static constexpr int kSets = 3;
  std::vector<std::unique_ptr<DeviceBuffer>> weights;  // [shape]
  std::vector<std::vector<FusedData>> data;            // [shape][set]
  ShapeSets() {
    for (const Shape& shape : kShapes) {
      data.emplace_back();
      for (int set = 0; set < kSets; ++set) {
        data.back().push_back(fused_data(shape.dtype, shape.fused ? shape.rows : 1,
                                         shape.fused ? shape.hidden : shape.count(), next_seed()));
        // One weight per shape (the declared one, on the device): every
        // set's float64 reference must use it, not the set's own draw.
        data.back().back().weight = data.back()[0].weight;
      }
      weights.push_back(device_copy(data.back()[0].weight));
    }
  }
};

// The float64 check of one call's output (all-reduce: the output; fused:
// output and residual).
std::int64_t count_wrong(const Shape& shape, const FusedData& d, float eps,
                         const std::vector<std::uint8_t>& out,
                         const std::vector<std::uint8_t>& residual, std::string& first) {
  if (shape.fused) {
    FusedResult got;
    got.out = out;
    got.residual = residual;
    return count_fused_wrong(shape.dtype, shape.rows, shape.hidden, d, eps, got, first);
  }
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < shape.count(); ++i) {
    double ref = 0;
    for (const auto& input : d.inputs) ref += value_at(shape.dtype, input, i);
    const double v = value_at(shape.dtype, out, i);
    if (!(std::fabs(v - ref) <= sum_tolerance(shape.dtype, ref)) && wrong++ == 0) {
      first =
          "element " + std::to_string(i) + ": " + std::to_string(v) + " vs " + std::to_string(ref);
    }
  }
  return wrong;
}

TEST(CudaFusedLamport, TwoHundredBackToBackCallsMixingFusedAndAllReduceOfBothProtocols) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const float eps = 1e-6f;
  ShapeSets sets;
  auto ll = create_with("never", "never");
  auto lamport = create_with("all", "all");
  auto mixed =
      create_with(kMixedThreshold, kMixedThreshold);  // both protocols, both ops, interleaved
  const auto declared = shape_declarations(sets.weights, eps);
  for (Communicator* c : {ll.get(), lamport.get(), mixed.get()}) c->declare(declared);

  // Ranks time-slicing one GPU make every call milliseconds long: fewer there.
  const int call_count = gpus_shared(*ll) ? 64 : 200;
  // An irregular order: every kind of call after every other.
  auto shape_of = [](int k) { return static_cast<std::size_t>((k * 3 + k / 8) % 8); };
  // Per call: its input (all-reduce) or inout, its output or residual.
  std::vector<std::unique_ptr<DeviceBuffer>> first_buffers, second_buffers;
  for (int k = 0; k < call_count; ++k) {
    const Shape& shape = kShapes[shape_of(k)];
    first_buffers.push_back(std::make_unique<DeviceBuffer>(shape.bytes()));
    second_buffers.push_back(std::make_unique<DeviceBuffer>(shape.bytes()));
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto run_all = [&](Communicator& comm) {
    for (int k = 0; k < call_count; ++k) {
      const Shape& shape = kShapes[shape_of(k)];
      const FusedData& d = sets.data[shape_of(k)][k % ShapeSets::kSets];
      first_buffers[k]->upload(d.inputs[static_cast<std::size_t>(rank())]);
      if (shape.fused)
        second_buffers[k]->upload(d.residual);
      else
        second_buffers[k]->poison();
    }
    check_cuda(cudaDeviceSynchronize(), "inputs");  // before the non-blocking stream reads them
    for (int k = 0; k < call_count; ++k) {
      const std::size_t s = shape_of(k);
      const Shape& shape = kShapes[s];
      const CallResult result =
          shape.fused ? comm.fused_add_rms_norm(first_buffers[k]->ptr, second_buffers[k]->ptr,
                                                sets.weights[s]->ptr, eps, shape.dtype,
                                                shape.layout(), stream)
                      : comm.all_reduce(first_buffers[k]->ptr, second_buffers[k]->ptr, shape.dtype,
                                        shape.layout(), stream);
      if (shape.fused)
        EXPECT_TRUE(is_fused_p2p(result.route)) << "call " << k;
      else
        EXPECT_EQ(result.route, Route::one_shot) << "call " << k;
    }
    check_cuda(cudaStreamSynchronize(stream), "the back-to-back calls");
    // Per call: (output, residual) of a fused call, (output, -) of an all-reduce.
    std::vector<std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>>> got;
    for (int k = 0; k < call_count; ++k) {
      const Shape& shape = kShapes[shape_of(k)];
      if (shape.fused)
        got.emplace_back(first_buffers[k]->download(shape.bytes()),
                         second_buffers[k]->download(shape.bytes()));
      else
        got.emplace_back(second_buffers[k]->download(shape.bytes()), std::vector<std::uint8_t>{});
    }
    return got;
  };
  const auto by_ll = run_all(*ll);
  const auto by_lamport = run_all(*lamport);
  const auto by_mixed = run_all(*mixed);
  std::int64_t wrong_calls = 0, differing = 0;
  std::string first;
  for (int k = 0; k < call_count; ++k) {
    const std::size_t s = shape_of(k);
    const Shape& shape = kShapes[s];
    std::string first_element;
    if (count_wrong(shape, sets.data[s][k % ShapeSets::kSets], eps, by_mixed[k].first,
                    by_mixed[k].second, first_element) != 0 &&
        wrong_calls++ == 0) {
      first = "call " + std::to_string(k) + ", " + first_element;
    }
    const std::string a = first_difference(shape.dtype, by_lamport[k].first, by_ll[k].first) +
                          first_difference(shape.dtype, by_lamport[k].second, by_ll[k].second);
    const std::string b = first_difference(shape.dtype, by_mixed[k].first, by_ll[k].first) +
                          first_difference(shape.dtype, by_mixed[k].second, by_ll[k].second);
    if ((!a.empty() || !b.empty()) && differing++ == 0) {
      ADD_FAILURE() << "call " << k << " (" << to_string(shape.dtype) << " "
                    << shape.layout().to_string() << (shape.fused ? " fused" : " all-reduce")
                    << "): Lamport vs LL: " << a << "; mixed vs LL: " << b;
    }
    EXPECT_TRUE(same_on_every_rank(by_mixed[k].first) && same_on_every_rank(by_mixed[k].second))
        << "call " << k;
  }
  EXPECT_EQ(wrong_calls, 0) << "mixed calls off the float64 reference; first: " << first;
  EXPECT_EQ(differing, 0) << "calls whose protocols disagree";
  CUDA_OK(cudaStreamDestroy(stream));
  for (Communicator* c : {mixed.get(), lamport.get(), ll.get()}) c->close();
}

TEST(CudaFusedLamport, GraphCaptureAndReplaysWithNewInputsAndEagerCallsBetween) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const float eps = 1e-6f;
  ShapeSets sets;
  auto ll = create_with("never", "never");
  auto mixed = create_with(kMixedThreshold, kMixedThreshold);
  // Without P2P the calls would go to the fallback, which (MPI) refuses capture.
  ASSERT_TRUE(ll->p2p_enabled() && mixed->p2p_enabled()) << mixed->p2p_disabled_reason();
  const auto declared = shape_declarations(sets.weights, eps);
  ll->declare(declared);
  mixed->declare(declared);

  // Fixed buffers captured in the graph; every set's inputs are copied in
  // before a replay.
  std::vector<std::unique_ptr<DeviceBuffer>> first_buffers, second_buffers, set_inputs,
      set_residuals;
  for (std::size_t s = 0; s < kShapes.size(); ++s) {
    first_buffers.push_back(std::make_unique<DeviceBuffer>(kShapes[s].bytes()));
    second_buffers.push_back(std::make_unique<DeviceBuffer>(kShapes[s].bytes()));
  }
  for (int set = 0; set < ShapeSets::kSets; ++set) {
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      set_inputs.push_back(device_copy(sets.data[s][set].inputs[static_cast<std::size_t>(rank())]));
      set_residuals.push_back(device_copy(sets.data[s][set].residual));
    }
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto load_set = [&](int set) {
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      const std::size_t i = static_cast<std::size_t>(set) * kShapes.size() + s;
      check_cuda(cudaMemcpyAsync(first_buffers[s]->ptr, set_inputs[i]->ptr, kShapes[s].bytes(),
                                 cudaMemcpyDeviceToDevice, stream),
                 "copy");
      if (kShapes[s].fused) {
        check_cuda(cudaMemcpyAsync(second_buffers[s]->ptr, set_residuals[i]->ptr,
                                   kShapes[s].bytes(), cudaMemcpyDeviceToDevice, stream),
                   "copy");
      } else {
        check_cuda(cudaMemsetAsync(second_buffers[s]->ptr, 0xff, kShapes[s].bytes(), stream),
                   "poison");
      }
    }
  };
  auto calls = [&](Communicator& comm) {
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      const Shape& shape = kShapes[s];
      if (shape.fused) {
        comm.fused_add_rms_norm(first_buffers[s]->ptr, second_buffers[s]->ptr, sets.weights[s]->ptr,
                                eps, shape.dtype, shape.layout(), stream);
      } else {
        comm.all_reduce(first_buffers[s]->ptr, second_buffers[s]->ptr, shape.dtype, shape.layout(),
                        stream);
      }
    }
  };
  auto outputs = [&] {
    check_cuda(cudaStreamSynchronize(stream), "sync");
    std::vector<std::uint8_t> all;
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      for (const auto* b : {first_buffers[s].get(), second_buffers[s].get()}) {
        auto part = b->download(b->bytes);
        all.insert(all.end(), part.begin(), part.end());
      }
    }
    return all;
  };
  // The part of outputs() that must be the same on every rank: all but the
  // all-reduces' inputs (first buffers), which are each rank's own data.
  auto agreed_part = [&](const std::vector<std::uint8_t>& all) {
    std::vector<std::uint8_t> part;
    std::size_t at = 0;
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      const std::size_t first = first_buffers[s]->bytes, second = second_buffers[s]->bytes;
      if (kShapes[s].fused) part.insert(part.end(), all.begin() + at, all.begin() + at + first);
      part.insert(part.end(), all.begin() + at + first, all.begin() + at + first + second);
      at += first + second;
    }
    return part;
  };
  // Expected bytes of each set: eager LL calls; the mixed communicator's
  // eager calls must give them too.
  std::vector<std::vector<std::uint8_t>> expected;
  std::int64_t eager_mismatches = 0;
  for (int set = 0; set < ShapeSets::kSets; ++set) {
    load_set(set);
    calls(*ll);
    expected.push_back(outputs());
    load_set(set);
    calls(*mixed);
    if (outputs() != expected.back()) ++eager_mismatches;
    EXPECT_TRUE(same_on_every_rank(agreed_part(expected.back())));
  }
  EXPECT_EQ(eager_mismatches, 0) << "eager sets whose mixed-protocol bytes differ from LL's";

  // Ranks time-slicing one GPU make every replay milliseconds long: fewer
  // there, still with eager calls (and an odd count of them) in between.
  const int replays = gpus_shared(*mixed) ? 30 : 100;
  // The odd call: one more all-reduce, whose input is unchanged, so is
  // its output (a fused call again would add the sums twice).
  auto one_all_reduce = [&] {
    mixed->all_reduce(first_buffers[1]->ptr, second_buffers[1]->ptr, kShapes[1].dtype,
                      kShapes[1].layout(), stream);
  };
  const int mismatches = replay_mismatches(
      stream, ReplayCadence{replays, ShapeSets::kSets, 5, 1, 10}, load_set, [&] { calls(*mixed); },
      outputs, expected, one_all_reduce);
  EXPECT_EQ(mismatches, 0) << "of " << replays
                           << " replays and their eager calls, those whose bytes differ from the "
                              "eager LL run";
  CUDA_OK(cudaStreamDestroy(stream));
  mixed->close();
  ll->close();
}

// The fused op's failure path on each protocol: PEERPLAN_FUSED_LAMPORT
// "all" (the Lamport kernel, whose rows are all or nothing), "never" (LL
// lines: a row's residual packs are written as their sums come, none of
// them when a rank sends nothing) and "two_shot" (neither window: the staged
// fused two-shot, whose rows of 7168 bf16, 14 KiB, run in one kernel that
// writes a block's rows only after every rank reduced them,
// cuda/fused_two_shot_rows.cu). All keep the rows untouched here, and give
// the LL kernel's bits when every rank calls.
class CudaFusedSkippedCall : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFusedSkippedCall,
       RankThatSkipsACallLeavesTheRowsUntouchedThenTimeoutThenDeclareRecovers) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config = routes_config();
  config.timeout = std::chrono::milliseconds(1500);
  const bool two_shot = std::string(GetParam()) == "two_shot";
  if (two_shot) config.kernels.fused_ll = Window::never();
  const std::string lamport = two_shot ? "never" : GetParam();
  const Route fused_route = two_shot ? Route::fused_two_shot : Route::fused_one_shot;
  const Protocol fused_protocol = two_shot                           ? Protocol::staged
                                  : std::string(GetParam()) == "all" ? Protocol::lamport
                                                                     : Protocol::ll;
  auto comm = create_with(lamport, lamport, config);
  auto ll = create_with("never", "never");
  ASSERT_TRUE(comm->p2p_enabled() && ll->p2p_enabled()) << comm->p2p_disabled_reason();
  const float eps = 1e-6f;
  const DataType bf16 = DataType::bf16;
  const std::int64_t rows = 16, hidden = 7168, n = 8192;
  const FusedData d = fused_data(bf16, rows, hidden, next_seed());
  const auto weight = device_copy(d.weight);
  const TensorLayout layout({rows, hidden});
  const std::vector<Declaration> declared{
      Declaration::fused_add_rms_norm("f", bf16, layout, weight->ptr, eps),
      Declaration::all_reduce("x", bf16, vector_of(n))};
  comm->declare(declared);
  ll->declare(declared);
  auto expect_agree = [&] {
    // Fresh inputs and residual; the weight is the declared one (d's).
    FusedData fresh = fused_data(bf16, rows, hidden, next_seed());
    fresh.weight = d.weight;
    const FusedResult a = run_fused(*comm, bf16, layout, weight->ptr, eps, fresh);
    const FusedResult b = run_fused(*ll, bf16, layout, weight->ptr, eps, fresh);
    EXPECT_EQ(a.result.route, fused_route);
    EXPECT_EQ(a.result.protocol, fused_protocol);
    EXPECT_EQ(b.result.protocol, Protocol::ll);
    std::string first;
    EXPECT_EQ(count_fused_wrong(bf16, rows, hidden, fresh, eps, a, first), 0) << first;
    EXPECT_EQ(first_difference(bf16, a.out, b.out) + first_difference(bf16, a.residual, b.residual),
              "");
  };
  expect_agree();

  const bool skips = rank() == size() - 1;
  if (!skips) {
    DeviceBuffer inout(d.residual.size()), residual(d.residual.size());
    inout.upload(d.inputs[static_cast<std::size_t>(rank())]);
    residual.upload(d.residual);
    const auto start = std::chrono::steady_clock::now();
    comm->fused_add_rms_norm(inout.ptr, residual.ptr, weight->ptr, eps, bf16, layout, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the kernel must exit, not trap";
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(1000));
    EXPECT_LT(waited, std::chrono::milliseconds(20000));
    // No pack of any row came: no row was written.
    EXPECT_TRUE(inout.download(inout.bytes) == d.inputs[static_cast<std::size_t>(rank())])
        << "the failed call wrote outputs";
    EXPECT_TRUE(residual.download(residual.bytes) == d.residual)
        << "the failed call wrote residuals";
    std::string message;
    bool timed_out = false;
    try {
      comm->fused_add_rms_norm(inout.ptr, residual.ptr, weight->ptr, eps, bf16, layout, nullptr);
    } catch (const Timeout& e) {
      timed_out = true;
      message = e.what();
    }
    EXPECT_TRUE(timed_out) << "the call after the abandoned one must raise Timeout";
    EXPECT_NE(message.find("rank " + std::to_string(size() - 1)), std::string::npos) << message;
  }
  MPI_Barrier(test_comm());
  comm->declare(declared);  // re-creates the slabs, sentinel region included, on every rank
  // Both parities of the new region, the fused op and the one-shot between.
  for (int k = 0; k < 3; ++k) {
    expect_agree();
    check_all_reduce(*comm, bf16, vector_of(n), Route::one_shot);
  }
  ll->close();
  comm->close();
}

INSTANTIATE_TEST_SUITE_P(Protocols, CudaFusedSkippedCall,
                         ::testing::Values("all", "never", "two_shot"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           const std::string param = info.param;
                           return param == "all" ? "Lamport" : param == "never" ? "LL" : "TwoShot";
                         });

TEST(CudaFusedLamport, RanksThatDisagreeOnTheProtocolFailCreateTogether) {
  // Checked with the rest of the config at create (communicator/
  // card_decisions.cpp).
  PEERPLAN_SKIP_WITHOUT_GPUS();
  std::string message = "create() succeeded";
  try {
    create_with(rank() == 0 ? "never" : "all", "auto");
  } catch (const Mismatch& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(kFusedProtocol), std::string::npos) << message;
  EXPECT_NE(message.find("set the same value on every rank"), std::string::npos) << message;

  message = "create() succeeded";
  try {
    create_with("fastest", "auto");
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("PEERPLAN_FUSED_LAMPORT=\"fastest\""), std::string::npos) << message;
}

}  // namespace
}  // namespace peerplan::cuda_test
