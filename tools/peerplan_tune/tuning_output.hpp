// SPDX-License-Identifier: Apache-2.0
// Adding the measured entry to a tuning file without losing the others:
// several machines (or rank counts) can share one file, each tuned in its
// own run.
#pragma once

#include <string>

#include "routing/tuning_file.hpp"

namespace peerplan::tune {

// Checks, before anything is measured, that write_entry can update `path`
// (--out): it is not a directory; an existing file can be read and parses
// as a tuning file (its other entries are kept); its directory exists and
// a file can be created there (a probe file, removed at once). Throws
// InvalidArgument naming --out and what to change.
void check_out_path(const std::string& path);

// Replaces the entry of `path` with `entry`'s fingerprint, or appends it,
// keeping every other entry; creates the file when it does not exist. The
// file's header comment becomes `comment`. The new file replaces the old
// one in one rename, so readers never see half a file. An existing file
// that does not parse is left alone (InvalidArgument naming --out and the
// file's line), as is one that cannot be read; a path that cannot be
// written throws InvalidArgument or std::runtime_error naming --out.
// Returns true when an entry was replaced.
bool write_entry(const std::string& path, routing::TuningEntry entry, const std::string& comment);

}  // namespace peerplan::tune
