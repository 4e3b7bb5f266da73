#include "transport/cuda/row_clusters.hpp"

#include <cstdlib>
#include <string>

#include "collective_kernels.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::transport::cuda {

bool use_row_clusters(int device) {
  const char* text = std::getenv("PEERPLAN_ROW_CLUSTERS");
  if (text != nullptr && *text != '\0') {
    const std::string value(text);
    if (value == "0") return false;
    if (value != "1") {
      throw InvalidArgument("PEERPLAN_ROW_CLUSTERS=" + value +
                            " is not 0 or 1; set 0 to run each row in one block, 1 (or unset) "
                            "to use thread-block clusters where the GPU has them");
    }
  }
  return cuda_kernels::rows_in_clusters_supported(device);
}

}  // namespace peerplan::transport::cuda
