// SPDX-License-Identifier: Apache-2.0
// The one-GPU kernel loop: every P2P kernel of the CUDA transport run as
// 2..8 *virtual ranks* inside one process on one GPU, timed in CUDA graphs
// against the loopback floor. Each virtual rank has its own slab (the
// transport's layout: signal area | staging slots | copy-engine areas |
// Lamport region), its own buffers, stream and error word; its PeerSet
// names the other virtual ranks' slabs directly (no IPC). Each case is
// prepared and launched through the transport's own path
// (cuda_kernels::prepare_all_reduce / prepare_fused, then launch()), with
// only the grid capped so that every virtual rank's blocks are resident at
// once (else the waits would deadlock; the cap comes from the occupancy
// calculator and the SM count, and is printed; under programmatic
// dependent launch a stream's whole graph may be resident at once, so
// --pdl on needs small --calls at 8 virtual ranks). Per case: one call of
// every virtual rank checked against a host reference (#wrong), then a
// CUDA graph of --calls back-to-back calls per virtual rank, all graphs
// replayed at once, timed with events (median over --repeats; µs per call).
// A kernel that gives up (timeout_ns, --timeout-ms) reports it through its
// error word; the loop never hangs. Residency is a one-GPU artefact: the
// cap is an estimate from an empty device, and a recipe whose row kernel
// runs in clusters next to other virtual ranks' spinning blocks can still
// starve (the fused two-shot + row norm at 1024 rows, 4 and 8 virtual
// ranks, on the H200 run of benchmarks/kernel-loop.md); such a case is
// reported as a timeout. --row-clusters off takes the block-per-row
// variant (dense rows that outnumber the resident clusters take it
// anyway: cuda/row_norm.cu).
//
// What the numbers mean: local HBM and L2 are not NVLink, so the loop's
// bandwidth numbers mean nothing. It ranks variants of the latency-bound
// path (flags, fences, epoch bookkeeping, loads and stores, the fused op's
// row layout), trusted only as far as its ranking agrees with a 2-GPU run
// (benchmarks/kernel-loop.md keeps that table). The floor: on one H200,
// loopback_limits.cu (shared/bench/, beside the checkout) measured a flag round trip between
// two co-resident kernels of 0.84 µs and a step of two virtual ranks, each
// replaying its own graph and meeting the other at a flag, of 1.34 µs; each
// case is printed against that step (--floor-us to use a re-measured one).
//
//   peerplan_kernel_loop                          all cases, 2/4/8 virtual ranks, bf16
//   peerplan_kernel_loop --ranks 2 --cases one_shot_ll,fused_ll --sizes 1K,64K --rows 1,16 \
//       --json out.json
//
// Profiling: --iterations small makes one eager call per virtual rank, no
// graphs, no timing, the virtual ranks one after another (as ncu runs
// them anyway), so the first virtual rank's kernel waits for its peers
// until --timeout-ms (its timeout is expected and reported) while the LAST
// one finds every peer's data already in place (the late marks the earlier
// ones' timeouts left are cleared before it starts): profile that one, the
// kernel's own critical path.
// At 2 virtual ranks the second launch is the one (the run exits 2, for
// the first one's timeout; scripts/kernel-loop.sh runs this):
//   ncu --clock-control none -k regex:one_shot_kernel --launch-skip 1 --launch-count 1 \
//       --section LaunchStats --section Occupancy --section WarpStateStats \
//       --section SchedulerStats --section SpeedOfLight \
//       peerplan_kernel_loop --ranks 2 --cases one_shot_ll --sizes 1K --iterations small \
//       --timeout-ms 20
// A kernel that meets its peers at two barriers (the two-shot, the fused
// two-shot) gets no further than the first in that order: its last virtual
// rank waits at the second for peers that gave up. --iterations solo (the
// staged kernels only: loop::waits_on_flags_only) raises every flag a
// virtual rank waits on before its launch, so each runs its whole path
// alone, its peers' data whatever their slots hold (outputs not checked):
//   ncu ... -k regex:fused_two_shot_rows --launch-count 1 peerplan_kernel_loop \
//       --ranks 2 --cases fused_two_shot_rows --rows 128 --iterations solo --grid-cap 16
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "kernel_loop_plan.hpp"
#include "kernel_loop_reference.hpp"
#include "transport/cuda/element_type.hpp"
#include "launch_recipe.hpp"

namespace {

namespace ck = peerplan::cuda_kernels;
namespace loop = peerplan::bench::loop;

// loopback_limits.cu on one H200 (132 SMs), 2026-12: two virtual ranks,
// each replaying its own graph of one-kernel steps, meeting at a flag.
constexpr double kLoopbackStepUs = 1.34;
constexpr double kLoopbackRoundTripUs = 0.84;

struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw CudaFailure(what + ": " + cudaGetErrorString(status));
  }
}

// Holds a stream for `ns`, so that the host enqueues every virtual rank's
// replays before any of them starts: the timed span then starts together.
__global__ void hold_for(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

struct Options {
  std::vector<int> ranks{2, 4, 8};
  std::vector<loop::LoopCaseInfo> cases = loop::all_cases();
  std::vector<std::int64_t> sizes = loop::geometric_sizes(1024, 16 << 20, 4);
  std::vector<std::int64_t> rows = loop::geometric_sizes(1, 1024, 4);
  std::int64_t hidden = 7168;
  peerplan::DataType dtype = peerplan::DataType::bf16;
  int calls = 20;         // calls per captured graph
  int repeats = 5;        // timed batches; the median is reported
  double batch_ms = 2.0;  // a batch replays the graphs this long, roughly
  int timeout_ms = 3000;
  bool pdl = true;  // programmatic dependent launch where the device has it, as the transport
  bool row_clusters = true;  // a cluster per row where the device has them, as the transport
  bool small = false;
  bool solo = false;  // --iterations solo: small, each virtual rank's peers' flags raised first
  // --grid-cap: every step's units at most this (0: only the residency
  // cap), so that kernels whose residency caps differ compare at one grid.
  int grid_cap = 0;
  double floor_us = kLoopbackStepUs;
  float eps = 1e-6f;
  std::string json;
};

const char* kUsage =
    "kernel_loop [--ranks 2,4,8] [--cases all|NAME,...] [--sizes 1K,...,16M] [--rows 1,...,1024]\n"
    "            [--hidden 7168] [--dtype bf16|f16|f32] [--calls 20] [--repeats 5] [--batch-ms 2]\n"
    "            [--timeout-ms 3000] [--pdl on|off] [--row-clusters on|off]\n"
    "            [--iterations normal|small|solo] [--floor-us 1.34] [--grid-cap UNITS]\n"
    "            [--json FILE]\n";

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      std::printf("cases:");
      for (const auto& c : loop::all_cases()) std::printf(" %s", std::string(c.name).c_str());
      std::printf("\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value (see --help)");
    const std::string value = argv[++i];
    auto positive = [&](double minimum) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(v >= minimum)) {
        throw std::invalid_argument(flag + ": '" + value +
                                    "' must be a number >= " + std::to_string(minimum));
      }
      return v;
    };
    if (flag == "--ranks") {
      o.ranks = loop::parse_rank_counts(value);
    } else if (flag == "--cases") {
      o.cases = loop::parse_cases(value);
    } else if (flag == "--sizes") {
      o.sizes = loop::parse_sizes(value);
    } else if (flag == "--rows") {
      o.rows = loop::parse_sizes(value);
    } else if (flag == "--hidden") {
      o.hidden = static_cast<std::int64_t>(positive(1));
    } else if (flag == "--dtype") {
      o.dtype = loop::parse_dtype(value);
    } else if (flag == "--calls") {
      o.calls = static_cast<int>(positive(1));
    } else if (flag == "--repeats") {
      o.repeats = static_cast<int>(positive(1));
    } else if (flag == "--batch-ms") {
      o.batch_ms = positive(0.01);
    } else if (flag == "--grid-cap") {
      o.grid_cap = static_cast<int>(positive(1));
    } else if (flag == "--timeout-ms") {
      o.timeout_ms = static_cast<int>(positive(1));
    } else if (flag == "--pdl") {
      if (value != "on" && value != "off") throw std::invalid_argument("--pdl: give on or off");
      o.pdl = value == "on";
    } else if (flag == "--row-clusters") {
      if (value != "on" && value != "off") {
        throw std::invalid_argument("--row-clusters: give on or off");
      }
      o.row_clusters = value == "on";
    } else if (flag == "--iterations") {
      if (value != "normal" && value != "small" && value != "solo") {
        throw std::invalid_argument("--iterations: give normal, small or solo");
      }
      o.small = value != "normal";
      o.solo = value == "solo";
    } else if (flag == "--floor-us") {
      o.floor_us = positive(0.001);
    } else if (flag == "--eps") {
      o.eps = static_cast<float>(positive(0));
    } else if (flag == "--json") {
      o.json = value;
    } else {
      throw std::invalid_argument("unknown option " + flag + "\n" + kUsage);
    }
  }
  return o;
}

ck::Algorithm algorithm_of(loop::LoopCase c) {
  using L = loop::LoopCase;
  using A = ck::Algorithm;
  switch (c) {
    case L::one_shot_ll:
      return A::one_shot_ll;
    case L::one_shot_lamport:
      return A::one_shot_lamport;
    case L::two_shot:
      return A::two_shot;
    case L::two_shot_lamport:
      return A::two_shot_lamport;
    case L::two_shot_dma:
      return A::two_shot_dma;
    case L::pull_one_shot:
    case L::pull_one_shot_staged:
      return A::pull_one_shot;
    case L::pull_two_shot:
    case L::pull_two_shot_staged:
      return A::pull_two_shot;
    case L::fused_ll:
      return A::fused_ll;
    case L::fused_lamport:
      return A::fused_lamport;
    case L::fused_staged:
      return A::fused_staged;
    case L::fused_two_shot_rows:
      return A::fused_two_shot_rows;
    case L::fused_two_shot_row_norm:
      break;
  }
  return A::fused_two_shot_row_norm;
}

bool registered_source(loop::LoopCase c) {
  return c == loop::LoopCase::pull_one_shot || c == loop::LoopCase::pull_two_shot;
}

// One virtual rank: what the transport's reserve() and a caller give it.
struct VirtualRank {
  void* slab = nullptr;
  ck::DeviceError* error_host = nullptr;
  ck::DeviceError* error_device = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t stop = nullptr;
  ck::DmaStreams dma{};
  void* in = nullptr;        // all-reduce input (registered for the pull cases)
  void* out = nullptr;       // all-reduce output; the fused op's inout
  void* residual = nullptr;  // the fused op's residual
  void* weight = nullptr;
  ck::PeerSet peers{};
};

// N virtual ranks on the current device, their slabs sized for the largest
// message of every protocol, as reserve() sizes them.
class VirtualNode {
 public:
  VirtualNode(int ranks, std::size_t max_bytes, std::size_t weight_bytes, const Options& o)
      : ranks_(ranks), max_bytes_(max_bytes) {
    int device = 0, major = 0, sms = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "attribute");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "attribute");
    const std::size_t sub_slot = ck::sub_slot_bytes_for(max_bytes, ranks);
    const std::size_t slot = sub_slot * static_cast<std::size_t>(ranks);
    const std::size_t lamport_sub = ck::lamport_sub_slot_bytes_for(max_bytes, ranks);
    const std::size_t dma_area = ck::dma_area_bytes_for(max_bytes, ranks);
    const std::size_t dma_offset = ck::kSignalAreaBytes + 2 * slot;
    lamport_offset_ = dma_offset + static_cast<std::size_t>(ranks) * dma_area;
    slab_bytes_ = lamport_offset_ + 2 * static_cast<std::size_t>(ranks - 1) * lamport_sub;
    check(cudaMalloc(&registry_, sizeof(void*) * ck::kMaxRanks * ck::kMaxRegisteredBuffers),
          "cudaMalloc of the registry table");
    std::vector<void*> table(static_cast<std::size_t>(ck::kMaxRanks) * ck::kMaxRegisteredBuffers);
    v_.resize(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      VirtualRank& v = v_[static_cast<std::size_t>(r)];
      check(cudaMalloc(&v.slab, slab_bytes_),
            "cudaMalloc of a " + std::to_string(slab_bytes_) + "-byte slab");
      check(cudaHostAlloc(reinterpret_cast<void**>(&v.error_host), sizeof(ck::DeviceError),
                          cudaHostAllocMapped),
            "cudaHostAlloc of the error word");
      check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&v.error_device), v.error_host, 0),
            "cudaHostGetDevicePointer");
      check(cudaStreamCreateWithFlags(&v.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreate(&v.stop), "cudaEventCreate");
      for (void** buffer : {&v.in, &v.out, &v.residual}) {
        check(cudaMalloc(buffer, max_bytes), "cudaMalloc of a buffer");
      }
      check(cudaMalloc(&v.weight, weight_bytes), "cudaMalloc of the weight");
      // The pull cases' registered buffer 0 of rank r: its input, mapped
      // here at the same address (one device).
      table[static_cast<std::size_t>(r) * ck::kMaxRegisteredBuffers] = v.in;
    }
    // The copy-engine pipelines' streams after every virtual rank's own
    // stream, so that those take the first hardware queues.
    for (auto& v : v_) check(ck::create_dma_streams(v.dma), "create_dma_streams");
    check(cudaMemcpy(registry_, table.data(), sizeof(void*) * table.size(), cudaMemcpyHostToDevice),
          "registry upload");
    for (int r = 0; r < ranks; ++r) {
      ck::PeerSet& p = v_[static_cast<std::size_t>(r)].peers;
      for (int q = 0; q < ranks; ++q) p.slabs[q] = v_[static_cast<std::size_t>(q)].slab;
      p.rank = r;
      p.size = ranks;
      p.slot_bytes = slot;
      p.sub_slot_bytes = sub_slot;
      p.timeout_ns = static_cast<std::uint64_t>(o.timeout_ms) * 1000000ull;
      p.error = v_[static_cast<std::size_t>(r)].error_device;
      p.registry = static_cast<void* const*>(registry_);
      p.result_offset = ck::result_offset_for(max_bytes, ranks);
      p.lamport_offset = lamport_offset_;
      p.lamport_sub_slot_bytes = lamport_sub;
      p.lamport_max_bytes = max_bytes;
      p.dma_offset = dma_offset;
      p.dma_area_bytes = dma_area;
      p.dma_max_bytes = max_bytes;
      p.overlap_launch = o.pdl && major >= 9;
      p.one_shot_max_blocks = std::min(sms, ck::kMaxOneShotBlocks);
      p.cluster_rows = o.row_clusters && ck::rows_in_clusters_supported(device);
    }
  }
  VirtualNode(const VirtualNode&) = delete;
  VirtualNode& operator=(const VirtualNode&) = delete;
  ~VirtualNode() {
    cudaDeviceSynchronize();
    for (auto& v : v_) {
      ck::destroy_dma_streams(v.dma);
      cudaEventDestroy(v.stop);
      cudaStreamDestroy(v.stream);
      cudaFreeHost(v.error_host);
      for (void* p : {v.slab, v.in, v.out, v.residual, v.weight}) cudaFree(p);
    }
    cudaFree(registry_);
    cudaGetLastError();
  }

  // As reserve() leaves new slabs: zeros, the Lamport region the sentinel,
  // error words clear. Every case starts from epoch 0 on every virtual rank.
  void reset() {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before resetting the slabs");
    for (auto& v : v_) {
      check(cudaMemset(v.slab, 0, lamport_offset_), "slab memset");
      check(cudaMemset(static_cast<char*>(v.slab) + lamport_offset_, ck::kLamportSentinelByte,
                       slab_bytes_ - lamport_offset_),
            "sentinel memset");
      std::memset(v.error_host, 0, sizeof(ck::DeviceError));
    }
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after resetting the slabs");
  }

  int ranks() const { return ranks_; }
  std::size_t max_bytes() const { return max_bytes_; }
  std::size_t slab_bytes() const { return slab_bytes_; }
  VirtualRank& operator[](int r) { return v_[static_cast<std::size_t>(r)]; }

 private:
  int ranks_;
  std::size_t max_bytes_;
  std::size_t slab_bytes_ = 0;
  std::size_t lamport_offset_ = 0;
  void* registry_ = nullptr;
  std::vector<VirtualRank> v_;
};

struct CaseResult {
  std::string name;
  int ranks = 0;
  std::int64_t size = 0;  // bytes, or rows for the fused cases
  bool fused = false;
  std::string recipe;  // describe() after the cap
  std::string grid;    // launched blocks / the recipe's, per step
  double us = -1;      // median µs per call; < 0: not timed
  double us_min = -1, us_max = -1;
  std::int64_t wrong = -1;
  std::string note;
};

// How many launch units (blocks, or clusters) of `step` the device holds.
int device_units(const ck::KernelStep& step, int sms) {
  if (step.cluster > 1) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(step.blocks);
    config.blockDim = dim3(step.threads);
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = step.cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    check(cudaOccupancyMaxActiveClusters(&clusters, step.kernel, &config),
          "cudaOccupancyMaxActiveClusters");
    return clusters;
  }
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, step.kernel,
                                                      static_cast<int>(step.threads), 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return per_sm * sms;
}

// Empty when every virtual rank's error word is clear, else what the first
// failing one recorded.
std::string error_words(VirtualNode& node) {
  for (int r = 0; r < node.ranks(); ++r) {
    const volatile ck::DeviceError* e = node[r].error_host;
    if (e->code == 0) continue;
    const char* code = e->code == 1   ? "timeout"
                       : e->code == 2 ? "peer gave up"
                       : e->code == 3 ? "unregistered buffer"
                                      : "error";
    const char* phase = e->phase == 2   ? "arrive"
                        : e->phase == 3 ? "reduced"
                        : e->phase == 4 ? "done"
                                        : "?";
    return std::string(code) + " on virtual rank " + std::to_string(r) + " (epoch " +
           std::to_string(e->epoch) + ", phase " + phase + ", waiting for " +
           std::to_string(e->peer) + ", block " + std::to_string(e->block) + ")";
  }
  return {};
}

ck::CallPointers pointers_for(VirtualRank& v, loop::LoopCase c, float eps) {
  ck::CallPointers p;
  p.in = v.in;
  p.out = v.out;
  p.inout = v.out;
  p.residual = v.residual;
  p.weight = v.weight;
  p.eps = eps;
  p.dma = &v.dma;
  if (registered_source(c)) p.source = ck::PullSource{0, 0, 0};
  return p;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

CaseResult run_case(VirtualNode& node, const loop::LoopCaseInfo& info, std::int64_t size,
                    const Options& o, int sms) {
  CaseResult result;
  result.name = std::string(info.name);
  result.ranks = node.ranks();
  result.size = size;
  result.fused = info.fused;
  const int n = node.ranks();
  const std::size_t esize = peerplan::element_size(o.dtype);
  const std::int64_t count = info.fused ? size * o.hidden : size / static_cast<std::int64_t>(esize);
  const std::size_t bytes = static_cast<std::size_t>(count) * esize;
  if (count <= 0 || (!info.fused && size % static_cast<std::int64_t>(esize) != 0)) {
    result.note = "skipped: not a whole number of elements";
    return result;
  }
  if (bytes > node.max_bytes()) {
    result.note = "skipped: above the slabs' size";
    return result;
  }
  if (o.solo && !loop::waits_on_flags_only(info.id)) {
    result.note = "skipped: --iterations solo runs the staged kernels only; use small";
    return result;
  }

  // The transport's recipe, then the residency cap on its grid.
  const ck::Algorithm algorithm = algorithm_of(info.id);
  ck::LaunchRecipe recipe;
  ck::KernelLayout layout{};
  layout.rank = info.fused ? 2 : 1;
  layout.dense = 1;
  layout.dims[0] = info.fused ? size : count;
  layout.dims[1] = info.fused ? o.hidden : 0;
  layout.strides[0] = info.fused ? o.hidden : 1;
  layout.strides[1] = 1;
  const ck::PeerSet& shape = node[0].peers;
  const ck::ElementType type = peerplan::transport::cuda::element_type(o.dtype);
  const cudaError_t prepared =
      info.fused ? ck::prepare_fused(algorithm, shape, type, layout, size, o.hidden, recipe)
                 : ck::prepare_all_reduce(algorithm, shape, type, layout, count, recipe);
  if (prepared != cudaSuccess) {
    cudaGetLastError();
    result.note =
        std::string("skipped: the recipe cannot carry it (") + cudaGetErrorString(prepared) + ")";
    return result;
  }
  // Kernels of one virtual rank's stream that may be resident at once: a
  // kernel triggers its programmatic dependent as it starts, so when every
  // step is a programmatic launch the whole graph's chain may be (the first
  // H200 run deadlocked at 8 virtual ranks with a 2-deep estimate); a
  // programmatic step after a plain one overlaps only that one. Recipes of
  // unlike kernels get twice the room: blocks of one kernel fragment an SM
  // for the other (the fused two-shot + row norm deadlocked without it).
  bool all_programmatic = true;
  for (int s = 0; s < recipe.step_count; ++s) all_programmatic &= recipe.steps[s].programmatic;
  const int chain =
      all_programmatic ? (o.small ? 1 : o.calls) * recipe.step_count : recipe.step_count;
  const int in_flight = chain * (recipe.step_count > 1 ? 2 : 1);
  for (int s = 0; s < recipe.step_count; ++s) {
    ck::KernelStep& step = recipe.steps[s];
    int units = loop::resident_units_per_rank(device_units(step, sms), n, in_flight);
    if (o.grid_cap > 0) units = std::min(units, o.grid_cap);
    if (!result.grid.empty()) result.grid += "+";
    if (units == 0) {
      result.note = "skipped: not co-resident at this many virtual ranks";
      return result;
    }
    const unsigned wanted = step.blocks;
    step.blocks = loop::capped_blocks(step.blocks, units, step.cluster);
    result.grid += std::to_string(step.blocks) + "/" + std::to_string(wanted);
  }
  result.recipe = ck::describe(recipe);

  // Inputs, poisoned outputs, one checked call of every virtual rank.
  node.reset();
  const loop::Bytes weight = loop::fused_weight(o.dtype, o.hidden);
  for (int r = 0; r < n; ++r) {
    VirtualRank& v = node[r];
    if (info.fused) {
      const loop::Bytes inout = loop::fused_inout_input(o.dtype, count, r);
      const loop::Bytes residual = loop::fused_residual_input(o.dtype, count, r);
      check(cudaMemcpy(v.out, inout.data(), bytes, cudaMemcpyHostToDevice), "upload");
      check(cudaMemcpy(v.residual, residual.data(), bytes, cudaMemcpyHostToDevice), "upload");
      check(cudaMemcpy(v.weight, weight.data(), weight.size(), cudaMemcpyHostToDevice), "upload");
    } else {
      const loop::Bytes in = loop::all_reduce_input(o.dtype, count, r);
      check(cudaMemcpy(v.in, in.data(), bytes, cudaMemcpyHostToDevice), "upload");
      check(cudaMemset(v.out, 0xff, bytes), "poison");
    }
  }
  check(cudaDeviceSynchronize(), "sync after upload");
  auto launch_one = [&](int r) {
    VirtualRank& v = node[r];
    check(ck::launch(recipe, v.peers, pointers_for(v, info.id, o.eps), v.stream),
          "launch on virtual rank " + std::to_string(r));
  };
  auto launch_all = [&] {
    for (int r = 0; r < n; ++r) launch_one(r);
  };
  if (o.small) {
    // One virtual rank at a time, each finished before the next starts (as
    // ncu runs them anyway): each waits for the later ones' data until its
    // timeout and gives up, which marks the later ones late for the call.
    // The marks are cleared before each later launch, so that the last
    // virtual rank runs the kernel's whole path with every peer's data in
    // place; kept, they would make it fail the call at its start.
    // --iterations solo: every flag this virtual rank waits on is raised
    // first, kFlagLead meeting the epochs 1 to kFlagLead of a case's fresh
    // slabs, so that each one runs its whole path alone, as the one ncu
    // profiles; its peers' data is whatever their slots hold (not checked).
    static const std::vector<std::uint32_t> raised(
        static_cast<std::size_t>(ck::kMaxBlocks) * ck::kMaxRanks, ck::kFlagLead);
    for (int r = 0; r < n; ++r) {
      VirtualRank& v = node[r];
      check(cudaMemsetAsync(static_cast<char*>(v.slab) + offsetof(ck::Signals, abandoned), 0,
                            sizeof(ck::Signals::abandoned), v.stream),
            "clearing the late marks");
      if (o.solo) {
        for (std::size_t row : {offsetof(ck::Signals, arrive), offsetof(ck::Signals, reduced),
                                offsetof(ck::Signals, done)}) {
          check(cudaMemcpyAsync(static_cast<char*>(v.slab) + row, raised.data(),
                                raised.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                                v.stream),
                "raising the peers' flags");
        }
      }
      launch_one(r);
      check(cudaStreamSynchronize(v.stream), "sync after the profiled call");
    }
  } else {
    launch_all();
  }
  check(cudaDeviceSynchronize(), "sync after the checked call");
  if (o.solo) {
    result.note = error_words(node);
    if (result.note.empty()) result.note = "solo: ran through, outputs not checked";
    return result;
  }
  result.wrong = 0;
  for (int r = 0; r < n; ++r) {
    VirtualRank& v = node[r];
    loop::Bytes out(bytes);
    check(cudaMemcpy(out.data(), v.out, bytes, cudaMemcpyDeviceToHost), "download");
    if (info.fused) {
      loop::Bytes residual(bytes);
      check(cudaMemcpy(residual.data(), v.residual, bytes, cudaMemcpyDeviceToHost), "download");
      result.wrong += loop::count_fused_wrong(o.dtype, out, residual, size, o.hidden, r, n, o.eps);
    } else {
      result.wrong += loop::count_all_reduce_wrong(o.dtype, out, count, n);
    }
  }
  result.note = error_words(node);
  if (!result.note.empty() || o.small) return result;

  // A graph of o.calls back-to-back calls per virtual rank.
  std::vector<cudaGraphExec_t> graphs(static_cast<std::size_t>(n), nullptr);
  auto destroy_graphs = [&] {
    cudaDeviceSynchronize();
    for (auto& g : graphs) {
      if (g != nullptr) cudaGraphExecDestroy(g);
      g = nullptr;
    }
  };
  try {
    for (int r = 0; r < n; ++r) {
      VirtualRank& v = node[r];
      cudaGraph_t graph = nullptr;
      check(cudaStreamBeginCapture(v.stream, cudaStreamCaptureModeThreadLocal), "capture");
      const ck::CallPointers pointers = pointers_for(v, info.id, o.eps);
      cudaError_t launched = cudaSuccess;
      for (int c = 0; c < o.calls && launched == cudaSuccess; ++c) {
        launched = ck::launch(recipe, v.peers, pointers, v.stream);
      }
      const cudaError_t ended = cudaStreamEndCapture(v.stream, &graph);
      check(launched, "launch during capture");
      check(ended, "cudaStreamEndCapture");
      const cudaError_t instantiated =
          cudaGraphInstantiate(&graphs[static_cast<std::size_t>(r)], graph, 0);
      cudaGraphDestroy(graph);
      check(instantiated, "cudaGraphInstantiate");
    }
    cudaStream_t leader = nullptr;
    cudaEvent_t go = nullptr;
    check(cudaStreamCreateWithFlags(&leader, cudaStreamNonBlocking), "leader stream");
    check(cudaEventCreate(&go), "event");
    // Every virtual rank replays its graph `replays` times after the go event.
    auto batch = [&](int replays) {
      const unsigned long long hold_ns = 100000ull + 5000ull * static_cast<unsigned>(n * replays);
      hold_for<<<1, 32, 0, leader>>>(hold_ns);
      check(cudaGetLastError(), "hold kernel");
      check(cudaEventRecord(go, leader), "record");
      for (int r = 0; r < n; ++r) check(cudaStreamWaitEvent(node[r].stream, go, 0), "wait");
      for (int i = 0; i < replays; ++i) {
        for (int r = 0; r < n; ++r) {
          check(cudaGraphLaunch(graphs[static_cast<std::size_t>(r)], node[r].stream), "replay");
        }
      }
      for (int r = 0; r < n; ++r) check(cudaEventRecord(node[r].stop, node[r].stream), "record");
      check(cudaDeviceSynchronize(), "sync after a batch");
      float longest = 0;
      for (int r = 0; r < n; ++r) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, go, node[r].stop), "elapsed");
        longest = std::max(longest, ms);
      }
      return 1000.0 * longest / (static_cast<double>(replays) * o.calls);
    };
    // Warm-up: one replay, which also sizes the batches.
    const double warm_us = batch(1);
    int replays = static_cast<int>(o.batch_ms * 1000.0 / std::max(warm_us * o.calls, 1.0));
    replays = std::clamp(replays, 1, 50);
    std::vector<double> per_call;
    for (int b = 0; b < o.repeats && error_words(node).empty(); ++b) {
      per_call.push_back(batch(replays));
    }
    cudaEventDestroy(go);
    cudaStreamDestroy(leader);
    result.note = error_words(node);
    if (result.note.empty() && !per_call.empty()) {
      result.us = median(per_call);
      result.us_min = *std::min_element(per_call.begin(), per_call.end());
      result.us_max = *std::max_element(per_call.begin(), per_call.end());
    }
  } catch (...) {
    destroy_graphs();
    throw;
  }
  destroy_graphs();
  return result;
}

std::string size_text(const CaseResult& r) {
  if (r.fused) return std::to_string(r.size) + " rows";
  const std::int64_t s = r.size;
  if (s >= (1 << 20) && s % (1 << 20) == 0) return std::to_string(s >> 20) + " MiB";
  if (s >= 1024 && s % 1024 == 0) return std::to_string(s >> 10) + " KiB";
  return std::to_string(s) + " B";
}

std::string json_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

void write_json(const std::string& path, const Options& o, const std::vector<CaseResult>& rows,
                const std::string& device, int sms) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "kernel_loop: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f,
               "{\n  \"device\": \"%s\",\n  \"sms\": %d,\n  \"dtype\": \"%s\",\n  \"hidden\": "
               "%lld,\n  \"calls_per_graph\": %d,\n  \"repeats\": %d,\n  \"pdl\": %s,\n"
               "  \"floor_us\": %.4f,\n  \"floor_source\": \"loopback_limits.cu on one H200: "
               "graph step of two virtual ranks meeting at a flag\",\n  \"results\": [\n",
               json_escaped(device).c_str(), sms, loop::dtype_name(o.dtype),
               static_cast<long long>(o.hidden), o.calls, o.repeats, o.pdl ? "true" : "false",
               o.floor_us);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CaseResult& r = rows[i];
    std::fprintf(f,
                 "    {\"case\": \"%s\", \"ranks\": %d, \"%s\": %lld, \"grid\": \"%s\", "
                 "\"recipe\": \"%s\", \"us_per_call\": %.4f, \"us_min\": %.4f, \"us_max\": %.4f, "
                 "\"ratio_to_floor\": %.4f, \"wrong\": %lld, \"note\": \"%s\"}%s\n",
                 r.name.c_str(), r.ranks, r.fused ? "rows" : "bytes",
                 static_cast<long long>(r.size), r.grid.c_str(), json_escaped(r.recipe).c_str(),
                 r.us, r.us_min, r.us_max, r.us > 0 ? r.us / o.floor_us : -1.0,
                 static_cast<long long>(r.wrong), json_escaped(r.note).c_str(),
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

int run(const Options& o) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  sms = prop.multiProcessorCount;
  const std::size_t esize = peerplan::element_size(o.dtype);
  std::size_t max_bytes = 0;
  bool any_fused = false, any_all_reduce = false;
  for (const auto& c : o.cases) (c.fused ? any_fused : any_all_reduce) = true;
  if (any_all_reduce) {
    for (auto s : o.sizes) max_bytes = std::max(max_bytes, static_cast<std::size_t>(s));
  }
  if (any_fused) {
    for (auto r : o.rows) {
      max_bytes = std::max(max_bytes, static_cast<std::size_t>(r * o.hidden) * esize);
    }
  }
  max_bytes = (max_bytes + ck::kPackBytes - 1) / ck::kPackBytes * ck::kPackBytes;

  std::printf("# kernel_loop: P2P kernels as virtual ranks on one GPU (%s, %d SMs), %s, %s\n",
              prop.name, sms, loop::dtype_name(o.dtype),
              o.small ? "one eager call per virtual rank (profiling mode)"
                      : ("graphs of " + std::to_string(o.calls) + " calls, median of " +
                         std::to_string(o.repeats) + " batches")
                            .c_str());
  std::printf(
      "# floor %.2f us/call: loopback_limits.cu on one H200 (two virtual ranks, each replaying "
      "its own graph, meeting at a flag: %.2f us; flag round trip %.2f us)%s\n",
      o.floor_us, kLoopbackStepUs, kLoopbackRoundTripUs,
      o.floor_us != kLoopbackStepUs ? "; --floor-us given" : "");
  std::printf(
      "# local HBM and L2 are not NVLink: bandwidth here means nothing; the loop ranks "
      "variants of the latency-bound path, trusted as far as a 2-GPU run agrees\n");
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("# CUDA_DEVICE_MAX_CONNECTIONS=%s; PDL %s\n", connections ? connections : "unset",
              o.pdl ? "on where the device has it (as the transport)" : "off (--pdl off)");
  std::printf(
      "# grid: blocks launched / the recipe's (capped so that every virtual rank's "
      "blocks are resident at once: occupancy x SMs / (ranks x kernels in flight, the whole graph "
      "under PDL))\n");
  std::printf("%-26s %2s %5s %10s %13s %10s %6s %7s %7s  %s\n", "case", "N", "dtype", "size",
              "grid", "us/call", "floor", "ratio", "#wrong", "note");
  std::vector<CaseResult> rows;
  std::int64_t total_wrong = 0;
  int failures = 0;
  for (int ranks : o.ranks) {
    VirtualNode node(ranks, max_bytes, static_cast<std::size_t>(o.hidden) * esize, o);
    std::printf("# %d virtual ranks: slab %.1f MiB each, timeout %d ms, PDL %s, row clusters %s\n",
                ranks, static_cast<double>(node.slab_bytes()) / (1 << 20), o.timeout_ms,
                node[0].peers.overlap_launch ? "on" : "off",
                node[0].peers.cluster_rows ? "on" : "off");
    for (const auto& c : o.cases) {
      bool gave_up = false;
      for (std::int64_t size : c.fused ? o.rows : o.sizes) {
        CaseResult r;
        if (gave_up) {
          r.name = std::string(c.name);
          r.ranks = ranks;
          r.size = size;
          r.fused = c.fused;
          r.note = "skipped: a smaller size failed";
        } else {
          try {
            r = run_case(node, c, size, o, sms);
          } catch (const CudaFailure& e) {
            r.name = std::string(c.name);
            r.ranks = ranks;
            r.size = size;
            r.fused = c.fused;
            r.note = std::string("CUDA error: ") + e.what();
            // A sticky error leaves the context unusable: stop here.
            if (cudaDeviceSynchronize() != cudaSuccess) {
              rows.push_back(r);
              std::printf("%-26s %2d  %s\n", r.name.c_str(), ranks, r.note.c_str());
              if (!o.json.empty()) write_json(o.json, o, rows, prop.name, sms);
              return 3;
            }
          }
          const bool failed =
              r.note.rfind("skipped", 0) != 0 && r.note.rfind("solo:", 0) != 0 && !r.note.empty();
          if (failed) {
            ++failures;
            gave_up = !o.small;
          }
        }
        if (r.wrong > 0) total_wrong += r.wrong;
        char us[32] = "-", floor[16] = "-", ratio[16] = "-", wrong[24] = "-";
        if (r.us > 0) {
          std::snprintf(us, sizeof us, "%.2f", r.us);
          std::snprintf(floor, sizeof floor, "%.2f", o.floor_us);
          std::snprintf(ratio, sizeof ratio, "%.2f", r.us / o.floor_us);
        }
        if (r.wrong >= 0)
          std::snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(r.wrong));
        std::printf("%-26s %2d %5s %10s %13s %10s %6s %7s %7s  %s\n", r.name.c_str(), ranks,
                    loop::dtype_name(o.dtype), size_text(r).c_str(), r.grid.c_str(), us, floor,
                    ratio, wrong, r.note.c_str());
        std::fflush(stdout);
        rows.push_back(r);
        // Rewritten after every case: a run stopped from outside keeps what it measured.
        if (!o.json.empty()) write_json(o.json, o, rows, prop.name, sms);
      }
    }
  }
  if (!o.json.empty()) write_json(o.json, o, rows, prop.name, sms);
  std::printf("# total #wrong %lld, failed cases %d\n", static_cast<long long>(total_wrong),
              failures);
  return total_wrong == 0 && failures == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Streams share the device's hardware queues (8 by default): two virtual
  // ranks' streams on one queue serialise, and a kernel queued behind a
  // peer that waits for it deadlocks until the timeout. 32 is the most;
  // read when the context is created, so before any CUDA call.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  try {
    return run(parse_options(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "kernel_loop: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_loop: %s\n", e.what());
    return 3;
  }
}
