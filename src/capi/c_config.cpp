// SPDX-License-Identifier: Apache-2.0
#include "capi/c_config.hpp"

#include <algorithm>
#include <memory>
#include <string_view>

#include "capi/guarded_call.hpp"
#include "capi/live_handles.hpp"
#include "core/environment.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::capi {
namespace {

Config apply(const std::vector<std::pair<std::string, std::string>>& values) {
  return apply_environment_from(
      Config{},
      [&](const char* name) -> const char* {
        for (auto it = values.rbegin(); it != values.rend(); ++it)
          if (it->first == name) return it->second.c_str();
        return nullptr;
      },
      nullptr, "peerplan_config_set");
}

// A retired name counts as known: apply() refuses it with what replaces it
// and how its values translate, as the environment does.
bool known_name(std::string_view name) {
  for (const auto& names : {environment_variable_names(), retired_environment_variable_names()})
    if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  return false;
}

std::string known_names() {
  std::string text;
  for (auto name : environment_variable_names())
    text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

std::string not_live_message(const char* what) {
  return std::string(what) +
         ": the config handle is not live: peerplan_config_destroy freed it, or "
         "peerplan_config_create never returned it; create a new one";
}

}  // namespace

Config config_from(const peerplan_config* config) {
  return config == nullptr ? Config{} : apply(config->values);
}

}  // namespace peerplan::capi

using namespace peerplan;
using namespace peerplan::capi;

extern "C" {

peerplan_result_t peerplan_config_create(peerplan_config_t* config) {
  if (config == nullptr) {
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT, "peerplan_config_create: config is NULL");
  }
  *config = nullptr;
  return guarded([&] {
    auto handle = std::make_unique<peerplan_config>();
    LiveHandles<peerplan_config>::add(handle.get());
    *config = handle.release();
  });
}

peerplan_result_t peerplan_config_set(peerplan_config_t config, const char* name,
                                      const char* value) {
  if (config == nullptr || name == nullptr || value == nullptr) {
    return fail(PEERPLAN_ERROR_INVALID_ARGUMENT,
                "peerplan_config_set: the config, name or value is NULL");
  }
  if (!LiveHandles<peerplan_config>::contains(config)) {
    return fail_with(PEERPLAN_ERROR_INVALID_USAGE,
                     [] { return not_live_message("peerplan_config_set"); });
  }
  return guarded([&] {
    if (!known_name(name)) {
      throw InvalidArgument(std::string("peerplan_config_set: \"") + name +
                            "\" is not a setting; use one of " + known_names());
    }
    auto values = config->values;
    values.emplace_back(name, value);
    apply(values);  // throws, naming what is accepted, before anything is kept
    config->values = std::move(values);
  });
}

void peerplan_config_destroy(peerplan_config_t config) {
  if (config == nullptr) return;
  // A second destroy (or a made-up pointer) frees nothing: it only says so.
  if (!LiveHandles<peerplan_config>::remove(config)) {
    fail_with(PEERPLAN_ERROR_INVALID_USAGE,
              [] { return not_live_message("peerplan_config_destroy") + " (nothing was freed)"; });
    return;
  }
  delete config;
}

}  // extern "C"
