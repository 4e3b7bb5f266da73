// SPDX-License-Identifier: Apache-2.0
// A transformer-shaped use of peerplan, the program to copy from.
//
// Tensor parallelism splits each layer across the ranks; after the
// attention output projection and after the MLP every rank holds a partial
// sum that must be all-reduced. Decode steps run a handful of tokens and are
// latency-bound: those shapes are declared up front and take the P2P route.
// Prefill runs a long prompt whose length is not known in advance: those
// calls are undeclared and go to the fallback (NCCL, or MPI on the host
// backend) without any error.
//
// Run: mpirun -np 4 ./peerplan_transformer_decode [--layers N] [--hidden H] [--steps S]
//                                                [--prefill T]
#include <mpi.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "peerplan/peerplan.hpp"
#include "tensor_memory.hpp"

namespace {

struct Options {
  int layers = 4;
  int hidden = 1024;
  int steps = 20;
  std::vector<int> decode_tokens = {1, 2, 4, 8};
  int prefill_tokens = 300;
};

const char* const kUsage =
    "usage: peerplan_transformer_decode [--layers N] [--hidden H] [--steps S] [--prefill T]\n"
    "  --layers N   layers, each with its own norm weight (default 4)\n"
    "  --hidden H   elements per token (default 1024)\n"
    "  --steps S    decode steps, each at 1, 2, 4 and 8 tokens (default 20)\n"
    "  --prefill T  tokens of the one prefill call (default 300)\n"
    "Each value is a positive whole number, --hidden a multiple of 4; --flag=value works too.\n";

// The command line, strictly: an unknown option, a missing value or one
// that is not a positive whole number is an error (the message names the
// option), never silently ignored or read as 0. Empty: use `options`;
// "help": print the usage.
std::string parse(int argc, char** argv, Options& options) {
  const std::pair<const char*, int*> flags[] = {{"--layers", &options.layers},
                                                {"--hidden", &options.hidden},
                                                {"--steps", &options.steps},
                                                {"--prefill", &options.prefill_tokens}};
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "-h" || flag == "--help") return "help";
    const std::size_t equals = flag.find('=');
    const bool inline_value = flag.rfind("--", 0) == 0 && equals != std::string::npos;
    if (inline_value) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    }
    int* target = nullptr;
    for (const auto& [name, field] : flags)
      if (flag == name) target = field;
    if (target == nullptr && flag.rfind("-", 0) == 0)
      return "unknown option " + flag + " (the options are --layers, --hidden, --steps, --prefill)";
    if (target == nullptr)
      return "unexpected argument " + flag + " (options take the form --hidden 2048)";
    if (!inline_value) {
      if (i + 1 >= argc) return flag + " needs a value, a positive whole number";
      value = argv[++i];
    }
    int parsed = 0;
    const char* end = value.data() + value.size();
    const auto [stop, error] = std::from_chars(value.data(), end, parsed);
    if (value.empty() || error != std::errc() || stop != end || parsed < 1)
      return flag + " " + value + ": expected a positive whole number (at most 2147483647)";
    *target = parsed;
  }
  // Declared shapes are [tokens, hidden] f32: a row is whole 16-byte
  // vectors (the P2P kernels move those), so hidden is a multiple of 4.
  if (options.hidden % 4 != 0) {
    return "--hidden " + std::to_string(options.hidden) +
           ": use a multiple of 4 (a row of f32 elements must be whole 16-byte vectors)";
  }
  return "";
}

// Wall time of the calls this rank made, by phase (decode steps first,
// then prefill), operation and the route each call took.
enum class Phase { decode, prefill };
struct CallTimes {
  // (phase, op, route) -> (calls, seconds)
  std::map<std::tuple<Phase, std::string, std::string>, std::pair<long, double>> rows;
  void add(Phase phase, const char* op, peerplan::CallResult r, double seconds) {
    auto& [calls, total] = rows[{phase, op, peerplan::to_string(r.route)}];
    ++calls;
    total += seconds;
  }
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options opt;
  // The same arguments on every rank, so the same verdict: rank 0 says why,
  // every rank exits 2 (0 for --help).
  const std::string usage_problem = parse(argc, argv, opt);
  if (!usage_problem.empty()) {
    const bool help = usage_problem == "help";
    if (rank == 0 && help) std::printf("%s", kUsage);
    if (rank == 0 && !help)
      std::fprintf(stderr, "peerplan_transformer_decode: %s\n%s", usage_problem.c_str(), kUsage);
    MPI_Finalize();
    return help ? 0 : 2;
  }
  long wrong = 0;

  try {
    // 1. Create: collective; PEERPLAN_* variables override the Config.
    auto comm = peerplan::Communicator::create(MPI_COMM_WORLD);

    const peerplan::Backend backend = comm->backend();

    // The model's norm weights: one per layer. Their identity (address) is
    // part of the fused op's key, so each layer is its own plan.
    std::vector<std::vector<float>> norm_weights(opt.layers, std::vector<float>(opt.hidden));
    std::vector<std::unique_ptr<TensorMemory>> weight_memory;
    for (int l = 0; l < opt.layers; ++l) {
      for (int h = 0; h < opt.hidden; ++h) norm_weights[l][h] = 1.0f + 0.001f * (h % 7) + l;
      weight_memory.push_back(std::make_unique<TensorMemory>(backend, opt.hidden));
      weight_memory.back()->upload(norm_weights[l]);
    }
    const float eps = 1e-5f;

    // 2. Declare every decode-time collective: the all-reduce of the
    // attention output and the fused all-reduce + residual add + RMSNorm
    // after the MLP, for each decode batch size.
    std::vector<peerplan::Declaration> plans;
    for (int tokens : opt.decode_tokens) {
      const peerplan::TensorLayout layout{tokens, opt.hidden};
      plans.push_back(peerplan::Declaration::all_reduce("attn_out.t" + std::to_string(tokens),
                                                        peerplan::DataType::f32, layout));
      for (int l = 0; l < opt.layers; ++l) {
        plans.push_back(peerplan::Declaration::fused_add_rms_norm(
            "layer" + std::to_string(l) + ".mlp_norm.t" + std::to_string(tokens),
            peerplan::DataType::f32, layout, weight_memory[l]->data(), eps));
      }
    }
    comm->declare(plans);

    CallTimes times;
    // Every rank contributes (rank + 1) * small integer: the exact sum is
    // known, so every element can be checked, not just a checksum.
    const float rank_sum = size * (size + 1) / 2.0f;
    auto run_step = [&](int tokens, Phase phase) {
      const std::size_t n = static_cast<std::size_t>(tokens) * opt.hidden;
      const peerplan::TensorLayout layout{tokens, opt.hidden};
      TensorMemory x(backend, n), residual(backend, n);
      std::vector<float> values(n);
      for (int l = 0; l < opt.layers; ++l) {
        for (std::size_t i = 0; i < n; ++i)
          values[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
        x.upload(values);
        double t0 = now();
        auto r = comm->all_reduce(x.data(), x.data(), peerplan::DataType::f32, layout);
        x.synchronize();
        times.add(phase, "all_reduce", r, now() - t0);
        values = x.download();
        for (std::size_t i = 0; i < n; ++i) wrong += values[i] != rank_sum * (i % 5 + 1);

        x.upload(std::vector<float>(n, static_cast<float>(rank + 1)));
        residual.upload(std::vector<float>(n, 0.0f));
        t0 = now();
        r = comm->fused_add_rms_norm(x.data(), residual.data(), weight_memory[l]->data(), eps,
                                     peerplan::DataType::f32, layout);
        x.synchronize();
        times.add(phase, "fused_add_rms_norm", r, now() - t0);
        // residual = rank_sum everywhere, so x = rank_sum / sqrt(rank_sum^2 + eps) * weight.
        const double norm = rank_sum / std::sqrt(double(rank_sum) * rank_sum + eps);
        const std::vector<float> out = x.download(), res = residual.download();
        for (std::size_t i = 0; i < n; ++i) {
          const double expected = norm * norm_weights[l][i % opt.hidden];
          wrong += res[i] != rank_sum || std::abs(out[i] - expected) > 1e-5 * expected;
        }
      }
    };

    // 3. Decode: declared shapes, P2P routes. 4. Prefill: undeclared, fallback.
    for (int step = 0; step < opt.steps; ++step)
      for (int tokens : opt.decode_tokens) run_step(tokens, Phase::decode);
    run_step(opt.prefill_tokens, Phase::prefill);

    // 5. What ran where.
    const peerplan::Stats stats = comm->stats();
    long total_wrong = 0;
    MPI_Reduce(&wrong, &total_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf(
          "peerplan %s: %d ranks, backend %s, P2P %s%s\n", peerplan::kVersion, size,
          peerplan::to_string(comm->backend()),
          comm->p2p_enabled() ? "enabled" : "disabled: ", comm->p2p_disabled_reason().c_str());
      // Which calls were decode (declared shapes) and which prefill (the
      // prompt, whose length was not declared: the fallback).
      std::string decode_tokens;
      bool prefill_declared = false;
      for (int t : opt.decode_tokens) {
        decode_tokens += (decode_tokens.empty() ? "" : ",") + std::to_string(t);
        prefill_declared = prefill_declared || t == opt.prefill_tokens;
      }
      const std::string prefill_tokens = std::to_string(opt.prefill_tokens);
      std::printf(
          "rank 0's calls by phase (declared shapes take a P2P route, undeclared ones the "
          "fallback):\n");
      std::printf("%-8s %-8s %-8s %-18s %-15s %7s %13s\n", "phase", "tokens", "declared", "op",
                  "route", "calls", "mean us/call");
      for (const auto& [key, ct] : times.rows) {
        const auto& [phase, op, route] = key;
        const bool decode = phase == Phase::decode;
        std::printf("%-8s %-8s %-8s %-18s %-15s %7ld %13.2f\n", decode ? "decode" : "prefill",
                    (decode ? decode_tokens : prefill_tokens).c_str(),
                    decode || prefill_declared ? "yes" : "no", op.c_str(), route.c_str(), ct.first,
                    1e6 * ct.second / ct.first);
      }
      // Totals, then each declared plan (the decode shapes): route,
      // protocol, hits and fallbacks.
      std::printf("%s", peerplan::to_string(stats).c_str());
      std::printf("#wrong %ld\n", total_wrong);
    }
    // 6. Close: collective, idempotent.
    comm->close();
    wrong = total_wrong;
    MPI_Bcast(&wrong, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  } catch (const peerplan::Error& e) {
    std::fprintf(stderr, "rank %d: peerplan error (%s): %s\n", rank, peerplan::to_string(e.code()),
                 e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  } catch (const std::bad_alloc&) {
    // Tensors of [tokens, hidden] f32 elements, a norm weight per layer.
    std::fprintf(stderr, "rank %d: out of memory; lower --hidden, --prefill or --layers\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  } catch (const std::exception& e) {  // e.g. TensorMemory's CUDA errors
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
