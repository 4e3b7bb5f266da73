// Whether the row kernels (fused op, add + RMSNorm) run a row as a cluster
// of blocks or as one block. Both give the same bits (cuda/rms_norm_row.cuh);
// clusters are faster where they exist (sm_90+). PEERPLAN_ROW_CLUSTERS=0
// turns them off - a check that the claim holds, and a way around a driver
// that refuses cluster launches.
#pragma once

namespace peerplan::transport::cuda {

// For the current device. Throws InvalidArgument on a malformed
// PEERPLAN_ROW_CLUSTERS (anything but 0 or 1).
bool use_row_clusters(int device);

}  // namespace peerplan::transport::cuda
