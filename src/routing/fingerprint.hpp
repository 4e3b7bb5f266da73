// SPDX-License-Identifier: Apache-2.0
// The topology fingerprint: one line describing the machine as far as
// routing is concerned, which a tuning file's entries are matched on
// (tuning_file.hpp). Two machines with the same fingerprint are expected to
// have the same best cutoffs; anything that moves the crossovers between
// routes belongs in it, anything per-run (bus ids, hostnames, rank order)
// does not, so that a file measured on one node applies to its twins.
//
//   host ranks=4                                  host backend, one node
//   cuda ranks=2 gpu="NVIDIA H200" links=NV18     cuda backend, one node
//   cuda ranks=4 gpu="NVIDIA H200" links=NV18 shared   ranks share GPUs
//   cuda nodes=2 ranks=16                         several nodes
//
// - backend: the one the communicator runs on (host or cuda);
// - ranks: the communicator's size;
// - gpu (cuda): the GPU model (cudaDeviceProp::name) of every rank, or
//   "mixed" when the ranks' models differ;
// - links (cuda, two or more ranks): the farthest link class over every
//   pair of the ranks' GPUs, in `nvidia-smi topo -m`'s vocabulary (NV#,
//   PIX, PXB, PHB, NODE, SYS; X when all ranks share one GPU; fewer NVLinks
//   count as farther), "unknown" when some rank's GPU is not in the hwloc
//   topology (e.g. PEERPLAN_TOPO_FILE describes another machine);
// - shared (cuda): some ranks drive the same GPU. Such a job is for
//   testing (the GPU time-slices the ranks); its timings mean nothing, so
//   no tuning file entry ever applies to it (fingerprint_says_shared).
// - several nodes: P2P routes never span nodes, so only the node count and
//   size are kept (the cutoffs do not matter there).
// A pure function of its inputs, which the communicator gathers from every
// rank: every rank computes the same fingerprint.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "peerplan/config.hpp"
#include "topology/gpu_location.hpp"
#include "topology/link_class.hpp"

namespace peerplan::routing {

struct MachineFacts {
  Backend backend = Backend::host;  // host or cuda (automatic is resolved before)
  int world_size = 1;
  int num_nodes = 1;
  // cuda: each rank's GPU model, in rank order.
  std::vector<std::string> gpu_names;
  // cuda: each rank's GPU as the topology places it, in rank order; empty
  // when some rank's GPU was not found there.
  std::vector<topology::GpuLocation> gpus;
  // NVLinks between gpus[i] and gpus[j]; empty = none known.
  topology::NvlinkCounts nvlinks;
  // cuda: two or more ranks drive the same GPU.
  bool gpus_shared = false;
};

std::string topology_fingerprint(const MachineFacts& facts);

// Whether `fingerprint` describes ranks sharing a GPU (its last word is
// "shared"): tuning files are neither written nor applied for those.
bool fingerprint_says_shared(const std::string& fingerprint) noexcept;

// The common model of `names`; "mixed" when they differ, "unknown" when
// there are none.
std::string gpu_model(const std::vector<std::string>& names);

// The farthest class over every pair of `gpus` (nvlinks as for
// topology::classify); nullopt for fewer than two GPUs. Throws
// InvalidArgument if nvlinks is neither empty nor gpus.size() square.
std::optional<topology::LinkClass> farthest_link(const std::vector<topology::GpuLocation>& gpus,
                                                 const topology::NvlinkCounts& nvlinks = {});

}  // namespace peerplan::routing
