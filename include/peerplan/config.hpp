// SPDX-License-Identifier: Apache-2.0
// Communicator configuration: filled from code, then overridden by
// PEERPLAN_* environment variables (see apply_environment), each override
// logged once at PEERPLAN_DEBUG=INFO.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "peerplan/export.h"
#include "peerplan/window.hpp"

namespace peerplan {

enum class Backend : std::uint8_t {
  automatic = 0,  // cuda when the rank sees a GPU and the CUDA backend was built, else host
  cuda = 1,
  host = 2,
};

enum class LogLevel : std::uint8_t { none = 0, warn = 1, info = 2, trace = 3 };

// How peers exchange data on the fast path: pull (each rank reads every
// peer's staging slot) or push (each rank writes into the peers' slots).
enum class TransferMode : std::uint8_t { automatic = 0, pull = 1, push = 2 };

// What takes the calls the plan index or the cutoffs decline.
enum class Fallback : std::uint8_t {
  // cuda backend: NCCL when this build has it and no two ranks share a GPU
  // (NCCL refuses that), else MPI. host backend: MPI.
  automatic = 0,
  nccl = 1,  // cuda backend only; needs a build with NCCL and one GPU per rank
  mpi =
      2,  // MPI_Allreduce (+ the same add + RMSNorm); on GPU buffers staged through pinned host memory
};

// The farthest link class over which P2P is allowed, like NCCL_P2P_LEVEL,
// in the vocabulary of `nvidia-smi topo -m`. It applies to every pair of
// GPUs of the communicator's ranks on a node: one pair farther than the
// level disables P2P for every plan (every call takes the fallback), with
// the pair named in Communicator::p2p_disabled_reason(). Two ranks on the
// same GPU are a LOC pair, allowed at every level. NVLink (NV#) is allowed
// at every level but LOC. loc..sys are ordered from closest to farthest.
enum class P2PLevel : std::uint8_t {
  loc = 0,   // the same GPU only: no P2P between distinct GPUs
  nvl = 1,   // NVLink only
  pix = 2,   // at most one PCIe switch
  pxb = 3,   // several PCIe switches, no host bridge
  phb = 4,   // through one PCIe host bridge (the CPU's root complex)
  node = 5,  // across host bridges within one NUMA node
  sys = 6,   // across NUMA nodes (the SMP interconnect: UPI, Infinity Fabric, ...)
  // The default, printed "auto": NODE (everything but SYS) until peerplan
  // knows better for a machine. Not a distance itself: the topology layer
  // resolves it (topology::effective_p2p_level). docs/configuration.md, "P2P level", says why NODE.
  automatic = 7,
};

// A cutoff left at this value takes the backend's default for the
// communicator's world size (routing::default_cutoffs), or the tuning
// file's value when one applies: the best one-shot limit shrinks as the
// world grows, so no single number fits every size.
// PEERPLAN_*_BYTES=auto sets it explicitly.
inline constexpr std::size_t kAutoCutoff = std::numeric_limits<std::size_t>::max();

// Two-shot pieces (RouteCutoffs::two_shot_chunk_bytes) are whole multiples
// of this many bytes: every piece then starts as aligned as the message,
// for every dtype and vector width.
inline constexpr std::size_t kTwoShotPieceAlignment = 256;

struct RouteCutoffs {
  // Largest message (bytes) each P2P route takes; larger calls use the
  // next route or the fallback. 0 disables the route; kAutoCutoff picks
  // the default for the world size (or the tuning file's entry, see
  // Config::tuning_file).
  std::size_t one_shot_max_bytes = kAutoCutoff;
  std::size_t two_shot_max_bytes = kAutoCutoff;
  std::size_t fused_max_bytes = kAutoCutoff;
  // Smallest message two-shot takes: an all-reduce above the one-shot
  // cutoff runs two-shot only when two_shot_min_bytes <= bytes <=
  // two_shot_max_bytes, else the fallback (on GPUs two-shot beats NCCL only
  // in a window of sizes). 0 = no lower bound; a minimum above the maximum
  // means two-shot is never taken. Last in the struct so that brace
  // initialisations written as {one-shot, two-shot, fused} keep their
  // meaning.
  std::size_t two_shot_min_bytes = kAutoCutoff;
  // Two-shot all-reduces of a contiguous message larger than this run as
  // consecutive two-shot calls on pieces of at most this many bytes (the
  // last one shorter), so the staging buffers hold a piece, not the whole
  // message: a 256 MiB all-reduce stages no more than a 64 MiB one. Same
  // bits as one call (each element is reduced in rank order either way).
  // Pieces are this size rounded down to a multiple of 256 bytes; a message
  // up to this size runs whole; 0: never split. 1 to 255 fail create() with
  // InvalidArgument (they would round to no piece and silently never split).
  // kAutoCutoff: the backend's default piece for the world size (on the
  // cuda backend 64 MiB at 2 ranks, 128 MiB / n at n; on the host backend
  // its default two-shot maximum), so that with the default maximum
  // nothing is split. Strided layouts are never split. Last, for brace
  // initialisations.
  std::size_t two_shot_chunk_bytes = kAutoCutoff;

  friend bool operator==(const RouteCutoffs&, const RouteCutoffs&) = default;
};

// Whether the row kernels (the CUDA fused op and the fallback's add +
// RMSNorm) run a row as a thread-block cluster (sm_90+ GPUs, sm_90+ device
// code) or in one block. Both give the same bits; clusters are faster
// where they exist.
enum class RowClusters : std::uint8_t {
  automatic = 0,  // clusters where the GPU and the build have them, else one block
  on = 1,         // clusters; create() fails where the GPU or the build has none
  off = 2,        // one block per row everywhere (a check, or a driver that refuses clusters)
};

// The largest KernelChoices::one_shot_max_blocks (the kernels' own limit).
inline constexpr int kOneShotMaxBlocksLimit = 1024;

// Which kernels and protocols the CUDA backend runs. Every default means
// "the backend decides" (numbers measured on 2x H200, benchmarks/
// RESULTS.md); the host backend ignores them. On every backend create()
// validates them and checks that those marked "must agree" are the same on
// every rank (Mismatch naming the field otherwise). The results are the
// same bits whatever is chosen: only speed and staging memory change.
struct KernelChoices {
  // Largest grid of the one-shot kernels (LL and Lamport). 0: one block per
  // multiprocessor of the GPU; else 1..kOneShotMaxBlocksLimit. A local
  // choice: those kernels have no per-block flags, so ranks may differ.
  int one_shot_max_blocks = 0;
  // The protocol windows (Window: messages of above < bytes <= up_to; see
  // window.hpp). nullopt = auto: the tuning file's window for this machine
  // if one applies, else the backend's built-in default
  // (routing/defaults.hpp). Each must agree on every rank: sender and
  // receiver run the same protocol. Pull mode has its own one-shot and
  // two-shot and ignores the one-shot and two-shot windows.
  //
  // Push one-shot all-reduce: the Lamport protocol (16 data bytes per
  // store into a sentinel-filled region) inside the window, LL lines (8
  // data bytes + a flag per 16-byte store) outside it.
  std::optional<Window> one_shot_lamport;
  // Fused all-reduce + add + RMSNorm: the Lamport kernel inside the window
  // (messages of whole 16-byte rows that fit the Lamport region), else
  // LL lines inside fused_ll, else the two-shot all-reduce then add +
  // RMSNorm.
  std::optional<Window> fused_lamport;
  std::optional<Window> fused_ll;
  // A local choice: the row's rounding order is the same either way and no
  // peer sees the launch shape.
  RowClusters row_clusters = RowClusters::automatic;
  // Two-shot all-reduce of a contiguous layout: the copy-engine protocol
  // (copy engines move the shards, the SMs only reduce) inside the window,
  // the staged kernel outside it.
  std::optional<Window> two_shot_dma;
  // Two-shot all-reduce, any layout: the Lamport protocol (no flag words,
  // no barrier) inside the window. It comes first: a size in both this
  // and two_shot_dma takes Lamport.
  std::optional<Window> two_shot_lamport;

  friend bool operator==(const KernelChoices&, const KernelChoices&) = default;
};

struct Config {
  Backend backend = Backend::automatic;
  int device = -1;  // CUDA device; -1 = local rank
  // Bound on every wait (bootstrap collectives, flag barriers, fallback):
  // 1 ms to kMaxTimeout.
  std::chrono::milliseconds timeout{30'000};
  RouteCutoffs cutoffs{};
  TransferMode transfer_mode = TransferMode::automatic;
  bool disable_p2p = false;
  P2PLevel p2p_level = P2PLevel::automatic;
  LogLevel log_level = LogLevel::warn;
  // hwloc XML file to read the topology from instead of the live machine.
  std::string topology_file;
  // Tuning file (written by peerplan_tune) whose entry for this machine's
  // fingerprint (Communicator::topology_fingerprint) supplies the cutoffs
  // left at kAutoCutoff; empty = none. Per cutoff: an explicit value (code
  // or PEERPLAN_*_BYTES) > the file's entry > the built-in default table.
  // The format is described in docs/tuning.md.
  std::string tuning_file;
  // If > 0, create() fails unless the communicator has exactly this many
  // ranks; 0 = not checked; below 0 fails create() with InvalidArgument.
  int expected_world_size = 0;
  // The CUDA backend's kernel knobs (last, so that brace initialisations of
  // the fields above keep their meaning).
  KernelChoices kernels{};
  // Where declined calls go (see Fallback). Must agree on every rank.
  Fallback fallback = Fallback::automatic;
  // How many undeclared keys Stats::undeclared keeps (the most frequent,
  // in a table of this fixed size, apart from the plan index: a miss still
  // inserts nothing there). 0 (default): none, and undeclared calls cost
  // nothing more; at most kMaxUndeclaredKeysTracked. A local choice.
  int undeclared_keys_tracked = 0;
  // Where the log goes (PEERPLAN_DEBUG_FILE): empty = stderr; else a file
  // opened for appending, whose name may hold %h (the short host name), %p
  // (the process id) and %% (a '%'). One that cannot be opened leaves the
  // log on stderr with a WARN. Process-wide, like log_level; a local choice.
  std::string log_file;
  // Which subsystems' INFO and TRACE lines show (PEERPLAN_DEBUG_SUBSYS): a
  // comma list of INIT, BOOTSTRAP, PLAN, ROUTE, TRANSPORT, FALLBACK, CALL or
  // ALL; a leading '^' shows all but those. WARN lines always show. A local
  // choice.
  std::string log_subsystems = "ALL";
  // NVTX ranges in a "peerplan" domain for create, declare,
  // (de)register_buffers, close and each call, which Nsight Systems shows
  // (docs/profiling.md). They cost nothing measurable unless a profiler
  // records; false: peerplan makes no NVTX call at all. A local choice.
  bool nvtx = true;
  // Before each all-reduce or fused call, the ranks compare their calls and
  // raise Mismatch together, naming every rank's call, when they differ
  // (PEERPLAN_CHECK_CALLS). For debugging: it costs every call an exchange
  // among all ranks, made on the host when the call is made (under CUDA
  // graph capture, at capture). Must agree on every rank.
  bool check_calls = false;
};

inline constexpr int kMaxUndeclaredKeysTracked = 1024;

// The longest Config::timeout: every wait API (poll, MPI progress loops)
// takes it as an int, and a deadline of now + timeout cannot overflow.
inline constexpr std::chrono::milliseconds kMaxTimeout{2'147'483'647};

// Returns `config` with every PEERPLAN_* variable set in the environment
// applied. Throws InvalidArgument naming the variable and its accepted
// values when one cannot be parsed. The variables: docs/configuration.md.
// Sizes take K/M/G suffixes (KiB multiples, e.g. 512K); booleans are
// 0/1/true/false/yes/no/on/off; keywords are case-insensitive; a variable
// set to the empty string counts as unset.
PEERPLAN_API Config apply_environment(Config config);

PEERPLAN_API const char* to_string(Backend backend) noexcept;
PEERPLAN_API const char* to_string(LogLevel level) noexcept;
PEERPLAN_API const char* to_string(TransferMode mode) noexcept;
PEERPLAN_API const char* to_string(P2PLevel level) noexcept;
PEERPLAN_API const char* to_string(RowClusters clusters) noexcept;
PEERPLAN_API const char* to_string(Fallback fallback) noexcept;

}  // namespace peerplan
