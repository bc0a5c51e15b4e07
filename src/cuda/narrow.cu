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

/* columns of the shared weight: n_cols padded to whole float4s */
__host__ __device__ static inline int64_t nw_cols_padded(int64_t n_cols) { return (n_cols + 3) / 4 * 4; }

static size_t nw_smem(const imp_args &q) { return (size_t)(q.K * q.c_red * nw_cols_padded(q.n_cols)) * 4; }

/* ---- forward / dgrad ---------------------------------------------------------------------- */

/* v[0..cnt) = elements off .. off + cnt - 1 of src (dt, cnt: constants), zeros where !ok or
 * past `valid`. vec: the span is whole (valid >= cnt) and 8-byte aligned, so it loads as
 * 8-byte words: one request a row instead of one per element (scattered rows made the
 * element loads the bottleneck). */
__device__ static __forceinline__ void nw_row(const void *src, int dt, int64_t off, int cnt, int valid, bool vec,
                                              bool ok, float *v) {
  const int es = dt == VC_DTYPE_F32 ? 4 : 2;
  if (vec) {
    const uint2 *s2 = (const uint2 *)((const char *)src + off * es);
#pragma unroll
    for (int w = 0; w < 8; w++) {
      if (w >= cnt * es / 8) break;
      const uint2 u = ok ? s2[w] : make_uint2(0, 0);
      const uint32_t h[2] = {u.x, u.y};
#pragma unroll
      for (int e = 0; e < 2; e++) {
        if (es == 4) v[2 * w + e] = __uint_as_float(h[e]);
        else vc_unpack16x2(h[e], dt, &v[4 * w + 2 * e], &v[4 * w + 2 * e + 1]);
      }
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < 16; k++)
    if (k < cnt) v[k] = ok && k < valid ? vc_load(src, dt, off + k) : 0.0f;
}

/* vec: NW_VEC_ROWS, the gathered rows load as 8-byte words (nw_row); NW_VEC_OUT, the
 * output rows are whole 16-byte vectors (n_cols x element size % 16 == 0, out aligned) and
 * store as such (element stores of 2-byte values, one L2 request each, took the stem's
 * forward to 60 % of the L2 throughput at 7 % of the DRAM's). */
#define NW_VEC_ROWS 1
#define NW_VEC_OUT 2

/* cmax: c_red rounded up to 4, 8 or 16, a constant in each kernel. A thread walks the
 * offsets in batches of 4 (cmax 4, 8) or 2 (16): the batch's table entries, then all its
 * neighbours' values are loaded before any product, so several loads are in flight instead
 * of one chain of table load -> row load -> products per offset. */
__device__ static __forceinline__ void nw_body(const imp_args &args, int vec, const int cmax, const int dt) {
  imp_args p = args;
  p.dt = dt; /* a constant in each kernel: vc_load's dtype switch folds, and loads batch */
  extern __shared__ float4 nw_w4[];
  float *ws = (float *)nw_w4;
  const int64_t ncp = nw_cols_padded(p.n_cols), groups = (p.n_cols + NW_COLS - 1) / NW_COLS;
  const int cr = (int)p.c_red, nbat = cmax == 4 ? 4 : 32 / cmax; /* 8 at cmax 4 made ptxas spill */
  /* ws[col][k][n]: forward B[k = ci][n = co] = w[co][col][ci]; dgrad B[k = co][n = ci] =
   * w[co][rw][ci] with rw the weight slice of table column col */
  /* 32-bit index arithmetic: the weight fits shared memory (64-bit divisions here cost as
   * much as the rows of a block) */
  const int total = (int)(p.K * cr * ncp), ncp32 = (int)ncp;
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int n = e % ncp32, k = e / ncp32 % cr;
    const int col = e / (ncp32 * cr), rw = p.flip ? p.K - 1 - col : col;
    float v = 0.0f;
    if (n < p.n_cols)
      v = p.mode == MODE_FWD ? vc_load(p.w, p.dt, (n * p.K + rw) * p.ci + k) : vc_load(p.w, p.dt, (k * p.K + rw) * p.ci + n);
    ws[e] = v;
  }
  __syncthreads();
  for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; item < p.rows * groups;
       item += (int64_t)gridDim.x * blockDim.x) {
    const int64_t q = item / groups, m = order_row(p, q), n0 = item % groups * NW_COLS; /* position, row */
    float acc[NW_COLS];
#pragma unroll
    for (int j = 0; j < NW_COLS; j++)
      acc[j] = p.bias && n0 + j < p.n_cols ? vc_load(p.bias, p.dt, n0 + j) : 0.0f;
    for (int c0 = 0; c0 < p.K; c0 += nbat) {
      int32_t nb[8];
#pragma unroll
      for (int b = 0; b < 8; b++)
        if (b < nbat) nb[b] = c0 + b < p.K ? map_at(p, q, c0 + b) : -1;
      float a[32]; /* [b][k], nbat x cmax */
#pragma unroll
      for (int b = 0; b < 8; b++)
        if (b < nbat)
          nw_row(p.a_src, dt, (int64_t)(nb[b] >= 0 ? nb[b] : 0) * cr, cmax, cr, vec & NW_VEC_ROWS, nb[b] >= 0, a + b * cmax);
#pragma unroll
      for (int b = 0; b < 8; b++) {
        if (b >= nbat) break;
        if (nb[b] < 0) continue;
        const float4 *wr = (const float4 *)(ws + (c0 + b) * cr * ncp + n0);
#pragma unroll
        for (int k = 0; k < 16; k++) {
          if (k >= cmax) break;
          if (k >= cr) break;
          const float ak = a[b * cmax + k];
          /* columns n_cols .. ncp are zero padding, those past ncp zeros (a break here made
           * ptxas spill); their sums are never stored */
#pragma unroll
          for (int j = 0; j < NW_COLS / 4; j++) {
            const float4 w = n0 + 4 * j < ncp ? wr[k * ncp / 4 + j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            acc[4 * j] += ak * w.x, acc[4 * j + 1] += ak * w.y;
            acc[4 * j + 2] += ak * w.z, acc[4 * j + 3] += ak * w.w;
          }
        }
      }
    }
    if (vec & NW_VEC_OUT) { /* 16-byte stores: one request a vector, not one an element */
      const int es = dt == VC_DTYPE_F32 ? 4 : 2;
#pragma unroll
      for (int v = 0; v < NW_COLS * es / 16; v++) {
        const int j = v * 16 / es;
        if (n0 + j >= p.n_cols) break;
        uint4 o;
        if (es == 4) o = make_uint4(__float_as_uint(acc[j]), __float_as_uint(acc[j + 1]), __float_as_uint(acc[j + 2]),
                                    __float_as_uint(acc[j + 3]));
        else o = make_uint4(vc_pack2(dt, acc[j], acc[j + 1]), vc_pack2(dt, acc[j + 2], acc[j + 3]),
                            vc_pack2(dt, acc[j + 4], acc[j + 5]), vc_pack2(dt, acc[j + 6], acc[j + 7]));
        *(uint4 *)((char *)p.out + (m * p.n_cols + n0 + j) * es) = o;
      }
    } else {
#pragma unroll
      for (int j = 0; j < NW_COLS; j++)
        if (n0 + j < p.n_cols) vc_store(p.out, p.dt, m * p.n_cols + n0 + j, acc[j]);
    }
  }
}

#define NW_KERNEL(name, cmax, dt) \
  __global__ void __launch_bounds__(NW_THREADS) name(const imp_args p, int vec) { nw_body(p, vec, cmax, dt); }
/* KERNEL(prefix_DT_cmax, cmax, dt) for the three storage types */
#define NW_PER_DTYPE(KERNEL, prefix, cmax)              \
  KERNEL(prefix##_f32_##cmax, cmax, VC_DTYPE_F32)       \
  KERNEL(prefix##_f16_##cmax, cmax, VC_DTYPE_F16)       \
  KERNEL(prefix##_bf16_##cmax, cmax, VC_DTYPE_BF16)
NW_PER_DTYPE(NW_KERNEL, k_narrow, 4)
NW_PER_DTYPE(NW_KERNEL, k_narrow, 8)
NW_PER_DTYPE(NW_KERNEL, k_narrow, 16)
typedef void (*nw_kernel)(const imp_args, int);
/* [vc_cuda_dt_index][cmax 4, 8, 16] */
static const nw_kernel nw_kernels[3][3] = {{k_narrow_f16_4, k_narrow_f16_8, k_narrow_f16_16},
                                           {k_narrow_bf16_4, k_narrow_bf16_8, k_narrow_bf16_16},
                                           {k_narrow_f32_4, k_narrow_f32_8, k_narrow_f32_16}};
static int nw_index(int64_t c) { return c <= 4 ? 0 : c <= 8 ? 1 : 2; }

/* ---- wgrad ---------------------------------------------------------------------------------- */

/* part: the slices [S][co][K][ci]; p.nsplit = S; cmax: ci rounded up to 4 or 8, a constant
 * in each kernel. Block (chunk c, offset r, channel group g), g fastest. A thread takes
 * NW_WG_BATCH pairs at a time, all their loads before any product. */
#define NW_WG_BATCH 4
__device__ static __forceinline__ void nwg_body(const imp_args &args, float *part, int vec_d, int vec_x, const int cmax,
                                                const int dt) {
  imp_args p = args;
  p.dt = dt;
  __shared__ float red[NW_WG_THREADS / 32][NW_WG_CO * NW_WG_MAX_CI];
  const int64_t groups = (p.co + NW_WG_CO - 1) / NW_WG_CO;
  const int64_t g = blockIdx.x % groups, u = blockIdx.x / groups;
  int r;
  int64_t c, j0, j1;
  chunk_of(p, u, &r, &c, &j0, &j1);
  const int sel = imp_sel(p, r);
  const int64_t shift = imp_shift(p, r);
  const int32_t *const lo = imp_out_list(p, sel), *const li = imp_in_list(p, sel);
  const int64_t o0 = g * NW_WG_CO;
  const int ci = (int)p.ci;
  float acc[NW_WG_CO][NW_WG_MAX_CI];
#pragma unroll
  for (int o = 0; o < NW_WG_CO; o++)
#pragma unroll
    for (int k = 0; k < NW_WG_MAX_CI; k++) acc[o][k] = 0.0f;
  for (int64_t jb = j0 + threadIdx.x; jb < j1; jb += (int64_t)NW_WG_BATCH * blockDim.x) {
    int64_t po[NW_WG_BATCH], pi[NW_WG_BATCH];
#pragma unroll
    for (int b = 0; b < NW_WG_BATCH; b++) {
      const int64_t j = jb + (int64_t)b * blockDim.x;
      po[b] = j < j1 ? vc_list_row(lo, j - shift) : -1;
      pi[b] = j < j1 ? vc_list_row(li, j - shift) : -1;
    }
    float d[NW_WG_BATCH][NW_WG_CO], x[NW_WG_BATCH][NW_WG_MAX_CI];
#pragma unroll
    for (int b = 0; b < NW_WG_BATCH; b++) {
      nw_row(p.a_src, dt, (po[b] >= 0 ? po[b] : 0) * p.co + o0, NW_WG_CO, (int)(p.co - o0), vec_d, po[b] >= 0, d[b]);
      nw_row(p.b_src, dt, (pi[b] >= 0 ? pi[b] : 0) * ci, cmax, ci, vec_x, pi[b] >= 0, x[b]);
    }
#pragma unroll
    for (int b = 0; b < NW_WG_BATCH; b++)
#pragma unroll
      for (int o = 0; o < NW_WG_CO; o++)
#pragma unroll
        for (int k = 0; k < NW_WG_MAX_CI; k++)
          if (k < cmax) acc[o][k] += d[b][o] * x[b][k];
  }
  /* the block's sum, in a fixed order: lanes by a butterfly, warps in warp order */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 0; o < NW_WG_CO; o++)
#pragma unroll
    for (int k = 0; k < NW_WG_MAX_CI; k++) {
      if (k >= cmax) break;
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

#define NWG_KERNEL(name, cmax, dt)                                                 \
  __global__ void __launch_bounds__(NW_WG_THREADS) name(const imp_args p, float *part, int vec_d, int vec_x) { \
    nwg_body(p, part, vec_d, vec_x, cmax, dt);                                                           \
  }
NW_PER_DTYPE(NWG_KERNEL, k_narrow_wgrad, 4)
NW_PER_DTYPE(NWG_KERNEL, k_narrow_wgrad, 8)
typedef void (*nwg_kernel)(const imp_args, float *, int, int);
/* [vc_cuda_dt_index][cmax 4, 8] */
static const nwg_kernel nwg_kernels[3][2] = {{k_narrow_wgrad_f16_4, k_narrow_wgrad_f16_8},
                                             {k_narrow_wgrad_bf16_4, k_narrow_wgrad_bf16_8},
                                             {k_narrow_wgrad_f32_4, k_narrow_wgrad_f32_8}};

/* ---- host side ------------------------------------------------------------------------------ */

/* Whether src is 8-byte aligned (the callers also check that their rows' bytes are a
 * multiple of 8). */
static bool nw_aligned8(const void *src) { return ((uintptr_t)src & 7) == 0; }

/* Chunks of each offset: about 16 blocks a multiprocessor over all offsets and channel
 * groups (two are resident at a time: with 4, the stem's wgrad ran in two waves and a few
 * blocks, its multiprocessors idle half the time), NW_WG_MIN_CHUNK pairs a chunk at least
 * on average. */
static int64_t nw_chunks(const vc_plan *p, const imp_args &q) {
  const int64_t units = q.K * ((q.co + NW_WG_CO - 1) / NW_WG_CO);
  int64_t s = (16 * vc_cuda(p->ctx)->n_sm + units - 1) / units;
  const int64_t s_max = p->n_pairs / (q.K * NW_WG_MIN_CHUNK);
  if (s > s_max) s = s_max;
  return s < 1 ? 1 : s;
}

extern "C" bool vc_cuda_narrow_applies(const imp_args &q) {
  if (q.mode == MODE_WGRAD) return q.ci <= NW_WG_MAX_CI;
  return q.c_red <= NW_MAX_RED && nw_smem(q) <= NW_SMEM_MAX;
}

/* wgrad's workspace: its slices, then the bias gradient's partials. */
static size_t nw_slice_bytes(const vc_plan *p, const imp_args &q) {
  return (size_t)vc_round_up(nw_chunks(p, q) * q.co * q.K * q.ci * 4, 256);
}

extern "C" size_t vc_cuda_narrow_workspace(const vc_plan *p, const imp_args &q) {
  if (q.mode != MODE_WGRAD || !vc_cuda_narrow_applies(q)) return 0;
  return nw_slice_bytes(p, q) + vc_cuda_column_sums_tmp_bytes(p->n_out, q.co);
}

/* q: imp_shape's fields and the pass's pointers (wgrad: a_src = dy, b_src = x, pair lists,
 * device offsets; out = dw in the dtype); db: wgrad's bias gradient or NULL; ws:
 * vc_cuda_narrow_workspace bytes (wgrad). */
extern "C" vc_status vc_cuda_narrow_run(vc_context *ctx, const vc_plan *p, const imp_args &args, void *db, void *ws,
                                        cudaStream_t s) {
  imp_args q = args;
  if (q.mode == MODE_WGRAD) {
    const int64_t n = q.co * q.K * q.ci, nsl = nw_chunks(p, q);
    float *part = (float *)ws;
    q.nsplit = (int)nsl;
    const int64_t blocks = nsl * q.K * ((q.co + NW_WG_CO - 1) / NW_WG_CO);
    if (p->n_pairs > 0)
      nwg_kernels[vc_cuda_dt_index(q.dt)][q.ci > 4]<<<(unsigned)blocks, NW_WG_THREADS, 0, s>>>(
          q, part, q.co % NW_WG_CO == 0 && nw_aligned8(q.a_src), q.ci == (q.ci > 4 ? 8 : 4) && nw_aligned8(q.b_src));
    else VC_CUDA_TRY(ctx, cudaMemsetAsync(part, 0, (size_t)n * 4, s));
    vc_cuda_wgrad_finish(q.out, (vc_dtype)q.dt, part, p->n_pairs > 0 ? nsl : 1, n, db, q.a_src, p->n_out, q.co,
                         (char *)ws + nw_slice_bytes(p, q), 0, s);
  } else if (q.rows > 0) {
    const int ci = nw_index(q.c_red), cmax = 4 << ci;
    const nw_kernel k = nw_kernels[vc_cuda_dt_index(q.dt)][ci];
    /* one wave of resident blocks at most: each block first loads the whole weight (a
     * fixed 4 a multiprocessor left a fifth of the resident slots empty) */
    int resident = 0;
    VC_CUDA_TRY(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, k, NW_THREADS, nw_smem(q)));
    const int64_t items = q.rows * ((q.n_cols + NW_COLS - 1) / NW_COLS);
    const int64_t most = (int64_t)vc_cuda(ctx)->n_sm * (resident > 0 ? resident : 1);
    int64_t grid = (items + NW_THREADS - 1) / NW_THREADS;
    if (grid > most) grid = most;
    const int64_t es = q.dt == VC_DTYPE_F32 ? 4 : 2;
    const int vec = (q.c_red == cmax && nw_aligned8(q.a_src) ? NW_VEC_ROWS : 0) |
                    ((q.n_cols * es) % 16 == 0 && vc_aligned16(q.out) ? NW_VEC_OUT : 0);
    k<<<(unsigned)grid, NW_THREADS, nw_smem(q), s>>>(q, vec);
  }
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

extern "C" vc_status vc_cuda_narrow_init(vc_context *ctx) {
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < 3; i++)
      VC_CUDA_TRY(ctx, cudaFuncSetAttribute(nw_kernels[d][i], cudaFuncAttributeMaxDynamicSharedMemorySize, NW_SMEM_MAX));
  return VC_OK;
}
