/* implicit.cuh — what the fused implicit-GEMM kernels share (implicit.cu: mma.sync for any
 * SM >= 80; hopper/masked.cu and hopper/wgrad.cu: wgmma for sm_90a): the launch arguments,
 * and the per-tile setup that resolves a tile's rows, its active offsets and their gather
 * rows. */
#ifndef VC_CUDA_IMPLICIT_CUH
#define VC_CUDA_IMPLICIT_CUH

#include "cuda_internal.h"
#include "dtype.cuh"

#include <cuda.h>

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
  const int32_t *tile_order;            /* the order's tile order (masked), or NULL: in row order */
  const uint2 *hdr;                     /* the neighbour map over the positions of `order` */
  const int32_t *nbl;                   /* (vc_cuda_plan.hdr, nbl): map_at */
  int centre;                           /* the map's column without entries, or -1 (vc_cuda_plan) */
  const void *a_src, *b_src, *w, *bias;
  const void *b_lo; /* wgrad in tf32: the bf16 lo half of b_src, x's split (hopper/wgrad.cu) */
  void *out;
  const int32_t *pin, *pout;
  int lists;              /* the offsets with lists (vc_plan.lists; imp_sel) */
  const int64_t *offsets; /* device copy, wgrad */
  const int64_t *pair_start; /* the plan's [K, pblocks] pair starts by row block: the wgrad's
                              * chunks by row range (chunk_of), the masked pairs form's chunks */
  int64_t split_len;
  int nsplit; /* wgrad: splits of each offset's pairs; one: each CTA stores its dW tile itself */
  int64_t pblocks; /* the masked pairs form (hopper/masked.cu): pair_start's row blocks an offset, */
  int pchunk, pentries; /* the blocks of one of its chunks, and its tile table's entries (chunks x K) */
  /* the masked pairs form's windows (hopper/masked.cu, mk_pairs_run): its n_cols columns are
   * the pass's from col0 on; those before out_split add into out (rows of out_ld values), the
   * others into out2 (rows of out2_ld). The Hopper wgrad (hopper/wgrad.cu): its ci input
   * channels are dW's columns col0 .. col0 + ci - 1 of out_ld. */
  void *out2;
  int64_t out_ld, out2_ld, out_split;
  int col0;
  /* bf16's second pairs launch (mk_pairs_run): two zeroed counters in the workspace (rows
   * taken, rows done) for its producers' turning window 1 into bf16 and filling its own
   * window with join_bias once the first launch is done. NULL elsewhere. */
  int *join;
  const void *join_bias;
} imp_args;

/* The pass's GEMM shape (mode, dtype, K, channels; fwd/dgrad: rows, n_cols, c_red), every
 * pointer NULL: vc_cuda_implicit_run fills in the rest, the masked sizes need no more. */
imp_args imp_shape(const vc_plan *p, const vc_conv_args *a, vc_pass pass);

/* Offset r's pairs as the plan stores them (the core's vc_plan_list): its lists, by
 * imp_sel (IMP_OWN: pout and pin; IMP_MIRROR: offset K-1-r's, swapped; IMP_SELF: a mirrored
 * plan's centre, NULL for both: the identity), whose entry j - imp_shift (vc_list_row) is
 * pair j of the plan's numbering. */
enum { IMP_OWN = 0, IMP_MIRROR = 1, IMP_SELF = 2 };
__device__ static __forceinline__ int imp_sel(const imp_args &p, int r) {
  return r < p.lists ? IMP_OWN : r > p.lists ? IMP_MIRROR : IMP_SELF;
}
__device__ static __forceinline__ int64_t imp_shift(const imp_args &p, int r) {
  return r < p.lists ? 0 : r > p.lists ? p.offsets[r] - p.offsets[p.K - 1 - r] : p.offsets[r];
}
__device__ static __forceinline__ const int32_t *imp_out_list(const imp_args &p, int sel) {
  return sel == IMP_OWN ? p.pout : sel == IMP_MIRROR ? p.pin : NULL;
}
__device__ static __forceinline__ const int32_t *imp_in_list(const imp_args &p, int sel) {
  return sel == IMP_OWN ? p.pin : sel == IMP_MIRROR ? p.pout : NULL;
}
/* Pairs [*j0, *j1) of offset r (the plan's numbering) renumbered as its lists store them;
 * returns its imp_sel. */
__device__ static __forceinline__ int imp_stored_range(const imp_args &p, int r, int64_t *j0, int64_t *j1) {
  const int64_t shift = imp_shift(p, r);
  const int sel = imp_sel(p, r);
  *j0 -= shift, *j1 -= shift;
  return sel;
}
/* Runs the statements with lo and li, the output and input lists of sel, bound to the
 * kernel parameters themselves: one copy of them a kind, each with sel a constant (a uniform
 * branch; the Hopper wgrad's producers, whose pointers chosen into registers cost 2-3 % a
 * launch: bench/NOTES.md, session 42). The centre's are a constant NULL, so vc_list_row
 * loads nothing there, and the others are assumed non-NULL, so it tests nothing. */
#define IMP_LISTS_AS(p, k, lo, li, ...)                                                                     \
  {                                                                                                         \
    const int32_t *const lo = imp_out_list(p, k), *const li = imp_in_list(p, k);                            \
    if ((k) != IMP_SELF) __builtin_assume(lo != NULL && li != NULL);                                        \
    __VA_ARGS__;                                                                                            \
  }
#define IMP_WITH_LISTS(p, sel, lo, li, ...)                                                                 \
  do {                                                                                                      \
    if ((sel) == IMP_OWN) IMP_LISTS_AS(p, IMP_OWN, lo, li, __VA_ARGS__)                                     \
    else if ((sel) == IMP_MIRROR) IMP_LISTS_AS(p, IMP_MIRROR, lo, li, __VA_ARGS__)                          \
    else IMP_LISTS_AS(p, IMP_SELF, lo, li, __VA_ARGS__)                                                     \
  } while (0)

/* ---- per-block setup shared by the kernels (mma.sync, FFMA, masked) ---------------------------------------------- */

typedef struct tile_pos {
  int64_t m0, n0;  /* first row (M) and column (N) of the tile */
  int r;           /* wgrad: the offset */
  int64_t j0, j1;  /* wgrad: its pairs' range, numbered as its lists store them */
  const int32_t *lo, *li; /* wgrad: its output and input rows' lists (imp_sel) */
  int n_it;        /* k iterations */
  int nkc;         /* fwd/dgrad: reduction chunks per offset */
} tile_pos;

/* The pieces of a fwd/dgrad tile's setup, for threads tid, tid + nthr, ... of the caller's
 * choosing (tile_setup: the whole block; masked.cu: its producers). */

/* Row m of `order` (the identity without one), -1 past the rows. */
__device__ static __forceinline__ int32_t order_row(const imp_args &p, int64_t m) {
  return m < p.rows ? (p.order ? p.order[m] : (int32_t)m) : -1;
}

/* rowid[i] = order_row(m0 + i). */
__device__ static __forceinline__ void tile_rows(const imp_args &p, int64_t m0, int bm, int32_t *rowid, int tid, int nthr) {
  for (int i = tid; i < bm; i += nthr) rowid[i] = order_row(p, m0 + i);
}

/* Mask word wd's offsets below K (bits past K cleared). */
__device__ static __forceinline__ uint32_t tile_k_bits(const imp_args &p, uint32_t m, int wd) {
  return wd * 32 + 32 <= p.K ? m : m & ((1u << (p.K - wd * 32)) - 1);
}

/* Word wd of the union of the offsets that rows [m0, m0 + bm) of `order` meet, from the
 * per-block masks (all K offsets without them); bits past K are clear. */
__device__ static __forceinline__ uint32_t tile_mask_word(const imp_args &p, int64_t m0, int bm, int wd) {
  return tile_k_bits(p, p.blk_mask ? vc_cuda_blk_union(p.blk_mask, (p.K + 31) / 32, p.rows, m0, bm, wd) : ~0u, wd);
}

/* act[] = the offsets that rows [m0, m0 + bm) meet, ascending (one thread); returns their count. */
__device__ static __forceinline__ int tile_offsets(const imp_args &p, int64_t m0, int bm, int16_t *act) {
  int n = 0;
  for (int wd = 0; wd * 32 < p.K; wd++)
    for (uint32_t m = tile_mask_word(p, m0, bm, wd); m; m &= m - 1) act[n++] = (int16_t)(wd * 32 + __ffs(m) - 1);
  return n;
}

/* The index in the map's entries (p.nbl) of position q of `order` through map column col
 * (not the centre), or -1 (no neighbour, or q past the rows). */
__device__ static __forceinline__ int64_t map_index(const imp_args &p, int64_t q, int col) {
  return q < p.rows ? vc_map_index(p.hdr, p.K, q, col) : -1;
}

/* The input row that position q of `order` meets through map column col, not the centre,
 * or -1. */
__device__ static __forceinline__ int32_t map_entry(const imp_args &p, int64_t q, int col) {
  const int64_t at = map_index(p, q, col);
  return at >= 0 ? __ldg(p.nbl + at) : -1;
}

/* The same for any column (the centre: the row itself, the order's). */
__device__ static __forceinline__ int32_t map_at(const imp_args &p, int64_t q, int col) {
  return col == p.centre ? order_row(p, q) : map_entry(p, q, col);
}

/* gtab[a][m] = the input row that row m0 + m meets through offset act[a], or -1 (n_act <=
 * GTAB_OFFSETS); the centre's is the row itself (rowid, the tile's rows: tile_rows).
 * Consecutive threads walk one row's offsets; 8 header loads in flight a thread, then their
 * 8 entry loads. */
__device__ static __forceinline__ void tile_gtab(const imp_args &p, int64_t m0, const int16_t *act, int n_act,
                                                 int bm, const int32_t *rowid, int32_t *gtab, int tid, int nthr) {
  const int total = n_act * bm;
  for (int i0 = tid; i0 < total; i0 += 8 * nthr) {
    int32_t v[8];
#pragma unroll
    for (int x = 0; x < 8; x++) {
      const int i = i0 + x * nthr, m = i / n_act, a = i - m * n_act;
      v[x] = i < total && act[a] != p.centre ? map_entry(p, m0 + m, act[a]) : -1;
    }
#pragma unroll
    for (int x = 0; x < 8; x++) {
      const int i = i0 + x * nthr, m = i / n_act, a = i - m * n_act;
      if (i < total) gtab[a * GTAB_STRIDE(bm) + m] = act[a] == p.centre ? rowid[m] : v[x];
    }
  }
}

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
    const int sel = imp_stored_range(p, t.r, &t.j0, &t.j1);
    t.lo = imp_out_list(p, sel), t.li = imp_in_list(p, sel);
    return t;
  }
  const int64_t bid = blockIdx.x;
  const int64_t row_tile = bid / p.n_tiles;
  t.n0 = (bid % p.n_tiles) * bn;
  t.m0 = row_tile * bm;
  t.r = 0, t.j0 = t.j1 = 0;
  tile_rows(p, t.m0, bm, rowid, threadIdx.x, blockDim.x);
  if (threadIdx.x == 0) *n_act = tile_offsets(p, t.m0, bm, act);
  __syncthreads();
  if (*n_act <= GTAB_OFFSETS) {
    tile_gtab(p, t.m0, act, *n_act, bm, rowid, gtab, threadIdx.x, blockDim.x);
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

/* The input row that row m of the tile at m0 meets through the a-th active offset (column
 * col): from gtab, or the map (the centre: the tile's row, rowid). */
__device__ static __forceinline__ int32_t gather_row(const imp_args &p, int64_t m0, const int32_t *gtab,
                                                     const int32_t *rowid, int n_act, int bm, int a, int col, int m) {
  if (n_act <= GTAB_OFFSETS) return gtab[a * GTAB_STRIDE(bm) + m];
  return col == p.centre ? rowid[m] : map_entry(p, m0 + m, col);
}

/* Pairs [*j0, *j1) of offset r whose output rows (a mirrored offset's: input rows, see
 * vc_cuda_plan.pair_start) lie in row blocks [b0, b1) of p.pair_start's nb (the wgrad's
 * chunks, hopper/masked.cu's pairs form's); blocks past nb end the list. */
__device__ static __forceinline__ void pair_block_range(const imp_args &p, int r, int64_t nb, int64_t b0, int64_t b1,
                                                        int64_t *j0, int64_t *j1) {
  const int64_t *st = p.pair_start + (int64_t)r * nb, hi = p.offsets[r + 1];
  *j0 = b0 < nb ? st[b0] : hi, *j1 = b1 < nb ? st[b1] : hi;
}

/* The chunk-major wgrads (hopper/wgrad.cu, narrow.cu): every offset's pair list is cut into
 * p.nsplit chunks; unit u (offsets fastest) is chunk *c of offset *r, pairs [*j0, *j1). With
 * p.pair_start (and p.rows the output rows), chunk c holds the pairs whose output rows are
 * in row blocks c/S .. (c+1)/S of the VC_PAIR_ROWS-row blocks: the same output rows for
 * every offset, so the CTAs of a chunk read the same dy rows, and x rows around them (a
 * mirrored offset, by input rows: those x rows, and dy rows around them). Else
 * chunk c holds the share c/S .. (c+1)/S of each list. chunk_range: chunk c of offset r. */
__device__ static __forceinline__ void chunk_range(const imp_args &p, int r, int64_t c, int64_t *j0, int64_t *j1) {
  if (p.pair_start) {
    const int64_t nb = (p.rows + VC_PAIR_ROWS - 1) / VC_PAIR_ROWS;
    pair_block_range(p, r, nb, c * nb / p.nsplit, (c + 1) * nb / p.nsplit, j0, j1);
  } else {
    const int64_t lo = p.offsets[r], hi = p.offsets[r + 1];
    *j0 = lo + c * (hi - lo) / p.nsplit, *j1 = lo + (c + 1) * (hi - lo) / p.nsplit;
  }
}
__device__ static __forceinline__ void chunk_of(const imp_args &p, int64_t u, int *r, int64_t *c, int64_t *j0,
                                                int64_t *j1) {
  *r = (int)(u % p.K), *c = u / p.K;
  chunk_range(p, *r, *c, j0, j1);
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
  return vc_pack2(p.dt, v0, v1);
}

/* narrow.cu: FFMA kernels for a reduction of at most 16 channels (forward, dgrad) or at
 * most 8 input channels (wgrad, with db when not NULL), any dtype and alignment;
 * vc_cuda_implicit_run takes them where its tensor-core fast path does not apply. wgrad's
 * workspace: its chunk slices and the bias gradient's partials. */
extern "C" bool vc_cuda_narrow_applies(const imp_args &q);
extern "C" size_t vc_cuda_narrow_workspace(const vc_plan *p, const imp_args &q);
extern "C" vc_status vc_cuda_narrow_run(vc_context *ctx, const vc_plan *p, const imp_args &q, void *db, void *ws,
                                        cudaStream_t s);
extern "C" vc_status vc_cuda_narrow_init(vc_context *ctx);

/* hopper/masked.cu: VC_ALGO_MASKED forward and dgrad (warp-specialised wgmma + TMA) on
 * sm_90a devices (vc_cuda_state.masked) for 16-bit storage and tf32 (q.dt VC_DTYPE_F32) on
 * the fast path (channel counts multiple of 8; operands and output 16-byte aligned); the run
 * picks the form (pairs or row tiles) and, for the row tiles of wide or large layers, the
 * plan's regrouped order (vc_cuda_plan_groups). The workspace holds split-reduction partials
 * where the call splits (small grids), or the pairs form's fp32 window of about a quarter of
 * the output's columns (bf16, the rest in the output's own memory; f16 and tf32 add into the
 * output itself); a NULL or unaligned one runs the row tiles unsplit
 * (and the pairs form where it needs none). The row tiles' tf32 dgrad needs an aligned one:
 * it holds the transposed weight (the pairs form's reads the weight as stored). init fetches
 * the driver's tensor-map encoder. */
size_t vc_cuda_masked_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant);
vc_status vc_cuda_masked_run(vc_context *ctx, const vc_plan *p, const imp_args &q, int variant, void *ws,
                             cudaStream_t s);
vc_status vc_cuda_masked_init(vc_context *ctx);
/* A 3-dimensional tiled tensor map over addr (dims and box innermost first, the strides of
 * dims 1 and 2 in bytes), one element a box step, by the encoder init fetched (masked.cu
 * and wgrad.cu's maps); VC_ERR_DEVICE when the driver refuses it. */
vc_status vc_cuda_tensor_map_3d(vc_context *ctx, CUtensorMap *map, CUtensorMapDataType type, const void *addr,
                                const cuuint64_t dims[3], const cuuint64_t strides[2], const cuuint32_t box[3],
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2);
/* hopper/wgrad.cu: VC_ALGO_MASKED's backward-weight (dw, and db when not NULL) on sm_90a
 * devices, same conditions and a 16-byte aligned workspace (16-bit with several chunks: the
 * fp32 dW, or in a deterministic context the chunks' partial slices, as tf32 there too;
 * tf32: the bf16 split of a slice of x's columns; dy is split in the kernel).
 * variant: VC_WR_PAIRS or VC_WR_ROWS, else pairs; q: the wgrad's arguments plus the
 * forward's order, blk_mask and map (the rows form's) and the plan's pair_start (the pairs
 * form's chunks). */
size_t vc_cuda_masked_wgrad_workspace(const vc_plan *p, const vc_conv_args *a, int variant);
vc_status vc_cuda_masked_wgrad_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, const imp_args &q,
                                   int variant, void *dw, void *db, void *ws, cudaStream_t s);
vc_status vc_cuda_masked_wgrad_init(vc_context *ctx);

#endif
