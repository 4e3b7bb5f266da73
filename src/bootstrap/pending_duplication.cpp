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

int record_keyval_value = MPI_KEYVAL_INVALID;

// Runs at MPI_Finalize, which frees MPI_COMM_SELF's attributes first: the
// record keyval lives as long as MPI does, and Open MPI keeps a keyval that
// is never freed until process exit (a leak under LeakSanitizer).
int free_record_keyval(MPI_Comm, int, void*, void*) {
  if (record_keyval_value != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&record_keyval_value);
  return MPI_SUCCESS;
}

void free_record_keyval_at_finalize() {
  int hook = MPI_KEYVAL_INVALID;
  check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_record_keyval, &hook, nullptr),
            "MPI_Comm_create_keyval");
  check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, hook, nullptr), "MPI_Comm_set_attr");
  // Marked for freeing only: the keyval goes when MPI_COMM_SELF's attribute does.
  check_mpi(MPI_Comm_free_keyval(&hook), "MPI_Comm_free_keyval");
}

int record_keyval() {
  static const int keyval = [] {
    // Not copied: a duplicate has collective calls of its own.
    check_mpi(
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_record, &record_keyval_value, nullptr),
        "MPI_Comm_create_keyval");
    const int created = record_keyval_value;
    free_record_keyval_at_finalize();
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
