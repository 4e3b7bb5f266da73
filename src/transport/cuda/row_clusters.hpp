// SPDX-License-Identifier: Apache-2.0
// Whether the row kernels (fused op, add + RMSNorm) run a row as a cluster
// of blocks or as one block. Both give the same bits (cuda/rms_norm_row.cuh);
// clusters are faster where they exist (sm_90+). KernelChoices::row_clusters
// (PEERPLAN_ROW_CLUSTERS) off turns them off - a check that the claim
// holds, and a way around a driver that refuses cluster launches.
#pragma once

#include "peerplan/config.hpp"

namespace peerplan::transport::cuda {

// True when `device` and this build can launch the row kernels' clusters.
bool row_clusters_supported(int device);

// Whether to launch clusters on `device`: never for off, where supported
// otherwise (RowClusters::on where unsupported was refused at create by
// check_kernel_choices; a launch must never ask for what cannot run).
bool use_row_clusters(RowClusters choice, int device);

}  // namespace peerplan::transport::cuda
