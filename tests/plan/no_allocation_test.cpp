// SPDX-License-Identifier: Apache-2.0
// The lookup contract's point 8 (docs/design.md): the index holds declared keys
// only. 100,000 probes of undeclared row counts leave its size and the heap
// unchanged: this executable replaces the global operator new/delete to count
// allocations, and zero must happen while probing (key building included).
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "oracles/plan_scan.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_index.hpp"
#include "plan_test_support.hpp"

namespace {
std::atomic<std::uint64_t> g_allocations{0};

void* counted_allocate(std::size_t size, std::size_t alignment) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = alignment > alignof(std::max_align_t)
                ? std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)
                : std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) { return counted_allocate(size, 0); }
void* operator new[](std::size_t size) { return counted_allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
  return counted_allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return counted_allocate(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_allocate(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_allocate(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace peerplan::plan {
namespace {

std::size_t heap_in_use() {
#if defined(__GLIBC__)
  return mallinfo2().uordblks;
#else
  return 0;
#endif
}

TEST(NoAllocation, TheCounterSeesAllocations) {
  const std::uint64_t before = g_allocations.load();
  auto* p = new std::vector<int>(100);
  delete p;
  EXPECT_GE(g_allocations.load() - before, 2u);  // proves the replacement is in effect
}

template <class Lookup>
void probe_undeclared_rows() {
  const test::TransformerSet model(32, {1, 2, 4, 8, 16, 32, 64, 128}, 4096);
  const Lookup lookup(model.declarations);
  const std::size_t size_before = lookup.size();
  const std::size_t declared_before = lookup.declarations().size();
  const std::size_t heap_before = heap_in_use();
  const std::uint64_t allocations_before = g_allocations.load();

  std::uint64_t found = 0, probes = 0;
  for (std::int64_t rows = 129; probes < 100000;
       ++rows) {  // every row count above 128 is undeclared
    const TensorLayout layout{rows, 4096};
    found += lookup.find(make_all_reduce_key(DataType::bf16, layout)) != nullptr;
    found += lookup.contains(make_fused_key(DataType::bf16, layout, model.weight_of(7), 1e-6f));
    probes += 2;
  }
  // Hits, for contrast, allocate nothing either.
  const PlanKey declared = make_key(model.declarations[100]);
  const bool hit =
      lookup.find(declared) != nullptr && &lookup.at(declared) == lookup.find(declared);

  const std::uint64_t allocations = g_allocations.load() - allocations_before;
  const std::size_t heap_after = heap_in_use();
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(heap_after, heap_before);
  EXPECT_EQ(found, 0u);
  EXPECT_TRUE(hit);
  EXPECT_EQ(lookup.size(), size_before);
  EXPECT_EQ(lookup.declarations().size(), declared_before);
  EXPECT_EQ(lookup.retired_count(), 0u);
}

TEST(NoAllocation, IndexProbesOfUndeclaredRowsAllocateNothing) {
  probe_undeclared_rows<PlanIndex>();
}

TEST(NoAllocation, ScanProbesOfUndeclaredRowsAllocateNothing) { probe_undeclared_rows<PlanScan>(); }

}  // namespace
}  // namespace peerplan::plan
