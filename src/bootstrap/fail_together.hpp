// SPDX-License-Identifier: Apache-2.0
// Failing together: the one agreement every collective step of peerplan
// ends with.
//
// A step that every rank performs (create a segment, map the peers' IPC
// handles, validate a declared set, read a tuning file) can fail on some
// ranks only. If those ranks threw alone, the others would go on to the next
// collective and wait for them until the timeout: a rank that fails alone
// turns a clear error into a Timeout everywhere. So each rank runs the step,
// catches its own failure, and then all ranks exchange their verdicts in one
// collective; either every rank goes on, or every rank throws, with the same
// message naming every failing rank.
//
// A Timeout inside the step is different: it means a peer stopped
// answering, and it would not answer the verdict exchange either. It is
// rethrown at once, so that detection takes one timeout, not two.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {

// The failures of one collective step, identical on every rank.
struct Failures {
  std::vector<int> ranks;  // ranks (of the bootstrap) that failed, ascending
  // Each distinct message once, with the ranks that reported it, in order
  // of the first rank that reported each: "ranks 0-3: <message>" when
  // every rank of four failed alike, "ranks 0, 2: <message>; rank 1:
  // <other>" otherwise.
  std::string message;
};

// Collective over every rank of `bootstrap`. `local_error` is this rank's
// verdict (nullopt: it succeeded). Returns nullopt when every rank
// succeeded, else the same Failures on every rank. Throws Timeout when a
// rank does not take part.
std::optional<Failures> gather_failures(Bootstrap& bootstrap,
                                        const std::optional<std::string>& local_error);

// The same Failures from every rank's verdict (`by_rank[r]`: rank r's
// error, nullopt where it succeeded), with no exchange: for verdicts that
// arrived by other means (the rank cards of create).
std::optional<Failures> collect_failures(const std::vector<std::optional<std::string>>& by_rank);

// Runs `step` on this rank, then gathers every rank's verdict as above. A
// peerplan::Error thrown by `step` is this rank's failure; a Timeout is
// rethrown without the exchange; any other exception propagates (a bug, or
// std::bad_alloc). `step` must make the same collective calls on every
// rank whether or not it failed locally, or the ranks fall out of step.
template <class Step>
std::optional<Failures> run_together(Bootstrap& bootstrap, Step&& step) {
  std::optional<std::string> local_error;
  try {
    step();
  } catch (const Timeout&) {
    throw;
  } catch (const Error& e) {
    local_error = e.what();
  }
  return gather_failures(bootstrap, local_error);
}

// "rank 3" / "ranks 0, 2" / "ranks 0-3, 6": how messages name a set of
// ranks (ascending); runs of three or more consecutive ranks are ranges.
std::string describe_ranks(const std::vector<int>& ranks);

// Distinct texts (error messages, config values), each with the ranks that
// hold it, in order of the first rank holding each.
using RanksByText = std::vector<std::pair<std::string, std::vector<int>>>;
void add_rank(RanksByText& groups, std::string text, int rank);

}  // namespace peerplan::bootstrap
