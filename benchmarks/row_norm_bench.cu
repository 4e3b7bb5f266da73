// SPDX-License-Identifier: Apache-2.0
// The add + RMSNorm row kernel alone on one GPU (cuda/row_norm.cu): the
// second step of the fused op's two-shot path and of the NCCL and MPI
// fallbacks' fused op. It touches only local memory, so unlike the kernel
// loop's P2P cases its one-GPU time is its time on a GPU per rank too.
// For each row count: one call of the block-per-row and of the
// cluster-per-row kernel, and one on tensors one element off alignment
// (the general kernel), checked against the host reference (#wrong) and
// against each other bit for bit (same), then the first two timed in a
// CUDA graph of --calls back-to-back calls (median of --repeats batches),
// beside a copy kernel that moves the same bytes (reads the sums and the
// residual, writes the residual and the output): the floor of the row
// kernel's memory traffic on this GPU.
//   peerplan_row_norm_bench [--rows 1,16,64,256,1024,4096] [--hidden 7168] [--dtype bf16]
//                           [--calls 20] [--repeats 7]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective_kernels.hpp"
#include "kernel_loop_plan.hpp"
#include "kernel_loop_reference.hpp"
#include "transport/cuda/element_type.hpp"

namespace {

namespace ck = peerplan::cuda_kernels;
namespace loop = peerplan::bench::loop;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

struct Options {
  std::vector<std::int64_t> rows{1, 16, 64, 256, 1024, 4096};
  std::int64_t hidden = 7168;
  peerplan::DataType dtype = peerplan::DataType::bf16;
  int calls = 20;
  int repeats = 7;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::puts(
          "peerplan_row_norm_bench [--rows 1,16,...] [--hidden 7168] [--dtype bf16|f16|f32]"
          " [--calls 20] [--repeats 7]");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value (see --help)");
    const std::string value = argv[++i];
    if (flag == "--rows") {
      o.rows = loop::parse_sizes(value);
    } else if (flag == "--hidden") {
      o.hidden = std::stoll(value);
    } else if (flag == "--dtype") {
      o.dtype = loop::parse_dtype(value);
    } else if (flag == "--calls") {
      o.calls = std::stoi(value);
    } else if (flag == "--repeats") {
      o.repeats = std::stoi(value);
    } else {
      throw std::invalid_argument("unknown flag " + flag + " (see --help)");
    }
  }
  if (o.hidden <= 0 || o.calls <= 0 || o.repeats <= 0)
    throw std::invalid_argument("--hidden, --calls and --repeats must be positive");
  return o;
}

// The row kernel's traffic without its arithmetic: residual += sums,
// out = residual, 16 bytes at a time (the sizes here are whole packs).
__global__ void copy_floor(const uint4* sums, uint4* residual, uint4* out, std::int64_t packs) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < packs;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const uint4 s = sums[i];
    uint4 r = residual[i];
    r.x ^= s.x, r.y ^= s.y, r.z ^= s.z, r.w ^= s.w;
    residual[i] = r;
    out[i] = r;
  }
}

struct Buffers {
  void* sums = nullptr;
  void* inout = nullptr;
  void* residual = nullptr;
  void* weight = nullptr;
  ~Buffers() { cudaFree(sums), cudaFree(inout), cudaFree(residual), cudaFree(weight); }
};

// Median µs per call of `launch_one` captured `calls` times in a graph.
template <class Launch>
double time_in_graph(cudaStream_t stream, const Options& o, Launch&& launch_one) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int c = 0; c < o.calls; ++c) launch_one();
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaGraphDestroy(graph);
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "event"), check(cudaEventCreate(&stop), "event");
  check(cudaGraphLaunch(exec, stream), "warm-up replay");
  std::vector<double> per_call;
  constexpr int kReplays = 5;
  for (int b = 0; b < o.repeats; ++b) {
    check(cudaEventRecord(start, stream), "record");
    for (int i = 0; i < kReplays; ++i) check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    per_call.push_back(1000.0 * ms / (kReplays * o.calls));
  }
  cudaEventDestroy(start), cudaEventDestroy(stop), cudaGraphExecDestroy(exec);
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

int run(const Options& o) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "properties");
  const bool clusters = ck::rows_in_clusters_supported(device);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::printf("# %s, %d SMs, %s, hidden %lld, graphs of %d calls, median of %d batches\n",
              prop.name, sms, loop::dtype_name(o.dtype), static_cast<long long>(o.hidden), o.calls,
              o.repeats);
  std::printf("%6s %10s %10s %8s %10s %8s %10s %8s %7s %5s\n", "rows", "bytes", "block_us", "GB/s",
              "cluster_us", "GB/s", "floor_us", "GB/s", "#wrong", "same");
  const float eps = 1e-6f;
  const ck::ElementType type = peerplan::transport::cuda::element_type(o.dtype);
  int failures = 0;
  for (const std::int64_t rows : o.rows) {
    const std::int64_t count = rows * o.hidden;
    const std::size_t bytes = static_cast<std::size_t>(count) * peerplan::element_size(o.dtype);
    // 16 bytes more, so that the tensors can also start one element in.
    Buffers b;
    check(cudaMalloc(&b.sums, bytes + 16), "cudaMalloc"),
        check(cudaMalloc(&b.inout, bytes + 16), "cudaMalloc");
    check(cudaMalloc(&b.residual, bytes + 16), "cudaMalloc");
    const loop::Bytes weight = loop::fused_weight(o.dtype, o.hidden);
    check(cudaMalloc(&b.weight, weight.size()), "cudaMalloc");
    check(cudaMemcpy(b.weight, weight.data(), weight.size(), cudaMemcpyHostToDevice), "upload");
    // One rank's reduced values are its own inputs: the reference's sum over one rank.
    const loop::Bytes sums = loop::fused_inout_input(o.dtype, count, 0);
    const loop::Bytes residual = loop::fused_residual_input(o.dtype, count, 0);
    const std::size_t element = peerplan::element_size(o.dtype);
    auto at = [](void* base, std::size_t shift) { return static_cast<char*>(base) + shift; };
    ck::KernelLayout layout;
    layout.rank = 2, layout.dims[0] = rows, layout.dims[1] = o.hidden;
    layout.strides[0] = o.hidden, layout.strides[1] = 1;
    // `shift` bytes in: one element misaligns the tensors, which takes the
    // general kernel (element by element) where the aligned call streams.
    auto launch = [&](bool in_clusters, std::size_t shift = 0) {
      check(ck::launch_add_rms_norm(type, at(b.sums, shift), at(b.inout, shift),
                                    at(b.residual, shift), b.weight, eps, layout, rows, o.hidden,
                                    in_clusters, stream),
            "launch_add_rms_norm");
    };
    // Checked once each: blocks, clusters, and the misaligned call; all
    // three must give the same bits.
    std::int64_t wrong = 0;
    std::vector<loop::Bytes> results;
    for (int k = 0; k < 3; ++k) {
      if (k == 1 && !clusters) continue;
      const std::size_t shift = k == 2 ? element : 0;
      check(cudaMemcpy(at(b.sums, shift), sums.data(), bytes, cudaMemcpyHostToDevice), "upload");
      check(cudaMemcpy(at(b.residual, shift), residual.data(), bytes, cudaMemcpyHostToDevice),
            "upload");
      // cudaMemcpy from pageable memory may return before its data lands,
      // and the call's stream does not wait for the legacy stream.
      check(cudaDeviceSynchronize(), "sync after upload");
      launch(k == 1 || (k == 2 && clusters), shift);
      check(cudaStreamSynchronize(stream), "first call");
      loop::Bytes out(bytes), res(bytes);
      check(cudaMemcpy(out.data(), at(b.inout, shift), bytes, cudaMemcpyDeviceToHost), "download");
      check(cudaMemcpy(res.data(), at(b.residual, shift), bytes, cudaMemcpyDeviceToHost),
            "download");
      wrong += loop::count_fused_wrong(o.dtype, out, res, rows, o.hidden, 0, 1, eps);
      out.insert(out.end(), res.begin(), res.end());
      results.push_back(std::move(out));
    }
    check(cudaMemcpy(b.sums, sums.data(), bytes, cudaMemcpyHostToDevice), "upload");
    check(cudaDeviceSynchronize(), "sync after upload");
    bool same = true;
    for (const loop::Bytes& r : results) same = same && r == results.front();
    failures += wrong != 0 || !same;
    const double block_us = time_in_graph(stream, o, [&] { launch(false); });
    const double cluster_us = clusters ? time_in_graph(stream, o, [&] { launch(true); }) : -1;
    const std::int64_t packs = static_cast<std::int64_t>(bytes / 16);
    const unsigned floor_blocks =
        static_cast<unsigned>(std::clamp<std::int64_t>((packs + 255) / 256, 1, 16 * sms));
    const double floor_us = bytes % 16 != 0 ? -1 : time_in_graph(stream, o, [&] {
      copy_floor<<<floor_blocks, 256, 0, stream>>>(static_cast<const uint4*>(b.sums),
                                                   static_cast<uint4*>(b.residual),
                                                   static_cast<uint4*>(b.inout), packs);
      check(cudaGetLastError(), "copy_floor");
    });
    // Bytes moved per call: the sums and the residual read, the residual and the output written.
    const double moved = 4.0 * static_cast<double>(bytes);
    auto gbps = [&](double us) { return us > 0 ? moved / (us * 1e3) : 0.0; };
    std::printf("%6lld %10zu %10.2f %8.0f %10.2f %8.0f %10.2f %8.0f %7lld %5s\n",
                static_cast<long long>(rows), bytes, block_us, gbps(block_us), cluster_us,
                gbps(cluster_us), floor_us, gbps(floor_us), static_cast<long long>(wrong),
                same ? "yes" : "NO");
  }
  cudaStreamDestroy(stream);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peerplan_row_norm_bench: %s\n", e.what());
    return 2;
  }
}
