/* backend.c — the CPU backend's entry in the dispatch table. */
#include "cpu.h"

#include <string.h>

static vc_status cpu_out_coords(const vc_plan *p, int32_t *dst, void *stream) {
  (void)stream;
  for (int64_t o = 0; o < p->n_out; o++) vc_key_unpack(p->out_keys[o], dst + 4 * o);
  return VC_OK;
}

/* The CPU keeps every offset's list (lists == K). */
static vc_status cpu_kernel_map(const vc_plan *p, int32_t *in_index, int32_t *out_index, void *stream) {
  (void)stream;
  const size_t bytes = (size_t)p->n_pairs * sizeof(int32_t);
  if (in_index) memcpy(in_index, p->pair_in, bytes);
  if (out_index) memcpy(out_index, p->pair_out, bytes);
  return VC_OK;
}

static vc_status cpu_workspace_size(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant, size_t *bytes) {
  vc_cpu_ws ws;
  vc_cpu_ws_layout(p, a, pass, &ws);
  *bytes = ws.total;
  return VC_OK;
}

const vc_backend vc_cpu_backend = {
    .name = "cpu",
    .context_init = NULL,
    .context_release = NULL,
    .plan_build = vc_cpu_plan_build,
    .plan_release = vc_cpu_plan_release,
    .out_coords = cpu_out_coords,
    .kernel_map = cpu_kernel_map,
    .workspace_size = cpu_workspace_size,
    .forward = vc_cpu_forward,
    .backward_data = vc_cpu_backward_data,
    .backward_weight = vc_cpu_backward_weight,
    .algos = vc_cpu_algos,
    .heuristic = vc_cpu_heuristic,
    .deterministic = vc_cpu_deterministic,
    .time_choices = NULL, /* one tuning candidate: nothing to time */
    .device_name = vc_cpu_device_name,
};
