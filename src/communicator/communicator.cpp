// SPDX-License-Identifier: Apache-2.0
// The communicator: lifecycle (docs/design.md, Lifecycle) and dispatch (The
// path of one call). One index lookup per call decides between the P2P route
// prepared at declare and the fallback.
#include "peerplan/communicator.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "bootstrap/fail_together.hpp"
#include "bootstrap/mpi_bootstrap.hpp"
#include "bootstrap/mpi_check.hpp"
#include "communicator/backend_selection.hpp"
#include "communicator/call_checks.hpp"
#include "communicator/call_counters.hpp"
#include "communicator/call_guard.hpp"
#include "communicator/call_ranges.hpp"
#include "communicator/card_collection.hpp"
#include "communicator/card_decisions.hpp"
#include "communicator/create_over_bootstrap.hpp"
#include "communicator/declare_failed_locally.hpp"
#include "communicator/cutoff_resolution.hpp"
#include "communicator/declaration_agreement.hpp"
#include "communicator/fused_weight_misses.hpp"
#include "communicator/machine_fingerprint.hpp"
#include "communicator/prepared_plan.hpp"
#include "communicator/same_call_check.hpp"
#include "core/config_fields.hpp"
#include "core/environment.hpp"
#include "core/fault_injection.hpp"
#include "core/log.hpp"
#include "core/nvtx_ranges.hpp"
#include "core/unknown_variables.hpp"
#include "peerplan/errors.hpp"
#include "plan/layout_rules.hpp"
#include "plan/norm_text.hpp"
#include "plan/plan_index.hpp"
#include "plan/repeated_keys.hpp"
#include "plan/validation.hpp"
#include "routing/cutoffs.hpp"
#include "routing/protocol_tuning.hpp"
#include "routing/router.hpp"

namespace peerplan {
namespace {

using communicator::CallGuard;
using communicator::CallRange;
using communicator::PreparedPlan;
using core::nvtx::Colour;
using NvtxRange = core::nvtx::Range;

bool is_p2p(Route route) noexcept { return route != Route::fallback; }

// Built before the cards' exchange checks the setting (check_settings raises
// it on every rank together): an out-of-range count must not throw first,
// on one rank alone (a negative count would ask for SIZE_MAX slots).
std::size_t keys_to_track(const Config& config) {
  const int keys = config.undeclared_keys_tracked;
  return keys < 0 || keys > kMaxUndeclaredKeysTracked ? 0 : static_cast<std::size_t>(keys);
}

class CommunicatorImpl final : public Communicator {
 public:
  // `comm`: MPI_COMM_NULL for a communicator over a caller's bootstrap,
  // with no MPI and no fallback of its own (create_over_bootstrap.hpp).
  CommunicatorImpl(MPI_Comm comm, Config config, std::unique_ptr<bootstrap::Bootstrap> boot,
                   const std::vector<std::string>& applied_env,
                   const std::optional<std::string>& environment_error)
      : config_(std::move(config)),
        nvtx_(core::nvtx::domain(config_.nvtx)),
        boot_(std::move(boot)),
        uses_mpi_(comm != MPI_COMM_NULL),
        counters_(keys_to_track(config_)) {
    if (boot_->rank() == 0) {
      for (const auto& line : applied_env) log::info(log::Subsystem::init, "environment: " + line);
      log::info(log::Subsystem::init, "config: " + core::describe_config(config_));
    }
    // The one exchange of create: every rank's card. Every decision below
    // is derived from the cards, so it is the same on every rank, errors
    // included (a bad setting on one rank is raised by all, at once).
    auto own = communicator::fill_own_card(config_, environment_error, boot_->local_rank());
    const auto cards = communicator::exchange_cards(*boot_, own.card);
    communicator::check_settings(cards);
    communicator::check_world_size(*boot_, config_);
    communicator::check_tuning_files(cards);
    auto setup = communicator::select_backend(
        comm, *boot_, config_, cards, own.locality,
        uses_mpi_ ? communicator::FallbackSetup::own : communicator::FallbackSetup::none);
    backend_ = setup.backend;
    cuda_device_ = backend_ == Backend::cuda ? own.device : -1;
    fallback_kind_ = setup.fallback_kind;
    peer_ = std::move(setup.peer);
    fallback_ = std::move(setup.fallback);
    p2p_enabled_ = peer_ != nullptr;
    p2p_disabled_reason_ = setup.p2p_disabled_reason;
    nodes_ = setup.nodes;
    fingerprint_ = communicator::machine_fingerprint(cards, nodes_.num_nodes, backend_);
    const auto resolved = communicator::resolve_route_cutoffs(cards, boot_->rank(), config_,
                                                              backend_, fingerprint_, own.tuning);
    cutoffs_ = resolved.cutoffs;
    if (p2p_enabled_) {
      windows_ = routing::apply_protocol_tuning(peer_->protocol_windows(), resolved.protocols,
                                                config_.kernels);
      // The windows the router gives plans from, once the tuning file's (or
      // a PCIe link's) moved the transport's (which it logged at create).
      if (windows_.tunable && !routing::is_empty(resolved.protocols) && boot_->rank() == 0)
        log::info(log::Subsystem::route,
                  "protocol windows in force: " + routing::describe_protocol_windows(windows_));
      peer_->set_launch_shapes(resolved.shapes);
    }
  }

  ~CommunicatorImpl() override {
    // Not collective: a communicator destroyed without close() (e.g. while
    // an exception unwinds) releases only what this rank holds.
    index_.clear();
    index_.reclaim_retired();
  }

  void declare(std::span<const Declaration> declarations) override {
    const CallGuard guard(call_in_progress_, "declare");
    const NvtxRange range(nvtx_, Colour::lifecycle, "declare", declarations.size());
    ensure_open("declare");
    breaking_on_timeout("declare", [&] { declare_set(declarations); });
  }

  // declare_failed_locally.hpp: declare's first exchange with `error` as
  // this rank's validation failure.
  void declare_failed(const std::string& error) {
    const CallGuard guard(call_in_progress_, "declare");
    ensure_open("declare");
    breaking_on_timeout("declare", [&] { declare_set({}, &error); });
  }

  bool has_plan_for(const PlanKey& key) const noexcept override {
    return !closed_ && index_.contains(key);
  }

  PlanInfo plan_for(const PlanKey& key) const override {
    ensure_open("plan_for");
    const auto& entry = index_.at(key);
    const auto* plan = static_cast<const PreparedPlan*>(entry.payload);
    return PlanInfo{entry.declaration,
                    plan->route,
                    plan->reason,
                    plan->protocol,
                    plan->launch_text,
                    static_cast<std::size_t>(entry.declaration - index_.declarations().data())};
  }

  CallResult all_reduce(const void* in, void* out, DataType dtype, const TensorLayout& layout,
                        StreamHandle stream) override {
    const CallGuard guard(call_in_progress_, "all_reduce");
    ensure_open("all_reduce");
    communicator::check_dtype("all_reduce", dtype);
    const PlanKey key = make_all_reduce_key(dtype, layout);
    compare_calls_if_asked("all_reduce", key);
    const auto* entry = index_.find(key);
    auto* plan = entry ? static_cast<PreparedPlan*>(entry->payload) : nullptr;
    const CallRange range(nvtx_, Operation::all_reduce, plan, dtype, layout);
    if (plan) {
      communicator::check_declared_all_reduce(in, out, *entry->declaration, *plan);
    } else {
      communicator::check_undeclared_all_reduce(in, out, dtype, layout);
    }
    const transport::AllReduceArgs args{in, out, dtype, &layout, stream};
    CallResult result = decide(plan);
    if (result.route == Route::hierarchical) {
      // Its step between nodes is an MPI exchange: a Timeout there leaves
      // the ranks out of step, as in the fallback.
      breaking_on_failure("all_reduce", [&] { peer_->all_reduce(*plan->launch, args); });
    } else if (is_p2p(result.route)) {
      result.zero_copy = plan->pieces ? communicator::all_reduce_in_pieces(*peer_, *plan->launch,
                                                                           *plan->pieces, args)
                                      : peer_->all_reduce(*plan->launch, args);
    } else {
      breaking_on_timeout("all_reduce", [&] { fallback_->all_reduce(args); });
    }
    counters_.count(plan, result, key);
    trace_call("all_reduce", dtype, layout, entry, result);
    return result;
  }

  CallResult fused_add_rms_norm(void* inout, void* residual, const void* weight, float eps,
                                DataType dtype, const TensorLayout& layout,
                                StreamHandle stream) override {
    const CallGuard guard(call_in_progress_, "fused_add_rms_norm");
    ensure_open("fused_add_rms_norm");
    communicator::check_dtype("fused_add_rms_norm", dtype);
    const PlanKey key = make_fused_key(dtype, layout, weight, eps);
    compare_calls_if_asked("fused_add_rms_norm", key);
    const auto* entry = index_.find(key);
    auto* plan = entry ? static_cast<PreparedPlan*>(entry->payload) : nullptr;
    const CallRange range(nvtx_, Operation::fused_add_rms_norm, plan, dtype, layout);
    if (plan) {
      communicator::check_declared_fused(inout, residual, *entry->declaration, *plan);
    } else {
      communicator::check_undeclared_fused(inout, residual, weight, eps, dtype, layout);
      if (auto warning = weight_misses_.warning_for_miss(key)) log::warn(*warning);
    }
    const transport::FusedArgs args{inout, residual, weight, eps, dtype, &layout, stream};
    const CallResult result = decide(plan);
    if (result.route == Route::hierarchical) {
      breaking_on_failure("fused_add_rms_norm",
                          [&] { peer_->fused_add_rms_norm(*plan->launch, args); });
    } else if (is_p2p(result.route)) {
      peer_->fused_add_rms_norm(*plan->launch, args);
    } else {
      breaking_on_timeout("fused_add_rms_norm", [&] { fallback_->fused_add_rms_norm(args); });
    }
    counters_.count(plan, result, key);
    trace_call("fused_add_rms_norm", dtype, layout, entry, result, weight, eps);
    return result;
  }

  void register_buffers(std::span<const BufferRegion> buffers) override {
    const CallGuard guard(call_in_progress_, "register_buffers");
    const NvtxRange range(nvtx_, Colour::lifecycle, "register_buffers", buffers.size());
    ensure_open("register_buffers");
    // What no backend accepts is checked here, on every rank together.
    std::optional<std::string> local_error;
    for (std::size_t i = 0; i < buffers.size() && !local_error; ++i) {
      if (buffers[i].data == nullptr || buffers[i].bytes == 0) {
        local_error = "buffer " + std::to_string(i) + " is " +
                      (buffers[i].data == nullptr ? "a null pointer" : "0 bytes long") +
                      "; pass non-empty device buffers";
      }
    }
    // A timeout here breaks the communicator like one in the transport's step.
    breaking_on_timeout("register_buffers", [&] {
      if (auto failures = bootstrap::gather_failures(*boot_, local_error)) {
        throw InvalidArgument("register_buffers: " + failures->message +
                              "; nothing was registered");
      }
    });
    if (!p2p_enabled_) return;  // same on every rank: nothing reads in place
    breaking_on_timeout("register_buffers", [&] { peer_->register_buffers(buffers); });
  }

  void deregister_buffers() override {
    const CallGuard guard(call_in_progress_, "deregister_buffers");
    const NvtxRange range(nvtx_, Colour::lifecycle, "deregister_buffers");
    ensure_open("deregister_buffers");
    if (!p2p_enabled_) return;
    breaking_on_timeout("deregister_buffers", [&] { peer_->deregister_buffers(); });
  }

  std::size_t registered_buffer_count() const noexcept override {
    return p2p_enabled_ && peer_ ? peer_->registered_buffer_count() : 0;
  }

  // After close(), the counts as they stood at close (per plan too): a
  // monitoring thread may read them once the owner has closed the
  // communicator. The counters are atomics, read while calls run; the
  // plans they belong to are replaced by declare() and dropped by close()
  // under stats_mutex_, which a monitoring thread's reads take too.
  Stats stats() const override {
    const std::lock_guard lock(stats_mutex_);
    return closed_ ? closed_stats_ : live_stats();
  }

  void reset_stats() override {
    const std::lock_guard lock(stats_mutex_);
    if (closed_) {
      communicator::zero_counts(closed_stats_);
      return;
    }
    counters_.reset(plans_);
  }

  void close() override {
    const CallGuard guard(call_in_progress_, "close");
    if (closed_) return;
    const NvtxRange range(nvtx_, Colour::lifecycle, "close");
    // close() is collective and uses MPI; after MPI_Finalize that would
    // abort the process. The destructor still releases this rank's share.
    // (A communicator without MPI exchanges through its caller's bootstrap.)
    if (uses_mpi_) bootstrap::detail::require_mpi_running("close");
    {
      const std::lock_guard lock(stats_mutex_);
      closed_stats_ = live_stats();  // while the plans holding the per-plan counters exist
      closed_ = true;  // first: a failure below must not leave a usable half-closed communicator
      plans_.clear();
      index_.clear();
      index_.reclaim_retired();
    }
    // Fallback first: ending (or aborting) NCCL's communicator is what stops
    // a fallback kernel still waiting for a peer, and the P2P transport
    // waits for the device to be idle before it unmaps anything. Each is
    // bounded by about the timeout (CUDA backend: + 2 s; it leaks, with a
    // WARN, what a kernel that never ends may still use).
    // The host (MPI) fallback frees its communicator, or keeps what a
    // reduction abandoned by a timeout still uses until the process exits.
    if (fallback_) fallback_->close();
    if (peer_) peer_->close();
    peer_.reset();
    fallback_.reset();
    // Every rank has released its mappings before anyone returns. A broken
    // communicator's peers may be gone, and a peer that saw the timeout
    // skips this barrier, so close() only warns if it times out: releasing
    // this rank's resources must always complete.
    if (broken_reason_.empty()) {
      try {
        boot_->barrier();
      } catch (const Timeout& e) {
        log::warn(std::string("close: peers did not reach close(): ") + e.what());
      }
    }
  }

  bool is_closed() const noexcept override { return closed_; }
  int rank() const noexcept override { return boot_->rank(); }
  int size() const noexcept override { return boot_->size(); }
  Backend backend() const noexcept override { return backend_; }
  int cuda_device() const noexcept override { return cuda_device_; }
  Fallback fallback() const noexcept override { return fallback_kind_; }
  bool p2p_enabled() const noexcept override { return p2p_enabled_; }
  const std::string& p2p_disabled_reason() const noexcept override { return p2p_disabled_reason_; }
  const Config& config() const noexcept override { return config_; }
  const std::string& topology_fingerprint() const noexcept override { return fingerprint_; }
  RouteCutoffs cutoffs() const noexcept override { return cutoffs_; }

 private:
  Stats live_stats() const { return counters_.snapshot(index_.declarations(), plans_); }

  // declare() without the open check and timeout bookkeeping. A
  // `conversion_error` (declare_failed) is this rank's validation failure.
  void declare_set(std::span<const Declaration> declarations,
                   const std::string* conversion_error = nullptr) {
    if (auto failures = bootstrap::run_together(*boot_, [&] {
          if (conversion_error != nullptr) throw InvalidArgument(*conversion_error);
          plan::validate_declarations(declarations);
        })) {
      throw InvalidArgument("declare: invalid declarations (" + failures->message +
                            "); the previous declared set stays in force");
    }
    if (auto mismatch = communicator::find_declaration_mismatch(*boot_, declarations)) {
      throw Mismatch(*mismatch);
    }

    auto decisions = route_all(declarations);
    PEERPLAN_FAULT_POINT("declare.before_reserve", boot_->rank());
    std::vector<communicator::PlanLaunches> launches(decisions.size());
    if (p2p_enabled_) {
      std::size_t max_bytes = 0, max_lamport_bytes = 0, max_dma_bytes = 0;
      for (std::size_t i = 0; i < decisions.size(); ++i) {
        const auto& d = decisions[i];
        // A plan run in pieces stages one piece at a time.
        const std::size_t piece = piece_bytes(declarations[i], d);
        const std::size_t staged = piece != 0 ? piece : d.message_bytes;
        // Copy-engine and Lamport plans have regions of their own, not the
        // slots (a Lamport two-shot in pieces needs room for a piece).
        if (d.protocol == Protocol::dma)
          max_dma_bytes = std::max(max_dma_bytes, staged);
        else if (d.protocol == Protocol::lamport)
          max_lamport_bytes = std::max(max_lamport_bytes, staged);
        else if (is_p2p(d.route))
          max_bytes = std::max(max_bytes, staged);
      }
      // A Timeout in reserve() propagates (the communicator is then
      // broken); any other failure, in reserve() or in preparing a plan's
      // launch, disables P2P on every rank alike.
      if (auto failures = bootstrap::run_together(*boot_, [&] {
            peer_->reserve(max_bytes, max_lamport_bytes, max_dma_bytes);
            launches = prepare_launches(declarations, decisions);
          })) {
        disable_p2p("preparing the staging buffers and launches failed: " + failures->message);
        decisions = route_all(declarations);
        launches.clear();
        launches.resize(decisions.size());
      }
    }

    std::vector<std::unique_ptr<plan::PlanPayload>> payloads;
    std::vector<PreparedPlan*> plans;
    std::vector<std::string> launch_texts(decisions.size());
    payloads.reserve(declarations.size());
    for (std::size_t i = 0; i < decisions.size(); ++i) {
      const auto& d = decisions[i];
      const Declaration& declared = declarations[i];
      auto prepared = std::make_unique<PreparedPlan>(
          d.route, d.reason, d.protocol, d.message_bytes, declared.input_alignment,
          static_cast<std::uint64_t>(plan::span_bytes(declared.layout, declared.dtype)),
          std::move(launches[i]));
      prepared->nvtx_message = communicator::register_plan_message(nvtx_, declared, d);
      launch_texts[i] = prepared->launch_text;
      plans.push_back(prepared.get());
      payloads.push_back(std::move(prepared));
    }
    {
      const std::lock_guard lock(stats_mutex_);  // the declarations and plans stats() pairs
      index_.rebuild(std::vector<Declaration>(declarations.begin(), declarations.end()),
                     std::move(payloads));
      plans_ = std::move(plans);
      // declare() is never concurrent with calls on this communicator (API
      // contract), so no lookup can still hold a replaced plan: release them.
      index_.reclaim_retired();
    }
    std::vector<bool> p2p(plans_.size());
    for (std::size_t i = 0; i < plans_.size(); ++i) p2p[i] = is_p2p(plans_[i]->route);
    weight_misses_.rebuild(declarations, p2p);

    if (boot_->rank() == 0 && log::enabled(LogLevel::info, log::Subsystem::plan)) {
      log::info(log::Subsystem::plan,
                "declared " + std::to_string(declarations.size()) + " plans:\n" +
                    routing::format_route_table(declarations, decisions, launch_texts));
    }
    if (boot_->rank() == 0) warn_about_repeated_keys(declarations);
  }

  // A declaration whose key an earlier one has can never be hit (the first
  // declared wins): one WARN per declare, naming each such declaration and
  // the one that takes its calls. Rank 0 only: every rank declared the same.
  static void warn_about_repeated_keys(std::span<const Declaration> declarations) {
    if (!log::enabled(LogLevel::warn)) return;
    const auto repeats = plan::find_repeated_keys(declarations);
    if (repeats.empty()) return;
    const auto label = [&](std::size_t i) {
      return "declarations[" + std::to_string(i) + "] (\"" + declarations[i].name + "\")";
    };
    std::string message = "declare: " + std::to_string(repeats.size()) +
                          " declaration(s) can never be hit, since an earlier one has the same "
                          "key and the first declared wins:";
    for (const auto& r : repeats) {
      message += ' ' + label(r.repeat) + " has the key of " + label(r.first) + " (" +
                 make_key(declarations[r.first]).to_string() + ");";
    }
    message += " remove them, or make their keys differ";
    log::warn(message);
  }

  std::vector<routing::RouteDecision> route_all(std::span<const Declaration> declarations) const {
    const routing::RoutingContext context{boot_->size(),
                                          boot_->num_nodes(),
                                          p2p_enabled_,
                                          cutoffs_,
                                          backend_,
                                          nodes_.ranks_per_node,
                                          p2p_enabled_ ? windows_ : routing::ProtocolWindows{}};
    return routing::route_declarations(declarations, context);
  }

  // The piece size of a two-shot plan run in pieces (two_shot_pieces.hpp),
  // else 0. From the agreed cutoffs and declaration: the same on every rank.
  std::size_t piece_bytes(const Declaration& declared, const routing::RouteDecision& d) const {
    if (d.route != Route::two_shot) return 0;
    return routing::two_shot_piece_bytes(cutoffs_, d.message_bytes,
                                         declared.layout.is_contiguous());
  }

  // The P2P transport's launch for every plan the router admitted (null
  // for the fallback's), after reserve(). Local; a failure throws.
  std::vector<communicator::PlanLaunches> prepare_launches(
      std::span<const Declaration> declarations,
      std::span<const routing::RouteDecision> decisions) {
    std::vector<communicator::PlanLaunches> launches(decisions.size());
    for (std::size_t i = 0; i < decisions.size(); ++i) {
      const auto& d = decisions[i];
      if (!is_p2p(d.route)) continue;
      const Declaration& declared = declarations[i];
      const transport::LaunchRequest request{declared.operation, d.route,          d.protocol,
                                             declared.dtype,     &declared.layout, d.message_bytes};
      if (const std::size_t piece = piece_bytes(declared, d); piece != 0) {
        launches[i] = communicator::prepare_in_pieces(*peer_, request, piece);
      } else {
        launches[i].launch = peer_->prepare(request);
      }
    }
    return launches;
  }

  void disable_p2p(const std::string& why) {
    p2p_enabled_ = false;
    p2p_disabled_reason_ = why;
    peer_.reset();  // local release; every rank takes this branch together
    log::warn("P2P disabled on every rank, all calls go to the fallback: " + why);
  }

  static CallResult decide(const PreparedPlan* plan) noexcept {
    if (plan == nullptr) return {Route::fallback, FallbackReason::undeclared};
    return {plan->route, plan->reason, false, plan->protocol};
  }

  void ensure_open(const char* what) const {
    if (closed_) {
      throw InvalidUsage(
          std::string(what) +
          ": the communicator is closed; create a new one with Communicator::create");
    }
    if (!broken_reason_.empty()) {
      throw InvalidUsage(std::string(what) + ": the communicator is unusable since " +
                         broken_reason_ + "; close() it and create a new one");
    }
  }

  // Config::check_calls: the ranks compare this call before anything runs
  // (same_call_check.hpp); a timeout there breaks the communicator.
  void compare_calls_if_asked(const char* what, const PlanKey& key) {
    if (!config_.check_calls) return;
    breaking_on_timeout(what, [&] { communicator::require_same_call(*boot_, key); });
  }

  // Runs a step that exchanges with every rank outside the P2P transport;
  // a Timeout there leaves the ranks out of step for good.
  template <class Step>
  void breaking_on_timeout(const char* what, Step&& step) {
    try {
      step();
    } catch (const Timeout& e) {
      broken_reason_ = std::string(what) + " timed out (" + e.what() + ")";
      throw;
    }
  }

  // A hierarchical call: a Timeout, or a Mismatch (ranks that made different
  // calls), leaves the exchange between nodes out of step for good, on every
  // rank alike, so that close() skips its barrier everywhere.
  template <class Step>
  void breaking_on_failure(const char* what, Step&& step) {
    try {
      breaking_on_timeout(what, std::forward<Step>(step));
    } catch (const Mismatch& e) {
      broken_reason_ = std::string(what) + " met different calls on the ranks (" + e.what() + ")";
      throw;
    }
  }

  // A fused call (eps given) also shows its weight address and eps: it
  // misses its plan when either differs from the declaration's, and the
  // INFO route table prints the declared ones in the same form.
  void trace_call(const char* what, DataType dtype, const TensorLayout& layout,
                  const plan::IndexEntry* entry, const CallResult& result,
                  const void* weight = nullptr, std::optional<float> eps = std::nullopt) const {
    if (!log::enabled(LogLevel::trace, log::Subsystem::call)) return;
    std::ostringstream out;
    out << what << ' ' << to_string(dtype) << ' ' << layout.to_string();
    if (eps) out << ' ' << plan::norm_text(make_fused_key(dtype, layout, weight, *eps));
    out << " -> " << to_string(result.route);
    if (is_p2p(result.route)) out << " protocol " << to_string(result.protocol);
    if (entry) out << " (plan '" << entry->declaration->name << "')";
    if (!is_p2p(result.route)) out << " reason " << to_string(result.reason);
    log::trace(log::Subsystem::call, out.str());
  }

  Config config_;
  core::nvtx::Domain nvtx_;  // null unless ranges are on and a profiler records
  std::unique_ptr<bootstrap::Bootstrap> boot_;
  bool uses_mpi_ = true;  // false: over a caller's bootstrap, no fallback of its own
  Backend backend_ = Backend::host;
  int cuda_device_ = -1;
  Fallback fallback_kind_ = Fallback::mpi;
  std::unique_ptr<transport::PeerTransport> peer_;
  std::unique_ptr<transport::FallbackTransport> fallback_;
  bool p2p_enabled_ = false;
  std::string p2p_disabled_reason_;
  communicator::NodeLayout nodes_;
  std::string fingerprint_;
  RouteCutoffs cutoffs_;  // resolved at create: config > tuning file > defaults
  // The P2P transport's protocol windows, moved by the tuning file's entry
  // where the config leaves them automatic (routing/protocol_tuning.hpp).
  routing::ProtocolWindows windows_;
  // Read by the probes and accessors that a monitoring thread may call.
  std::atomic<bool> closed_ = false;
  mutable std::mutex stats_mutex_;  // plans_, the index's set and closed_stats_, for stats()
  Stats closed_stats_;              // what stats() returns after close()
  // The call in progress on this communicator (call_guard.hpp).
  std::atomic<const char*> call_in_progress_{nullptr};
  // Set when a collective step (bootstrap exchange or fallback reduction)
  // timed out: the ranks' sequences of collectives no longer line up, so the
  // communicator cannot be used again. (A timed-out P2P call is different:
  // the next declare() resynchronises the P2P transport on every rank.)
  std::string broken_reason_;

  plan::PlanIndex index_;
  std::vector<PreparedPlan*> plans_;               // declaration order; owned by index_
  communicator::FusedWeightMisses weight_misses_;  // rebuilt with index_
  communicator::CallCounters counters_;
};

}  // namespace

namespace {

// The steps of create before the bootstrap: the environment, the log level
// and the checks of the process's settings.
struct PreparedConfig {
  Config config;
  std::vector<std::string> applied;
  std::optional<std::string> environment_error;
};

PreparedConfig prepare_config(Config config) {
  std::vector<std::string> applied;
  // A bad PEERPLAN_* value is not thrown here, on this rank alone (the
  // others would wait for it until the timeout): it travels in this rank's
  // card, and every rank raises it after the exchange. Meanwhile this rank
  // goes on with the Config it was given.
  std::optional<std::string> environment_error;
  try {
    config = apply_environment(config, &applied);
  } catch (const InvalidArgument& e) {
    environment_error = e.what();
  }
  log::set_level(config.log_level);
  // A bad subsystem list is raised by every rank after the card exchange
  // (core::validate_config); until then the previous filter stays.
  if (const auto subsystems = log::parse_subsystems(config.log_subsystems))
    log::set_subsystems(*subsystems);
  log::set_file(config.log_file);
  core::warn_unknown_variables_once();
  fault::check_configuration();
  return {std::move(config), std::move(applied), std::move(environment_error)};
}

}  // namespace

std::unique_ptr<Communicator> Communicator::create(MPI_Comm comm, Config config) {
  auto prepared = prepare_config(std::move(config));
  const NvtxRange range(core::nvtx::domain(prepared.config.nvtx), Colour::lifecycle, "create");
  auto boot = bootstrap::make_mpi_bootstrap(comm, prepared.config.timeout);
  log::set_rank(boot->rank());
  PEERPLAN_FAULT_POINT("create.after_bootstrap", boot->rank());
  // The communicators create needs besides the bootstrap's are duplicated
  // from the bootstrap's own (mpi_bootstrap.hpp says why).
  const MPI_Comm private_comm = bootstrap::private_communicator(*boot);
  return std::make_unique<CommunicatorImpl>(private_comm, std::move(prepared.config),
                                            std::move(boot), prepared.applied,
                                            prepared.environment_error);
}

void communicator::declare_failed_locally(Communicator& comm, const std::string& error) {
  if (auto* impl = dynamic_cast<CommunicatorImpl*>(&comm)) impl->declare_failed(error);
  throw InvalidArgument("declare: " + error);  // not this library's communicator: alone
}

std::unique_ptr<Communicator> communicator::create_over_bootstrap(
    std::unique_ptr<bootstrap::Bootstrap> boot, Config config) {
  if (!boot) throw InvalidArgument("create_over_bootstrap: the bootstrap is null");
  auto prepared = prepare_config(std::move(config));
  const NvtxRange range(core::nvtx::domain(prepared.config.nvtx), Colour::lifecycle, "create");
  log::set_rank(boot->rank());
  // MPI_COMM_NULL: no MPI anywhere on this path (the fallback is the
  // caller's, the exchanges are the bootstrap's).
  return std::make_unique<CommunicatorImpl>(MPI_COMM_NULL, std::move(prepared.config),
                                            std::move(boot), prepared.applied,
                                            prepared.environment_error);
}

}  // namespace peerplan
