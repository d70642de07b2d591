// SPDX-License-Identifier: Apache-2.0
// What every public C++ header includes first: the language requirement, the export region
// and the call-site macro. (abi.h is C and includes none of this.)
#pragma once

// ---- C++20 or later. Without this check a C++17 build fails deep inside a header (concepts,
// <compare>, designated initializers) with messages that never say "C++20". MSVC keeps
// __cplusplus at 199711L unless /Zc:__cplusplus is given; _MSVC_LANG is its real value.
#if defined(_MSVC_LANG)
#define GPUPLUG_CPLUSPLUS _MSVC_LANG
#else
#define GPUPLUG_CPLUSPLUS __cplusplus
#endif
#if GPUPLUG_CPLUSPLUS < 202002L
#error "gpuplug requires C++20: compile with -std=c++20 (CMake: link gpuplug::core, which requires cxx_std_20; pkg-config --cflags gpuplug carries -std=c++20)"
#endif

// ---- The export region. libgpuplug is built with -fvisibility=hidden; what a public header
// declares between GPUPLUG_API_BEGIN and GPUPLUG_API_END (its whole `namespace gpuplug` body)
// has default visibility, so a new public class or function is exported without an annotation
// of its own, with its vtable and typeinfo (applications catch gpuplug::Error and derive from
// GpuBackend and ModelResource). The core's private headers are outside any such region and stay
// hidden. The linker's version script (core/libgpuplug.map) then keeps only `gpuplug::` names.
// In an application the region makes the declarations default too, which is what a reference
// to a function defined in a shared library needs under the application's own
// -fvisibility=hidden. One exception: a non-inline function declared only as a friend inside a
// class does not take the region's visibility; declare it again at namespace scope.
#if defined(__GNUC__)  // GCC and clang
#define GPUPLUG_API_BEGIN _Pragma("GCC visibility push(default)")
#define GPUPLUG_API_END _Pragma("GCC visibility pop")
// GPUPLUG_LOCAL keeps one declaration of the region out of it: a private nested type of a
// public class that only the core defines and uses (OpCache::Impl).
#define GPUPLUG_LOCAL __attribute__((visibility("hidden")))
#else
#define GPUPLUG_API_BEGIN
#define GPUPLUG_API_END
#define GPUPLUG_LOCAL
#endif

// ---- The calling function's name, as a default argument (`const char* site =
// GPUPLUG_CALLER_FUNCTION`): evaluated at the call site, so the ledger names the function that
// allocated. std::source_location would do the same, but clang before 15 cannot compile
// libstdc++'s <source_location> (it lacks __builtin_source_location), and Debian 12's default
// clang++ is clang 14. __builtin_FUNCTION() is in GCC and clang alike and gives the plain
// function name ("run_layer").
#if defined(__GNUC__) || defined(__clang__)
#define GPUPLUG_CALLER_FUNCTION __builtin_FUNCTION()
#else
#include <source_location>
#define GPUPLUG_CALLER_FUNCTION std::source_location::current().function_name()
#endif
