/* cuda_internal.h — what the CUDA backend's files share. Compiled by nvcc as C++, written
 * in C style; functions called from the core are extern "C" through internal.h. */
#ifndef VC_CUDA_INTERNAL_H
#define VC_CUDA_INTERNAL_H

#include "../core/internal.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

/* Per-context state. */
typedef struct vc_cuda_state {
  char name[320]; /* the device, and the environment that changes tuning choices (the tune key) */
  cublasHandle_t blas;
  cudaMemPool_t pool; /* plan memory: freed blocks stay cached for the next plan (a plan
                         build would otherwise map fresh pages for every buffer) */
  int order_window;   /* VC_ORDER_WINDOW, or VC_ORDER_WINDOW_SMALL where its sort does not fit */
  cudaStream_t aux;   /* a plan build's side stream (kmap.cu's encodings), and its fork and join */
  cudaEvent_t fork, join;
  int masked;         /* sm_90 device: VC_ALGO_MASKED's wgmma kernels exist (VOXCONV_WGMMA=0
                         at context creation removes the algorithm, for comparisons) */
  int n_sm;           /* multiprocessors: tile choices fill the device */
  int64_t l2_bytes;   /* L2 cache: the masked wgrad sizes its chunks so what runs at once fits */
  int masked_bn;      /* VOXCONV_MASKED_BN: the masked kernel's tile width, 0 = chosen per call */
  int masked_split;   /* VOXCONV_MASKED_SPLIT: its reduction splits (wgrad: chunks), 0 = chosen */
  int masked_pipes;   /* VOXCONV_MASKED_PIPES: its pipelines a CTA for 64-wide tiles of 128-byte stages (1, 2), 0 = chosen */
  int masked_wgrad;   /* VOXCONV_MASKED_WGRAD: its wgrad's form (VC_WR_PAIRS, VC_WR_ROWS), 0 = the variant's */
  int masked_form;    /* VOXCONV_MASKED_FORM: its forward and dgrad's form (VC_FORM_ROWS, VC_FORM_PAIRS), 0 = the variant's */
  int64_t masked_pair_rows; /* VOXCONV_MASKED_PAIR_ROWS: output rows a chunk of the pairs form, 0 = chosen */
  int64_t pairs_runs; /* calls that ran that pairs form (the GPU tests read it: vc_cuda_masked_pairs_runs) */
  int64_t pairs_chunks; /* the last such call's chunks of rows (vc_cuda_masked_pairs_chunks) */
  int64_t wgrad_sums_runs; /* masked wgrad calls whose kernel summed the bias gradient
                              (vc_cuda_masked_wgrad_sums_runs, read by the GPU tests) */
  void *encode_tiled; /* the driver's cuTensorMapEncodeTiled (sm_90: the masked algorithm's
                         TMA weight loads), NULL elsewhere */
} vc_cuda_state;

/* Per-plan device encodings beyond the pair lists (all device memory, plan-owned). */
typedef struct vc_cuda_plan {
  /* The neighbour map (VC_MAP_WORDS, vc_map_index): the input row each output row meets
   * through offset r, where it meets one; its headers over the positions of `order`, its
   * entries in row order. 8 bytes a row (K <= 32) and 4 an entry, where the dense [n_out,
   * K] table of 4-byte rows took 4 K bytes a row (108 at K = 27; suite S RES 1024: 12.8
   * entries a row). One allocation: hdr's buffer holds nbl. */
  uint2 *hdr;
  int32_t *nbl;
  int centre; /* the column without entries (K/2, submanifold), or -1 */
  /* The reverse map (dgrad) over the input rows in row order: the output row each input
   * row meets through offset r. NULL for submanifold, whose reverse is the map itself
   * with offset K-1-r. */
  uint2 *hdr_t;
  int32_t *nbl_t;
  int32_t *order;     /* [n_out] rows grouped by mask (Gray order) within local windows */
  uint32_t *blk_mask; /* [ceil(n_out / VC_ORDER_BLOCK), ceil(K / 32)] union of the row masks
                         (bit r: the row meets offset r) of each VC_ORDER_BLOCK consecutive
                         rows of `order` */
  int32_t *tile_order; /* [ceil(n_out / VC_TILE_ROWS)] the tiles of VC_TILE_ROWS consecutive
                          rows of `order`, by the offsets their rows meet, most first (counts
                          from 127 up as one; ties in tile order): the masked kernels deal
                          their units out in this order (vc_cuda_tile_order_used); NULL where
                          no call could use it */
  /* The regrouped order (k_group, kmap.cu) and its block masks and tile order, for the
   * masked forward and dgrad of wide or large layers (vc_cuda_plan_groups): allocated with
   * the plan where it could pay (the masked kernels, one mask word, and a tile order with at
   * least half a tile a multiprocessor, or VC_GROUP_LARGE_ROWS rows), else NULL; g_tile is
   * NULL where the plan has no tile order (on an H100 no plan of VC_GROUP_LARGE_ROWS has one;
   * on 256+ multiprocessors it would). Built by the first call that uses it, on that call's
   * stream, from the map's headers, and ready for other streams once g_done has fired. One
   * allocation: g_hdr's buffer holds the other three. */
  int32_t *g_order;
  uint2 *g_hdr; /* the map's headers in the regrouped order (its entries are the map's) */
  uint32_t *g_blk;
  int32_t *g_tile;
  cudaEvent_t g_done;
  int g_window; /* rows a window of the built order (2048 or 8192); 0 until it is built */
  cudaStream_t g_stream;
  int64_t *offsets_dev; /* [K+1] device copy of the plan's pair offsets */
  int64_t *pair_start;  /* [K, ceil(n_out / VC_PAIR_ROWS)] the index of offset r's first pair
                           whose output row is in row block b or past it (within an offset
                           the pairs ascend by output row): the wgrad's chunks by row range,
                           and the masked pairs form's. An offset without a list of its own
                           (vc_plan.lists) counts by its input rows instead, the order its
                           pairs come in: the centre's block b is its rows b VC_PAIR_ROWS
                           on, and offset r past it starts where offset K-1-r's block b does */
} vc_cuda_plan;

/* Rows of a pair_start block (the pair kernels' rows a CTA). */
#define VC_PAIR_ROWS 256

/* Rows are sorted by mask within windows of this many rows: larger windows group masks
 * better (fewer offsets per tile), smaller ones keep the gathers local (L2 hits). The small
 * window serves GPUs whose blocks cannot hold the larger window's sort in shared memory. */
#define VC_ORDER_WINDOW 16384
#define VC_ORDER_WINDOW_SMALL 8192
#define VC_ORDER_BLOCK 64   /* granularity of the per-block active-offset lists */
#define VC_TILE_ROWS 128    /* rows of a masked forward / dgrad tile (tile_order) */

/* The neighbour maps (vc_cuda_plan.hdr): position q of the map's order has the headers
 * hdr[q W + w] (W = VC_MAP_WORDS(K)), one a word of offsets: .y the mask of offsets 32 w ..
 * 32 w + 31 that have an entry (bit c % 32: the row meets offset c; every such offset but
 * the centre, below), .x the index in the entries (nbl) of the first of them; a row's
 * entries are the rows it meets, by offset ascending (the rows one after another in row
 * order: kmap.cu). So an entry is one 8-byte load and a popcount away (vc_map_index1), and
 * with K <= 32 a row has one header.
 * A submanifold map keeps no entry for its centre (column K/2, vc_cuda_plan.centre): every
 * row meets itself there, and the entry would be the row's own, which the order holds (4
 * bytes a site: suite S RES 1024's plan 1.028 -> 0.996 output tensors). Its headers' masks
 * leave the centre's bit clear (vc_map_skip), so indices count as they would without it,
 * and readers take the centre's row from the order. The offsets a row meets are its mask
 * words | vc_map_skip(centre, w); the block masks (blk_mask, g_blk) keep the centre.
 * Indices are 32-bit: a plan has fewer than 2^32 pairs (vc_plan_create checks). */
#define VC_MAP_WORDS(K) (((K) + 31) / 32)

/* The bit of mask word w that a map's headers leave clear: the centre's (centre < 0: none). */
__host__ __device__ static __forceinline__ uint32_t vc_map_skip(int centre, int w) {
  return centre >= 0 && centre >> 5 == w ? 1u << (centre & 31) : 0u;
}

/* Under header h: how many of the row's entries come before that of an offset, given the
 * mask of the offsets below it in h's word (the entry's index is h.x plus this, where h.y
 * has the offset's bit: a row's entries are by offset ascending). */
__device__ static __forceinline__ int vc_map_below(uint2 h, uint32_t below) { return __popc(h.y & below); }

/* Under header h (word w's): the index in the entries of offset 32 w + b, or -1 where the
 * row has no entry there (the centre never has one). */
__device__ static __forceinline__ int64_t vc_map_index1(uint2 h, int b) {
  return h.y >> b & 1 ? (int64_t)(h.x + vc_map_below(h, (1u << b) - 1)) : -1;
}

/* The index of position q's entry for offset col (a map of K offsets), or -1. */
__device__ static __forceinline__ int64_t vc_map_index(const uint2 *hdr, int K, int64_t q, int col) {
  return vc_map_index1(__ldg(hdr + q * VC_MAP_WORDS(K) + (col >> 5)), col & 31);
}

/* Entry at of a pair list as vc_plan_list gives it (or imp_out_list / imp_in_list on the
 * device): NULL is a mirrored plan's centre, whose rows are the entry numbers themselves. */
__device__ static __forceinline__ int32_t vc_list_row(const int32_t *list, int64_t at) {
  return list ? list[at] : (int32_t)at; /* rows < 2^31 */
}

/* x summed over lanes 0 .. lane of the warp (all 32 lanes take part) */
__device__ static __forceinline__ uint32_t vc_warp_inclusive_sum(uint32_t x, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  return x;
}

/* Word wd of the union of the block masks blk (W words a block of VC_ORDER_BLOCK rows of
 * the order, n_rows rows in all) over the blocks that rows [m0, m0 + bm) touch. */
__device__ static inline uint32_t vc_cuda_blk_union(const uint32_t *blk, int W, int64_t n_rows, int64_t m0, int bm,
                                                    int wd) {
  const int64_t b0 = m0 / VC_ORDER_BLOCK,
                b1 = min((m0 + bm + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK, (n_rows + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK);
  uint32_t m = 0;
  for (int64_t b = b0; b < b1; b++) m |= blk[b * W + wd];
  return m;
}
/* The masked kernels deal a call's units by tile_order where they make at most this many
 * rounds of one a multiprocessor, else in row order: with many rounds the busiest
 * multiprocessor's excess is a small share, and the gathers of tiles in row order hit L2
 * more (suite S RES 512, 61 rounds: 6 % more time by tile_order; RES 64 and 128, 4 and 8
 * rounds: 10 % and 6 % less; bench/NOTES.md). */
#define VC_TILE_ORDER_ROUNDS 16
static inline bool vc_cuda_tile_order_used(int64_t units, int n_sm) {
  return units <= (int64_t)VC_TILE_ORDER_ROUNDS * n_sm;
}

/* The masked forward and dgrad take the regrouped order (vc_cuda_plan_groups) for at least
 * this many reduction channels: there a tile's offset costs c_red / 64 stages (16-bit) and
 * the stages set the pace (bench/NOTES.md, session 21: the forward at C = 1024, 512 and 256
 * 8, 5 and 5 % faster); narrower layers gained ~2 % in suite L, less than a build costs. */
#define VC_GROUP_MIN_CHANNELS 256
/* From this many, the first call builds it from windows of 8192 rows instead of 2048: the
 * forward and dgrad about 4 % faster at C = 1024 and 512 in f16 (ncu), tf32 too (bench), for a
 * build of 0.46-0.61 ms instead of 0.09-0.12, whose difference a layer this wide repays in
 * about 15 calls (session 22); at C = 256 the bench gained 1-2 %. */
#define VC_GROUP_LARGE_CHANNELS 512
/* Plans of this many rows take it at VC_GROUP_ROWS_CHANNELS reduction channels or more, from
 * windows of 8192: their windows run side by side, so the build costs about what a small
 * plan's does while the windows fit one a multiprocessor (~1 M rows on an H100) and grows
 * with the rows beyond, as a call's saving does (suite S, f16, ncu: RES 512, C = 128, the forward
 * 1083 -> 1032 us for a build of 448 us; RES 1024, C = 64, 1840 -> 1765 us for 1518 us, paid
 * back in 9 and 20 calls; windows of 2048 gained 1.7 % at RES 512 and lost 4 % at RES 1024,
 * session 23). On an H100 they have too many tiles for a tile order, and the regrouped order
 * then has none either. Suite L's plans (at most ~400 k rows) stay below. */
#define VC_GROUP_LARGE_ROWS ((int64_t)1 << 19)
#define VC_GROUP_ROWS_CHANNELS 64

static inline vc_cuda_state *vc_cuda(vc_context *ctx) { return (vc_cuda_state *)ctx->backend_state; }
static inline const vc_cuda_plan *vc_cuda_plan_of(const vc_plan *p) { return (const vc_cuda_plan *)p->backend_data; }

/* Maps a CUDA error to VC_ERR_DEVICE with the call and the runtime's text. */
#define VC_CUDA_TRY(ctx, call)                                                                          \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess)                                                                              \
      return vc_fail((ctx), VC_ERR_DEVICE, "%s failed: %s (%s)", #call, cudaGetErrorString(e_),         \
                     cudaGetErrorName(e_));                                                             \
  } while (0)

static inline unsigned vc_blocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

static inline bool vc_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Blocks of 256 threads for a grid-stride loop over n items (at least 1, at most 65535). */
static inline unsigned vc_grid(int64_t n) { return (unsigned)(n < 1 ? 1 : n / 256 + 1 < 65535 ? n / 256 + 1 : 65535); }

#ifdef __cplusplus
extern "C" {
#endif

/* kmap.cu; vc_cuda_kmap_init runs once per context (optin: the device's opt-in shared
 * memory per block) */
vc_status vc_cuda_kmap_init(vc_context *ctx, size_t optin);
vc_status vc_cuda_plan_build(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_plan *paired,
                             void *stream);
void vc_cuda_plan_release(vc_plan *p);
/* vc_plan_kernel_map's in_index and out_index (either NULL to skip it) on stream s. */
vc_status vc_cuda_kernel_map(const vc_plan *p, int32_t *in_index, int32_t *out_index, cudaStream_t s);
/* vc_plan_out_coords: the output sites unpacked into dst on stream s. */
vc_status vc_cuda_out_coords(const vc_plan *p, int32_t *dst, cudaStream_t s);
/* The regrouped order of plan p, the map's headers in it, and its block masks and tile
 * order (NULL where p has no tile order; see vc_cuda_plan), built on stream s by the first
 * call that asks (later calls on other streams wait for it there), from windows of 8192
 * rows where that call says `large`, else of 2048; VC_OK with *order NULL where the plan
 * has none or s is capturing a graph. */
vc_status vc_cuda_plan_groups(vc_context *ctx, const vc_plan *p, cudaStream_t s, bool large, const int32_t **order,
                              const uint2 **hdr, const uint32_t **blk, const int32_t **tile);
/* The rows a window of p's regrouped order, once a call has built it (2048 or 8192), else 0:
 * for the GPU tests, which declare it themselves (C linkage). */
int vc_cuda_plan_group_window(const vc_plan *p);

/* scan.cu: exclusive prefix sums of n int32 counts (the total lands in ((int64_t *)tmp)[ntiles]);
 * `tmp` holds vc_cuda_scan_tmp_bytes(n). */
size_t vc_cuda_scan_tmp_bytes(int64_t n);
void vc_cuda_scan_exclusive(const int32_t *in, int64_t *out, int64_t n, void *tmp, cudaStream_t s);
/* Sorts n unique 64-bit keys ascending; tmp holds vc_cuda_sort_tmp_bytes(n). */
size_t vc_cuda_sort_tmp_bytes(int64_t n);
void vc_cuda_sort_u64(uint64_t *keys, int64_t n, void *tmp, cudaStream_t s);

/* explicit.cu, implicit.cu: the passes for one resolved algorithm. */
size_t vc_cuda_explicit_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass);
vc_status vc_cuda_explicit_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass,
                               const void *in0, const void *in1, const void *in2, void *out0, void *out1,
                               void *ws, cudaStream_t s);
/* variant: the masked forward and dgrad's tile shape (hopper/masked.cu), 0 = chosen per call */
size_t vc_cuda_implicit_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant);
vc_status vc_cuda_implicit_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, vc_pass pass,
                               const void *in0, const void *in1, const void *in2, void *out0, void *out1,
                               void *ws, cudaStream_t s);
/* Whether VC_ALGO_MASKED's wgmma kernels cover this storage and math: f16/bf16 and tf32, every
 * pass (channels and alignment are checked where it runs). */
static inline bool vc_cuda_masked_kernels(const vc_conv_args *a) {
  return a->dtype != VC_DTYPE_F32 || a->math == VC_MATH_TF32;
}
/* hopper/masked.cu: the tuner's tile shapes of the masked forward and dgrad for this call
 * (a variant encodes a tile width and a split count, or the pairs form), and the names in
 * the cache file of those and of the wgrad's forms (hopper/wgrad.cu: the variants
 * VC_WR_PAIRS, VC_WR_ROWS, past every tile shape's). */
int vc_cuda_masked_variants(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int out[], bool *restricted);
enum { VC_WR_PAIRS = 1000, VC_WR_ROWS = 1001 };
enum { VC_FORM_ROWS = 1, VC_FORM_PAIRS = 2 }; /* vc_cuda_state.masked_form */
int vc_cuda_masked_wgrad_variants(const vc_plan *p, const vc_conv_args *a, int out[]);
void vc_cuda_masked_variant_name(int variant, char buf[32]);
int vc_cuda_masked_variant_parse(vc_pass pass, const char *name);
vc_status vc_cuda_implicit_init(vc_context *ctx);
/* Kernel tables over the storage types index them f16, bf16, f32. */
static inline int vc_cuda_dt_index(int dt) { return dt == VC_DTYPE_F16 ? 0 : dt == VC_DTYPE_BF16 ? 1 : 2; }
/* rows.cu: small elementwise kernels shared by the passes. */
/* out [n, c] of storage type odt = the bias row (of bias_dt; zeros without one). */
void vc_cuda_fill_rows(void *out, vc_dtype odt, int64_t n, int64_t c, const void *bias, vc_dtype bias_dt, cudaStream_t s);
/* dst (n elements of dt) = the sum of nslices fp32 slices [nslices][n], added in slice order
 * (the deterministic split reductions' last step; nslices = 1: a conversion). */
void vc_cuda_add_slices(void *dst, vc_dtype dt, const float *part, int64_t nslices, int64_t n, cudaStream_t s);
/* Bytes of the bias gradient's partials over n_rows rows of c columns (fp64 sums a column,
 * as many as the row count sets). */
size_t vc_cuda_column_sums_tmp_bytes(int64_t n_rows, int64_t c);
/* The end of a backward-weight pass: dw = vc_cuda_add_slices of nslices slices (none: dw is
 * already final), and where db is not NULL db = the column sums of dy[n_rows, c] in fp64,
 * in a fixed order: from tmp_parts rows of fp64 partials [tmp_parts][c] already in tmp (the
 * Hopper wgrad's own), or with tmp_parts 0 from partials it first sums from dy into tmp
 * (vc_cuda_column_sums_tmp_bytes); the slice sum and the column totals share one launch. */
void vc_cuda_wgrad_finish(void *dw, vc_dtype dt, const float *part, int64_t nslices, int64_t n, void *db,
                          const void *dy, int64_t n_rows, int64_t c, void *tmp, int64_t tmp_parts, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
