// SPDX-License-Identifier: Apache-2.0
#include "tuning_output.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace peerplan::tune {

bool write_entry(const std::string& path, routing::TuningEntry entry, const std::string& comment) {
  routing::TuningFile file;
  if (std::filesystem::exists(path)) file = routing::read_tuning_file(path);
  const bool replaced = routing::find_entry(file, entry.fingerprint) != nullptr;
  routing::upsert_entry(file, std::move(entry));

  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << routing::format_tuning_file(file, comment);
    if (!out.flush()) {
      std::filesystem::remove(temporary);
      throw std::runtime_error("cannot write " + temporary + "; check the directory of --out");
    }
  }
  std::filesystem::rename(temporary, path);
  return replaced;
}

}  // namespace peerplan::tune
