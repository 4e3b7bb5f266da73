// SPDX-License-Identifier: Apache-2.0
#include "communicator/config_agreement.hpp"

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/fail_together.hpp"
#include "core/config_fields.hpp"
#include "core/config_validation.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::communicator {
namespace {

std::string join_lines(const std::vector<std::string>& values) {
  std::string text;
  for (const auto& value : values) text += value + '\n';
  return text;
}

std::vector<std::string> split_lines(const bootstrap::Blob& blob) {
  const std::string text(reinterpret_cast<const char*>(blob.data()), blob.size());
  std::vector<std::string> values;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    values.push_back(text.substr(start, end - start));
  return values;
}

// "is 1024 on rank 0 but auto on ranks 1, 3 and 65536 on rank 2"
std::string who_holds_what(const std::vector<std::vector<std::string>>& all, std::size_t i) {
  bootstrap::RanksByText others;
  for (int rank = 1; rank < static_cast<int>(all.size()); ++rank) {
    if (all[rank][i] != all[0][i]) bootstrap::add_rank(others, all[rank][i], rank);
  }
  std::string text = "is " + all[0][i] + " on rank 0 but ";
  for (std::size_t k = 0; k < others.size(); ++k) {
    if (k > 0) text += " and ";
    text += others[k].first + " on " + bootstrap::describe_ranks(others[k].second);
  }
  return text;
}

void check_agreement(bootstrap::Bootstrap& bootstrap, const Config& config) {
  std::vector<core::ConfigField> agreed;
  for (auto& field : core::config_fields(config))
    if (field.agreed) agreed.push_back(std::move(field));
  std::vector<std::string> mine;
  for (const auto& field : agreed) mine.push_back(field.value);
  const std::string text = join_lines(mine);
  const auto blobs = bootstrap.allgather(std::as_bytes(std::span(text.data(), text.size())));
  std::vector<std::vector<std::string>> all;
  for (const auto& blob : blobs) {
    all.push_back(split_lines(blob));
    if (all.back().size() != agreed.size()) {
      throw Mismatch("create: a rank sent " + std::to_string(all.back().size()) +
                     " config fields where this rank has " + std::to_string(agreed.size()) +
                     "; run the same peerplan build on every rank");
    }
  }
  std::string differing;
  for (std::size_t i = 0; i < agreed.size(); ++i) {
    bool same = true;
    for (const auto& values : all) same = same && values[i] == all[0][i];
    if (same) continue;
    if (!differing.empty()) differing += "; ";
    differing += agreed[i].name + " (" + agreed[i].variable + ") " + who_holds_what(all, i);
  }
  if (differing.empty()) return;
  throw Mismatch("create: ranks were given different configurations: " + differing +
                 ". Routing and the kernels' protocols must be identical on every rank: set "
                 "the same value on every rank (the same Config fields and PEERPLAN_* "
                 "variables everywhere)");
}

}  // namespace

void check_config(bootstrap::Bootstrap& bootstrap, const Config& config) {
  if (auto failures = bootstrap::run_together(bootstrap, [&] { core::validate_config(config); })) {
    throw InvalidArgument("create: " + failures->message);
  }
  check_agreement(bootstrap, config);
}

}  // namespace peerplan::communicator
