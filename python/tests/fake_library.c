// SPDX-License-Identifier: Apache-2.0
/* A stand-in for a libpeerplan of another version and C ABI: the two
 * functions the Python package asks at import before anything else.
 * python/tests/import_checks_test.py loads it through PEERPLAN_LIBRARY and
 * expects the import to fail, naming both versions. */
const char* peerplan_version(void) { return "0.0.0-fake"; }
int peerplan_abi_version(void) { return 999; }
