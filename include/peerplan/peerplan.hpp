// SPDX-License-Identifier: Apache-2.0
// Umbrella header: everything an application needs.
#pragma once

#include "peerplan/communicator.hpp"
#include "peerplan/config.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/half_conversion.hpp"
#include "peerplan/layout.hpp"
#include "peerplan/operation.hpp"
#include "peerplan/plan_key.hpp"
#include "peerplan/route.hpp"
#include "peerplan/version.hpp"
