// SPDX-License-Identifier: Apache-2.0
#include "transport/host/mpi_reduction_types.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/mpi_check.hpp"
#include "peerplan/errors.hpp"
#include "transport/host/element.hpp"

namespace peerplan::transport::host {
namespace {

// inout[i] = round(in[i] + inout[i]), summed in fp32.
template <class E>
void sum_into(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const typename E::Storage*>(in);
  auto* b = static_cast<typename E::Storage*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = E::store(E::load(a[i]) + E::load(b[i]));
}

void check(int code, const char* call) {
  bootstrap::detail::check_mpi(code, call, "peerplan MPI fallback");
}

}  // namespace

MpiReductionTypes::MpiReductionTypes() {
  try {
    check(MPI_Type_contiguous(2, MPI_BYTE, &half_type_), "MPI_Type_contiguous");
    check(MPI_Type_commit(&half_type_), "MPI_Type_commit");
    check(MPI_Op_create(&sum_into<BF16Element>, /*commute=*/1, &bf16_sum_), "MPI_Op_create");
    check(MPI_Op_create(&sum_into<F16Element>, /*commute=*/1, &f16_sum_), "MPI_Op_create");
  } catch (...) {
    release();
    throw;
  }
}

MpiReductionTypes::~MpiReductionTypes() { release(); }

void MpiReductionTypes::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI already freed everything
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
  if (f16_sum_ != MPI_OP_NULL) MPI_Op_free(&f16_sum_);
  if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
}

MPI_Datatype MpiReductionTypes::datatype(DataType dtype) const noexcept {
  return dtype == DataType::f32 ? MPI_FLOAT : half_type_;
}

MPI_Op MpiReductionTypes::sum(DataType dtype) const noexcept {
  switch (dtype) {
    case DataType::bf16:
      return bf16_sum_;
    case DataType::f16:
      return f16_sum_;
    case DataType::f32:
      break;
  }
  return MPI_SUM;
}

}  // namespace peerplan::transport::host
