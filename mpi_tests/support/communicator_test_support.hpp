// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the communicator's end-to-end MPI tests
// (mpi_tests/communicator_*_test.cpp).
//
// The tests check results against references computed independently here:
//  - every rank can regenerate every other rank's input from (seed, rank,
//    element index), so the float64 reference needs no communication;
//  - buffers are poisoned with a NaN bit pattern before each call, so that
//    an element the library forgot to write, or padding it wrongly wrote,
//    is caught byte for byte;
//  - cross-rank comparisons (bit-identical outputs, identical messages) go
//    through a private duplicate of MPI_COMM_WORLD, never through the
//    communicator under test.
// Header-only: each test binary is one translation unit.
#pragma once

#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/layout.hpp"
#include "support/mpi_test_support.hpp"
#include "transport/host/element.hpp"

namespace peerplan {
// How GoogleTest prints a DataType parameter (found by argument-dependent
// lookup), instead of "1-byte object <02>".
inline void PrintTo(DataType dtype, std::ostream* os) { *os << to_string(dtype); }
}  // namespace peerplan

namespace peerplan::comm_test {

// ---------------------------------------------------------------- MPI side

using mpi_test::meet_or_abort;
using mpi_test::test_comm;

inline int test_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int test_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

template <class T>
std::vector<T> allgather_value(const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> all(static_cast<std::size_t>(test_size()));
  MPI_Allgather(&value, sizeof(T), MPI_BYTE, all.data(), sizeof(T), MPI_BYTE, test_comm());
  return all;
}

inline std::uint64_t fnv1a(const void* data, std::size_t bytes,
                           std::uint64_t hash = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

inline std::uint64_t fnv1a(const std::string& text) { return fnv1a(text.data(), text.size()); }

// Ranks whose value differs from rank 0's (empty when all agree). Collective.
inline std::vector<int> ranks_differing_from_rank0(std::uint64_t value) {
  const auto all = allgather_value(value);
  std::vector<int> differing;
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differing.push_back(static_cast<int>(r));
  return differing;
}

inline std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

// Whether every rank of MPI_COMM_WORLD shares one node (shared-memory
// domain), found out by the test itself, independently of the library.
// Collective.
inline bool all_ranks_on_one_node() {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(test_comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int one = local_size == test_size() ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_MIN, test_comm());
  return all == 1;
}

// The base seed of this run: PEERPLAN_TEST_SEED if set (to replay a
// failure), else rank 0's random choice, broadcast so that every rank
// regenerates the same inputs. Collective on first use. Printed in every
// failure message that depends on it.
inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t value = 0;
    if (const char* text = std::getenv("PEERPLAN_TEST_SEED"); text != nullptr && *text != '\0') {
      value = std::strtoull(text, nullptr, 0);
    } else {
      std::random_device entropy;
      value = (static_cast<std::uint64_t>(entropy()) << 32) | entropy();
    }
    MPI_Bcast(&value, sizeof value, MPI_BYTE, 0, test_comm());
    return value;
  }();
  return seed;
}

// A fresh seed for each check (never reusing inputs): the counter advances
// identically on every rank because every rank makes the same checks.
inline std::uint64_t next_seed() {
  static std::uint64_t counter = 0;
  return base_seed() ^ (0x9e3779b97f4a7c15ull * ++counter);
}

// Sets (or unsets) an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// ------------------------------------------------------- values and dtypes

inline float to_float(DataType dtype, const void* p) {
  return transport::host::load_as_float(dtype, p);
}
inline void from_float(DataType dtype, float v, void* p) {
  transport::host::store_from_float(dtype, v, p);
}
inline float round_to(DataType dtype, float v) { return transport::host::round_to(dtype, v); }

// Relative tolerance per rounding step. The unit roundoff u (half an ulp
// at 1) is 2^-24 = 6e-8 for f32, 2^-8 = 3.9e-3 for bf16 (8 significant
// bits), 2^-11 = 4.9e-4 for f16 (11 bits). A P2P result is the fp32 sum
// in rank order rounded once, so |out - exact| <= u |exact| + (n-1) 2^-24
// sum|x| <= (u + (n-1) 2^-24) sum|x|; the fallback's f16/bf16 MPI op rounds
// after each of its n-1 additions: <= (n-1) u sum|x|. These values exceed
// u + 3 * 2^-24 by a margin (f32 1e-6 = 16 u, bf16 1e-2 = 2.6 u, f16 2e-3 =
// 4 u), so a correct result never fails, while a wrong element, a missing
// or doubled rank (errors of the order of the values) always does.
inline double relative_tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::f16:
      return 2e-3;
    case DataType::bf16:
      return 1e-2;
    case DataType::f32:
      break;
  }
  return 1e-6;
}

// The NaN pattern buffers are poisoned with, as the dtype's bits. Chosen to
// be a NaN no arithmetic produces (odd payload), so finding it means
// "never written".
inline void store_poison(DataType dtype, void* p) {
  if (dtype == DataType::f32) {
    const std::uint32_t bits = 0x7fa5a5a5u;
    std::memcpy(p, &bits, sizeof bits);
  } else {
    const std::uint16_t bits = dtype == DataType::bf16 ? 0x7fa5u : 0x7e5au;
    std::memcpy(p, &bits, sizeof bits);
  }
}
inline bool is_poison(DataType dtype, const void* p) {
  std::byte expected[4];
  store_poison(dtype, expected);
  return std::memcmp(p, expected, element_size(dtype)) == 0;
}

// How inputs are generated.
enum class Inputs {
  random,    // uniform in [-1, 1), rounded to the dtype
  integers,  // integers in [-8, 8] other than 0: sums over <= 16 ranks are
             // exact in every dtype (bf16 holds integers up to 256 exactly)
};

inline const char* to_string(Inputs inputs) {
  return inputs == Inputs::random ? "random" : "integers";
}

inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element `index` of `rank`'s input for `seed`, exactly representable in
// `dtype`. Any rank computes any rank's value.
inline float input_value(DataType dtype, Inputs inputs, std::uint64_t seed, int rank,
                         std::int64_t index) {
  const std::uint64_t h = splitmix(splitmix(seed ^ (static_cast<std::uint64_t>(rank) << 48)) ^
                                   static_cast<std::uint64_t>(index));
  if (inputs == Inputs::integers) {
    const int magnitude = static_cast<int>(h % 8) + 1;  // 1..8
    return static_cast<float>((h >> 8) & 1 ? magnitude : -magnitude);
  }
  const double u = static_cast<double>(h >> 11) * std::ldexp(1.0, -53);  // [0, 1)
  return round_to(dtype, static_cast<float>(2.0 * u - 1.0));
}

// ------------------------------------------------------------------ layouts

inline TensorLayout strided_layout(std::vector<std::int64_t> shape,
                                   std::vector<std::int64_t> strides) {
  return TensorLayout::strided(shape, strides);
}

// Element offsets of a layout's elements in row-major logical order.
inline std::vector<std::int64_t> element_offsets(const TensorLayout& layout) {
  std::vector<std::int64_t> offsets;
  const std::int64_t count = layout.numel();
  offsets.reserve(static_cast<std::size_t>(count));
  std::vector<std::int64_t> index(static_cast<std::size_t>(layout.rank()), 0);
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t offset = 0;
    for (int d = 0; d < layout.rank(); ++d) offset += index[d] * layout.stride(d);
    offsets.push_back(offset);
    for (int d = layout.rank() - 1; d >= 0; --d) {
      if (++index[d] < layout.dim(d)) break;
      index[d] = 0;
    }
  }
  return offsets;
}

// A buffer of `elements` elements of `dtype`, 64-byte aligned, plus a guard
// tail that must stay poisoned (catches writes past the tensor's extent).
class Buffer {
 public:
  static constexpr std::int64_t kGuardElements = 32;

  Buffer(DataType dtype, std::int64_t elements)
      : dtype_(dtype), elements_(elements + kGuardElements) {
    const std::size_t bytes =
        (static_cast<std::size_t>(elements_) * element_size(dtype) + 63) / 64 * 64;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, bytes)));
    poison();
  }
  // Room for `layout`'s extent (largest offset + 1).
  static Buffer for_layout(DataType dtype, const TensorLayout& layout) {
    const auto offsets = element_offsets(layout);
    const std::int64_t extent =
        offsets.empty() ? 0 : *std::max_element(offsets.begin(), offsets.end()) + 1;
    return Buffer(dtype, extent);
  }

  void poison() {
    for (std::int64_t i = 0; i < elements_; ++i) store_poison(dtype_, at(i));
  }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::int64_t elements() const { return elements_; }  // including the guard
  std::size_t bytes() const { return static_cast<std::size_t>(elements_) * element_size(dtype_); }
  std::byte* at(std::int64_t offset) { return data_.get() + offset * element_size(dtype_); }
  const std::byte* at(std::int64_t offset) const {
    return data_.get() + offset * element_size(dtype_);
  }
  float get(std::int64_t offset) const { return to_float(dtype_, at(offset)); }
  void set(std::int64_t offset, float v) { from_float(dtype_, v, at(offset)); }
  std::vector<std::byte> snapshot() const { return {data_.get(), data_.get() + bytes()}; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  DataType dtype_;
  std::int64_t elements_;
  std::unique_ptr<std::byte[], Free> data_;
};

// Storage offsets of `buffer` that are not elements of the tensor (padding
// between rows and the guard tail).
inline std::vector<std::int64_t> non_element_offsets(const Buffer& buffer,
                                                     const std::vector<std::int64_t>& offsets) {
  std::vector<bool> used(static_cast<std::size_t>(buffer.elements()), false);
  for (auto o : offsets) used[static_cast<std::size_t>(o)] = true;
  std::vector<std::int64_t> rest;
  for (std::int64_t i = 0; i < buffer.elements(); ++i)
    if (!used[static_cast<std::size_t>(i)]) rest.push_back(i);
  return rest;
}

// Hash of the tensor's elements (logical order) in `buffer`.
inline std::uint64_t hash_elements(DataType dtype, const Buffer& buffer,
                                   const std::vector<std::int64_t>& offsets) {
  std::uint64_t h = 1469598103934665603ull;
  for (auto o : offsets) h = fnv1a(buffer.at(o), element_size(dtype), h);
  return h;
}

// ------------------------------------------------------------ communicator

// These tests pass host memory, so they ask for the host backend (on a GPU
// host Backend::automatic would pick cuda). The cuda_* tests cover the GPUs.
inline Config host_config(Config config = {}) {
  config.backend = Backend::host;
  return config;
}

inline std::unique_ptr<Communicator> create_on_world(Config config = {}) {
  return Communicator::create(MPI_COMM_WORLD, host_config(std::move(config)));
}

// Does `message` name rank `rank` in a phrase like "rank 3", "rank(s) 1, 3",
// "ranks 0, 3" or "ranks 0-3"? (A bare digit elsewhere, e.g. "call #3",
// does not count.)
inline bool names_rank(const std::string& message, int rank) {
  static const std::regex phrase(
      R"(\branks?(?:\(s\))?:?\s+(\d+(?:-\d+)?(?:\s*(?:,|and)\s*\d+(?:-\d+)?)*))");
  for (std::sregex_iterator it(message.begin(), message.end(), phrase), end; it != end; ++it) {
    const std::string list = (*it)[1].str();
    static const std::regex item(R"((\d+)(?:-(\d+))?)");
    for (std::sregex_iterator n(list.begin(), list.end(), item); n != end; ++n) {
      const int first = std::stoi((*n)[1].str());
      const int last = (*n)[2].matched ? std::stoi((*n)[2].str()) : first;
      if (first <= rank && rank <= last) return true;
    }
  }
  return false;
}

// --------------------------------------------------------------- all-reduce

inline bool is_p2p(Route route) { return route != Route::fallback; }

// The ranks of each node, nodes in order of their lowest rank, while a test
// poses as several nodes (PEERPLAN_HOST_ID); empty on one node. The
// hierarchical route's documented sum follows it.
inline std::vector<std::vector<int>>& posed_nodes() {
  static std::vector<std::vector<int>> nodes;
  return nodes;
}

// The sum a P2P route documents for element `i`, before its one rounding:
// fp32 in rank order 0..n-1; on the hierarchical route, each node's ranks
// in rank order, then the nodes' sums in node order.
template <class ValueOf>
float documented_p2p_sum(Route route, int n, ValueOf&& value_of) {
  if (route != Route::hierarchical || posed_nodes().empty()) {
    float sum = 0.0f;
    for (int r = 0; r < n; ++r) sum = r == 0 ? value_of(r) : sum + value_of(r);
    return sum;
  }
  float total = 0.0f;
  bool first_node = true;
  for (const auto& node : posed_nodes()) {
    float partial = 0.0f;
    for (std::size_t k = 0; k < node.size(); ++k)
      partial = k == 0 ? value_of(node[k]) : partial + value_of(node[k]);
    total = first_node ? partial : total + partial;
    first_node = false;
  }
  return total;
}

// What one checked all-reduce did. Counts are of elements.
struct AllReduceOutcome {
  CallResult result;
  std::vector<float> values;         // the output, logical order
  std::uint64_t hash = 0;            // of the output elements' bytes
  std::int64_t wrong = 0;            // outside the tolerance of the float64 reference
                                     // (integers: not exactly the sum)
  std::int64_t unwritten = 0;        // output elements still holding the poison
  std::int64_t padding_written = 0;  // padding / guard elements of the output changed
  std::int64_t model_mismatch = 0;   // P2P routes: differs from the documented
                                     // fp32 sum in rank order 0..n-1, rounded once
  bool input_changed = false;        // out-of-place: the input buffer was modified
  std::string first_problem;         // the first wrong element, explained
};

// Runs comm.all_reduce on inputs regenerated from `seed` and checks the
// output against references computed from every rank's inputs. The
// output (or, in place, the padding) is poisoned first, and the input's
// padding holds the poison too, so a library reading padding as data
// produces NaNs that are caught.
inline AllReduceOutcome run_all_reduce(Communicator& comm, DataType dtype,
                                       const TensorLayout& layout, Inputs inputs, bool in_place,
                                       std::uint64_t seed) {
  const int n = comm.size();
  const int me = comm.rank();
  const auto offsets = element_offsets(layout);
  const auto count = static_cast<std::int64_t>(offsets.size());

  Buffer in = Buffer::for_layout(dtype, layout);
  for (std::int64_t i = 0; i < count; ++i)
    in.set(offsets[i], input_value(dtype, inputs, seed, me, i));
  std::optional<Buffer> separate_out;
  if (!in_place) separate_out.emplace(Buffer::for_layout(dtype, layout));
  Buffer& out = in_place ? in : *separate_out;
  const auto input_before = in.snapshot();

  AllReduceOutcome o;
  o.result = comm.all_reduce(in.data(), out.data(), dtype, layout);

  const bool p2p = is_p2p(o.result.route);
  const double rel = relative_tolerance(dtype);
  // One rounding on a P2P route (fp32 accumulation error is far below rel);
  // the fallback's f16/bf16 MPI op rounds after each of its n-1 additions.
  const double steps = p2p ? 1.0 : std::max(1.0, n - 1.0);
  const double floor = n * std::ldexp(1.0, -24);  // f16 subnormals: 2^-25 per rounding
  o.values.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const float got = out.get(offsets[i]);
    o.values[static_cast<std::size_t>(i)] = got;
    if (is_poison(dtype, out.at(offsets[i]))) {
      ++o.unwritten;
      if (o.first_problem.empty())
        o.first_problem = "element " + std::to_string(i) + " was never written";
      continue;
    }
    double exact = 0.0;
    double magnitude = 0.0;
    for (int r = 0; r < n; ++r) {
      const float v = input_value(dtype, inputs, seed, r, i);
      exact += v;
      magnitude += std::fabs(v);
    }
    const float model = round_to(dtype, documented_p2p_sum(o.result.route, n, [&](int r) {
                                   return input_value(dtype, inputs, seed, r, i);
                                 }));
    const double tolerance = inputs == Inputs::integers ? 0.0 : steps * rel * magnitude + floor;
    const bool ok = std::fabs(static_cast<double>(got) - exact) <= tolerance;  // false for NaN
    if (!ok) {
      ++o.wrong;
      if (o.first_problem.empty()) {
        std::ostringstream text;
        text << "element " << i << " (offset " << offsets[i] << ") is " << got
             << ", float64 reference " << exact << ", tolerance " << tolerance;
        o.first_problem = text.str();
      }
    }
    if (p2p && !(got == model)) ++o.model_mismatch;
  }
  for (auto offset : non_element_offsets(out, offsets)) {
    if (!is_poison(dtype, out.at(offset))) ++o.padding_written;
  }
  if (!in_place) o.input_changed = in.snapshot() != input_before;
  o.hash = hash_elements(dtype, out, offsets);
  return o;
}

// Everything run_all_reduce checks, as gtest expectations, plus
// bit-identical outputs on every rank (collective).
inline void expect_all_reduce_correct(const AllReduceOutcome& o, const std::string& what) {
  const std::string context = what + " (seed base " + std::to_string(base_seed()) + ")";
  EXPECT_EQ(o.unwritten, 0) << context << ": " << o.first_problem;
  EXPECT_EQ(o.wrong, 0) << context << ": #wrong; first: " << o.first_problem;
  EXPECT_EQ(o.padding_written, 0) << context << ": padding or guard elements were written";
  EXPECT_EQ(o.model_mismatch, 0)
      << context << ": P2P result differs from the documented fp32 sum (rank order; "
      << "hierarchical: node sums in node order), rounded once";
  EXPECT_FALSE(o.input_changed) << context << ": the input buffer was modified";
  const auto differing = ranks_differing_from_rank0(o.hash);
  EXPECT_TRUE(differing.empty()) << context << ": output differs from rank 0's on ranks "
                                 << join(differing);
}

// ---------------------------------------------------------- fused add+norm

// A norm weight of `hidden` elements with values in [0.5, 1.5], the same
// on every rank for `seed` (each rank holds its own copy: its own address).
inline Buffer make_weight(DataType dtype, std::int64_t hidden, std::uint64_t seed) {
  Buffer weight(dtype, hidden);
  for (std::int64_t j = 0; j < hidden; ++j)
    weight.set(j, round_to(dtype, 1.0f + 0.5f * input_value(DataType::f32, Inputs::random, seed,
                                                            7777, j)));
  return weight;
}

struct FusedOutcome {
  CallResult result;
  std::vector<float> out;                  // inout after the call, logical order
  std::vector<float> residual;             // residual after the call, logical order
  std::vector<double> residual_tolerance;  // per element, of residual vs float64
  std::vector<double> out_tolerance;       // per element, of out vs float64
  std::uint64_t hash = 0;                  // of both outputs' elements
  std::int64_t wrong_residual = 0;
  std::int64_t wrong_out = 0;
  std::int64_t padding_written = 0;
  std::string first_problem;
};

// The rank id residuals are generated for when every rank holds the same
// residual (tensor parallelism keeps the residual replicated).
inline constexpr int kSharedResidual = 4095;

// Runs comm.fused_add_rms_norm (inout and residual both with `layout`) and
// checks both results against a float64 reference of
//   r = sum_ranks(inout) + residual;  out = r / sqrt(mean_row(r^2) + eps) * w.
inline FusedOutcome run_fused(Communicator& comm, DataType dtype, const TensorLayout& layout,
                              const Buffer& weight, float eps, Inputs inputs, bool shared_residual,
                              std::uint64_t seed) {
  const int n = comm.size();
  const int me = comm.rank();
  const auto offsets = element_offsets(layout);
  const auto count = static_cast<std::int64_t>(offsets.size());
  const std::int64_t hidden = layout.last_dim();
  const std::int64_t rows = count / hidden;
  const std::uint64_t residual_seed = seed ^ 0x5eed5eed5eedull;
  const auto residual_value = [&](int rank, std::int64_t i) {
    return input_value(dtype, inputs, residual_seed, shared_residual ? kSharedResidual : rank, i);
  };

  Buffer inout = Buffer::for_layout(dtype, layout);
  Buffer residual = Buffer::for_layout(dtype, layout);
  for (std::int64_t i = 0; i < count; ++i) {
    inout.set(offsets[i], input_value(dtype, inputs, seed, me, i));
    residual.set(offsets[i], residual_value(me, i));
  }

  FusedOutcome o;
  o.result =
      comm.fused_add_rms_norm(inout.data(), residual.data(), weight.data(), eps, dtype, layout);

  const bool p2p = is_p2p(o.result.route);
  const double rel = relative_tolerance(dtype);
  // Roundings of r: the sum (once on P2P, after each of the n-1 MPI-op
  // additions in the fallback's f16/bf16 op), then the residual add.
  const double steps = (p2p ? 1.0 : std::max(1.0, n - 1.0)) + 1.0;
  const double floor = (n + 1) * std::ldexp(1.0, -24);
  o.out.resize(static_cast<std::size_t>(count));
  o.residual.resize(static_cast<std::size_t>(count));
  o.residual_tolerance.resize(static_cast<std::size_t>(count));
  o.out_tolerance.resize(static_cast<std::size_t>(count));
  std::vector<double> exact_r(static_cast<std::size_t>(hidden));
  std::vector<double> tol_r(static_cast<std::size_t>(hidden));
  for (std::int64_t row = 0; row < rows; ++row) {
    double sum_squares = 0.0;
    double spread = 0.0;  // sum of 2|r| tol_r + tol_r^2: bound on the error of sum r^2
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      double s = 0.0;
      double magnitude = 0.0;
      for (int r = 0; r < n; ++r) {
        const float v = input_value(dtype, inputs, seed, r, i);
        s += v;
        magnitude += std::fabs(v);
      }
      const double res = residual_value(me, i);
      exact_r[j] = s + res;
      tol_r[j] =
          inputs == Inputs::integers ? 0.0 : steps * rel * (magnitude + std::fabs(res)) + floor;
      sum_squares += exact_r[j] * exact_r[j];
      spread += 2.0 * std::fabs(exact_r[j]) * tol_r[j] + tol_r[j] * tol_r[j];
    }
    const double variance = sum_squares / static_cast<double>(hidden);
    const double inv_rms = 1.0 / std::sqrt(variance + eps);
    // Relative error bound of the implementation's 1/rms: from the rounded
    // r's, plus fp32 accumulation of `hidden` squares (worst case), plus
    // sqrt and division.
    const double rel_var = (sum_squares > 0 ? spread / sum_squares : 0.0) +
                           static_cast<double>(hidden) * std::ldexp(1.0, -24);
    const double rel_inv = rel_var + 4 * std::ldexp(1.0, -24);
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      const std::int64_t offset = offsets[static_cast<std::size_t>(i)];
      const float got_r = residual.get(offset);
      const float got_out = inout.get(offset);
      o.residual[static_cast<std::size_t>(i)] = got_r;
      o.out[static_cast<std::size_t>(i)] = got_out;
      const double w = weight.get(j);
      const double exact_out = exact_r[j] * inv_rms * w;
      const double tol_out = (tol_r[j] + std::fabs(exact_r[j]) * rel_inv) * inv_rms * std::fabs(w) +
                             rel * std::fabs(exact_out) + floor;
      o.residual_tolerance[static_cast<std::size_t>(i)] = tol_r[j];
      o.out_tolerance[static_cast<std::size_t>(i)] = tol_out;
      if (!(std::fabs(got_r - exact_r[j]) <= tol_r[j])) {
        ++o.wrong_residual;
        if (o.first_problem.empty()) {
          std::ostringstream text;
          text << "residual element " << i << " is " << got_r << ", float64 reference "
               << exact_r[j] << ", tolerance " << tol_r[j];
          o.first_problem = text.str();
        }
      }
      if (!(std::fabs(got_out - exact_out) <= tol_out)) {
        ++o.wrong_out;
        if (o.first_problem.empty()) {
          std::ostringstream text;
          text << "output element " << i << " is " << got_out << ", float64 reference " << exact_out
               << ", tolerance " << tol_out;
          o.first_problem = text.str();
        }
      }
    }
  }
  for (auto offset : non_element_offsets(inout, offsets)) {
    if (!is_poison(dtype, inout.at(offset)) || !is_poison(dtype, residual.at(offset)))
      ++o.padding_written;
  }
  o.hash = fnv1a(&o.out[0], o.out.size() * sizeof(float),
                 fnv1a(&o.residual[0], o.residual.size() * sizeof(float)));
  return o;
}

inline void expect_fused_correct(const FusedOutcome& o, const std::string& what,
                                 bool expect_identical_on_every_rank) {
  const std::string context = what + " (seed base " + std::to_string(base_seed()) + ")";
  EXPECT_EQ(o.wrong_residual, 0) << context << ": #wrong residual; first: " << o.first_problem;
  EXPECT_EQ(o.wrong_out, 0) << context << ": #wrong output; first: " << o.first_problem;
  EXPECT_EQ(o.padding_written, 0) << context << ": padding or guard elements were written";
  if (expect_identical_on_every_rank) {
    const auto differing = ranks_differing_from_rank0(o.hash);
    EXPECT_TRUE(differing.empty())
        << context << ": results differ from rank 0's on ranks " << join(differing);
  }
}

// Counts elements where a and b differ by more than `tolerance(i)`.
template <class Tolerance>
std::int64_t count_differences(const std::vector<float>& a, const std::vector<float>& b,
                               Tolerance&& tolerance) {
  if (a.size() != b.size()) return static_cast<std::int64_t>(std::max(a.size(), b.size()));
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(static_cast<double>(a[i]) - b[i]) <= tolerance(i))) ++differ;
  return differ;
}

}  // namespace peerplan::comm_test
