#include "transport/host/mpi_fallback.hpp"

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <utility>

#include "bootstrap/mpi_check.hpp"
#include "core/log.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/errors.hpp"
#include "transport/host/backoff.hpp"
#include "transport/host/rms_norm.hpp"
#include "transport/host/strided_copy.hpp"

namespace peerplan::transport::host {
namespace {

using Clock = std::chrono::steady_clock;

// MPI counts are int: larger messages go in pieces of this many elements.
constexpr std::int64_t kMaxMpiCount = std::int64_t{1} << 30;

constexpr const char* kContext = "peerplan MPI fallback";

std::string mpi_failure(int code, const char* call) {
  try {
    bootstrap::detail::check_mpi(code, call, kContext);
  } catch (const MpiError& e) {
    return e.what();
  }
  return {};
}

void check(int code, const char* call) { bootstrap::detail::check_mpi(code, call, kContext); }

const char* kind_name(std::uint8_t kind) {
  return kind == 0 ? "all_reduce" : "fused_add_rms_norm (all-reduce part)";
}

std::string describe_call(std::uint8_t kind, std::uint8_t dtype, std::int64_t count) {
  return std::string(kind_name(kind)) + " of " + std::to_string(count) + " " +
         to_string(static_cast<DataType>(dtype)) + " elements";
}

// ---- the keeper -------------------------------------------------------------

// What a closed fallback leaves behind while MPI may still run a reduction
// it abandoned after a timeout.
struct Remains {
  bootstrap::OwnedComm comm;
  std::unique_ptr<MpiReductionTypes> types;
  std::vector<std::vector<MPI_Request>> requests;
  std::vector<std::vector<std::byte>> buffers;
};

// Deliberately never freed. An abandoned MPI_Iallreduce completes whenever
// the late rank arrives — possibly after close() and until MPI_Finalize —
// and Open MPI then uses its communicator, datatype and operation and
// writes its buffer: freeing any of them crashed the process (in whatever
// MPI call progressed the request, or in MPI_Finalize). A nonblocking
// collective's request may not be freed either (MPI_Request_free is
// erroneous for it). Only a communicator that timed out in the fallback
// puts anything here; MPI_Finalize releases the MPI objects, the memory
// goes with the process. The vector itself is never destroyed, so no
// static destructor touches MPI after MPI_Finalize.
void keep_until_exit(std::unique_ptr<Remains> remains) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<Remains>>();
  const std::lock_guard lock(mutex);
  kept->push_back(std::move(remains));
}

bool mpi_finalized() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

MpiFallback::MpiFallback(bootstrap::OwnedComm comm, std::chrono::milliseconds timeout)
    : comm_(std::move(comm)), timeout_(timeout) {
  if (!comm_) {
    throw InvalidArgument(std::string(kContext) + ": the communicator is MPI_COMM_NULL");
  }
  if (timeout.count() <= 0) {
    throw InvalidArgument(std::string(kContext) + ": the timeout must be positive (got " +
                          std::to_string(timeout.count()) + " ms); set PEERPLAN_TIMEOUT_MS > 0");
  }
  // Errors come back as codes (MpiError), never abort the job.
  check(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN),
        "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)");
  check(MPI_Comm_rank(comm_.get(), &rank_), "MPI_Comm_rank");
  types_ = std::make_unique<MpiReductionTypes>();
}

MpiFallback::~MpiFallback() {
  try {
    close();
  } catch (...) {
    // close() only logs and moves things; nothing to report from a destructor.
  }
}

void MpiFallback::close() {
  if (closed_) return;
  closed_ = true;
  if (mpi_finalized()) {
    // MPI released its objects and runs nothing any more: just forget them.
    types_.reset();  // release() skips MPI once finalised
    comm_.reset();
    abandoned_.clear();
    return;
  }
  pending_abandoned();
  if (abandoned_.empty()) {
    types_.reset();
    comm_.reset();
    staging_ = {};
    return;
  }
  const std::size_t pending = abandoned_.size();
  auto remains = std::make_unique<Remains>();
  remains->comm = std::move(comm_);
  remains->types = std::move(types_);
  for (Abandoned& a : abandoned_) {
    remains->requests.push_back(std::move(a.requests));
    remains->buffers.push_back(std::move(a.buffer));
  }
  abandoned_.clear();
  keep_until_exit(std::move(remains));
  log::info(std::string(kContext) + ": close() after a timeout: " + std::to_string(pending) +
            " abandoned reduction(s) still pending in MPI keep their communicator, datatype, operations and buffers alive until the "
            "process exits (deliberately never freed: MPI may complete them at any time "
            "until MPI_Finalize, and freeing what they use crashes it)");
}

std::size_t MpiFallback::pending_abandoned() noexcept {
  if (mpi_finalized()) return abandoned_.size();
  std::erase_if(abandoned_, [](Abandoned& a) {
    int complete = 0;
    // Completed requests become MPI_REQUEST_NULL; none is modified unless all completed.
    const int rc = MPI_Testall(static_cast<int>(a.requests.size()), a.requests.data(), &complete,
                               MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS && complete != 0;
  });
  return abandoned_.size();
}

void MpiFallback::check_open(const char* what) const {
  if (closed_) {
    throw InvalidUsage(std::string(kContext) + ": " + what +
                       " after close(); create a new communicator.");
  }
}

void MpiFallback::check_dtype(DataType dtype, const char* what) {
  if (dtype != DataType::f16 && dtype != DataType::bf16 && dtype != DataType::f32) {
    throw InvalidArgument(std::string(kContext) + ": " + what + ": unknown dtype (value " +
                          std::to_string(static_cast<int>(dtype)) +
                          "); use DataType::f16, DataType::bf16 or DataType::f32");
  }
}

void MpiFallback::reduce(Kind kind, DataType dtype, std::int64_t count) {
  pending_abandoned();  // reap reductions a late rank has completed since
  const std::string what = std::string(kContext) + ": " +
                           describe_call(static_cast<std::uint8_t>(kind),
                                         static_cast<std::uint8_t>(dtype), count);
  const std::size_t bytes = element_size(dtype);
  const auto deadline = Clock::now() + timeout_;

  std::vector<MPI_Request> requests;
  std::string failure;  // MPI's error, when it failed here
  for (std::int64_t first = 0; first < count; first += kMaxMpiCount) {
    const auto len = static_cast<int>(std::min(kMaxMpiCount, count - first));
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE,
                                  staging_.data() + first * static_cast<std::int64_t>(bytes), len,
                                  types_->datatype(dtype), types_->sum(dtype), comm_.get(),
                                  &request);
    if (rc != MPI_SUCCESS) {
      failure = mpi_failure(rc, "MPI_Iallreduce");
      break;
    }
    requests.push_back(request);
  }

  bool completed = false;
  if (failure.empty()) {
    Backoff backoff;
    for (;;) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                                MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        failure = mpi_failure(rc, "MPI_Testall");
        break;
      }
      if (done) {
        completed = true;
        break;
      }
      if (Clock::now() >= deadline) break;
      backoff.pause();
    }
  }
  if (!completed &&
      std::any_of(requests.begin(), requests.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; })) {
    // MPI still owns the buffer: hand it over with the requests.
    abandoned_.push_back({std::move(requests), std::move(staging_)});
    staging_ = {};
  }
  if (completed) return;
  if (!failure.empty()) throw MpiError(what + ": " + failure);
  throw Timeout(what + " did not complete within " + std::to_string(timeout_.count()) +
                " ms: at least one rank did not make the matching call (it stopped, crashed, or "
                "calls collectives in a different order). MPI cannot tell which rank; "
                "PEERPLAN_DEBUG=TRACE logs every call's route on every rank. If the ranks are "
                "only slow, raise PEERPLAN_TIMEOUT_MS.");
}

void MpiFallback::all_reduce(const AllReduceArgs& args) {
  check_open("all_reduce");
  check_dtype(args.dtype, "all_reduce");
  if (args.layout == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": all_reduce: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  if (args.in == nullptr || args.out == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": all_reduce: in or out is null");
  }
  const std::size_t bytes = element_size(args.dtype);
  staging_.resize(static_cast<std::size_t>(count) * bytes);
  pack(*args.layout, bytes, args.in, staging_.data());
  reduce(Kind::all_reduce, args.dtype, count);
  unpack(*args.layout, bytes, staging_.data(), args.out);
}

void MpiFallback::fused_add_rms_norm(const FusedArgs& args) {
  check_open("fused_add_rms_norm");
  check_dtype(args.dtype, "fused_add_rms_norm");
  if (args.layout == nullptr) {
    throw InvalidArgument(std::string(kContext) + ": fused_add_rms_norm: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  if (args.inout == nullptr || args.residual == nullptr || args.weight == nullptr) {
    throw InvalidArgument(std::string(kContext) +
                          ": fused_add_rms_norm: inout, residual or weight is null");
  }
  if (!(args.eps >= 0.0f)) {
    throw InvalidArgument(std::string(kContext) + ": fused_add_rms_norm: eps must be >= 0");
  }
  const std::size_t bytes = element_size(args.dtype);
  staging_.resize(static_cast<std::size_t>(count) * bytes);
  pack(*args.layout, bytes, args.inout, staging_.data());
  reduce(Kind::fused, args.dtype, count);
  add_rms_norm(args.dtype, *args.layout, staging_.data(), args.inout, args.residual, args.weight,
               args.eps);
}

}  // namespace peerplan::transport::host
