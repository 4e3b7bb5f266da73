// SPDX-License-Identifier: Apache-2.0
// What the communicator needs to build the CUDA backend's transports,
// without CUDA or NCCL headers (and in builds without NCCL too) (backend_selection.cpp is compiled in every
// build; it includes this only when PEERPLAN_HAVE_CUDA is set).
#pragma once

#include <cstdint>
#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/owned_comm.hpp"
#include "peerplan/config.hpp"
#include "transport/cuda/node_exchange.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::cuda {

// True when the CUDA runtime finds at least one device (false on machines
// without a driver or GPU; never throws).
bool cuda_device_visible() noexcept;

// Makes `configured` (Config::device; -1 = local rank modulo the device
// count) this thread's current device. Throws InvalidArgument for a device
// that does not exist, CudaError when the runtime refuses. Not collective.
int select_device(int configured, int local_rank);

// Throws InvalidArgument when `kernels` asks of `device` what it cannot do
// (RowClusters::on where the GPU or this build has no thread-block
// clusters). Not collective.
void check_kernel_choices(const KernelChoices& kernels, int device);

// P2P over CUDA IPC among the node-local ranks of `bootstrap`. Collective
// over every rank of `bootstrap` (which must outlive the result). Checks
// peer access between every pair of devices with a real peer copy; throws
// (on this rank) when it fails, for the caller's agreement. Reserves no
// staging memory until reserve(). `mode` picks push or pull kernels for
// the all-reduce routes (automatic = push); `kernels` the kernels' grids
// and protocols (the caller has checked that every rank agrees on those
// that must agree: communicator/card_decisions.hpp). `across_nodes`: the
// hierarchical route's step between nodes (node_exchange.hpp) when the
// communicator spans several nodes, else null.
std::unique_ptr<PeerTransport> make_cuda_peer_transport(
    bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout, TransferMode mode,
    const KernelChoices& kernels, std::unique_ptr<NodeExchange> across_nodes = nullptr);

// True when this build of peerplan has NCCL (configured with
// PEERPLAN_WITH_NCCL=AUTO and NCCL found, or ON); false in a CUDA build
// without it, whose only fallback is MPI. Says nothing about the machine:
// a build with NCCL still needs libnccl.so.2 at run time.
bool nccl_built() noexcept;

// NCCL fallback: one NCCL communicator over every rank of `bootstrap`, its
// unique id broadcast from rank 0. Collective. NCCL's settings are the user's.
// `row_clusters` picks the add + RMSNorm kernel's row shape. Throws
// Unsupported, before any collective work, when !nccl_built(): every rank
// of a job runs the same build, so every rank throws alike.
std::unique_ptr<FallbackTransport> make_nccl_fallback(bootstrap::Bootstrap& bootstrap,
                                                      std::chrono::milliseconds timeout,
                                                      RowClusters row_clusters);

// MPI fallback on GPU buffers (mpi_device_fallback.hpp) on `comm`, the
// communicator's own duplicate, which it owns from now on. Not collective.
std::unique_ptr<FallbackTransport> make_mpi_device_fallback(bootstrap::OwnedComm comm,
                                                            std::chrono::milliseconds timeout,
                                                            RowClusters row_clusters);

}  // namespace peerplan::transport::cuda
