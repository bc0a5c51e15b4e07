/* masked.cu — VC_ALGO_MASKED: the masked implicit GEMM on Hopper (sm_90a) for forward and
 * dgrad in f16, bf16 and tf32 (f32 storage, VC_MATH_TF32) on the fast path (channel counts
 * multiple of 8, 16-byte aligned operands and output); wgrad.cu is its weight gradient.
 * Other shapes run the implicit kernels.
 *
 * A tile is 128 output rows (taken in the plan's Gray-code order, or its regrouped order:
 * vc_cuda_plan_groups) by BN output columns (64,
 * 96, 128 or 256); its reduction loops over the union of its rows' active offsets times the
 * chunks of KB bytes of channels: C[m, n] += sum_k A[nb(m, r), k] * B_r[n, k], nb(m, r) the
 * input row that row m meets through offset r (the plan's neighbour map). KB is 128 (64
 * 16-bit values, 32 tf32), or 64 where all the channels fit in 64 bytes (mk_kb). A work unit
 * is a tile, or one of nsplit contiguous ranges of its reduction stages where the grid would
 * be too small.
 *
 * Persistent and warp-specialised (roles and stage ring in ring.cuh): one CTA a
 * multiprocessor runs the units mk_unit_at deals it (the tiles with the most stages first,
 * where the plan's tile order applies)
 *   - the producers (registers cut to 56 a thread) build each unit's tables (its rows' map
 *     headers, active offsets and their gather rows) while they issue the previous unit's
 *     stages (K <= 32), and each producer warpgroup, taking every np-th stage, gathers the
 *     stage's 128 A rows with cp.async into a KB-byte-swizzled K-major tile, and one of its
 *     threads has the TMA copy the stage's weight box (swizzled the same way by the copy
 *     engine; out-of-range rows and channels arrive as zeros);
 *   - two consumers each issue m64nBN wgmma (k16, or k8 in tf32) over 64 of the rows, with fp32
 *     accumulators, one group in flight; a consumer skips the stages of offsets that none
 *     of its 64 rows meets (their A rows are zeros). (The pairs form's tf32 dgrad runs
 *     swapped instead: mk_consume_swapped.)
 * With two pipelines (64-wide tiles of 128-byte stages and short units, mk_pipes) the CTA
 * is two such machines side by side: producer warpgroup g and consumer warpgroup g take
 * units of their own through half the ring, the consumer multiplying all 128 rows (two m64
 * wgmma a K step, each 64 rows skipping on its own), and each pipeline builds its tables in
 * place, from map headers and mask words copied during its unit before (mk_pre_copy); one
 * pipeline's set-up and epilogue then overlap the other's stages.
 * The epilogue adds the bias (staged in shared memory when the unit begins: loaded in the
 * epilogue, every column pair's load stalled the stores behind it, a quarter of the
 * consumers' time on narrow layers), converts and stores from the accumulators while the ring
 * already fills with the next unit's stages. A split unit stores its fp32 partial in the
 * workspace; the tile's last split to arrive (a counter per tile) adds all partials in
 * split order and writes the tile, so results are bitwise repeatable. No atomics on data:
 * each output row belongs to one tile. (The pairs form, further down, is the exception: its
 * tiles are pairs of one offset, added into the output rows by L2 reductions.)
 *
 * dgrad is the same kernel on the reversed map. Its B_r[n = ci][k = co] is the weight as
 * stored, ci contiguous: an MN-major operand, copied as ceil(BN / 64) atoms of 64 ci x KB / 2
 * co. tf32 wgmma takes K-major shared operands only, so the row tiles' tf32 dgrad first
 * transposes the weight into the workspace (w[co][K][ci] -> [ci][K][co], K x Ci x Co x 4
 * bytes) and then reads it like the forward; that copy rounds the weight to tf32. The pairs
 * form's tf32 dgrad needs no copy: it multiplies transposed, the weight from registers
 * (mk_consume_swapped), rounded there. The gathered rows, and the forward's
 * weight, reach the tensor cores as stored, which truncate them to tf32: about 7e-4
 * relative error against 2.6e-4 for cuBLAS's rounded tf32 (bench/NOTES.md measures the
 * alternatives: rounding the rows in shared memory cost 8-10 %, a rounded copy of a large
 * forward weight more). */
#include "../implicit.cuh"
#include "../ptx/cp_async.cuh"
#include "../ptx/tma.cuh"
#include "ring.cuh"

#include <cudaTypedefs.h>
#include <stdio.h>

#define MK_BM VC_TILE_ROWS /* 128 */
#define MK_A_TILE(kb) (MK_BM * (kb))
/* B: K-major, bn rows of kb bytes; MN-major (dgrad's weight as stored), ceil(bn / 64) x 64
 * columns in atoms of 128-byte rows, kb / 2 of them (16-bit: 64 columns an atom) or kb / 4
 * (the pairs form's tf32: 32; its bn is 256, a whole number of atoms) */
#define MK_B_TILE(bn, kb, km) ((km) ? (bn) * (kb) : ((bn) + 63) / 64 * 64 * (kb))
#define MK_STAGES(bn, kb, km) HP_STAGES(MK_A_TILE(kb), MK_B_TILE(bn, kb, km))
#define MK_SMEM(bn, kb, km) HP_SMEM(MK_A_TILE(kb), MK_B_TILE(bn, kb, km))
#define MK_AUTO_SPLIT 8
#define MK_MIN_SPLIT_STAGES 8 /* reduction stages a split has at least (of the K offsets) */
#define MK_NBN 4              /* tile widths: mk_bn */
/* Offsets a unit's gather table holds: two tables (the unit's and the next's, or each
 * pipeline's) of 27 x 129 words fit beside the 192 KB ring; tiles meeting more read the map
 * directly. */
#define MK_GTAB 27
/* A map with a centre (submanifold: odd sizes) of K <= 32 offsets has at most 27 of them
 * (odd products up to 32: 27 = 3 x 3 x 3, until a size of 29 an axis), so its units always
 * take the gather table, and mk_body's direct path without `far` never meets the centre. */
static_assert(VC_KERNEL_MAX < 29 && MK_GTAB >= 27, "a submanifold map of K <= 32 must fit the gather table");
/* The pairs form's epilogue stages each consumer warp's products, 8 rows x 32 columns at a
 * time, in rows of 40 floats (the 8 of padding put a half-warp's 8-byte writes of 4 rows on
 * distinct banks; f16 stages 8 rows x 64 columns packed, in rows of 36 words; the swapped
 * tf32 dgrad uses 32 of each 40, rows of 32 under an XOR swizzle): MK_RS floats for the 8
 * warps, at word MK_RS_AT of the gather tables (16-byte aligned), their last space. */
#define MK_RS_ROW 40
#define MK_RS (8 * 8 * MK_RS_ROW)
#define MK_RS_AT ((2 * MK_GTAB * GTAB_STRIDE(MK_BM) - MK_RS) & ~3)
/* Entries the pairs form's tile table holds at most (plus ts[0]): it takes the two gather
 * tables' space between the form's own two rows and the epilogue's staging (mk_body); the
 * host widens the form's chunks to stay within it. */
#define MK_PT_MAX (MK_RS_AT - 2 * GTAB_STRIDE(MK_BM) - 1)
static_assert(MK_RS_AT + MK_RS <= 2 * MK_GTAB * GTAB_STRIDE(MK_BM) && MK_PT_MAX >= 32,
              "the pairs form's staging must fit in the gather tables and leave the table a chunk of offsets");

/* Bytes of reduction values a stage row holds for c_red channels of dtype dt: 64 where all
 * of them fit in 64 bytes (32 16-bit channels: half the copies and MMAs of a half-empty
 * 128-byte stage), else 128. Not where it would add stages (96 16-bit channels: 3 stages of
 * 32 ran 9 % slower than 2 of 64, bench/NOTES.md): a stage costs the producers about the
 * same whatever its depth. */
static inline int mk_kb(int64_t c_red, int dt) {
  return c_red * (dt == VC_DTYPE_F32 ? 4 : 2) <= 64 ? 64 : 128;
}
/* Reduction values a stage row of kb bytes holds. */
__host__ __device__ static inline int mk_bk(int dt, int kb) { return dt == VC_DTYPE_F32 ? kb / 4 : kb / 2; }
/* The pairs form's tf32 dgrad multiplies swapped (mk_consume_swapped): the weight is its A,
 * from registers, read as stored. */
__host__ __device__ static inline bool mk_swapped(int mode, int dt, bool pairs) {
  return pairs && mode == MODE_DGRAD && dt == VC_DTYPE_F32;
}
/* The pairs form adds f16 products straight into y, rounded at each addition (mk_red8_f16):
 * no fp32 copy of y, half the bytes reduced, no conversion pass (suite S RES 16 and 32: 12 %
 * off the form's kernels; relative error 2.1e-4 -> 6.1e-4; a partial sum past f16's range
 * is inf even where the whole would not be). bf16, whose rounding is 8 times coarser, adds
 * into fp32 windows of y (mk_pairs_windows): added directly it ran as fast, but its error
 * went 1.7e-3 -> 4.9e-3, half the tolerance (bench/NOTES.md, session 30). tf32's y is fp32
 * itself. */
__host__ __device__ static inline bool mk_pairs_direct(int dt) { return dt == VC_DTYPE_F16; }
/* B is K-major (one TMA box a stage) in the forward and in the row tiles' tf32 dgrad
 * (transposed weight); else the weight as stored, in 128-byte-wide MN-major atoms. */
__host__ __device__ static inline bool mk_b_kmajor(int mode, int dt, bool pairs) {
  return mode == MODE_FWD || (dt == VC_DTYPE_F32 && !mk_swapped(mode, dt, pairs));
}

/* bf16 (not mk_pairs_direct) adds into fp32 values, rounded once at the end, in windows of
 * the pass's C = n_cols columns (C % 8 == 0), so that they take about half an output tensor
 * of workspace, not the twice of one fp32 copy of y (suite S RES 16 and 32: extra/out 2.11;
 * bench/NOTES.md, session 37). Row i of y holds 2 C bytes, an fp32 row of C / 2 values:
 *   1. one launch adds columns [0, w1) into y's rows read as fp32 (w1 = 8 floor(C / 16) <=
 *      C / 2) and columns [w1, w1 + wa) into the workspace (rows of wa values);
 *   2. the first window becomes bf16 in place, y's bytes [0, 2 w1) of each row, which frees
 *      bytes [2 w1, 2 C);
 *   3. a second launch adds columns [w1 + wa, C) into those (wb = C - w1 - wa values, at
 *      most (C - w1) / 2);
 *   4. windows 2 and 3 become bf16 in place, y's bytes [2 w1, 2 C) (k_mk_pairs_settle).
 * Step 2 is the second launch's own (mk_join_settle): its units' main loops need nothing
 * from the first launch, so it starts on the multiprocessors the first one's last round
 * leaves idle (programmatic dependent launch), and its producers do step 2 once the first
 * launch is done, before any of its reductions. (As a launch of its own between the two,
 * step 2 kept the second launch's lone round of units, a whole unit's latency, behind the
 * first one's last: suite S RES 16, bench/NOTES.md, sessions 37 and 39.)
 * Every width and start is a multiple of 8 columns: the reductions' 16 bytes never straddle
 * two targets, rows of every window start 16-byte aligned, and so does the dgrad's TMA box
 * of weight columns at a window's start. wb <= wa, which step 4 needs (k_mk_pairs_settle). */
typedef struct mk_windows {
  int64_t w1, wa, wb;
} mk_windows;
__host__ __device__ static inline mk_windows mk_pairs_windows(int64_t c) {
  mk_windows w;
  w.w1 = 8 * (c / 16), w.wb = 8 * ((c - w.w1) / 16), w.wa = c - w.w1 - w.wb;
  return w;
}

__device__ static __forceinline__ float4 mk_bias4(const void *bias, int dt, int64_t j) {
  float b[4];
#pragma unroll
  for (int e = 0; e < 4; e++) b[e] = bias ? vc_load(bias, dt, j + e) : 0.0f;
  return make_float4(b[0], b[1], b[2], b[3]);
}
/* Values [l0, l0 + 128 u_n) of a row of two windows, four a lane (a before a_n, then b), read
 * in full, then written as bf16 to dst[l0 ..]; lanes past n do nothing. u_n <= MK_SETTLE_U, a
 * literal (the producers' conversion, mk_join_settle, keeps to fewer registers). */
#define MK_SETTLE_U 8
#define MK_SETTLE (128 * MK_SETTLE_U)
__device__ static __forceinline__ void mk_settle_chunk(const float *a, int64_t a_n, const float *b, int64_t n,
                                                       uint16_t *dst, int64_t l0, int dt, int lane, const int u_n) {
  float4 v[MK_SETTLE_U];
#pragma unroll
  for (int u = 0; u < u_n; u++) {
    const int64_t l = l0 + 128 * u + 4 * lane;
    if (l >= 0 && l < n) v[u] = *(const float4 *)(l < a_n ? a + l : b + (l - a_n));
  }
  __syncwarp();
#pragma unroll
  for (int u = 0; u < u_n; u++) {
    const int64_t l = l0 + 128 * u + 4 * lane;
    if (l >= 0 && l < n) *(uint2 *)(dst + l) = make_uint2(vc_pack2(dt, v[u].x, v[u].y), vc_pack2(dt, v[u].z, v[u].w));
  }
  __syncwarp();
}

#ifdef VC_SM90A
/* A work unit: one split of one tile (128 rows x bn columns). */
typedef struct mk_unit {
  int64_t tile, m0, n0;
  int split;
} mk_unit;

/* Unit u: split u % nsplit of the (u / nsplit)-th tile, the row tiles taken in the plan's
 * tile_order (most active offsets first) and each one's column tiles in turn.
 * Unsplit with one column tile (suite S's narrow layers), u is the row tile itself. Each
 * role works out its unit and the next one's at every unit's start, and each division by
 * a value known only at run time is ~25 instructions with a reciprocal's latency: without
 * them here, in mk_range and in the stage indices, RES 1024's forward ran 696.7 -> 651.4 M
 * instructions, 1.64 -> 1.58 ms (bench/NOTES.md, session 48). 256-wide tiles keep the
 * general form: with the branch, ptxas spilled 28-36 bytes in their kernels. */
__device__ static __forceinline__ mk_unit mk_unit_of(const imp_args &p, int64_t u, int bn) {
  mk_unit w;
  if (bn < 256 && p.nsplit == 1 && p.n_tiles == 1) {
    w.split = 0, w.tile = p.tile_order ? p.tile_order[u] : u;
    w.m0 = w.tile * MK_BM, w.n0 = 0;
    return w;
  }
  const int64_t t = u / p.nsplit, n = t % p.n_tiles, m = p.tile_order ? p.tile_order[t / p.n_tiles] : t / p.n_tiles;
  w.split = (int)(u % p.nsplit), w.tile = m * p.n_tiles + n;
  w.m0 = m * MK_BM, w.n0 = n * bn;
  return w;
}

/* The unit of pipeline `pipe` of this CTA's k-th round, or -1 past the last: the grid's
 * pipelines (`pipes` a CTA, see mk_body) are dealt rounds of one unit each, in order. With
 * the plan's tile order the units come most offsets (stages) first, and odd rounds go to
 * the pipelines in reverse, so a pipeline dealt a long one in one round is dealt a short
 * one in the next; only the last round can leave a pipeline without a unit. On the suite S
 * shells, taking a unit's time as its tile's offset count plus one, the busiest
 * multiprocessor's share falls from 1.25x the mean (units in row order) to 1.10x at RES 64,
 * and from 1.19x to 1.04x at RES 128 (bench/NOTES.md). */
__device__ static __forceinline__ int64_t mk_unit_at(const imp_args &p, int64_t k, int64_t units, int pipes, int pipe) {
  const int64_t u = hp_deal(k, (int64_t)gridDim.x * pipes, (int64_t)blockIdx.x * pipes + pipe, p.tile_order != NULL);
  return u < units ? u : -1;
}

/* The unit's stage range [it0, it1) of the tile's n_it stages (unsplit: all, no division). */
__device__ static __forceinline__ void mk_range(const imp_args &p, const mk_unit &w, int n_it, int *it0, int *it1) {
  if (p.nsplit == 1) {
    *it0 = 0, *it1 = n_it;
    return;
  }
  const int per = (n_it + p.nsplit - 1) / p.nsplit;
  *it0 = min(n_it, w.split * per), *it1 = min(n_it, *it0 + per);
}

/* act[] = the offsets of mask word m, ascending: thread tid < 32 places offset tid. */
__device__ static __forceinline__ void mk_place_offsets(uint32_t m, int16_t *act, int tid) {
  if (tid < 32 && (m >> tid & 1)) act[__popc(m & ((1u << tid) - 1))] = (int16_t)tid;
}

/* The index in the map's entries of row m of the unit at u0 through map column col (not
 * the centre, whose row is the order's: mk_source), or -1: from the unit's headers hd in
 * shared memory (K <= 32; rows past the end have mask 0), or where `far` (K > 32) from the
 * map. */
__device__ static __forceinline__ int64_t mk_entry(const imp_args &p, bool far, const uint2 *hd, int64_t u0, int m,
                                                   int col) {
  if (!far) return vc_map_index1(hd[m], col);
  return u0 + m < p.rows ? vc_map_index(p.hdr, p.K, u0 + m, col) : -1;
}

/* Where row m of the unit at u0 meets map column col, read from the map (`far`, K > 32:
 * the one caller): the index in the map's entries, or for the centre (no entry: the row
 * itself) its position in the order (*centre set), or -1. A map with a centre is a
 * submanifold plan's, whose masked passes always have an order. */
__device__ static __forceinline__ int64_t mk_source(const imp_args &p, int64_t u0, int m, int col, bool *centre) {
  *centre = col == p.centre;
  if (*centre) return u0 + m < p.rows ? u0 + m : -1;
  return mk_entry(p, true, NULL, u0, m, col);
}

/* The position in act (ascending, na of them) of map column col, or -1 (col < 0 or not
 * there): a binary search, the same for every thread. */
__device__ static __forceinline__ int mk_act_at(const int16_t *act, int na, int col) {
  if (col < 0) return -1;
  int lo = 0, hi = na;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (act[mid] < col) lo = mid + 1;
    else hi = mid;
  }
  return lo < na && act[lo] == col ? lo : -1;
}

/* r = i / n for i < n MK_BM, 1 <= n <= MK_GTAB, by a multiply and shift (inv: mk_div_inv):
 * i / n + i e / 2^20 with 0 < e <= 1 stays below the next whole number while i < 2^20 / n. */
#define MK_DIV_SHIFT 20
static_assert((int64_t)MK_GTAB * MK_GTAB * MK_BM < (1 << MK_DIV_SHIFT) &&
                  (int64_t)MK_GTAB * MK_BM * (((int64_t)1 << MK_DIV_SHIFT) + 1) < ((int64_t)1 << 32),
              "mk_div: exact for every index, and its product fits 32 bits");
__device__ static __forceinline__ uint32_t mk_div_inv(int n) { return (1u << MK_DIV_SHIFT) / (uint32_t)n + 1u; }
__device__ static __forceinline__ int mk_div(int i, uint32_t inv) { return (int)((uint32_t)i * inv >> MK_DIV_SHIFT); }

/* Lanes a row in the gather-table copy (K <= 32, mk_copy_gtab). */
#define MK_ROW_LANES 8

/* gtab for the rows of the unit at u0 (see mk_entry) and its offsets (act, na <= MK_GTAB of
 * them) as 4-byte cp.async copies, all in flight at once, for the caller to commit (a row
 * without the offset gets -1 by a plain store). The centre's column (p.centre: a submanifold
 * map's, without entries) is the unit's rows themselves, copied from the order in a pass of
 * its own: testing every element for it, as the direct path does (mk_source), took RES
 * 1024's forward kernel 1.63 -> 1.79 ms (693 -> 733 M instructions; bench/NOTES.md,
 * session 46). With K <= 32, MK_ROW_LANES threads take a row, each every MK_ROW_LANES-th
 * of the other columns, so a thread keeps one column's bit for several rows and a warp's
 * copies read the entries of four rows (a row's entries are contiguous). An element a
 * thread (each finding its row and column by a division, then loading the row's header
 * and the column's offset) took more instructions; one thread a row, fewer, but 32 rows'
 * entries a warp copy ran RES 1024's forward 8 % slower (bench/NOTES.md, session 50).
 * `far` (K > 32) reads the map for each element. */
__device__ static __forceinline__ void mk_copy_gtab(const imp_args &p, bool far, const uint2 *hd, int64_t u0,
                                                    const int16_t *act, int na, int32_t *gtab, int tid, int pt) {
  const int ac = mk_act_at(act, na, p.centre);
  if (ac >= 0)
    for (int r = tid; r < MK_BM; r += pt) {
      int32_t *d = gtab + ac * GTAB_STRIDE(MK_BM) + r;
      if (u0 + r < p.rows) vc_cp_async4(d, p.order + u0 + r);
      else *d = -1;
    }
  const int n1 = na - (ac >= 0), skip = ac >= 0 ? ac : na; /* the other columns: a1 -> a */
  if (!far) {
    const int nr = pt / MK_ROW_LANES;
    for (int a1 = tid % MK_ROW_LANES; a1 < n1; a1 += MK_ROW_LANES) {
      const int a = a1 + (a1 >= skip);
      const uint32_t bit = 1u << act[a];
      int32_t *d = gtab + a * GTAB_STRIDE(MK_BM);
#pragma unroll 4
      for (int r = tid / MK_ROW_LANES; r < MK_BM; r += nr) {
        const uint2 h = hd[r];
        /* two 64-bit additions: the 32-bit index sum and one wide multiply-add is two
         * instructions an element fewer, but ran RES 1024's forward 2 % slower (session 50) */
        if (h.y & bit) vc_cp_async4(d + r, p.nbl + h.x + vc_map_below(h, bit - 1));
        else d[r] = -1;
      }
    }
    return;
  }
  if (n1 <= 0) return;
  const uint32_t inv = mk_div_inv(n1);
  for (int i = tid; i < n1 * MK_BM; i += pt) {
    const int r = mk_div(i, inv), a1 = i - r * n1, a = a1 + (a1 >= skip);
    int32_t *d = gtab + a * GTAB_STRIDE(MK_BM) + r;
    const int64_t at = mk_entry(p, true, NULL, u0, r, act[a]);
    if (at < 0) *d = -1;
    else vc_cp_async4(d, p.nbl + at);
  }
}

/* The in-place set-up's last step (hd and act are everyone's): gtab, where the unit has
 * at most MK_GTAB offsets, copied and waited for, then named barrier bar over the pt
 * threads. The commit also closes the previous unit's last stage gathers (never committed:
 * they complete on the ring's mbarriers), so the wait covers them too. */
__device__ static __forceinline__ void mk_gtab_in_place(const imp_args &p, bool far, const uint2 *hd, int64_t u0,
                                                        const int16_t *act, int na, int32_t *gtab, int tid, int pt,
                                                        int bar) {
  if (na > MK_GTAB) return;
  mk_copy_gtab(p, far, hd, u0, act, na, gtab, tid, pt);
  vc_cp_async_commit();
  VC_CP_ASYNC_WAIT(0);
  vc_named_barrier(bar, pt);
}

/* hd[i] = the map header of row m0 + i for thread i < MK_BM (K <= 32), by a cp.async copy
 * (no commit); mask 0 past the rows. */
__device__ static __forceinline__ void mk_copy_hdrs(const imp_args &p, int64_t m0, uint2 *hd, int tid) {
  if (tid < MK_BM) {
    if (m0 + tid >= p.rows) hd[tid] = make_uint2(0u, 0u);
    else vc_cp_async8(hd + tid, p.hdr + m0 + tid);
  }
}

/* Mask-block word b (K <= 32: one word a block): its address, or NULL with the word in *v
 * (all offsets without block masks, none past the last block: as vc_cuda_blk_union). */
__device__ static __forceinline__ const uint32_t *mk_blk_at(const imp_args &p, int64_t b, uint32_t *v) {
  *v = p.blk_mask ? 0u : ~0u;
  return p.blk_mask && b < (p.rows + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK ? p.blk_mask + b : NULL;
}

/* The producers' tables of the unit whose rows start at m0, built in place: hd (K <= 32:
 * its rows' map headers; `far`, K > 32: none, the map is read directly), act (the active
 * offsets, ascending) and, for at most MK_GTAB of them, gtab (mk_copy_gtab: one round trip
 * to the map's entries, where loads through registers took three at ~17 offsets). Returns
 * the offset count to every producer thread (tid of pt); ends with named barrier bar (over
 * the pt threads), after which the tables are everyone's. One mask word: thread i places
 * offset i; more: thread 0 walks them and n_act passes the count on. */
__device__ static __forceinline__ int mk_tables(const imp_args &p, int64_t m0, uint2 *hd, int16_t *act, int *n_act,
                                                int32_t *gtab, int tid, int pt, int bar, bool far) {
  int na;
  if (p.K <= 32) {
    for (int i = tid; i < MK_BM; i += pt)
      hd[i] = m0 + i < p.rows ? p.hdr[m0 + i] : make_uint2(0u, 0u);
    const uint32_t m = tile_mask_word(p, m0, MK_BM, 0);
    mk_place_offsets(m, act, tid);
    na = __popc(m);
    vc_named_barrier(bar, pt);
  } else {
    if (tid == 0) *n_act = tile_offsets(p, m0, MK_BM, act);
    vc_named_barrier(bar, pt);
    na = *n_act;
  }
  mk_gtab_in_place(p, far, hd, m0, act, na, gtab, tid, pt, bar);
  return na;
}

/* Two pipelines (K <= MK_GTAB) build every unit's tables in place; the unit's map headers
 * and its two mask-block words, two of that set-up's round trips, are copied into hd and
 * blk by cp.async during the unit before (thread tid of MK_BM a row; committed as one group,
 * landed by that unit's end wait). Held in registers instead, they made the producers
 * spill. */
__device__ static __forceinline__ void mk_pre_copy(const imp_args &p, int64_t m0, uint2 *hd, uint32_t *blk, int tid) {
  mk_copy_hdrs(p, m0, hd, tid);
  if (tid < 2) {
    uint32_t v;
    const uint32_t *src = mk_blk_at(p, m0 / VC_ORDER_BLOCK + tid, &v);
    if (src) vc_cp_async4(blk + tid, src);
    else blk[tid] = v;
  }
  vc_cp_async_commit();
}

/* mk_tables (K <= MK_GTAB, pt == MK_BM) for the unit at m0 from mk_pre_copy's hd and blk
 * (everyone's since the unit before ended). hd is free again on return: the gather table
 * holds every offset (mk_pipes), so the stages read no headers. */
__device__ static __forceinline__ int mk_tables_pre(const imp_args &p, int64_t m0, const uint2 *hd,
                                                    const uint32_t *blk, int16_t *act, int32_t *gtab, int tid,
                                                    int pt, int bar) {
  const uint32_t m = tile_k_bits(p, blk[0] | blk[1], 0);
  mk_place_offsets(m, act, tid);
  vc_named_barrier(bar, pt); /* act is everyone's, and blk is free again */
  const int na = __popc(m);
  mk_gtab_in_place(p, false, hd, m0, act, na, gtab, tid, pt, bar);
  return na;
}

/* A two-pipeline consumer's loads ahead for the unit at m0 (K <= 32): the word of mask
 * block m0 / VC_ORDER_BLOCK + lane % 2 and its epilogue's order rows (block b, half h: row
 * m0 + 64 b + 16 warp + lane / 4 + 8 h). The lane-dependent address keeps the word in a
 * vector register until mk_pre_mask ORs it across the warp (session 17's look-ahead word,
 * uniform, was moved to a uniform register at once: a wait for the load there). */
__device__ static __forceinline__ void mk_pre_rows(const imp_args &p, int64_t m0, int lane, int warp, uint32_t *blk,
                                                   int32_t orow[2][2]) {
  uint32_t v;
  const uint32_t *src = mk_blk_at(p, m0 / VC_ORDER_BLOCK + (lane & 1), &v);
  *blk = src ? *src : v;
#pragma unroll
  for (int b = 0; b < 2; b++)
#pragma unroll
    for (int h = 0; h < 2; h++) orow[b][h] = order_row(p, m0 + 64 * b + 16 * warp + (lane >> 2) + 8 * h);
}

/* The union of a 128-row tile's two mask blocks from mk_pre_rows's per-lane words (every
 * warp holds both). */
__device__ static __forceinline__ uint32_t mk_pre_mask(const imp_args &p, uint32_t blk) {
  return tile_k_bits(p, __reduce_or_sync(0xffffffffu, blk), 0);
}

/* Ahead, part 1 (at a unit's start): the map headers of the unit at m0 (K <= 32), by
 * cp.async copies committed as one group; returns its mask word, loaded now, read in part 2. */
__device__ static __forceinline__ uint32_t mk_ahead_hdrs(const imp_args &p, int64_t m0, uint2 *hd, int tid) {
  mk_copy_hdrs(p, m0, hd, tid);
  vc_cp_async_commit();
  return tile_mask_word(p, m0, MK_BM, 0);
}

/* Ahead, part 2 (after a few of the unit's stages): act from mask word m, then gtab as 4-byte
 * cp.async copies from the map's entries, committed as one group for the caller to wait for
 * (mk_copy_gtab). Returns the offset count. */
__device__ static __forceinline__ int mk_ahead_gtab(const imp_args &p, uint32_t m, int64_t m0, const uint2 *hd,
                                                    int16_t *act, int32_t *gtab, int tid, int pt) {
  /* this thread's header copies (and the stage gathers before them, which that commit also
   * closed: long landed by now) */
  VC_CP_ASYNC_WAIT(0);
  mk_place_offsets(m, act, tid);
  vc_named_barrier(2, pt); /* hd and act are everyone's */
  const int na = __popc(m);
  if (na <= MK_GTAB) mk_copy_gtab(p, false, hd, m0, act, na, gtab, tid, pt);
  vc_cp_async_commit();
  return na;
}

/* The pairs form (mk_body's `pairs`): a tile is up to MK_BM consecutive pairs of one offset's
 * list whose output rows lie in one chunk of the rows (p.pchunk of the plan's VC_PAIR_ROWS
 * blocks; within an offset the pairs ascend by output row). The tiles run chunk by chunk,
 * each chunk's offsets in turn: the units in flight then add into the rows of one or two
 * chunks, which stay in L2 (in offset-major order they add all over the output; session 24's
 * pairs form beyond half of L2 ran with its fp32 rows in DRAM). Entry e = c K + r of a
 * shared table is offset r's pairs in chunk c; its tiles are numbers ts[e] .. ts[e + 1] - 1. */
typedef struct mk_ptile {
  int r;      /* the offset: its weight slice */
  int n;      /* pairs, 1 .. MK_BM */
  int64_t j0; /* the first */
} mk_ptile;

/* Pair indices [*j0, *j1) of entry e (chunk c, offset r); p.pentries entries in all. */
__device__ static __forceinline__ void mk_pair_range(const imp_args &p, int e, int64_t *j0, int64_t *j1) {
  const int c = e / p.K, r = e - c * p.K;
  const int64_t b0 = (int64_t)c * p.pchunk;
  pair_block_range(p, r, p.pblocks, b0, b0 + p.pchunk, j0, j1);
}

/* ts from the plan's pair starts; the caller's barrier publishes it. Up to 32 entries (one
 * chunk of up to 32 offsets) warp 0 alone, a lane an entry, with no barrier of its own: the
 * CTA-wide version below made the pairs kernels 0.2-1.0 % slower at suite S RES 16 and 32
 * (ncu, two rounds; bench/NOTES.md, session 27). Else every thread of the CTA: each
 * entry's tile count (the entries strided over the threads, so a thread's loads are
 * independent of each other), then a scan over contiguous runs of entries, one a thread,
 * whose counts each thread turns into ts[1 .. E] for its run. */
__device__ static __forceinline__ void mk_pair_table(const imp_args &p, int32_t *ts, int32_t *wsum) {
  const int E = p.pentries, tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
  if (E <= 32) {
    if (warp == 0) {
      int64_t j0 = 0, j1 = 0;
      if (lane < E) mk_pair_range(p, lane, &j0, &j1);
      const uint32_t incl = vc_warp_inclusive_sum((uint32_t)((j1 - j0 + MK_BM - 1) / MK_BM), lane);
      if (lane == 0) ts[0] = 0;
      if (lane < E) ts[lane + 1] = (int32_t)incl;
    }
    return;
  }
  for (int e = tid; e < E; e += nt) {
    int64_t j0, j1;
    mk_pair_range(p, e, &j0, &j1);
    ts[e + 1] = (int32_t)((j1 - j0 + MK_BM - 1) / MK_BM);
  }
  __syncthreads();
  const int run = (E + nt - 1) / nt, e0 = min(E, tid * run), e1 = min(E, e0 + run);
  int32_t sum = 0;
  for (int e = e0; e < e1; e++) sum += ts[e + 1];
  const int32_t incl = (int32_t)vc_warp_inclusive_sum((uint32_t)sum, lane);
  if (lane == 31) wsum[warp] = incl;
  __syncthreads();
  int32_t before = incl - sum;
  for (int w = 0; w < warp; w++) before += wsum[w];
  for (int e = e0; e < e1; e++) ts[e + 1] = before += ts[e + 1];
  if (tid == 0) ts[0] = 0;
}

/* Tile t: its entry is the last e with ts[e] <= t (entries without pairs have no tiles:
 * ts[e] == ts[e + 1]). */
__device__ static __forceinline__ mk_ptile mk_ptile_of(const imp_args &p, const int32_t *ts, int64_t t) {
  int lo = 0, hi = p.pentries;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (ts[mid] <= t) lo = mid;
    else hi = mid;
  }
  int64_t j0, j1;
  mk_pair_range(p, lo, &j0, &j1);
  mk_ptile g;
  g.r = lo % p.K, g.j0 = j0 + (t - ts[lo]) * MK_BM;
  g.n = (int)min((int64_t)MK_BM, j1 - g.j0);
  return g;
}

/* The list of an offset's gathered rows (forward: its inputs, dgrad: its outputs) or of its
 * written rows (the other), by the offset's imp_sel; entry j - imp_shift is its pair j. */
__device__ static __forceinline__ const int32_t *mk_list(const imp_args &p, int sel, bool gathered) {
  return (p.mode == MODE_FWD) == gathered ? imp_in_list(p, sel) : imp_out_list(p, sel);
}

/* gtab's first row for tile g: its pairs' gathered rows (forward: their inputs, dgrad: their
 * outputs), -1 past its n; now by plain loads, or ahead by cp.async committed as one group
 * (the caller waits before the tile starts; the centre's rows, computed, are stored). */
__device__ static __forceinline__ void mk_pair_gtab(const imp_args &p, const mk_ptile &g, int32_t *gtab, int tid,
                                                    bool ahead) {
  const int32_t *const src = mk_list(p, imp_sel(p, g.r), true);
  if (tid < MK_BM) {
    const int64_t at = g.j0 + tid - imp_shift(p, g.r);
    if (tid >= g.n) gtab[tid] = -1;
    else if (ahead && src) vc_cp_async4(gtab + tid, src + at);
    else gtab[tid] = vc_list_row(src, at);
  }
  if (ahead) vc_cp_async_commit();
}
/* bf16's second pairs launch (imp_args.join; mk_pairs_windows, step 2): its producer warps,
 * after their first unit's stages, wait for the first launch to be done (griddepcontrol:
 * the second launch may start while the first one's last units run, mk_pairs_run), then
 * take y's rows one at a time (join[0]): window 1 (columns [0, w1), y's row read as fp32)
 * turned into bf16 in place, ascending in chunks of 512 values (each read in full before it
 * is written: chunk [j, j + 512) writes over values j / 2 .. j / 2 + 255, read by it or an
 * earlier one), then this launch's window, fp32 values at bytes [2 w1, 2 w1 + 4 wb), filled
 * with the bias. The rows done go into join[1] (after a fence), which the consumers wait for
 * before their first reductions (mk_join_wait). Every CTA's producers take rows until none is
 * left, so the first CTA that runs could do them all: no CTA waits for one that is not
 * resident. C and y are read back from this launch's own fields as mk_pairs_run sets them
 * (out_ld = C / 2, out = y + 2 w1 bytes). */
__device__ static __forceinline__ void mk_join_settle(const imp_args &p, int lane) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int64_t c = 2 * p.out_ld;
  const mk_windows wd = mk_pairs_windows(c);
  const int64_t w1 = wd.w1, wa = wd.wa, wb = wd.wb;
  char *const y = (char *)p.out - 2 * w1;
  const int u = 4; /* 128-value steps a chunk: fewer registers than k_mk_pairs_settle's MK_SETTLE_U */
  int done = 0;
  for (;;) {
    int row = 0;
    if (lane == 0) row = atomicAdd(p.join, 1);
    row = __shfl_sync(0xffffffffu, row, 0);
    if (row >= p.rows) break;
    char *const yr = y + (int64_t)row * c * 2;
    float *const t1 = (float *)yr, *const t3 = (float *)(yr + 2 * w1);
    for (int64_t j = 0; j < w1; j += 128 * u) mk_settle_chunk(t1, w1, t1, w1, (uint16_t *)yr, j, p.dt, lane, u);
    for (int64_t j = 4 * lane; j < wb; j += 128) *(float4 *)(t3 + j) = mk_bias4(p.join_bias, p.dt, w1 + wa + j);
    done++;
  }
  __threadfence();
  __syncwarp();
  if (lane == 0 && done) atomicAdd(p.join + 1, done);
}
/* ... and one consumer thread waits for all of y's rows to be done (then a barrier). It reads
 * join[1] without griddepcontrol.wait: the counters were zeroed by a kernel that ended
 * before the first launch began (mk_pairs_run). */
__device__ static __forceinline__ void mk_join_wait(const imp_args &p) {
  for (;;) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p.join + 1) : "memory");
    if (v >= p.rows) break;
    __nanosleep(200);
  }
}

/* out[row, n .. n + 3] += v, one 16-byte L2 reduction (the pairs form's epilogues); none for
 * a pair-less row (-1) or columns past the end (n_cols % 4 == 0 on the fast path; so are a
 * window's widths, mk_pairs_windows: four columns have one target). */
__device__ static __forceinline__ void mk_red4(const imp_args &p, int32_t row, int64_t n, float4 v) {
  if (n < p.n_cols && row >= 0)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(
                     n < p.out_split ? (float *)p.out + (int64_t)row * p.out_ld + n
                                     : (float *)p.out2 + (int64_t)row * p.out2_ld + (n - p.out_split)),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
}
/* out[row, n .. n + 7] += v (8 f16 values, packed in pairs), one 16-byte L2 reduction (the
 * pairs form's f16 epilogue, mk_pairs_direct: one window, out); the same guards. */
__device__ static __forceinline__ void mk_red8_f16(const imp_args &p, int32_t row, int64_t n, uint4 v) {
  if (n < p.n_cols && row >= 0)
    asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};\n" ::"l"((uint16_t *)p.out +
                                                                                  (int64_t)row * p.out_ld + n),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

/* The swapped main loop of the pairs form's tf32 dgrad. tf32 wgmma reads shared operands
 * K-major only, and the weight is stored ci-contiguous (MN-major for a dgrad, which reduces
 * over co); the row tiles transpose it first (k_mk_tf32_weight: a read and a write of
 * every weight, 76 us a layer at C = 1024). Here the product runs transposed instead,
 * dx^T[ci, pair] = sum_co w[co][ci] dy[pair, co]: the gathered dy rows are B (K-major,
 * as the producers lay them), and the weight is A, loaded from its MN-major atoms into
 * registers (ld.shared) and rounded to tf32 there by cvt.rna, as the transposed copy rounds
 * it. (Adding half a tf32 unit to the bits, the tensor cores then dropping bits 0-12, was
 * 3.7 % faster and rounds every finite value and inf the same, but carries a NaN of a full
 * mantissa, the GPU's own 0x7fffffff, into the sign: a NaN weight would read as zero.
 * bench/NOTES.md, session 29.)
 *
 * Consumer warpgroup cw takes columns (ci) 128 cw .. + 127 of the tile, as two m64 blocks,
 * and all 128 pairs (n128); a stage is 32 co, 4 k8 steps. A-fragment rows m and m + 8 (16
 * w + g + 8 h of block b, g = lane / 4: ptx/wgmma.cuh) are columns 32 w + mk_sw_col(b, g, h)
 * of cw's 128: warp w holds the 32 columns of atom 4 cw + w, a thread's two are adjacent
 * (one 8-byte ld.shared a k), and a half-warp's loads (4 k rows t = lane % 4, 4 pairs of
 * columns) meet 8 distinct chunks of the 128-byte swizzle, both halves of each: 32 banks,
 * no conflict. Each block's 4 steps are one wgmma group,
 * one group in flight: a block's registers are rewritten only after the group that read
 * them has retired, and a slot goes back once both of its groups have. n: 128, or 64 for a
 * tile of at most 64 pairs (a literal: its first 32 accumulators of each block, the same
 * fragment positions). */
__device__ static __forceinline__ int mk_sw_col(int b, int g, int h) {
  return 4 * (2 * b + (g >> 2) + 4 * (g >> 1 & 1)) + 2 * (g & 1) + h;
}
__device__ static __forceinline__ void mk_consume_swapped(float *acc, const hp_ring &r, hp_pos &pos, int n_it, int st,
                                                          int a_tile, int b_tile, int cw, int n) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
  /* this thread's word in its atom's row t, less the chunk */
  const uint32_t wb0 = r.b + (uint32_t)(4 * cw + warp) * 4096u + (uint32_t)t * 128u + (uint32_t)(g & 1) * 8u;
  const uint64_t db0 = vc_wgmma_desc_k(r.a, 128);
  int s = pos.s, phase = pos.phase, prev = -1;
  for (int it = 0; it < n_it; it++) {
    vc_mbar_wait(r.full + 8 * s, phase);
    vc_fence_proxy_async(); /* the cp.async (generic proxy) writes of B, seen here, to wgmma */
    const uint32_t wb = wb0 + (uint32_t)(s * b_tile);
    const uint64_t db = db0 + (uint32_t)(s * a_tile >> 4);
#pragma unroll
    for (int b = 0; b < 2; b++) {
      uint32_t a[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int v1 = 0; v1 < 2; v1++) { /* k row 8 kk + t + 4 v1; its chunk c sits at c ^ (t + 4 v1) */
          const uint32_t at = wb + (uint32_t)(kk * 1024 + v1 * 512) + (uint32_t)(((mk_sw_col(b, g, 0) >> 2) ^ (t + 4 * v1)) << 4);
          uint32_t x0, x1;
          asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(x0), "=r"(x1) : "r"(at) : "memory");
          asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(a[kk][2 * v1]) : "f"(__uint_as_float(x0)));
          asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(a[kk][2 * v1 + 1]) : "f"(__uint_as_float(x1)));
        }
      vc_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; kk++)
        if (n == 64) vc_wgmma_n64_tf32_rk(acc + 64 * b, a[kk], db + (uint32_t)(kk * 2));
        else vc_wgmma_n128_tf32_rk(acc + 64 * b, a[kk], db + (uint32_t)(kk * 2));
      hp_group_retire(r, prev, b == 0);
    }
    prev = s;
    if (++s == st) s = 0, phase ^= 1;
  }
  hp_walk_end(acc, 128, r, prev, s, phase, pos);
}
#endif

/* p: the pass's arguments with nsplit and n_tiles set; part, cnt: the split partials and
 * their per-tile arrival counters (zero at launch), unused when nsplit == 1. np: producer
 * warpgroups; pipes: 1, or 2 (np == 2): the CTA runs two pipelines, producer and consumer
 * warpgroup g working on units of their own through half the ring each. pairs: the
 * pairs form (pipes 1, nsplit 1, K <= 32; see mk_pairs_run): tiles of pairs, each of one
 * offset (p.pair_start, p.pblocks, p.pchunk: mk_ptile_of), whose products the epilogue
 * adds into the rows of p.out, or p.out2 from column p.out_split on, with L2 reductions (fp32
 * rows, or f16 ones: mk_pairs_direct). */
__device__ static __forceinline__ void mk_body(const imp_args &args, const CUtensorMap *bmap, float *part, int *cnt,
                                               const int mode, const int dt, const int bn, const int kb, const int np,
                                               const int pipes, const bool pairs) {
#ifdef VC_SM90A
  const bool b_kmajor = mk_b_kmajor(mode, dt, pairs), sw = mk_swapped(mode, dt, pairs);
  const int a_tile = MK_A_TILE(kb), b_tile = MK_B_TILE(bn, kb, b_kmajor);
  const int pt = 128 * np;                            /* producer threads */
  const int st = MK_STAGES(bn, kb, b_kmajor) / pipes; /* a pipeline's stages */
  /* a pipeline's producer warpgroups, producer threads and consumer threads */
  const int npp = np / pipes, tpp = 128 * npp, cpp = 256 / pipes;
  imp_args p = args;
  p.dt = dt; /* nothing below reads p.dt, but without this line the generated code differs
              * and measured a little slower in training (suite L 12.38 against 12.23 ms,
              * within run-to-run spread; bench/NOTES.md session 10) */
  extern __shared__ __align__(16) uint8_t mk_smem[];
  /* the producers' per-unit tables (map headers, active offsets, their gather rows), two of
   * each: the unit's and the next unit's, or each pipeline's */
  __shared__ uint2 hdrs[2][MK_BM]; /* K <= 32; two pipelines: each one's next unit's */
  __shared__ int16_t act[2][MAX_K];
  __shared__ __align__(16) int32_t gtab[2][MK_GTAB * GTAB_STRIDE(MK_BM)];
  __shared__ int n_act[2], last[2];
  __shared__ int64_t um0[2]; /* K > 32: the unit's first row, by table buffer */
  __shared__ float sbias[2][256]; /* the unit's bias columns, by unit parity (each pipeline's half) */
  __shared__ int32_t wsum[32];
  __shared__ uint32_t nblk[2][2];   /* two pipelines: each one's next unit's mask-block words */
  /* gather table u (GT(u)) is gtab[u], or in the pairs form (tiles of one offset) row u of
   * gtab[0]; the pairs form's tile table, published by hp_ring_init's barrier, takes the
   * space after those two rows, up to its epilogue's staging (MK_RS_AT) */
#define GT(u) (pairs ? gtab[0] + (u) * GTAB_STRIDE(MK_BM) : gtab[u])
  int32_t *const pts = &gtab[0][0] + 2 * GTAB_STRIDE(MK_BM);
  /* bf16's windows: the second launch may start on the multiprocessors this one leaves
   * (mk_join_settle; nothing where the next launch does not ask for it). The join's code is
   * bf16's pairs kernels' alone: in f16's it measured 2-4 % slower unused (session 39). */
  const bool join = pairs && dt == VC_DTYPE_BF16;
  if (join) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (pairs) mk_pair_table(p, pts, wsum);
  const int wg = hp_warpgroup();
  const int pipe = pipes == 1 ? 0 : wg < np ? wg : wg - np;
  /* full: one producer warpgroup's cp.async arrivals + its TMA issuer's; empty: the warps of
   * the consumers that read the slot */
  const hp_ring ring = hp_ring_from(hp_ring_init(mk_smem, st * pipes, a_tile, b_tile, 128 + 1, 8 / pipes), pipe * st,
                                    a_tile, b_tile);
  const uint32_t sA = ring.a, sB = ring.b, full = ring.full, empty = ring.empty;
  const int es = dt == VC_DTYPE_F32 ? 4 : 2, bk = mk_bk(dt, kb); /* element bytes, values a stage row */
  const int nkc = (int)((p.c_red + bk - 1) / bk);
  const int64_t units = (pairs ? pts[p.pentries] : (p.rows + MK_BM - 1) / MK_BM) * p.n_tiles * p.nsplit;

  if (wg < np) { /* ---- producers ---- */
    hp_producer_regs();
    /* Each producer warpgroup issues every npp-th stage of its pipeline, alone (a stage's
     * full barrier counts one warpgroup's arrivals): the producers are issue-bound (ncu,
     * dec4.a forward: ~95 instructions a warp a stage at ~7 cycles each, 2 warps a
     * scheduler), and a stage's fixed costs (slot wait, offset, counters, arrival) then fall
     * on 4 warps, not 8. Thread gt of its warpgroup copies 16-byte chunk q of rows m0 + MR h
     * of its stages; the swizzle only depends on m % 8, so the destinations are one base +
     * kb MR h. A row's source is one 32 x 32 -> 64-bit multiply-add (row x pitch + the
     * stage's channel base). */
    const int CH = kb / 16, MR = 128 / CH; /* chunks a row, rows one pass of a warpgroup covers */
    const int tid = threadIdx.x & (tpp - 1), grp = npp == 1 ? 0 : wg, gt = tid & 127, q = gt % CH, m0 = gt / CH;
    const int bar = 2 + pipe; /* the pipeline's producers' named barrier */
    const uint32_t dst0 = sA + vc_sw(kb, m0, q);
    const char *a_src = (const char *)p.a_src;
    const uint32_t a_pitch = (uint32_t)(p.c_red * es); /* bytes of a gathered row */
    int64_t g = 0; /* stages issued by this pipeline */
    /* With one pipeline a unit's tables are built while the unit before it issues its
     * stages, into the other buffer (K <= 32): its map headers and mask word are loaded when
     * that unit starts, its offsets placed and its gather table copied by cp.async after that
     * unit's first 2 np stages, and the copies land by that unit's end. So a unit begins with
     * its tables ready: no global latency and one named barrier between units (ncu, dec4.a
     * forward: the set-up in line was ~40 % of the producers' samples). The first unit, every
     * unit with K > 32, and every unit of two pipelines (one buffer each; the other
     * pipeline's stages fill the ring meanwhile) build theirs in place, the latter from the
     * map headers and mask words mk_pre_copy brought during the unit before. */
    int na = 0;    /* the unit's active offsets */
    int ub = pipe; /* its table buffer */
    /* two pipelines: each unit's tables from mk_pre_copy's headers and words (tpp == MK_BM).
     * Their K is at most MK_GTAB (mk_pipes gives larger maps one pipeline): the buffer of a
     * unit's headers takes the next unit's while its stages run, which read none. (Testing
     * MK_GTAB here instead of 32 changed the two-pipeline kernels' code, unmeasured.) */
    const bool pre_ok = pipes == 2 && !pairs && p.K <= 32;
    /* K > 32 (one pipeline: mk_pipes): no headers in shared memory, the map read directly,
     * the unit's first row in um0 (kept in a register across the stages, it and the reads
     * made the producers spill) */
    const bool far = pipes == 1 && p.K > 32;
    if (pre_ok) { /* the first unit's, at once */
      const int64_t u0 = mk_unit_at(p, 0, units, pipes, pipe);
      if (u0 >= 0) mk_pre_copy(p, mk_unit_of(p, u0, bn).m0, hdrs[pipe], nblk[pipe], tid);
      VC_CP_ASYNC_WAIT(0);
      vc_named_barrier(bar, tpp);
    }
    for (int64_t k = 0, u = mk_unit_at(p, 0, units, pipes, pipe); u >= 0; u = mk_unit_at(p, ++k, units, pipes, pipe)) {
      const mk_unit w = mk_unit_of(p, u, bn);
      mk_ptile pg = {0, 0, 0};
      if (pairs) {
        pg = mk_ptile_of(p, pts, w.m0 / MK_BM);
        if (k == 0) {
          mk_pair_gtab(p, pg, GT(ub), tid, false);
          vc_named_barrier(bar, tpp);
        }
        na = 1;
      } else if (pre_ok) {
        na = mk_tables_pre(p, w.m0, hdrs[pipe], nblk[pipe], act[ub], GT(ub), tid, tpp, bar);
      } else if (k == 0 || p.K > 32) { /* one pipeline: its first unit, or every unit with K > 32 */
        if (far && tid == 0) um0[ub] = w.m0;
        na = mk_tables(p, w.m0, hdrs[ub], act[ub], &n_act[ub], GT(ub), tid, tpp, bar, far);
      }
      const bool tab = na <= MK_GTAB;
      /* the other buffer was left by every producer at the last unit's end */
      const int64_t next = mk_unit_at(p, k + 1, units, pipes, pipe);
      if (pre_ok && next >= 0) mk_pre_copy(p, mk_unit_of(p, next, bn).m0, hdrs[pipe], nblk[pipe], tid);
      bool ahead = !pairs && pipes == 1 && p.K <= 32 && next >= 0;
      const int64_t next_m0 = ahead ? mk_unit_of(p, next, bn).m0 : 0;
      const uint32_t next_mask = ahead ? mk_ahead_hdrs(p, next_m0, hdrs[ub ^ 1], tid) : 0;
      if (pairs && next >= 0) /* lands by this unit's end (the wait below) */
        mk_pair_gtab(p, mk_ptile_of(p, pts, mk_unit_of(p, next, bn).m0 / MK_BM), GT(ub ^ 1), tid, true);
      int it0, it1;
      mk_range(p, w, na * nkc, &it0, &it1);
      const int n = it1 - it0, n_ahead = min(n, 2 * np);
      int i = (int)((grp - g % npp + npp) % npp); /* this warpgroup's first stage of the unit */
      int64_t gi = g + i;
      int s = (int)(gi % st), phase = (int)(gi / st & 1);
      int a = nkc == 1 ? it0 + i : (it0 + i) / nkc, kc = nkc == 1 ? 0 : (it0 + i) % nkc;
      for (;; i += npp, gi += npp) {
        if (ahead && i >= n_ahead) { /* every producer comes here once (n_ahead <= n) */
          na = mk_ahead_gtab(p, next_mask, next_m0, hdrs[ub ^ 1], act[ub ^ 1], GT(ub ^ 1), tid, pt);
          ahead = false;
        }
        if (i >= n) break;
        if (gi >= st) vc_mbar_wait(empty + 8 * s, phase ^ 1);
        /* the pairs form's offset is its weight slice in both passes */
        const int col = pairs ? pg.r : act[ub][a], rw = !pairs && p.flip ? p.K - 1 - col : col, k0 = kc * bk;
        if (gt == 0) {
          vc_mbar_arrive_expect_tx(full + 8 * s, b_tile);
          /* the weight's columns from col0 on (the pairs form's windows; 0 elsewhere) */
          if (b_kmajor) vc_tma_load_3d(sB + s * b_tile, bmap, k0, rw, (int)w.n0 + p.col0, full + 8 * s);
          else /* atom x: ci n0 + aw x .. (128 bytes of them), co k0 .. k0 + bk - 1 */
            for (int x = 0, aw = 128 / es; x < (bn + aw - 1) / aw; x++)
              vc_tma_load_3d(sB + s * b_tile + x * bk * 128, bmap, (int)w.n0 + p.col0 + aw * x, rw, k0, full + 8 * s);
        }
        int32_t row[MK_BM / 16]; /* MK_BM / MR of them used */
        if (tab) {
#pragma unroll
          for (int h = 0; h < MK_BM / MR; h++) row[h] = GT(ub)[a * GTAB_STRIDE(MK_BM) + m0 + MR * h];
        } else {
#pragma unroll
          for (int h = 0; h < MK_BM / MR; h++) {
            /* the centre only where `far` (um0 is the unit's only there): a submanifold unit
             * (the one map with a centre) of K <= 32 offsets takes the gather table, never
             * this path (static_assert at MK_GTAB) */
            const int64_t u0 = far ? um0[ub] : 0;
            bool c = false;
            const int64_t at = far ? mk_source(p, u0, m0 + MR * h, col, &c)
                                   : mk_entry(p, far, hdrs[ub], u0, m0 + MR * h, col);
            row[h] = at >= 0 ? __ldg((c ? p.order : p.nbl) + at) : -1;
          }
        }
        /* chunks past the channels, and rows without a neighbour, copy 0 bytes (zeros) from
         * an address inside the operand */
        const int k = k0 + q * (16 / es);
        const bool kin = k < p.c_red;
        const char *src_k = kin ? a_src + (int64_t)k * es : a_src;
        const uint32_t dst = dst0 + s * a_tile;
#pragma unroll
        for (int h = 0; h < MK_BM / MR; h++) {
          const bool ok = kin && row[h] >= 0;
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst + kb * MR * h),
                       "l"(src_k + (uint64_t)(uint32_t)max(row[h], 0) * a_pitch), "r"(ok ? 16 : 0));
        }
        vc_mbar_arrive_cp_async(full + 8 * s);
        if ((s += npp) >= st) s -= st, phase ^= 1;
        for (kc += npp; kc >= nkc; kc -= nkc) a++;
      }
      g += n;
      /* the next unit's gather table (one pipeline) or order rows and mask words (two) have
       * landed (this thread's copies; the barrier makes them everyone's), and this unit's
       * tables are free */
      VC_CP_ASYNC_WAIT(0);
      vc_named_barrier(bar, tpp);
      if (pipes == 1) ub ^= 1;
      if (join && p.join && k == 0) mk_join_settle(p, threadIdx.x & 31);
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory"); /* exit with no copy in flight */
  } else { /* ---- consumers ---- */
    hp_consumer_regs(np);
    /* cw: the consumer warpgroup; with two pipelines it multiplies all 128 rows of its
     * pipeline's units (nb = 2 blocks of 64), else its 64 of the CTA's units. ct: this
     * thread among its unit's consumers. */
    const int cw = wg - np, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, ct = (threadIdx.x - pt) & (cpp - 1);
    const int nb = pipes, cbar = pipes == 1 ? 1 : 4 + pipe; /* row blocks, the unit's consumers' named barrier */
    const int blk0 = pipes == 1 ? cw : 0; /* the unit's 64-row block that is this warpgroup's block 0 */
    hp_pos pos = {0, 0};
    int par = 1;
    /* two pipelines (K <= MK_GTAB): the unit's mask words and this thread's epilogue rows,
     * loaded during the unit before (mk_pre_rows; their latency was a wait at every unit's
     * start and in its epilogue) */
    const bool pre_ok = pipes == 2 && !pairs && p.K <= 32;
    uint32_t pre_blk = 0u;
    int32_t pre_orow[2][2] = {{-1, -1}, {-1, -1}};
    for (int64_t k = 0, u = mk_unit_at(p, 0, units, pipes, pipe); u >= 0; u = mk_unit_at(p, ++k, units, pipes, pipe)) {
      const mk_unit w = mk_unit_of(p, u, bn);
      uint32_t cur_blk = 0u;
      int32_t cur_orow[2][2] = {{-1, -1}, {-1, -1}};
      if (pre_ok) {
        if (k == 0) mk_pre_rows(p, w.m0, lane, warp, &pre_blk, pre_orow);
        cur_blk = pre_blk;
#pragma unroll
        for (int b = 0; b < 2; b++) cur_orow[b][0] = pre_orow[b][0], cur_orow[b][1] = pre_orow[b][1];
        const int64_t next = mk_unit_at(p, k + 1, units, pipes, pipe);
        if (next >= 0) mk_pre_rows(p, mk_unit_of(p, next, bn).m0, lane, warp, &pre_blk, pre_orow);
      }
      /* the unit's bias columns; read after the barrier below, rewritten two units later,
       * after every consumer has passed the next unit's barrier */
      par ^= 1;
      float *sb = pipes == 1 ? sbias[par] : sbias[pipe] + 128 * par; /* bn <= 128 with two pipelines */
      if (p.bias && ct < bn) sb[ct] = w.n0 + ct < p.n_cols ? vc_load(p.bias, dt, w.n0 + ct) : 0.0f;
      /* the producers' offset walk, from the same masks; with one mask word, each 64 rows
       * (one VC_ORDER_BLOCK) skip the offsets none of them meets */
      int na = 0;
      uint32_t uni = 0, live[2] = {0u, 0u};
      bool skips;
      int32_t prow[2] = {-1, -1}; /* the pairs form: this thread's two rows' written rows (swapped: pair ct's) */
      int pn = 0;                 /* and the tile's pairs */
      if (pairs) {
        /* one offset (bit 0); the second 64 rows of a tile of at most 64 pairs skip it. The
         * written rows are loaded now: their latency hides behind the main loop. */
        const mk_ptile pg = mk_ptile_of(p, pts, w.m0 / MK_BM);
        const int32_t *const pl = mk_list(p, imp_sel(p, pg.r), false);
        const int64_t pj = pg.j0 - imp_shift(p, pg.r); /* the tile's first pair in pl */
        const int i0 = blk0 * 64 + warp * 16 + (lane >> 2);
        na = 1, uni = 1u, live[0] = blk0 * 64 < pg.n, skips = pg.n <= 64, pn = pg.n;
        if (sw) { /* swapped: consumer thread ct < MK_BM loads pair ct's, for the epilogue's table */
          if (ct < pg.n) prow[0] = vc_list_row(pl, pj + ct);
        } else {
#pragma unroll
          for (int h = 0; h < 2; h++)
            if (i0 + 8 * h < pg.n) prow[h] = vc_list_row(pl, pj + i0 + 8 * h);
        }
      } else if (pre_ok) {
        na = __popc(uni = mk_pre_mask(p, cur_blk));
        skips = p.blk_mask;
        if (skips)
#pragma unroll
          for (int b = 0; b < 2; b++) live[b] = __shfl_sync(0xffffffffu, cur_blk, b) & uni;
      } else {
        for (int wd = 0; wd * 32 < p.K; wd++) na += __popc(uni = tile_mask_word(p, w.m0, MK_BM, wd));
        skips = p.K <= 32 && p.blk_mask;
#pragma unroll
        for (int b = 0; b < nb; b++)
          if (skips) live[b] = tile_mask_word(p, w.m0 + (blk0 + b) * VC_ORDER_BLOCK, VC_ORDER_BLOCK, 0);
      }
      int it0, it1;
      mk_range(p, w, na * nkc, &it0, &it1);
      float acc[128];
#pragma unroll
      for (int i = 0; i < nb * bn / 2; i++) acc[i] = 0.0f;
      if (sw) { /* both consumers multiply all of the tile's pairs (n), half its columns each */
        if (pn <= 64) mk_consume_swapped(acc, ring, pos, it1 - it0, st, a_tile, b_tile, cw, 64);
        else mk_consume_swapped(acc, ring, pos, it1 - it0, st, a_tile, b_tile, cw, 128);
      } else
        hp_consume(acc, ring, pos, it1 - it0, st, a_tile, b_tile, kb, blk0 * 64 * kb, bn, dt,
                   b_kmajor ? HP_KK : HP_KMN, skips ? uni : 0u, live, nb, nkc, it0);
      if (join && p.join && k == 0) { /* this launch's window and window 1 settled (mk_join_settle) */
        if (ct == 0) mk_join_wait(p);
        vc_named_barrier(cbar, cpp);
      }

      /* the pairs form's epilogue staging: each consumer warp's 8 rows of MK_RS_ROW floats */
      float *const rs = (float *)&gtab[0][0] + MK_RS_AT + (cw * 4 + warp) * 8 * MK_RS_ROW;
      if (sw) {
        /* The swapped products: acc[64 b + 4 j + 2 h + e] is column 32 warp + mk_sw_col(b, g,
         * h) of cw's 128, pair 8 j + 2 (lane % 4) + e. Each warp stages pairs 8 j .. 8 j + 7
         * as 8 rows of its 32 columns (row x at word 32 x, column chunk c at chunk c ^ (x / 2):
         * a half-warp's 8-byte writes of columns h = 0, 1 fill 32 banks, the reads are 16-byte
         * aligned) and reads them back as 4 consecutive columns a lane: one red.v4
         * instruction covers 4 rows x 128 bytes, as below. The pairs' written rows come
         * through sbias (unused by the pairs form: q.bias is NULL), by unit parity. */
        float *wr = sbias[par];
        if (ct < MK_BM) wr[ct] = __int_as_float(prow[0]);
        vc_named_barrier(cbar, cpp);
        const int g = lane >> 2, t4 = lane & 3, rr = lane >> 3, c4 = lane & 7;
        const int64_t n = w.n0 + 128 * cw + 32 * warp + 4 * c4;
#pragma unroll
        for (int j = 0; j < 16; j++) {
          if (8 * j >= pn) break;
#pragma unroll
          for (int b = 0; b < 2; b++)
#pragma unroll
            for (int e = 0; e < 2; e++)
              *(float2 *)(rs + (2 * t4 + e) * 32 + (mk_sw_col(b, g, 0) ^ (4 * t4))) =
                  make_float2(acc[64 * b + 4 * j + e], acc[64 * b + 4 * j + 2 + e]);
          __syncwarp();
#pragma unroll
          for (int i = 0; i < 2; i++) {
            const int x = 4 * i + rr;
            mk_red4(p, __float_as_int(wr[8 * j + x]), n, *(const float4 *)(rs + x * 32 + ((4 * c4) ^ (4 * (x >> 1)))));
          }
          __syncwarp();
        }
        continue;
      }

      if (pairs) {
        /* out[row, n ..] += the products, one 16-byte L2 reduction a lane (4 fp32 values, or
         * 8 f16 ones: mk_pairs_direct), each instruction 4 rows x 128 bytes: a fragment's quad
         * holds 2 rows x 8 columns, so straight from it an instruction met 16 rows x 32
         * bytes, four times the L2 requests (ncu, suite S RES 16 f16 forward: 65 -> 56 us
         * with the 4-row pattern). Each warp stages 8 rows of 128 bytes at a time in shared
         * memory (32 fp32 or 64 f16 columns: half h of its 16 rows), written as fragments,
         * read as 16 consecutive bytes a lane. Rows of 40 floats put a half-warp's 8-byte
         * writes of 4 rows on distinct banks; packed f16 rows of 36 words do so for the
         * 4-byte writes of 8 rows. */
        if (blk0 * 64 + warp * 16 >= pn) continue; /* none of this warp's rows has a pair */
        const bool f16 = mk_pairs_direct(dt);
        const int cols = f16 ? 64 : 32, stride = f16 ? 36 : MK_RS_ROW; /* a staged chunk, words a row */
        const int q4 = lane & 3, rr = lane >> 3, c8 = lane & 7;
        int32_t xrow[2][2]; /* the written rows of read rows rr and 4 + rr of half h */
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int i = 0; i < 2; i++) xrow[h][i] = __shfl_sync(0xffffffffu, prow[h], 4 * (4 * i + rr));
#pragma unroll
        for (int jc = 0; jc < bn / cols; jc++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int jj = 0; jj < cols / 8; jj++) {
              const float *f = acc + 4 * (cols / 8 * jc + jj) + 2 * h;
              if (f16) ((uint32_t *)rs)[(lane >> 2) * stride + 4 * jj + q4] = vc_pack2(VC_DTYPE_F16, f[0], f[1]);
              else *(float2 *)(rs + (lane >> 2) * stride + 8 * jj + 2 * q4) = make_float2(f[0], f[1]);
            }
            __syncwarp();
            const int64_t n = w.n0 + cols * jc + cols / 8 * c8;
#pragma unroll
            for (int i = 0; i < 2; i++) {
              const float *r = rs + (4 * i + rr) * stride + 4 * c8;
              if (f16) mk_red8_f16(p, xrow[h][i], n, *(const uint4 *)r);
              else mk_red4(p, xrow[h][i], n, *(const float4 *)r);
            }
            __syncwarp();
          }
        continue;
      }
      if (p.bias) vc_named_barrier(cbar, cpp); /* sb written */
      if (p.nsplit > 1) { /* the tile's last split to finish adds all partials, in split order */
        /* [bn / 2][256] floats a split: value i of consumer thread ct of row block b at
         * 256 i + 128 b + ct with two pipelines (ct < 128), 256 i + ct with one */
        float *mine = part + ((w.tile * p.nsplit + w.split) * (bn / 2)) * 256 + ct;
#pragma unroll
        for (int b = 0; b < nb; b++)
#pragma unroll
          for (int i = 0; i < bn / 2; i++) __stcg(mine + i * 256 + 128 * b, acc[b * bn / 2 + i]);
        __threadfence();
        vc_named_barrier(cbar, cpp);
        if (ct == 0) last[pipe] = atomicAdd(cnt + w.tile, 1) == p.nsplit - 1;
        vc_named_barrier(cbar, cpp);
        if (!last[pipe]) continue;
        __threadfence();
        /* every partial from the workspace (this unit's too): one fixed order of additions */
        const float *all = part + w.tile * p.nsplit * (bn / 2) * 256 + ct;
#pragma unroll
        for (int b = 0; b < nb; b++) {
#pragma unroll
          for (int i = 0; i < bn / 2; i++) acc[b * bn / 2 + i] = __ldcg(all + i * 256 + 128 * b);
          for (int x = 1; x < p.nsplit; x++)
#pragma unroll
            for (int i = 0; i < bn / 2; i++) acc[b * bn / 2 + i] += __ldcg(all + (x * (bn / 2) + i) * 256 + 128 * b);
        }
      }
      /* epilogue: bias, conversion, stores straight from the fragments (the ring is already
       * filling with the next unit's stages) */
#pragma unroll
      for (int b = 0; b < nb; b++) {
        const int64_t mr = w.m0 + (blk0 + b) * 64 + warp * 16 + (lane >> 2);
        const float *ab = acc + b * bn / 2;
        int32_t orow[2];
#pragma unroll
        for (int h = 0; h < 2; h++) orow[h] = pre_ok ? cur_orow[b][h] : order_row(p, mr + 8 * h);
        if (dt == VC_DTYPE_F32) {
#pragma unroll
          for (int j = 0; j < bn / 8; j++) {
            const int c = 8 * j + 2 * (lane & 3);
            const int64_t n = w.n0 + c;
            const float b0 = p.bias ? sb[c] : 0.0f, b1 = p.bias ? sb[c + 1] : 0.0f;
            if (n < p.n_cols) /* n_cols % 8 == 0 on the fast path */
#pragma unroll
              for (int h = 0; h < 2; h++)
                if (orow[h] >= 0)
                  *(float2 *)((float *)p.out + (int64_t)orow[h] * p.n_cols + n) =
                      make_float2(ab[4 * j + 2 * h] + b0, ab[4 * j + 2 * h + 1] + b1);
          }
        } else {
          /* 16 bits: 8 consecutive columns a lane after a quad transpose, one 16-byte store
           * (4-byte stores were one L2 request for 16 bytes: the wgrad's bound, session 25) */
          const int q4 = lane & 3;
#pragma unroll
          for (int g = 0; g < bn / 32; g++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
              uint32_t wv[4];
#pragma unroll
              for (int jj = 0; jj < 4; jj++) {
                const int j = 4 * g + jj, c = 8 * j + 2 * q4;
                const float b0 = p.bias ? sb[c] : 0.0f, b1 = p.bias ? sb[c + 1] : 0.0f;
                wv[jj] = vc_pack2(dt, ab[4 * j + 2 * h] + b0, ab[4 * j + 2 * h + 1] + b1);
              }
              hp_quad_transpose(wv, q4);
              const int64_t n = w.n0 + 32 * g + 8 * q4; /* n_cols % 8 == 0: all 8 inside or none */
              if (orow[h] >= 0 && n < p.n_cols)
                *(uint4 *)((uint16_t *)p.out + (int64_t)orow[h] * p.n_cols + n) = make_uint4(wv[0], wv[1], wv[2], wv[3]);
            }
        }
      }
    }
  }
#undef GT
#else
  __trap(); /* launched only on sm_90 devices, which run the sm_90a code */
#endif
}

#define MK_KERNEL(name, mode, dt, bn, kb, pipes, pairs)                                                     \
  __global__ void __launch_bounds__(HP_THREADS(HP_NP(bn)), 1)                                              \
      name(const imp_args p, const __grid_constant__ CUtensorMap bmap, float *part, int *cnt) {             \
    static_assert((pipes) == 1 || (HP_NP(bn) == 2 && MK_STAGES(bn, kb, true) % 2 == 0 &&                   \
                                   MK_STAGES(bn, kb, false) % 2 == 0 && (bn) <= 128),                       \
                  "two pipelines need two producer warpgroups, an even ring and BN <= 128");                \
    static_assert(!(pairs) || (pipes) == 1, "the pairs form's epilogue stages one pipeline's 8 warps");         \
    static_assert(!(pairs) || (bn) == 256, "the pairs form (mk_consume_swapped: 8 atoms, 128 columns a consumer) is 256 wide"); \
    mk_body(p, &bmap, part, cnt, mode, dt, bn, kb, HP_NP(bn), pipes, pairs);                                 \
  }
#define MK_KERNELS(bn, kb, pipes, pairs, sfx)                                                    \
  MK_KERNEL(k_mk_fwd_f16_##bn##_##kb##sfx, MODE_FWD, VC_DTYPE_F16, bn, kb, pipes, pairs)        \
  MK_KERNEL(k_mk_fwd_bf16_##bn##_##kb##sfx, MODE_FWD, VC_DTYPE_BF16, bn, kb, pipes, pairs)      \
  MK_KERNEL(k_mk_fwd_tf32_##bn##_##kb##sfx, MODE_FWD, VC_DTYPE_F32, bn, kb, pipes, pairs)       \
  MK_KERNEL(k_mk_dgrad_f16_##bn##_##kb##sfx, MODE_DGRAD, VC_DTYPE_F16, bn, kb, pipes, pairs)    \
  MK_KERNEL(k_mk_dgrad_bf16_##bn##_##kb##sfx, MODE_DGRAD, VC_DTYPE_BF16, bn, kb, pipes, pairs)  \
  MK_KERNEL(k_mk_dgrad_tf32_##bn##_##kb##sfx, MODE_DGRAD, VC_DTYPE_F32, bn, kb, pipes, pairs)
#define MK_WIDTHS(kb)                                                                                      \
  MK_KERNELS(64, kb, 1, false, ) MK_KERNELS(96, kb, 1, false, ) MK_KERNELS(128, kb, 1, false, )           \
  MK_KERNELS(256, kb, 1, false, )
MK_WIDTHS(128)
MK_WIDTHS(64)
/* The pairs form: 128-byte stages (reductions of more than 32 16-bit channels; narrower
 * layers have too few products a pair to pay for their reductions), tiles 256 wide, what
 * the layers it was measured on (C = 1024) take; narrower tiles were not measured. */
MK_KERNELS(256, 128, 1, true, _g)
/* Two pipelines: 64-wide tiles of 128-byte stages only. With 64-byte stages ptxas
 * serialises the wgmma of the two row blocks (its accumulators are defined between them);
 * here it still injects a few warpgroup.arrive (ptxas info C7519; 4 a kernel with one
 * branch a stage in hp_consume, 9 with one a wgmma), a cost inside the times measured
 * (bench/NOTES.md, session 17). The runtime barrier ids (2 + pipe, 4 + pipe) reserve all
 * 16 named barriers, harmless at one CTA a multiprocessor. */
MK_KERNELS(64, 128, 2, false, _p2)

typedef void (*mk_kernel)(const imp_args, const CUtensorMap, float *, int *);
/* The tile table: [pipes - 1][variant][kb 128, 64][dgrad][f16, bf16, tf32], variant i has
 * BN = mk_bn[i]; two pipelines for BN = 64 and 128-byte stages only (mk_pipes). */
static const int mk_bn[MK_NBN] = {64, 96, 128, 256};
#define MK_DT(m, bn, kb, sfx) {k_mk_##m##_f16_##bn##_##kb##sfx, k_mk_##m##_bf16_##bn##_##kb##sfx, k_mk_##m##_tf32_##bn##_##kb##sfx}
#define MK_ROW(bn, sfx) {{MK_DT(fwd, bn, 128, sfx), MK_DT(dgrad, bn, 128, sfx)}, {MK_DT(fwd, bn, 64, sfx), MK_DT(dgrad, bn, 64, sfx)}}
static const mk_kernel mk_kernels[2][MK_NBN][2][2][3] = {{MK_ROW(64, ), MK_ROW(96, ), MK_ROW(128, ), MK_ROW(256, )},
                                                         {{{MK_DT(fwd, 64, 128, _p2), MK_DT(dgrad, 64, 128, _p2)}}}};
/* The pairs form's (BN 256): [dgrad][f16, bf16, tf32]. */
static const mk_kernel mk_pair_kernels[2][3] = {MK_DT(fwd, 256, 128, _g), MK_DT(dgrad, 256, 128, _g)};
#undef MK_ROW
#undef MK_DT

/* The shape of one call: tile width and splits of the reduction. A tuned variant fixes both
 * (variant = 1 + 16 v + nsplit - 1: BN mk_bn[v], nsplit 1..16). Otherwise the widest tile
 * the columns need (it reads the fewest bytes per product), or VOXCONV_MASKED_BN's. Splits
 * (VOXCONV_MASKED_SPLIT's, else chosen) only where a workspace can hold their partials and
 * the tiles leave multiprocessors idle: as many as one round of units a multiprocessor
 * holds, at most MK_AUTO_SPLIT (the last split of a tile reads all partials back alone),
 * each keeping MK_MIN_SPLIT_STAGES stages of a full offset set. Without splits, a grid
 * that leaves half the multiprocessors idle narrows the tile instead (a grid a little
 * short of one CTA a multiprocessor still runs fastest with the wide tile). Without a
 * workspace a variant runs unsplit. */
#define MK_VARIANT(v, nsplit) (1 + 16 * (v) + (nsplit) - 1)
/* The pairs form's variant (BN 256), past the tiles'. */
#define MK_PAIRS_VARIANT (1 + 16 * MK_NBN)
static bool mk_is_pairs(int variant) { return variant == MK_PAIRS_VARIANT; }
typedef struct mk_shape {
  int v, nsplit;
  int64_t tiles;
} mk_shape;

/* Tiles of a call with row_tiles row tiles and n_cols columns in tiles of mk_bn[v]. */
static int64_t mk_tiles(int64_t row_tiles, int64_t n_cols, int v) { return row_tiles * ((n_cols + mk_bn[v] - 1) / mk_bn[v]); }

static mk_shape mk_shape_of(const vc_cuda_state *cs, int64_t rows, int64_t n_cols, int64_t c_red, int K, int dt,
                            bool can_split, int variant) {
  mk_shape sh;
  const int64_t row_tiles = (rows + MK_BM - 1) / MK_BM;
  if (variant > 0) {
    sh.v = (variant - 1) / 16, sh.nsplit = can_split ? (variant - 1) % 16 + 1 : 1;
    sh.tiles = mk_tiles(row_tiles, n_cols, sh.v);
    return sh;
  }
  sh.v = 0;
  while (sh.v < MK_NBN - 1 && mk_bn[sh.v] < n_cols) sh.v++;
  for (int v = 0; v < MK_NBN; v++)
    if (mk_bn[v] == cs->masked_bn) sh.v = v;
  const int64_t tiles = mk_tiles(row_tiles, n_cols, sh.v);
  sh.nsplit = 1;
  if (can_split && cs->masked_split) {
    sh.nsplit = cs->masked_split;
  } else if (can_split && tiles > 0) {
    const int bk = mk_bk(dt, mk_kb(c_red, dt));
    const int64_t stages = K * ((c_red + bk - 1) / bk);
    int64_t s = cs->n_sm / tiles;
    if (s > MK_AUTO_SPLIT) s = MK_AUTO_SPLIT;
    if (s > stages / MK_MIN_SPLIT_STAGES) s = stages / MK_MIN_SPLIT_STAGES;
    sh.nsplit = s > 1 ? (int)s : 1;
  }
  if (sh.nsplit == 1 && !cs->masked_bn)
    while (sh.v > 0 && 2 * mk_tiles(row_tiles, n_cols, sh.v) <= cs->n_sm) sh.v--;
  sh.tiles = mk_tiles(row_tiles, n_cols, sh.v);
  return sh;
}

/* Pipelines a CTA (mk_body): one for maps of more than MK_GTAB offsets, always, whatever
 * VOXCONV_MASKED_PIPES says (a two-pipeline unit's gather table must hold all its offsets,
 * so that its stages read no map headers and their buffer can take the next unit's:
 * mk_tables_pre); else for 64-wide tiles of 128-byte stages (the only shape with a
 * two-pipeline kernel) VOXCONV_MASKED_PIPES's, else two where a call deals at least
 * MK_PIPES_UNITS units a multiprocessor. There a unit is short (RES 1024 of suite S, C =
 * 64: ~16 stages) and its set-up and epilogue, which wait on global loads and stores, are a
 * large share of it: with two pipelines each one's waits overlap the other's stages.
 * Measured (bench/NOTES.md, session 17): RES 1024 forward 2.00 -> 1.88 ms; with every tile
 * of at most 128 columns on two pipelines RES 512 (128-wide tiles, 3 stages a pipeline) and
 * suite L ran slower; BN 64 on two pipelines at RES 512 and 256 (session 18) 50-65 %
 * slower than their wide tiles. */
#define MK_PIPES_UNITS 64
static int mk_pipes(const vc_cuda_state *cs, int bn, int kb, int K, int64_t units) {
  if (bn != 64 || kb != 128 || K > MK_GTAB) return 1;
  if (cs->masked_pipes) return cs->masked_pipes;
  return units >= (int64_t)MK_PIPES_UNITS * cs->n_sm ? 2 : 1;
}

/* Workspace of the row tiles: tf32 dgrad's transposed weight, then partials
 * [tile][split][bn / 2][256] in fp32, then one arrival counter per tile (the pairs form: bf16's
 * second window and the join's counters alone, mk_pairs_bytes). */
static size_t mk_weight_bytes(const imp_args &q) {
  return q.mode == MODE_DGRAD && q.dt == VC_DTYPE_F32 ? (size_t)vc_round_up(q.co * q.K * q.ci * 4, 256) : 0;
}
static size_t mk_partials_bytes(const mk_shape &sh) {
  return (size_t)vc_round_up(sh.tiles * sh.nsplit * MK_BM * mk_bn[sh.v] * 4, 256);
}
static size_t mk_split_bytes(const mk_shape &sh) {
  return sh.nsplit > 1 ? mk_partials_bytes(sh) + (size_t)sh.tiles * 4 : 0;
}

/* B's tensor map. K-major (forward: the weight w[co][K][ci] as dims {ci, K, co}; the row
 * tiles' tf32 dgrad: its transpose [ci][K][co] as {co, K, ci}): box {bk, 1, bn} lands as bn
 * rows of kb bytes of reduction values, kb-byte swizzled. Other dgrads: w as {ci, K, co},
 * box {128 bytes of ci, 1, bk} lands as one 128-byte-swizzled MN-major atom, bk co rows of
 * 64 16-bit or 32 tf32 ci (the pairs form's tf32 reads it into registers). */
static vc_status mk_tensor_map(vc_context *ctx, const imp_args &q, const void *w, int bn, bool pairs, CUtensorMap *map) {
  const bool km = mk_b_kmajor(q.mode, q.dt, pairs);
  const cuuint64_t es = q.dt == VC_DTYPE_F32 ? 4 : 2;
  const cuuint64_t dims[3] = {(cuuint64_t)(km ? q.c_red : q.n_cols), (cuuint64_t)q.K,
                              (cuuint64_t)(km ? q.n_cols : q.c_red)};
  const cuuint64_t strides[2] = {dims[0] * es, dims[0] * dims[1] * es};
  const int kb = mk_kb(q.c_red, q.dt);
  const cuuint32_t box[3] = {(cuuint32_t)(km ? mk_bk(q.dt, kb) : 128 / es), 1, (cuuint32_t)(km ? bn : mk_bk(q.dt, kb))};
  return vc_cuda_tensor_map_3d(ctx, map, es == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16, w,
                               dims, strides, box, km && kb == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

vc_status vc_cuda_tensor_map_3d(vc_context *ctx, CUtensorMap *map, CUtensorMapDataType type, const void *addr,
                                const cuuint64_t dims[3], const cuuint64_t strides[2], const cuuint32_t box[3],
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2) {
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = ((PFN_cuTensorMapEncodeTiled_v12000)vc_cuda(ctx)->encode_tiled)(
      map, type, 3, (void *)addr, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return vc_fail(ctx, VC_ERR_DEVICE, "voxconv: cuTensorMapEncodeTiled failed (CUresult %d)", (int)r);
  return VC_OK;
}

/* tf32 dgrad's K-major weight: wt[ci][r][co] = w[co][r][ci] rounded to tf32, through 64 x 64
 * shared tiles (ci and co are multiples of 8, both arrays 16-byte aligned: float4 loads and
 * stores). Each thread has 4 float4 loads in flight: the 32 x 32 tiles of scalar copies
 * before ran at 2 TB/s (112 us for C = 1024, a fifth of suite S RES 16's tf32 training
 * step; bench/NOTES.md, session 18). The shared tile's accesses are 2-way bank conflicted
 * (a warp's 16 threads span 64 words), a small cost in a DRAM-bound copy. */
#define MK_TT 64
__global__ static void __launch_bounds__(256) k_mk_tf32_weight(const float *w, float *wt, int64_t co, int K, int64_t ci) {
  __shared__ float t[MK_TT][MK_TT + 1]; /* [co][ci] */
  const int r = blockIdx.z, tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t c0 = (int64_t)blockIdx.x * MK_TT, o0 = (int64_t)blockIdx.y * MK_TT;
  float4 v[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int64_t o = o0 + ty + 16 * j, c = c0 + 4 * tx;
    v[j] = o < co && c < ci ? *(const float4 *)(w + (o * K + r) * ci + c) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const float e[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t u;
      asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(e[i]));
      t[ty + 16 * j][4 * tx + i] = __uint_as_float(u);
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int64_t c = c0 + ty + 16 * j, o = o0 + 4 * tx;
    const int cl = ty + 16 * j;
    if (c < ci && o < co) /* indexed as a float4 array: a float4 cast of the float address
                           * compiled to four 4-byte stores */
      ((float4 *)(wt + (c * K + r) * co))[o / 4] =
          make_float4(t[4 * tx][cl], t[4 * tx + 1][cl], t[4 * tx + 2][cl], t[4 * tx + 3][cl]);
  }
}

/* ---- the pairs form --------------------------------------------------------------------
 * The unions of a tile's offsets cost most where few rows share them: at suite S RES 16 a
 * 64-row block multiplies 2.06 times the useful products, at RES 32 1.67 (bench/NOTES.md,
 * session 19). The pairs form multiplies each offset's pair list in tiles of 128 pairs
 * (1.11 and 1.04 times, with padding), one offset a tile, and adds every tile's products
 * into the output with 16-byte L2 reductions (red.global.add: f16 and tf32; bf16 into fp32
 * windows, mk_pairs_direct and mk_pairs_windows), the bias first (vc_cuda_fill_rows; bf16's
 * windows: k_mk_pairs_fill and mk_join_settle), then bf16's conversions. Those additions
 * come in a varying order, so it runs only outside VOXCONV_DETERMINISTIC contexts; it needs
 * 128-byte stages and more than 128 columns (its tiles are 256 wide), and takes at most 32
 * offsets (the 3x3x3 and 2x2x2 layers it was measured on). Its tiles run chunk by chunk of
 * rows (mk_ptile_of), so the reductions resolve in L2 at any size; the tuner offers it as
 * vc_cuda_masked_variants says. */

/* Bytes of the rows the pairs form adds into: the pass's output rows, in f16 (mk_pairs_direct)
 * or fp32 (bf16's launches add into at most 3 / 4 of them, mk_pairs_windows: its chunks are
 * sized as for all, which errs small). */
static int64_t mk_pairs_target_bytes(const imp_args &q) { return q.rows * q.n_cols * (mk_pairs_direct(q.dt) ? 2 : 4); }
/* They fit in half of L2. */
static bool mk_pairs_in_l2(const vc_cuda_state *cs, const imp_args &q) { return mk_pairs_target_bytes(q) <= cs->l2_bytes / 2; }

/* The pairs form's chunks (mk_ptile_of), in VC_PAIR_ROWS blocks of output rows (pblocks > 0
 * of them): one where the rows it adds into fit in half of L2 (mk_pairs_in_l2: the form's
 * first rule, measured with one chunk at suite S RES 16 and 32); else as many blocks a
 * chunk as keep one chunk's rows within a quarter of L2 (q.rows / n_out of them an output
 * row: the dgrad's written rows are the inputs; f16's rows count 2 bytes a value: at suite
 * S RES 64 its chunks of 6144 rows ran 1.9 % faster than of 3072, bench/NOTES.md, session
 * 30); VOXCONV_MASKED_PAIR_ROWS's rows instead, where set. Widened where needed so the
 * table's ceil(pblocks / g) K entries fit MK_PT_MAX. */
static int mk_pair_chunk(const vc_cuda_state *cs, const vc_plan *p, const imp_args &q, int64_t pblocks) {
  int64_t g;
  if (cs->masked_pair_rows) g = (cs->masked_pair_rows + VC_PAIR_ROWS - 1) / VC_PAIR_ROWS;
  else if (mk_pairs_in_l2(cs, q)) g = pblocks;
  else /* bytes of a block of output rows: n_out > 0 where there are blocks */
    g = (int64_t)((double)cs->l2_bytes / 4.0 / ((double)mk_pairs_target_bytes(q) / (double)p->n_out * VC_PAIR_ROWS));
  const int64_t per = MK_PT_MAX / q.K, fit = (pblocks + per - 1) / per; /* chunks <= per */
  if (g < fit) g = fit;
  if (g < 1) g = 1;
  return (int)(g < pblocks ? g : pblocks);
}

/* The tiles of 128 pairs, at most: each offset's in one piece, plus one more a chunk
 * boundary (the kernel counts them exactly). */
static int64_t mk_pair_tiles_max(const vc_plan *p, int64_t chunks) {
  int64_t t = 0;
  for (int r = 0; r < p->kvol; r++) t += (p->offsets[r + 1] - p->offsets[r] + MK_BM - 1) / MK_BM + chunks - 1;
  return t;
}

/* The call's shape suits the form: columns past 128 (its tiles are 256 wide), at most 32
 * offsets, 128-byte stages, tile numbers of 32 bits (the kernel's table; at most
 * n_pairs / 128 + one a table entry). */
static bool mk_pairs_fit(const vc_plan *p, const imp_args &q) {
  return q.n_cols > 128 && q.K <= 32 && mk_kb(q.c_red, q.dt) == 128 && p->n_pairs / MK_BM + MK_PT_MAX < INT32_MAX;
}

/* ... and the context allows it: not deterministic, not VOXCONV_MASKED_FORM=rows. */
static bool mk_pairs_apply(const vc_plan *p, const imp_args &q) {
  return !p->ctx->deterministic && vc_cuda(p->ctx)->masked_form != VC_FORM_ROWS && mk_pairs_fit(p, q);
}

/* Whether this call's variant (or VOXCONV_MASKED_FORM=pairs, without one) runs the pairs
 * form here. */
static bool mk_pairs_of(const vc_plan *p, const imp_args &q, int variant) {
  return (mk_is_pairs(variant) || (variant == 0 && vc_cuda(p->ctx)->masked_form == VC_FORM_PAIRS)) && mk_pairs_apply(p, q);
}

/* The pairs form's workspace: bf16's second window (mk_pairs_windows) and the second
 * launch's two counters after it (imp_args.join, MK_JOIN_BYTES: the workspace's 256-byte
 * rounding), none in f16 (mk_pairs_direct) and tf32 (which add into y). */
#define MK_JOIN_BYTES 256
static size_t mk_pairs_window_bytes(const imp_args &q) {
  return (size_t)vc_round_up(q.rows * mk_pairs_windows(q.n_cols).wa * 4, 256);
}
static size_t mk_pairs_bytes(const imp_args &q) {
  return q.dt == VC_DTYPE_F32 || mk_pairs_direct(q.dt) || q.rows == 0 ? 0 : mk_pairs_window_bytes(q) + MK_JOIN_BYTES;
}

/* bf16's windows (mk_pairs_windows) before the first launch: windows 1 and 2 filled with the
 * bias, a thread per four values, and the second launch's counters (join) zeroed. */
__global__ static void __launch_bounds__(256) k_mk_pairs_fill(void *y, float *ws, int *join, int64_t rows,
                                                             mk_windows w, const void *bias, int dt) {
  const int64_t c = w.w1 + w.wa + w.wb, g = (w.w1 + w.wa) / 4;
  if (blockIdx.x == 0 && threadIdx.x < 2) join[threadIdx.x] = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * g; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = i / g, j = 4 * (i % g); /* column j < w1 + wa of window 1 or 2 takes bias j */
    float *const t = j < w.w1 ? (float *)((char *)y + row * c * 2) + j : ws + row * w.wa + (j - w.w1);
    *(float4 *)t = mk_bias4(bias, dt, j);
  }
}
/* ... and after the second: a warp a row of y (2 C bytes) turns windows 2 and 3 into bf16
 * columns [w1, C). It writes over fp32 values it reads, so the warp walks its row in chunks
 * of MK_SETTLE columns, each read in full before it is written (mk_settle_chunk), descending
 * over the columns l of the two windows (l < wa: window 2's, else window 3's value l - wa):
 * chunk [l, l + S) writes over window 3's values l / 2 .. (l + S) / 2, columns wa + l / 2 ..
 * of the two, all >= l since l < wa + wb <= 2 wa: read by that chunk or an earlier one.
 * (The conversions walked in chunks of 128 columns, one load and store in flight at a time,
 * took 5-6 us a launch at suite S RES 16: latency.) */
__global__ static void __launch_bounds__(256) k_mk_pairs_settle(void *y, const float *ws, int64_t rows, mk_windows w,
                                                               int dt) {
  const int lane = threadIdx.x & 31;
  const int64_t c = w.w1 + w.wa + w.wb, n = w.wa + w.wb;
  for (int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32; row < rows; row += (int64_t)gridDim.x * 8) {
    char *const yr = (char *)y + row * c * 2;
    for (int64_t top = n; top > 0; top -= MK_SETTLE)
      mk_settle_chunk(ws + row * w.wa, w.wa, (float *)(yr + 2 * w.w1), n, (uint16_t *)yr + w.w1, top - MK_SETTLE, dt,
                      lane, MK_SETTLE_U);
  }
}

/* The pairs form's workspace window and counters (bf16 only), or the row tiles' tf32
 * dgrad's transposed weight and split partials (a bf16 pairs call without an aligned
 * workspace runs the tiles unsplit: no partials). */
size_t vc_cuda_masked_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant) {
  const imp_args q = imp_shape(p, a, pass);
  if (mk_pairs_of(p, q, variant)) return mk_pairs_bytes(q);
  return mk_weight_bytes(q) +
         mk_split_bytes(mk_shape_of(vc_cuda(p->ctx), q.rows, q.n_cols, q.c_red, q.K, q.dt, true,
                                    mk_is_pairs(variant) ? 0 : variant));
}

/* The tuner's candidates: each tile width up to the one the columns need, unsplit, and split
 * 2, 4, 8 ways and as the heuristic would, where one round of split units still fits the
 * multiprocessors and each split keeps MK_MIN_SPLIT_STAGES stages (16 at most); and the
 * pairs form where it fits, except in a deterministic context, which *restricted then
 * reports: in f16 and tf32, which add into y, at any size (its chunks keep the additions in
 * L2); in bf16 where y's rows as fp32 would take at most half of L2 (its two launches each
 * run over all the rows: measured there only, at suite S RES 16 and 32). */
extern "C" int vc_cuda_masked_variants(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int out[],
                                       bool *restricted) {
  const vc_cuda_state *cs = vc_cuda(p->ctx);
  const imp_args q = imp_shape(p, a, pass);
  const int bk = mk_bk(q.dt, mk_kb(q.c_red, q.dt));
  const int64_t row_tiles = (q.rows + MK_BM - 1) / MK_BM, stages = q.K * ((q.c_red + bk - 1) / bk);
  const int heur = mk_shape_of(cs, q.rows, q.n_cols, q.c_red, q.K, q.dt, true, 0).nsplit;
  const int splits[5] = {1, 2, 4, 8, heur};
  int n = 0;
  if (mk_pairs_fit(p, q) && (!mk_pairs_bytes(q) || mk_pairs_in_l2(cs, q))) {
    if (p->ctx->deterministic) *restricted = true;
    else out[n++] = MK_PAIRS_VARIANT;
  }
  for (int v = 0; v < MK_NBN; v++) {
    if (v > 0 && mk_bn[v - 1] >= q.n_cols) break;
    const int64_t tiles = mk_tiles(row_tiles, q.n_cols, v);
    for (int i = 0; i < 5; i++) {
      const int sp = splits[i];
      bool dup = false;
      for (int j = 0; j < i; j++) dup = dup || splits[j] == sp;
      if (dup || (sp > 1 && (tiles * sp > cs->n_sm || stages / sp < MK_MIN_SPLIT_STAGES))) continue;
      out[n++] = MK_VARIANT(v, sp); /* 16 + the pairs form <= VC_VARIANTS_MAX */
    }
  }
  return n;
}

extern "C" void vc_cuda_masked_variant_name(int variant, char buf[32]) {
  if (variant == VC_WR_PAIRS || variant == VC_WR_ROWS) snprintf(buf, 32, "%s", variant == VC_WR_ROWS ? "rows" : "pairs");
  else if (mk_is_pairs(variant)) snprintf(buf, 32, "pairs.bn256");
  else snprintf(buf, 32, "bn%d.split%d", mk_bn[(variant - 1) / 16 % MK_NBN], (variant - 1) % 16 + 1);
}

extern "C" int vc_cuda_masked_variant_parse(vc_pass pass, const char *name) {
  if (pass == VC_PASS_BACKWARD_WEIGHT) return !strcmp(name, "pairs") ? VC_WR_PAIRS : !strcmp(name, "rows") ? VC_WR_ROWS : -1;
  int bn = 0, sp = 0, end = 0;
  if (!strcmp(name, "pairs.bn256")) return MK_PAIRS_VARIANT;
  if (sscanf(name, "bn%d.split%d%n", &bn, &sp, &end) != 2 || name[end] || sp < 1 || sp > 16) return -1;
  for (int v = 0; v < MK_NBN; v++)
    if (mk_bn[v] == bn) return MK_VARIANT(v, sp);
  return -1;
}

/* The pairs form's run (see above): the bias into the rows it adds into, the tiles'
 * reductions (bf16: in two launches, the second one dependent on the first by
 * programmatic launch and settling window 1 itself, then the last conversion:
 * mk_pairs_windows). */
static vc_status mk_pairs_run(vc_context *ctx, const vc_plan *p, imp_args q, void *ws, cudaStream_t s) {
  const int bn = 256;
  __atomic_fetch_add(&vc_cuda(ctx)->pairs_runs, 1, __ATOMIC_RELAXED);
  /* the whole weight (a launch starts at its column col0), before any work: a failure here
   * leaves the output untouched */
  CUtensorMap map;
  const vc_status e = mk_tensor_map(ctx, q, q.w, bn, true, &map);
  if (e != VC_OK) return e;
  void *const y = q.out;
  const void *const bias = q.bias;
  const int64_t c = q.n_cols;
  /* no pairs (a plan without outputs, or none within reach): the bias alone, no launch */
  const int64_t pblocks = p->n_pairs > 0 ? (p->n_out + VC_PAIR_ROWS - 1) / VC_PAIR_ROWS : 0;
  int64_t chunks = 0, tiles = 0;
  if (pblocks > 0) {
    q.pair_start = vc_cuda_plan_of(p)->pair_start, q.pblocks = pblocks;
    q.pchunk = mk_pair_chunk(vc_cuda(ctx), p, q, pblocks);
    chunks = (pblocks + q.pchunk - 1) / q.pchunk;
    if (chunks * q.K > MK_PT_MAX)
      return vc_fail(ctx, VC_ERR_INTERNAL, "voxconv: the pairs form's table needs %lld entries (at most %d)",
                     (long long)(chunks * q.K), MK_PT_MAX);
    q.pentries = (int)(chunks * q.K);
    tiles = mk_pair_tiles_max(p, chunks);
  }
  __atomic_store_n(&vc_cuda(ctx)->pairs_chunks, chunks, __ATOMIC_RELAXED);
  const bool windows = tiles > 0 && mk_pairs_bytes(q) > 0; /* bf16 with pairs */
  if (!windows) vc_cuda_fill_rows(y, (vc_dtype)q.dt, q.rows, c, bias, (vc_dtype)q.dt, s);
  if (tiles == 0) {
    VC_CUDA_TRY(ctx, cudaGetLastError());
    return VC_OK;
  }
  const mk_windows wd = mk_pairs_windows(c);
  int *const join = windows ? (int *)((char *)ws + mk_pairs_window_bytes(q)) : NULL;
  /* the launches: first column, width, targets (out up to column split, then out2) */
  struct {
    int64_t c0, n, split;
    void *out, *out2;
    int64_t ld, ld2;
  } run[2] = {{0, c, c, y, NULL, c, 0}, {0, 0, 0, NULL, NULL, 0, 0}};
  int nrun = 1;
  if (windows) {
    run[0] = {0, wd.w1 + wd.wa, wd.w1, y, ws, c / 2, wd.wa};
    run[1] = {wd.w1 + wd.wa, wd.wb, wd.wb, (char *)y + 2 * wd.w1, NULL, c / 2, 0}, nrun = 2;
    k_mk_pairs_fill<<<vc_grid(q.rows * (wd.w1 + wd.wa) / 4), 256, 0, s>>>(y, (float *)ws, join, q.rows, wd, bias, q.dt);
  }
  q.bias = NULL, q.order = NULL, q.blk_mask = NULL, q.tile_order = NULL, q.nsplit = 1;
  q.join_bias = bias;
  const mk_kernel kernel = mk_pair_kernels[q.mode == MODE_DGRAD][vc_cuda_dt_index(q.dt)];
  for (int i = 0; i < nrun; i++) {
    q.col0 = (int)run[i].c0, q.n_cols = run[i].n, q.out_split = run[i].split;
    q.out = run[i].out, q.out2 = run[i].out2, q.out_ld = run[i].ld, q.out2_ld = run[i].ld2;
    q.n_tiles = (q.n_cols + bn - 1) / bn;
    q.join = i == 1 ? join : NULL;
    const int64_t units = tiles * q.n_tiles, grid = units < vc_cuda(ctx)->n_sm ? units : vc_cuda(ctx)->n_sm;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)grid), cfg.blockDim = dim3(HP_THREADS(HP_NP(bn)));
    cfg.dynamicSmemBytes = MK_SMEM(bn, 128, mk_b_kmajor(q.mode, q.dt, true)), cfg.stream = s;
    cudaLaunchAttribute dep;
    dep.id = cudaLaunchAttributeProgrammaticStreamSerialization, dep.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &dep, cfg.numAttrs = q.join ? 1 : 0; /* the second launch: mk_join_settle */
    VC_CUDA_TRY(ctx, cudaLaunchKernelEx(&cfg, kernel, q, map, (float *)NULL, (int *)NULL));
  }
  if (windows) /* windows 2 and 3 to bf16; after launch 1 too, as launch 2 ends after its wait */
    k_mk_pairs_settle<<<(unsigned)vc_blocks(q.rows < 8 * 65535 ? q.rows : 8 * 65535, 8), 256, 0, s>>>(
        y, (const float *)ws, q.rows, wd, q.dt);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

/* The calls of ctx that ran the pairs form, and the last one's chunks of rows (in no public
 * header: the GPU tests check with them that the form ran where it applies, and only there,
 * and in chunks). */
extern "C" int64_t vc_cuda_masked_pairs_runs(const vc_context *ctx) {
  return __atomic_load_n(&vc_cuda((vc_context *)ctx)->pairs_runs, __ATOMIC_RELAXED);
}
extern "C" int64_t vc_cuda_masked_pairs_chunks(const vc_context *ctx) {
  return __atomic_load_n(&vc_cuda((vc_context *)ctx)->pairs_chunks, __ATOMIC_RELAXED);
}

vc_status vc_cuda_masked_run(vc_context *ctx, const vc_plan *p, const imp_args &args, int variant, void *ws,
                             cudaStream_t s) {
  imp_args q = args;
  const vc_cuda_state *cs = vc_cuda(ctx);
  const bool ws_ok = ws && vc_aligned16(ws);
  /* the pairs form, where it applies and has its target (bf16: in an aligned workspace) */
  if (mk_pairs_of(p, q, variant) && (ws_ok || !mk_pairs_bytes(q))) return mk_pairs_run(ctx, p, q, ws, s);
  if (mk_is_pairs(variant)) variant = 0;
  const size_t wt_bytes = mk_weight_bytes(q);
  if (wt_bytes && !ws_ok) return vc_fail(ctx, VC_ERR_INTERNAL, "voxconv: tf32 masked dgrad without an aligned workspace");
  const void *w = q.w;
  if (wt_bytes) {
    const dim3 grid((unsigned)((q.ci + MK_TT - 1) / MK_TT), (unsigned)((q.co + MK_TT - 1) / MK_TT), (unsigned)q.K);
    k_mk_tf32_weight<<<grid, 256, 0, s>>>((const float *)q.w, (float *)ws, q.co, q.K, q.ci);
    w = ws;
  }
  /* the row tiles of wide or large layers: the regrouped order, where the plan has one */
  const bool big_plan = p->n_out >= VC_GROUP_LARGE_ROWS && q.c_red >= VC_GROUP_ROWS_CHANNELS;
  if (q.order && (q.c_red >= VC_GROUP_MIN_CHANNELS || big_plan)) {
    const int32_t *go;
    const uint2 *gh;
    const uint32_t *gb;
    const int32_t *gt;
    const vc_status e =
        vc_cuda_plan_groups(ctx, p, s, big_plan || q.c_red >= VC_GROUP_LARGE_CHANNELS, &go, &gh, &gb, &gt);
    if (e != VC_OK) return e;
    if (go) q.order = go, q.hdr = gh, q.blk_mask = gb, q.tile_order = gt;
  }
  const mk_shape sh = mk_shape_of(cs, q.rows, q.n_cols, q.c_red, q.K, q.dt, ws_ok, variant);
  const int bn = mk_bn[sh.v];
  CUtensorMap map;
  vc_status e = mk_tensor_map(ctx, q, w, bn, false, &map);
  if (e != VC_OK) return e;
  q.n_tiles = (q.n_cols + bn - 1) / bn;
  q.nsplit = sh.nsplit;
  float *part = NULL;
  int *cnt = NULL;
  if (sh.nsplit > 1) {
    part = (float *)((char *)ws + wt_bytes), cnt = (int *)((char *)part + mk_partials_bytes(sh));
    VC_CUDA_TRY(ctx, cudaMemsetAsync(cnt, 0, (size_t)sh.tiles * 4, s));
  }
  /* persistent: one CTA a multiprocessor, dealt units by mk_unit_at */
  const int kb = mk_kb(q.c_red, q.dt);
  const int64_t units = sh.tiles * sh.nsplit;
  const int pipes = mk_pipes(cs, bn, kb, q.K, units);
  const int64_t per_pipes = (units + pipes - 1) / pipes, grid = per_pipes < cs->n_sm ? per_pipes : cs->n_sm;
  if (!vc_cuda_tile_order_used(units, cs->n_sm)) q.tile_order = NULL;
  mk_kernels[pipes - 1][sh.v][kb == 64][q.mode == MODE_DGRAD][vc_cuda_dt_index(q.dt)]<<<
      (unsigned)grid, HP_THREADS(HP_NP(bn)), MK_SMEM(bn, kb, mk_b_kmajor(q.mode, q.dt, false)), s>>>(q, map, part, cnt);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

vc_status vc_cuda_masked_init(vc_context *ctx) {
  vc_cuda_state *st = vc_cuda(ctx);
  cudaDriverEntryPointQueryResult found;
  VC_CUDA_TRY(ctx, cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &st->encode_tiled, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !st->encode_tiled)
    return vc_fail(ctx, VC_ERR_DEVICE, "vc_context_create: the driver has no cuTensorMapEncodeTiled");
  static const int dts[3] = {VC_DTYPE_F16, VC_DTYPE_BF16, VC_DTYPE_F32}; /* vc_cuda_dt_index order */
  for (int pp = 0; pp < 2; pp++)
    for (int v = 0; v < MK_NBN; v++)
      for (int k = 0; k < 2; k++)
        for (int m = 0; m < 2; m++)
          for (int d = 0; d < 3; d++)
            if (mk_kernels[pp][v][k][m][d])
              VC_CUDA_TRY(ctx, cudaFuncSetAttribute(mk_kernels[pp][v][k][m][d], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    MK_SMEM(mk_bn[v], k ? 64 : 128, mk_b_kmajor(m ? MODE_DGRAD : MODE_FWD, dts[d], false))));
  for (int m = 0; m < 2; m++)
    for (int d = 0; d < 3; d++)
      VC_CUDA_TRY(ctx, cudaFuncSetAttribute(mk_pair_kernels[m][d], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            MK_SMEM(256, 128, mk_b_kmajor(m ? MODE_DGRAD : MODE_FWD, dts[d], true))));
  return VC_OK;
}
