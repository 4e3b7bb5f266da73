// SPDX-License-Identifier: Apache-2.0
// peerplan_tune: measures where each P2P route beats the fallback on this
// machine and writes the cutoffs to a tuning file entry for its
// fingerprint, which communicators then load through PEERPLAN_TUNING_FILE.
//
//   mpirun -np 2 peerplan_tune --out /etc/peerplan.tune -b 1K -e 256M --graph 1
//
// Per all-reduce size (powers of two from -b to -e): the median time per
// call of one-shot, two-shot and the fallback; per fused add + RMSNorm
// size (rows of --hidden elements): the fused P2P route and the fallback.
// On the cuda backend, for the sizes up to --protocols-max, the same for
// the push kernels' protocols: one-shot LL and Lamport; fused LL, Lamport
// and two-shot; and, for every all-reduce size, the two-shot on its staged
// kernel, on copy engines (dma) and on Lamport. Then, on the cuda backend
// in push mode, the one-shot (on the protocol the router picks) for the
// sizes up to --protocols-max with its grid capped at an eighth, a quarter,
// a half and all of the GPU's multiprocessors, from which the entry's
// one-shot grid steps come. Every rank holds the slowest rank's medians,
// so every rank derives the same cutoffs, protocol windows and grid steps
// (crossovers.hpp says how); rank 0 prints the tables and writes the file.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/window_text.hpp"
#include "crossovers.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/version.hpp"
#include "route_measurement.hpp"
#include "routing/cutoffs.hpp"
#include "routing/fingerprint.hpp"
#include "routing/launch_shape_tuning.hpp"
#include "routing/protocol_tuning.hpp"
#include "sweep_plan.hpp"
#include "tunable_machine.hpp"
#include "tuning_output.hpp"

#ifndef PEERPLAN_TUNE_SOURCE_COMMIT
#define PEERPLAN_TUNE_SOURCE_COMMIT "unknown"
#endif

namespace {

using namespace peerplan;

using tune::Options;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// The tool forces each route and protocol through the Config (cutoffs,
// KernelChoices), which these variables would override; a tuning file must
// not feed into its own measurement. The two-shot is measured in the
// default pieces, those the built-in defaults run.
void ignore_route_and_protocol_variables() {
  for (const char* name :
       {"PEERPLAN_ONE_SHOT_MAX_BYTES", "PEERPLAN_TWO_SHOT_MIN_BYTES", "PEERPLAN_TWO_SHOT_MAX_BYTES",
        "PEERPLAN_FUSED_MAX_BYTES", "PEERPLAN_TWO_SHOT_CHUNK_BYTES", "PEERPLAN_TUNING_FILE",
        "PEERPLAN_DISABLE_P2P", "PEERPLAN_ONE_SHOT_LAMPORT", "PEERPLAN_FUSED_LAMPORT",
        "PEERPLAN_FUSED_LL", "PEERPLAN_TWO_SHOT_DMA", "PEERPLAN_TWO_SHOT_LAMPORT",
        "PEERPLAN_ONE_SHOT_MAX_BLOCKS"}) {
    if (std::getenv(name) == nullptr) continue;
    if (world_rank() == 0)
      std::printf("# ignoring %s=%s: peerplan_tune measures every route, protocol and grid\n", name,
                  std::getenv(name));
    ::unsetenv(name);
  }
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string mode_name(const tune::SweepPlan& plan, Backend backend) {
  if (backend != Backend::cuda) return "host clock";
  return plan.timing.graph ? "CUDA graphs" : "eager";
}

std::string protocols_text(const tune::SweepPlan& plan, const Options& options,
                           const tune::Sweep& sweep) {
  if (sweep.backend != Backend::cuda) return "";
  if (plan.protocols_max_bytes == 0) return ", protocols not measured";
  return ", protocols and one-shot grid up to " + options.protocols_max_text +
         " (two-shot's protocols up to -e)";
}

// What the entry's `measured` line records: enough to redo the run.
std::string measured_text(const tune::SweepPlan& plan, const Options& options,
                          const tune::Sweep& sweep, const std::string& when) {
  return std::string("peerplan_tune ") + kVersion + " (source " + PEERPLAN_TUNE_SOURCE_COMMIT +
         "), " + when + ", " + options.dtype_text + ", " + mode_name(plan, sweep.backend) +
         ", -b " + options.min_text + " -e " + options.max_text + ", hidden " +
         std::to_string(plan.hidden) + ", " + std::to_string(plan.timing.iters) + " calls x " +
         std::to_string(plan.timing.batches) + " batches" + protocols_text(plan, options, sweep);
}

void print_header(const tune::Sweep& sweep, const tune::SweepPlan& plan, const Options& options) {
  std::printf("# peerplan_tune %s: %s backend, %d ranks, fingerprint '%s'\n", kVersion,
              to_string(sweep.backend), sweep.ranks, sweep.fingerprint.c_str());
  std::printf("# %s, %s, median of %d batches of %d calls (slowest rank), us per call\n",
              options.dtype_text.c_str(), mode_name(plan, sweep.backend).c_str(),
              plan.timing.batches, plan.timing.iters);
  std::printf("# all-reduce\n%12s %12s %12s %12s  %s\n", "size(B)", "one-shot", "two-shot",
              "fallback", "winner");
  std::fflush(stdout);
}

void print_row(const tune::AllReduceTimes& row) {
  std::printf("%12zu %12.2f %12.2f %12.2f  %s\n", row.bytes, row.one_shot_us, row.two_shot_us,
              row.fallback_us, tune::to_string(tune::fastest(row)));
  std::fflush(stdout);
}

void print_fused_row(const tune::FusedTimes& row, bool first, std::int64_t hidden) {
  if (first) {
    std::printf("# fused add + RMSNorm, rows of %lld elements\n%12s %6s %12s %12s  %s\n",
                static_cast<long long>(hidden), "size(B)", "rows", "fused P2P", "fallback",
                "winner");
  }
  std::printf("%12zu %6lld %12.2f %12.2f  %s\n", row.bytes, static_cast<long long>(row.rows),
              row.p2p_us, row.fallback_us, row.p2p_us < row.fallback_us ? "fused P2P" : "fallback");
  std::fflush(stdout);
}

void print_one_shot_protocol_row(const tune::OneShotProtocolTimes& row, bool first) {
  if (first) {
    std::printf("# one-shot all-reduce protocols\n%12s %12s %12s  %s\n", "size(B)", "LL", "Lamport",
                "winner");
  }
  std::printf("%12zu %12.2f %12.2f  %s\n", row.bytes, row.ll_us, row.lamport_us,
              tune::to_string(tune::fastest_protocol(row)));
  std::fflush(stdout);
}

void print_fused_protocol_row(const tune::FusedProtocolTimes& row, bool first,
                              std::int64_t hidden) {
  if (first) {
    std::printf("# fused add + RMSNorm protocols, rows of %lld elements\n",
                static_cast<long long>(hidden));
    std::printf("%12s %6s %12s %12s %12s  %s\n", "size(B)", "rows", "LL", "Lamport", "two-shot",
                "winner");
  }
  std::printf("%12zu %6lld %12.2f %12.2f %12.2f  %s\n", row.bytes, static_cast<long long>(row.rows),
              row.ll_us, row.lamport_us, row.two_shot_us,
              tune::to_string(tune::fastest_protocol(row)));
  std::fflush(stdout);
}

void print_two_shot_protocol_row(const tune::TwoShotProtocolTimes& row, bool first) {
  if (first) {
    std::printf("# two-shot all-reduce protocols\n%12s %12s %12s %12s  %s\n", "size(B)", "staged",
                "Lamport", "dma", "winner");
  }
  std::printf("%12zu %12.2f %12.2f %12.2f  %s\n", row.bytes, row.staged_us, row.lamport_us,
              row.dma_us, tune::to_string(tune::fastest_protocol(row)));
  std::fflush(stdout);
}

void print_one_shot_grid_row(const std::vector<int>& candidates, const tune::OneShotGridTimes& row,
                             bool first) {
  if (first) {
    std::printf(
        "# one-shot all-reduce grid (protocol as the router picks), us at most "
        "<n> blocks; the last is the default (one per multiprocessor)\n%12s",
        "size(B)");
    for (int blocks : candidates)
      std::printf(" %12s", (std::to_string(blocks) + " blocks").c_str());
    std::printf("  %s\n", "winner");
  }
  std::printf("%12zu", row.bytes);
  for (double us : row.us_by_candidate) std::printf(" %12.2f", us);
  std::printf("  %d blocks\n", tune::fastest_grid(row, candidates));
  std::fflush(stdout);
}

nlohmann::json one_shot_grid_rows_json(const tune::Sweep& sweep) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : sweep.one_shot_grid) {
    rows.push_back({{"bytes", row.bytes},
                    {"us_by_candidate", row.us_by_candidate},
                    {"winner_blocks", tune::fastest_grid(row, sweep.grid_candidates)}});
  }
  return {{"candidates", sweep.grid_candidates}, {"rows", rows}};
}

// The derived steps as the tuning file writes them, or what runs without.
std::string grid_text(const routing::LaunchShapeTuning& shapes) {
  if (shapes.one_shot_grid.empty()) return "default (one block per multiprocessor)";
  return routing::describe_one_shot_grid(shapes.one_shot_grid) +
         " (bytes:blocks; the default above)";
}

nlohmann::json protocol_rows_json(const tune::Sweep& sweep) {
  nlohmann::json one_shot = nlohmann::json::array(), fused = nlohmann::json::array(),
                 two_shot = nlohmann::json::array();
  for (const auto& row : sweep.one_shot_protocols) {
    one_shot.push_back({{"bytes", row.bytes},
                        {"ll_us", row.ll_us},
                        {"lamport_us", row.lamport_us},
                        {"winner", tune::to_string(tune::fastest_protocol(row))}});
  }
  for (const auto& row : sweep.fused_protocols) {
    fused.push_back({{"bytes", row.bytes},
                     {"rows", row.rows},
                     {"ll_us", row.ll_us},
                     {"lamport_us", row.lamport_us},
                     {"two_shot_us", row.two_shot_us},
                     {"winner", tune::to_string(tune::fastest_protocol(row))}});
  }
  for (const auto& row : sweep.two_shot_protocols) {
    two_shot.push_back({{"bytes", row.bytes},
                        {"staged_us", row.staged_us},
                        {"lamport_us", row.lamport_us},
                        {"dma_us", row.dma_us},
                        {"winner", tune::to_string(tune::fastest_protocol(row))}});
  }
  return {{"one_shot", one_shot}, {"fused", fused}, {"two_shot", two_shot}};
}

// The derived windows; null where a field is auto (nothing measured).
nlohmann::json protocol_windows_json(const routing::ProtocolTuning& protocols) {
  nlohmann::json windows;
  for (const auto& field : routing::kWindowFields) {
    const std::optional<Window>& window = protocols.*field.tuned;
    windows[field.name] =
        window ? nlohmann::json(core::window_text(*window)) : nlohmann::json(nullptr);
  }
  return windows;
}

// `options`: what was swept (dtype, hidden, graph), for tools that set these
// times beside others (benchmarks/loop_agreement.py).
nlohmann::json as_json(const Options& options, const tune::Sweep& sweep,
                       const routing::TuningEntry& entry) {
  nlohmann::json all_reduce = nlohmann::json::array(), fused = nlohmann::json::array();
  for (const auto& row : sweep.all_reduce) {
    all_reduce.push_back({{"bytes", row.bytes},
                          {"one_shot_us", row.one_shot_us},
                          {"two_shot_us", row.two_shot_us},
                          {"fallback_us", row.fallback_us},
                          {"winner", tune::to_string(tune::fastest(row))}});
  }
  for (const auto& row : sweep.fused) {
    fused.push_back({{"bytes", row.bytes},
                     {"rows", row.rows},
                     {"p2p_us", row.p2p_us},
                     {"fallback_us", row.fallback_us}});
  }
  nlohmann::json resolved;  // null where a cutoff is auto (not measured), as for the windows
  for (const auto& field : routing::kCutoffFields) {
    const std::size_t bytes = entry.cutoffs.*field.member;
    resolved[field.name] = bytes == kAutoCutoff ? nlohmann::json(nullptr) : nlohmann::json(bytes);
  }
  const auto dtype = parse_data_type(options.dtype_text);  // checked before the sweep
  return {{"fingerprint", sweep.fingerprint},
          {"backend", to_string(sweep.backend)},
          {"ranks", sweep.ranks},
          {"dtype", dtype ? to_string(*dtype) : options.dtype_text},
          {"hidden", options.hidden},
          {"graph", options.graph},
          {"measured", entry.measured},
          {"all_reduce", all_reduce},
          {"fused", fused},
          {"cutoffs", resolved},
          {"protocol_rows", protocol_rows_json(sweep)},
          {"protocols", protocol_windows_json(entry.protocols)},
          {"one_shot_grid_rows", one_shot_grid_rows_json(sweep)},
          {"one_shot_grid", routing::describe_one_shot_grid(entry.shapes.one_shot_grid)}};
}

// Raised on every rank alike (the fingerprint is the same everywhere) when
// the machine must not be tuned.
struct UntunableMachine : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool gpus_shared(const tune::Sweep& sweep) {
  return routing::fingerprint_says_shared(sweep.fingerprint);
}

// Ranks sharing a GPU wait for time slices: what they measure says nothing
// about any machine, and communicators never apply it. With
// --allow-shared-gpus the tool measures anyway (its CUDA paths can then be
// checked on a single GPU) and writes no file.
void refuse_shared_gpus(const tune::Sweep& sweep, const Options& options) {
  if (!gpus_shared(sweep) || options.allow_shared_gpus) return;
  throw UntunableMachine("ranks share a GPU ('" + sweep.fingerprint +
                         "'): their timings are time slices, not this machine's crossovers. "
                         "Run one rank per GPU (PEERPLAN_DEVICE, CUDA_VISIBLE_DEVICES, -np at "
                         "most the GPU count); --allow-shared-gpus measures anyway, to check "
                         "the tool, and writes no file.");
}

// The tool forces each route on one node; on several the router puts every
// P2P call on the hierarchical route, whose crossovers depend on the network
// between the nodes, which the tool does not measure.
void refuse_several_nodes(const tune::Sweep& sweep) {
  const int nodes = tune::nodes_in_fingerprint(sweep.fingerprint);
  if (nodes <= 1) return;
  throw UntunableMachine(
      "the ranks are on " + std::to_string(nodes) + " nodes ('" + sweep.fingerprint +
      "'): peerplan_tune measures one node (on several, every P2P call takes the hierarchical "
      "route, whose crossovers depend on the network between the nodes). To tune a node, run "
      "it on that node's ranks alone; for this job, write the entry for '" +
      sweep.fingerprint + "' by hand (docs/tuning.md, \"Several nodes\").");
}

// Every rank checks the machine; rank 0 prints each row as it is measured.
tune::RowListener make_listener(const Options& options, const tune::SweepPlan& plan) {
  const bool root = world_rank() == 0;
  tune::RowListener listener;
  listener.started = [&options, &plan, root](const tune::Sweep& sweep) {
    refuse_several_nodes(sweep);
    refuse_shared_gpus(sweep, options);
    if (!root) return;
    print_header(sweep, plan, options);
    if (gpus_shared(sweep)) {
      std::printf(
          "# ranks share a GPU (--allow-shared-gpus): the times below are time "
          "slices, not this machine's; the MPI fallback is timed eagerly (it cannot "
          "be captured); no tuning file will be written\n");
      std::fflush(stdout);
    }
  };
  listener.all_reduce = [root](const tune::AllReduceTimes& row) {
    if (root) print_row(row);
  };
  listener.fused = [root, hidden = plan.hidden, first = true](const tune::FusedTimes& row) mutable {
    if (root) print_fused_row(row, first, hidden);
    first = false;
  };
  listener.one_shot_protocols = [root,
                                 first = true](const tune::OneShotProtocolTimes& row) mutable {
    if (root) print_one_shot_protocol_row(row, first);
    first = false;
  };
  listener.fused_protocols = [root, hidden = plan.hidden,
                              first = true](const tune::FusedProtocolTimes& row) mutable {
    if (root) print_fused_protocol_row(row, first, hidden);
    first = false;
  };
  listener.two_shot_protocols = [root,
                                 first = true](const tune::TwoShotProtocolTimes& row) mutable {
    if (root) print_two_shot_protocol_row(row, first);
    first = false;
  };
  listener.one_shot_grid = [root, first = true](const std::vector<int>& candidates,
                                                const tune::OneShotGridTimes& row) mutable {
    if (root) print_one_shot_grid_row(candidates, row, first);
    first = false;
  };
  listener.skipped = [root](const std::string& why) {
    if (!root) return;
    std::printf("# %s\n", why.c_str());
    std::fflush(stdout);
  };
  return listener;
}

std::string file_comment(const std::string& when) {
  return "peerplan tuning file (written by peerplan_tune on " + when +
         ")\nFormat: peerplan's docs/tuning.md. Load it with "
         "PEERPLAN_TUNING_FILE=<this file>.";
}

// Throws std::runtime_error naming the system's reason when `path` cannot
// be written in full (a missing directory, a full disk).
void write_json(const std::string& path, const nlohmann::json& json) {
  errno = 0;
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << "\n";
  if (out.flush()) return;
  throw std::runtime_error(errno != 0 ? std::strerror(errno) : "the write failed");
}

// Rank 0: prints what was derived, writes the entry (never for ranks
// sharing a GPU) and the JSON. False when a file could not be written.
bool publish(const Options& options, const tune::Sweep& sweep, const routing::TuningEntry& entry,
             const std::string& when) {
  std::printf("# cutoffs: %s\n", routing::describe_cutoffs(entry.cutoffs).c_str());
  std::printf("# protocols: %s\n", routing::describe_protocol_tuning(entry.protocols).c_str());
  std::printf("# one-shot grid: %s\n", grid_text(entry.shapes).c_str());
  const std::string* target = &options.out;  // the file being written, for the error
  try {
    if (gpus_shared(sweep)) {
      std::printf(
          "# no tuning file written: ranks share a GPU, the times are time slices (%s "
          "is left as it was)\n",
          options.out.c_str());
    } else {
      const bool replaced = tune::write_entry(options.out, entry, file_comment(when));
      std::printf("# %s the entry for '%s' in %s\n", replaced ? "replaced" : "wrote",
                  sweep.fingerprint.c_str(), options.out.c_str());
    }
    if (!options.json_path.empty()) {
      target = &options.json_path;
      write_json(options.json_path, as_json(options, sweep, entry));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peerplan_tune: cannot write %s: %s\n", target->c_str(), e.what());
    return false;
  }
  return true;
}

int run(const Options& options, const tune::SweepPlan& plan) {
  ignore_route_and_protocol_variables();
  const tune::RowListener listener = make_listener(options, plan);
  tune::Sweep sweep = tune::measure_routes(MPI_COMM_WORLD, plan, listener);
  tune::measure_protocols(MPI_COMM_WORLD, plan, sweep, listener);
  tune::measure_one_shot_grid(MPI_COMM_WORLD, plan, sweep, listener);

  const std::string when = utc_now();
  routing::TuningEntry entry;
  entry.fingerprint = sweep.fingerprint;
  entry.cutoffs = tune::derive_cutoffs(sweep.all_reduce, sweep.fused);
  entry.protocols = tune::derive_protocols(sweep.one_shot_protocols, sweep.fused_protocols,
                                           sweep.two_shot_protocols);
  entry.shapes = tune::derive_launch_shapes(sweep.one_shot_grid, sweep.grid_candidates);
  entry.measured = measured_text(plan, options, sweep, when);

  // Rank 0 writes; every rank learns whether that worked, so all exit alike.
  int written = world_rank() == 0 ? publish(options, sweep, entry, when) : 1;
  MPI_Bcast(&written, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return written ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  CLI::App app{
      "peerplan_tune: measures the route crossovers of this machine and writes them "
      "to a tuning file (load it with PEERPLAN_TUNING_FILE)"};
  Options options;
  app.add_option("--out", options.out, "tuning file to write or update (other entries are kept)")
      ->capture_default_str();
  app.add_option("-b,--minbytes", options.min_text, "smallest all-reduce (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", options.max_text, "largest all-reduce")->capture_default_str();
  app.add_option("--graph", options.graph, "cuda backend: 1 times CUDA graph replays")
      ->capture_default_str();
  app.add_option("--dtype", options.dtype_text, "f16 | bf16 | f32")->capture_default_str();
  app.add_option("--hidden", options.hidden, "fused op: elements per row")->capture_default_str();
  app.add_option("-n,--iters", options.timing.iters, "calls per timed batch")
      ->capture_default_str();
  app.add_option("-w,--warmup", options.timing.warmup, "untimed calls before each measurement")
      ->capture_default_str();
  app.add_option("--batches", options.timing.batches, "timed batches; the median counts")
      ->capture_default_str();
  app.add_option("--protocols-max", options.protocols_max_text,
                 "cuda backend: time the push protocols (LL, Lamport, fused two-shot) and the "
                 "one-shot's grid (1/8, 1/4, 1/2 and all of the multiprocessors) of the sizes "
                 "up to this many bytes, and the two-shot's protocols (staged, Lamport, dma) "
                 "of every size, and tune their windows and the grid steps; 0: none, leave "
                 "them auto")
      ->capture_default_str();
  app.add_flag("--allow-shared-gpus", options.allow_shared_gpus,
               "measure even where ranks share a GPU (to check the tool on one GPU): the times "
               "are time slices, and no tuning file is written");
  app.add_option("--json", options.json_path, "also write every measurement as JSON (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help (CLI11's exit code 0) exits 0; an option CLI11 cannot take
    // (a value that is not a number, an unknown option) exits 2, like every
    // other value the tool cannot use, on every rank alike (the same
    // arguments everywhere). Rank 0 prints CLI11's message, which names
    // the option.
    if (world_rank() == 0) app.exit(e);
    MPI_Finalize();
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  // Every value, and on rank 0 (which writes it) --out, is checked before
  // anything is measured: a value the tool cannot use ends the run at
  // once, with status 2 on every rank.
  tune::SweepPlan plan;
  std::string refusal;
  try {
    plan = tune::make_plan(options);
    if (world_rank() == 0) tune::check_out_path(options.out);
  } catch (const Error& e) {
    refusal = e.what();
  }
  int refused = refusal.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &refused, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (refused != 0) {
    if (world_rank() == 0) std::fprintf(stderr, "peerplan_tune: %s\n", refusal.c_str());
    MPI_Finalize();
    return 2;
  }
  int status = 1;
  try {
    status = run(options, plan);
  } catch (const UntunableMachine& e) {
    if (world_rank() == 0) std::fprintf(stderr, "peerplan_tune: %s\n", e.what());
    status = 3;
  } catch (const std::exception& e) {
    // Errors from create/declare are raised on every rank alike; anything
    // else may be one rank's, and the others would wait for it: end the job.
    std::fprintf(stderr, "peerplan_tune (rank %d): %s\n", world_rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
