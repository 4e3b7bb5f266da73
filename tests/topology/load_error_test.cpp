// SPDX-License-Identifier: Apache-2.0
// A topology file that is missing or is not an hwloc XML export fails with
// InvalidArgument naming the file and saying how to make a good one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "peerplan/errors.hpp"
#include "topology/topology.hpp"

namespace peerplan::topology {
namespace {

std::string fixture_path(const std::string& name) {
  return std::string(PEERPLAN_TEST_FIXTURES) + "/topology/" + name;
}

// A file under the temp directory, removed when the test ends.
class ScratchFile {
 public:
  ScratchFile(const std::string& name, const std::string& content)
      : path_(std::filesystem::temp_directory_path() /
              ("peerplan-topology-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path_) << content;
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Loads `path` expecting InvalidArgument; returns its message.
std::string load_failure(const std::string& path) {
  try {
    (void)Topology::load_xml(path);
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.code(), ErrorCode::invalid_argument);
    return error.what();
  }
  ADD_FAILURE() << "loading '" << path << "' did not fail";
  return {};
}

void expect_helpful(const std::string& message, const std::string& path) {
  EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("hwloc XML"), std::string::npos) << message;
  EXPECT_NE(message.find("lstopo"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_TOPO_FILE"), std::string::npos) << message;
}

TEST(TopologyLoadError, MissingFile) {
  const std::string path = "/nonexistent-peerplan-dir/machine.xml";
  const auto message = load_failure(path);
  expect_helpful(message, path);
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

TEST(TopologyLoadError, DirectoryInsteadOfFile) {
  const std::string path = std::string(PEERPLAN_TEST_FIXTURES) + "/topology";
  const auto message = load_failure(path);
  expect_helpful(message, path);
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
}

TEST(TopologyLoadError, NotXmlAtAll) {
  const ScratchFile file("plain.txt", "Machine (4314MB total)\n  Package L#0\n");  // lstopo text
  expect_helpful(load_failure(file.path()), file.path());
}

TEST(TopologyLoadError, XmlButNotHwloc) {
  const ScratchFile file("other.xml", "<?xml version=\"1.0\"?>\n<html><body/></html>\n");
  expect_helpful(load_failure(file.path()), file.path());
}

TEST(TopologyLoadError, TruncatedExport) {
  std::ifstream in(fixture_path("2gpu-one-switch.xml"));
  const std::string whole{std::istreambuf_iterator<char>(in), {}};
  ASSERT_GT(whole.size(), 1000u);
  const ScratchFile file("truncated.xml", whole.substr(0, whole.size() / 2));
  expect_helpful(load_failure(file.path()), file.path());
}

TEST(TopologyLoadError, Hwloc3ExportSaysHowToWriteAVersion2One) {
  // hwloc 2.x cannot read the XML that hwloc 3.x writes by default; the
  // message must not send the user back to the command that wrote it.
  const std::string path = fixture_path("hwloc3-export.xml");
  const auto message = load_failure(path);
  expect_helpful(message, path);
  EXPECT_NE(message.find("3.0"), std::string::npos) << message;
  EXPECT_NE(message.find("--export-xml-flags v2"), std::string::npos) << message;
}

TEST(TopologyLoadError, LoadWithAPathReadsTheFile) {
  const auto topology = Topology::load(fixture_path("2gpu-one-switch.xml"));
  EXPECT_FALSE(topology.is_live());
  EXPECT_EQ(topology.gpus().size(), 2u);
  EXPECT_THROW(Topology::load("/nonexistent-peerplan-dir/machine.xml"), InvalidArgument);
}

}  // namespace
}  // namespace peerplan::topology
