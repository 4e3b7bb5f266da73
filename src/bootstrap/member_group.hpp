// SPDX-License-Identifier: Apache-2.0
// A sub-group of an existing Bootstrap, built only from the parent's own
// (bounded) collectives: no new MPI communicator, so no unbounded
// MPI_Comm_split. Made for the hierarchical all-reduce's step between
// nodes: a NCCL communicator among the ranks that share a local rank, one
// on each node (color = local rank, key = node id).
//
// !!! Every operation of a group is an operation of the PARENT, collective
// !!! over every rank of the parent, not just the group's members. So every
// !!! rank of the parent must make the same sequence of calls on its own
// !!! group, all groups together and in the same order (a rank of group A
// !!! calling allgather while a rank of group B calls broadcast is the same
// !!! call to the parent, and both must happen; a rank skipping one stalls
// !!! every group until the parent's timeout). Calls on the group and on
// !!! the parent itself are one sequence too. The price of needing no new
// !!! communicator: each call moves every rank's blob.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::bootstrap {

// The ranks of `parent` whose `color` equals this rank's, ordered by `key`
// (ties by parent rank), like MPI_Comm_split. Collective over every rank of
// `parent` (one parent allgather of color, key and parent node id): every
// rank of the parent creates its group at the same point. `parent` must
// outlive the result. Whatever a parent operation throws (Timeout when a
// rank does not take part) propagates unchanged.
//
// The group's nodes are its members' parent nodes, numbered 0.. in the
// order of each node's lowest group rank; local rank and size count the
// members on this rank's node (in the group "same local rank on each node",
// every member is alone on its node: local_size() == 1).
//
// agree() is the parent's agree: false as soon as any rank of the parent,
// in any group, says false. Stricter than the interface asks, and what a
// job-wide set-up wants: every rank decides together whether to go on.
std::unique_ptr<Bootstrap> make_member_group(Bootstrap& parent, int color, int key);

}  // namespace peerplan::bootstrap
