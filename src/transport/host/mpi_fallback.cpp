#include "transport/host/mpi_fallback.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "bootstrap/mpi_check.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/errors.hpp"
#include "transport/host/backoff.hpp"
#include "transport/host/rms_norm.hpp"
#include "transport/host/strided_copy.hpp"

namespace peerplan::transport::host {
namespace {

// MPI counts are int: larger messages go in pieces of this many elements.
constexpr std::int64_t kMaxMpiCount = std::int64_t{1} << 30;

void check(int code, const char* call) {
  bootstrap::detail::check_mpi(code, call, "peerplan MPI fallback");
}

}  // namespace

MpiFallback::MpiFallback(MPI_Comm comm, std::chrono::milliseconds timeout)
    : comm_(comm), timeout_(timeout) {
  if (comm == MPI_COMM_NULL) {
    throw InvalidArgument("peerplan MPI fallback: the communicator is MPI_COMM_NULL");
  }
  if (timeout.count() <= 0) {
    throw InvalidArgument("peerplan MPI fallback: the timeout must be positive (got " +
                          std::to_string(timeout.count()) + " ms); set PEERPLAN_TIMEOUT_MS > 0");
  }
}

MpiFallback::~MpiFallback() {
  close();
  // Requests MPI still owns keep their buffers: freeing them would let MPI
  // write into freed memory. Only a timed-out job gets here with any, and it
  // is about to end; leak them deliberately.
  for (Abandoned& a : abandoned_) new std::vector<std::byte>(std::move(a.buffer));
}

void MpiFallback::close() {
  if (closed_) return;
  closed_ = true;
  pending_abandoned();
  types_.release();
}

std::size_t MpiFallback::pending_abandoned() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return abandoned_.size();
  std::erase_if(abandoned_, [](Abandoned& a) {
    int complete = 0;
    MPI_Test(&a.request, &complete, MPI_STATUS_IGNORE);
    return complete != 0;
  });
  return abandoned_.size();
}

void MpiFallback::check_open(const char* what) const {
  if (closed_) {
    throw InvalidUsage(std::string("peerplan MPI fallback: ") + what +
                       " after close(); create a new communicator.");
  }
}

void MpiFallback::reduce_staging(DataType dtype, std::int64_t count, const char* what) {
  pending_abandoned();  // reap reductions a late rank has completed since
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const std::size_t bytes = element_size(dtype);
  for (std::int64_t first = 0; first < count; first += kMaxMpiCount) {
    const auto len = static_cast<int>(std::min(kMaxMpiCount, count - first));
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, staging_.data() + first * static_cast<std::int64_t>(bytes),
                         len, types_.datatype(dtype), types_.sum(dtype), comm_, &request),
          "MPI_Iallreduce");
    Backoff backoff;
    for (;;) {
      int complete = 0;
      check(MPI_Test(&request, &complete, MPI_STATUS_IGNORE), "MPI_Test");
      if (complete) break;
      if (std::chrono::steady_clock::now() > deadline) {
        // MPI still owns the buffer: hand it over to the abandoned list.
        abandoned_.push_back({request, std::move(staging_)});
        staging_ = {};
        throw Timeout(std::string("peerplan MPI fallback: ") + what + " of " +
                      std::to_string(count) + " " + to_string(dtype) +
                      " elements did not complete within " + std::to_string(timeout_.count()) +
                      " ms: at least one rank did not make the matching call (it stopped, "
                      "crashed, or calls collectives in a different order). MPI cannot tell "
                      "which rank; PEERPLAN_DEBUG=TRACE logs every call's route on every rank. "
                      "If the ranks are only slow, raise PEERPLAN_TIMEOUT_MS.");
      }
      backoff.pause();
    }
  }
}

void MpiFallback::all_reduce(const AllReduceArgs& args) {
  check_open("all_reduce");
  if (args.layout == nullptr) {
    throw InvalidArgument("peerplan MPI fallback: all_reduce: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  if (args.in == nullptr || args.out == nullptr) {
    throw InvalidArgument("peerplan MPI fallback: all_reduce: in or out is null");
  }
  const std::size_t bytes = element_size(args.dtype);
  staging_.resize(static_cast<std::size_t>(count) * bytes);
  pack(*args.layout, bytes, args.in, staging_.data());
  reduce_staging(args.dtype, count, "all_reduce");
  unpack(*args.layout, bytes, staging_.data(), args.out);
}

void MpiFallback::fused_add_rms_norm(const FusedArgs& args) {
  check_open("fused_add_rms_norm");
  if (args.layout == nullptr) {
    throw InvalidArgument("peerplan MPI fallback: fused_add_rms_norm: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  if (args.inout == nullptr || args.residual == nullptr || args.weight == nullptr) {
    throw InvalidArgument(
        "peerplan MPI fallback: fused_add_rms_norm: inout, residual or weight is null");
  }
  if (!(args.eps >= 0.0f)) {
    throw InvalidArgument("peerplan MPI fallback: fused_add_rms_norm: eps must be >= 0");
  }
  const std::size_t bytes = element_size(args.dtype);
  staging_.resize(static_cast<std::size_t>(count) * bytes);
  pack(*args.layout, bytes, args.inout, staging_.data());
  reduce_staging(args.dtype, count, "fused_add_rms_norm (all-reduce part)");
  add_rms_norm(args.dtype, *args.layout, staging_.data(), args.inout, args.residual, args.weight,
               args.eps);
}

}  // namespace peerplan::transport::host
