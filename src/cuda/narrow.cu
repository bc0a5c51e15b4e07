/* narrow.cu — VC_ALGO_IMPLICIT's (and masked's fallback) kernels for layers whose reduction
 * is a few channels: the stem of a network (Ci = 3 or 4 point features), or a dgrad into
 * such an input. There a GEMM tile pads 4 channels to its 32- or 64-deep reduction step and
 * loads them element by element, so the general kernels ran a Ci = 4 -> 32 submanifold layer
 * of 400 k sites in 0.69 ms (forward) where the arithmetic is 1 GFLOP; these kernels are
 * plain FFMA in fp32, any dtype, any alignment.
 *
 * forward / dgrad (c_red <= NW_MAX_RED): a thread owns one output row and NW_COLS of its
 * columns; the whole weight sits in shared memory as fp32 [K][c_red][n_cols], read as
 * float4 broadcasts (every thread of a warp reads the same columns). For each offset the
 * thread gathers its neighbour's c_red values and adds their products.
 *
 * wgrad (ci <= NW_WG_MAX_CI): dW_r[co][ci] over offset r's pairs; a block owns one offset,
 * NW_WG_CO output channels and one of S chunks of the offset's pairs (the masked wgrad's
 * chunk-major order); each thread adds the outer products of its pairs into NW_WG_CO x ci
 * registers, the block adds its threads' sums in a fixed order and stores them to slice c;
 * a second kernel adds the S slices in order: bitwise repeatable. */
#include "cuda_internal.h"
#include "dtype.cuh"
#include "implicit.cuh"

#define NW_MAX_RED 16  /* reduction channels these kernels take at most */
#define NW_COLS 32     /* output columns a forward/dgrad thread */
#define NW_THREADS 128
#define NW_SMEM_MAX (96 * 1024) /* the weight in fp32 must fit */
#define NW_WG_CO 8              /* output channels a wgrad thread */
#define NW_WG_MAX_CI 8          /* wgrad's input channels at most: NW_WG_CO x 8 sums a thread */
#define NW_WG_THREADS 256
#define NW_WG_MIN_CHUNK 2048 /* pairs a wgrad chunk at least, on average */

static int64_t nw_cols_padded(int64_t n_cols) { return (n_cols + 3) / 4 * 4; }

static size_t nw_smem(const imp_args &q) { return (size_t)(q.K * q.c_red * nw_cols_padded(q.n_cols)) * 4; }

/* ---- forward / dgrad ---------------------------------------------------------------------- */

__global__ void __launch_bounds__(NW_THREADS) k_narrow(const imp_args p) {
  extern __shared__ float4 nw_w4[];
  float *ws = (float *)nw_w4;
  const int64_t ncp = (p.n_cols + 3) / 4 * 4, groups = (p.n_cols + NW_COLS - 1) / NW_COLS;
  const int cr = (int)p.c_red;
  /* ws[col][k][n]: forward B[k = ci][n = co] = w[co][col][ci]; dgrad B[k = co][n = ci] =
   * w[co][rw][ci] with rw the weight slice of table column col */
  const int64_t total = p.K * cr * ncp;
  for (int64_t e = threadIdx.x; e < total; e += blockDim.x) {
    const int64_t n = e % ncp, k = e / ncp % cr;
    const int col = (int)(e / (ncp * cr)), rw = p.flip ? p.K - 1 - col : col;
    float v = 0.0f;
    if (n < p.n_cols)
      v = p.mode == MODE_FWD ? vc_load(p.w, p.dt, (n * p.K + rw) * p.ci + k) : vc_load(p.w, p.dt, (k * p.K + rw) * p.ci + n);
    ws[e] = v;
  }
  __syncthreads();
  for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < p.rows * groups;
       item += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = item / groups, n0 = item % groups * NW_COLS;
    float acc[NW_COLS];
#pragma unroll
    for (int j = 0; j < NW_COLS; j++)
      acc[j] = p.bias && n0 + j < p.n_cols ? vc_load(p.bias, p.dt, n0 + j) : 0.0f;
    for (int col = 0; col < p.K; col++) {
      const int32_t nb = p.tab[m * p.K + col];
      if (nb < 0) continue;
      float a[NW_MAX_RED];
#pragma unroll
      for (int k = 0; k < NW_MAX_RED; k++) a[k] = k < cr ? vc_load(p.a_src, p.dt, (int64_t)nb * cr + k) : 0.0f;
      const float4 *wr = (const float4 *)(ws + col * cr * ncp + n0);
#pragma unroll
      for (int k = 0; k < NW_MAX_RED; k++) {
        if (k >= cr) break;
        /* columns n_cols .. ncp are zero padding, those past ncp zeros (a break here made
         * ptxas spill); their sums are never stored */
#pragma unroll
        for (int j = 0; j < NW_COLS / 4; j++) {
          const float4 w = n0 + 4 * j < ncp ? wr[k * ncp / 4 + j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          acc[4 * j] += a[k] * w.x, acc[4 * j + 1] += a[k] * w.y;
          acc[4 * j + 2] += a[k] * w.z, acc[4 * j + 3] += a[k] * w.w;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < NW_COLS; j++)
      if (n0 + j < p.n_cols) vc_store(p.out, p.dt, m * p.n_cols + n0 + j, acc[j]);
  }
}

/* ---- wgrad ---------------------------------------------------------------------------------- */

/* part: the slices [S][co][K][ci]; p.nsplit = S. Block (chunk c, offset r, channel group g),
 * g fastest. */
__global__ void __launch_bounds__(NW_WG_THREADS) k_narrow_wgrad(const imp_args p, float *part) {
  __shared__ float red[NW_WG_THREADS / 32][NW_WG_CO * NW_WG_MAX_CI];
  const int64_t groups = (p.co + NW_WG_CO - 1) / NW_WG_CO;
  const int64_t g = blockIdx.x % groups, u = blockIdx.x / groups;
  const int r = (int)(u % p.K);
  const int64_t c = u / p.K, lo = p.offsets[r], nr = p.offsets[r + 1] - lo;
  const int64_t j0 = lo + c * nr / p.nsplit, j1 = lo + (c + 1) * nr / p.nsplit, o0 = g * NW_WG_CO;
  const int ci = (int)p.ci;
  float acc[NW_WG_CO][NW_WG_MAX_CI];
#pragma unroll
  for (int o = 0; o < NW_WG_CO; o++)
#pragma unroll
    for (int k = 0; k < NW_WG_MAX_CI; k++) acc[o][k] = 0.0f;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t po = p.pout[j], pi = p.pin[j];
    float d[NW_WG_CO], x[NW_WG_MAX_CI];
#pragma unroll
    for (int o = 0; o < NW_WG_CO; o++) d[o] = o0 + o < p.co ? vc_load(p.a_src, p.dt, po * p.co + o0 + o) : 0.0f;
#pragma unroll
    for (int k = 0; k < NW_WG_MAX_CI; k++) x[k] = k < ci ? vc_load(p.b_src, p.dt, pi * ci + k) : 0.0f;
#pragma unroll
    for (int o = 0; o < NW_WG_CO; o++)
#pragma unroll
      for (int k = 0; k < NW_WG_MAX_CI; k++) acc[o][k] += d[o] * x[k];
  }
  /* the block's sum, in a fixed order: lanes by a butterfly, warps in warp order */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 0; o < NW_WG_CO; o++)
#pragma unroll
    for (int k = 0; k < NW_WG_MAX_CI; k++) {
      if (k >= ci) break;
      float v = acc[o][k];
#pragma unroll
      for (int sh = 16; sh > 0; sh >>= 1) v += __shfl_xor_sync(0xffffffffu, v, sh);
      if (lane == 0) red[warp][o * NW_WG_MAX_CI + k] = v;
    }
  __syncthreads();
  for (int e = threadIdx.x; e < NW_WG_CO * ci; e += blockDim.x) {
    const int o = e / ci, k = e % ci;
    if (o0 + o >= p.co) continue;
    float v = red[0][o * NW_WG_MAX_CI + k];
    for (int w = 1; w < NW_WG_THREADS / 32; w++) v += red[w][o * NW_WG_MAX_CI + k];
    part[((c * p.co + o0 + o) * p.K + r) * ci + k] = v;
  }
}

/* dw = the sum of the slices in order, converted. */
__global__ static void k_narrow_slices(const float *part, int64_t nslices, int64_t n, void *dw, int dt) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    float v = part[e];
    for (int64_t c = 1; c < nslices; c++) v += part[c * n + e];
    vc_store(dw, dt, e, v);
  }
}

/* ---- host side ------------------------------------------------------------------------------ */

/* Chunks of each offset: about 4 blocks a multiprocessor over all offsets and channel groups,
 * NW_WG_MIN_CHUNK pairs a chunk at least on average. */
static int64_t nw_chunks(const vc_plan *p, const imp_args &q) {
  const int64_t units = q.K * ((q.co + NW_WG_CO - 1) / NW_WG_CO);
  int64_t s = (4 * vc_cuda(p->ctx)->n_sm + units - 1) / units;
  const int64_t s_max = p->n_pairs / (q.K * NW_WG_MIN_CHUNK);
  if (s > s_max) s = s_max;
  return s < 1 ? 1 : s;
}

extern "C" bool vc_cuda_narrow_applies(const imp_args &q) {
  if (q.mode == MODE_WGRAD) return q.ci <= NW_WG_MAX_CI;
  return q.c_red <= NW_MAX_RED && nw_smem(q) <= NW_SMEM_MAX;
}

extern "C" size_t vc_cuda_narrow_workspace(const vc_plan *p, const imp_args &q) {
  if (q.mode != MODE_WGRAD || !vc_cuda_narrow_applies(q)) return 0;
  return (size_t)vc_round_up(nw_chunks(p, q) * q.co * q.K * q.ci * 4, 256);
}

/* q: imp_shape's fields and the pass's pointers (wgrad: a_src = dy, b_src = x, pair lists,
 * device offsets; out = dw in the dtype); ws: vc_cuda_narrow_workspace bytes (wgrad). */
extern "C" vc_status vc_cuda_narrow_run(vc_context *ctx, const vc_plan *p, const imp_args &args, void *ws,
                                        cudaStream_t s) {
  imp_args q = args;
  if (q.mode == MODE_WGRAD) {
    const int64_t n = q.co * q.K * q.ci, nsl = nw_chunks(p, q);
    float *part = (float *)ws;
    q.nsplit = (int)nsl;
    const int64_t blocks = nsl * q.K * ((q.co + NW_WG_CO - 1) / NW_WG_CO);
    if (p->n_pairs > 0) k_narrow_wgrad<<<(unsigned)blocks, NW_WG_THREADS, 0, s>>>(q, part);
    else VC_CUDA_TRY(ctx, cudaMemsetAsync(part, 0, (size_t)n * 4, s));
    k_narrow_slices<<<vc_grid(n), 256, 0, s>>>(part, p->n_pairs > 0 ? nsl : 1, n, q.out, q.dt);
  } else if (q.rows > 0) {
    const int64_t items = q.rows * ((q.n_cols + NW_COLS - 1) / NW_COLS);
    int64_t grid = (items + NW_THREADS - 1) / NW_THREADS, most = 16 * (int64_t)vc_cuda(ctx)->n_sm;
    if (grid > most) grid = most; /* each block first loads the whole weight */
    k_narrow<<<(unsigned)grid, NW_THREADS, nw_smem(q), s>>>(q);
  }
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

extern "C" vc_status vc_cuda_narrow_init(vc_context *ctx) {
  VC_CUDA_TRY(ctx, cudaFuncSetAttribute(k_narrow, cudaFuncAttributeMaxDynamicSharedMemorySize, NW_SMEM_MAX));
  return VC_OK;
}
