/* conv_forward.c — y = conv(x, w) + bias on the CPU.
 * reference: f64 loops over the pairs (the oracle). explicit: per offset, gather input rows,
 * one SGEMM against the offset's weight slice, scatter-add into f32 output rows. */
#include "cpu.h"

#include <string.h>

static void forward_reference(const vc_plan *p, const vc_conv_args *a, const void *x, const void *w,
                              const void *bias, void *y, void *part[]) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol;
  double *acc = part[0], *x64 = part[1], *w64 = part[2];
  vc_cpu_to_f64(x64, x, a->dtype, p->n_in * ci);
  vc_cpu_to_f64(w64, w, a->dtype, co * K * ci);
  if (p->n_out) memset(acc, 0, (size_t)(p->n_out * co) * sizeof *acc);
  if (bias && p->n_out > 0) { /* bias into row 0, then copied to every row */
    vc_cpu_to_f64(acc, bias, a->dtype, co);
    for (int64_t o = 1; o < p->n_out; o++) memcpy(acc + o * co, acc, (size_t)co * sizeof *acc);
  }
  for (int64_t r = 0; r < K; r++) {
    /* Within one offset every output row appears once: no two threads share a row. */
#pragma omp parallel for schedule(static)
    for (int64_t j = p->offsets[r]; j < p->offsets[r + 1]; j++) {
      const double *xi = x64 + (int64_t)p->pair_in[j] * ci;
      double *yo = acc + (int64_t)p->pair_out[j] * co;
      for (int64_t c = 0; c < co; c++) {
        const double *wr = w64 + (c * K + r) * ci;
        double s = 0;
        for (int64_t k = 0; k < ci; k++) s += wr[k] * xi[k];
        yo[c] += s;
      }
    }
  }
  vc_cpu_from_f64(y, a->dtype, acc, p->n_out * co);
}

static void forward_explicit(const vc_plan *p, const vc_conv_args *a, const void *x, const void *w,
                             const void *bias, void *y, void *part[]) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol;
  const bool f32 = a->dtype == VC_DTYPE_F32;
  float *acc = f32 ? y : part[1];
  if (!f32) vc_cpu_to_f32(part[0], w, a->dtype, co * K * ci);
  vc_cpu_fill_rows(acc, p->n_out, co, bias, a->dtype);
  vc_cpu_gather_gemm_scatter(p, x, a->dtype, ci, f32 ? w : part[0], co, true, acc, part[2], part[3]);
  if (!f32) vc_cpu_from_f32(y, a->dtype, acc, p->n_out * co);
}

vc_status vc_cpu_forward(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *x, const void *w,
                         const void *bias, void *y, void *ws, size_t ws_bytes, void *stream) {
  (void)ctx, (void)ws_bytes, (void)stream;
  void *part[VC_WS_MAX_PARTS];
  vc_cpu_pass_begin(p, a, VC_PASS_FORWARD, ws, part);
  if (a->algo == VC_ALGO_REFERENCE)
    forward_reference(p, a, x, w, bias, y, part);
  else
    forward_explicit(p, a, x, w, bias, y, part);
  return VC_OK;
}
