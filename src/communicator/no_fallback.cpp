// SPDX-License-Identifier: Apache-2.0
#include "communicator/no_fallback.hpp"

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::communicator {
namespace {

class NoFallback final : public transport::FallbackTransport {
 public:
  void all_reduce(const transport::AllReduceArgs&) override { refuse("all_reduce"); }
  void fused_add_rms_norm(const transport::FusedArgs&) override { refuse("fused_add_rms_norm"); }
  void close() override {}

 private:
  [[noreturn]] static void refuse(const char* what) {
    throw InvalidUsage(std::string(what) +
                       ": this call takes the fallback, but this communicator has none (its "
                       "caller runs the declined calls itself); ask has_plan_for/plan_for "
                       "first and call only for plans on a peer-to-peer route");
  }
};

}  // namespace

std::unique_ptr<transport::FallbackTransport> make_no_fallback() {
  return std::make_unique<NoFallback>();
}

}  // namespace peerplan::communicator
