// SPDX-License-Identifier: Apache-2.0
// MPI has no bf16 and (in MPI 4.1 implementations we target) no portable
// f16 type, so the fallback reduces 16-bit floats through a contiguous
// 2-byte user datatype and user-defined commutative operations that add in
// fp32 and round to nearest even, exactly like the P2P path rounds.
#pragma once

#include <mpi.h>

#include "peerplan/dtype.hpp"

namespace peerplan::transport::host {

class MpiReductionTypes {
 public:
  // Creates the datatype and the operations (MPI must be initialised).
  MpiReductionTypes();
  ~MpiReductionTypes();
  MpiReductionTypes(const MpiReductionTypes&) = delete;
  MpiReductionTypes& operator=(const MpiReductionTypes&) = delete;

  MPI_Datatype datatype(DataType dtype) const noexcept;
  MPI_Op sum(DataType dtype) const noexcept;
  // Frees the MPI objects (skipped once MPI is finalised). Idempotent.
  void release() noexcept;

 private:
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  MPI_Op f16_sum_ = MPI_OP_NULL;
};

}  // namespace peerplan::transport::host
