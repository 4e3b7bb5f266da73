// SPDX-License-Identifier: Apache-2.0
/* No-op stand-ins for peerplan_all_reduce and peerplan_fused_add_rms_norm,
 * same signatures (include/peerplan/peerplan.h), for
 * python/benchmarks/wrapper_overhead.py --noop: with them the package's
 * call costs only the wrapper and ctypes, not the collective.
 *
 *   cc -O2 -shared -fPIC -o /tmp/libpeerplan_noop.so python/benchmarks/noop_capi.c
 */
#include <stdint.h>

typedef struct {
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;
} layout_t;
typedef struct {
  int route, reason, zero_copy;
} call_result_t;

static int done(call_result_t* result) {
  if (result) {
    result->route = 3;  /* fallback */
    result->reason = 1; /* undeclared */
    result->zero_copy = 0;
  }
  return 0;
}

int noop_all_reduce(void* comm, const void* in, void* out, int dtype, layout_t layout, void* stream,
                    call_result_t* result) {
  (void)comm, (void)in, (void)out, (void)dtype, (void)layout, (void)stream;
  return done(result);
}

int noop_fused_add_rms_norm(void* comm, void* inout, void* residual, const void* weight, float eps,
                            int dtype, layout_t layout, void* stream, call_result_t* result) {
  (void)comm, (void)inout, (void)residual, (void)weight, (void)eps, (void)dtype, (void)layout,
      (void)stream;
  return done(result);
}
