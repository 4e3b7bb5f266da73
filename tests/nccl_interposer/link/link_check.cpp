// SPDX-License-Identifier: Apache-2.0
// link_check --passthrough <code>: see passthrough() below.
// link_check <libpeerplan_nccl.so> <exports.map>: opens the interposer with
// RTLD_NOW in a program linked with NCCL (every reference it has must
// resolve) and checks that each function exports.map lists is defined in
// the interposer itself, not found in libnccl behind it. Exit 0 when so.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

// Run with the interposer in LD_PRELOAD: calls that need no GPU reach the
// real NCCL through it. `expected` is what ncclAllReduce on a null
// communicator returns: ncclInvalidArgument from the real NCCL, or
// ncclInternalError when the interposer was told of no usable NCCL
// (PEERPLAN_NCCL_LIBRARY pointing nowhere), which proves it intercepted.
int passthrough(int expected) {
  const ncclResult_t start = ncclGroupStart();
  const ncclResult_t end = ncclGroupEnd();
  const ncclResult_t all_reduce =
      ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, nullptr, nullptr);
  const char* last = ncclGetLastError(nullptr);
  std::printf(
      "ncclGroupStart %d, ncclGroupEnd %d, ncclAllReduce(null comm) %d (expected %d), "
      "last error '%s'\n",
      start, end, all_reduce, expected, last ? last : "(null)");
  const ncclResult_t group_expected =
      expected == ncclInternalError ? ncclInternalError : ncclSuccess;
  return start == group_expected && end == group_expected && all_reduce == expected ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--passthrough") return passthrough(std::stoi(argv[2]));
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <libpeerplan_nccl.so> <exports.map>\n", argv[0]);
    return 2;
  }
  // This program uses NCCL as the programs the interposer is preloaded
  // into do; the reference keeps libnccl among its needed libraries.
  std::printf("linked with NCCL %d\n", NCCL_VERSION_CODE);
  volatile auto keep = &ncclGetVersion;
  (void)keep;

  std::vector<std::string> names;
  std::ifstream map(argv[2]);
  const std::regex global_name(R"(^\s+(nccl\w+);)");
  for (std::string line; std::getline(map, line);) {
    std::smatch match;
    if (std::regex_search(line, match, global_name)) names.push_back(match[1]);
  }
  if (names.empty()) {
    std::fprintf(stderr, "no function names in %s\n", argv[2]);
    return 1;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen(%s, RTLD_NOW) failed: %s\n", argv[1], dlerror());
    return 1;
  }
  int failures = 0;
  for (const std::string& name : names) {
    void* symbol = dlsym(library, name.c_str());
    Dl_info where{};
    if (symbol == nullptr || dladdr(symbol, &where) == 0 || where.dli_fname == nullptr) {
      std::fprintf(stderr, "%s: not found in %s\n", name.c_str(), argv[1]);
      ++failures;
      continue;
    }
    if (std::string(where.dli_fname).find("libpeerplan_nccl") == std::string::npos) {
      std::fprintf(stderr, "%s: resolved in %s, not in the interposer\n", name.c_str(),
                   where.dli_fname);
      ++failures;
    }
  }
  std::printf("%zu interposed functions checked, %d failure(s)\n", names.size(), failures);
  return failures == 0 ? 0 : 1;
}
