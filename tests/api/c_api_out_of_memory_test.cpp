// SPDX-License-Identifier: Apache-2.0
// "No C++ exception crosses this interface" (peerplan.h), even when memory
// runs out while a failure's message is built: with every allocation
// failing, the C functions return their code (or neutral value) instead.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "peerplan/peerplan.h"

namespace {

bool allocations_fail = false;

}  // namespace

void* operator new(std::size_t bytes) {
  if (allocations_fail) throw std::bad_alloc();
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Runs `call` with every allocation failing; the result, and whether it threw.
template <class Call>
auto without_memory(Call call, bool& threw) {
  threw = false;
  allocations_fail = true;
  try {
    auto result = call();
    allocations_fail = false;
    return result;
  } catch (...) {
    allocations_fail = false;
    threw = true;
    return decltype(call()){};
  }
}

// Never returned by peerplan_comm_create: only compared, never read.
peerplan_comm_t made_up_comm() { return reinterpret_cast<peerplan_comm_t>(std::uintptr_t{0x10}); }

TEST(CApiOutOfMemory, FailuresFoundBeforeAnyCallReturnTheirCode) {
  bool threw = false;
  EXPECT_EQ(without_memory([] { return peerplan_comm_rank(made_up_comm()); }, threw), -1);
  EXPECT_FALSE(threw) << "peerplan_comm_rank";
  EXPECT_EQ(without_memory([] { return peerplan_config_set(nullptr, "x", "y"); }, threw),
            PEERPLAN_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(threw) << "peerplan_config_set";
  EXPECT_EQ(without_memory([] { return peerplan_declare(nullptr, nullptr, 0); }, threw),
            PEERPLAN_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(threw) << "peerplan_declare";
  EXPECT_EQ(without_memory([] { return peerplan_comm_close(made_up_comm()); }, threw),
            PEERPLAN_ERROR_INVALID_USAGE);
  EXPECT_FALSE(threw) << "peerplan_comm_close";
  without_memory(
      [] {
        peerplan_comm_destroy(made_up_comm());
        return 0;
      },
      threw);
  EXPECT_FALSE(threw) << "peerplan_comm_destroy";
}

TEST(CApiOutOfMemory, AFailureInsideTheCallIsOutOfMemory) {
  peerplan_config_t config = nullptr;
  ASSERT_EQ(peerplan_config_create(&config), PEERPLAN_SUCCESS);
  bool threw = false;
  EXPECT_EQ(
      without_memory([&] { return peerplan_config_set(config, "PEERPLAN_DEBUG", "INFO"); }, threw),
      PEERPLAN_ERROR_OUT_OF_MEMORY);
  EXPECT_FALSE(threw);
  // Memory back: the same call works.
  EXPECT_EQ(peerplan_config_set(config, "PEERPLAN_DEBUG", "INFO"), PEERPLAN_SUCCESS)
      << peerplan_last_error();
  peerplan_config_destroy(config);
}

// The enums are bytes: an int past a byte must not wrap onto a known name.
TEST(CApiNames, IntsOutsideTheEnumsAreUnknown) {
  for (int value : {256, 257, 258, -255, -1, 1000}) {
    EXPECT_STREQ(peerplan_route_name(value), "unknown") << value;
    EXPECT_STREQ(peerplan_reason_name(value), "unknown") << value;
    EXPECT_STREQ(peerplan_protocol_name(value), "unknown") << value;
  }
  EXPECT_STRNE(peerplan_route_name(0), "unknown");
  EXPECT_STRNE(peerplan_reason_name(0), "unknown");
}

}  // namespace
