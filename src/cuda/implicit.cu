/* implicit.cu — fused gather-GEMM-scatter, one launch per pass, any SM >= 80.
 *
 * All three passes are one GEMM shape C[m, n] = sum_k A[m, k] B[k, n] with gathered rows:
 *   forward   m = output row (Gray order), k = (active offset r, ci), n = co
 *             A = x[nb(m, r)], B = W_r^T                      (each output row: one block)
 *   dgrad     m = input row, k = (r, co), n = ci
 *             A = dy[nbt(m, r)], B = W_r                      (each input row: one block)
 * (nb(m, r): the input row that output row m meets through offset r, from the plan's
 * neighbour map; nbt: the reverse map, or for submanifold nb(m, K-1-r).)
 *   wgrad     m = co, n = ci, k = pairs of offset r (split)
 *             A = dy[pair_out]^T, B = x[pair_in]              (fp32 atomics across splits;
 *                                                              unsplit: stored directly)
 * f16/bf16: mma.sync m16n8k16 fed by ldmatrix from a TC_STAGES-deep cp.async ring.
 * f32 (exact) and tf32: an FFMA tile kernel with the same index logic (tf32 computed in
 * full f32 precision; hopper/masked.cu has the tf32 tensor-core forward and dgrad). */
#include "cuda_internal.h"
#include "dtype.cuh"
#include "implicit.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mma.cuh"

#include <string.h>

/* Tensor-core tile (all configurations of this family: one row). */
#define TC_BM 128
#define TC_BN 128
#define TC_BK 32
#define TC_STAGES 4
static_assert(TC_STAGES == 4, "the main loop waits with VC_CP_ASYNC_WAIT(2), a literal TC_STAGES - 2");
#define TC_PAD 8
#define TC_THREADS 256
#define TC_TILE_ELEMS (TC_BM * (TC_BK + TC_PAD)) /* >= TC_BK * (TC_BM + TC_PAD) */
#define TC_SMEM_BYTES (2 * TC_STAGES * TC_TILE_ELEMS * 2)

/* FFMA tile for exact f32. */
#define FF_BM 64
#define FF_BN 64
#define FF_BK 16
#define FF_THREADS 256

#define WGRAD_SPLIT_MIN 2048 /* pairs per wgrad split at least */

/* ---- tensor-core kernel (f16 / bf16) ------------------------------------------------------ */

/* 8 elements (16 bytes) from global to shared: cp.async when the channel count allows
 * 16-byte alignment, else element by element; zeros past `limit` or for a missing row. */
__device__ static inline void load8(uint16_t *dst, const uint16_t *src, bool row_ok, int64_t l, int64_t limit, int vec,
                                    const uint16_t *safe) {
  if (vec) { /* a skipped copy still names a valid global address */
    const bool ok = row_ok && l < limit;
    vc_cp_async16(dst, ok ? src : safe, ok);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) dst[e] = row_ok && l + e < limit ? src[e] : (uint16_t)0;
}

/* A thread's two A and two B sources for the current offset, as indices of 16-byte chunks
 * (32-bit: fewer registers than pointers): resolved when the offset changes (every nkc
 * stages) and advanced by the channel step. NONE: no row. Used on the fast path. */
#define NONE 0xffffffffu
typedef struct load_state {
  int a;
  uint32_t ca[2], cb[2];
} load_state;

__device__ static __forceinline__ void tc_load_stage(const imp_args &p, const tile_pos &t, const int16_t *act,
                                     const int32_t *gtab, const int32_t *rowid, int n_act, int it, uint16_t *sA,
                                     uint16_t *sB, load_state &st) {
  const uint16_t *a_src = (const uint16_t *)p.a_src, *b_src = (const uint16_t *)p.b_src;
  const uint16_t *w = (const uint16_t *)p.w;
  if (p.mode == MODE_WGRAD) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int c = threadIdx.x + h * TC_THREADS, k = c / 16, q = c % 16; /* [BK rows][128 contiguous] */
      const int64_t j = t.j0 + (int64_t)it * TC_BK + k;
      const bool ok = j < t.j1;
      const int64_t ro = ok ? vc_list_row(t.lo, j) : 0, ri = ok ? vc_list_row(t.li, j) : 0;
      load8(sA + k * (TC_BM + TC_PAD) + q * 8, a_src + ro * p.co + t.m0 + q * 8, ok, t.m0 + q * 8, p.co, p.fast, a_src);
      load8(sB + k * (TC_BN + TC_PAD) + q * 8, b_src + ri * p.ci + t.n0 + q * 8, ok, t.n0 + q * 8, p.ci, p.fast, b_src);
    }
    return;
  }
  const int a = it / t.nkc, col = act[a], rw = p.flip ? p.K - 1 - col : col;
  const int64_t k0 = (int64_t)(it % t.nkc) * TC_BK;
  if (p.fast) {
    if (a != st.a) {
      st.a = a;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int c = threadIdx.x + h * TC_THREADS;
        const int32_t row = gather_row(p, t.m0, gtab, rowid, n_act, TC_BM, a, col, c / 4);
        st.ca[h] = row >= 0 ? (uint32_t)(((int64_t)row * p.c_red) / 8 + c % 4) : NONE;
        if (p.mode == MODE_FWD) { /* B[n][k] = w[co = n0+n][r][ci = k0+k]: k contiguous */
          const int64_t co = t.n0 + c / 4;
          st.cb[h] = co < p.co ? (uint32_t)((co * p.K + rw) * p.ci / 8 + c % 4) : NONE;
        } else { /* dgrad: B[k][n] = w[co = k0+k][r][ci = n0+n]: n contiguous */
          st.cb[h] = (uint32_t)((((int64_t)(c / 16) * p.K + rw) * p.ci + t.n0) / 8 + c % 16);
        }
      }
    }
    const uint4 *a4 = (const uint4 *)a_src, *w4 = (const uint4 *)w;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int c = threadIdx.x + h * TC_THREADS;
      const bool oka = st.ca[h] != NONE && k0 + (c % 4) * 8 < p.c_red;
      vc_cp_async16(sA + (c / 4) * (TC_BK + TC_PAD) + (c % 4) * 8, oka ? a4 + st.ca[h] + k0 / 8 : a4, oka);
      if (p.mode == MODE_FWD) {
        const bool okb = st.cb[h] != NONE && k0 + (c % 4) * 8 < p.ci;
        vc_cp_async16(sB + (c / 4) * (TC_BK + TC_PAD) + (c % 4) * 8, okb ? w4 + st.cb[h] + k0 / 8 : w4, okb);
      } else {
        const bool okb = k0 + c / 16 < p.co && t.n0 + (c % 16) * 8 < p.ci;
        vc_cp_async16(sB + (c / 16) * (TC_BN + TC_PAD) + (c % 16) * 8, okb ? w4 + st.cb[h] + k0 * p.K * p.ci / 8 : w4, okb);
      }
    }
    return;
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int c = threadIdx.x + h * TC_THREADS; /* one of 512 16-byte chunks per operand */
    { /* A: [128 rows][BK contiguous], rows gathered through the map (gtab) */
      const int m = c / 4, q = c % 4;
      const int32_t row = gather_row(p, t.m0, gtab, rowid, n_act, TC_BM, a, col, m);
      load8(sA + m * (TC_BK + TC_PAD) + q * 8, a_src + (int64_t)max(row, 0) * p.c_red + k0 + q * 8, row >= 0,
            k0 + q * 8, p.c_red, p.fast, a_src);
    }
    if (p.mode == MODE_FWD) { /* B[n][k] = w[co = n0+n][r][ci = k0+k]: k contiguous */
      const int n = c / 4, q = c % 4;
      const int64_t co = t.n0 + n;
      load8(sB + n * (TC_BK + TC_PAD) + q * 8, w + ((co < p.co ? co : 0) * p.K + rw) * p.ci + k0 + q * 8, co < p.co,
            k0 + q * 8, p.ci, p.fast, w);
    } else { /* dgrad: B[k][n] = w[co = k0+k][r][ci = n0+n]: n contiguous */
      const int k = c / 16, q = c % 16;
      const int64_t co = k0 + k;
      load8(sB + k * (TC_BN + TC_PAD) + q * 8, w + ((co < p.co ? co : 0) * p.K + rw) * p.ci + t.n0 + q * 8, co < p.co,
            t.n0 + q * 8, p.ci, p.fast, w);
    }
  }
}

__device__ static __forceinline__ void tc_compute_stage(const imp_args &p, const uint16_t *sA, const uint16_t *sB, float acc[4][4][4],
                                        int wm, int wn, int lane) {
  const bool a_kcontig = p.mode != MODE_WGRAD, b_kcontig = p.mode == MODE_FWD;
  const int l8 = lane & 7, lb = (lane >> 3) & 1, lh = lane >> 4;
#pragma unroll
  for (int kk = 0; kk < TC_BK / 16; kk++) {
    uint32_t af[4][4], bf[4][2];
#pragma unroll
    for (int mi = 0; mi < 4; mi++) {
      const int m = wm * 64 + mi * 16;
      if (a_kcontig)
        vc_ldmatrix_x4(af[mi], sA + (m + l8 + 8 * lb) * (TC_BK + TC_PAD) + kk * 16 + 8 * lh);
      else
        vc_ldmatrix_x4_trans(af[mi], sA + (kk * 16 + l8 + 8 * lh) * (TC_BM + TC_PAD) + m + 8 * lb);
    }
#pragma unroll
    for (int nj = 0; nj < 2; nj++) {
      const int n = wn * 32 + nj * 16;
      uint32_t r[4];
      if (b_kcontig)
        vc_ldmatrix_x4(r, sB + (n + l8 + 8 * lh) * (TC_BK + TC_PAD) + kk * 16 + 8 * lb);
      else
        vc_ldmatrix_x4_trans(r, sB + (kk * 16 + l8 + 8 * lb) * (TC_BN + TC_PAD) + n + 8 * lh);
      bf[2 * nj][0] = r[0], bf[2 * nj][1] = r[1], bf[2 * nj + 1][0] = r[2], bf[2 * nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
      for (int ni = 0; ni < 4; ni++) {
        if (p.dt == VC_DTYPE_BF16) vc_mma_bf16(acc[mi][ni], af[mi], bf[ni]);
        else vc_mma_f16(acc[mi][ni], af[mi], bf[ni]);
      }
  }
}

/* Writes one accumulator: rows own their output (fwd/dgrad), wgrad adds across splits
 * (into fp32) or, unsplit, owns its element of dW. */
__device__ static __forceinline__ void emit(const imp_args &p, const tile_pos &t, const int32_t *rowid, int m, int64_t n, float v) {
  if (p.mode == MODE_WGRAD) {
    const int64_t co = t.m0 + m, i = (co * p.K + t.r) * p.ci + n;
    if (co >= p.co || n >= p.ci) return;
    if (p.nsplit == 1) vc_store(p.out, p.dt, i, v);
    else atomicAdd((float *)p.out + i, v);
    return;
  }
  const int32_t row = rowid[m];
  if (row < 0 || n >= p.n_cols) return;
  if (p.bias) v += vc_load(p.bias, p.dt, n);
  vc_store(p.out, p.dt, (int64_t)row * p.n_cols + n, v);
}

/* Two neighbouring columns of one row: one 32-bit store for 16-bit storage when both exist. */
__device__ static __forceinline__ void emit2(const imp_args &p, const tile_pos &t, const int32_t *rowid, int m, int64_t n, float v0,
                                    float v1) {
  const int32_t row = p.mode == MODE_WGRAD ? -1 : rowid[m];
  if (row < 0 || n + 1 >= p.n_cols || (p.n_cols & 1)) { /* 16-bit storage only (tc_body) */
    emit(p, t, rowid, m, n, v0);
    emit(p, t, rowid, m, n + 1, v1);
    return;
  }
  /* even offset: n and n_cols are even */
  *(uint32_t *)((uint16_t *)p.out + (int64_t)row * p.n_cols + n) = pack2(p, n, v0, v1);
}

/* The body is inlined into one kernel per (pass, dtype, fast) so that all three are
 * compile-time constants: the operand layouts, ldmatrix variants and mma type fold away. */
__device__ static __forceinline__ void tc_body(const imp_args &args, const int mode, const int dt, const int fast) {
  imp_args p = args;
  p.mode = mode, p.dt = dt;
  p.fast = fast;
  extern __shared__ __align__(16) uint16_t smem[];
  TILE_SETUP(TC_BM, TC_BN, TC_BK, true);
  uint16_t *sA = smem, *sB = smem + TC_STAGES * TC_TILE_ELEMS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp % 2, wn = warp / 2;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) acc[i][j][k] = 0.0f;

  load_state st;
  st.a = -1;
#pragma unroll
  for (int s = 0; s < TC_STAGES - 1; s++) {
    if (s < t.n_it) tc_load_stage(p, t, act, gtab, rowid, n_act, s, sA + s * TC_TILE_ELEMS, sB + s * TC_TILE_ELEMS, st);
    vc_cp_async_commit();
  }
  for (int it = 0; it < t.n_it; it++) {
    VC_CP_ASYNC_WAIT(2); /* == TC_STAGES - 2: stage `it` has landed */
    __syncthreads();     /* ... for every thread, and stage it-1 is no longer read */
    const int nxt = it + TC_STAGES - 1;
    if (nxt < t.n_it)
      tc_load_stage(p, t, act, gtab, rowid, n_act, nxt, sA + (nxt % TC_STAGES) * TC_TILE_ELEMS,
                    sB + (nxt % TC_STAGES) * TC_TILE_ELEMS, st);
    vc_cp_async_commit();
    /* A warp whose 64 rows all miss this offset has nothing to add: one uniform branch
     * around the whole stage (finer skips inside the unrolled MMAs cost registers). */
    const uint32_t live = p.mode == MODE_WGRAD || n_act > GTAB_OFFSETS ? ~0u : live16[it / t.nkc];
    if (live >> (wm * 4) & 0xfu)
      tc_compute_stage(p, sA + (it % TC_STAGES) * TC_TILE_ELEMS, sB + (it % TC_STAGES) * TC_TILE_ELEMS, acc, wm, wn, lane);
  }
  VC_CP_ASYNC_WAIT(0);

  /* Fast path: the tile goes through shared memory (the pipeline's, now idle) so that each
   * output row leaves as 16-byte stores; the fragments' own layout writes 4 bytes per row
   * per thread and wastes half of every sector. */
  const bool staged = p.mode != MODE_WGRAD && p.fast;
  uint16_t *sC = smem; /* [TC_BM][TC_BN + TC_PAD] */
  if (staged) __syncthreads();
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 4; mi++)
#pragma unroll
    for (int ni = 0; ni < 4; ni++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int m = wm * 64 + mi * 16 + g + 8 * h, n = wn * 32 + ni * 8 + 2 * q;
        const float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        if (!staged) emit2(p, t, rowid, m, t.n0 + n, v0, v1);
        else if (t.n0 + n < p.n_cols) /* n_cols % 8 == 0 on the fast path */
          *(uint32_t *)(sC + m * (TC_BN + TC_PAD) + n) = pack2(p, t.n0 + n, v0, v1);
      }
  if (!staged) return;
  __syncthreads();
  for (int c = threadIdx.x; c < TC_BM * TC_BN / 8; c += TC_THREADS) {
    const int m = c / (TC_BN / 8), n = (c % (TC_BN / 8)) * 8;
    const int32_t row = rowid[m];
    if (row >= 0 && t.n0 + n < p.n_cols)
      *(uint4 *)((uint16_t *)p.out + (int64_t)row * p.n_cols + t.n0 + n) = *(const uint4 *)(sC + m * (TC_BN + TC_PAD) + n);
  }
}

/* Fast kernels: two CTAs per SM, 128 registers, no spills (-Xptxas -v); the general path
 * runs one CTA per SM rather than spill. One kernel per
 * (pass, dtype, fast): `fast` = channel counts multiple of 8, 16-byte aligned operands and
 * tensors below 2^32 chunks; the general path copies element by element. */
#define TC_KERNEL(name, mode, dt, fast)                                                                     \
  __global__ void __launch_bounds__(TC_THREADS, (fast) ? 2 : 1) name(const imp_args p) { tc_body(p, mode, dt, fast); }
/* the general and the fast kernel of one (pass, dtype) */
#define TC_KERNELS(name, mode, dt) TC_KERNEL(k_tc_##name, mode, dt, 0) TC_KERNEL(k_tc_##name##_fast, mode, dt, 1)
TC_KERNELS(fwd_f16, MODE_FWD, VC_DTYPE_F16)
TC_KERNELS(fwd_bf16, MODE_FWD, VC_DTYPE_BF16)
TC_KERNELS(dgrad_f16, MODE_DGRAD, VC_DTYPE_F16)
TC_KERNELS(dgrad_bf16, MODE_DGRAD, VC_DTYPE_BF16)
TC_KERNELS(wgrad_f16, MODE_WGRAD, VC_DTYPE_F16)
TC_KERNELS(wgrad_bf16, MODE_WGRAD, VC_DTYPE_BF16)

typedef void (*tc_kernel)(const imp_args);
/* [fast][mode][dtype == bf16] */
static const tc_kernel tc_kernels[2][3][2] = {
    {{k_tc_fwd_f16, k_tc_fwd_bf16}, {k_tc_dgrad_f16, k_tc_dgrad_bf16}, {k_tc_wgrad_f16, k_tc_wgrad_bf16}},
    {{k_tc_fwd_f16_fast, k_tc_fwd_bf16_fast},
     {k_tc_dgrad_f16_fast, k_tc_dgrad_bf16_fast},
     {k_tc_wgrad_f16_fast, k_tc_wgrad_bf16_fast}}};

/* ---- FFMA kernel (exact f32) --------------------------------------------------------------- */

__device__ static inline float ld_or0(const float *src, bool ok) { return ok ? *src : 0.0f; }

/* sA[k][m], sB[k][n] for one BK slice; scalar, synchronous, zero-filled. The wgrad's slice
 * first puts its pairs' rows in sidx (lists: its output and input rows, vc_list_row; -1 past
 * the tile's pairs), one thread an entry, then every element reads them there. */
__device__ static __forceinline__ void ff_load(const imp_args &p, const tile_pos &t, const int16_t *act,
                               const int32_t *gtab, const int32_t *rowid, int n_act, int it,
                               const int32_t *const *lists,
                               int32_t (*sidx)[FF_BK], float (*sA)[FF_BM], float (*sB)[FF_BN]) {
  const float *a_src = (const float *)p.a_src, *b_src = (const float *)p.b_src, *w = (const float *)p.w;
  if (p.mode == MODE_WGRAD) {
    if (threadIdx.x < 2 * FF_BK) {
      const int k = threadIdx.x % FF_BK, side = threadIdx.x / FF_BK;
      const int64_t j = t.j0 + (int64_t)it * FF_BK + k;
      sidx[side][k] = j < t.j1 ? vc_list_row(lists[side], j) : -1;
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < FF_BK * FF_BM; e += FF_THREADS) {
    if (p.mode == MODE_WGRAD) { /* k-major element order: coalesced along m and n */
      const int k = e / FF_BM, mn = e % FF_BM;
      const int32_t ro = sidx[0][k], ri = sidx[1][k];
      const int64_t co = t.m0 + mn, ci = t.n0 + mn;
      sA[k][mn] = ld_or0(a_src + (ro >= 0 ? (int64_t)ro * p.co + co : 0), ro >= 0 && co < p.co);
      sB[k][mn] = ld_or0(b_src + (ri >= 0 ? (int64_t)ri * p.ci + ci : 0), ri >= 0 && ci < p.ci);
      continue;
    }
    const int a = it / t.nkc, col = act[a], rw = p.flip ? p.K - 1 - col : col;
    const int64_t k0 = (int64_t)(it % t.nkc) * FF_BK;
    { /* A: m-major element order, coalesced along k */
      const int m = e / FF_BK, k = e % FF_BK;
      const int32_t row = gather_row(p, t.m0, gtab, rowid, n_act, FF_BM, a, col, m);
      sA[k][m] = ld_or0(a_src + (row >= 0 ? (int64_t)row * p.c_red + k0 + k : 0), row >= 0 && k0 + k < p.c_red);
    }
    if (p.mode == MODE_FWD) {
      const int n = e / FF_BK, k = e % FF_BK;
      const int64_t co = t.n0 + n, ci = k0 + k;
      sB[k][n] = ld_or0(w + (co < p.co && ci < p.ci ? (co * p.K + rw) * p.ci + ci : 0), co < p.co && ci < p.ci);
    } else {
      const int k = e / FF_BN, n = e % FF_BN;
      const int64_t co = k0 + k, ci = t.n0 + n;
      sB[k][n] = ld_or0(w + (co < p.co && ci < p.ci ? (co * p.K + rw) * p.ci + ci : 0), co < p.co && ci < p.ci);
    }
  }
}

/* Five CTAs a multiprocessor (48 registers, no spill). The wgrad's two list pointers a tile
 * (tile_pos.lo, li: vc_plan.lists; NULL for a mirrored plan's centre) wait in shared memory
 * between slices: held in registers they took the kernel to 57-62 registers, and bounded to
 * 48 its forward launches in suite L f32 ran 3-4 % longer. A slice's pair rows go through
 * shared memory too (ff_load): each element loading its own through the lists made generic
 * loads (pointers chosen at run time), which could alias the slice's shared stores, so each
 * element waited for the stores before it (the wgrad launches 12-50 % longer), and choosing
 * the identity there for the centre spilled (bench/NOTES.md, sessions 42-43). */
__global__ void __launch_bounds__(FF_THREADS, 5) k_implicit_ffma(const imp_args p) {
  __shared__ float sA[FF_BK][FF_BM], sB[FF_BK][FF_BN];
  TILE_SETUP(FF_BM, FF_BN, FF_BK, false);
  __shared__ const int32_t *lists[2];
  __shared__ int32_t sidx[2][FF_BK]; /* the wgrad slice's pair rows */
  if (p.mode == MODE_WGRAD && threadIdx.x == 0) lists[0] = t.lo, lists[1] = t.li; /* read after the loop's barrier */
  const int tm = (threadIdx.x / 16) * 4, tn = (threadIdx.x % 16) * 4;
  float acc[4][4] = {{0}};
  for (int it = 0; it < t.n_it; it++) {
    __syncthreads();
    ff_load(p, t, act, gtab, rowid, n_act, it, lists, sidx, sA, sB);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < FF_BK; k++)
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(sA[k][tm + i], sB[k][tn + j], acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) emit(p, t, rowid, tm + i, t.n0 + tn + j, acc[i][j]);
}

/* ---- host side ----------------------------------------------------------------------------- */

typedef struct imp_ws {
  float *acc;  /* wgrad f32 accumulator (16-bit storage, split runs only), else NULL */
  void *sums;  /* bias-gradient partials (vc_cuda_wgrad_finish's tmp) */
} imp_ws;

/* The wgrad's splits of each offset's pairs (at least WGRAD_SPLIT_MIN pairs a split, at
 * most 65535 CTAs along z). With one split each CTA stores its elements of dW itself (no
 * atomics, no fp32 copy of dW). VC_ALGO_MASKED's runs here (its Hopper kernels' fallback:
 * unaligned operands or workspace, channel counts off multiples of 8, exact f32) take one
 * wherever a context promises repeatable results, or the (offset, 128 x 128 tile) CTAs
 * alone fill the multiprocessors twice (counted in the tensor-core kernel's tiles; f32's
 * FFMA tiles are smaller, and f32 needs no copy either way): the copy is 108 MiB at 1024
 * channels, against 31 MiB for suite S RES 64's output (bench/NOTES.md, session 26). */
static int imp_wgrad_splits(const vc_plan *p, const vc_conv_args *a) {
  const int64_t tiles = vc_blocks(a->out_channels, TC_BM) * vc_blocks(a->in_channels, TC_BN);
  if (a->algo == VC_ALGO_MASKED && (p->ctx->deterministic || p->kvol * tiles >= 2 * (int64_t)vc_cuda(p->ctx)->n_sm))
    return 1;
  int64_t nsplit = (p->max_pairs + WGRAD_SPLIT_MIN - 1) / WGRAD_SPLIT_MIN;
  if (nsplit * p->kvol > 65535) nsplit = 65535 / p->kvol;
  return nsplit < 1 ? 1 : (int)nsplit;
}

static size_t imp_layout(const vc_plan *p, const vc_conv_args *a, vc_pass pass, char *base, imp_ws *o) {
  if (pass != VC_PASS_BACKWARD_WEIGHT) {
    if (o) o->acc = NULL, o->sums = NULL;
    return 0;
  }
  const bool acc_needed = a->dtype != VC_DTYPE_F32 && imp_wgrad_splits(p, a) > 1;
  const int64_t acc = acc_needed ? vc_round_up(a->out_channels * p->kvol * a->in_channels * 4, 256) : 0;
  if (o) {
    o->acc = acc ? (float *)base : NULL;
    o->sums = base + acc;
  }
  return (size_t)acc + vc_cuda_column_sums_tmp_bytes(p->n_out, a->out_channels);
}

extern "C" size_t vc_cuda_implicit_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant) {
  size_t own = imp_layout(p, a, pass, NULL, NULL);
  const size_t narrow = vc_cuda_narrow_workspace(p, imp_shape(p, a, pass));
  if (narrow > own) own = narrow;
  /* masked's forward and dgrad hold split partials where they split (and the row tiles' tf32
   * dgrad its transposed weight); its wgrad split slices (and tf32's the bf16 split of a
   * slice of x's columns) */
  const bool masked = a->algo == VC_ALGO_MASKED && vc_cuda(p->ctx)->masked && vc_cuda_masked_kernels(a);
  const size_t masked_ws = !masked                              ? 0
                           : pass == VC_PASS_BACKWARD_WEIGHT ? vc_cuda_masked_wgrad_workspace(p, a, variant)
                                                             : vc_cuda_masked_workspace(p, a, pass, variant);
  return own > masked_ws ? own : masked_ws;
}

imp_args imp_shape(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  imp_args q;
  memset(&q, 0, sizeof q);
  q.mode = pass == VC_PASS_FORWARD ? MODE_FWD : pass == VC_PASS_BACKWARD_DATA ? MODE_DGRAD : MODE_WGRAD;
  q.dt = a->dtype, q.K = p->kvol, q.ci = a->in_channels, q.co = a->out_channels, q.lists = p->lists;
  q.pin = p->pair_in, q.pout = p->pair_out;
  q.centre = -1; /* no map yet (vc_cuda_implicit_run sets it with hdr) */
  if (q.mode == MODE_FWD) q.rows = p->n_out, q.n_cols = q.co, q.c_red = q.ci;
  else if (q.mode == MODE_DGRAD) q.rows = p->n_in, q.n_cols = q.ci, q.c_red = q.co;
  return q;
}

extern "C" vc_status vc_cuda_implicit_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant,
                                          vc_pass pass,
                                          const void *in0, const void *in1, const void *in2, void *out0, void *out1,
                                          void *ws, cudaStream_t s) {
  const vc_cuda_plan *cp = vc_cuda_plan_of(p);
  const bool tc = a->dtype != VC_DTYPE_F32;
  const int bm = tc ? TC_BM : FF_BM, bn = tc ? TC_BN : FF_BN, bk = tc ? TC_BK : FF_BK;
  const bool subm = p->desc.kind == VC_CONV_SUBMANIFOLD;
  imp_ws w;
  imp_layout(p, a, pass, (char *)ws, &w);
  imp_args q = imp_shape(p, a, pass);
  q.w = in1;
  /* the wgrad's reduction, and masked's pairs form of the forward and dgrad */
  q.offsets = cp->offsets_dev;
  if (q.mode == MODE_FWD) {
    q.order = cp->order, q.blk_mask = cp->blk_mask, q.tile_order = cp->tile_order, q.hdr = cp->hdr, q.nbl = cp->nbl;
    q.centre = cp->centre;
    q.a_src = in0, q.bias = in2, q.out = out0;
  } else if (q.mode == MODE_DGRAD) {
    /* Submanifold: the map's column K-1-r is the output that input q meets through offset
     * r, and the input side shares the output side's order and masks. */
    q.order = subm ? cp->order : NULL, q.blk_mask = subm ? cp->blk_mask : NULL;
    q.tile_order = subm ? cp->tile_order : NULL;
    q.hdr = subm ? cp->hdr : cp->hdr_t, q.nbl = subm ? cp->nbl : cp->nbl_t, q.flip = subm;
    q.centre = subm ? cp->centre : -1; /* the reverse map keeps every entry */
    q.a_src = in0, q.out = out0;
  } else {
    q.a_src = in1, q.b_src = in0, q.out = w.acc ? w.acc : out0;
  }
  /* the fast path: 16-byte copies and stores need 8-element channel counts and 16-byte
   * aligned operands and output; chunk indices of the gathered operand and the weight
   * must fit 32 bits */
  const bool shape16 = q.ci % 8 == 0 && q.co % 8 == 0 && vc_aligned16(in0) && vc_aligned16(in1) && vc_aligned16(out0);
  const bool fast = tc && shape16 &&
                    (p->n_in > p->n_out ? p->n_in : p->n_out) * (q.ci > q.co ? q.ci : q.co) / 8 < (int64_t)NONE &&
                    q.co * q.K * q.ci / 8 < (int64_t)NONE;

  /* VC_ALGO_MASKED's Hopper kernels (16-bit: every pass; tf32: forward, the pairs form's
   * dgrad, and dgrad and wgrad with an aligned workspace for the row tiles' transposed
   * weight or the split operands); where they do not apply it runs the ones below */
  const bool tf32 = !tc && shape16 &&
                    (q.mode == MODE_FWD || vc_aligned16(ws) ||
                     (q.mode == MODE_DGRAD && vc_cuda(ctx)->masked && vc_cuda_masked_workspace(p, a, pass, variant) == 0));
  const bool use_masked =
      (fast || tf32) && vc_cuda(ctx)->masked && vc_cuda_masked_kernels(a) && a->algo == VC_ALGO_MASKED;
  if (!fast && !use_masked && vc_cuda_narrow_applies(q)) { /* a few reduction channels */
    if (q.mode == MODE_WGRAD) q.out = out0; /* its own slices stand for the f32 accumulator */
    return vc_cuda_narrow_run(ctx, p, q, q.mode == MODE_WGRAD ? out1 : NULL, ws, s);
  }
  if (q.mode == MODE_WGRAD && use_masked && vc_aligned16(ws)) {
    q.order = cp->order, q.blk_mask = cp->blk_mask, q.hdr = cp->hdr, q.nbl = cp->nbl; /* the rows form's */
    q.centre = cp->centre;
    q.pair_start = cp->pair_start;                                   /* chunks by row range */
    return vc_cuda_masked_wgrad_run(ctx, p, a, q, variant, out0, out1, ws, s);
  } else if (q.mode == MODE_WGRAD) {
    /* zeros: split CTAs add onto them, and an offset without pairs has no CTA to store */
    const size_t es = w.acc ? sizeof(float) : vc_dtype_size(a->dtype);
    VC_CUDA_TRY(ctx, cudaMemsetAsync(q.out, 0, (size_t)(q.co * q.K * q.ci) * es, s));
    if (p->n_pairs > 0) {
      q.nsplit = imp_wgrad_splits(p, a);
      q.split_len = vc_round_up((p->max_pairs + q.nsplit - 1) / q.nsplit, bk);
      dim3 grid(vc_blocks(q.ci, bn), vc_blocks(q.co, bm), (unsigned)(q.K * q.nsplit));
      if (tc) tc_kernels[fast][q.mode][q.dt == VC_DTYPE_BF16]<<<grid, TC_THREADS, TC_SMEM_BYTES, s>>>(q);
      else k_implicit_ffma<<<grid, FF_THREADS, 0, s>>>(q);
    }
    vc_cuda_wgrad_finish(out0, a->dtype, w.acc, w.acc ? 1 : 0, q.co * q.K * q.ci, out1, in1, p->n_out,
                         q.co, w.sums, 0, s);
  } else if (q.rows > 0 && use_masked) {
    return vc_cuda_masked_run(ctx, p, q, variant, ws, s); /* it picks the form, and the row order */
  } else if (q.rows > 0) {
    q.n_tiles = (q.n_cols + bn - 1) / bn;
    const int64_t blocks = (q.rows + bm - 1) / bm * q.n_tiles;
    if (tc) tc_kernels[fast][q.mode][q.dt == VC_DTYPE_BF16]<<<(unsigned)blocks, TC_THREADS, TC_SMEM_BYTES, s>>>(q);
    else k_implicit_ffma<<<(unsigned)blocks, FF_THREADS, 0, s>>>(q);
  }
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

/* Called once per context: the tensor-core kernel needs more than 48 KB of shared memory. */
extern "C" vc_status vc_cuda_implicit_init(vc_context *ctx) {
  for (int f = 0; f < 2; f++)
    for (int m = 0; m < 3; m++)
      for (int d = 0; d < 2; d++)
        VC_CUDA_TRY(ctx, cudaFuncSetAttribute(tc_kernels[f][m][d], cudaFuncAttributeMaxDynamicSharedMemorySize, TC_SMEM_BYTES));
  const vc_status nw = vc_cuda_narrow_init(ctx);
  if (nw != VC_OK || !vc_cuda(ctx)->masked) return nw;
  const vc_status st = vc_cuda_masked_init(ctx);
  return st == VC_OK ? vc_cuda_masked_wgrad_init(ctx) : st;
}
