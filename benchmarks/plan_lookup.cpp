// SPDX-License-Identifier: Apache-2.0
// Plan-lookup benchmark: the cost of one dispatch-time lookup (build the
// call's canonical key, find the declared plan) with the hash index and with
// the linear scan, at 64, 512 and 4096 declared plans: the lookup must cost
// the same at every count (docs/design.md, The lookup contract, point 11).
//
// The declared set models a transformer: per layer, an all-reduce of
// [tokens, hidden] and a fused add+RMSNorm of [tokens, hidden] with that
// layer's own norm weight, for several token counts. Cases:
//   hit_first  the first declared plan (best case of the scan)
//   hit_last   the last declared plan (worst hit for the scan)
//   miss       the last layer's fused op at a row count nobody declared
//              (a full scan; for the index a probe that ends on an empty slot)
// Every timed call builds the key from (dtype, layout, weight, eps), as the
// communicator's dispatch does. A sample is `calls` consecutive calls timed
// together; the reported figure is the median over samples of ns per call.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "oracles/plan_scan.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_index.hpp"
#include "plan/validation.hpp"

namespace {

using peerplan::DataType;
using peerplan::Declaration;
using peerplan::Operation;
using peerplan::PlanKey;
using peerplan::TensorLayout;
using peerplan::plan::IndexEntry;
using peerplan::plan::PlanIndex;
using peerplan::plan::PlanScan;

// Keep a value alive and unknown to the optimiser: it must assume the
// pointee was read and may have changed, so no work is hoisted out of the
// timed loop or dropped as unused.
template <class T>
inline void escape(T* pointer) {
  asm volatile("" : : "g"(pointer) : "memory");
}

struct Options {
  std::vector<std::size_t> declared{64, 512, 4096};
  std::vector<std::int64_t> token_counts{1, 2, 4, 8, 16, 32, 64, 128};
  std::int64_t hidden = 4096;
  int samples = 7;
  int calls = 1000;
  int warmup_calls = 2000;
  float eps = 1e-6f;
  std::string json_path;
};

// One dispatch's inputs, as the caller hands them to all_reduce /
// fused_add_rms_norm.
struct Call {
  Operation operation = Operation::all_reduce;
  DataType dtype = DataType::bf16;
  TensorLayout layout;
  const void* weight = nullptr;
  float eps = 0.0f;
};

inline PlanKey key_of(const Call& call) noexcept {
  return call.operation == Operation::all_reduce
             ? peerplan::make_all_reduce_key(call.dtype, call.layout)
             : peerplan::make_fused_key(call.dtype, call.layout, call.weight, call.eps);
}

Call call_for(const Declaration& d) {
  Call call;
  call.operation = d.operation;
  call.dtype = d.dtype;
  call.layout = d.layout;
  if (d.operation == Operation::fused_add_rms_norm) {
    call.weight = d.weights.front().data;
    call.eps = *d.eps;
  }
  return call;
}

struct Model {
  std::vector<std::uint16_t> weights;  // one bf16 [hidden] norm weight per layer
  std::vector<Declaration> declarations;
};

Model make_model(std::size_t declared, const Options& options) {
  const std::size_t per_layer = 2 * options.token_counts.size();
  if (declared % per_layer != 0) {
    throw std::runtime_error("--declared values must be multiples of " + std::to_string(per_layer) +
                             " (2 ops x token counts)");
  }
  const std::size_t layers = declared / per_layer;
  Model model;
  model.weights.resize(layers * static_cast<std::size_t>(options.hidden));
  model.declarations.reserve(declared);
  for (std::size_t layer = 0; layer < layers; ++layer) {
    const void* weight = model.weights.data() + layer * static_cast<std::size_t>(options.hidden);
    for (std::int64_t tokens : options.token_counts) {
      const TensorLayout layout{tokens, options.hidden};
      const std::string suffix = std::to_string(layer) + ".t" + std::to_string(tokens);
      model.declarations.push_back(
          Declaration::all_reduce("attn_out.l" + suffix, DataType::bf16, layout));
      model.declarations.push_back(Declaration::fused_add_rms_norm(
          "post_attn_norm.l" + suffix, DataType::bf16, layout, weight, options.eps));
    }
  }
  peerplan::plan::validate_declarations(model.declarations);  // a realistic, valid set
  return model;
}

// An undeclared row count: the last plan's call with a row count outside the
// declared token counts.
Call miss_call(const Model& model, const Options& options) {
  Call call = call_for(model.declarations.back());
  std::int64_t rows = 3;
  while (std::find(options.token_counts.begin(), options.token_counts.end(), rows) !=
         options.token_counts.end()) {
    ++rows;
  }
  call.layout = TensorLayout{rows, options.hidden};
  return call;
}

template <class Lookup>
const IndexEntry* run_calls(const Lookup& lookup, const Call& call, int calls) {
  const IndexEntry* last = nullptr;
  for (int i = 0; i < calls; ++i) {
    escape(&call);
    const PlanKey key = key_of(call);
    last = lookup.find(key);
    escape(&last);
  }
  return last;
}

template <class Lookup>
std::vector<double> time_case(const Lookup& lookup, const Call& call, const Options& options) {
  run_calls(lookup, call, options.warmup_calls);
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(options.samples));
  for (int s = 0; s < options.samples; ++s) {
    const auto start = std::chrono::steady_clock::now();
    run_calls(lookup, call, options.calls);
    const auto stop = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(stop - start).count();
    samples.push_back(ns / options.calls);
  }
  return samples;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Before timing, check that both implementations give the expected answer,
// so the benchmark cannot silently time a broken lookup.
template <class Lookup>
void check_answer(const Lookup& lookup, const Call& call, const IndexEntry* expected_null_or,
                  std::uint32_t expected_position, const char* what) {
  const IndexEntry* entry = lookup.find(key_of(call));
  const bool ok = expected_null_or == nullptr
                      ? entry == nullptr
                      : entry != nullptr && entry->position == expected_position;
  if (!ok) throw std::runtime_error(std::string("wrong lookup result for case ") + what);
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"peerplan plan-lookup benchmark: hash index vs linear scan"};
  app.add_option("--declared", options.declared, "declared plan counts to measure")
      ->capture_default_str();
  app.add_option("--tokens", options.token_counts, "token counts declared per layer")
      ->capture_default_str();
  app.add_option("--hidden", options.hidden, "hidden size (innermost dimension)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--samples", options.samples, "timed samples per case (at least 5)")
      ->capture_default_str()
      ->check(CLI::Range(5, 1000000));
  app.add_option("--calls", options.calls, "calls per sample (at least 1000)")
      ->capture_default_str()
      ->check(CLI::Range(1000, 100000000));
  app.add_option("--warmup", options.warmup_calls, "untimed calls before each case")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", options.json_path, "write every sample and the configuration here");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json results = nlohmann::json::array();
  nlohmann::json tables = nlohmann::json::object();
  std::printf("%9s  %-9s  %12s  %12s  %10s\n", "declared", "case", "scan ns", "index ns",
              "scan/index");

  for (const std::size_t declared : options.declared) {
    const Model model = make_model(declared, options);
    const PlanScan scan(model.declarations);
    const PlanIndex index(model.declarations);
    const auto stats = index.probe_stats();
    tables[std::to_string(declared)] = {{"slots", stats.slots},
                                        {"keys", stats.keys},
                                        {"max_probe", stats.max_probe},
                                        {"mean_probe", stats.mean_probe}};

    struct Case {
      const char* name;
      Call call;
      bool hit;
      std::uint32_t position;
    };
    const auto last = static_cast<std::uint32_t>(model.declarations.size() - 1);
    const Case cases[] = {
        {"hit_last", call_for(model.declarations.back()), true, last},
        {"hit_first", call_for(model.declarations.front()), true, 0},
        {"miss", miss_call(model, options), false, 0},
    };
    for (const Case& c : cases) {
      const IndexEntry* expect = c.hit ? index.find(key_of(c.call)) : nullptr;
      if (c.hit && expect == nullptr) throw std::runtime_error("index missed a declared plan");
      check_answer(scan, c.call, expect, c.position, c.name);
      check_answer(index, c.call, expect, c.position, c.name);

      const std::vector<double> scan_ns = time_case(scan, c.call, options);
      const std::vector<double> index_ns = time_case(index, c.call, options);
      const double scan_median = median(scan_ns);
      const double index_median = median(index_ns);
      std::printf("%9zu  %-9s  %12.1f  %12.2f  %9.0fx\n", declared, c.name, scan_median,
                  index_median, scan_median / index_median);
      std::fflush(stdout);
      results.push_back({{"declared", declared},
                         {"case", c.name},
                         {"impl", "scan"},
                         {"median_ns", scan_median},
                         {"samples_ns", scan_ns}});
      results.push_back({{"declared", declared},
                         {"case", c.name},
                         {"impl", "index"},
                         {"median_ns", index_median},
                         {"samples_ns", index_ns}});
    }
  }

  if (!options.json_path.empty()) {
    std::vector<std::string> files;
    std::string listed = PEERPLAN_LOOKUP_SOURCE_FILES;
    for (std::size_t start = 0; start <= listed.size();) {
      const std::size_t comma = std::min(listed.find(',', start), listed.size());
      if (comma > start) files.push_back(listed.substr(start, comma - start));
      start = comma + 1;
    }
    nlohmann::json out;
    out["results"] = results;
    out["source_sha256"] = PEERPLAN_LOOKUP_SOURCE_SHA256;
    out["source_files"] = files;
    out["configuration"] = {{"declared", options.declared},
                            {"token_counts", options.token_counts},
                            {"hidden", options.hidden},
                            {"dtype", "bf16"},
                            {"eps", options.eps},
                            {"samples", options.samples},
                            {"calls_per_sample", options.calls},
                            {"warmup_calls", options.warmup_calls},
                            {"unit", "ns per call (key build + lookup), median over samples"}};
    out["compiler"] = {{"id", PEERPLAN_BENCH_COMPILER_ID},
                       {"version", PEERPLAN_BENCH_COMPILER_VERSION},
                       {"build_type", PEERPLAN_BENCH_BUILD_TYPE},
                       {"cxx_standard", __cplusplus},
                       {"flags", PEERPLAN_BENCH_CXX_FLAGS}};
    out["host"] = {{"cpu", cpu_model()}, {"hardware_threads", std::thread::hardware_concurrency()}};
    out["index_table"] = tables;
    out["timestamp_utc"] = utc_now();
    std::ofstream file(options.json_path);
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", options.json_path.c_str());
      return 1;
    }
    file << out.dump(2) << '\n';
    std::printf("wrote %s\n", options.json_path.c_str());
  }
  return 0;
}
