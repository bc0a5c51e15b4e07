/* implicit.cuh — what the fused implicit-GEMM kernels share (implicit.cu: mma.sync for any
 * SM >= 80; hopper/masked.cu and hopper/wgrad.cu: wgmma for sm_90a): the launch arguments,
 * and the per-tile setup that resolves a tile's rows, its active offsets and their gather
 * rows. */
#ifndef VC_CUDA_IMPLICIT_CUH
#define VC_CUDA_IMPLICIT_CUH

#include "cuda_internal.h"
#include "dtype.cuh"

enum { MODE_FWD = 0, MODE_DGRAD = 1, MODE_WGRAD = 2 };

/* Gather rows of the tile for up to this many active offsets are resolved once per tile
 * into shared memory, so no dependent global load precedes a stage's copies. */
#define GTAB_OFFSETS 32
/* gtab row stride: one word of padding keeps both its writes (threads walk offsets) and its
 * reads (threads walk rows) free of bank conflicts. */
#define GTAB_STRIDE(bm) ((bm) + 1)
#define MAX_K (VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX)

typedef struct imp_args {
  int mode, dt, K, flip, fast; /* fast: see TC_KERNEL (set by the kernel, not the host) */
  int64_t rows, n_cols, c_red, ci, co; /* M extent (fwd/dgrad), N extent, reduction channels */
  int64_t n_tiles;                      /* tiles along N */
  const int32_t *order;                 /* row permutation or NULL */
  const uint32_t *blk_mask;             /* per VC_ORDER_BLOCK rows of `order`, or NULL: all */
  const int32_t *tab;                   /* [rows, K] gather table */
  const void *a_src, *b_src, *w, *bias;
  void *out;
  const int32_t *pin, *pout;
  const int64_t *offsets; /* device copy, wgrad */
  int64_t split_len;
  int nsplit;
} imp_args;

/* ---- per-block setup shared by the kernels (mma.sync, FFMA, masked) ---------------------------------------------- */

typedef struct tile_pos {
  int64_t m0, n0;  /* first row (M) and column (N) of the tile */
  int r;           /* wgrad: the offset */
  int64_t j0, j1;  /* wgrad: pair range */
  int n_it;        /* k iterations */
  int nkc;         /* fwd/dgrad: reduction chunks per offset */
} tile_pos;

/* Rows of the tile (fwd/dgrad) into rowid[], active offsets into act[], their gather rows
 * into gtab[] and, unless live16 is NULL, per 16-row block which offsets it meets; returns
 * the position. */
__device__ static __forceinline__ tile_pos tile_setup(const imp_args &p, int bm, int bn, int bk, int32_t *rowid, int16_t *act, int *n_act,
                                      int32_t *gtab, uint32_t *live16) {
  tile_pos t;
  if (p.mode == MODE_WGRAD) {
    t.n0 = (int64_t)blockIdx.x * bn;
    t.m0 = (int64_t)blockIdx.y * bm;
    t.r = (int)(blockIdx.z / p.nsplit);
    const int split = (int)(blockIdx.z % p.nsplit);
    const int64_t lo = p.offsets[t.r], hi = p.offsets[t.r + 1];
    t.j0 = lo + split * p.split_len;
    t.j1 = min(hi, t.j0 + p.split_len);
    t.n_it = t.j1 > t.j0 ? (int)((t.j1 - t.j0 + bk - 1) / bk) : 0;
    t.nkc = 0;
    return t;
  }
  const int64_t bid = blockIdx.x;
  const int64_t row_tile = bid / p.n_tiles;
  t.n0 = (bid % p.n_tiles) * bn;
  t.m0 = row_tile * bm;
  t.r = 0, t.j0 = t.j1 = 0;
  for (int i = threadIdx.x; i < bm; i += blockDim.x) {
    const int64_t m = t.m0 + i;
    rowid[i] = m < p.rows ? (p.order ? p.order[m] : (int32_t)m) : -1;
  }
  if (threadIdx.x == 0) { /* union of the tile's row masks, from the per-block lists */
    int n = 0;
    const int64_t b0 = t.m0 / VC_ORDER_BLOCK, b1 = min((t.m0 + bm + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK,
                                                      (p.rows + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK);
    for (int w = 0; w * 32 < p.K; w++) {
      uint32_t m = p.blk_mask ? 0u : ~0u;
      for (int64_t b = b0; p.blk_mask && b < b1; b++) m |= p.blk_mask[b * ((p.K + 31) / 32) + w];
      for (int bit = 0; bit < 32 && w * 32 + bit < p.K; bit++)
        if (m >> bit & 1) act[n++] = (int16_t)(w * 32 + bit);
    }
    *n_act = n;
  }
  __syncthreads();
  if (*n_act <= GTAB_OFFSETS) { /* gtab[a * bm + m]: consecutive threads walk one row's offsets */
    for (int i = threadIdx.x; i < *n_act * bm; i += blockDim.x) {
      const int m = i / *n_act, a = i % *n_act;
      gtab[a * GTAB_STRIDE(bm) + m] = rowid[m] >= 0 ? p.tab[(int64_t)rowid[m] * p.K + act[a]] : -1;
    }
    __syncthreads();
    /* live16[a] bit b: some row of the 16-row block b meets offset a; Gray-ordered rows
     * share masks, so whole blocks are often empty and their MMAs are skipped. */
    for (int a = threadIdx.x; live16 && a < *n_act; a += blockDim.x) {
      uint32_t bits = 0;
      for (int m = 0; m < bm; m++) bits |= (uint32_t)(gtab[a * GTAB_STRIDE(bm) + m] >= 0) << (m / 16);
      live16[a] = bits;
    }
  } else if (live16) {
    for (int a = threadIdx.x; a < GTAB_OFFSETS; a += blockDim.x) live16[a] = ~0u;
  }
  __syncthreads();
  t.nkc = (int)((p.c_red + bk - 1) / bk);
  t.n_it = *n_act * t.nkc;
  return t;
}

/* The input row that tile row m meets through the a-th active offset (column col). */
__device__ static __forceinline__ int32_t gather_row(const imp_args &p, const int32_t *rowid, const int32_t *gtab, int n_act, int bm,
                                            int a, int col, int m) {
  if (n_act <= GTAB_OFFSETS) return gtab[a * GTAB_STRIDE(bm) + m];
  return rowid[m] >= 0 ? p.tab[(int64_t)rowid[m] * p.K + col] : -1;
}

/* Per-tile shared state of the kernels (tile_setup fills it) and the setup call; `skips`:
 * the kernel skips the MMAs of row blocks that miss an offset (live16; the mma.sync
 * kernel only). */
#define TILE_SETUP(bm, bn, bk, skips)                                                                                    \
  __shared__ int32_t rowid[bm];                                                                               \
  __shared__ int16_t act[MAX_K];                                                                              \
  __shared__ int32_t gtab[GTAB_OFFSETS * GTAB_STRIDE(bm)];                                                    \
  __shared__ uint32_t live16[GTAB_OFFSETS];                                                                   \
  __shared__ int n_act;                                                                                       \
  const tile_pos t = tile_setup(p, bm, bn, bk, rowid, act, &n_act, gtab, (skips) ? live16 : NULL);                                 \
  if (p.mode == MODE_WGRAD && t.n_it == 0) return

/* Columns n, n+1 (both inside the output) plus bias, as one 32-bit pair of 16-bit values. */
__device__ static __forceinline__ uint32_t pack2(const imp_args &p, int64_t n, float v0, float v1) {
  if (p.bias) v0 += vc_load(p.bias, p.dt, n), v1 += vc_load(p.bias, p.dt, n + 1);
  if (p.dt == VC_DTYPE_F16) {
    __half2 h = __floats2half2_rn(v0, v1);
    return *(uint32_t *)&h;
  }
  __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
  return *(uint32_t *)&b;
}

/* hopper/masked.cu: VC_ALGO_MASKED forward and dgrad (warp-specialised wgmma + TMA) on
 * sm_90a devices (vc_cuda_state.masked) for 16-bit storage on the fast path (channel counts
 * multiple of 8; operands and output 16-byte aligned). The workspace holds split-reduction
 * partials where the call splits (small grids); a NULL or unaligned one runs unsplit. init
 * fetches the driver's tensor-map encoder. */
size_t vc_cuda_masked_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass);
vc_status vc_cuda_masked_run(vc_context *ctx, const imp_args &q, void *ws, cudaStream_t s);
vc_status vc_cuda_masked_init(vc_context *ctx);
/* hopper/wgrad.cu: VC_ALGO_MASKED's backward-weight (dw, and db when not NULL) on sm_90a
 * devices, same conditions and a 16-byte aligned workspace; deterministic (split partials
 * in the workspace). */
size_t vc_cuda_masked_wgrad_workspace(const vc_plan *p, const vc_conv_args *a);
vc_status vc_cuda_masked_wgrad_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, const imp_args &q,
                                   void *dw, void *db, void *ws, cudaStream_t s);
vc_status vc_cuda_masked_wgrad_init(vc_context *ctx);

#endif
