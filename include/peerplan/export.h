// SPDX-License-Identifier: Apache-2.0
/* PEERPLAN_API: what libpeerplan exports. The library is compiled with
 * -fvisibility=hidden -fvisibility-inlines-hidden (src/CMakeLists.txt), so
 * only declarations marked PEERPLAN_API are visible outside it: the public
 * C++ API of include/peerplan/ (classes, including the error classes whose
 * type information a `catch` in the application must match, and free
 * functions) and the C interface of peerplan.h. Everything else (the
 * layers under src/) stays inside the library; tests and tools that use
 * internal code link the layers' objects instead.
 *
 * A C header (C99): peerplan.h includes it too. Define PEERPLAN_API before
 * including any peerplan header to override it. */
#ifndef PEERPLAN_EXPORT_H
#define PEERPLAN_EXPORT_H

#ifndef PEERPLAN_API
#if defined(__GNUC__) || defined(__clang__)
#define PEERPLAN_API __attribute__((visibility("default")))
#else
#define PEERPLAN_API
#endif
#endif

#endif /* PEERPLAN_EXPORT_H */
