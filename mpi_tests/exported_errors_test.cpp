// SPDX-License-Identifier: Apache-2.0
// The library boundary from an application's side: libpeerplan.so is built
// with hidden visibility and exports only what the public headers mark
// PEERPLAN_API (include/peerplan/export.h; tests/api checks the list). An
// application must still catch what the library throws by its class. That
// takes one type_info object per error class in the process, the one the
// library exports: were the classes hidden, the library would throw with
// its own copy, and a runtime that compares type_info by address (libc++)
// would then match no handler. GCC's libstdc++ compares the names instead,
// so there such a catch would still work; the tests below therefore check
// the address too (the same object on both sides of the boundary).
// Linked with libpeerplan.so alone and including public headers alone, as
// an application is.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/layout.hpp"
#include "support/mpi_test_support.hpp"

namespace {

using namespace std::chrono_literals;
using peerplan::mpi_test::meet_or_abort;

// How a call ended: the handler that caught its error and the error's
// dynamic type (what `catch` matched against).
struct Caught {
  std::string handler = "nothing thrown";
  const std::type_info* type = nullptr;
  std::string message;

  std::string describe() const {
    return handler + ", " + (type != nullptr ? type->name() : "no type") + ": " + message;
  }
};

template <class Expected, class Call>
Caught catch_from_library(Call&& call) {
  Caught c;
  try {
    call();
  } catch (const Expected& e) {
    c = {"the expected class", &typeid(e), e.what()};
  } catch (const peerplan::Error& e) {
    c = {"peerplan::Error", &typeid(e), e.what()};
  } catch (const std::exception& e) {
    // A peerplan error whose type information the application cannot
    // match lands here.
    c = {"std::exception", &typeid(e), e.what()};
  } catch (...) {
    c = {"catch (...)", nullptr, ""};
  }
  return c;
}

// The thrown object's type is Expected, by the very type_info object the
// application sees (not merely an equal one).
template <class Expected>
void expect_caught_as(const Caught& c) {
  EXPECT_EQ(c.handler, "the expected class") << c.describe();
  ASSERT_NE(c.type, nullptr) << c.describe();
  EXPECT_TRUE(*c.type == typeid(Expected)) << c.describe();
  EXPECT_EQ(c.type, &typeid(Expected))
      << "the library threw with a type_info of its own for " << typeid(Expected).name()
      << ", not the one the application sees: is the class PEERPLAN_API (exported)?";
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

peerplan::Config host_config(std::chrono::milliseconds timeout) {
  peerplan::Config config;
  config.backend = peerplan::Backend::host;
  config.timeout = timeout;
  return config;
}

// Thrown inside the library (layout.cpp), no MPI involved.
TEST(ExportedErrors, InvalidArgumentFromTheLibraryIsCaughtByItsClass) {
  const std::vector<std::int64_t> shape{2, 3};
  const std::vector<std::int64_t> strides{1};
  const Caught c = catch_from_library<peerplan::InvalidArgument>(
      [&] { (void)peerplan::TensorLayout::strided(shape, strides); });
  expect_caught_as<peerplan::InvalidArgument>(c);

  // And as its base class, with the code intact.
  try {
    (void)peerplan::TensorLayout::strided(shape, strides);
    ADD_FAILURE() << "TensorLayout::strided accepted 2 dimensions and 1 stride";
  } catch (const peerplan::Error& e) {
    EXPECT_EQ(e.code(), peerplan::ErrorCode::invalid_argument);
    EXPECT_TRUE(typeid(e) == typeid(peerplan::InvalidArgument)) << typeid(e).name();
    EXPECT_NE(dynamic_cast<const peerplan::InvalidArgument*>(&e), nullptr);
  }
}

// A real Timeout: the last rank reaches create() after the others gave up
// on it (communicator_create_timeout_test has the same case in detail).
// Every rank, the late one included, must catch peerplan::Timeout itself.
TEST(ExportedErrors, TimeoutFromCreateIsCaughtByItsClass) {
  constexpr auto kTimeout = 1000ms;
  const int late = world_size() - 1;
  meet_or_abort("before create");
  if (world_rank() == late) std::this_thread::sleep_for(kTimeout + 1000ms);
  const Caught c = catch_from_library<peerplan::Timeout>(
      [&] { (void)peerplan::Communicator::create(MPI_COMM_WORLD, host_config(kTimeout)); });
  meet_or_abort("after create with a late rank");
  expect_caught_as<peerplan::Timeout>(c);

  // Every rank has called create() as often as the others: it works again.
  std::unique_ptr<peerplan::Communicator> comm;
  ASSERT_NO_THROW(comm = peerplan::Communicator::create(MPI_COMM_WORLD, host_config(10'000ms)));
  EXPECT_EQ(comm->size(), world_size());
  comm->close();
}

}  // namespace
