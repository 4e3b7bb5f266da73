// SPDX-License-Identifier: Apache-2.0
// Plan files: "peerplan-plans 1", then "all_reduce dtype=... bytes=...|count=..."
// lines; every error names path:line.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "test_support.hpp"
#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {
namespace {

using test::Buffers;
using test::invalid_argument_message;
using test::says;
using test::Sizes;

std::string file_error(std::string_view text) {
  return invalid_argument_message([&] { parse_plan_file(text, "jobs/train.plans"); });
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.is_open()) << path;
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

TEST(PlanFile, HeaderAloneDeclaresNothing) {
  EXPECT_TRUE((parse_plan_file("peerplan-plans 1\n", "p")).empty());
  EXPECT_TRUE((parse_plan_file("\n# plans\n  peerplan-plans   1  \n\n", "p")).empty());
}

TEST(PlanFile, EntriesInBytesOrCount) {
  EXPECT_EQ(parse_plan_file("peerplan-plans 1\n"
                            "all_reduce dtype=bf16 bytes=1M\n"
                            "all_reduce count=1000 dtype=f32\n",
                            "p"),
            (Buffers{DeclaredBuffer{DataType::bf16, 524288}, DeclaredBuffer{DataType::f32, 1000}}));
}

TEST(PlanFile, RangesTypeListsCommentsAndCrlf) {
  EXPECT_EQ(parse_plan_file("peerplan-plans 1\r\n"
                            "all_reduce dtype=f16,float bytes=4-16 step=x2  # small ones\r\n"
                            "\t# count ranges count elements\r\n"
                            "all_reduce dtype=bf16 count=1-3 step=+2\r\n",
                            "p"),
            (Buffers{DeclaredBuffer{DataType::f16, 2}, DeclaredBuffer{DataType::f16, 4},
                     DeclaredBuffer{DataType::f16, 8}, DeclaredBuffer{DataType::bf16, 1},
                     DeclaredBuffer{DataType::bf16, 3}, DeclaredBuffer{DataType::f32, 1},
                     DeclaredBuffer{DataType::f32, 2}, DeclaredBuffer{DataType::f32, 4}}));
}

TEST(PlanFile, RepeatedEntriesCountOnce) {
  EXPECT_EQ(parse_plan_file("peerplan-plans 1\n"
                            "all_reduce dtype=bf16 bytes=1K\n"
                            "all_reduce dtype=bf16 count=512\n",
                            "p"),
            (Buffers{DeclaredBuffer{DataType::bf16, 512}}));
}

TEST(PlanFile, MissingOrWrongHeader) {
  EXPECT_TRUE(says(file_error(""),
                   {"plan file jobs/train.plans:1:", "no header line", "'peerplan-plans 1'"}));
  EXPECT_TRUE(says(file_error("# only a comment\n"), {"no header line"}));
  EXPECT_TRUE(says(file_error("\n\nall_reduce dtype=bf16 bytes=1K\n"),
                   {"jobs/train.plans:3:", "expected the header"}));
  EXPECT_TRUE(says(file_error("peerplan-tuning 1\n"), {"expected the header"}));
  EXPECT_TRUE(says(file_error("peerplan-plans\n"), {"expected the header"}));
  EXPECT_TRUE(says(file_error("peerplan-plans 2\n"), {":1: format version 2 is not supported"}));
}

TEST(PlanFile, ErrorsNameTheLineCountingCommentsAndBlanks) {
  EXPECT_TRUE(
      says(file_error("# plans\npeerplan-plans 1\n\n# next\nall_reduce dtype=f32 bytes=6\n"),
           {"plan file jobs/train.plans:5: ", "6 bytes is not a whole number of f32 elements"}));
}

TEST(PlanFile, EntryErrorsSayWhatToWrite) {
  const std::string header = "peerplan-plans 1\n";
  EXPECT_TRUE(says(file_error(header + "all_gather dtype=bf16 bytes=1K"),
                   {":2:", "all-reduces only", "all_reduce dtype=bf16 bytes=1M"}));
  EXPECT_TRUE(
      says(file_error(header + "all_reduce dtype = bf16 bytes=1K"), {"'dtype' is not key=value"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce =bf16 bytes=1K"), {"is not key=value"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtyp=bf16 bytes=1K"),
                   {"unknown key 'dtyp'", "the keys are dtype"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 bytes=1K bytes=2K"),
                   {"'bytes' is given twice"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce bytes=1K"), {"has no dtype"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16"), {"neither bytes nor count"}));
  EXPECT_TRUE(
      says(file_error(header + "all_reduce dtype=bf16 bytes=2 count=1"), {"both bytes and count"}));
  EXPECT_TRUE(
      says(file_error(header + "all_reduce dtype=int8 bytes=1K"), {"not a type peerplan reduces"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 bytes=1K-1M"), {"no step"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 bytes=0"), {"a size of 0"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 bytes=1K step=x2"),
                   {"a step belongs to a range"}));
}

TEST(PlanFile, CountErrorsSpeakOfElements) {
  const std::string header = "peerplan-plans 1\n";
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 count=0"),
                   {"a count of 0 declares nothing; start at 1"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 count=1Q"),
                   {"'1Q' is not a count; write elements"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 count=1-3000 step=+1"),
                   {"names 3000 counts"}));
  EXPECT_TRUE(says(file_error(header + "all_reduce dtype=bf16 count=1-3 step=y"), {"+<elements>"}));
}

TEST(PlanFile, TheDocumentedExampleParsesAndIsTheFixture) {
  const std::string fixture = read_text(PEERPLAN_TEST_FIXTURES "/nccl_interposer/example.plans");
  const auto buffers = parse_plan_file(fixture, "example.plans");
  // bf16 and f16 at 1K..64K (7 sizes each; bf16 adds 16M), f32 at 524288.
  EXPECT_EQ(buffers.size(), 7u + 8u + 1u);
  EXPECT_EQ(buffers.back(), (DeclaredBuffer{DataType::f32, 524288}));
  EXPECT_TRUE(says(read_text(PEERPLAN_INTERPOSER_DOC), {fixture}))
      << "docs/nccl-interposer.md shows tests/fixtures/nccl_interposer/example.plans verbatim";
}

}  // namespace
}  // namespace peerplan::nccl_interposer
