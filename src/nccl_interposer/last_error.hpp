// SPDX-License-Identifier: Apache-2.0
// What ncclGetLastError answers through the interposer: peerplan's text
// while peerplan's failure is the process's latest, NCCL's otherwise. NCCL
// keeps one last error for the whole process (a watchdog thread asks for
// it after another thread's call failed), and so does this. A failure
// NCCL records in a function the interposer does not define (ncclMemAlloc,
// ncclCommRegister, ...) is seen by its text: NCCL's last error changed
// since peerplan's was recorded.
#pragma once

#include <nccl.h>

#include <string_view>

namespace peerplan::nccl_interposer {

// Records `text` (prefixed "peerplan: ") as the process's last error.
void record_peerplan_error(std::string_view text) noexcept;

// Forgets peerplan's text when `result` is a failure (NCCL's is newer).
ncclResult_t note_nccl_result(ncclResult_t result) noexcept;

// ncclGetLastError's answer: peerplan's text, or the real NCCL's (or ""
// where the real function is missing). The pointer stays valid; its text
// may change with a later failure, as NCCL's does.
const char* last_error_text(ncclComm_t comm) noexcept;

}  // namespace peerplan::nccl_interposer
