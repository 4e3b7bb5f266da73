#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Formats the tree's C, C++ and CUDA sources with .clang-format, or with
# --check lists the files that differ and exits 1 (scripts/test.sh runs that).
# Formatting differs between clang-format releases, so the check runs only
# with the major version the tree is formatted with; others are told so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
readonly FORMAT_MAJOR=14  # Debian 12's clang-format

tool=${CLANG_FORMAT:-}
if [ -z "$tool" ]; then
  for candidate in clang-format-$FORMAT_MAJOR clang-format; do
    if command -v "$candidate" >/dev/null 2>&1; then tool=$candidate; break; fi
  done
fi
if [ -z "$tool" ]; then
  echo "[peerplan] format: clang-format not found (apt-get install clang-format)" >&2
  exit 2
fi
major=$("$tool" --version | sed -E 's/.*version ([0-9]+).*/\1/')
if [ "$major" != "$FORMAT_MAJOR" ]; then
  echo "[peerplan] format: skipped, $tool is version $major and the tree is formatted with $FORMAT_MAJOR"
  exit 0
fi

if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t sources < <(git ls-files -- "*.c" "*.h" "*.cpp" "*.hpp" "*.cu" "*.cuh")
else  # an unpacked tarball
  mapfile -t sources < <(find . -path ./build\* -prune -o -type f \( -name "*.c" -o -name "*.h" -o -name "*.cpp" -o -name "*.hpp" -o -name "*.cu" -o -name "*.cuh" \) -print)
fi
if [ "${1:-}" = --check ]; then
  differing=()
  for file in "${sources[@]}"; do
    "$tool" --style=file "$file" | cmp -s - "$file" || differing+=("$file")
  done
  if [ ${#differing[@]} -gt 0 ]; then
    echo "[peerplan] format: ${#differing[@]} file(s) differ from .clang-format; run scripts/format.sh:" >&2
    printf '  %s\n' "${differing[@]}" >&2
    exit 1
  fi
  echo "[peerplan] format: ${#sources[@]} files match .clang-format"
else
  "$tool" -i --style=file "${sources[@]}"
fi
