/* conv_backward_weight.c — dw_r = sum over the pairs of offset r of dy[out] x[in]^T, and
 * db = column sums of dy, on the CPU. */
#include "cpu.h"

#include <cblas.h>
#include <string.h>

static void backward_weight_reference(const vc_plan *p, const vc_conv_args *a, const void *x, const void *dy,
                                      void *dw, void *part[]) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol;
  double *acc = part[0], *x64 = part[1], *dy64 = part[2];
  vc_cpu_to_f64(x64, x, a->dtype, p->n_in * ci);
  vc_cpu_to_f64(dy64, dy, a->dtype, p->n_out * co);
  /* Each (offset, output channel) owns one weight row: parallel without sharing. */
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t r = 0; r < K; r++)
    for (int64_t c = 0; c < co; c++) {
      double *row = acc + (c * K + r) * ci;
      for (int64_t k = 0; k < ci; k++) row[k] = 0;
      for (int64_t j = p->offsets[r]; j < p->offsets[r + 1]; j++) {
        const double g = dy64[(int64_t)p->pair_out[j] * co + c];
        const double *xi = x64 + (int64_t)p->pair_in[j] * ci;
        for (int64_t k = 0; k < ci; k++) row[k] += g * xi[k];
      }
    }
  vc_cpu_from_f64(dw, a->dtype, acc, co * K * ci);
}

static void backward_weight_explicit(const vc_plan *p, const vc_conv_args *a, const void *x, const void *dy,
                                     void *dw, void *part[]) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol, ch = vc_cpu_chunk_rows(p);
  const bool f32 = a->dtype == VC_DTYPE_F32;
  float *acc = f32 ? dw : part[0], *gx = part[1], *gy = part[2];
  memset(acc, 0, (size_t)(co * K * ci) * sizeof(float));
  for (int64_t r = 0; r < K; r++) {
    for (int64_t b = p->offsets[r]; b < p->offsets[r + 1]; b += ch) {
      const int64_t m = p->offsets[r + 1] - b < ch ? p->offsets[r + 1] - b : ch;
      vc_cpu_gather_rows(gx, x, a->dtype, ci, p->pair_in + b, m);
      vc_cpu_gather_rows(gy, dy, a->dtype, co, p->pair_out + b, m);
      /* dW_r[co, ci] += gy[m, co]^T * gx[m, ci]; dW_r rows are K*ci apart */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)co, (int)ci, (int)m, 1.0f, gy, (int)co, gx,
                  (int)ci, 1.0f, acc + r * ci, (int)(K * ci));
    }
  }
  if (!f32) vc_cpu_from_f32(dw, a->dtype, acc, co * K * ci);
}

vc_status vc_cpu_backward_weight(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *x,
                                 const void *dy, void *dw, void *db, void *ws, size_t ws_bytes, void *stream) {
  (void)ctx, (void)variant, (void)ws_bytes, (void)stream;
  void *part[VC_WS_MAX_PARTS];
  vc_cpu_pass_begin(p, a, VC_PASS_BACKWARD_WEIGHT, ws, part);
  if (a->algo == VC_ALGO_REFERENCE)
    backward_weight_reference(p, a, x, dy, dw, part);
  else
    backward_weight_explicit(p, a, x, dy, dw, part);
  if (db) vc_cpu_column_sums(db, a->dtype, dy, p->n_out, a->out_channels);
  return VC_OK;
}
