// SPDX-License-Identifier: Apache-2.0
// Adding the measured entry to a tuning file without losing the others:
// several machines (or rank counts) can share one file, each tuned in its
// own run.
#pragma once

#include <string>

#include "routing/tuning_file.hpp"

namespace peerplan::tune {

// Replaces the entry of `path` with `entry`'s fingerprint, or appends it,
// keeping every other entry; creates the file when it does not exist. The
// file's header comment becomes `comment`. The new file replaces the old
// one in one rename, so readers never see half a file. An existing file
// that does not parse is left alone (InvalidArgument, naming its line).
// Returns true when an entry was replaced.
bool write_entry(const std::string& path, routing::TuningEntry entry, const std::string& comment);

}  // namespace peerplan::tune
