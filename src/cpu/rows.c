/* rows.c — moving rows between tensors of any storage dtype and f32/f64 buffers. */
#include "cpu.h"

#include <cblas.h>
#include <string.h>

static inline float load_f32(const void *src, vc_dtype dt, int64_t i) {
  switch (dt) {
  case VC_DTYPE_F16: return vc_half_to_float(((const uint16_t *)src)[i]);
  case VC_DTYPE_BF16: return vc_bf16_to_float(((const uint16_t *)src)[i]);
  default: return ((const float *)src)[i];
  }
}

void vc_cpu_to_f32(float *dst, const void *src, vc_dtype dt, int64_t n) {
  if (n == 0) return;
  if (dt == VC_DTYPE_F32) {
    memcpy(dst, src, (size_t)n * sizeof(float));
    return;
  }
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) dst[i] = load_f32(src, dt, i);
}

void vc_cpu_from_f32(void *dst, vc_dtype dt, const float *src, int64_t n) {
  if (n == 0) return;
  switch (dt) {
  case VC_DTYPE_F16:
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_float_to_half(src[i]);
    break;
  case VC_DTYPE_BF16:
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_float_to_bf16(src[i]);
    break;
  default: memcpy(dst, src, (size_t)n * sizeof(float));
  }
}

void vc_cpu_to_f64(double *dst, const void *src, vc_dtype dt, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) dst[i] = load_f32(src, dt, i);
}

void vc_cpu_from_f64(void *dst, vc_dtype dt, const double *src, int64_t n) {
  switch (dt) {
  case VC_DTYPE_F16:
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_float_to_half((float)src[i]);
    break;
  case VC_DTYPE_BF16:
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_float_to_bf16((float)src[i]);
    break;
  default:
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)src[i];
  }
}

void vc_cpu_gather_rows(float *dst, const void *src, vc_dtype dt, int64_t c, const int32_t *idx, int64_t m) {
  if (dt == VC_DTYPE_F32) {
    const float *s = src;
#pragma omp parallel for schedule(static) if (m * c > 16384)
    for (int64_t j = 0; j < m; j++) memcpy(dst + j * c, s + (int64_t)idx[j] * c, (size_t)c * sizeof(float));
    return;
  }
#pragma omp parallel for schedule(static) if (m * c > 16384)
  for (int64_t j = 0; j < m; j++) {
    const int64_t base = (int64_t)idx[j] * c;
    for (int64_t k = 0; k < c; k++) dst[j * c + k] = load_f32(src, dt, base + k);
  }
}

void vc_cpu_scatter_add_rows(float *acc, int64_t c, const float *src, const int32_t *idx, int64_t m) {
#pragma omp parallel for schedule(static) if (m * c > 16384)
  for (int64_t j = 0; j < m; j++) {
    float *restrict d = acc + (int64_t)idx[j] * c;
    const float *restrict s = src + j * c;
    for (int64_t k = 0; k < c; k++) d[k] += s[k];
  }
}

void vc_cpu_fill_rows(float *rows, int64_t n, int64_t c, const void *bias, vc_dtype dt) {
  if (n == 0) return;
  if (bias)
    vc_cpu_to_f32(rows, bias, dt, c);
  else
    memset(rows, 0, (size_t)c * sizeof(float));
#pragma omp parallel for schedule(static) if (n * c > 65536)
  for (int64_t i = 1; i < n; i++) memcpy(rows + i * c, rows, (size_t)c * sizeof(float));
}

void vc_cpu_column_sums(void *db, vc_dtype dt, const void *dy, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static) if (n * c > 65536)
  for (int64_t k = 0; k < c; k++) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += load_f32(dy, dt, i * c + k);
    vc_cpu_from_f64((char *)db + k * (int64_t)vc_dtype_size(dt), dt, &s, 1);
  }
}

void vc_cpu_gather_gemm_scatter(const vc_plan *p, const void *src, vc_dtype dt, int64_t c_src, const float *w32,
                                int64_t c_dst, bool forward, float *acc, float *ga, float *gc) {
  const int64_t K = p->kvol, ch = vc_cpu_chunk_rows(p), ci = forward ? c_src : c_dst;
  const int32_t *src_idx = forward ? p->pair_in : p->pair_out, *dst_idx = forward ? p->pair_out : p->pair_in;
  for (int64_t r = 0; r < K; r++) {
    for (int64_t b = p->offsets[r]; b < p->offsets[r + 1]; b += ch) {
      const int64_t m = p->offsets[r + 1] - b < ch ? p->offsets[r + 1] - b : ch;
      vc_cpu_gather_rows(ga, src, dt, c_src, src_idx + b, m);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, forward ? CblasTrans : CblasNoTrans, (int)m, (int)c_dst,
                  (int)c_src, 1.0f, ga, (int)c_src, w32 + r * ci, (int)(K * ci), 0.0f, gc, (int)c_dst);
      vc_cpu_scatter_add_rows(acc, c_dst, gc, dst_idx + b, m);
    }
  }
}
