// SPDX-License-Identifier: Apache-2.0
// A small NVTX injection library for tests: loaded by NVTX's own loader
// through NVTX_INJECTION64_PATH (as a profiler is), it records the domains
// created, the strings registered and every push and pop of the domain API
// as text lines, which a test reads back with nvtx_recorder_events() after
// dlopen()ing this same library (the loader's copy: one instance per path).
//
// Lines: "push <domain> <ARGB colour, hex> <payload or -> <message>", with
// a registered message resolved to its text; "pop <domain>";
// "domain <name>".
//
// With NVTX_RECORDER_OUT=<prefix> set, the lines are also written at exit
// to <prefix>.<pid>, so any program can be run under it by hand:
//   NVTX_INJECTION64_PATH=.../libpeerplan_nvtx_recorder.so \
//   NVTX_RECORDER_OUT=/tmp/nvtx mpirun -np 2 -x NVTX_INJECTION64_PATH \
//   -x NVTX_RECORDER_OUT ./app
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

struct RecordedDomain {
  std::string name;
};

std::mutex mutex;
std::deque<RecordedDomain> domains;  // stable addresses: they are the handles
std::deque<std::string> strings;     // likewise
std::vector<std::string> events;
std::string joined;

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain == nullptr ? std::string("(default)")
                           : reinterpret_cast<const RecordedDomain*>(domain)->name;
}

std::string message_text(const nvtxEventAttributes_t* event) {
  switch (event->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return event->message.ascii;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return *reinterpret_cast<const std::string*>(event->message.registered);
    case NVTX_MESSAGE_UNKNOWN:
      return "(none)";
    default:
      return "(unsupported message type)";
  }
}

nvtxDomainHandle_t domain_create(const char* name) {
  const std::lock_guard lock(mutex);
  domains.push_back({name});
  events.push_back(std::string("domain ") + name);
  return reinterpret_cast<nvtxDomainHandle_t>(&domains.back());
}

nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char* text) {
  const std::lock_guard lock(mutex);
  strings.emplace_back(text);
  return reinterpret_cast<nvtxStringHandle_t>(&strings.back());
}

int range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* event) {
  char head[64];
  std::snprintf(head, sizeof head, " %08" PRIx32 " ", event->color);
  const std::string payload = event->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64
                                  ? std::to_string(event->payload.ullValue)
                                  : std::string("-");
  const std::lock_guard lock(mutex);
  events.push_back("push " + domain_name(domain) + head + payload + " " + message_text(event));
  return 0;
}

int range_pop(nvtxDomainHandle_t domain) {
  const std::lock_guard lock(mutex);
  events.push_back("pop " + domain_name(domain));
  return 0;
}

// Writes the lines to $NVTX_RECORDER_OUT.<pid> when the process exits.
struct WriteAtExit {
  ~WriteAtExit() {
    const char* prefix = std::getenv("NVTX_RECORDER_OUT");
    if (prefix == nullptr || *prefix == '\0') return;
    const std::string path = std::string(prefix) + "." + std::to_string(getpid());
    if (FILE* file = std::fopen(path.c_str(), "w")) {
      for (const auto& line : events) std::fprintf(file, "%s\n", line.c_str());
      std::fclose(file);
    }
  }
} write_at_exit;

template <class Function>
void attach(NvtxFunctionTable table, unsigned size, unsigned id, Function function) {
  if (id <= size && table[id] != nullptr)
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

extern "C" {

// NVTX's loader calls this once, with its export table, on the process's
// first NVTX call; returning 1 attaches the tool.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  attach(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  attach(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  attach(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  attach(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  return 1;
}

// Every line recorded so far, each ending in '\n'; valid until the next call.
__attribute__((visibility("default"))) const char* nvtx_recorder_events() {
  const std::lock_guard lock(mutex);
  joined.clear();
  for (const auto& line : events) joined += line + '\n';
  return joined.c_str();
}

}  // extern "C"
