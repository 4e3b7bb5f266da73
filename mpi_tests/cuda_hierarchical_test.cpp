// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's hierarchical route on real GPUs, several nodes posed on
// one machine (PEERPLAN_HOST_ID, support/posed_nodes.hpp): 2x2 grouped and
// interleaved at 4 ranks; 3x2, 2x3 and 3x2 interleaved at 6; 2x4 and 4x2 at
// 8. Every declared all-reduce and fused plan the cutoffs admit runs
// Route::hierarchical with Protocol::staged, f32, f16 and bf16, dense and
// strided layouts, shards that the node's ranks do not split evenly (short
// or empty last shards), in place and out of place; results bit-identical
// on every rank, within the float64 reference's tolerance, equal to the
// documented order of the sum where that order fixes the bits (the node
// exchange is MPI, or there are two nodes), and, for integer-valued inputs,
// equal to the flat fallback's bits. The fused op is the hierarchical
// all-reduce followed by the fallbacks' add + RMSNorm kernel: bit for bit
// where the sum is exact. A long mixed sequence of calls (both operations,
// several plans, undeclared and over-cutoff calls between them) stays
// correct and counted. CUDA graphs: captured hierarchical calls replay with
// the NCCL exchange; with the MPI exchange (ranks sharing GPUs) a capture is
// refused with InvalidUsage and the communicator stays usable. On posed
// nodes the default GPU choice (local rank modulo the GPU count) makes ranks
// of different nodes share GPUs, hence the MPI exchange; where the machine
// has a GPU per rank the tests run again with Config::device = the world
// rank, for the NCCL exchange. Nodes holding different numbers of ranks,
// or one rank each, fall back with FallbackReason::node_layout at every
// world size.
//
// World sizes without a layout of several nodes holding two or more ranks
// each (2, 3, 5, 7) skip the hierarchical tests visibly, with the reason;
// without a GPU every test skips ([ ALL SKIPPED ]). Call counts shrink where
// ranks share a GPU (it time-slices them).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/cuda_test_support.hpp"
#include "support/fault_test_support.hpp"
#include "support/posed_nodes.hpp"

namespace peerplan::cuda_test {
namespace {

using comm_test::describe;
using comm_test::even_layouts;
using comm_test::hierarchical_config;
using comm_test::Inputs;
using comm_test::Nodes;
using comm_test::PoseAsNodes;
using comm_test::unfit_layouts;
using Bytes = std::vector<std::uint8_t>;

constexpr float kEps = 1e-6f;
constexpr std::size_t npos = std::string::npos;

// A fresh seed per check (PEERPLAN_TEST_SEED replays a run; failures print
// the base).
std::uint64_t fresh_seed() { return comm_test::next_seed(); }
std::string seed_note() { return " (seed base " + std::to_string(comm_test::base_seed()) + ")"; }

std::string no_even_layout() {
  return "no layout of several nodes with the same number (two or more) of ranks on each at " +
         std::to_string(size()) +
         " ranks (there are at 4, 6 and 8): the hierarchical route "
         "cannot be posed; CudaHierarchicalLayout checks this size's unfit layouts";
}

// The same job with P2P off: the flat fallback (NCCL, or MPI where ranks
// share GPUs) over all ranks.
Config flat_config() {
  Config config = hierarchical_config();
  config.disable_p2p = true;
  return config;
}

// The GPU each rank drives. By default the local rank modulo the GPU count
// picks it, and on posed nodes the local ranks repeat from node to node:
// ranks of different nodes share GPUs, so the node exchange is MPI. Where
// the machine has a GPU for every rank, the tests also give each rank its
// own (Config::device = the world rank): the exchange is then NCCL (in a
// build with NCCL). Collective.
struct GpuChoice {
  std::string name;
  int device = -1;
  Config applied_to(Config config) const {
    config.device = device;
    return config;
  }
};

std::vector<GpuChoice> gpu_choices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  std::vector<GpuChoice> choices{{"GPU of the local rank", -1}};
  if (mpi_test::all_ranks(count >= size())) choices.push_back({"a GPU per rank", rank()});
  return choices;
}

// Every even layout with every GPU choice.
struct Posing {
  Nodes nodes;
  GpuChoice gpus;
  std::string text() const { return "nodes " + describe(nodes) + ", " + gpus.name; }
};

std::vector<Posing> posings(const std::vector<Nodes>& layouts) {
  std::vector<Posing> all;
  for (const GpuChoice& gpus : gpu_choices())
    for (const Nodes& nodes : layouts) all.push_back({nodes, gpus});
  return all;
}

// ------------------------------------------------------------ the exchange

// How the node sums travel between nodes, as the CUDA backend documents it:
// MPI where ranks share GPUs (the fallback is MPI then, as it is in a build
// without NCCL), else NCCL.
struct Exchange {
  Nodes nodes;
  bool mpi = false;
  bool shared = false;  // some ranks drive the same GPU: fewer calls

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  // The documented order of the sum fixes the bits: the MPI exchange adds
  // the node sums in node order, NCCL adds two nodes' sums in one fp32 add
  // (the same); between more nodes NCCL's order is its own.
  bool model_exact() const { return mpi || nodes.size() == 2; }
  std::string text() const {
    return describe(nodes) + (mpi ? ", MPI exchange" : ", NCCL exchange") +
           (shared ? ", GPUs shared" : "");
  }
};

// Collective (the ranks' GPUs are compared). The topology fingerprint of a
// job on several nodes does not say whether GPUs are shared ("cuda nodes=2
// ranks=4"), so gpus_shared(comm) cannot tell here: the test compares the
// GPUs' bus ids itself. Call after create (which selects the GPU).
Exchange exchange_of(const Communicator& comm, const Nodes& nodes) {
  Exchange exchange;
  exchange.nodes = nodes;
  exchange.shared = any_rank_shares_a_gpu();
  exchange.mpi = comm.fallback() == Fallback::mpi;
  if (exchange.shared) {
    EXPECT_TRUE(exchange.mpi) << "ranks share GPUs, so the fallback and the node exchange must "
                                 "be MPI; the fallback is "
                              << to_string(comm.fallback());
  }
  return exchange;
}

void expect_several_nodes(const Communicator& comm, const Nodes& nodes) {
  EXPECT_EQ(comm.backend(), Backend::cuda);
  EXPECT_NE(comm.topology_fingerprint().find("nodes=" + std::to_string(nodes.size())), npos)
      << comm.topology_fingerprint();
}

// ------------------------------------------------------------- the values

// `count` elements of rank `r`'s input for `seed`, exactly representable in
// `dtype` (comm_test::input_value: uniform in [-1, 1), or integers in
// [-8, 8] other than 0, whose sums are exact in every dtype).
Bytes input_bytes(DataType dtype, Inputs inputs, std::uint64_t seed, int r, std::int64_t count) {
  const std::size_t e = element_size(dtype);
  Bytes bytes(static_cast<std::size_t>(count) * e);
  for (std::int64_t i = 0; i < count; ++i)
    comm_test::from_float(dtype, comm_test::input_value(dtype, inputs, seed, r, i), &bytes[i * e]);
  return bytes;
}

// The fused op's residual: the same on every rank (tensor parallelism).
std::uint64_t residual_seed(std::uint64_t seed) { return seed ^ 0x5eed5eed5eedull; }
Bytes residual_bytes(DataType dtype, Inputs inputs, std::uint64_t seed, std::int64_t count) {
  return input_bytes(dtype, inputs, residual_seed(seed), comm_test::kSharedResidual, count);
}

float element(DataType dtype, const Bytes& bytes, std::int64_t i) {
  return comm_test::to_float(dtype, &bytes[static_cast<std::size_t>(i) * element_size(dtype)]);
}

double unit_roundoff(DataType dtype) {
  return dtype == DataType::bf16 ? 0x1p-8 : dtype == DataType::f16 ? 0x1p-11 : 0x1p-24;
}

// The documented hierarchical sum of one element, `x[r]` rank r's value:
// inside each node fp32 in local-rank order (acc = 0; acc += x_l) rounded
// once to the dtype; then the node sums in node order (acc = node 0's;
// acc += node k's, k = 1..N-1) in fp32, rounded once to the dtype.
float documented_sum(DataType dtype, const Nodes& nodes, const std::vector<float>& x) {
  float total = 0.0f;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    float acc = 0.0f;
    for (int r : nodes[k]) acc += x[static_cast<std::size_t>(r)];
    const float node_sum = comm_test::round_to(dtype, acc);
    total = k == 0 ? node_sum : total + node_sum;
  }
  return comm_test::round_to(dtype, total);
}

// What the hierarchical route adds to the error of one P2P rounding of the
// exact sum (`magnitudes`: the sum of the ranks' |x|): each node sum's
// rounding to the dtype (at most u times its magnitude; together at most
// u * magnitudes), NCCL's rounding of its partial sums between more than two
// nodes (as a fallback's, fallback_rounding_slack), and the fp32 additions.
double hierarchical_slack(DataType dtype, double magnitudes, const Exchange& exchange) {
  const double node_sums = unit_roundoff(dtype) * magnitudes;
  const double between_nodes =
      exchange.mpi ? 0.0 : fallback_rounding_slack(dtype, magnitudes, exchange.num_nodes());
  const double fp32_adds = size() * 0x1p-24 * magnitudes;
  return node_sums + between_nodes + fp32_adds;
}

// ------------------------------------------------------ tensors on the GPU

// A tensor of `layout` in device memory: its whole extent, the elements
// stored in logical order, every other byte poisoned (all-ones: NaN in
// every dtype) and expected to stay so.
class DeviceTensor {
 public:
  DeviceTensor(DataType dtype, const TensorLayout& layout)
      : dtype_(dtype), offsets_(comm_test::element_offsets(layout)) {
    std::int64_t extent = 1;
    for (auto o : offsets_) extent = std::max(extent, o + 1);
    image_.assign(static_cast<std::size_t>(extent) * element_size(dtype), 0xff);
    buffer_ = std::make_unique<DeviceBuffer>(image_.size());
    buffer_->upload(image_);
  }
  void* ptr() const { return buffer_->ptr; }
  std::int64_t count() const { return static_cast<std::int64_t>(offsets_.size()); }

  // Stores `logical` (count() elements) in the elements; padding poisoned.
  void store(const Bytes& logical) {
    const std::size_t e = element_size(dtype_);
    std::fill(image_.begin(), image_.end(), 0xff);
    for (std::size_t i = 0; i < offsets_.size(); ++i)
      std::memcpy(&image_[static_cast<std::size_t>(offsets_[i]) * e], &logical[i * e], e);
    buffer_->upload(image_);
  }
  void poison() { store_image(Bytes(image_.size(), 0xff)); }
  const Bytes& stored() const { return image_; }
  Bytes storage() const { return buffer_->download(image_.size()); }

  // The elements of a downloaded `storage`, logical order.
  Bytes elements(const Bytes& storage) const {
    const std::size_t e = element_size(dtype_);
    Bytes out(offsets_.size() * e);
    for (std::size_t i = 0; i < offsets_.size(); ++i)
      std::memcpy(&out[i * e], &storage[static_cast<std::size_t>(offsets_[i]) * e], e);
    return out;
  }
  // Elements still all-ones (never written).
  std::int64_t unwritten(const Bytes& storage) const {
    const std::size_t e = element_size(dtype_);
    std::int64_t n = 0;
    for (auto o : offsets_) {
      bool poisoned = true;
      for (std::size_t b = 0; b < e; ++b) poisoned = poisoned && storage[o * e + b] == 0xff;
      n += poisoned ? 1 : 0;
    }
    return n;
  }
  // Bytes outside the elements (padding) that are not all-ones any more.
  std::int64_t padding_written(const Bytes& storage) const {
    const std::size_t e = element_size(dtype_);
    std::vector<bool> used(image_.size() / e, false);
    for (auto o : offsets_) used[static_cast<std::size_t>(o)] = true;
    std::int64_t n = 0;
    for (std::size_t k = 0; k < used.size(); ++k)
      for (std::size_t b = 0; !used[k] && b < e; ++b) n += storage[k * e + b] != 0xff ? 1 : 0;
    return n;
  }

 private:
  void store_image(Bytes image) {
    image_ = std::move(image);
    buffer_->upload(image_);
  }
  DataType dtype_;
  std::vector<std::int64_t> offsets_;
  Bytes image_;
  std::unique_ptr<DeviceBuffer> buffer_;
};

// The device buffer of a norm weight and its values.
struct Weight {
  Bytes host;
  std::unique_ptr<DeviceBuffer> device;
};

// Values in [0.5, 1.5] (comm_test::make_weight), the same on every rank.
Weight make_device_weight(DataType dtype, std::int64_t hidden, std::uint64_t seed) {
  const comm_test::Buffer values = comm_test::make_weight(dtype, hidden, seed);
  Weight w;
  w.host.resize(static_cast<std::size_t>(hidden) * element_size(dtype));
  std::memcpy(w.host.data(), values.data(), w.host.size());
  w.device = std::make_unique<DeviceBuffer>(w.host.size());
  w.device->upload(w.host);
  return w;
}

// ------------------------------------------------------------ all-reduce

struct AllReduceRun {
  CallResult result;
  Bytes out;                         // the output's elements, logical order
  std::int64_t unwritten = 0;        // out of place: output elements never written
  std::int64_t padding_written = 0;  // padding bytes of the output changed
  bool input_changed = false;        // out of place: the input was modified
};

// One all-reduce of this rank's `mine` (logical order), default stream.
AllReduceRun all_reduce_on_gpu(Communicator& comm, DataType dtype, const TensorLayout& layout,
                               const Bytes& mine, bool in_place) {
  AllReduceRun run;
  DeviceTensor in(dtype, layout);
  in.store(mine);
  std::unique_ptr<DeviceTensor> separate;
  if (!in_place) separate = std::make_unique<DeviceTensor>(dtype, layout);
  DeviceTensor& out = in_place ? in : *separate;
  run.result = comm.all_reduce(in.ptr(), out.ptr(), dtype, layout, nullptr);
  check_cuda(cudaDeviceSynchronize(), "all_reduce");
  const Bytes storage = out.storage();
  run.out = out.elements(storage);
  run.unwritten = in_place ? 0 : out.unwritten(storage);
  run.padding_written = out.padding_written(storage);
  if (!in_place) run.input_changed = in.storage() != in.stored();
  return run;
}

struct SumCheck {
  std::int64_t wrong = 0;           // outside the float64 reference's tolerance
  std::int64_t model_mismatch = 0;  // hierarchical, model exact: not the documented sum
  std::string first;
};

// `got` (elements, logical order) against every rank's inputs for `seed`:
// integers exactly; random inputs within one rounding of the exact sum
// (sum_tolerance) plus what the route adds: the hierarchical route's
// roundings (hierarchical_slack) or a fallback's (fallback_sum_tolerance).
// On the hierarchical route, where the documented order fixes the bits,
// every element must be the documented sum.
SumCheck check_sum(DataType dtype, Inputs inputs, std::uint64_t seed, const Bytes& got, Route route,
                   const Exchange& exchange) {
  SumCheck check;
  const auto count = static_cast<std::int64_t>(got.size() / element_size(dtype));
  std::vector<float> x(static_cast<std::size_t>(size()));
  for (std::int64_t i = 0; i < count; ++i) {
    double exact = 0, magnitudes = 0;
    for (int r = 0; r < size(); ++r) {
      x[r] = comm_test::input_value(dtype, inputs, seed, r, i);
      exact += x[r];
      magnitudes += std::fabs(x[r]);
    }
    const float v = element(dtype, got, i);
    double tolerance = 0.0;
    if (inputs == Inputs::random) {
      tolerance =
          route == Route::hierarchical
              ? sum_tolerance(dtype, exact) + hierarchical_slack(dtype, magnitudes, exchange)
              : fallback_sum_tolerance(dtype, exact, magnitudes, size());
    }
    if (!(std::fabs(v - exact) <= tolerance)) {
      if (check.wrong++ == 0 && check.first.empty())
        check.first = "element " + std::to_string(i) + " is " + std::to_string(v) +
                      ", float64 sum " + std::to_string(exact) + ", tolerance " +
                      std::to_string(tolerance);
    }
    if (route == Route::hierarchical && exchange.model_exact()) {
      const float model = documented_sum(dtype, exchange.nodes, x);
      if (!(v == model)) {
        if (check.model_mismatch++ == 0 && check.first.empty())
          check.first = "element " + std::to_string(i) + " is " + std::to_string(v) +
                        ", the documented sum " + std::to_string(model);
      }
    }
  }
  return check;
}

void expect_hierarchical(const CallResult& result, const std::string& what) {
  EXPECT_EQ(result.route, Route::hierarchical)
      << what << ": route " << to_string(result.route) << " (" << to_string(result.reason) << ")";
  EXPECT_EQ(result.protocol, Protocol::staged)
      << what << ": protocol " << to_string(result.protocol);
  EXPECT_EQ(result.reason, FallbackReason::none) << what << ": " << to_string(result.reason);
}

void expect_fallback(const CallResult& result, FallbackReason reason, const std::string& what) {
  EXPECT_EQ(result.route, Route::fallback) << what << ": route " << to_string(result.route);
  EXPECT_EQ(result.reason, reason)
      << what << ": reason " << to_string(result.reason) << ", not " << to_string(reason);
  EXPECT_EQ(result.protocol, Protocol::none) << what << ": protocol " << to_string(result.protocol);
}

void expect_hierarchical_plan(const Communicator& comm, const PlanKey& key,
                              const std::string& what) {
  const PlanInfo info = comm.plan_for(key);
  EXPECT_EQ(info.route, Route::hierarchical) << what << ": planned route " << to_string(info.route)
                                             << " (" << to_string(info.route_reason) << ")";
  EXPECT_EQ(info.protocol, Protocol::staged)
      << what << ": planned protocol " << to_string(info.protocol);
  EXPECT_EQ(info.route_reason, FallbackReason::none) << what;
}

// Every check of one all-reduce (collective: the outputs are compared
// across ranks). `route`: the one the call is expected to take.
void expect_all_reduce_correct(const AllReduceRun& run, DataType dtype, Inputs inputs,
                               std::uint64_t seed, Route route, const Exchange& exchange,
                               const std::string& what) {
  const std::string context = what + seed_note();
  EXPECT_EQ(run.unwritten, 0) << context << ": output elements never written";
  EXPECT_EQ(run.padding_written, 0) << context << ": padding bytes written";
  EXPECT_FALSE(run.input_changed) << context << ": the input was modified";
  const SumCheck check = check_sum(dtype, inputs, seed, run.out, route, exchange);
  EXPECT_EQ(check.wrong, 0) << context << ": elements off the float64 sum; first: " << check.first;
  EXPECT_EQ(check.model_mismatch, 0)
      << context << ": elements differ from the documented sum (node sums in local-rank order, "
      << "rounded to the dtype, then added in node order, rounded once); first: " << check.first;
  EXPECT_TRUE(same_on_every_rank(run.out)) << context << ": outputs differ across ranks";
}

// ---------------------------------------------------------------- fused

struct FusedGpuRun {
  CallResult result;
  Bytes out, residual;               // elements, logical order
  std::int64_t padding_written = 0;  // padding bytes of inout or residual changed
};

// One fused call: inout = this rank's `inout`, residual = `residual`,
// default stream.
FusedGpuRun fused_on_gpu(Communicator& comm, DataType dtype, const TensorLayout& layout,
                         const Bytes& inout, const Bytes& residual, const Weight& weight,
                         float eps) {
  FusedGpuRun run;
  DeviceTensor x(dtype, layout), r(dtype, layout);
  x.store(inout);
  r.store(residual);
  run.result =
      comm.fused_add_rms_norm(x.ptr(), r.ptr(), weight.device->ptr, eps, dtype, layout, nullptr);
  check_cuda(cudaDeviceSynchronize(), "fused_add_rms_norm");
  const Bytes xs = x.storage(), rs = r.storage();
  run.out = x.elements(xs);
  run.residual = r.elements(rs);
  run.padding_written = x.padding_written(xs) + r.padding_written(rs);
  return run;
}

// Elements of a fused result off the float64 reference
//   s = sum_ranks(x) + residual;  out = s / sqrt(mean_row(s^2) + eps) * w
// by more than fused_tolerance plus the extra roundings of the route's sum
// (on the output scaled by inv * |w|, twice: inv moves too), as in
// cuda_collectives_test.
std::int64_t fused_wrong(DataType dtype, Inputs inputs, std::uint64_t seed,
                         const TensorLayout& layout, const Weight& weight, float eps,
                         const FusedGpuRun& run, Route route, const Exchange& exchange,
                         std::string& first) {
  const std::int64_t hidden = layout.last_dim();
  const std::int64_t rows = layout.numel() / hidden;
  const Bytes residual = residual_bytes(dtype, inputs, seed, layout.numel());
  std::vector<double> s(static_cast<std::size_t>(hidden)), slack(s.size());
  std::int64_t wrong = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    double squares = 0;
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      double sum = element(dtype, residual, i), magnitudes = 0;
      for (int r = 0; r < size(); ++r) {
        const float v = comm_test::input_value(dtype, inputs, seed, r, i);
        sum += v;
        magnitudes += std::fabs(v);
      }
      s[j] = sum;
      slack[j] = route == Route::hierarchical ? hierarchical_slack(dtype, magnitudes, exchange)
                                              : fallback_rounding_slack(dtype, magnitudes, size());
      squares += sum * sum;
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(hidden) + eps);
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      const double w = element(dtype, weight.host, j);
      const double out_ref = s[j] * inv * w;
      const double r_got = element(dtype, run.residual, i);
      const double o_got = element(dtype, run.out, i);
      const double r_tol = fused_tolerance(dtype, s[j]) + slack[j];
      const double o_tol = fused_tolerance(dtype, out_ref) + 2 * slack[j] * inv * std::fabs(w);
      if (!(std::fabs(r_got - s[j]) <= r_tol) || !(std::fabs(o_got - out_ref) <= o_tol)) {
        if (wrong++ == 0)
          first = "element " + std::to_string(i) + ": residual " + std::to_string(r_got) + " vs " +
                  std::to_string(s[j]) + " (tolerance " + std::to_string(r_tol) + "), out " +
                  std::to_string(o_got) + " vs " + std::to_string(out_ref) + " (tolerance " +
                  std::to_string(o_tol) + ")";
      }
    }
  }
  return wrong;
}

// Every check of one fused call but the route (collective).
void expect_fused_correct(const FusedGpuRun& run, DataType dtype, Inputs inputs, std::uint64_t seed,
                          const TensorLayout& layout, const Weight& weight, float eps, Route route,
                          const Exchange& exchange, const std::string& what) {
  const std::string context = what + seed_note();
  EXPECT_EQ(run.padding_written, 0) << context << ": padding bytes written";
  std::string first;
  EXPECT_EQ(fused_wrong(dtype, inputs, seed, layout, weight, eps, run, route, exchange, first), 0)
      << context << ": elements off the float64 reference; first: " << first;
  EXPECT_TRUE(same_on_every_rank(run.out)) << context << ": outputs differ across ranks";
  EXPECT_TRUE(same_on_every_rank(run.residual)) << context << ": residuals differ across ranks";
}

// ------------------------------------------------------------------ shapes

struct Shape {
  std::string name;
  TensorLayout layout;
};

TensorLayout padded(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  return comm_test::strided_layout(std::move(shape), std::move(strides));
}

// Declarations need rows of whole 16-byte packs, so every innermost size is
// a multiple of 8 (f16/bf16) and 4 (f32). Shards are whole packs split over
// a node's 2..4 ranks: "8" is one bf16 pack (the other ranks' shards are
// empty), 1000 and 3x1032 leave the last shard short at 2, 3 and 4 ranks
// per node (bf16: 125 and 387 packs), the padded layouts skip padding at
// one and two levels, and 40000 elements run past the one-shot cutoff.
std::vector<Shape> all_reduce_shapes() {
  return {{"8", TensorLayout({8})},
          {"1000", TensorLayout({1000})},
          {"3x1032", TensorLayout({3, 1032})},
          {"4x1000_padded", padded({4, 1000}, {1024, 1})},
          {"2x3x64_padded", padded({2, 3, 64}, {256, 72, 1})},
          {"40000", TensorLayout({40000})}};
}

// Row counts that the node's ranks do not split evenly, and padded rows.
std::vector<Shape> fused_shapes() {
  return {{"r1_h64", TensorLayout({1, 64})},
          {"r3_h1000", TensorLayout({3, 1000})},
          {"r5_h264", TensorLayout({5, 264})},
          {"r4_h1024_padded", padded({4, 1024}, {1088, 1})}};
}

constexpr DataType kDtypes[] = {DataType::f32, DataType::f16, DataType::bf16};

std::string label(const Exchange& exchange, DataType dtype, const std::string& shape, Inputs inputs,
                  bool in_place = false) {
  return exchange.text() + ", " + to_string(dtype) + " " + shape + " " +
         comm_test::to_string(inputs) + (in_place ? " in place" : "");
}

// ------------------------------------------------------------------- tests

TEST(CudaHierarchical, AllReduceEveryDtypeAndShapeIsTheDocumentedSumOnEveryRank) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const auto layouts = even_layouts(size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), no_even_layout());
  const auto shapes = all_reduce_shapes();
  for (const Posing& posing : posings(layouts)) {
    const Nodes& nodes = posing.nodes;
    SCOPED_TRACE(posing.text());
    const PoseAsNodes pose(nodes);
    auto comm = create_cuda(posing.gpus.applied_to(hierarchical_config()));
    auto flat = create_cuda(posing.gpus.applied_to(flat_config()));
    expect_several_nodes(*comm, nodes);
    ASSERT_TRUE(comm->p2p_enabled()) << describe(nodes) << ": " << comm->p2p_disabled_reason();
    EXPECT_FALSE(flat->p2p_enabled());
    const Exchange exchange = exchange_of(*comm, nodes);

    std::vector<Declaration> declarations;
    for (DataType dtype : kDtypes)
      for (const auto& s : shapes)
        declarations.push_back(
            Declaration::all_reduce(std::string(to_string(dtype)) + "_" + s.name, dtype, s.layout));
    ASSERT_NO_THROW(comm->declare(declarations));
    for (DataType dtype : kDtypes)
      for (const auto& s : shapes)
        expect_hierarchical_plan(*comm, make_all_reduce_key(dtype, s.layout),
                                 std::string(to_string(dtype)) + " " + s.name);

    std::uint64_t calls = 0, flat_calls = 0;
    for (DataType dtype : kDtypes) {
      for (std::size_t k = 0; k < shapes.size(); ++k) {
        const Shape& s = shapes[k];
        for (Inputs inputs : {Inputs::random, Inputs::integers}) {
          // Each shape in place once and out of place once, random inputs
          // both ways over the shapes.
          const bool in_place = (k + (inputs == Inputs::integers ? 1 : 0)) % 2 == 1;
          const std::string what = label(exchange, dtype, s.name, inputs, in_place);
          const std::uint64_t seed = fresh_seed();
          const Bytes mine = input_bytes(dtype, inputs, seed, rank(), s.layout.numel());
          const AllReduceRun got = all_reduce_on_gpu(*comm, dtype, s.layout, mine, in_place);
          ++calls;
          expect_hierarchical(got.result, what);
          expect_all_reduce_correct(got, dtype, inputs, seed, Route::hierarchical, exchange, what);
          if (inputs == Inputs::integers) {
            // Exact sums: the flat fallback's values, bit for bit.
            const AllReduceRun reference =
                all_reduce_on_gpu(*flat, dtype, s.layout, mine, in_place);
            ++flat_calls;
            EXPECT_EQ(reference.result.route, Route::fallback) << what;
            expect_all_reduce_correct(reference, dtype, inputs, seed, Route::fallback, exchange,
                                      what + " (flat fallback)");
            EXPECT_EQ(got.out, reference.out) << what << ": differs from the flat fallback";
          }
        }
      }
    }
    const Stats stats = comm->stats();
    EXPECT_EQ(stats.p2p_calls, calls);
    EXPECT_EQ(stats.fallback_node_layout, 0u);
    EXPECT_EQ(stats.fallback_p2p_disabled, 0u);
    EXPECT_EQ(stats.fallback_over_cutoff, 0u);
    EXPECT_EQ(stats.fallback_undeclared, 0u);
    ASSERT_EQ(stats.plans.size(), declarations.size());
    for (const PlanStats& plan : stats.plans) {
      EXPECT_EQ(plan.route, Route::hierarchical) << plan.name;
      EXPECT_EQ(plan.protocol, Protocol::staged) << plan.name;
      EXPECT_EQ(plan.hits, 2u) << plan.name;
      EXPECT_EQ(plan.fallbacks, 0u) << plan.name;
    }
    EXPECT_EQ(flat->stats().p2p_calls, 0u);
    EXPECT_EQ(flat->stats().fallback_undeclared, flat_calls);
    comm->close();
    flat->close();
  }
}

TEST(CudaHierarchical, FusedEveryDtypeIsTheHierarchicalSumThenTheFallbackKernel) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const auto layouts = even_layouts(size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), no_even_layout());
  const auto shapes = fused_shapes();
  for (const Posing& posing : posings(layouts)) {
    const Nodes& nodes = posing.nodes;
    SCOPED_TRACE(posing.text());
    const PoseAsNodes pose(nodes);
    auto comm = create_cuda(posing.gpus.applied_to(hierarchical_config()));
    auto flat = create_cuda(posing.gpus.applied_to(flat_config()));
    ASSERT_TRUE(comm->p2p_enabled()) << describe(nodes) << ": " << comm->p2p_disabled_reason();
    const Exchange exchange = exchange_of(*comm, nodes);

    // Per dtype and shape: a weight, the fused plan, and the all-reduce of
    // the same layout (the fused op's first step, called alone below).
    std::vector<Weight> weights;
    std::vector<Declaration> declarations;
    for (DataType dtype : kDtypes) {
      for (const auto& s : shapes) {
        weights.push_back(make_device_weight(dtype, s.layout.last_dim(), fresh_seed()));
        const std::string name = std::string(to_string(dtype)) + "_" + s.name;
        declarations.push_back(Declaration::fused_add_rms_norm("fused_" + name, dtype, s.layout,
                                                               weights.back().device->ptr, kEps));
        declarations.push_back(Declaration::all_reduce("sum_" + name, dtype, s.layout));
      }
    }
    ASSERT_NO_THROW(comm->declare(declarations));

    std::uint64_t calls = 0;
    std::size_t w = 0;
    for (DataType dtype : kDtypes) {
      for (const auto& s : shapes) {
        const Weight& weight = weights[w++];
        const std::int64_t count = s.layout.numel();
        expect_hierarchical_plan(*comm, make_fused_key(dtype, s.layout, weight.device->ptr, kEps),
                                 std::string(to_string(dtype)) + " fused " + s.name);
        {
          const std::string what = label(exchange, dtype, "fused " + s.name, Inputs::random);
          const std::uint64_t seed = fresh_seed();
          const Bytes x = input_bytes(dtype, Inputs::random, seed, rank(), count);
          const Bytes res = residual_bytes(dtype, Inputs::random, seed, count);
          const FusedGpuRun got = fused_on_gpu(*comm, dtype, s.layout, x, res, weight, kEps);
          ++calls;
          expect_hierarchical(got.result, what);
          expect_fused_correct(got, dtype, Inputs::random, seed, s.layout, weight, kEps,
                               Route::hierarchical, exchange, what);
          if (exchange.model_exact()) {
            // The hierarchical all-reduce in place (the documented sum,
            // checked), then the flat fallback's add + RMSNorm kernel fed
            // that sum from rank 0 and zeros from the others (their sum is
            // the same bits): the fused op's bits.
            const AllReduceRun sum =
                all_reduce_on_gpu(*comm, dtype, s.layout, x, /*in_place=*/true);
            ++calls;
            expect_hierarchical(sum.result, what + " (the all-reduce alone)");
            expect_all_reduce_correct(sum, dtype, Inputs::random, seed, Route::hierarchical,
                                      exchange, what + " (the all-reduce alone)");
            const Bytes fed = rank() == 0 ? sum.out : Bytes(sum.out.size(), 0);
            const FusedGpuRun composed =
                fused_on_gpu(*flat, dtype, s.layout, fed, res, weight, kEps);
            EXPECT_EQ(composed.result.route, Route::fallback) << what;
            EXPECT_EQ(got.residual, composed.residual)
                << what << ": the residual differs from the hierarchical sum + the fallback's add";
            EXPECT_EQ(got.out, composed.out)
                << what << ": the output differs from the hierarchical sum + the fallback's "
                << "add + RMSNorm kernel";
          }
        }
        {
          // Integer-valued inputs: exact sums, so the flat fallback's bits.
          const std::string what = label(exchange, dtype, "fused " + s.name, Inputs::integers);
          const std::uint64_t seed = fresh_seed();
          const Bytes x = input_bytes(dtype, Inputs::integers, seed, rank(), count);
          const Bytes res = residual_bytes(dtype, Inputs::integers, seed, count);
          const FusedGpuRun got = fused_on_gpu(*comm, dtype, s.layout, x, res, weight, kEps);
          ++calls;
          expect_hierarchical(got.result, what);
          expect_fused_correct(got, dtype, Inputs::integers, seed, s.layout, weight, kEps,
                               Route::hierarchical, exchange, what);
          const FusedGpuRun reference = fused_on_gpu(*flat, dtype, s.layout, x, res, weight, kEps);
          EXPECT_EQ(reference.result.route, Route::fallback) << what;
          expect_fused_correct(reference, dtype, Inputs::integers, seed, s.layout, weight, kEps,
                               Route::fallback, exchange, what + " (flat fallback)");
          EXPECT_EQ(got.residual, reference.residual)
              << what << ": residual differs from the flat fallback";
          EXPECT_EQ(got.out, reference.out) << what << ": output differs from the flat fallback";
        }
      }
    }
    const Stats stats = comm->stats();
    EXPECT_EQ(stats.p2p_calls, calls);
    EXPECT_EQ(stats.fallback_node_layout, 0u);
    EXPECT_EQ(stats.fallback_p2p_disabled, 0u);
    EXPECT_EQ(stats.fallback_over_cutoff, 0u);
    EXPECT_EQ(stats.fallback_undeclared, 0u);
    comm->close();
    flat->close();
  }
}

// Both operations and several plans alternating, in place and out of
// place, with undeclared and over-cutoff calls (the fallback) in between:
// the route's epochs and the node exchange stay in step call after call.
TEST(CudaHierarchical, MixedSequenceStaysCorrectAndCounted) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const auto layouts = even_layouts(size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), no_even_layout());
  // Interleaved at 4 and 6 ranks, 4x2 at 8; a GPU per rank where there are
  // enough (the NCCL exchange), else the MPI exchange.
  const Posing posing{layouts.back(), gpu_choices().back()};
  const Nodes& nodes = posing.nodes;
  SCOPED_TRACE(posing.text());
  const PoseAsNodes pose(nodes);
  auto comm = create_cuda(posing.gpus.applied_to(hierarchical_config()));
  ASSERT_TRUE(comm->p2p_enabled()) << describe(nodes) << ": " << comm->p2p_disabled_reason();
  const Exchange exchange = exchange_of(*comm, nodes);

  const TensorLayout small({2, 336}), strided = padded({3, 200}, {208, 1}), large({300000}),
                                      rows({2, 512}), rows_f16({3, 264}), undeclared({1001});
  const Weight w_rows = make_device_weight(DataType::bf16, 512, fresh_seed());
  const Weight w_rows_f16 = make_device_weight(DataType::f16, 264, fresh_seed());
  ASSERT_NO_THROW(comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("small", DataType::bf16, small),
      Declaration::all_reduce("strided", DataType::f32, strided),
      Declaration::all_reduce("large", DataType::bf16, large),  // 600 KB: over the cutoff
      Declaration::fused_add_rms_norm("rows", DataType::bf16, rows, w_rows.device->ptr, kEps),
      Declaration::fused_add_rms_norm("rows_f16", DataType::f16, rows_f16, w_rows_f16.device->ptr,
                                      kEps)}));
  EXPECT_EQ(comm->plan_for(make_all_reduce_key(DataType::bf16, large)).route_reason,
            FallbackReason::over_cutoff);

  const int rounds = exchange.shared ? 6 : 16;
  std::uint64_t over_cutoff = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::string at = exchange.text() + ", round " + std::to_string(round) + ": ";
    auto all_reduce = [&](DataType dtype, const TensorLayout& layout, Inputs inputs, bool in_place,
                          Route route, FallbackReason reason, const std::string& name) {
      const std::uint64_t seed = fresh_seed();
      const AllReduceRun got = all_reduce_on_gpu(
          *comm, dtype, layout, input_bytes(dtype, inputs, seed, rank(), layout.numel()), in_place);
      if (route == Route::hierarchical)
        expect_hierarchical(got.result, at + name);
      else
        expect_fallback(got.result, reason, at + name);
      expect_all_reduce_correct(got, dtype, inputs, seed, route, exchange, at + name);
    };
    auto fused = [&](DataType dtype, const TensorLayout& layout, const Weight& weight,
                     Inputs inputs, const std::string& name) {
      const std::uint64_t seed = fresh_seed();
      const FusedGpuRun got = fused_on_gpu(
          *comm, dtype, layout, input_bytes(dtype, inputs, seed, rank(), layout.numel()),
          residual_bytes(dtype, inputs, seed, layout.numel()), weight, kEps);
      expect_hierarchical(got.result, at + name);
      expect_fused_correct(got, dtype, inputs, seed, layout, weight, kEps, Route::hierarchical,
                           exchange, at + name);
    };
    all_reduce(DataType::bf16, small, Inputs::random, round % 2 == 0, Route::hierarchical,
               FallbackReason::none, "small");
    fused(DataType::bf16, rows, w_rows, Inputs::random, "rows");
    all_reduce(DataType::f32, strided, round % 3 == 0 ? Inputs::integers : Inputs::random,
               round % 2 == 1, Route::hierarchical, FallbackReason::none, "strided");
    fused(DataType::f16, rows_f16, w_rows_f16, round % 2 ? Inputs::random : Inputs::integers,
          "rows_f16");
    all_reduce(DataType::f32, undeclared, Inputs::random, false, Route::fallback,
               FallbackReason::undeclared, "undeclared");
    if (round % 3 == 0) {
      all_reduce(DataType::bf16, large, Inputs::integers, true, Route::fallback,
                 FallbackReason::over_cutoff, "large (over the cutoff)");
      ++over_cutoff;
    }
  }
  const Stats stats = comm->stats();
  EXPECT_EQ(stats.p2p_calls, 4u * static_cast<std::uint64_t>(rounds));
  EXPECT_EQ(stats.fallback_undeclared, static_cast<std::uint64_t>(rounds));
  EXPECT_EQ(stats.fallback_over_cutoff, over_cutoff);
  EXPECT_EQ(stats.fallback_node_layout, 0u);
  EXPECT_EQ(stats.fallback_p2p_disabled, 0u);
  for (const PlanStats& plan : stats.plans) {
    if (plan.name == "large") {
      EXPECT_EQ(plan.route, Route::fallback);
      EXPECT_EQ(plan.hits, 0u);
      EXPECT_EQ(plan.fallbacks, over_cutoff);
    } else {
      EXPECT_EQ(plan.route, Route::hierarchical) << plan.name;
      EXPECT_EQ(plan.hits, static_cast<std::uint64_t>(rounds)) << plan.name;
    }
  }
  comm->close();
}

// With the NCCL exchange (every rank its own GPU) captured hierarchical
// calls replay with new inputs, the same bits as eager calls, eager calls
// interleaved. With the MPI exchange (ranks sharing GPUs) the exchange runs
// on the host and cannot be captured: like the MPI fallback
// (cuda_mpi_fallback_test), a call during capture raises InvalidUsage
// before it touches the stream (the capture ends cleanly, empty), counts
// nothing, and eager calls keep working.
TEST(CudaHierarchical, GraphCaptureReplaysWithTheNcclExchangeAndIsRefusedWithTheMpiExchange) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const auto layouts = even_layouts(size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), no_even_layout());
  // With the GPU of the local rank the exchange is MPI; with a GPU per rank
  // (where there are enough) it is NCCL.
  for (const GpuChoice& gpus : gpu_choices()) {
    const Posing posing{layouts.front(), gpus};
    const Nodes& nodes = posing.nodes;
    SCOPED_TRACE(posing.text());
    const PoseAsNodes pose(nodes);
    auto comm = create_cuda(gpus.applied_to(hierarchical_config()));
    ASSERT_TRUE(comm->p2p_enabled()) << describe(nodes) << ": " << comm->p2p_disabled_reason();
    const Exchange exchange = exchange_of(*comm, nodes);

    const DataType dtype = DataType::bf16;
    const TensorLayout vec({4104});  // 513 packs: short last shards
    const TensorLayout rows({3, 1000});
    const Weight weight = make_device_weight(dtype, 1000, fresh_seed());
    ASSERT_NO_THROW(comm->declare(std::vector<Declaration>{
        Declaration::all_reduce("vec", dtype, vec),
        Declaration::fused_add_rms_norm("rows", dtype, rows, weight.device->ptr, kEps)}));
    DeviceTensor in(dtype, vec), out(dtype, vec), inout(dtype, rows), residual(dtype, rows);
    cudaStream_t stream = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // Loads input set `seed` (uploads are synchronous) and poisons the output.
    auto load = [&](std::uint64_t seed) {
      in.store(input_bytes(dtype, Inputs::random, seed, rank(), vec.numel()));
      out.poison();
      inout.store(input_bytes(dtype, Inputs::random, seed ^ 1, rank(), rows.numel()));
      residual.store(residual_bytes(dtype, Inputs::random, seed ^ 1, rows.numel()));
    };
    std::vector<CallResult> results;
    auto enqueue = [&] {
      results.clear();
      results.push_back(comm->all_reduce(in.ptr(), out.ptr(), dtype, vec, stream));
      results.push_back(comm->fused_add_rms_norm(inout.ptr(), residual.ptr(), weight.device->ptr,
                                                 kEps, dtype, rows, stream));
    };
    // The outputs as bytes: the all-reduce's, the fused op's out and residual.
    struct Outputs {
      Bytes sum, out, residual;
      bool operator==(const Outputs&) const = default;
    };
    auto outputs = [&] {
      check_cuda(cudaStreamSynchronize(stream), "stream");
      return Outputs{out.elements(out.storage()), inout.elements(inout.storage()),
                     residual.elements(residual.storage())};
    };
    // One eager round on set `seed`, checked in full.
    auto eager_checked = [&](std::uint64_t seed, const std::string& what) {
      load(seed);
      enqueue();
      const Outputs got = outputs();
      expect_hierarchical(results[0], what + " all-reduce");
      expect_hierarchical(results[1], what + " fused");
      AllReduceRun sum;
      sum.out = got.sum;
      sum.padding_written = out.padding_written(out.storage());
      sum.unwritten = out.unwritten(out.storage());
      expect_all_reduce_correct(sum, dtype, Inputs::random, seed, Route::hierarchical, exchange,
                                what + " all-reduce");
      FusedGpuRun fused;
      fused.out = got.out;
      fused.residual = got.residual;
      fused.padding_written =
          inout.padding_written(inout.storage()) + residual.padding_written(residual.storage());
      expect_fused_correct(fused, dtype, Inputs::random, seed ^ 1, rows, weight, kEps,
                           Route::hierarchical, exchange, what + " fused");
      return got;
    };

    if (!exchange.mpi) {
      constexpr int kSets = 4;
      constexpr int kReplays = 40;
      constexpr int kEagerEvery = 5;
      std::vector<std::uint64_t> seeds;
      std::vector<Outputs> expected;
      for (int k = 0; k < kSets; ++k) {
        seeds.push_back(fresh_seed());
        expected.push_back(
            eager_checked(seeds.back(), exchange.text() + ", eager set " + std::to_string(k)));
      }
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      enqueue();
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      ASSERT_EQ(results.size(), 2u);
      expect_hierarchical(results[0], "captured all-reduce");
      expect_hierarchical(results[1], "captured fused");
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      int mismatches = 0;
      for (int i = 0; i < kReplays; ++i) {
        const int k = (i * 3 + 1) % kSets;
        load(seeds[k]);
        CUDA_OK(cudaGraphLaunch(exec, stream));
        const Outputs got = outputs();
        if (!(got == expected[k])) ++mismatches;
        // Each comparison is collective: all three run on every rank.
        const bool sum_same = same_on_every_rank(got.sum);
        const bool out_same = same_on_every_rank(got.out);
        const bool residual_same = same_on_every_rank(got.residual);
        EXPECT_TRUE(sum_same && out_same && residual_same)
            << "replay " << i << ": outputs differ across ranks";
        if (i % kEagerEvery == kEagerEvery - 1) {  // eager calls between replays
          const int e = (i / kEagerEvery) % kSets;
          load(seeds[e]);
          enqueue();
          if (!(outputs() == expected[e])) ++mismatches;
        }
      }
      EXPECT_EQ(mismatches, 0) << exchange.text() << ": replays or interleaved eager calls whose "
                               << "bytes differ from the eager run of the same inputs";
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(graph));
    } else {
      load(fresh_seed());
      const Stats before = comm->stats();
      // An exception other than InvalidUsage, or none, is reported; the
      // capture is ended whatever happens.
      auto refused = [](auto&& call) -> std::string {
        try {
          call();
        } catch (const InvalidUsage& e) {
          return e.what();
        } catch (const std::exception& e) {
          return std::string("not InvalidUsage: ") + e.what();
        }
        return "not refused";
      };
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const std::string ar_message =
          refused([&] { comm->all_reduce(in.ptr(), out.ptr(), dtype, vec, stream); });
      const std::string fused_message = refused([&] {
        comm->fused_add_rms_norm(inout.ptr(), residual.ptr(), weight.device->ptr, kEps, dtype, rows,
                                 stream);
      });
      cudaGraph_t graph = nullptr;
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      std::size_t captured = 0;
      CUDA_OK(cudaGraphGetNodes(graph, nullptr, &captured));
      EXPECT_EQ(captured, 0u) << "a refused call must not touch the stream";
      CUDA_OK(cudaGraphDestroy(graph));
      EXPECT_NE(ar_message.find("CUDA graph capture"), npos)
          << "a hierarchical all-reduce captured with the MPI exchange must raise InvalidUsage "
             "naming the capture; got: \""
          << ar_message << "\"";
      EXPECT_NE(fused_message.find("CUDA graph capture"), npos)
          << "a hierarchical fused op captured with the MPI exchange must raise InvalidUsage "
             "naming the capture; got: \""
          << fused_message << "\"";
      const Stats after = comm->stats();
      EXPECT_EQ(after.p2p_calls, before.p2p_calls) << "a refused call is not counted";
      EXPECT_EQ(after.fallback_undeclared + after.fallback_over_cutoff +
                    after.fallback_p2p_disabled + after.fallback_node_layout,
                before.fallback_undeclared + before.fallback_over_cutoff +
                    before.fallback_p2p_disabled + before.fallback_node_layout);
      // Still usable eagerly, on the same stream (two rounds: both epochs).
      for (int round = 0; round < 2; ++round)
        eager_checked(fresh_seed(), exchange.text() + ", eager round " + std::to_string(round) +
                                        " after the refused capture");
      EXPECT_EQ(comm->stats().p2p_calls, before.p2p_calls + 4);
    }
    CUDA_OK(cudaStreamDestroy(stream));
    comm->close();
  }
}

// Nodes holding one rank each (every world size; at 2 ranks the only
// layout of several nodes) or different numbers of ranks ({0..n-2} {n-1},
// from 3 ranks): P2P is off, saying why; every declared plan falls back
// with the reason node_layout, counted as such; the results are correct.
TEST(CudaHierarchicalLayout, UnfitNodesFallBackWithTheNodeLayoutReason) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  for (const Nodes& nodes : unfit_layouts(size())) {
    SCOPED_TRACE("nodes " + describe(nodes));
    const PoseAsNodes pose(nodes);
    auto comm = create_cuda(hierarchical_config());
    expect_several_nodes(*comm, nodes);
    const Exchange exchange = exchange_of(*comm, nodes);  // unused by the fallback's checks
    EXPECT_FALSE(comm->p2p_enabled());
    EXPECT_NE(comm->p2p_disabled_reason().find("same number of ranks"), npos)
        << comm->p2p_disabled_reason();
    const TensorLayout dense({3, 104}), strided = padded({4, 1000}, {1024, 1});
    const Weight weight = make_device_weight(DataType::f32, 104, fresh_seed());
    ASSERT_NO_THROW(comm->declare(std::vector<Declaration>{
        Declaration::all_reduce("ar", DataType::f32, dense),
        Declaration::all_reduce("ar_strided", DataType::bf16, strided),
        Declaration::fused_add_rms_norm("fused", DataType::f32, dense, weight.device->ptr, kEps)}));
    for (const PlanKey& key :
         {make_all_reduce_key(DataType::f32, dense), make_all_reduce_key(DataType::bf16, strided),
          make_fused_key(DataType::f32, dense, weight.device->ptr, kEps)}) {
      const PlanInfo info = comm->plan_for(key);
      EXPECT_EQ(info.route, Route::fallback) << key.to_string();
      EXPECT_EQ(info.route_reason, FallbackReason::node_layout)
          << key.to_string() << ": " << to_string(info.route_reason);
    }
    const std::string what = describe(nodes);
    {
      const std::uint64_t seed = fresh_seed();
      const AllReduceRun got = all_reduce_on_gpu(
          *comm, DataType::f32, dense,
          input_bytes(DataType::f32, Inputs::random, seed, rank(), dense.numel()), false);
      expect_fallback(got.result, FallbackReason::node_layout, what + " all-reduce");
      expect_all_reduce_correct(got, DataType::f32, Inputs::random, seed, Route::fallback, exchange,
                                what + " all-reduce");
    }
    {
      const std::uint64_t seed = fresh_seed();
      const AllReduceRun got = all_reduce_on_gpu(
          *comm, DataType::bf16, strided,
          input_bytes(DataType::bf16, Inputs::integers, seed, rank(), strided.numel()), true);
      expect_fallback(got.result, FallbackReason::node_layout, what + " strided all-reduce");
      expect_all_reduce_correct(got, DataType::bf16, Inputs::integers, seed, Route::fallback,
                                exchange, what + " strided all-reduce in place");
    }
    {
      const std::uint64_t seed = fresh_seed();
      const FusedGpuRun got = fused_on_gpu(
          *comm, DataType::f32, dense,
          input_bytes(DataType::f32, Inputs::random, seed, rank(), dense.numel()),
          residual_bytes(DataType::f32, Inputs::random, seed, dense.numel()), weight, kEps);
      expect_fallback(got.result, FallbackReason::node_layout, what + " fused");
      expect_fused_correct(got, DataType::f32, Inputs::random, seed, dense, weight, kEps,
                           Route::fallback, exchange, what + " fused");
    }
    const Stats stats = comm->stats();
    EXPECT_EQ(stats.fallback_node_layout, 3u);
    EXPECT_EQ(stats.fallback_p2p_disabled, 0u);
    EXPECT_EQ(stats.fallback_undeclared, 0u);
    EXPECT_EQ(stats.p2p_calls, 0u);
    for (const PlanStats& plan : stats.plans) {
      EXPECT_EQ(plan.route_reason, FallbackReason::node_layout) << plan.name;
      EXPECT_EQ(plan.fallbacks, 1u) << plan.name;
      EXPECT_EQ(plan.hits, 0u) << plan.name;
    }
    comm->close();
  }
}

// The last rank is late for a hierarchical call, by more than the timeout.
// P2P kernels report a failed wait at the next call (docs/faults.md), the step between nodes at once: every rank, the late one
// included, raises Timeout at the late call or at the call after it, and
// within the bound (no rank hangs: the device kernels give up, the MPI
// step between nodes is bounded); destroying the broken communicator is
// local, and a new one on every rank works.
TEST(CudaHierarchicalTimeout, LateRankFailsEveryRankInTimeAndANewCommunicatorWorks) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const auto layouts = even_layouts(size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), no_even_layout());
  using namespace std::chrono_literals;
  const PoseAsNodes pose(layouts.front());
  constexpr auto kTimeout = 2000ms;
  // Two waits of the timeout at most (the call, then the next call's), and
  // time slices of ranks sharing a GPU.
  constexpr auto kBound = 2 * kTimeout + 4000ms;
  Config config = hierarchical_config();
  config.timeout = kTimeout;
  const std::int64_t n = 1024;
  const TensorLayout layout({n});
  DeviceBuffer in(n * 4), out(n * 4);
  in.upload(random_tensor(DataType::f32, n, 7, rank()));
  const int late = size() - 1;
  {
    auto comm = create_cuda(config);
    comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
    ASSERT_EQ(comm->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr).route,
              Route::hierarchical);
    check_cuda(cudaDeviceSynchronize(), "the call before the late one");
    if (rank() == late) std::this_thread::sleep_for(kTimeout + 500ms);
    const auto start = std::chrono::steady_clock::now();
    const comm_test::Attempt call = comm_test::attempt([&] {
      comm->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr);
      check_cuda(cudaDeviceSynchronize(), "the late call's kernels");
    });
    comm_test::Attempt next;
    if (!call.timed_out) {
      next = comm_test::attempt(
          [&] { comm->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr); });
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(call.timed_out || next.timed_out)
        << (rank() == late ? "the late rank" : "a rank on time")
        << " must raise Timeout at the late call or at the next one; the late call: "
        << call.message << "; the next call: " << next.message;
    EXPECT_LT(waited, kBound) << "detection took too long";
    check_cuda(cudaDeviceSynchronize(), "after the failed calls");
    MPI_Barrier(test_comm());
  }  // destroyed: local, fine on ranks that are out of step
  MPI_Barrier(test_comm());
  auto fresh = create_cuda(config);
  fresh->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
  // Integer values: the sum is exact whatever the order.
  std::vector<float> mine(n);
  for (std::int64_t i = 0; i < n; ++i) mine[i] = static_cast<float>((i + rank()) % 7);
  std::vector<std::uint8_t> bytes(n * 4);
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  in.upload(bytes);
  for (int call = 0; call < 2; ++call) {
    EXPECT_EQ(fresh->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr).route,
              Route::hierarchical);
    check_cuda(cudaDeviceSynchronize(), "a call on the new communicator");
    const auto got = out.download(n * 4);
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      float expected = 0.0f;
      for (int r = 0; r < size(); ++r) expected += static_cast<float>((i + r) % 7);
      float value;
      std::memcpy(&value, got.data() + i * 4, 4);
      wrong += value != expected;
    }
    EXPECT_EQ(wrong, 0) << "call " << call << " on the new communicator";
  }
  fresh->close();
}

// A rank of the first node is late by more than the timeout, and the other
// nodes' ranks are late by less, so that the step between nodes waits for
// the first node's ranks and gets their shards: shards their node kernels
// never reduced (they gave up, or found at their start that a peer had).
// Those must not come back as a sum: a rank whose call returned with a
// wrong result must hear at the next call that the call failed (the
// device's report, "P2P call #..."), and a rank of the other nodes, whose
// own kernels and exchange completed, says why: the sum between nodes is
// not the call's (the shard's mark, docs/faults.md).
TEST(CudaHierarchicalTimeout, ShardsNotReducedAreNeverSummedIntoAResult) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const auto layouts = even_layouts(size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), no_even_layout());
  using namespace std::chrono_literals;
  const Nodes& nodes = layouts.front();
  const PoseAsNodes pose(nodes);
  constexpr auto kTimeout = 2000ms;
  constexpr auto kBound = 2 * kTimeout + 4000ms;
  int my_node = 0, my_local = 0;
  for (std::size_t node = 0; node < nodes.size(); ++node) {
    for (std::size_t local = 0; local < nodes[node].size(); ++local) {
      if (nodes[node][local] == rank()) {
        my_node = static_cast<int>(node);
        my_local = static_cast<int>(local);
      }
    }
  }
  const int late = nodes[0][1];
  // The late rank starts after its node's peers gave up (1.0 x timeout);
  // the other nodes start before and wait for it between nodes for less
  // than the timeout.
  const auto delay = rank() == late ? 7 * kTimeout / 5 : my_node == 0 ? 0ms : 4 * kTimeout / 5;
  Config config = hierarchical_config();
  config.timeout = kTimeout;
  const std::int64_t n = 4096;
  const TensorLayout layout({n});
  DeviceBuffer in(n * 4), out(n * 4);
  // Integer values, different in each call: every sum is exact, and a
  // shard left from the first call is not the second call's.
  const auto upload_call = [&](int call) {
    std::vector<std::uint8_t> bytes(n * 4);
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>((i + rank() + 3 * call) % 5);
      std::memcpy(bytes.data() + i * 4, &v, 4);
    }
    in.upload(bytes);
  };
  const auto wrong_elements = [&](int call) {
    const auto got = out.download(n * 4);
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      float expected = 0.0f;
      for (int r = 0; r < size(); ++r) expected += static_cast<float>((i + r + 3 * call) % 5);
      float value;
      std::memcpy(&value, got.data() + i * 4, 4);
      wrong += value != expected;
    }
    return wrong;
  };
  auto comm = create_cuda(config);
  comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
  upload_call(0);
  ASSERT_EQ(comm->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr).route,
            Route::hierarchical);
  check_cuda(cudaDeviceSynchronize(), "the call before the late one");
  ASSERT_EQ(wrong_elements(0), 0) << "the call before the late one";
  upload_call(1);
  check_cuda(cudaMemset(out.ptr, 0, n * 4), "clearing out");
  check_cuda(cudaDeviceSynchronize(), "clearing out");
  MPI_Barrier(test_comm());
  std::this_thread::sleep_for(delay);
  const auto start = std::chrono::steady_clock::now();
  const comm_test::Attempt call = comm_test::attempt([&] {
    comm->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr);
    check_cuda(cudaDeviceSynchronize(), "the late call's kernels");
  });
  const std::int64_t wrong = call.timed_out ? 0 : wrong_elements(1);
  comm_test::Attempt next;
  if (!call.timed_out) {
    next = comm_test::attempt(
        [&] { comm->all_reduce(in.ptr, out.ptr, DataType::f32, layout, nullptr); });
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  const std::string who = "rank " + std::to_string(rank()) + " (node " + std::to_string(my_node) +
                          ", local rank " + std::to_string(my_local) + ")";
  EXPECT_TRUE(call.timed_out || next.timed_out)
      << who
      << " must raise Timeout at the late call or at the next one; the late call: " << call.message
      << "; the next call: " << next.message;
  if (wrong > 0) {
    EXPECT_NE(next.message.find("P2P call #"), npos)
        << who << ": the late call returned with " << wrong << " of " << n
        << " elements wrong, so the next call must report that call failed; it raised: "
        << next.message;
  }
  // The mark at work: a rank of another node that received the late rank's
  // group sum says the sum is not the call's (a node peer of it may find
  // instead that it gave up first, and say that).
  const std::string& reported = call.timed_out ? call.message : next.message;
  int told_why = my_node != 0 && reported.find("is not this call's") != npos;
  MPI_Allreduce(MPI_IN_PLACE, &told_why, 1, MPI_INT, MPI_LOR, test_comm());
  EXPECT_TRUE(told_why) << "no rank of the other nodes said the sum between nodes was not the "
                        << "late call's; " << who << " raised: " << reported;
  EXPECT_LT(waited, kBound) << who << ": detection took too long";
  check_cuda(cudaDeviceSynchronize(), "after the failed calls");
  MPI_Barrier(test_comm());
}

}  // namespace
}  // namespace peerplan::cuda_test
