/* explicit.cu — the reliable fallback, any dtype: per kernel offset, gather the pairs' rows
 * into a dense buffer, one cuBLAS GEMM against the offset's weight slice, scatter-add the
 * f32 result. Buffers are chunked so the workspace stays bounded. */
#include "cuda_internal.h"

#define EXPLICIT_CHUNK (1 << 18) /* rows per gather -> GEMM -> scatter step */

static int64_t chunk_rows(const vc_plan *p) { return p->max_pairs < EXPLICIT_CHUNK ? p->max_pairs : EXPLICIT_CHUNK; }

/* Copies the rows of src that list idx gives pairs row0 .. row0 + m - 1 (vc_list_row), as
 * 4-byte words or, if odd-sized, 2-byte halves. */
__global__ static void k_gather(void *dst, const void *src, const int32_t *idx, int64_t row0, int64_t m,
                                int64_t row_elems, int esz) {
  if ((row_elems * esz) % 4 == 0) {
    const int64_t w = row_elems * esz / 4, total = m * w;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
      ((uint32_t *)dst)[i] = ((const uint32_t *)src)[vc_list_row(idx, row0 + i / w) * w + i % w];
  } else {
    const int64_t w = row_elems, total = m * w;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
      ((uint16_t *)dst)[i] = ((const uint16_t *)src)[vc_list_row(idx, row0 + i / w) * w + i % w];
  }
}

/* acc[vc_list_row(idx, row0 + j), :] += c[j, :]; rows of one offset are distinct, so no atomics. */
__global__ static void k_scatter_add(float *acc, const float *c, const int32_t *idx, int64_t row0, int64_t m,
                                     int64_t cols) {
  const int64_t total = m * cols;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
    acc[vc_list_row(idx, row0 + i / cols) * cols + i % cols] += c[i];
}

static cudaDataType_t cuda_type(vc_dtype dt) {
  return dt == VC_DTYPE_F16 ? CUDA_R_16F : dt == VC_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static cublasComputeType_t compute_type(const vc_conv_args *a) {
  return a->math == VC_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

typedef struct parts {
  float *acc;
  void *ga, *gb;
  float *gc;
  void *sums;
} parts;

/* Workspace: [acc: f32 output unless the output is f32] [gathered A] [gathered B or f32 C]
 * [bias-gradient partial sums]. One function lays it out for the size query and the run. */
static size_t layout(const vc_plan *p, const vc_conv_args *a, vc_pass pass, char *base, parts *o) {
  const int64_t ci = a->in_channels, co = a->out_channels, ch = chunk_rows(p), es = (int64_t)vc_dtype_size(a->dtype);
  const bool f32 = a->dtype == VC_DTYPE_F32;
  int64_t acc = 0, ga = 0, gb = 0, gc = 0, sums = 0;
  if (pass == VC_PASS_FORWARD) acc = f32 ? 0 : p->n_out * co * 4, ga = ch * ci * es, gc = ch * co * 4;
  else if (pass == VC_PASS_BACKWARD_DATA) acc = f32 ? 0 : p->n_in * ci * 4, ga = ch * co * es, gc = ch * ci * 4;
  else acc = f32 ? 0 : co * p->kvol * ci * 4, ga = ch * ci * es, gb = ch * co * es, sums = (int64_t)vc_cuda_column_sums_tmp_bytes(p->n_out, co);
  int64_t sizes[5] = {acc, ga, gb, gc, sums}, at = 0;
  void *ptr[5];
  for (int i = 0; i < 5; i++) {
    ptr[i] = sizes[i] && base ? base + at : NULL;
    at += vc_round_up(sizes[i], 256);
  }
  if (o) *o = (parts){(float *)ptr[0], ptr[1], ptr[2], (float *)ptr[3], ptr[4]};
  return (size_t)at;
}

extern "C" size_t vc_cuda_explicit_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  return layout(p, a, pass, NULL, NULL);
}

#define BLAS_TRY(ctx, call)                                                                                 \
  do {                                                                                                      \
    cublasStatus_t b_ = (call);                                                                             \
    if (b_ != CUBLAS_STATUS_SUCCESS)                                                                        \
      return vc_fail((ctx), VC_ERR_DEVICE, "%s failed: %s", #call, cublasGetStatusString(b_));              \
  } while (0)

extern "C" vc_status vc_cuda_explicit_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass,
                                          const void *in0, const void *in1, const void *in2, void *out0, void *out1,
                                          void *ws, cudaStream_t s) {
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol, ch = chunk_rows(p);
  const int es = (int)vc_dtype_size(a->dtype);
  const bool f32 = a->dtype == VC_DTYPE_F32;
  const cudaDataType_t t = cuda_type(a->dtype);
  const cublasComputeType_t ct = compute_type(a);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = vc_cuda(ctx)->blas;
  parts w;
  layout(p, a, pass, (char *)ws, &w);
  BLAS_TRY(ctx, cublasSetStream(h, s));
  /* Weight slice r: row-major [co, ci] at column r*ci, row stride K*ci. In cuBLAS's
   * column-major terms that is a ci x co matrix with leading dimension K*ci. */
  if (pass == VC_PASS_BACKWARD_WEIGHT) {
    float *acc = f32 ? (float *)out0 : w.acc;
    VC_CUDA_TRY(ctx, cudaMemsetAsync(acc, 0, (size_t)(co * K * ci) * sizeof(float), s));
    for (int r = 0; r < K; r++) {
      const vc_pair_list l = vc_plan_list(p, r);
      for (int64_t b = p->offsets[r]; b < p->offsets[r + 1]; b += ch) {
        const int64_t m = p->offsets[r + 1] - b < ch ? p->offsets[r + 1] - b : ch;
        k_gather<<<vc_grid(m * ci), 256, 0, s>>>(w.ga, in0, l.in, b - l.shift, m, ci, es);
        k_gather<<<vc_grid(m * co), 256, 0, s>>>(w.gb, in1, l.out, b - l.shift, m, co, es);
        /* dW_r^T (ci x co) += X^T (ci x m) * G (m x co) */
        BLAS_TRY(ctx, cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)ci, (int)co, (int)m, &one, w.ga, t, (int)ci, w.gb, t,
                                   (int)co, &one, acc + r * ci, CUDA_R_32F, (int)(K * ci), ct, CUBLAS_GEMM_DEFAULT));
      }
    }
    vc_cuda_wgrad_finish(out0, a->dtype, acc, f32 ? 0 : 1, co * K * ci, out1, in1, p->n_out, co, w.sums, 0, s);
    VC_CUDA_TRY(ctx, cudaGetLastError());
    return VC_OK;
  }
  const bool fwd = pass == VC_PASS_FORWARD;
  const int64_t c_src = fwd ? ci : co, c_dst = fwd ? co : ci, n_dst = fwd ? p->n_out : p->n_in;
  float *acc = f32 ? (float *)out0 : w.acc;
  vc_cuda_fill_rows(acc, VC_DTYPE_F32, n_dst, c_dst, fwd ? in2 : NULL, a->dtype, s);
  for (int r = 0; r < K; r++) {
    const vc_pair_list l = vc_plan_list(p, r);
    const int32_t *src_idx = fwd ? l.in : l.out, *dst_idx = fwd ? l.out : l.in;
    for (int64_t b = p->offsets[r]; b < p->offsets[r + 1]; b += ch) {
      const int64_t m = p->offsets[r + 1] - b < ch ? p->offsets[r + 1] - b : ch;
      k_gather<<<vc_grid(m * c_src), 256, 0, s>>>(w.ga, in0, src_idx, b - l.shift, m, c_src, es);
      /* forward: C^T (co x m) = W_r (co x ci) * A^T; backward-data: C^T (ci x m) = W_r^T * G^T */
      BLAS_TRY(ctx, cublasGemmEx(h, fwd ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)c_dst, (int)m, (int)c_src, &one,
                                 (const char *)in1 + r * ci * es, t, (int)(K * ci), w.ga, t, (int)c_src, &zero, w.gc,
                                 CUDA_R_32F, (int)c_dst, ct, CUBLAS_GEMM_DEFAULT));
      k_scatter_add<<<vc_grid(m * c_dst), 256, 0, s>>>(acc, w.gc, dst_idx, b - l.shift, m, c_dst);
    }
  }
  if (!f32) vc_cuda_add_slices(out0, a->dtype, acc, 1, n_dst * c_dst, s);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}
