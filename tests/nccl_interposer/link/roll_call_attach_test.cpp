// SPDX-License-Identifier: Apache-2.0
// The roll call of attach_peerplan, linked in with the fake NCCL and a
// stand-in bootstrap of several ranks (no GPU): every rank answers it,
// declared or not, and peerplan's create is entered only when every rank
// declared something.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nccl_interposer/comm_table.hpp"
#include "nccl_interposer/roll_call.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

// What the stand-in bootstrap saw; outlives it.
struct Exchanges {
  std::vector<std::vector<std::byte>> allgathers;  // this rank's blobs, in order
  bool agreed = false;                             // the final agreement was reached
};

// Rank 0 of `others.size() + 1` ranks; the other ranks answer the roll call
// with `others`. After the roll call every exchange fails, as a peer that
// left would make it (what create makes of it is not the point here).
class StandInBootstrap final : public bootstrap::Bootstrap {
 public:
  StandInBootstrap(std::shared_ptr<Exchanges> seen, std::vector<RollCallAnswer> others)
      : seen_(std::move(seen)), others_(std::move(others)) {}
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return static_cast<int>(others_.size()) + 1; }
  int local_rank() const noexcept override { return 0; }
  int local_size() const noexcept override { return size(); }
  int node_id() const noexcept override { return 0; }
  int num_nodes() const noexcept override { return 1; }
  std::vector<bootstrap::Blob> allgather(std::span<const std::byte> mine) override {
    seen_->allgathers.emplace_back(mine.begin(), mine.end());
    if (seen_->allgathers.size() > 1)
      throw InvalidUsage("stand-in: an exchange after the roll call");
    std::vector<bootstrap::Blob> all{bootstrap::Blob(mine.begin(), mine.end())};
    for (const RollCallAnswer answer : others_) {
      all.push_back({static_cast<std::byte>(answer)});
    }
    return all;
  }
  std::vector<bootstrap::Blob> local_allgather(std::span<const std::byte> mine) override {
    return allgather(mine);
  }
  bootstrap::Blob broadcast(std::span<const std::byte> blob, int) override {
    return allgather(blob).front();
  }
  void barrier() override { allgather({}); }
  bool agree(bool) override {
    seen_->agreed = true;
    return false;
  }

 private:
  std::shared_ptr<Exchanges> seen_;
  std::vector<RollCallAnswer> others_;
};

class InterposerRollCall : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("PEERPLAN_NCCL_LIBRARY", PEERPLAN_FAKE_NCCL, 0);
    unsetenv("PEERPLAN_PLAN_FILE");
  }
  void TearDown() override {
    set_bootstrap_maker({});
    take_comm(comm());
    unsetenv("PEERPLAN_NCCL_DECLARE");
  }
  static ncclComm_t comm() { return reinterpret_cast<ncclComm_t>(&handle_); }

  // attach_peerplan with this rank's environment declaring `declare` (unset
  // when null) and the other ranks answering `others`.
  std::shared_ptr<CommState> attach(const char* declare, std::vector<RollCallAnswer> others) {
    if (declare != nullptr) {
      setenv("PEERPLAN_NCCL_DECLARE", declare, 1);
    } else {
      unsetenv("PEERPLAN_NCCL_DECLARE");
    }
    set_bootstrap_maker(
        [this, others](ncclComm_t, const bootstrap::NcclFunctions&, std::chrono::milliseconds) {
          return std::make_unique<StandInBootstrap>(seen_, others);
        });
    attach_peerplan(comm());
    return find_comm(comm());
  }
  // The one byte this rank answered the roll call with.
  std::byte answered() const {
    if (seen_->allgathers.empty() || seen_->allgathers.front().size() != 1) {
      ADD_FAILURE() << "no one-byte roll call";
      return std::byte{0xff};
    }
    return seen_->allgathers.front().front();
  }

  std::shared_ptr<Exchanges> seen_ = std::make_shared<Exchanges>();
  static inline int handle_ = 0;
};

TEST_F(InterposerRollCall, ARankWithNothingDeclaredAnswersAndNamesItselfWhenAPeerDeclared) {
  const auto state = attach(nullptr, {RollCallAnswer::declared});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(answered(), static_cast<std::byte>(RollCallAnswer::nothing_declared));
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("rank 0 of 2 declared nothing"), std::string::npos) << state->reason;
  EXPECT_EQ(seen_->allgathers.size(), 1u) << "create was entered";
  EXPECT_FALSE(seen_->agreed);
}

TEST_F(InterposerRollCall, ARankThatDeclaredGivesUpWithoutCreateWhenAPeerDeclaredNothing) {
  const auto state = attach("f32:1K", {RollCallAnswer::declared, RollCallAnswer::nothing_declared});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(answered(), static_cast<std::byte>(RollCallAnswer::declared));
  EXPECT_EQ(state->communicator(), nullptr);
  EXPECT_NE(state->reason.find("rank 2 of 3 declared nothing"), std::string::npos) << state->reason;
  EXPECT_EQ(seen_->allgathers.size(), 1u) << "create was entered";
  EXPECT_EQ(state->async_error.load(), 0);
}

TEST_F(InterposerRollCall, NothingDeclaredAnywhereIsNoWarning) {
  const auto state = attach(nullptr, {RollCallAnswer::nothing_declared});
  ASSERT_NE(state, nullptr);
  EXPECT_NE(state->reason.find("nothing is declared"), std::string::npos) << state->reason;
  EXPECT_EQ(state->reason.find("rank"), std::string::npos) << state->reason;
}

TEST_F(InterposerRollCall, DeclarationsThatDoNotParseAreAnsweredSo) {
  const auto state = attach("f32:not-a-size", {RollCallAnswer::declared});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(answered(), static_cast<std::byte>(RollCallAnswer::unparsable));
  EXPECT_NE(state->reason.find("rank 0 could not read their declarations"), std::string::npos)
      << state->reason;
  EXPECT_NE(state->reason.find("not-a-size"), std::string::npos) << state->reason;
}

TEST_F(InterposerRollCall, EveryRankDeclaredGoesOnToCreateAndTheFinalAgreement) {
  const auto state = attach("f32:1K", {RollCallAnswer::declared});
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(answered(), static_cast<std::byte>(RollCallAnswer::declared));
  // The stand-in fails create (no GPU, or its exchanges after the roll
  // call): what matters is that it was entered, then agreed on.
  EXPECT_TRUE(seen_->agreed);
  EXPECT_NE(state->reason.find("peerplan's create failed"), std::string::npos) << state->reason;
  EXPECT_EQ(state->communicator(), nullptr);
}

}  // namespace
}  // namespace peerplan::nccl_interposer
