/* conv_backward_data.c — dx = conv^T(dy, w) on the CPU: the forward pairs with the roles of
 * input and output rows swapped and the weight slice used untransposed. */
#include "cpu.h"

#include <string.h>

static void backward_data_reference(const vc_plan *p, const vc_conv_args *a, const void *dy, const void *w,
                                    void *dx, void *part[]) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol;
  double *acc = part[0], *dy64 = part[1], *w64 = part[2];
  vc_cpu_to_f64(dy64, dy, a->dtype, p->n_out * co);
  vc_cpu_to_f64(w64, w, a->dtype, co * K * ci);
  if (p->n_in) memset(acc, 0, (size_t)(p->n_in * ci) * sizeof *acc);
  for (int64_t r = 0; r < K; r++) {
    /* Within one offset every input row appears once. */
#pragma omp parallel for schedule(static)
    for (int64_t j = p->offsets[r]; j < p->offsets[r + 1]; j++) {
      const double *go = dy64 + (int64_t)p->pair_out[j] * co;
      double *gi = acc + (int64_t)p->pair_in[j] * ci;
      for (int64_t c = 0; c < co; c++) {
        const double *wr = w64 + (c * K + r) * ci;
        for (int64_t k = 0; k < ci; k++) gi[k] += wr[k] * go[c];
      }
    }
  }
  vc_cpu_from_f64(dx, a->dtype, acc, p->n_in * ci);
}

static void backward_data_explicit(const vc_plan *p, const vc_conv_args *a, const void *dy, const void *w,
                                   void *dx, void *part[]) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol;
  const bool f32 = a->dtype == VC_DTYPE_F32;
  float *acc = f32 ? dx : part[1];
  if (!f32) vc_cpu_to_f32(part[0], w, a->dtype, co * K * ci);
  vc_cpu_fill_rows(acc, p->n_in, ci, NULL, a->dtype);
  vc_cpu_gather_gemm_scatter(p, dy, a->dtype, co, f32 ? w : part[0], ci, false, acc, part[2], part[3]);
  if (!f32) vc_cpu_from_f32(dx, a->dtype, acc, p->n_in * ci);
}

vc_status vc_cpu_backward_data(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *dy,
                               const void *w, void *dx, void *ws, size_t ws_bytes, void *stream) {
  (void)ctx, (void)ws_bytes, (void)stream;
  void *part[VC_WS_MAX_PARTS];
  vc_cpu_pass_begin(p, a, VC_PASS_BACKWARD_DATA, ws, part);
  if (a->algo == VC_ALGO_REFERENCE)
    backward_data_reference(p, a, dy, w, dx, part);
  else
    backward_data_explicit(p, a, dy, w, dx, part);
  return VC_OK;
}
