// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/comm_table.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "bootstrap/nccl_bootstrap.hpp"
#include "communicator/create_over_bootstrap.hpp"
#include "core/log.hpp"
#include "nccl_interposer/real_nccl.hpp"
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

std::string plan_name(const DeclaredBuffer& buffer) {
  return std::string("nccl_") + to_string(buffer.dtype) + "_" + std::to_string(buffer.count);
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

// Create, declare, and find the sizes on a P2P route. Throws on failure.
void create_and_declare(ncclComm_t comm, CommState& state,
                        const std::vector<DeclaredBuffer>& declared) {
  const RealNccl& real = real_nccl();
  if (!real.error.empty()) throw InvalidUsage(real.error);
  Config config;
  config.backend = Backend::cuda;
  int device = 0;
  if (real.comm_cu_device(comm, &device) == ncclSuccess) config.device = device;
  auto boot =
      bootstrap::make_nccl_bootstrap(comm, bootstrap_functions(real), environment_timeout(config));
  auto created = communicator::create_over_bootstrap(std::move(boot), config);
  if (!created->p2p_enabled()) {
    state.reason = "peer to peer is disabled (" + created->p2p_disabled_reason() + ")";
    created->close();  // every rank agreed on it: collective here alike
    return;
  }
  std::vector<Declaration> declarations;
  declarations.reserve(declared.size());
  for (const DeclaredBuffer& buffer : declared) {
    declarations.push_back(Declaration::all_reduce(
        plan_name(buffer), buffer.dtype, TensorLayout{static_cast<std::int64_t>(buffer.count)}));
  }
  created->declare(declarations);
  std::string to_nccl;
  // A subset in the order declared_from_environment sorted it in.
  for (const DeclaredBuffer& buffer : declared) {
    const PlanKey key =
        make_all_reduce_key(buffer.dtype, TensorLayout{static_cast<std::int64_t>(buffer.count)});
    const PlanInfo plan = created->plan_for(key);
    if (plan.route != Route::fallback) {
      state.p2p_declared.push_back(buffer);
    } else {
      to_nccl += " " + plan_name(buffer) + " (" + to_string(plan.route_reason) + ")";
    }
  }
  if (!to_nccl.empty() && state.rank == 0) {
    log::info("NCCL interposer: declared sizes peerplan routes to NCCL:" + to_nccl);
  }
  state.peerplan = std::move(created);
}

}  // namespace

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

void attach_peerplan(ncclComm_t comm, const std::string& why_not) {
  if (comm == nullptr) return;
  auto state = std::make_shared<CommState>();
  const RealNccl& real = real_nccl();
  if (real.comm_user_rank) real.comm_user_rank(comm, &state->rank);
  insert(comm, state);
  if (!why_not.empty()) {
    state->reason = why_not;
    log::info("NCCL interposer: every call goes to NCCL: " + why_not);
    return;
  }
  std::vector<DeclaredBuffer> declared;
  try {
    declared = declared_from_environment();
  } catch (const std::exception& e) {
    state->reason = std::string("the declared sizes do not parse: ") + e.what();
    log::warn("NCCL interposer: every call goes to NCCL: " + state->reason);
    return;
  }
  if (declared.empty()) {
    state->reason = "nothing is declared (PEERPLAN_NCCL_DECLARE and PEERPLAN_PLAN_FILE unset)";
    log::info("NCCL interposer: every call goes to NCCL: " + state->reason);
    return;
  }
  try {
    create_and_declare(comm, *state, declared);
  } catch (const std::exception& e) {
    state->peerplan.reset();  // a local release: the ranks may be out of step
    state->p2p_declared.clear();
    state->reason = std::string("peerplan's create failed: ") + e.what();
    log::warn("NCCL interposer: every call goes to NCCL: " + state->reason);
  }
}

void detach_peerplan(ncclComm_t comm, bool collective, bool forget) {
  auto state = forget ? take_comm(comm) : find_comm(comm);
  if (!state) return;
  if (state->peerplan) {
    try {
      if (collective && !state->broken) state->peerplan->close();
    } catch (const std::exception& e) {
      log::warn(std::string("NCCL interposer: closing peerplan's communicator failed: ") +
                e.what());
    }
    state->peerplan.reset();
  }
  // Every rank's: a rank's calls can go elsewhere than its peers' (a
  // misaligned buffer, a refused capture).
  log::info("NCCL interposer: rank " + std::to_string(state->rank) + " calls by size:\n" +
            state->summary());
}

}  // namespace peerplan::nccl_interposer
