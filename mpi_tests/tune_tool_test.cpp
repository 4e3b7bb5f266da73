// SPDX-License-Identifier: Apache-2.0
// After peerplan_tune ran (ctest fixture peerplan_tune.np2, host backend):
// its file kept the other machine's entry, holds an entry for this
// communicator's fingerprint, and a communicator created with
// PEERPLAN_TUNING_FILE pointing at it resolves exactly those cutoffs and
// routes the measured sizes by them; on the host backend the entry sets no
// protocol window and no one-shot grid.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/plan_key.hpp"
#include "routing/cutoffs.hpp"
#include "routing/tuning_file.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

std::string tuned_file() {
  const char* path = std::getenv("PEERPLAN_TUNE_TEST_FILE");
  return path == nullptr ? std::string() : std::string(path);
}

// The documented rule (router.hpp), written out independently.
Route expected_route(const RouteCutoffs& c, std::size_t bytes) {
  if (c.one_shot_max_bytes != 0 && bytes <= c.one_shot_max_bytes) return Route::one_shot;
  if (c.two_shot_max_bytes != 0 && bytes <= c.two_shot_max_bytes && bytes >= c.two_shot_min_bytes)
    return Route::two_shot;
  return Route::fallback;
}

TEST(TuneTool, CommunicatorLoadsTheWrittenEntry) {
  const std::string path = tuned_file();
  ASSERT_FALSE(path.empty()) << "set PEERPLAN_TUNE_TEST_FILE (ctest does, after peerplan_tune.np2)";
  const routing::TuningFile file = routing::read_tuning_file(path);

  const auto* other = routing::find_entry(file, "cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18");
  ASSERT_NE(other, nullptr) << "peerplan_tune dropped the other machine's entry";
  EXPECT_EQ(other->cutoffs, (RouteCutoffs{65536, 16777216, 3670016, 1048576}));

  const ScopedEnv tuning("PEERPLAN_TUNING_FILE", path.c_str());
  auto comm = create_on_world();
  const auto* entry = routing::find_entry(file, comm->topology_fingerprint());
  ASSERT_NE(entry, nullptr) << "no entry for '" << comm->topology_fingerprint() << "' in " << path;
  EXPECT_EQ(entry->measured.rfind("peerplan_tune ", 0), 0u) << entry->measured;
  // The tool derives every field but the two-shot's piece size (not
  // measured: the default stays), so the file decides each of those.
  EXPECT_EQ(entry->cutoffs.two_shot_chunk_bytes, kAutoCutoff);
  EXPECT_EQ(comm->cutoffs(),
            routing::fill_automatic(entry->cutoffs,
                                    routing::default_cutoffs(comm->size(), comm->backend())));
  // The host backend has one protocol: the tool times none, and the entry
  // leaves every protocol window auto (no protocol key in the file).
  if (comm->backend() == Backend::host) {
    EXPECT_TRUE(routing::is_empty(entry->protocols))
        << routing::describe_protocol_tuning(entry->protocols);
    // Nor does it launch kernels: no one-shot grid sweep, no grid steps.
    EXPECT_TRUE(entry->shapes.one_shot_grid.empty())
        << routing::describe_one_shot_grid(entry->shapes.one_shot_grid);
  }

  std::vector<Declaration> declarations;
  for (std::size_t bytes = 1024; bytes <= 64 * 1024; bytes *= 2) {
    declarations.push_back(
        Declaration::all_reduce("ar" + std::to_string(bytes), DataType::bf16,
                                TensorLayout{static_cast<std::int64_t>(bytes / 2)}));
  }
  comm->declare(declarations);
  for (std::size_t bytes = 1024; bytes <= 64 * 1024; bytes *= 2) {
    const PlanKey key =
        make_all_reduce_key(DataType::bf16, TensorLayout{static_cast<std::int64_t>(bytes / 2)});
    EXPECT_EQ(comm->plan_for(key).route, expected_route(entry->cutoffs, bytes))
        << bytes << " bytes";
  }
  comm->close();
}

}  // namespace
}  // namespace peerplan::comm_test
