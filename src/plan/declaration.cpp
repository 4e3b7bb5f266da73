// SPDX-License-Identifier: Apache-2.0
// Factories for the two kinds of declaration.
#include "peerplan/declaration.hpp"

#include <utility>

namespace peerplan {

Declaration Declaration::all_reduce(std::string name, DataType dtype, TensorLayout layout) {
  Declaration d;
  d.name = std::move(name);
  d.operation = Operation::all_reduce;
  d.dtype = dtype;
  d.layout = layout;
  return d;
}

Declaration Declaration::fused_add_rms_norm(std::string name, DataType dtype, TensorLayout layout,
                                            const void* weight, float eps) {
  Declaration d;
  d.name = std::move(name);
  d.operation = Operation::fused_add_rms_norm;
  d.dtype = dtype;
  d.layout = layout;
  d.weights.push_back(NormWeight{weight, layout.last_dim()});
  d.eps = eps;
  return d;
}

}  // namespace peerplan
