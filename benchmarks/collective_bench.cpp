// SPDX-License-Identifier: Apache-2.0
// Collective benchmark in the style of nccl-tests (docs/design.md, Build,
// tests and benchmarks): peerplan's
// all-reduce or fused all-reduce + add + RMSNorm, per message size, next to
// NCCL on the same buffers in the same run. Times are per call (µs), the
// median over 7 batches of -n calls each (eager launches, or with -G 1 CUDA
// graphs of 20 captured calls replayed -n/20 times); busbw = algbw * 2(n-1)/n. #wrong counts elements that
// differ from the exact result (all-reduce of small integers, exact in every
// dtype) or, for the fused op, from the fallback's result beyond rounding.
// Eager mode also reports the host time per call (ns: what the calling
// thread pays for lookup, admission and launch; median batch, slowest rank)
// of peerplan and of NCCL. The fused op also times a plain peerplan
// all-reduce of the same [rows, hidden] (declared alike, same --route): the
// fused / plain ratio. --protocols never,all times the all-reduce again on
// one more communicator per listed PEERPLAN_ONE_SHOT_LAMPORT window (same
// declarations and buffers, same run), one column each; with --route
// one_shot every size runs one-shot, so that the protocols meet at every
// size. With --op fused, --protocols lists PEERPLAN_FUSED_LAMPORT windows
// instead: each column times the fused op on its own communicator, whose
// output and residual must equal the first communicator's bit for bit
// (counted in #wrong otherwise).
//
//   mpirun -np 2 peerplan_collective_bench -b 1K -e 64M -f 2 -d bf16 -G 1 --json out.json
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/value_parsing.hpp"
#include "cuda_call_timing.hpp"
#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "routing/fingerprint.hpp"
#include "transport/host/element.hpp"

namespace {

using namespace peerplan;

void check(cudaError_t s, const char* what) {
  if (s != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(s));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}
void check(ncclResult_t s, const char* what) {
  if (s != ncclSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, ncclGetErrorString(s));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// A usage error, found before any GPU or communicator is touched: rank 0
// says which option and what to change; every rank (the same arguments
// everywhere) exits with status 2.
int usage_error(int rank, const std::string& message) {
  if (rank == 0) std::fprintf(stderr, "peerplan_collective_bench: %s\n", message.c_str());
  MPI_Finalize();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  CLI::App app{"peerplan collective benchmark (nccl-tests style)"};
  std::string min_text = "1K", max_text = "64M", dtype_text = "bf16", op = "allreduce",
              route_text = "auto", json_path;
  double factor = 2;
  int iters = 100, warmup = 20, graph = 0;
  std::int64_t hidden = 4096;
  app.add_option("-b,--minbytes", min_text, "smallest message (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", max_text, "largest message");
  app.add_option("-f,--stepfactor", factor, "size multiplier between rows");
  app.add_option("-n,--iters", iters, "calls per timed batch (7 batches, median)");
  app.add_option("-w,--warmup_iters", warmup, "warm-up calls");
  app.add_option("-d,--datatype", dtype_text, "f16 | bf16 | f32");
  app.add_option("-G,--cudagraph", graph, "1: time replays of a CUDA graph of 20 captured calls");
  app.add_option("--op", op, "allreduce | fused")->check(CLI::IsMember({"allreduce", "fused"}));
  app.add_option("--hidden", hidden, "fused op: hidden size (row length)");
  bool nccl_first = false;
  app.add_flag("--nccl-first", nccl_first,
               "create the reference NCCL communicator before peerplan's");
  app.add_option(
         "--route", route_text,
         "auto (default cutoffs) | p2p (P2P up to -e) | one_shot (one-shot up to -e) | nccl")
      ->check(CLI::IsMember({"auto", "p2p", "one_shot", "nccl"}));
  std::string protocols_text;
  app.add_option("--protocols", protocols_text,
                 "also time one communicator per value in this comma-separated list (e.g. "
                 "never,all: LL lines, then Lamport, at every size), one column each: "
                 "PEERPLAN_ONE_SHOT_LAMPORT windows (allreduce) or PEERPLAN_FUSED_LAMPORT windows "
                 "(fused)");
  app.add_option("--json", json_path, "write every row as JSON to this file (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; an option CLI11 cannot take (not a number, unknown)
    // exits 2 on every rank, rank 0 printing CLI11's message, which names it.
    if (rank == 0) app.exit(e);
    MPI_Finalize();
    return e.get_exit_code() == 0 ? 0 : 2;
  }

  // Every value is checked before any GPU is touched.
  const auto parsed = parse_data_type(dtype_text);
  if (!parsed) return usage_error(rank, "-d " + dtype_text + ": expected f16, bf16 or f32");
  const DataType dtype = *parsed;
  const std::size_t esize = element_size(dtype);
  // Byte counts, strictly: digits with an optional K, M or G suffix (no
  // fraction, sign, other suffix or overflow).
  const auto min_parsed = core::parse_size(min_text), max_parsed = core::parse_size(max_text);
  const std::string size_syntax =
      ": expected a byte count, digits with an optional K, M or G suffix (e.g. 1K, 64M)";
  if (!min_parsed) return usage_error(rank, "-b " + min_text + size_syntax);
  if (!max_parsed) return usage_error(rank, "-e " + max_text + size_syntax);
  const std::size_t min_bytes = *min_parsed, max_bytes = *max_parsed;
  // The largest tensor a communicator declares (2^48 bytes).
  const auto max_span = static_cast<std::size_t>(std::int64_t{1} << 48);
  if (min_bytes < 1) return usage_error(rank, "-b " + min_text + ": at least 1 byte");
  if (max_bytes > max_span)
    return usage_error(rank, "-e " + max_text + ": at most 2^48 bytes (256 TiB); lower -e");
  if (max_bytes < min_bytes)
    return usage_error(rank, "-b " + min_text + " -e " + max_text + ": -b must be <= -e");
  if (!(factor > 0) || !std::isfinite(factor)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", factor);
    return usage_error(rank, std::string("-f ") + text +
                                 ": use a positive size multiplier (2: double; 1: -b only)");
  }
  if (hidden < 1 || hidden > static_cast<std::int64_t>(max_span / esize)) {
    return usage_error(rank, "--hidden " + std::to_string(hidden) +
                                 ": use a positive element count whose row spans at most 2^48 "
                                 "bytes");
  }
  if (iters < 1 || warmup < 0)
    return usage_error(rank, "-n must be >= 1 and -w >= 0 (got -n " + std::to_string(iters) +
                                 ", -w " + std::to_string(warmup) + ")");
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const bool fused = op == "fused";

  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  int devices = 1;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  check(cudaSetDevice(local_rank % devices), "cudaSetDevice");

  Config config;
  config.backend = Backend::cuda;
  if (route_text == "p2p") {
    config.cutoffs.two_shot_max_bytes = std::max<std::size_t>(max_bytes, 1);
    config.cutoffs.fused_max_bytes = std::max<std::size_t>(max_bytes, 1);
  }
  if (route_text == "one_shot") {
    config.cutoffs.one_shot_max_bytes = std::max<std::size_t>(max_bytes, 1);
    config.cutoffs.two_shot_max_bytes = 0;
    config.cutoffs.fused_max_bytes = std::max<std::size_t>(max_bytes, 1);
  }
  std::vector<std::string> protocols;
  for (std::size_t at = 0; !protocols_text.empty() && at <= protocols_text.size();) {
    const std::size_t comma = std::min(protocols_text.find(',', at), protocols_text.size());
    if (comma > at) protocols.push_back(protocols_text.substr(at, comma - at));
    at = comma + 1;
  }
  // The reference NCCL communicator, created before or after peerplan's
  // (--nccl-first): the order a process creates its communicators in has
  // been seen to change NCCL's speed, so the benchmark can show both.
  ncclComm_t nccl = nullptr;
  auto create_reference_nccl = [&] {
    ncclUniqueId id;
    if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    check(ncclCommInitRank(&nccl, size, id, rank), "ncclCommInitRank");
  };
  if (nccl_first) create_reference_nccl();
  auto comm = Communicator::create(MPI_COMM_WORLD, config);
  // Ranks sharing a GPU time-slice it: their times describe no machine.
  if (routing::fingerprint_says_shared(comm->topology_fingerprint())) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "peerplan_collective_bench: ranks share a GPU (%s); timings would be "
                   "time slices, not speeds. Run one rank per GPU.\n",
                   comm->topology_fingerprint().c_str());
    }
    comm->close();
    MPI_Finalize();
    return 3;
  }
  if (!nccl_first) create_reference_nccl();
  // One more communicator per --protocols value: the variable is read when
  // a communicator is created, so it is set around each create.
  std::vector<std::unique_ptr<Communicator>> protocol_comms;
  {
    const char* variable = fused ? "PEERPLAN_FUSED_LAMPORT" : "PEERPLAN_ONE_SHOT_LAMPORT";
    const char* before = std::getenv(variable);
    const std::string saved = before ? before : "";
    for (const auto& protocol : protocols) {
      setenv(variable, protocol.c_str(), 1);
      protocol_comms.push_back(Communicator::create(MPI_COMM_WORLD, config));
    }
    if (before)
      setenv(variable, saved.c_str(), 1);
    else
      unsetenv(variable);
  }
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);

  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  void *in, *out, *residual, *weight, *check_out, *check_res;
  check(cudaMalloc(&in, max_bytes), "malloc");
  check(cudaMalloc(&out, max_bytes), "malloc");
  check(cudaMalloc(&residual, max_bytes), "malloc");
  check(cudaMalloc(&check_out, max_bytes), "malloc");
  check(cudaMalloc(&check_res, max_bytes), "malloc");
  check(cudaMalloc(&weight, static_cast<std::size_t>(hidden) * esize), "malloc");
  const float eps = 1e-6f;

  // Inputs: small integers, whose sums every dtype holds exactly.
  std::vector<std::uint8_t> host(max_bytes);
  const std::size_t max_count = max_bytes / esize;
  for (std::size_t i = 0; i < max_count; ++i)
    transport::host::store_from_float(
        dtype, static_cast<float>(static_cast<int>((i * 7 + rank * 3) % 16) - 8), &host[i * esize]);
  check(cudaMemcpy(in, host.data(), max_bytes, cudaMemcpyHostToDevice), "upload");
  std::vector<std::uint8_t> w(static_cast<std::size_t>(hidden) * esize);
  for (std::int64_t j = 0; j < hidden; ++j)
    transport::host::store_from_float(dtype, 0.5f + (j % 5) * 0.25f, &w[j * esize]);
  check(cudaMemcpy(weight, w.data(), w.size(), cudaMemcpyHostToDevice), "upload");

  struct Row {
    std::size_t bytes;
    std::int64_t count;
    std::int64_t rows;
  };
  std::vector<Row> rows;
  for (double b = static_cast<double>(min_bytes); b <= static_cast<double>(max_bytes) * 1.0000001;
       b *= factor) {
    std::int64_t count = static_cast<std::int64_t>(b) / static_cast<std::int64_t>(esize);
    std::int64_t nrows = 0;
    if (fused) {
      nrows = count / hidden;
      count = nrows * hidden;
    }
    if (count >= 1) rows.push_back({static_cast<std::size_t>(count) * esize, count, nrows});
    if (factor <= 1) break;  // -b only (a size without a row included: no more would come)
  }
  std::vector<Declaration> declared;
  if (route_text != "nccl") {
    for (const auto& r : rows) {
      const std::string name = "s" + std::to_string(r.bytes);
      declared.push_back(fused ? Declaration::fused_add_rms_norm(
                                     name, dtype, TensorLayout({r.rows, hidden}), weight, eps)
                               : Declaration::all_reduce(name, dtype, TensorLayout({r.count})));
      // The fused op's yardstick: a plain all-reduce of the same [rows, hidden].
      if (fused)
        declared.push_back(Declaration::all_reduce("p" + std::to_string(r.bytes), dtype,
                                                   TensorLayout({r.rows, hidden})));
    }
  }
  comm->declare(declared);
  for (auto& c : protocol_comms) c->declare(declared);

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, local_rank % devices);
  if (rank == 0) {
    std::printf(
        "# peerplan collective benchmark: %s, %d ranks, %s, op %s%s, route %s, %s, NCCL %d\n",
        prop.name, size, dtype_text.c_str(), op.c_str(),
        fused ? (" hidden " + std::to_string(hidden)).c_str() : "", route_text.c_str(),
        graph ? "CUDA graph replay" : "eager", nccl_version);
    std::printf("%12s %12s %6s %15s %10s %9s %9s %7s %10s %7s", "size(B)", "count", "type", "route",
                "time(us)", "algbw", "busbw", "#wrong", "nccl(us)", "ratio");
    if (fused) std::printf(" %10s %11s", "plain(us)", "fused/plain");
    for (const auto& protocol : protocols) std::printf(" %12s", (protocol + "(us)").c_str());
    if (!graph) std::printf(" %9s %14s", "host(ns)", "nccl_host(ns)");
    std::printf("\n");
  }
  nlohmann::json results = nlohmann::json::array();
  const double bus_factor = 2.0 * (size - 1) / size;
  std::int64_t total_wrong = 0;
  for (const auto& r : rows) {
    const TensorLayout layout = fused ? TensorLayout({r.rows, hidden}) : TensorLayout({r.count});
    Route route = Route::fallback, plain_route = Route::fallback;
    Protocol protocol_ran = Protocol::none;  // what the router chose for the plan
    std::function<void()> ours, theirs, plain;
    if (fused) {
      ours = [&] {
        const CallResult result =
            comm->fused_add_rms_norm(out, residual, weight, eps, dtype, layout, stream);
        route = result.route;
        protocol_ran = result.protocol;
      };
      // NCCL + separate add + RMSNorm: the same op under another eps (an undeclared key).
      theirs = [&] {
        comm->fused_add_rms_norm(out, residual, weight, eps * 2, dtype, layout, stream);
      };
      // A plain all-reduce of the same bytes (declared with the same layout),
      // out of place as in --op allreduce; into check_out, so the fused op's
      // buffers keep their contents.
      plain = [&] { plain_route = comm->all_reduce(in, check_out, dtype, layout, stream).route; };
    } else {
      ours = [&] {
        const CallResult result = comm->all_reduce(in, out, dtype, layout, stream);
        route = result.route;
        protocol_ran = result.protocol;
      };
      const ncclDataType_t t = dtype == DataType::bf16  ? ncclBfloat16
                               : dtype == DataType::f16 ? ncclFloat16
                                                        : ncclFloat32;
      // `t` and the count by value: the lambda outlives this block.
      const auto count = static_cast<std::size_t>(r.count);
      theirs = [&, t, count] {
        check(ncclAllReduce(in, out, count, t, ncclSum, nccl, stream), "ncclAllReduce");
      };
    }
    // Correctness first, on fresh outputs.
    std::int64_t wrong = 0, plain_wrong = 0;
    // Elements of `buffer` (device) that differ from the exact all-reduce of the inputs.
    auto count_sum_errors = [&](const void* buffer) {
      std::vector<std::uint8_t> a(r.bytes);
      check(cudaMemcpy(a.data(), buffer, r.bytes, cudaMemcpyDeviceToHost), "download");
      std::int64_t errors = 0;
      for (std::int64_t i = 0; i < r.count; ++i) {
        double expected = 0;
        for (int q = 0; q < size; ++q) expected += static_cast<int>((i * 7 + q * 3) % 16) - 8;
        if (transport::host::load_as_float(dtype, &a[i * esize]) != expected) ++errors;
      }
      return errors;
    };
    check(cudaMemset(out, 0xff, r.bytes), "poison");
    if (fused) {
      check(cudaMemcpy(out, in, r.bytes, cudaMemcpyDeviceToDevice), "copy");
      check(cudaMemset(residual, 0, r.bytes), "zero");
      check(cudaMemcpy(check_out, in, r.bytes, cudaMemcpyDeviceToDevice), "copy");
      check(cudaMemset(check_res, 0, r.bytes), "zero");
      ours();
      comm->fused_add_rms_norm(check_out, check_res, weight, eps * 2, dtype, layout, stream);
      check(cudaStreamSynchronize(stream), "sync");
      std::vector<std::uint8_t> a(r.bytes), b(r.bytes);
      check(cudaMemcpy(a.data(), out, r.bytes, cudaMemcpyDeviceToHost), "download");
      check(cudaMemcpy(b.data(), check_out, r.bytes, cudaMemcpyDeviceToHost), "download");
      for (std::int64_t i = 0; i < r.count; ++i) {
        const float x = transport::host::load_as_float(dtype, &a[i * esize]);
        const float y = transport::host::load_as_float(dtype, &b[i * esize]);
        if (!(std::fabs(x - y) <= 0.02f * std::fabs(y) + 0.02f)) ++wrong;
      }
      check(cudaMemset(check_out, 0xff, r.bytes), "poison");
      plain();
      check(cudaStreamSynchronize(stream), "sync");
      plain_wrong = count_sum_errors(check_out);
    } else {
      ours();
      check(cudaStreamSynchronize(stream), "sync");
      wrong = count_sum_errors(out);
    }
    std::int64_t wrongs[2] = {wrong, plain_wrong};
    MPI_Allreduce(MPI_IN_PLACE, wrongs, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    wrong = wrongs[0];
    plain_wrong = wrongs[1];
    total_wrong += wrong + plain_wrong;
    const auto t_ours = bench::time_cuda_calls_detailed(ours, stream, iters, warmup, graph != 0);
    const auto t_nccl = bench::time_cuda_calls_detailed(theirs, stream, iters, warmup, graph != 0);
    bench::CudaCallTiming t_plain{};
    if (fused) t_plain = bench::time_cuda_calls_detailed(plain, stream, iters, warmup, graph != 0);
    // The same call on each --protocols communicator: checked, then timed.
    // Fused: from the same inputs as the first communicator's checked call,
    // its output and residual must be the same bits (every P2P protocol
    // rounds alike), left in check_out / check_res.
    std::vector<std::uint8_t> fused_out, fused_res;
    if (fused && !protocol_comms.empty()) {
      fused_out.resize(r.bytes);
      fused_res.resize(r.bytes);
      check(cudaMemcpy(out, in, r.bytes, cudaMemcpyDeviceToDevice), "copy");
      check(cudaMemset(residual, 0, r.bytes), "zero");
      ours();
      check(cudaStreamSynchronize(stream), "sync");
      check(cudaMemcpy(fused_out.data(), out, r.bytes, cudaMemcpyDeviceToHost), "download");
      check(cudaMemcpy(fused_res.data(), residual, r.bytes, cudaMemcpyDeviceToHost), "download");
    }
    std::vector<double> protocol_us;
    for (auto& c : protocol_comms) {
      Communicator* pc = c.get();
      std::function<void()> call;
      std::int64_t protocol_wrong = 0;
      if (fused) {
        call = [&, pc] {
          pc->fused_add_rms_norm(check_out, check_res, weight, eps, dtype, layout, stream);
        };
        check(cudaMemcpy(check_out, in, r.bytes, cudaMemcpyDeviceToDevice), "copy");
        check(cudaMemset(check_res, 0, r.bytes), "zero");
        call();
        check(cudaStreamSynchronize(stream), "sync");
        std::vector<std::uint8_t> a(r.bytes), b(r.bytes);
        check(cudaMemcpy(a.data(), check_out, r.bytes, cudaMemcpyDeviceToHost), "download");
        check(cudaMemcpy(b.data(), check_res, r.bytes, cudaMemcpyDeviceToHost), "download");
        for (std::size_t i = 0; i < r.bytes; i += esize) {
          if (std::memcmp(&a[i], &fused_out[i], esize) != 0 ||
              std::memcmp(&b[i], &fused_res[i], esize) != 0) {
            ++protocol_wrong;
          }
        }
      } else {
        call = [&, pc] { pc->all_reduce(in, out, dtype, layout, stream); };
        check(cudaMemset(out, 0xff, r.bytes), "poison");
        call();
        check(cudaStreamSynchronize(stream), "sync");
        protocol_wrong = count_sum_errors(out);
      }
      MPI_Allreduce(MPI_IN_PLACE, &protocol_wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      wrong += protocol_wrong;
      total_wrong += protocol_wrong;
      protocol_us.push_back(bench::time_cuda_calls(call, stream, iters, warmup, graph != 0));
    }
    const double us = t_ours.us_per_call, nccl_us = t_nccl.us_per_call;
    const double algbw = static_cast<double>(r.bytes) / (us * 1e3);  // GB/s
    if (rank == 0) {
      std::printf("%12zu %12lld %6s %15s %10.2f %9.2f %9.2f %7lld %10.2f %7.2f", r.bytes,
                  static_cast<long long>(r.count), dtype_text.c_str(), to_string(route), us, algbw,
                  algbw * bus_factor, static_cast<long long>(wrong + plain_wrong), nccl_us,
                  nccl_us / us);
      if (fused) std::printf(" %10.2f %11.2f", t_plain.us_per_call, us / t_plain.us_per_call);
      for (double t : protocol_us) std::printf(" %12.2f", t);
      if (!graph) std::printf(" %9.0f %14.0f", t_ours.host_ns_per_call, t_nccl.host_ns_per_call);
      std::printf("\n");
      nlohmann::json row{{"bytes", r.bytes},
                         {"count", r.count},
                         {"type", dtype_text},
                         {"route", to_string(route)},
                         {"protocol", to_string(protocol_ran)},
                         {"time_us", us},
                         {"algbw_gbs", algbw},
                         {"busbw_gbs", algbw * bus_factor},
                         {"wrong", wrong},
                         {"nccl_time_us", nccl_us},
                         {"ratio_nccl_over_peerplan", nccl_us / us}};
      for (std::size_t k = 0; k < protocols.size(); ++k) {
        row["protocol_time_us"][protocols[k]] = protocol_us[k];
      }
      if (fused) {
        row["rows"] = r.rows;
        row["plain_time_us"] = t_plain.us_per_call;
        row["plain_route"] = to_string(plain_route);
        row["plain_wrong"] = plain_wrong;
        row["ratio_fused_over_plain"] = us / t_plain.us_per_call;
      }
      // The host clock means "per call issued by the application" in eager
      // mode only (under graphs it is the replay launch, shared by 20 calls).
      if (!graph) {
        row["host_ns_per_call"] = t_ours.host_ns_per_call;
        row["nccl_host_ns_per_call"] = t_nccl.host_ns_per_call;
      }
      results.push_back(std::move(row));
    }
  }
  if (rank == 0) {
    std::printf("# total #wrong %lld\n", static_cast<long long>(total_wrong));
    if (!json_path.empty()) {
      nlohmann::json doc{{"device", prop.name},
                         {"ranks", size},
                         {"dtype", dtype_text},
                         {"op", op},
                         {"hidden", fused ? hidden : 0},
                         {"route", route_text},
                         {"mode", graph ? "graph" : "eager"},
                         {"iters", iters},
                         {"warmup", warmup},
                         {"nccl_version", nccl_version},
                         {"rows", results}};
      std::ofstream(json_path) << doc.dump(2) << "\n";
    }
  }
  for (auto& c : protocol_comms) c->close();
  comm->close();
  ncclCommDestroy(nccl);
  cudaFree(in);
  cudaFree(out);
  cudaFree(residual);
  cudaFree(weight);
  cudaFree(check_out);
  cudaFree(check_res);
  MPI_Comm_free(&local);
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 2;
}
