// SPDX-License-Identifier: Apache-2.0
#include "communicator/call_guard.hpp"

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::communicator {

void throw_concurrent_call(const char* what, const char* holder) {
  throw InvalidUsage(std::string(what) + ": called while " + holder +
                     " is running on this communicator in another thread. Only one thread at "
                     "a time per communicator, as with NCCL: use one communicator per thread "
                     "or serialise the calls");
}

}  // namespace peerplan::communicator
