// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/row_clusters.hpp"

#include "collective_kernels.hpp"

namespace peerplan::transport::cuda {

bool row_clusters_supported(int device) { return cuda_kernels::rows_in_clusters_supported(device); }

bool use_row_clusters(RowClusters choice, int device) {
  return choice != RowClusters::off && row_clusters_supported(device);
}

}  // namespace peerplan::transport::cuda
