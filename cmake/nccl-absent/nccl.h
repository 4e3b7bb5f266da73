// SPDX-License-Identifier: Apache-2.0
/* Put first on the include path of peerplan's own targets in builds without
 * NCCL (src/CMakeLists.txt), where <nccl.h> may still be installed next to
 * the CUDA toolkit's headers: any include of it that is not behind
 * #if PEERPLAN_HAVE_NCCL then fails here, on every machine, instead of
 * compiling where NCCL happens to be installed and failing at sites
 * without it. */
#error \
    "<nccl.h> included in a build of peerplan without NCCL (PEERPLAN_HAVE_NCCL=0): include it only from sources built with NCCL (src/transport/cuda/CMakeLists.txt) or behind #if PEERPLAN_HAVE_NCCL"
