// SPDX-License-Identifier: Apache-2.0
// Host time per eager call from C++, a benchmark program, not a test: what the
// calling thread pays until a call returns (lookup, admission, launch), not the
// GPU's completion. The yardstick for python/benchmarks/call_overhead.py, which
// times the same cases the same way through the Python package;
// benchmarks/compare_call_overhead.py sets the two side by side (the issue's
// requirement: a call from Python costs at most ~3 µs more than from C++).
//
// Cases (names shared with the Python benchmark):
//   empty             peerplan_comm_rank: the floor of a call into the library
//   allreduce_1x512   all-reduce of [1, 512]   (1 KiB in bf16)
//   allreduce_8x4096  all-reduce of [8, 4096]  (64 KiB in bf16)
//   fused_1x4096      fused add + RMSNorm of [1, 4096]
//   fused_16x4096     fused add + RMSNorm of [16, 4096]
// every one declared (out of place for the all-reduce), each through two
// interfaces: "cpp" (peerplan::Communicator) and "c" (the C interface,
// include/peerplan/peerplan.h, on a communicator of its own: what Python's
// ctypes calls). On the cuda backend more rows: "launch_floor", an empty
// kernel launched on the same stream (as shared/bench/limits.cu times its
// eager floor), timed the same way; each collective's ratio to it follows
// the table (where a call's kernel is shorter than its launch, this host
// cost is what an eager call's time comes to). Then the same empty launch
// the library's way, a piece at a time (empty_launch.hpp): launch_ex
// (cudaLaunchKernelExC), _params (a 512-byte parameter block), _pdl
// (programmatic stream serialization), _cluster8 (8 blocks in a cluster of
// 8, as the fused op's row clusters).
//
// Method: -w untimed calls, then --batches batches of -n back-to-back calls
// (few enough that a GPU's launch queue never fills); before each batch,
// outside the timed region, the stream is drained and the ranks meet (a
// barrier). A batch is timed with steady_clock and divided by its calls;
// the row is the median batch, the slowest rank's. On the host backend
// every call returns when its exchange is done, so there the host time is
// the whole call, exchange included.
//
//   mpirun -np 2 peerplan_call_overhead_bench --json cpp.json
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/peerplan.h"

#if PEERPLAN_HAVE_CUDA
#include "cuda_call_timing.hpp"  // bench::check_cuda
#include "empty_launch.hpp"
#endif

namespace {

using namespace peerplan;

struct Case {
  std::string name;
  std::string op;  // "empty", "allreduce" or "fused"
  std::int64_t rows = 0, hidden = 0;
};

// Buffers of one backend: GPU memory on cuda, 64-byte aligned host memory
// on host. Zero-filled (the fused op stays finite: rmsnorm(0) = 0).
class Buffer {
 public:
  Buffer(Backend backend, std::size_t bytes) : backend_(backend) {
    const std::size_t rounded = std::max<std::size_t>((bytes + 63) / 64 * 64, 64);
#if PEERPLAN_HAVE_CUDA
    if (backend == Backend::cuda) {
      bench::check_cuda(cudaMalloc(&data_, rounded), "cudaMalloc");
      bench::check_cuda(cudaMemset(data_, 0, rounded), "cudaMemset");
      return;
    }
#endif
    data_ = std::aligned_alloc(64, rounded);
    if (data_ == nullptr) MPI_Abort(MPI_COMM_WORLD, 1);
    std::memset(data_, 0, rounded);
  }
  ~Buffer() {
#if PEERPLAN_HAVE_CUDA
    if (backend_ == Backend::cuda) {
      cudaFree(data_);
      return;
    }
#endif
    std::free(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return data_; }

 private:
  Backend backend_;
  void* data_ = nullptr;
};

struct Timing {
  double ns_per_call = 0;       // median batch, slowest rank
  std::vector<double> rank_ns;  // each rank's median batch
};

// The method in the header: collective over MPI_COMM_WORLD.
Timing time_calls(const std::function<void()>& call, const std::function<void()>& drain, int calls,
                  int batches, int warmup) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> per_call;
  per_call.reserve(batches);
  for (int b = 0; b < batches; ++b) {
    drain();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  drain();
  std::sort(per_call.begin(), per_call.end());
  double median = per_call[per_call.size() / 2];
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Timing t;
  t.rank_ns.resize(static_cast<std::size_t>(size));
  MPI_Allgather(&median, 1, MPI_DOUBLE, t.rank_ns.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  t.ns_per_call = *std::max_element(t.rank_ns.begin(), t.rank_ns.end());
  return t;
}

// Inline: it sits in the timed loop of the "c" rows, as an application's
// check of the result would.
inline void check_c(peerplan_result_t status, const char* what) {
  if (status != PEERPLAN_SUCCESS) [[unlikely]] {
    std::fprintf(stderr, "%s: %s: %s\n", what, peerplan_result_string(status),
                 peerplan_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  CLI::App app{"peerplan call overhead: host time per eager call from C++"};
  std::string dtype_text = "auto", json_path;
  int calls = 32, empty_calls = 1000, batches = 50, warmup = 64;
  app.add_option("-n,--calls", calls, "calls per timed batch (collectives)")
      ->check(CLI::PositiveNumber);
  app.add_option("--empty-calls", empty_calls, "calls per timed batch (the empty case)")
      ->check(CLI::PositiveNumber);
  app.add_option("-b,--batches", batches, "timed batches (median)")->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup", warmup, "untimed calls before the batches")
      ->check(CLI::NonNegativeNumber);
  app.add_option(
      "-d,--dtype", dtype_text,
      "auto (bf16 on the cuda backend, f16 on host: NumPy has no bf16) | f16 | bf16 | f32");
  app.add_option("--json", json_path, "write the rows as JSON to this file (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = rank == 0 ? app.exit(e) : 0;
    MPI_Finalize();
    return code;
  }

  // Backend: Config's default (cuda where this build has it and the rank
  // sees a GPU, else host), PEERPLAN_BACKEND overriding it; peerplan picks
  // the GPU (local rank modulo the GPUs) and makes it current.
  auto comm = Communicator::create(MPI_COMM_WORLD, Config{});
  const Backend backend = comm->backend();
  peerplan_comm_t c_comm = nullptr;
  check_c(peerplan_comm_create(MPI_COMM_WORLD, nullptr, &c_comm), "peerplan_comm_create");
  // Only the public API: like the Python package, this links libpeerplan.so,
  // which exports nothing else. The fingerprint of ranks sharing a GPU ends
  // in " shared" (docs/concepts.md, "Ranks sharing a GPU").
  const std::string& fingerprint = comm->topology_fingerprint();
  const bool gpus_shared = fingerprint.ends_with(" shared");

  DataType dtype = backend == Backend::cuda ? DataType::bf16 : DataType::f16;
  if (dtype_text != "auto") {
    const auto parsed = parse_data_type(dtype_text);
    if (!parsed) {
      if (rank == 0)
        std::fprintf(stderr, "-d %s: expected auto, f16, bf16 or f32\n", dtype_text.c_str());
      comm->close();
      peerplan_comm_close(c_comm);
      peerplan_comm_destroy(c_comm);
      MPI_Finalize();
      return 1;
    }
    dtype = *parsed;
  }
  const std::size_t esize = element_size(dtype);
  const int c_dtype = static_cast<int>(dtype);  // the C enum has the C++ values

  const std::int64_t hidden = 4096;
  std::vector<Case> cases = {{"empty", "empty", 0, 0},
                             {"allreduce_1x512", "allreduce", 1, 512},
                             {"allreduce_8x4096", "allreduce", 8, 4096},
                             {"fused_1x4096", "fused", 1, 4096},
                             {"fused_16x4096", "fused", 16, 4096}};
  // The floor, then the library's way of launching it piece by piece
  // (empty_launch.hpp): the part of a call's time that is the launch's.
  if (backend == Backend::cuda) {
    for (const char* floor : {"launch_floor", "launch_ex", "launch_ex_params",
                              "launch_ex_params_pdl", "launch_ex_params_pdl_cluster8"}) {
      cases.push_back({floor, "launch", 0, 0});
    }
  }
  std::size_t max_bytes = 0;
  for (const auto& c : cases)
    max_bytes = std::max(max_bytes, static_cast<std::size_t>(c.rows * c.hidden) * esize);
  Buffer in(backend, max_bytes), out(backend, max_bytes), residual(backend, max_bytes),
      weight(backend, static_cast<std::size_t>(hidden) * esize);
  const float eps = 1e-6f;

  std::vector<Declaration> declared;
  std::vector<std::vector<std::int64_t>> shapes;  // the C declarations point into these
  shapes.reserve(cases.size());
  std::vector<peerplan_declaration_t> c_declared;
  for (const auto& c : cases) {
    if (c.op == "empty" || c.op == "launch") continue;
    const TensorLayout layout({c.rows, c.hidden});
    declared.push_back(
        c.op == "fused" ? Declaration::fused_add_rms_norm(c.name, dtype, layout, weight.get(), eps)
                        : Declaration::all_reduce(c.name, dtype, layout));
    shapes.push_back({c.rows, c.hidden});
    c_declared.push_back({c.name.c_str(),
                          c.op == "fused" ? PEERPLAN_FUSED_ADD_RMS_NORM : PEERPLAN_ALL_REDUCE,
                          c_dtype,
                          {2, shapes.back().data(), nullptr},
                          c.op == "fused" ? weight.get() : nullptr,
                          c.op == "fused" ? eps : 0.0f});
  }
  comm->declare(declared);
  check_c(peerplan_declare(c_comm, c_declared.data(), c_declared.size()), "peerplan_declare");

  void* stream = nullptr;
  std::string device = "host";
#if PEERPLAN_HAVE_CUDA
  if (backend == Backend::cuda) {
    cudaStream_t s = nullptr;
    bench::check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    stream = s;
    int current = 0;
    bench::check_cuda(cudaGetDevice(&current), "cudaGetDevice");
    cudaDeviceProp prop{};
    bench::check_cuda(cudaGetDeviceProperties(&prop, current), "cudaGetDeviceProperties");
    device = prop.name;
  }
#endif
  auto drain = [&] {
#if PEERPLAN_HAVE_CUDA
    if (stream != nullptr)
      bench::check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "sync");
#endif
  };

  const char* note =
      backend == Backend::cuda
          ? "cuda backend: host time until each call returns (launch), not GPU completion"
          : "host backend: every call returns when its exchange is done, so the host time "
            "includes the exchange";
  if (rank == 0) {
    std::printf(
        "# peerplan call overhead (C++): %s backend (%s), %d ranks, %s, %d batches of %d "
        "calls (empty: %d), %d warm-up calls%s\n# %s\n",
        to_string(backend), device.c_str(), size, to_string(dtype), batches, calls, empty_calls,
        warmup, gpus_shared ? ", GPUs SHARED by ranks" : "", note);
    std::printf("%-18s %-10s %-10s %8s %-4s %-15s %12s\n", "case", "op", "shape", "bytes", "api",
                "route", "ns/call");
  }

  nlohmann::json rows = nlohmann::json::array();
  volatile int sink = 0;
  std::vector<std::pair<std::string, double>> collective_ns;  // "case api", for the ratios
  double launch_floor_ns = 0;
  for (const auto& c : cases) {
    const TensorLayout layout({c.rows, c.hidden});
    const std::int64_t c_shape[2] = {c.rows, c.hidden};
    const peerplan_layout_t c_layout{2, c_shape, nullptr};
    const std::size_t bytes = static_cast<std::size_t>(c.rows * c.hidden) * esize;
    const bool no_tensors = c.op == "empty" || c.op == "launch";
    const int n = c.op == "empty" ? empty_calls : calls;
    const std::vector<std::string> apis =
        c.op == "launch" ? std::vector<std::string>{"cuda"} : std::vector<std::string>{"cpp", "c"};
    for (const std::string& api : apis) {
      std::function<void()> call;
      Route cpp_route = Route::fallback;
      peerplan_call_result_t c_result{};
      if (c.op == "launch") {
#if PEERPLAN_HAVE_CUDA
        const auto cuda_stream = static_cast<cudaStream_t>(stream);
        if (c.name == "launch_floor") {
          call = [cuda_stream] {
            bench::check_cuda(bench::launch_empty_kernel(cuda_stream),
                              "launching the empty kernel");
          };
        } else {
          const bool params = c.name.find("params") != std::string::npos;
          const bool pdl = c.name.find("pdl") != std::string::npos;
          const unsigned cluster = c.name.find("cluster8") != std::string::npos ? 8 : 1;
          call = [cuda_stream, params, pdl, cluster] {
            bench::check_cuda(bench::launch_empty_kernel_ex(cuda_stream, params, pdl, cluster),
                              "launching the empty kernel (cudaLaunchKernelExC)");
          };
        }
#endif
      } else if (c.op == "empty") {
        if (api == "cpp")
          call = [&] { sink = comm->rank(); };
        else
          call = [&] { sink = peerplan_comm_rank(c_comm); };
      } else if (api == "cpp") {
        if (c.op == "fused")
          call = [&] {
            cpp_route = comm->fused_add_rms_norm(out.get(), residual.get(), weight.get(), eps,
                                                 dtype, layout, stream)
                            .route;
          };
        else
          call = [&] {
            cpp_route = comm->all_reduce(in.get(), out.get(), dtype, layout, stream).route;
          };
      } else {
        if (c.op == "fused")
          call = [&] {
            check_c(peerplan_fused_add_rms_norm(c_comm, out.get(), residual.get(), weight.get(),
                                                eps, c_dtype, c_layout, stream, &c_result),
                    "peerplan_fused_add_rms_norm");
          };
        else
          call = [&] {
            check_c(peerplan_all_reduce(c_comm, in.get(), out.get(), c_dtype, c_layout, stream,
                                        &c_result),
                    "peerplan_all_reduce");
          };
      }
      const Timing t = time_calls(call, drain, n, batches, warmup);
      const std::string route = no_tensors     ? "-"
                                : api == "cpp" ? to_string(cpp_route)
                                               : peerplan_route_name(c_result.route);
      if (c.name == "launch_floor") launch_floor_ns = t.ns_per_call;
      if (!no_tensors) collective_ns.emplace_back(c.name + " " + api, t.ns_per_call);
      if (rank == 0) {
        const std::string shape =
            no_tensors ? "-" : std::to_string(c.rows) + "x" + std::to_string(c.hidden);
        std::printf("%-18s %-10s %-10s %8zu %-4s %-15s %12.1f\n", c.name.c_str(), c.op.c_str(),
                    shape.c_str(), bytes, api.c_str(), route.c_str(), t.ns_per_call);
        nlohmann::json row{{"case", c.name},
                           {"op", c.op},
                           {"api", api},
                           {"dtype", no_tensors ? "-" : to_string(dtype)},
                           {"shape", no_tensors ? std::vector<std::int64_t>{}
                                                : std::vector<std::int64_t>{c.rows, c.hidden}},
                           {"bytes", bytes},
                           {"route", route},
                           {"calls_per_batch", n},
                           {"batches", batches},
                           {"ns_per_call", t.ns_per_call},
                           {"rank_ns_per_call", t.rank_ns}};
        rows.push_back(std::move(row));
      }
    }
  }
  if (rank == 0 && launch_floor_ns > 0) {
    std::printf("# host time per call over the eager launch floor (%.1f ns):\n", launch_floor_ns);
    for (const auto& [name, ns] : collective_ns)
      std::printf("#   %-22s %5.2fx\n", name.c_str(), ns / launch_floor_ns);
  }
  if (rank == 0 && !json_path.empty()) {
    nlohmann::json doc{{"tool", "peerplan_call_overhead_bench"},
                       {"language", "cpp"},
                       {"peerplan_version", peerplan_version()},
                       {"backend", to_string(backend)},
                       {"device", device},
                       {"ranks", size},
                       {"dtype", to_string(dtype)},
                       {"gpus_shared", gpus_shared},
                       {"calls_per_batch", calls},
                       {"empty_calls_per_batch", empty_calls},
                       {"batches", batches},
                       {"warmup", warmup},
                       {"note", note},
                       {"rows", rows}};
    std::ofstream file(json_path);
    file << doc.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  (void)sink;
#if PEERPLAN_HAVE_CUDA
  if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
#endif
  check_c(peerplan_comm_close(c_comm), "peerplan_comm_close");
  peerplan_comm_destroy(c_comm);
  comm->close();
  MPI_Finalize();
  return 0;
}
