// SPDX-License-Identifier: Apache-2.0
// Names of the Config enums. They are also the keywords PEERPLAN_* variables
// accept (compared case-insensitively), so what the logs print can be
// pasted back into the environment.
#include "peerplan/config.hpp"

namespace peerplan {

const char* to_string(Backend backend) noexcept {
  switch (backend) {
    case Backend::automatic:
      return "auto";
    case Backend::cuda:
      return "cuda";
    case Backend::host:
      return "host";
  }
  return "unknown";
}

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::none:
      return "NONE";
    case LogLevel::warn:
      return "WARN";
    case LogLevel::info:
      return "INFO";
    case LogLevel::trace:
      return "TRACE";
  }
  return "unknown";
}

const char* to_string(TransferMode mode) noexcept {
  switch (mode) {
    case TransferMode::automatic:
      return "auto";
    case TransferMode::pull:
      return "pull";
    case TransferMode::push:
      return "push";
  }
  return "unknown";
}

// The vocabulary of `nvidia-smi topo -m` and NCCL_P2P_LEVEL.
const char* to_string(P2PLevel level) noexcept {
  switch (level) {
    case P2PLevel::loc:
      return "LOC";
    case P2PLevel::nvl:
      return "NVL";
    case P2PLevel::pix:
      return "PIX";
    case P2PLevel::pxb:
      return "PXB";
    case P2PLevel::phb:
      return "PHB";
    case P2PLevel::node:
      return "NODE";
    case P2PLevel::sys:
      return "SYS";
    case P2PLevel::automatic:
      return "auto";
  }
  return "unknown";
}

const char* to_string(RowClusters clusters) noexcept {
  switch (clusters) {
    case RowClusters::automatic:
      return "auto";
    case RowClusters::on:
      return "on";
    case RowClusters::off:
      return "off";
  }
  return "unknown";
}

const char* to_string(Fallback fallback) noexcept {
  switch (fallback) {
    case Fallback::automatic:
      return "auto";
    case Fallback::nccl:
      return "nccl";
    case Fallback::mpi:
      return "mpi";
  }
  return "unknown";
}

}  // namespace peerplan
