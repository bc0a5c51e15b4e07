/* tune.c — the CPU backend's hooks for the algorithm choice in src/core/tune.c: its
 * candidates, heuristic and determinism. */
#include "cpu.h"

int vc_cpu_algos(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo out[8], int *n_tunable) {
  (void)p, (void)a, (void)pass;
  out[0] = VC_ALGO_EXPLICIT;
  out[1] = VC_ALGO_REFERENCE; /* the oracle: runnable, never a tuning candidate */
  *n_tunable = 1;             /* so vc_conv_tune times nothing: the backend has no time_choices */
  return 2;
}

vc_algo vc_cpu_heuristic(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  (void)p, (void)a, (void)pass;
  return VC_ALGO_EXPLICIT;
}

bool vc_cpu_deterministic(vc_algo algo, vc_pass pass) {
  (void)algo, (void)pass;
  return true; /* fixed chunking and thread partitions: same order every run */
}

const char *vc_cpu_device_name(vc_context *ctx) {
  (void)ctx;
  return "host";
}
