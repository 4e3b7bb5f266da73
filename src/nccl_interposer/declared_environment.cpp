// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/declared_environment.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "nccl_interposer/size_ranges.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

[[noreturn]] void unreadable(const std::string& path, const std::string& why) {
  throw InvalidArgument(std::string(kPlanFileVariable) + "=" + path +
                        ": the file cannot be read (" + why +
                        "); set it to the path of a plan file every rank can read, or unset it");
}

std::string read_plan_file(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) unreadable(path, "it is a folder");
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) unreadable(path, std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) unreadable(path, "a read failed");
  return text;
}

}  // namespace

std::vector<DeclaredBuffer> declared_from(const EnvironmentLookup& lookup) {
  std::vector<DeclaredBuffer> buffers;
  const char* spec = lookup(std::string(kDeclareVariable).c_str());
  if (spec != nullptr && *spec != '\0') buffers = parse_declare_spec(spec);
  const char* path = lookup(std::string(kPlanFileVariable).c_str());
  if (path != nullptr && *path != '\0') {
    const std::vector<DeclaredBuffer> planned = parse_plan_file(read_plan_file(path), path);
    buffers.insert(buffers.end(), planned.begin(), planned.end());
  }
  sort_and_dedup(buffers);
  return buffers;
}

std::vector<DeclaredBuffer> declared_from_environment() {
  return declared_from([](const char* name) { return std::getenv(name); });
}

}  // namespace peerplan::nccl_interposer
