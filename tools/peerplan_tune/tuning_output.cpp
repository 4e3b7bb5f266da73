// SPDX-License-Identifier: Apache-2.0
#include "tuning_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "peerplan/errors.hpp"

namespace peerplan::tune {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  throw InvalidArgument("--out " + path + ": " + problem);
}

// The directory the file goes to ("." for a bare file name).
fs::path directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// The entries of the file at `path`, none when it does not exist. The
// tool's own reading, so that its errors speak of --out (the library's
// read_tuning_file speaks of Config::tuning_file / PEERPLAN_TUNING_FILE).
routing::TuningFile read_existing(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (fs::is_directory(status))
    refuse(path, "is a directory; name a file (e.g. --out " +
                     (fs::path(path) / "peerplan.tune").string() + ")");
  if (!fs::exists(status)) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in)
    refuse(path, std::string("cannot be read (") + std::strerror(errno) +
                     "); fix its permissions or choose another --out");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) refuse(path, "could not be read to the end; choose another --out");
  try {
    return routing::parse_tuning_file(text.str(), path);
  } catch (const InvalidArgument& e) {
    refuse(path,
           "the file exists but is not a tuning file the tool can update (it keeps the file's "
           "other entries, so it must parse): " +
               std::string(e.what()) + ". Choose another --out, or move this file away");
  }
}

}  // namespace

void check_out_path(const std::string& path) {
  if (path.empty()) refuse(path, "empty; name the tuning file to write");
  read_existing(path);
  const fs::path directory = directory_of(path);
  std::error_code error;
  if (!fs::is_directory(directory, error))
    refuse(path, "its directory " + directory.string() +
                     " does not exist; create it or choose another --out");
  // Whether a file can be created there (permissions, a read-only file
  // system): write_entry writes a temporary file beside it, then renames.
  const std::string probe = path + ".probe" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno != EEXIST)
    refuse(path, "cannot create a file in " + directory.string() + " (" + std::strerror(errno) +
                     "); choose a writable directory for --out");
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

bool write_entry(const std::string& path, routing::TuningEntry entry, const std::string& comment) {
  routing::TuningFile file = read_existing(path);
  const bool replaced = routing::find_entry(file, entry.fingerprint) != nullptr;
  routing::upsert_entry(file, std::move(entry));

  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << routing::format_tuning_file(file, comment);
    if (!out.flush()) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw std::runtime_error("cannot write " + temporary + "; check the directory of --out");
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    const std::string why = error.message();
    fs::remove(temporary, error);
    refuse(path, "cannot replace the file (" + why + "); choose another --out");
  }
  return replaced;
}

}  // namespace peerplan::tune
