// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/size_ranges.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "core/value_parsing.hpp"
#include "nccl_interposer/text_fields.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

std::string_view noun(SizeUnit unit) { return unit == SizeUnit::bytes ? "size" : "count"; }

std::size_t parse_one_size(std::string_view text, SizeUnit unit) {
  const std::optional<std::size_t> value = core::parse_size(text);
  if (!value) {
    throw InvalidArgument(quoted(text) + " is not a " + std::string(noun(unit)) + "; write " +
                          (unit == SizeUnit::bytes ? "bytes" : "elements") +
                          " as digits with an optional K, M or G (1024 multiples), e.g. 1M");
  }
  if (*value == 0) {
    throw InvalidArgument(
        "a " + std::string(noun(unit)) + " of 0 declares nothing; start at " +
        (unit == SizeUnit::bytes ? "one element (2 bytes for f16 and bf16, 4 for f32)" : "1"));
  }
  return *value;
}

struct Step {
  bool multiply = false;  // x factor, else + increment
  std::size_t amount = 0;
};

Step parse_step(std::string_view text, SizeUnit unit) {
  const std::string fix = std::string("write x<factor> (multiply, like nccl-tests' -f) or +<") +
                          (unit == SizeUnit::bytes ? "bytes" : "elements") +
                          "> (add, like -i), e.g. x2 or +1M";
  if (text.size() < 2 || (text.front() != 'x' && text.front() != 'X' && text.front() != '+'))
    throw InvalidArgument("the step " + quoted(text) + " is not x<factor> or +<amount>; " + fix);
  Step step;
  step.multiply = text.front() != '+';
  const std::string_view amount = text.substr(1);
  std::optional<std::size_t> value;
  if (!step.multiply) {
    value = core::parse_size(amount);
  } else if (const auto factor = core::parse_integer(amount); factor && *factor >= 0) {
    value = static_cast<std::size_t>(*factor);
  }
  if (!value) throw InvalidArgument("the step " + quoted(text) + " is not a number; " + fix);
  if (step.multiply && *value < 2)
    throw InvalidArgument("the step " + quoted(text) + " never grows the range; use x2 or more");
  if (!step.multiply && *value == 0)
    throw InvalidArgument("the step " + quoted(text) + " never grows the range; use +1 or more");
  step.amount = *value;
  return step;
}

std::size_t sizes_in_range(std::size_t first, std::size_t last, const Step& step) {
  if (!step.multiply) return (last - first) / step.amount + 1;
  std::size_t sizes = 1;
  for (std::size_t size = first; size <= last / step.amount; size *= step.amount) ++sizes;
  return sizes;
}

}  // namespace

std::vector<std::size_t> expand_sizes(std::string_view sizes, std::string_view step_text,
                                      SizeUnit unit) {
  const std::size_t dash = sizes.find('-');
  if (dash == std::string_view::npos) {
    const std::size_t size = parse_one_size(sizes, unit);
    if (!step_text.empty()) {
      throw InvalidArgument("the step " + quoted(step_text) + " follows the single " +
                            std::string(noun(unit)) + " " + quoted(sizes) +
                            "; a step belongs to a range: remove it, or write a range first-last "
                            "such as 1K-64M");
    }
    return {size};
  }
  const std::size_t first = parse_one_size(trim(sizes.substr(0, dash)), unit);
  const std::size_t last = parse_one_size(trim(sizes.substr(dash + 1)), unit);
  if (first > last) {
    throw InvalidArgument("the range " + quoted(sizes) +
                          " starts above its end; write the smaller value first");
  }
  if (first == last && step_text.empty()) return {first};
  if (step_text.empty()) {
    throw InvalidArgument("the range " + quoted(sizes) +
                          " has no step; add one: x2 multiplies by 2 (nccl-tests' -f 2), +1M "
                          "adds 1M (-i 1M)");
  }
  const Step step = parse_step(step_text, unit);
  const std::size_t count = sizes_in_range(first, last, step);
  if (count > kMaxSizesPerRange) {
    throw InvalidArgument("the range " + quoted(sizes) + " with step " + quoted(step_text) +
                          " names " + std::to_string(count) + " " + std::string(noun(unit)) +
                          "s, more than the " + std::to_string(kMaxSizesPerRange) +
                          " one range may declare; use a larger step, or a multiplying one (x2)");
  }
  std::vector<std::size_t> values;
  values.reserve(count);
  for (std::size_t size = first;;) {
    values.push_back(size);
    // Stop before the next size passes the end (or overflows).
    if (step.multiply ? size > last / step.amount : last - size < step.amount) break;
    size = step.multiply ? size * step.amount : size + step.amount;
  }
  return values;
}

std::vector<DataType> parse_dtype_list(std::string_view list) {
  std::vector<DataType> dtypes;
  for (std::string_view item : split(list, ',')) {
    item = trim(item);
    if (item.empty()) {
      throw InvalidArgument("the type list " + quoted(list) +
                            " has an empty item; separate types with single commas, e.g. "
                            "bf16,f16,f32");
    }
    const std::optional<DataType> dtype = parse_data_type(item);
    if (!dtype) {
      throw InvalidArgument(quoted(item) +
                            " is not a type peerplan reduces; the types are f16 (half), bf16 "
                            "(bfloat16) and f32 (float): remove it (NCCL keeps running all-reduces "
                            "of other types)");
    }
    dtypes.push_back(*dtype);
  }
  return dtypes;
}

void append_buffers_of_bytes(std::span<const DataType> dtypes, std::span<const std::size_t> bytes,
                             std::vector<DeclaredBuffer>& out, bool named) {
  for (const DataType dtype : dtypes) {
    const std::size_t element = element_size(dtype);
    for (const std::size_t size : bytes) {
      if (size % element != 0) {
        throw InvalidArgument(std::to_string(size) + " bytes is not a whole number of " +
                              to_string(dtype) + " elements (" + std::to_string(element) +
                              " bytes each); declare sizes that are multiples of " +
                              std::to_string(element) + " bytes");
      }
      out.push_back({dtype, size / element, named});
    }
  }
}

void sort_and_dedup(std::vector<DeclaredBuffer>& buffers) {
  std::sort(buffers.begin(), buffers.end());
  // std::unique, but keeping `named` of every repeat (equality ignores it).
  auto kept = buffers.begin();
  for (auto it = buffers.begin(); it != buffers.end(); ++it) {
    if (kept != buffers.begin() && *std::prev(kept) == *it) {
      std::prev(kept)->named = std::prev(kept)->named || it->named;
    } else {
      *kept++ = *it;
    }
  }
  buffers.erase(kept, buffers.end());
}

}  // namespace peerplan::nccl_interposer
