// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/comm_table.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "bootstrap/nccl_bootstrap.hpp"
#include "communicator/create_over_bootstrap.hpp"
#include "core/log.hpp"
#include "nccl_interposer/real_nccl.hpp"
#include "nccl_interposer/roll_call.hpp"
#include "peerplan/config.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

std::mutex table_mutex;
std::unordered_map<ncclComm_t, std::shared_ptr<CommState>>& table() {
  // Never destroyed: an application may destroy communicators from static
  // destructors, after this file's statics would be gone.
  static auto* entries = new std::unordered_map<ncclComm_t, std::shared_ptr<CommState>>;
  return *entries;
}

void insert(ncclComm_t comm, std::shared_ptr<CommState> state) {
  const std::lock_guard lock(table_mutex);
  table()[comm] = std::move(state);
}

// The environment's timeout, for the bootstrap made before create applies
// the environment; a value that does not parse is create's to report.
std::chrono::milliseconds environment_timeout(const Config& config) {
  try {
    return apply_environment(config).timeout;
  } catch (const std::exception&) {
    return config.timeout;
  }
}

// The communicator's bootstrap, shared with the interposer, which needs
// one more exchange after create and declare. An exchange that throws
// marks the state out of step: NCCL may still hold its all-gather.
class SharedBootstrap final : public bootstrap::Bootstrap {
 public:
  SharedBootstrap(std::shared_ptr<bootstrap::Bootstrap> boot, std::weak_ptr<CommState> state)
      : boot_(std::move(boot)), state_(std::move(state)) {}
  int rank() const noexcept override { return boot_->rank(); }
  int size() const noexcept override { return boot_->size(); }
  int local_rank() const noexcept override { return boot_->local_rank(); }
  int local_size() const noexcept override { return boot_->local_size(); }
  int node_id() const noexcept override { return boot_->node_id(); }
  int num_nodes() const noexcept override { return boot_->num_nodes(); }
  std::vector<bootstrap::Blob> allgather(std::span<const std::byte> mine) override {
    return noted([&] { return boot_->allgather(mine); });
  }
  std::vector<bootstrap::Blob> local_allgather(std::span<const std::byte> mine) override {
    return noted([&] { return boot_->local_allgather(mine); });
  }
  bootstrap::Blob broadcast(std::span<const std::byte> blob, int root) override {
    return noted([&] { return boot_->broadcast(blob, root); });
  }
  void barrier() override {
    noted([&] { boot_->barrier(); });
  }
  bool agree(bool ok) override {
    return noted([&] { return boot_->agree(ok); });
  }

 private:
  // Even where the caller catches it (close() only warns of a timeout).
  template <typename Exchange>
  auto noted(Exchange exchange) -> decltype(exchange()) {
    try {
      return exchange();
    } catch (...) {
      if (const auto state = state_.lock()) state->out_of_step = true;
      throw;
    }
  }

  std::shared_ptr<bootstrap::Bootstrap> boot_;
  std::weak_ptr<CommState> state_;  // not owned: the state owns the communicator
};

// Set on the calling thread when a bootstrap made by attach_peerplan asks
// NCCL for an all-gather. The bootstrap over NCCL makes its first exchange
// (the node keys) as it is made, before there is a SharedBootstrap to note
// a failure: this tells such a failure from one before any exchange.
thread_local bool t_all_gathered = false;

ncclResult_t noted_all_gather(const void* send, void* recv, size_t count, ncclDataType_t type,
                              ncclComm_t comm, cudaStream_t stream) {
  t_all_gathered = true;
  return real_nccl().all_gather(send, recv, count, type, comm, stream);
}

Config interposer_config(ncclComm_t comm) {
  Config config;
  config.backend = Backend::cuda;
  int device = 0;
  if (real_nccl().comm_cu_device(comm, &device) == ncclSuccess) config.device = device;
  return config;
}

BootstrapMaker& bootstrap_maker() {
  static auto* maker = new BootstrapMaker;  // never destroyed, as the table
  return *maker;
}

CommunicatorMaker& communicator_maker() {
  static auto* maker = new CommunicatorMaker;  // never destroyed, as the table
  return *maker;
}

std::unique_ptr<bootstrap::Bootstrap> make_bootstrap(ncclComm_t comm,
                                                     const bootstrap::NcclFunctions& functions,
                                                     std::chrono::milliseconds timeout) {
  BootstrapMaker maker;
  {
    const std::lock_guard lock(table_mutex);
    maker = bootstrap_maker();
  }
  if (maker) return maker(comm, functions, timeout);
  return bootstrap::make_nccl_bootstrap(comm, functions, timeout);
}

std::unique_ptr<Communicator> make_communicator(std::unique_ptr<bootstrap::Bootstrap> boot,
                                                const Config& config) {
  CommunicatorMaker maker;
  {
    const std::lock_guard lock(table_mutex);
    maker = communicator_maker();
  }
  if (maker) return maker(std::move(boot), config);
  return communicator::create_over_bootstrap(std::move(boot), config);
}

// Create over `boot`, declare what peerplan can declare of the sizes, and
// find those on a P2P route. Returns why peerplan cannot serve (P2P disabled
// on every rank), or empty; throws on failure.
std::string create_and_declare(const SharedBootstrap& boot, const Config& config, CommState& state,
                               const DeclarationSet& set) {
  auto created = make_communicator(std::make_unique<SharedBootstrap>(boot), config);
  if (!created->p2p_enabled()) {
    // Every rank agreed on it: the close is collective here alike.
    created->close();
    return "peer to peer is disabled (" + created->p2p_disabled_reason() + ")";
  }
  created->declare(set.declarations);
  learn_routes(*created, set.declared, state);
  state.not_declarable.clear();
  for (const NotDeclarable& size : set.not_declarable) state.not_declarable.push_back(size.buffer);
  if (!state.routed_to_fallback.empty() && state.rank == 0) {
    log::info(log::Subsystem::init, "NCCL interposer: declared sizes peerplan routes to NCCL:" +
                                        state.routed_to_fallback);
  }
  state.set_communicator(std::move(created));
  return {};
}

// Every rank's answer to the roll call, in rank order (a blob that is not
// one byte reads as an unknown answer).
std::vector<std::uint8_t> roll_call(bootstrap::Bootstrap& boot, RollCallAnswer mine) {
  const std::byte byte{static_cast<std::uint8_t>(mine)};
  const std::vector<bootstrap::Blob> all = boot.allgather({&byte, 1});
  std::vector<std::uint8_t> answers;
  answers.reserve(all.size());
  for (const bootstrap::Blob& blob : all) {
    answers.push_back(blob.size() == 1 ? static_cast<std::uint8_t>(blob[0]) : 0xff);
  }
  return answers;
}

}  // namespace

void set_bootstrap_maker(BootstrapMaker maker) {
  const std::lock_guard lock(table_mutex);
  bootstrap_maker() = std::move(maker);
}

void set_communicator_maker(CommunicatorMaker maker) {
  const std::lock_guard lock(table_mutex);
  communicator_maker() = std::move(maker);
}

std::shared_ptr<CommState> find_comm(ncclComm_t comm) {
  const std::lock_guard lock(table_mutex);
  const auto found = table().find(comm);
  return found == table().end() ? nullptr : found->second;
}

std::shared_ptr<CommState> take_comm(ncclComm_t comm) {
  const std::lock_guard lock(table_mutex);
  const auto found = table().find(comm);
  if (found == table().end()) return nullptr;
  auto state = std::move(found->second);
  table().erase(found);
  return state;
}

// PEERPLAN_DEBUG for the interposer's own messages, before (or without)
// a create, which sets it too.
void apply_log_level() {
  try {
    log::set_level(apply_environment(Config{}).log_level);
  } catch (const std::exception&) {
    // create reports the bad value
  }
}

void attach_peerplan(ncclComm_t comm, const std::string& why_not, bool non_blocking) {
  if (comm == nullptr) return;
  apply_log_level();
  auto state = std::make_shared<CommState>();
  state->non_blocking = non_blocking;
  const RealNccl& real = real_nccl();
  // Not of a non-blocking communicator: one still initialising makes NCCL
  // warn (its summary then says rank 0).
  if (!non_blocking && real.comm_user_rank) real.comm_user_rank(comm, &state->rank);
  insert(comm, state);
  if (!why_not.empty()) {
    state->reason = why_not;
    log::info(log::Subsystem::init, "NCCL interposer: every call goes to NCCL: " + why_not);
    return;
  }
  // Read here, told to the others in the roll call below: every rank takes
  // part in the same exchanges, whatever it declares.
  DeclarationSet declared;
  RollCallAnswer answer = RollCallAnswer::declared;
  std::string why_here;
  try {
    // Sizes peerplan's declare would refuse are left out (to NCCL), so that
    // one of them does not send every size to NCCL. Every rank leaves out
    // the same sizes of the same spec: the rule reads only type and count.
    const std::vector<DeclaredBuffer> parsed = declared_from_environment();
    declared = make_declarations(parsed);
    if (declared.declared.empty()) answer = RollCallAnswer::nothing_declared;
    if (!parsed.empty() && declared.declared.empty()) {
      why_here = "no declared size is one peerplan can declare";
    }
    if (state->rank == 0) {
      // A WARN for sizes the user wrote on their own, an INFO for those a
      // range swept in (nccl-tests' usual -b 8 starts under 16 bytes).
      const std::string named = not_declarable_message(declared.not_declarable, true);
      if (!named.empty()) log::warn(named);
      const std::string swept = not_declarable_message(declared.not_declarable, false);
      if (!swept.empty()) log::info(log::Subsystem::init, swept);
    }
  } catch (const std::exception& e) {
    answer = RollCallAnswer::unparsable;
    why_here = std::string("the declared sizes do not parse: ") + e.what();
    log::warn("NCCL interposer: " + why_here);
  }
  bootstrap::NcclFunctions functions = bootstrap_functions(real);
  if (!functions.all_gather || !functions.get_async_error || !functions.user_rank ||
      !functions.count || !functions.cu_device || !functions.error_string) {
    // The same NCCL library everywhere: no rank can take the roll call.
    state->reason = real.error;
    log::warn("NCCL interposer: every call goes to NCCL: " + state->reason);
    return;
  }
  functions.all_gather = noted_all_gather;
  std::optional<SharedBootstrap> boot;
  std::string failure;
  // A timed-out exchange leaves an allgather in NCCL's queue of this
  // communicator that some rank never matched: its next operation may pair
  // with another rank's different one. A failed one alike (NCCL or CUDA
  // refused this rank's part, or NCCL reported an error while it ran): the
  // other ranks may hold an all-gather this rank never matched.
  bool timed_out = false;
  try {
    const Config config = interposer_config(comm);
    t_all_gathered = false;
    boot.emplace(make_bootstrap(comm, functions, environment_timeout(config)), state);
    const RollCallVerdict verdict = judge_roll_call(roll_call(*boot, answer));
    if (!verdict.create) {
      // Every rank reached the same verdict from the same answers: none
      // goes on to create, so none waits for another.
      state->reason = verdict.reason;
      if (!why_here.empty()) state->reason += " (here, " + why_here + ")";
      const std::string line = "NCCL interposer: every call goes to NCCL: " + state->reason;
      if (verdict.warn) {
        log::warn(line);
      } else {
        log::info(log::Subsystem::init, line);
      }
      return;
    }
    failure = create_and_declare(*boot, config, *state, declared);
  } catch (const std::exception& e) {
    failure = std::string("peerplan's create failed: ") + e.what();
    timed_out = dynamic_cast<const Timeout*>(&e) != nullptr;
    // make_bootstrap failed in or after its first exchange. The exchanges
    // after it are SharedBootstrap's, which marks them itself.
    if (!boot && t_all_gathered) state->out_of_step = true;
  }
  // Every rank ends with peerplan or none does: a rank with and a rank
  // without would wait for each other in different libraries.
  bool everywhere = false;
  if (boot && !timed_out) {
    try {
      everywhere = boot->agree(failure.empty());
    } catch (const std::exception& e) {
      if (failure.empty()) failure = std::string("the final agreement failed: ") + e.what();
      timed_out = dynamic_cast<const Timeout*>(&e) != nullptr;
    }
  }
  if (everywhere) return;
  if (failure.empty()) failure = "peerplan's create failed on another rank (its WARN says why)";
  state->release_communicator();  // a local release: the ranks may be out of step
  state->p2p_declared.clear();
  state->p2p_layouts.clear();
  state->not_declarable.clear();
  state->reason = failure;
  // Marked already by a failed or timed-out exchange of the bootstrap; a
  // Timeout from elsewhere in create counts as out of step too.
  if (timed_out) state->out_of_step = true;
  if (state->out_of_step) {
    // So that the program (PyTorch's watchdog, say) aborts the communicator.
    state->async_error = static_cast<int>(ncclRemoteError);
    log::warn(
        "NCCL interposer: every call goes to NCCL, but an exchange over the NCCL "
        "communicator failed or timed out, which leaves NCCL's operations on it out of "
        "step between the ranks: ncclCommGetAsyncError reports ncclRemoteError; abort the "
        "communicator. " +
        state->reason);
    return;
  }
  // No exchange failed: the ranks are still in step, and NCCL's
  // communicator stays usable.
  log::warn("NCCL interposer: every call goes to NCCL: " + state->reason);
}

void learn_routes(const Communicator& peerplan, std::vector<DeclaredBuffer> declared,
                  CommState& state) {
  state.p2p_declared.clear();
  state.p2p_layouts.clear();
  state.routed_to_fallback.clear();
  // A subset in the order declared_from_environment sorted it in.
  for (const DeclaredBuffer& buffer : declared) {
    const TensorLayout layout{static_cast<std::int64_t>(buffer.count)};
    const PlanKey key = make_all_reduce_key(buffer.dtype, layout);
    const PlanInfo plan = peerplan.has_plan_for(key) ? peerplan.plan_for(key) : PlanInfo{};
    if (plan.route != Route::fallback) {
      state.p2p_declared.push_back(buffer);
      state.p2p_layouts.push_back(layout);
    } else {
      // Appended piece by piece: " " + ... makes GCC 12 warn falsely (-Wrestrict).
      state.routed_to_fallback += ' ';
      state.routed_to_fallback += plan_name(buffer);
      state.routed_to_fallback += " (";
      state.routed_to_fallback +=
          plan.route_reason == FallbackReason::none ? "not declared" : to_string(plan.route_reason);
      state.routed_to_fallback += ')';
    }
  }
  state.declared = std::move(declared);
}

void install_peerplan(ncclComm_t comm, std::unique_ptr<Communicator> peerplan,
                      std::vector<DeclaredBuffer> declared, int rank) {
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  learn_routes(*peerplan, std::move(declared), *state);
  state->set_communicator(std::move(peerplan));
  insert(comm, std::move(state));
}

std::shared_ptr<CommState> detach_peerplan(ncclComm_t comm, bool collective, bool forget) {
  auto state = forget ? take_comm(comm) : find_comm(comm);
  if (!state) return nullptr;
  if (const auto peerplan = state->release_communicator()) {
    try {
      if (collective && !state->broken) peerplan->close();
    } catch (const std::exception& e) {
      log::warn(std::string("NCCL interposer: closing peerplan's communicator failed: ") +
                e.what());
    }
  }
  // Once (finalize, then destroy). Every rank's: a rank's calls can go
  // elsewhere than its peers' (a misaligned buffer, a refused capture).
  if (!state->summarized.exchange(true)) {
    log::info(log::Subsystem::init, "NCCL interposer: rank " + std::to_string(state->rank) +
                                        " calls by size:\n" + state->summary());
  }
  return state;
}

}  // namespace peerplan::nccl_interposer
