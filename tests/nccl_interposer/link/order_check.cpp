// SPDX-License-Identifier: Apache-2.0
// order_check <libpeerplan_nccl.so>, run with PEERPLAN_NCCL_LIBRARY set to
// the fake NCCL it is linked with (fake_nccl.cpp): calls the interposer's
// NCCL functions as a program would and checks which calls reach "the real
// NCCL", in which order. Nothing is declared, so every all-reduce goes to
// NCCL (every rank still takes the bootstrap's roll call, which shows
// nothing is declared anywhere); what is checked is the group bookkeeping (an
// all-reduce peerplan cannot run is handed on at once, in a group too, so
// NCCL sees the program's order and reports bad arguments at the call;
// dispatch_test.cpp holds a declared one back) and that peerplan is set up
// after the init, or after the group's end for an init inside a group.
// Exit 0 when every scenario matches.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <string>

extern "C" const char* fake_nccl_log();
extern "C" void fake_nccl_clear();

namespace {

void* interposer = nullptr;
int failures = 0;

template <class Function>
Function* find(Function*, const char* name) {
  auto* symbol = reinterpret_cast<Function*>(dlsym(interposer, name));
  if (symbol == nullptr) {
    std::fprintf(stderr, "%s is not defined by the interposer\n", name);
    std::exit(1);
  }
  return symbol;
}
#define NCCL(name) find(&::name, #name)

void expect(const char* scenario, const std::string& expected) {
  const std::string seen = fake_nccl_log();
  if (seen != expected) {
    std::fprintf(stderr, "FAIL %s\n  expected:\n%s  seen:\n%s", scenario, expected.c_str(),
                 seen.c_str());
    ++failures;
  } else {
    std::printf("ok   %s\n", scenario);
  }
  fake_nccl_clear();
}

// As expect, for an init: `expected`, then only the bootstrap's own calls
// (its ncclCommUserRank, and with a GPU the all-gathers of its node keys
// and of the roll call every rank takes part in, declared or not).
void expect_init(const char* scenario, const std::string& expected) {
  std::string seen = fake_nccl_log();
  bool only_bootstrap = seen.compare(0, expected.size(), expected) == 0;
  for (std::size_t at = expected.size(); only_bootstrap && at < seen.size();) {
    const std::size_t end = seen.find('\n', at);
    const std::string line = seen.substr(at, end - at);
    only_bootstrap = line == "CommUserRank" || line.rfind("AllGather ", 0) == 0;
    at = end == std::string::npos ? seen.size() : end + 1;
  }
  if (!only_bootstrap) {
    std::fprintf(stderr, "FAIL %s\n  expected (then the bootstrap's calls):\n%s  seen:\n%s",
                 scenario, expected.c_str(), seen.c_str());
    ++failures;
  } else {
    std::printf("ok   %s\n", scenario);
  }
  fake_nccl_clear();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <libpeerplan_nccl.so>\n", argv[0]);
    return 2;
  }
  interposer = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (interposer == nullptr) {
    std::fprintf(stderr, "dlopen(%s) failed: %s\n", argv[1], dlerror());
    return 1;
  }
  fake_nccl_clear();
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  float buffer[64] = {};
  const auto all_reduce = [&](std::size_t count) {
    return NCCL(ncclAllReduce)(buffer, buffer, count, ncclFloat, ncclSum, comm, nullptr);
  };

  NCCL(ncclCommInitRank)(&comm, 1, id, 0);
  expect_init("init outside a group: peerplan's side right after the real init",
              "CommInitRank 0\nCommUserRank\n");

  all_reduce(10);
  expect("an all-reduce outside a group goes on at once", "AllReduce 10\n");

  NCCL(ncclGroupStart)();
  all_reduce(11);
  const std::string handed = fake_nccl_log();
  NCCL(ncclGroupEnd)();
  if (handed != "GroupStart\nAllReduce 11\n") {
    std::fprintf(stderr, "FAIL the group's only all-reduce, undeclared, was held: %s",
                 handed.c_str());
    ++failures;
  }
  expect("a group of one undeclared all-reduce: handed on at once, inside the real group",
         "GroupStart\nAllReduce 11\nGroupEnd\n");

  NCCL(ncclGroupStart)();
  all_reduce(12);
  NCCL(ncclSend)(buffer, 13, ncclFloat, 0, comm, nullptr);
  all_reduce(14);
  NCCL(ncclRecv)(buffer, 15, ncclFloat, 0, comm, nullptr);
  NCCL(ncclGroupEnd)();
  expect("a group of several operations keeps the program's order",
         "GroupStart\nAllReduce 12\nSend 13\nAllReduce 14\nRecv 15\nGroupEnd\n");

  NCCL(ncclGroupStart)();
  NCCL(ncclAllGather)(buffer, buffer, 16, ncclFloat, comm, nullptr);
  all_reduce(17);
  NCCL(ncclGroupEnd)();
  expect("an all-reduce after another operation is not held",
         "GroupStart\nAllGather 16\nAllReduce 17\nGroupEnd\n");

  NCCL(ncclGroupStart)();
  NCCL(ncclGroupStart)();
  all_reduce(18);
  NCCL(ncclGroupEnd)();
  NCCL(ncclGroupEnd)();
  expect("nested groups: an undeclared all-reduce handed on at once, inside the inner group",
         "GroupStart\nGroupStart\nAllReduce 18\nGroupEnd\nGroupEnd\n");

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)  // ncclGroupSimulateEnd
  NCCL(ncclGroupStart)();
  all_reduce(19);
  ncclSimInfo_t simulated = NCCL_SIM_INFO_INITIALIZER;
  NCCL(ncclGroupSimulateEnd)(&simulated);
  all_reduce(20);
  expect("a simulated group: its all-reduce handed on inside it, the next call outside any group",
         "GroupStart\nAllReduce 19\nGroupSimulateEnd\nAllReduce 20\n");
#endif

  ncclComm_t grouped = nullptr;
  NCCL(ncclGroupStart)();
  NCCL(ncclCommInitRank)(&grouped, 1, id, 0);
  const std::string before_end = fake_nccl_log();
  NCCL(ncclGroupEnd)();
  if (before_end != "GroupStart\nCommInitRank 0\n") {
    std::fprintf(stderr, "FAIL peerplan's side was set up before the group ended: %s",
                 before_end.c_str());
    ++failures;
  }
  expect_init("init inside a group: peerplan's side after the real group end",
              "GroupStart\nCommInitRank 0\nGroupEnd\nCommUserRank\n");

  ncclComm_t first = nullptr, second = nullptr;
  NCCL(ncclGroupStart)();
  NCCL(ncclCommInitRank)(&first, 2, id, 0);
  NCCL(ncclCommInitRank)(&second, 2, id, 1);
  NCCL(ncclGroupEnd)();
  expect("several inits in one group: each set up after the group end",
         "GroupStart\nCommInitRank 0\nCommInitRank 1\nGroupEnd\nCommUserRank\nCommUserRank\n");

  if (std::string(NCCL(ncclGetLastError)(comm)) != "fake last error") {
    std::fprintf(stderr, "FAIL ncclGetLastError did not pass NCCL's text through\n");
    ++failures;
  }
  ncclResult_t async = ncclInternalError;
  NCCL(ncclCommGetAsyncError)(comm, &async);
  if (async != ncclSuccess) {
    std::fprintf(stderr, "FAIL ncclCommGetAsyncError reported %d on a healthy communicator\n",
                 async);
    ++failures;
  }

  NCCL(ncclCommFinalize)(comm);
  NCCL(ncclCommDestroy)(comm);
  NCCL(ncclCommAbort)(grouped);
  expect("finalize, destroy and abort reach NCCL", "CommFinalize\nCommDestroy\nCommAbort\n");

  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
