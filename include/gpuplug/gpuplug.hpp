// SPDX-License-Identifier: Apache-2.0
// The whole gpuplug C++ API in one include.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/abi.h>
#include <gpuplug/backend.hpp>
#include <gpuplug/log.hpp>
#include <gpuplug/memory.hpp>
#include <gpuplug/native.hpp>
#include <gpuplug/op_cache.hpp>
#include <gpuplug/peer.hpp>
#include <gpuplug/registry.hpp>
#include <gpuplug/teardown.hpp>
#include <gpuplug/types.hpp>
#include <gpuplug/version.hpp>
