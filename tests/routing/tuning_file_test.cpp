// SPDX-License-Identifier: Apache-2.0
// Tuning files: a good file, every malformed case (each error names the
// file and the line, and says what to change), several entries, comments,
// blank lines, CRLF, the round trip through format_tuning_file, and reading
// from disk.
#include "routing/tuning_file.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "peerplan/errors.hpp"

namespace peerplan::routing {
namespace {

constexpr const char* kSource = "/etc/peerplan/node.tune";

constexpr const char* kGoodFile =
    "# peerplan tuning file (written by peerplan_tune on 2025-06-01)\n"
    "peerplan-tuning 1\n"
    "\n"
    "[entry]\n"
    "fingerprint = cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18\n"
    "one_shot_max_bytes = 65536\n"
    "two_shot_min_bytes = 1048576\n"
    "two_shot_max_bytes = 16777216\n"
    "fused_max_bytes = 3670016\n"
    "measured = peerplan_tune 0.1.0, 2025-06-01, bf16 #graphs\n";

TuningFile parse(const std::string& text) { return parse_tuning_file(text, kSource); }

// The message of the InvalidArgument `text` must raise; fails the test if
// it parses.
std::string rejection(const std::string& text) {
  try {
    parse(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return {};
}

// The error names the file and `line`, and contains `hint` (what to change).
void expect_rejected_at(const std::string& text, int line, const std::string& hint) {
  const std::string message = rejection(text);
  EXPECT_NE(message.find(std::string("tuning file ") + kSource), std::string::npos) << message;
  EXPECT_NE(message.find(", line " + std::to_string(line) + ":"), std::string::npos) << message;
  EXPECT_NE(message.find(hint), std::string::npos) << message;
}

std::string header_and(const std::string& body) { return "peerplan-tuning 1\n" + body; }

// The protocol window `member` as an entry holding only `key = value`
// reads it; that entry must set no cutoff and no other window.
std::optional<Window> window_read_alone(std::optional<Window> ProtocolTuning::*member,
                                        const std::string& key, const std::string& value) {
  const TuningFile file =
      parse(header_and("[entry]\nfingerprint = cuda ranks=2\n" + key + " = " + value + "\n"));
  EXPECT_EQ(file.entries.at(0).cutoffs, RouteCutoffs{}) << key << ": not a cutoff";
  ProtocolTuning others = file.entries.at(0).protocols;
  others.*member = std::nullopt;
  EXPECT_TRUE(is_empty(others)) << key << ": no other protocol window";
  return file.entries.at(0).protocols.*member;
}

TEST(TuningFile, ReadsEveryField) {
  const TuningFile file = parse(kGoodFile);
  ASSERT_EQ(file.entries.size(), 1u);
  const TuningEntry& entry = file.entries[0];
  EXPECT_EQ(entry.fingerprint, "cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18");
  EXPECT_EQ(entry.cutoffs, (RouteCutoffs{65536, 16777216, 3670016, 1048576}));
  // '#' inside a value is text, not a comment.
  EXPECT_EQ(entry.measured, "peerplan_tune 0.1.0, 2025-06-01, bf16 #graphs");
  EXPECT_EQ(entry.line, 4);
}

TEST(TuningFile, LeftOutAndAutoFieldsStayAutomatic) {
  const TuningFile file = parse(header_and(
      "[entry]\nfingerprint = host ranks=2\none_shot_max_bytes = 64K\nfused_max_bytes = auto\n"));
  ASSERT_EQ(file.entries.size(), 1u);
  RouteCutoffs expected;
  expected.one_shot_max_bytes = 65536;  // suffixes as in PEERPLAN_*_BYTES
  EXPECT_EQ(file.entries[0].cutoffs, expected);
  EXPECT_TRUE(file.entries[0].measured.empty());
}

TEST(TuningFile, ReadsTheProtocolWindows) {
  const TuningFile file =
      parse(header_and("[entry]\nfingerprint = cuda ranks=2\none_shot_lamport = 64K..\n"
                       "fused_lamport = 4M\nfused_ll = auto\n"));
  ASSERT_EQ(file.entries.size(), 1u);
  ProtocolTuning expected;
  expected.one_shot_lamport = Window::above_bytes(65536);
  expected.fused_lamport = Window::up_to_bytes(4 << 20);
  EXPECT_EQ(file.entries[0].protocols, expected);
  EXPECT_EQ(file.entries[0].cutoffs, RouteCutoffs{}) << "protocol keys are not cutoffs";
  expect_rejected_at(header_and("[entry]\nfingerprint = f\nfused_ll = lines\n"), 4,
                     "is not a window");
  expect_rejected_at(header_and("[entry]\nfingerprint = f\ntwo_shot_dma = dma\n"), 4,
                     "write auto, never (or off), all");
  expect_rejected_at(header_and("[entry]\nfingerprint = f\nfused_ll = 1M\nfused_ll = 2M\n"), 5,
                     "set again");
  // A range the wrong way round holds no size: an error, not "never".
  expect_rejected_at(header_and("[entry]\nfingerprint = f\nfused_lamport = 4M..64K\n"), 4,
                     "holds no message");
  expect_rejected_at(header_and("[entry]\nfingerprint = f\nfused_lamport = 64K..64K\n"), 4,
                     "holds no message");
}

TEST(TuningFile, RefusesTheProtocolKeysOfOlderFilesWithTheirReplacement) {
  const std::pair<const char*, const char*> renamed[] = {
      {"one_shot_ll_max_bytes", "one_shot_lamport = N.."},
      {"fused_lamport_after_bytes", "fused_lamport = A..B"},
      {"fused_lamport_max_bytes", "fused_lamport = A..B"},
      {"fused_ll_max_bytes", "fused_ll = N"},
      {"two_shot_dma_after_bytes", "two_shot_dma = N.."},
      {"two_shot_lamport_max_bytes", "two_shot_lamport = N"},
  };
  for (const auto& [old_key, replacement] : renamed) {
    expect_rejected_at(header_and("[entry]\nfingerprint = f\n" + std::string(old_key) + " = 64K\n"),
                       4, replacement);
  }
}

TEST(TuningFile, ReadsTheTwoShotCopyEngineWindow) {
  const auto dma = [](const std::string& value) {
    return window_read_alone(&ProtocolTuning::two_shot_dma, "two_shot_dma", value);
  };
  EXPECT_EQ(dma("16M.."), Window::above_bytes(std::size_t{16} << 20));
  EXPECT_EQ(dma("33554432.."), Window::above_bytes(std::size_t{32} << 20));
  EXPECT_EQ(dma("all"), Window::every_size());  // copy engines at every size
  EXPECT_EQ(dma("16M..64M"), (Window{std::size_t{16} << 20, std::size_t{64} << 20}));
  EXPECT_EQ(dma("auto"), std::nullopt);
  // The unknown-key message lists it with the other keys.
  expect_rejected_at(header_and("[entry]\nfingerprint = f\ntwo_shot_dma_after = 1\n"), 4,
                     "fused_ll, two_shot_dma, two_shot_lamport, one_shot_grid, measured");
}

TEST(TuningFile, ReadsTheTwoShotLamportWindow) {
  const auto lamport = [](const std::string& value) {
    return window_read_alone(&ProtocolTuning::two_shot_lamport, "two_shot_lamport", value);
  };
  EXPECT_EQ(lamport("256K"), Window::up_to_bytes(std::size_t{256} << 10));
  EXPECT_EQ(lamport("1048576"), Window::up_to_bytes(std::size_t{1} << 20));
  EXPECT_EQ(lamport("never"), Window::never());
  EXPECT_EQ(lamport("OFF"), Window::never());
  EXPECT_EQ(lamport("all"), Window::every_size());
  EXPECT_EQ(lamport("auto"), std::nullopt);
  // 0 is no longer "never": a window up to 0 bytes is refused.
  expect_rejected_at(header_and("[entry]\nfingerprint = f\ntwo_shot_lamport = 0\n"), 4,
                     "write never");
  expect_rejected_at(header_and("[entry]\nfingerprint = f\ntwo_shot_lamport = lamport\n"), 4,
                     "is not a window");
  // Together with the copy-engine window: each keeps its own value.
  const TuningFile both =
      parse(header_and("[entry]\nfingerprint = cuda ranks=2\ntwo_shot_lamport = 512K\n"
                       "two_shot_dma = 32M..\n"));
  EXPECT_EQ(both.entries.at(0).protocols.two_shot_lamport,
            Window::up_to_bytes(std::size_t{512} << 10));
  EXPECT_EQ(both.entries.at(0).protocols.two_shot_dma, Window::above_bytes(std::size_t{32} << 20));
}

TEST(TuningFile, ReadsTheOneShotGrid) {
  const TuningFile file = parse(header_and(
      "[entry]\nfingerprint = cuda ranks=2\none_shot_grid = 64K:8 1M:64  4194304:132\n"));
  ASSERT_EQ(file.entries.size(), 1u);
  const std::vector<GridStep> expected{{65536, 8}, {1 << 20, 64}, {4 << 20, 132}};
  EXPECT_EQ(file.entries[0].shapes.one_shot_grid, expected);
  EXPECT_EQ(file.entries[0].cutoffs, RouteCutoffs{}) << "not a cutoff";
  EXPECT_TRUE(is_empty(file.entries[0].protocols)) << "not a protocol window";
  // "auto" keeps the transport's default, like the byte keys' "auto".
  const TuningFile automatic =
      parse(header_and("[entry]\nfingerprint = cuda ranks=2\none_shot_grid = AUTO\n"));
  EXPECT_TRUE(automatic.entries.at(0).shapes.one_shot_grid.empty());
  // Left out: no steps either.
  EXPECT_TRUE(parse(kGoodFile).entries.at(0).shapes.one_shot_grid.empty());
}

TEST(TuningFileErrors, MalformedOneShotGrid) {
  const auto grid_at_line_5 = [](const std::string& value) {
    return header_and("[entry]\nfingerprint = x\n\none_shot_grid = " + value + "\n");
  };
  // Each names the line, the problem parse_one_shot_grid found, and what to write.
  expect_rejected_at(grid_at_line_5("64K"), 5, "is not a one-shot grid: \"64K\" is not");
  expect_rejected_at(grid_at_line_5("64K:eight"), 5, "is not <size>:<blocks>");
  expect_rejected_at(grid_at_line_5("64K:0"), 5, "blocks must be 1..1024");
  expect_rejected_at(grid_at_line_5("64K:1025"), 5, "blocks must be 1..1024");
  expect_rejected_at(grid_at_line_5("1M:64 64K:8"), 5, "sizes must increase");
  expect_rejected_at(grid_at_line_5("64K:8 64K:16"), 5, "sizes must increase");
  expect_rejected_at(grid_at_line_5("64K:8 1M"), 5, "e.g. 'one_shot_grid = 64K:8 1M:64'");
  expect_rejected_at(grid_at_line_5(""), 5, "'one_shot_grid' is empty");
  expect_rejected_at(grid_at_line_5("off"), 5, "or auto (the transport's default grid)");
  // At most once per entry.
  const std::string twice =
      header_and("[entry]\nfingerprint = x\none_shot_grid = 64K:8\none_shot_grid = 1M:64\n");
  expect_rejected_at(twice, 5, "'one_shot_grid' is set again");
  expect_rejected_at(twice, 5, "first on line 4");
}

TEST(TuningFile, SeveralEntriesInFileOrder) {
  const TuningFile file =
      parse(header_and("[entry]\nfingerprint = host ranks=2\none_shot_max_bytes = 1000\n"
                       "[entry]\nfingerprint = host ranks=4\none_shot_max_bytes = 2000\n"
                       "\n[entry]\nfingerprint = cuda ranks=2 gpu=\"NVIDIA L40S\" links=PIX\n"
                       "two_shot_max_bytes = 0\n"));
  ASSERT_EQ(file.entries.size(), 3u);
  EXPECT_EQ(file.entries[0].line, 2);
  EXPECT_EQ(file.entries[1].line, 5);
  EXPECT_EQ(file.entries[2].line, 9);
  ASSERT_NE(find_entry(file, "host ranks=4"), nullptr);
  EXPECT_EQ(find_entry(file, "host ranks=4")->cutoffs.one_shot_max_bytes, 2000u);
  const TuningEntry* l40s = find_entry(file, "cuda ranks=2 gpu=\"NVIDIA L40S\" links=PIX");
  ASSERT_NE(l40s, nullptr);
  EXPECT_EQ(l40s->cutoffs.two_shot_max_bytes, 0u);
  EXPECT_EQ(find_entry(file, "host ranks=3"), nullptr);
  EXPECT_EQ(find_entry(file, "host ranks=2 "), nullptr);  // exact match only
}

TEST(TuningFile, CommentsBlankLinesAndIndentationAreIgnored) {
  const TuningFile file = parse(
      "\n# leading comment\n   \n\t# indented comment\npeerplan-tuning 1\n# between\n"
      "  [entry]  \n  fingerprint   =   host ranks=2  \n\n# inside an entry\n"
      "\tone_shot_max_bytes=4096\n");
  ASSERT_EQ(file.entries.size(), 1u);
  EXPECT_EQ(file.entries[0].fingerprint, "host ranks=2");
  EXPECT_EQ(file.entries[0].cutoffs.one_shot_max_bytes, 4096u);
  EXPECT_EQ(file.entries[0].line, 7);
}

TEST(TuningFile, CrlfLineEndings) {
  std::string crlf;
  for (char c : std::string(kGoodFile)) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  const TuningFile file = parse(crlf);
  ASSERT_EQ(file.entries.size(), 1u);
  EXPECT_EQ(file.entries[0].fingerprint, "cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18");
  EXPECT_EQ(file.entries[0].cutoffs.fused_max_bytes, 3670016u);
  EXPECT_EQ(file.entries[0].measured.back(), 's');  // no '\r' left
  // And line numbers still count CRLF lines: line 6 is the bad one.
  expect_rejected_at("peerplan-tuning 1\r\n\r\n[entry]\r\nfingerprint = a\r\n\r\nbogus = 1\r\n", 6,
                     "unknown key 'bogus'");
}

TEST(TuningFile, NoTrailingNewline) {
  const TuningFile file = parse(header_and("[entry]\nfingerprint = host ranks=2"));
  ASSERT_EQ(file.entries.size(), 1u);
  EXPECT_EQ(file.entries[0].fingerprint, "host ranks=2");
}

TEST(TuningFile, HeaderOnlyHasNoEntries) {
  EXPECT_TRUE(parse("peerplan-tuning 1\n").entries.empty());
}

TEST(TuningFileErrors, MissingHeader) {
  expect_rejected_at("", 1, "'peerplan-tuning 1'");
  expect_rejected_at("# only comments\n\n", 1, "no header line");
  expect_rejected_at("# comment\n[entry]\nfingerprint = x\n", 2, "expected the header");
  expect_rejected_at("{\"json\": true}\n", 1, "is this a tuning file");
  expect_rejected_at("peerplan-tuning\n", 1, "expected the header");
  expect_rejected_at("peerplan-tuning 1 extra\n", 1, "expected the header");
}

TEST(TuningFileErrors, UnsupportedVersion) {
  expect_rejected_at("\npeerplan-tuning 2\n", 2, "regenerate the file");
}

TEST(TuningFileErrors, UnknownKey) {
  const std::string text = header_and("[entry]\nfingerprint = x\none_shot_max = 1\n");
  expect_rejected_at(text, 4, "unknown key 'one_shot_max'");
  // ... and lists the keys there are.
  expect_rejected_at(text, 4, "one_shot_max_bytes, two_shot_min_bytes");
}

TEST(TuningFileErrors, UnknownSection) {
  expect_rejected_at(header_and("[machine]\n"), 2, "the only section is '[entry]'");
}

TEST(TuningFileErrors, LineWithoutEquals) {
  expect_rejected_at(header_and("[entry]\nfingerprint host ranks=2\n"), 3, "'key = value'");
  expect_rejected_at(header_and("[entry]\n= host ranks=2\n"), 3, "'key = value'");
}

TEST(TuningFileErrors, KeyOutsideAnEntry) {
  expect_rejected_at(header_and("fingerprint = host ranks=2\n"), 2, "put '[entry]'");
}

TEST(TuningFileErrors, BadNumber) {
  for (const char* bad : {"64KB", "-1", "1.5M", "", "lots", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    expect_rejected_at(
        header_and("[entry]\nfingerprint = x\n\nfused_max_bytes = " + std::string(bad) + "\n"), 5,
        "e.g. 65536 or 64K");
  }
}

// kAutoCutoff's own number would silently mean auto; the environment
// refuses it too.
TEST(TuningFileErrors, TheAutoSentinelAsANumber) {
  for (const char* key : {"one_shot_max_bytes", "two_shot_min_bytes", "two_shot_chunk_bytes"}) {
    SCOPED_TRACE(key);
    const std::string text =
        header_and("[entry]\nfingerprint = x\n" + std::string(key) + " = 18446744073709551615\n");
    expect_rejected_at(text, 4, std::string("'") + key + " = 18446744073709551615'");
    expect_rejected_at(text, 4, "write auto");
  }
}

// Pieces round down to multiples of 256 bytes: 1..255 would mean "never
// split", the opposite of asking for small pieces.
TEST(TuningFileErrors, TwoShotPiecesBelow256Bytes) {
  for (const char* small : {"1", "255"}) {
    SCOPED_TRACE(small);
    expect_rejected_at(
        header_and("[entry]\nfingerprint = x\ntwo_shot_chunk_bytes = " + std::string(small) + "\n"),
        4, "use 0 to never split, or at least 256");
  }
  const auto piece = [](const char* value) {
    return parse(header_and("[entry]\nfingerprint = x\ntwo_shot_chunk_bytes = " +
                            std::string(value) + "\n"))
        .entries.at(0)
        .cutoffs.two_shot_chunk_bytes;
  };
  EXPECT_EQ(piece("0"), 0u);
  EXPECT_EQ(piece("256"), 256u);
  EXPECT_EQ(piece("auto"), kAutoCutoff);
}

TEST(TuningFileErrors, DuplicateKeyInAnEntry) {
  const std::string text =
      header_and("[entry]\nfingerprint = x\none_shot_max_bytes = 1\none_shot_max_bytes = 2\n");
  expect_rejected_at(text, 5, "'one_shot_max_bytes' is set again");
  expect_rejected_at(text, 5, "first on line 4");
  // The same key in two entries is fine.
  EXPECT_EQ(parse(header_and("[entry]\nfingerprint = x\none_shot_max_bytes = 1\n"
                             "[entry]\nfingerprint = y\none_shot_max_bytes = 2\n"))
                .entries.size(),
            2u);
}

TEST(TuningFileErrors, EntryWithoutFingerprint) {
  // Reported at the entry's [entry] line, whether another entry or the end follows.
  expect_rejected_at(header_and("[entry]\none_shot_max_bytes = 1\n[entry]\nfingerprint = x\n"), 2,
                     "add 'fingerprint = ...'");
  expect_rejected_at(header_and("[entry]\nfingerprint = x\n\n[entry]\n"), 5, "no fingerprint");
  expect_rejected_at(header_and("[entry]\nfingerprint =   \n"), 3, "the fingerprint is empty");
}

TEST(TuningFileErrors, SameFingerprintTwice) {
  expect_rejected_at(header_and("[entry]\nfingerprint = x\n[entry]\nfingerprint = x\n"), 4,
                     "same fingerprint as the entry of line 2");
}

TEST(TuningFileFormat, RoundTrip) {
  TuningFile file;
  file.entries.push_back({"cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18",
                          RouteCutoffs{65536, 16777216, 3670016, 1048576},
                          "tool 1, today",
                          0,
                          {},
                          {}});
  RouteCutoffs partial;
  partial.fused_max_bytes = 0;
  file.entries.push_back({"host ranks=3", partial, "", 0, {}, {}});
  file.entries[0].protocols.one_shot_lamport = Window::above_bytes(131072);
  file.entries[0].protocols.fused_lamport = Window::never();
  file.entries[1].protocols.fused_lamport = Window{65536, 4 << 20};
  file.entries[0].protocols.two_shot_dma = Window::above_bytes(67108864);
  file.entries[1].protocols.two_shot_dma = Window::every_size();
  file.entries[0].protocols.two_shot_lamport = Window::up_to_bytes(262144);
  file.entries[1].protocols.two_shot_lamport = Window::never();
  file.entries[1].protocols.fused_ll = Window::up_to_bytes(1000);
  file.entries[0].shapes.one_shot_grid = {{65536, 8}, {1048576, 64}, {4194304, 132}};
  const std::string text = format_tuning_file(file, "written by a test\n\nsecond line");
  EXPECT_NE(text.find("one_shot_grid = 65536:8 1048576:64 4194304:132\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("one_shot_grid", text.find("host ranks=3")), std::string::npos)
      << "a grid without steps is left out:\n"
      << text;
  EXPECT_NE(text.find("one_shot_lamport = 128K..\n"), std::string::npos) << text;
  EXPECT_NE(text.find("two_shot_dma = 64M..\n"), std::string::npos) << text;
  EXPECT_NE(text.find("two_shot_lamport = 256K\n"), std::string::npos) << text;
  EXPECT_NE(text.find("two_shot_lamport = never\n", text.find("host ranks=3")), std::string::npos)
      << text;
  EXPECT_NE(text.find("two_shot_dma = all\n", text.find("host ranks=3")), std::string::npos)
      << text;
  EXPECT_NE(text.find("fused_lamport = 64K..4M\n", text.find("host ranks=3")), std::string::npos)
      << text;
  EXPECT_NE(text.find("fused_ll = 1000\n", text.find("host ranks=3")), std::string::npos) << text;
  EXPECT_EQ(text.rfind("# written by a test\n#\n# second line\npeerplan-tuning 1\n", 0), 0u)
      << text;
  EXPECT_EQ(text.find("one_shot_max_bytes", text.find("host ranks=3")), std::string::npos)
      << "automatic fields are left out:\n"
      << text;
  const TuningFile back = parse(text);
  ASSERT_EQ(back.entries.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.entries[i].fingerprint, file.entries[i].fingerprint);
    EXPECT_EQ(back.entries[i].cutoffs, file.entries[i].cutoffs);
    EXPECT_EQ(back.entries[i].protocols, file.entries[i].protocols);
    EXPECT_EQ(back.entries[i].shapes, file.entries[i].shapes);
    EXPECT_EQ(back.entries[i].measured, file.entries[i].measured);
  }
}

TEST(TuningFileFormat, LineBreaksInTextBecomeSpaces) {
  TuningFile file;
  file.entries.push_back({"host ranks=2", RouteCutoffs{}, "line one\nline two\r\n", 0, {}, {}});
  const TuningFile back = parse(format_tuning_file(file));
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(back.entries[0].measured, "line one line two");
}

TEST(TuningFileFormat, UpsertReplacesTheSameFingerprintAndKeepsOthers) {
  TuningFile file;
  upsert_entry(file, {"a", RouteCutoffs{1, 1, 1, 1}, "", 0, {}, {}});
  upsert_entry(file, {"b", RouteCutoffs{2, 2, 2, 2}, "", 0, {}, {}});
  upsert_entry(file, {"a", RouteCutoffs{3, 3, 3, 3}, "new", 0, {}, {}});
  ASSERT_EQ(file.entries.size(), 2u);
  EXPECT_EQ(file.entries[0].fingerprint, "a");  // replaced in place
  EXPECT_EQ(file.entries[0].cutoffs, (RouteCutoffs{3, 3, 3, 3}));
  EXPECT_EQ(file.entries[0].measured, "new");
  EXPECT_EQ(file.entries[1].cutoffs, (RouteCutoffs{2, 2, 2, 2}));
}

class TuningFileOnDisk : public testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("peerplan_tuning_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = directory_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::filesystem::path directory_;
};

TEST_F(TuningFileOnDisk, ReadsAFile) {
  const TuningFile file = read_tuning_file(write("good.tune", kGoodFile));
  ASSERT_EQ(file.entries.size(), 1u);
  EXPECT_EQ(file.entries[0].cutoffs.two_shot_min_bytes, 1048576u);
}

TEST_F(TuningFileOnDisk, ErrorsNameThePath) {
  const std::string bad = write("bad.tune", header_and("[entry]\nfingerprint = x\nwhat = 1\n"));
  try {
    read_tuning_file(bad);
    FAIL() << "accepted an unknown key";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tuning file " + bad + ", line 4:"), std::string::npos)
        << e.what();
  }
}

TEST_F(TuningFileOnDisk, UnreadablePaths) {
  const std::string missing = (directory_ / "missing.tune").string();
  for (const auto& [path, hint] :
       {std::pair{missing, "does not exist"}, std::pair{directory_.string(), "is a directory"}}) {
    try {
      read_tuning_file(path);
      ADD_FAILURE() << "read " << path;
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      EXPECT_NE(message.find(hint), std::string::npos) << message;
      EXPECT_NE(message.find("PEERPLAN_TUNING_FILE"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace peerplan::routing
