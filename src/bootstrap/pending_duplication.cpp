// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/pending_duplication.hpp"

#include "bootstrap/mpi_check.hpp"

namespace peerplan::bootstrap::detail {
namespace {

int delete_record(MPI_Comm, int, void* value, void*) {
  // A duplication still in progress moves to the keeper of bounded_dup.
  delete static_cast<UserCommDuplications*>(value);
  return MPI_SUCCESS;
}

int record_keyval() {
  static const int keyval = [] {
    int created = MPI_KEYVAL_INVALID;
    // Not copied: a duplicate has collective calls of its own.
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_record, &created, nullptr),
              "MPI_Comm_create_keyval");
    return created;
  }();
  return keyval;
}

}  // namespace

UserCommDuplications& duplications_of(MPI_Comm user_comm) {
  void* value = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(user_comm, record_keyval(), &value, &found), "MPI_Comm_get_attr");
  if (found && value != nullptr) return *static_cast<UserCommDuplications*>(value);
  auto* record = new UserCommDuplications();
  const int set = MPI_Comm_set_attr(user_comm, record_keyval(), record);
  if (set != MPI_SUCCESS) {
    delete record;
    check_mpi(set, "MPI_Comm_set_attr");
  }
  return *record;
}

}  // namespace peerplan::bootstrap::detail
