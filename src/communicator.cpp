// Placeholder until the communicator lands (issue 3).
#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"

namespace peerplan {
std::unique_ptr<Communicator> Communicator::create(MPI_Comm, Config) {
  throw Unsupported("the communicator is not built yet");
}
}  // namespace peerplan
