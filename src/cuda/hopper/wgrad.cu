/* wgrad.cu — VC_ALGO_MASKED's weight gradient on Hopper (sm_90a), f16/bf16 and tf32 on the
 * fast path (channel counts multiple of 8, 16-byte aligned x, dy and workspace); other
 * shapes run the implicit kernel.
 *
 * dW_r[co][ci] = sum over the pairs j of offset r of dy[pout_j][co] * x[pin_j][ci]: one GEMM
 * per offset whose reduction runs over gathered rows, all offsets in one launch (the
 * offsets are the groups of a grouped GEMM). Every offset's pairs are cut into the same
 * number S of chunks, chunk c holding the pairs whose output rows lie in the same range,
 * blocks c/S .. (c+1)/S of the plan's 256-row blocks, in every offset (chunk_of); a work
 * unit is 128 output channels x BN input channels of one offset's chunk, and a CTA runs one
 * unit or, where units are short, several (wr_body); stages hold 64 pairs.
 *
 * That is the pairs form. The rows form (a tuner variant, VC_WR_ROWS) reduces instead over
 * the output rows in the plan's Gray-code order: offset r's stage is 64 consecutive rows of
 * the order (one VC_ORDER_BLOCK), their dy rows and, through the forward's map, their x
 * rows (zeros where a row has no neighbour at r); a chunk is a share of the blocks, and a
 * CTA first lists the blocks of its chunk whose block mask holds r and runs only those. It
 * reads no pair list, and the CTAs of a chunk read the same dy rows for every offset, but
 * it multiplies the zero rows of the blocks it runs.
 *
 * The units run chunk-major: the ones in flight together hold the same output rows of every
 * offset, so they read the same rows of dy and, on sites stored in a spatial order, the
 * rows of x around them; each row is read by up to K offsets, and S is chosen so that what
 * the CTAs in flight read fits in L2 (unless one chunk is enough: see wr_shape_form). (The
 * offset-major order read each row K times from DRAM: 31 % L2 hits at RES 256. Chunks as
 * equal shares of each offset's list drift apart in rows, as the offsets' pairs are spread
 * differently over the rows: 38 % hits at RES 1024, 67 % at 256; by row range 78 % and
 * 87 %.)
 *
 * The gathered rows are contiguous along the channels, so both wgmma operands are
 * MN-major: a stage row is one pair's 64 channels (128 bytes, 128-byte swizzled), and the
 * tiles are 64-channel atoms of 64 rows (tf32's A, dy, reaches the wgmma through
 * registers instead: below). The warp roles and the stage ring are ring.cuh's:
 * producer warpgroups (each taking every np-th stage) gather with cp.async (no TMA: both
 * operands are gathers), two consumer warpgroups issue m64nBNk16 wgmma over 64 output
 * channels each (one, where a layer has at most 64).
 *
 * The chunks' fp32 partials meet in one of three ways:
 *   - add: each consumer stages its fp32 tile in the (by then free) ring and one of its
 *     threads adds it into one fp32 dW with TMA bulk reduce-adds (done in L2), then a
 *     conversion; the order of the additions varies from run to run;
 *   - slices (a VOXCONV_DETERMINISTIC context): chunk c stores its partial to slice c and a
 *     second kernel adds the slices in order: bitwise repeatable, S limited by the slices'
 *     memory;
 *   - direct (one slice: S = 1): the CTA converts and stores dW itself.
 * (tf32's dW is fp32 itself: its add form adds straight into it, with no conversion.)
 *
 * The bias gradient (16-bit submanifold layers, wr_fused_sums): the units of the centre
 * offset, which pairs each row with itself, and of the first input-channel tile also add up
 * the columns of their dy tiles (ring.cuh's hp_col_sums), one partial a chunk; elsewhere
 * vc_cuda_wgrad_finish first sums the columns of dy in a pass of its own.
 *
 * tf32 (f32 storage, VC_MATH_TF32) runs bf16 wgmma on split operands: tf32 wgmma takes
 * K-major operands only, and both of the wgrad's gathered operands are MN-major. Each f32
 * value v is split into two bf16, hi = v rounded toward zero and lo = v - hi rounded (hi +
 * lo carries 16 of v's 24 bits), and dW = dy_hi x_hi + dy_hi x_lo + dy_lo x_hi. x, the B
 * operand (which wgmma reads from shared memory only), is split into the workspace a slice
 * of its columns at a time (wr_slice_width: the split stays within half of dy's bytes), one
 * launch a slice; dy, the A operand, is gathered in fp32 and split in the consumers'
 * registers as they load it (wr_consume_split), which costs no workspace and reads A once a
 * stage rather than once a product. A stage holds dy's fp32 rows and both halves of x's
 * (twice the bytes: BN <= 128, the ring holds 3 or 4 stages), and the consumers add the
 * three products into one accumulator. (Before: three launches of one product each, whose
 * partials met in an fp32 workspace, bench/NOTES.md session 18; then one launch on bf16
 * splits of both dy and x in the workspace, twice the bytes of dy, until session 38.) The
 * dropped dy_lo x_lo is below 2^-14 of a product, against tf32's 2^-10 truncation of each
 * operand; bf16's rate is twice tf32's, so the three products cost 1.5 tf32 GEMMs. */
#include "../implicit.cuh"
#include "../ptx/tma.cuh"
#include "ring.cuh"

#define WR_BM 128 /* output channels per CTA: two consumer warpgroups of 64 */
#define WR_BK 64  /* pairs (rows form: rows, one block of the order) per stage */
#if WR_BK != VC_ORDER_BLOCK
#error "the rows form's stage is one block of the order"
#endif
/* A stage: 64 pairs x 128 output channels of dy, two atoms (x3, tf32: the same pairs and
 * channels in fp32, 32 KB, wr_consume_split's layout), and x bn input channels (x3: the hi
 * atoms, then the lo ones). */
#define WR_NH(x3) ((x3) ? 2 : 1)
#define WR_A_TILE(x3) (WR_NH(x3) * 2 * HP_ATOM)
#define WR_B_TILE(bn, x3) (WR_NH(x3) * (bn) / 64 * HP_ATOM)
#define WR_STAGES(bn, x3) HP_STAGES(WR_A_TILE(x3), WR_B_TILE(bn, x3))
#define WR_SMEM(bn, x3) HP_SMEM(WR_A_TILE(x3), WR_B_TILE(bn, x3))
#define WR_MIN_CHUNK 512   /* pairs a chunk holds at least, on average over the offsets */
#define WR_UNITS_PER_SM 4  /* work units a multiprocessor at least: chunks differ in length */
#define WR_MAX_SLICES 64   /* the slices form's chunks at most, and its bytes: */
#define WR_SLICE_BYTES ((int64_t)256 << 20)
/* Pairs of an index block: 4 a producer thread (8 and 16 stages) */
#define WR_IB(np) (512 * (np))
#define WR_IB_MAX WR_IB(2)

/* Stages a unit on average, at most, for the slices and direct forms of pairs to run
 * persistent CTAs */
#define WR_PERSIST_STAGES 32

/* rows: the 64-row blocks a chunk spans at most (its list of live blocks is in shared
 * memory); the host raises S to keep within it. */
#define WR_LIVE_MAX 2048

/* How a CTA's partial leaves: added into the fp32 dW, stored as a slice, or stored as the
 * final dW in the storage dtype (one chunk: each element has one writer). */
enum { WR_SLICES, WR_ADD, WR_DIRECT };

/* v0, v1 (k and k + 1) split into bf16 hi (toward zero) and lo (v - hi, exact in fp32, then
 * rounded; 0 for an infinite v, whose v - hi is not a number), each pair packed with the
 * lower k in the low half: a finite value never rounds to infinity, and a NaN's halves are
 * NaN. The consumers of tf32's wgrad split dy with it, k_wr_split x. */
__device__ static __forceinline__ void wr_split2(float v0, float v1, uint32_t &hi, uint32_t &lo) {
  asm("cvt.rz.bf16x2.f32 %0, %1, %2;\n" : "=r"(hi) : "f"(v1), "f"(v0));
  /* hi as fp32: v's top 16 bits (what rounding toward zero keeps, a NaN aside) */
  const float l0 = isinf(v0) ? 0.0f : v0 - __uint_as_float(__float_as_uint(v0) & 0xffff0000u);
  const float l1 = isinf(v1) ? 0.0f : v1 - __uint_as_float(__float_as_uint(v1) & 0xffff0000u);
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lo) : "f"(l1), "f"(l0));
}

#ifdef VC_SM90A
/* rows: live[] = the blocks b0 .. b1 - 1 (of 64 rows of the order) that meet offset r,
 * ascending; returns their count. Every thread of the CTA calls it (cnt: a word a warp);
 * b1 - b0 <= WR_LIVE_MAX. */
__device__ static __forceinline__ int wr_live_blocks(const imp_args &p, int r, int64_t b0, int64_t b1, int32_t *live,
                                                     int *cnt) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5, W = (p.K + 31) / 32;
  int total = 0;
  for (int64_t base = b0; base < b1; base += blockDim.x) {
    const int64_t b = base + tid;
    const bool on = b < b1 && (!p.blk_mask || (p.blk_mask[b * W + r / 32] >> (r % 32) & 1u));
    const uint32_t bal = __ballot_sync(~0u, on);
    if (lane == 0) cnt[warp] = __popc(bal);
    __syncthreads();
    int before = total;
    for (int w = 0; w < nw; w++) before += w < warp ? cnt[w] : 0, total += cnt[w];
    if (on) live[before + __popc(bal & ((1u << lane) - 1))] = (int32_t)b;
    __syncthreads(); /* cnt is rewritten next round; live is read after the last */
  }
  return total;
}

/* The (dy row, x row) of index-block entries pos0, pos0 + pt, .. (4 a thread) into no, ni;
 * (-1, -1): a zero row pair. Pairs: entry j0 + pos of offset r's lists (sel: imp_sel; j0
 * and j1 numbered as they store the pairs), up to j1. Rows:
 * entry pos is row pos % 64 of live block pos / 64 (the order's row m, when inside; its
 * input row through offset r, when it has one). */
__device__ static __forceinline__ void wr_fetch(const imp_args &p, const bool rows, const int r, const int sel,
                                                const int64_t j0, const int64_t j1, const int32_t *live,
                                                const int n_it, const int64_t pos0, const int pt, int32_t *no,
                                                int32_t *ni) {
  if (!rows) {
    IMP_WITH_LISTS(p, sel, lo, li, {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int64_t j = j0 + pos0 + (int64_t)pt * e;
        no[e] = j < j1 ? vc_list_row(lo, j) : -1;
        ni[e] = j < j1 ? vc_list_row(li, j) : -1;
      }
    });
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; e++) { /* the order's rows and their map headers, then the entries */
    const int64_t pos = pos0 + (int64_t)pt * e, ls = pos / WR_BK;
    const int64_t m = ls < n_it ? (int64_t)live[ls] * WR_BK + pos % WR_BK : p.rows;
    no[e] = order_row(p, m);
    ni[e] = map_at(p, m, r);
  }
#pragma unroll
  for (int e = 0; e < 4; e++) no[e] = ni[e] >= 0 ? no[e] : -1;
}
#endif

/* Work units: (offset, chunk, tile). Unit positions run tile-fastest (consecutive units
 * read the same gathered rows), then over the offsets of a chunk, then over the chunks;
 * within a chunk the offsets come longest first (with K <= WR_RANK_MAX: rk holds them
 * ranked by their whole lists' pair counts, warp 0's wr_rank_offsets, which a chunk's
 * shares and the rows form's live blocks follow roughly), so the longest units start
 * first. */
#define WR_RANK_MAX 32
typedef struct wr_unit {
  int r, n_it, sel; /* sel, j0, j1: the pairs form's lists and range (as wr_fetch takes them) */
  int64_t chunk, j0, j1, m0, n0;
  bool co2; /* the tile's output channels reach its second 64 */
} wr_unit;

#ifdef VC_SM90A
/* rk[i] = the offset with the i-th most pairs (ties by index); K <= 32, warp 0 calls it. */
__device__ static __forceinline__ void wr_rank_offsets(const imp_args &p, uint8_t *rk) {
  const int lane = threadIdx.x & 31;
  const int64_t len = lane < p.K ? p.offsets[lane + 1] - p.offsets[lane] : -1;
  int rank = 0;
  for (int o = 0; o < p.K; o++) {
    const int64_t lo = __shfl_sync(~0u, len, o);
    rank += lo > len || (lo == len && o < lane);
  }
  if (lane < p.K) rk[rank] = (uint8_t)lane;
}

/* Unit `pos`'s offset, chunk, pair range (pairs) and stages. Rows: the CTA runs one unit,
 * whose live blocks the whole CTA listed first (rows_n_it of them). */
__device__ static __forceinline__ wr_unit wr_unit_at(const imp_args &p, int64_t pos, int n_ci_t, int n_co_t, int bn,
                                                     const uint8_t *rk, bool rows, int rows_n_it) {
  wr_unit u;
  const int nt = (int)(pos % n_ci_t);
  pos /= n_ci_t;
  const int ct = (int)(pos % n_co_t);
  pos /= n_co_t;
  const int rr = (int)(pos % p.K);
  u.chunk = pos / p.K;
  u.r = p.K <= WR_RANK_MAX ? rk[rr] : rr;
  if (rows) {
    const int64_t nb = (p.rows + WR_BK - 1) / WR_BK;
    u.j0 = u.chunk * nb / p.nsplit, u.j1 = (u.chunk + 1) * nb / p.nsplit; /* blocks of 64 rows */
    u.n_it = rows_n_it, u.sel = IMP_OWN;
  } else {
    chunk_range(p, u.r, u.chunk, &u.j0, &u.j1);
    u.n_it = (int)((u.j1 - u.j0 + WR_BK - 1) / WR_BK);
    u.sel = imp_stored_range(p, u.r, &u.j0, &u.j1);
  }
  u.m0 = (int64_t)ct * WR_BM, u.n0 = (int64_t)nt * bn;
  u.co2 = p.co - u.m0 > 64;
  return u;
}

/* The bias gradient's partials of a unit of the offset `centre` (wr_body: chunk `chunk`,
 * this consumer warpgroup's output channels c0 .. c0 + 63): cs as hp_col_sums left it
 * (fp32), to row `chunk` of col_sums [S][co], widened to fp64. Every row and channel has one writer: the
 * offset's pairs are each row once, and its chunks and channel tiles cover the rows and
 * channels once. */
__device__ static __forceinline__ void wr_col_store(const imp_args &p, double *col_sums, const float *cs, int64_t chunk,
                                                    int64_t c0) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  if ((lane & 3) == 0)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t c = c0 + 16 * warp + 8 * h + (lane >> 2);
      if (c < p.co) col_sums[chunk * p.co + c] = cs[2 * h];
    }
}

/* The position of a CTA's i-th unit, or -1 past its last (as in masked.cu's mk_unit_at:
 * hp_deal over the CTAs, reversed every other round, so with the units longest first the
 * CTAs' totals stay close; a round that passes the unit count is the CTA's last). */
__device__ static __forceinline__ int64_t wr_pos(int64_t i, int64_t units) {
  const int64_t u = hp_deal(i, gridDim.x, blockIdx.x, true);
  return u < units ? u : -1;
}

/* A consumer warpgroup's fragment row 16 w + g + 8 h (warp w, g = lane / 4) is this output
 * channel of its 64: in order, or with tf32's A from registers (wr_consume_split) paired so
 * that a thread's two rows are adjacent channels. */
__device__ static __forceinline__ int wr_co_row(bool x3, int warp, int lane, int h) {
  return 16 * warp + (x3 ? 2 * (lane >> 2) + h : (lane >> 2) + 8 * h);
}

/* tf32's consumer loop (x3): acc += dy_hi x_hi + dy_hi x_lo + dy_lo x_hi over n_it stages,
 * A (dy) from registers, B (x's hi tile, and its lo tile b_lo bytes further) MN-major in
 * the stage, as the producers copied it from the workspace's split. A stage's A tile is the
 * gathered dy rows in fp32: consumer cw's 64 output channels of pair k are 256 bytes at cw *
 * 16384 + 256 k, their 16-byte chunk j (4 channels) at chunk j ^ (k % 8). Each thread loads
 * its 8 values of a K step kk (rows 2 t + e + 8 v + 16 kk, t = lane % 4, of the two
 * channels of its fragment rows: wr_co_row) with 8-byte ld.shared, splits them (wr_split2)
 * and issues the step's three m64nbnk16 products as one wgmma group; the next step's loads
 * are issued before this step's splits. A warp's load of one (kk, v, e) meets 4 rows of 4
 * chunks; the XOR by k % 8 = 2 t + e puts two rows on each half of the banks: 2 wavefronts
 * for 256 bytes, no conflict. One group in flight: a step's registers are rewritten only
 * after the group that read them has retired, and a slot goes back once its last group has
 * (as masked.cu's mk_consume_swapped). A group a step was 2.5 % faster than one a half
 * stage (bench/NOTES.md, session 38). Reading dy's fp32 rows here, rather than a bf16 split
 * of dy from the workspace as B is, costs no workspace and one read of A a stage instead of
 * three, but ~45 instructions a thread a K step (the split's share of the kernel: 12 % at
 * suite S RES 64). idle: the warpgroup has no channels (wr_body); it only waits for and
 * hands back the slots. */
__device__ static __forceinline__ void wr_consume_split(float *acc, const hp_ring &r, hp_pos &pos, int n_it, int st,
                                                        int a_tile, int b_tile, int cw, int bn, uint32_t b_lo,
                                                        bool idle) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int j = 4 * warp + (g >> 1); /* the chunk of the thread's two channels (16 w + 2 g, + 1) */
  const uint32_t a0 = r.a + (uint32_t)cw * 16384u + (uint32_t)(g & 1) * 8u + (uint32_t)(2 * t) * 256u;
  const uint32_t sw0 = (uint32_t)((j ^ (2 * t)) << 4), sw1 = (uint32_t)((j ^ (2 * t + 1)) << 4); /* e = 0, 1 */
  const uint64_t db0 = vc_wgmma_desc_mn(r.b, 64 * 128);
  int s = pos.s, phase = pos.phase, prev = -1;
  for (int it = 0; it < n_it; it++) {
    vc_mbar_wait(r.full + 8 * s, phase);
    if (idle) {
      hp_slot_back(r, s);
      if (++s == st) s = 0, phase ^= 1;
      continue;
    }
    vc_fence_proxy_async(); /* the cp.async (generic proxy) writes of B, seen here, to wgmma */
    const uint32_t as = a0 + (uint32_t)(s * a_tile);
    const uint64_t db = db0 + (uint32_t)(s * b_tile >> 4);
    float v[2][2][2][2]; /* K steps kk (even, odd): [v][e][row h] */
#pragma unroll
    for (int kk = 0; kk < 5; kk++) {
      /* K step kk's values are loaded while step kk - 1's are split */
      if (kk < 4)
#pragma unroll
        for (int vv = 0; vv < 2; vv++)
#pragma unroll
          for (int e = 0; e < 2; e++)
            asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
                         : "=f"(v[kk & 1][vv][e][0]), "=f"(v[kk & 1][vv][e][1])
                         : "r"(as + (uint32_t)(16 * kk + 8 * vv + e) * 256u + (e ? sw1 : sw0))
                         : "memory");
      if (kk == 0) continue;
      const int k = kk - 1;
      uint32_t hi[4], lo[4];
#pragma unroll
      for (int vv = 0; vv < 2; vv++)
#pragma unroll
        for (int h = 0; h < 2; h++) wr_split2(v[k & 1][vv][0][h], v[k & 1][vv][1][h], hi[2 * vv + h], lo[2 * vv + h]);
      vc_wgmma_fence();
      const uint64_t dk = db + (uint32_t)(k * (2048 >> 4));
      if (bn == 64) {
        vc_wgmma_n64_bf16_rmn(acc, hi, dk);
        vc_wgmma_n64_bf16_rmn(acc, hi, dk + (b_lo >> 4));
        vc_wgmma_n64_bf16_rmn(acc, lo, dk);
      } else {
        vc_wgmma_n128_bf16_rmn(acc, hi, dk);
        vc_wgmma_n128_bf16_rmn(acc, hi, dk + (b_lo >> 4));
        vc_wgmma_n128_bf16_rmn(acc, lo, dk);
      }
      hp_group_retire(r, prev, k == 0);
    }
    prev = s;
    if (++s == st) s = 0, phase ^= 1;
  }
  hp_walk_end(acc, bn / 2, r, prev, s, phase, pos);
}
#endif

/* p: a_src = dy, b_src = x (x3: the hi rows of x's split slice, b_lo its lo rows), K, ci
 * (this launch's input channels: dW's columns col0 .. col0 + ci - 1 of out_ld), co, nsplit
 * (S, the chunks of each offset); pairs: pin/pout/offsets; rows: rows (the output rows),
 * order, blk_mask, hdr and nbl (the forward's map). out, by form: WR_ADD the fp32 dW
 * [co][K][out_ld] (zeroed; dmap its tensor map, wr_dw_map), WR_SLICES the fp32 slices
 * [S][co][K][out_ld] (chunk c: slice c), WR_DIRECT dW itself (dtype dt, fp32 with x3). dt: the
 * wgmma's type (bf16 with x3). col_sums: NULL, or the bias gradient's partials [S][co]
 * (fp64) that the units of offset `centre` add up as well (wr_fused_sums, wr_col_store).
 *
 * A CTA runs units wr_pos(0), wr_pos(1), ... Where units are short, the slices and direct
 * forms of pairs launch one CTA a multiprocessor, which carries its ring from unit to unit
 * (the producers gather the next unit's stages while the consumers store the last one's
 * tile); elsewhere, and always for the add form (whose epilogue stages its tile in the
 * ring) and the rows form (whose live list the whole CTA builds), one CTA a unit. */
__device__ static __forceinline__ void wr_body(const imp_args &p, const CUtensorMap *dmap, void *out, const int form,
                                               double *col_sums, const int centre, const int dt, const int bn,
                                               const int np, const bool rows, const bool x3) {
#ifdef VC_SM90A
  const int st = WR_STAGES(bn, x3), pt = 128 * np, nh = WR_NH(x3);
  const int a_tile = WR_A_TILE(x3), b_tile = WR_B_TILE(bn, x3);
  const int b_half = WR_B_TILE(bn, false); /* where a stage's lo half of x begins */
  extern __shared__ __align__(16) uint8_t wr_smem[];
  __shared__ int32_t wr_idx[2][2][WR_IB_MAX]; /* the producers' pair indices: [block half][pout, pin] */
  __shared__ int32_t wr_live[WR_LIVE_MAX];    /* rows: the chunk's blocks that meet the offset */
  __shared__ int wr_cnt[HP_THREADS(2) / 32];
  __shared__ uint8_t wr_rk[WR_RANK_MAX];
  const int n_ci_t = (int)((p.ci + bn - 1) / bn), n_co_t = (int)((p.co + WR_BM - 1) / WR_BM);
  const int64_t units = (int64_t)n_ci_t * n_co_t * p.K * p.nsplit;
  if (threadIdx.x < 32 && p.K <= WR_RANK_MAX) wr_rank_offsets(p, wr_rk);
  __syncthreads();
  int rows_n_it = 0;
  if (rows) {
    const wr_unit u = wr_unit_at(p, wr_pos(0, units), n_ci_t, n_co_t, bn, wr_rk, true, 0);
    rows_n_it = wr_live_blocks(p, u.r, u.j0, u.j1, wr_live, wr_cnt);
  }

  /* Layers of at most 64 output channels (one tile of them, its second 64 empty): consumer 1
   * has no rows to multiply and leaves at once, so it neither waits for nor hands back the
   * slots (its warps' waits and hand-backs were 11 % of the C = 64 wgrad's instructions, 0.7 %
   * of its time; bench/NOTES.md, session 34). */
  const bool solo = p.co <= 64;
  /* full: one warpgroup's cp.async arrivals; empty: the consumers' warps that read a slot */
  const hp_ring ring = hp_ring_init(wr_smem, st, a_tile, b_tile, 128, solo ? 4 : 8);
  const uint32_t sA = ring.a, sB = ring.b, full = ring.full, empty = ring.empty;
  const int wg = hp_warpgroup();
  /* dW's row: K x out_ld values; this launch's input channels are its columns col0 .. col0 + ci - 1 */
  const int64_t kci = (int64_t)p.K * p.out_ld;

  if (wg < np) { /* ---- producers ---- */
    hp_producer_regs();
    /* Each producer warpgroup issues every np-th stage of the CTA, alone (as in masked.cu:
     * the producers are issue-bound, and a stage's fixed costs then fall on 4 warps, not 8);
     * thread gt of its warpgroup: 16-byte chunk q of every atom, pair rows k0 + 16 h of its
     * stages (tf32's fp32 dy: chunk q16 of each consumer's 256-byte row, pair rows r16 + 8 h,
     * so that a half-warp copies a row's 256 contiguous bytes: with chunks q and q + 8 of
     * rows k0 + 16 h the kernel ran 5 % slower, with chunks 2 q and 2 q + 1 each copy read
     * half of every sector it touched). */
    const int tid = threadIdx.x, grp = np == 1 ? 0 : wg, gt = tid & 127, q = gt & 7, k0 = gt >> 3;
    const int q16 = gt & 15, r16 = gt >> 4; /* x3: dy's fp32 rows, 16 chunks a consumer */
    const char *dy = (const char *)p.a_src, *x = (const char *)p.b_src;
    const char *x_lo = (const char *)p.b_lo;
    /* bytes of a row: dy's (fp32 with x3: wr_consume_split splits it) and x's */
    const uint32_t dy_pitch = (uint32_t)(p.co * (x3 ? 4 : 2)), x_pitch = (uint32_t)(p.ci * 2);
    const int ib = WR_IB(np), sb = ib / WR_BK; /* pairs and stages of an index block */
    int64_t gs = 0;                            /* the CTA's stages before this unit */
    for (int64_t i = 0, upos; (!rows || i < 1) && (upos = wr_pos(i, units)) >= 0; i++) { /* rows: one unit */
      const wr_unit u = wr_unit_at(p, upos, n_ci_t, n_co_t, bn, wr_rk, rows, rows_n_it);
      const int n_it = u.n_it;
      if (form == WR_ADD && n_it == 0) continue; /* nothing to add */
      /* A thread's channels are the same in every stage of a unit: their byte offsets
       * within a row and range checks are set once, and a row's source is one 32 x 32 ->
       * 64-bit multiply-add (the producers are issue-bound). Columns past the channels copy
       * 0 bytes from the row's first. */
      const int dq = x3 ? q16 * 4 : q * 8; /* the first of dy's channels the thread copies */
      const uint32_t dy_off = (uint32_t)((u.m0 + dq) * (x3 ? 4 : 2)), x_off = (uint32_t)(u.n0 + 8 * q) * 2;
      const int co_left = (int)(p.co - (u.m0 + dq)), ci_left = (int)(p.ci - (u.n0 + 8 * q)); /* channels from there on */
      /* The pair indices reach the copies through shared memory, in blocks of WR_IB pairs
       * (8 or 16 stages) double-buffered: a block is loaded into registers (coalesced)
       * a whole block ahead and stored when its stages begin, so no global load latency
       * sits between a slot becoming free and its copies being issued (loading each
       * stage's indices a few stages ahead left the producers waiting on them: ncu, L1TEX
       * scoreboard). A unit after one with stages (gs > 0) waits first for every producer
       * to have left the previous one's blocks. */
      int32_t no[4], ni[4]; /* the next block: 4 pairs a thread */
      wr_fetch(p, rows, u.r, u.sel, u.j0, u.j1, wr_live, n_it, tid, pt, no, ni);
      if (gs > 0) vc_named_barrier(2, pt);
#pragma unroll
      for (int e = 0; e < 4; e++) wr_idx[0][0][tid + pt * e] = no[e], wr_idx[0][1][tid + pt * e] = ni[e];
      wr_fetch(p, rows, u.r, u.sel, u.j0, u.j1, wr_live, n_it, ib + tid, pt, no, ni);
      vc_named_barrier(2, pt);
      /* this warpgroup's stages: the CTA's stages gs + it with (gs + it) % np == grp; sb is a
       * multiple of np, so every block's stages alternate the same way */
      const int first = (int)(((grp - gs) % np + np) % np);
      /* its next stage's number in the CTA, slot and phase: stepped by np (np < st), so no
       * 64-bit division a stage */
      int64_t g = gs + first;
      int s = (int)(g % st), phase = (int)(g / st) & 1;
      for (int blk = 0; blk * sb < n_it; blk++) {
        const int half = blk & 1;
        if (blk > 0) {
          /* block blk begins: its half was last read in block blk - 2 (block 1: in the
           * previous unit, left before the barrier that began this one), which every
           * producer left before the barrier that began block blk - 1 */
#pragma unroll
          for (int e = 0; e < 4; e++) {
            wr_idx[half][0][tid + pt * e] = no[e];
            wr_idx[half][1][tid + pt * e] = ni[e];
          }
          vc_named_barrier(2, pt);
          wr_fetch(p, rows, u.r, u.sel, u.j0, u.j1, wr_live, n_it, (int64_t)(blk + 1) * ib + tid, pt, no, ni);
        }
        for (int it = blk * sb + first; it < min(n_it, (blk + 1) * sb); it += np) {
          const int kb = it - blk * sb;
          if (g >= st) vc_mbar_wait(empty + 8 * s, phase ^ 1);
          if (x3) {
            /* dy in fp32 (wr_consume_split's layout): 16-byte chunk q16 of each consumer's 256
             * bytes of rows r16 + 8 h, a row's 256 bytes one half-warp's copy */
#pragma unroll
            for (int h = 0; h < 8; h++) {
              const int row = r16 + 8 * h;
              const int32_t o = wr_idx[half][0][kb * WR_BK + row];
              const uint64_t o_at = (uint64_t)(uint32_t)max(o, 0) * dy_pitch;
#pragma unroll
              for (int w = 0; w < 2; w++)
                if (w == 0 || u.co2) /* a tile of 64 output channels: the second consumer's rows are not read */
                  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                                   sA + s * a_tile + w * 16384 + row * 256 + ((q16 ^ r16) << 4)),
                               "l"(dy + o_at + (64 * w < co_left ? dy_off + 256 * w : 0)),
                               "r"(o >= 0 && 64 * w < co_left ? 16 : 0));
            }
          }
          int32_t o4[4], i4[4];
#pragma unroll
          for (int h = 0; h < 4; h++) {
            if (!x3) o4[h] = wr_idx[half][0][kb * WR_BK + k0 + 16 * h];
            i4[h] = wr_idx[half][1][kb * WR_BK + k0 + 16 * h];
          }
#pragma unroll
          for (int h = 0; h < 4; h++) {
            const uint32_t off = vc_sw(128, k0 + 16 * h, q);
            const bool valid = i4[h] >= 0; /* pairs past the chunk arrive as (-1, -1): zero rows */
            const uint64_t i_at = (uint64_t)(uint32_t)max(i4[h], 0) * x_pitch;
            if (!x3) {
              const uint64_t o_at = (uint64_t)(uint32_t)max(o4[h], 0) * dy_pitch;
#pragma unroll
              for (int w = 0; w < 2; w++)
                if (w == 0 || u.co2) /* a tile of 64 output channels: the second atom is not read */
                  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sA + s * a_tile + w * HP_ATOM + off),
                               "l"(dy + o_at + (64 * w < co_left ? dy_off + 128 * w : 0)),
                               "r"(valid && 64 * w < co_left ? 16 : 0));
            }
#pragma unroll
            for (int e = 0; e < nh; e++) { /* x's hi (or only) half, then the lo */
#pragma unroll
              for (int v = 0; v < bn / 64; v++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                                 sB + s * b_tile + e * b_half + v * HP_ATOM + off),
                             "l"((e ? x_lo : x) + i_at + (64 * v < ci_left ? x_off + 128 * v : 0)),
                             "r"(valid && 64 * v < ci_left ? 16 : 0));
            }
          }
          vc_mbar_arrive_cp_async(full + 8 * s);
          g += np;
          if ((s += np) >= st) s -= st, phase ^= 1;
        }
      }
      gs += n_it;
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else { /* ---- consumers ---- */
    hp_consumer_regs(np);
    const int cw = wg - np, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    if (solo && cw == 1) return;
    hp_pos pos = {0, 0};
    for (int64_t i = 0, upos; (!rows || i < 1) && (upos = wr_pos(i, units)) >= 0; i++) { /* rows: one unit */
      const wr_unit u = wr_unit_at(p, upos, n_ci_t, n_co_t, bn, wr_rk, rows, rows_n_it);
      /* Consumer 1 of a tile whose output channels end within its first 64 (the last tile
       * where co % 128 is 1 to 64 and co > 128, e.g. 160 or 192) skips every wgmma
       * (hp_consume: one offset, never live, that never ends; wr_consume_split: idle): its
       * rows are zeros. */
      const bool idle = cw == 1 && !u.co2;
      /* The bias gradient (col_sums): the units of the offset that pairs each row with
       * itself (centre), first input-channel tile, also add up their dy tiles. */
      const bool sums = !x3 && col_sums && u.r == centre && u.n0 == 0 && !idle;
      float cs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (form == WR_ADD && u.n_it == 0) {
        if (sums) wr_col_store(p, col_sums, cs, u.chunk, u.m0 + 64 * cw);
        continue;
      }
      const int64_t m0 = u.m0, n0 = u.n0;
      float acc[128];
#pragma unroll
      for (int j = 0; j < bn / 2; j++) acc[j] = 0.0f;
      const uint32_t never = 0u;
      if (x3) wr_consume_split(acc, ring, pos, u.n_it, st, a_tile, b_tile, cw, bn, (uint32_t)b_half, idle);
      else
        hp_consume(acc, ring, pos, u.n_it, st, a_tile, b_tile, 128, cw * HP_ATOM, bn, dt, HP_MNMN, idle ? 1u : 0u,
                   &never, 1, idle ? 1 << 30 : 1, 0, sums, cs, cw);
      if (sums) wr_col_store(p, col_sums, cs, u.chunk, m0 + 64 * cw);
      /* the fragment: row = output channel (wr_co_row), column = input channel (of the launch's, from col0) */
      if (form == WR_ADD) {
        /* The tile goes through shared memory (the ring: free once both consumers' wgmma
         * have retired, as this form's CTAs run one unit) as bn / 32 boxes of 64 rows x 32
         * columns, 128-byte swizzled (a thread's two columns are 8 bytes of one 16-byte
         * chunk); then one thread a consumer adds them to dW with TMA bulk reduce-adds,
         * which skip the columns and rows past the tensor's ends. Red.v2 from registers was
         * one 8-byte L2 reduction a thread per column pair and row. */
        vc_named_barrier(3, solo ? 128 : 256);
        const uint32_t stg = sA + cw * bn * 256;
#pragma unroll
        for (int j = 0; j < bn / 8; j++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int row = wr_co_row(x3, warp, lane, h);
            const uint32_t at = stg + j / 4 * 8192 + vc_sw(128, row, 2 * (j % 4) + ((lane & 3) >> 1)) + (lane & 1) * 8;
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(acc[4 * j + 2 * h]),
                         "f"(acc[4 * j + 2 * h + 1])
                         : "memory");
          }
        vc_fence_proxy_async(); /* the stores (generic proxy), seen by the bulk copies */
        if (cw == 0) vc_named_barrier(4, 128); /* constant ids: ptxas then reserves 6 barriers, not 16 */
        else vc_named_barrier(5, 128);
        if ((threadIdx.x & 127) == 0 && m0 + 64 * cw < p.co) {
          for (int b = 0; b < bn / 32 && n0 + 32 * b < p.ci; b++)
            vc_tma_reduce_add_3d(dmap, (int)n0 + p.col0 + 32 * b, u.r, (int)m0 + 64 * cw, stg + b * 8192);
          vc_bulk_commit_wait_read();
        }
      } else if (form == WR_DIRECT && !x3) {
        /* 16-bit dW. The four lanes of a quad hold 2-column pieces of each 8-column group of
         * the same rows; a 4 x 4 transpose across them (hp_quad_transpose) gives each lane 8
         * consecutive columns, one 16-byte store, so a row's 64 bytes leave in one L2
         * request. (4-byte stores from the fragment were 8 one-sector requests a warp
         * store: the L2's request rate bound the kernel, 104 against 69 us at suite S RES
         * 16; bench/NOTES.md, session 25.)
         * ci % 8 == 0: a lane's 8 columns are all inside or all past the end. */
        const int64_t base = (int64_t)u.r * p.out_ld + p.col0;
        const int q4 = lane & 3;
#pragma unroll
        for (int g = 0; g < bn / 32; g++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            uint32_t w[4];
#pragma unroll
            for (int jj = 0; jj < 4; jj++)
              w[jj] = vc_pack2(dt, acc[4 * (4 * g + jj) + 2 * h], acc[4 * (4 * g + jj) + 2 * h + 1]);
            hp_quad_transpose(w, q4);
            const int64_t co = m0 + cw * 64 + wr_co_row(false, warp, lane, h), ci = n0 + 32 * g + 8 * q4;
            if (co < p.co && ci < p.ci)
              *(uint4 *)((uint16_t *)out + base + co * kci + ci) = make_uint4(w[0], w[1], w[2], w[3]);
          }
      } else {
        /* fp32: the slice's, or dW's, offset r. Lanes q and q ^ 1 swap a column pair of the
         * fragment's 8-column groups 2 g and 2 g + 1, so an even lane holds 4 consecutive
         * columns of group 2 g and an odd one of group 2 g + 1: 16-byte stores, a row's 64
         * bytes in one request (as above). */
        const int64_t base = (form == WR_DIRECT ? 0 : u.chunk * p.co * kci) + (int64_t)u.r * p.out_ld + p.col0;
        const int q4 = lane & 3, odd = q4 & 1;
#pragma unroll
        for (int g = 0; g < bn / 16; g++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const float a0 = acc[8 * g + 2 * h], a1 = acc[8 * g + 2 * h + 1]; /* column 16 g + 2 q4, + 1 */
            const float b0 = acc[8 * g + 4 + 2 * h], b1 = acc[8 * g + 4 + 2 * h + 1]; /* 16 g + 8 + 2 q4, + 1 */
            const float r0 = __shfl_xor_sync(~0u, odd ? a0 : b0, 1), r1 = __shfl_xor_sync(~0u, odd ? a1 : b1, 1);
            const int64_t co = m0 + cw * 64 + wr_co_row(x3, warp, lane, h);
            const int64_t ci = n0 + 16 * g + 8 * odd + 2 * (q4 & 2); /* even: 16 g + 2 q4; odd: 16 g + 8 + 2 (q4 - 1) */
            if (co < p.co && ci < p.ci) /* ci % 8 == 0: the 4 columns are all inside or all past the end */
              *(float4 *)((float *)out + base + co * kci + ci) =
                  odd ? make_float4(r0, r1, b0, b1) : make_float4(a0, a1, r0, r1);
          }
      }
    }
  }
#else
  __trap();
#endif
}

#define WR_KERNEL(name, dt, bn, rows, x3)                                                                        \
  __global__ void __launch_bounds__(HP_THREADS(HP_NP(bn)), 1)                                                     \
      name(const imp_args p, const __grid_constant__ CUtensorMap dmap, void *out, int form, double *col_sums,       \
           int centre) {                                                                                          \
    wr_body(p, &dmap, out, form, col_sums, centre, dt, bn, HP_NP(bn), rows, x3);                                    \
  }
/* a form's eight kernels: f16 and bf16 at each tile width, tf32 (split operands) at 64 and
 * 128 */
#define WR_KERNELS(form, rows)                                                                                   \
  WR_KERNEL(k_wr##form##f16_64, VC_DTYPE_F16, 64, rows, false)                                                    \
  WR_KERNEL(k_wr##form##bf16_64, VC_DTYPE_BF16, 64, rows, false)                                                  \
  WR_KERNEL(k_wr##form##tf32_64, VC_DTYPE_BF16, 64, rows, true)                                                   \
  WR_KERNEL(k_wr##form##f16_128, VC_DTYPE_F16, 128, rows, false)                                                  \
  WR_KERNEL(k_wr##form##bf16_128, VC_DTYPE_BF16, 128, rows, false)                                                \
  WR_KERNEL(k_wr##form##tf32_128, VC_DTYPE_BF16, 128, rows, true)                                                 \
  WR_KERNEL(k_wr##form##f16_256, VC_DTYPE_F16, 256, rows, false)                                                  \
  WR_KERNEL(k_wr##form##bf16_256, VC_DTYPE_BF16, 256, rows, false)
WR_KERNELS(_, false)
WR_KERNELS(_rows_, true)

typedef void (*wr_kernel)(const imp_args, const CUtensorMap, void *, int, double *, int);
static const int wr_bn[3] = {64, 128, 256};
/* [pairs, rows][tile width][f16, bf16, tf32]; no 256-wide tf32 (its stage would be 96 KB:
 * two in the ring) */
#define WR_ROW(f, bn) {k_wr##f##f16_##bn, k_wr##f##bf16_##bn, k_wr##f##tf32_##bn}
static const wr_kernel wr_kernels[2][3][3] = {{WR_ROW(_, 64), WR_ROW(_, 128), {k_wr_f16_256, k_wr_bf16_256, NULL}},
                                              {WR_ROW(_rows_, 64), WR_ROW(_rows_, 128),
                                               {k_wr_rows_f16_256, k_wr_rows_bf16_256, NULL}}};
#undef WR_ROW

/* The form (pairs or rows: VOXCONV_MASKED_WGRAD's, else the variant's, else pairs), the
 * tile width (VOXCONV_MASKED_BN's, else from the input channels; tf32 at most 128), S and
 * how the partials meet. S (VOXCONV_MASKED_SPLIT's, else chosen): WR_UNITS_PER_SM work
 * units a multiprocessor, and enough chunks that the rows the CTAs in flight read (their chunk
 * positions' share of x and dy, plus one more position: the x rows around a chunk's, and
 * the CTAs finishing the previous one) fill at most half of L2 (a quarter, all and twice
 * it measured no better, bench/NOTES.md); at most one chunk a WR_MIN_CHUNK pairs an offset
 * (rows: WR_MIN_CHUNK rows) and, for pairs, a 256-row block; but where the CTAs alone need
 * one chunk and the rows form's limit below allows it, S stays 1 (the direct form). The
 * rows form also needs S >= its blocks / WR_LIVE_MAX, and the slices form (deterministic
 * contexts) keeps its slices within WR_MAX_SLICES and WR_SLICE_BYTES; where the two meet,
 * pairs runs. x3: tf32's split operands. blocks: the work units (the launch's CTAs unless
 * they walk: vc_cuda_masked_wgrad_run). */
typedef struct wr_shape {
  int v, add, x3, rows;
  int64_t nsplit, blocks;
  int64_t wci; /* input channels a launch (x3: a slice of x split at a time; else all) */
} wr_shape;

/* tf32 splits x a slice of its columns at a time into the workspace, the slices wci wide
 * and one launch each: as many whole tiles as keep a slice's split (4 bytes a value) within
 * WR_SPLIT_SHARE of the output tensor dy, at least one; the last slice may be narrower. The
 * workspace then stays within dy's bytes with the plan (suite S: 0.2 of them) beside it,
 * except where a single tile's split is already more than the share (x with many more rows
 * than dy, or dy with few channels). */
#define WR_SPLIT_SHARE 0.5
static int64_t wr_slice_width(const vc_plan *p, const vc_conv_args *a, int bn) {
  const int64_t ci = a->in_channels, tiles = (ci + bn - 1) / bn;
  const double share = WR_SPLIT_SHARE * 4.0 * (double)p->n_out * (double)a->out_channels;
  const double tile = 4.0 * (double)p->n_in * (double)bn; /* one tile's split */
  int64_t per = tile > 0.0 ? (int64_t)floor(share / tile) : tiles;
  if (per < 1) per = 1;
  if (per > tiles) per = tiles;
  return per * bn < ci ? per * bn : ci;
}

/* Tiles (work units of one offset's chunk) of co output and ci input channels */
static int64_t wr_tiles(int64_t co, int64_t ci, int bn) { return (co + WR_BM - 1) / WR_BM * ((ci + bn - 1) / bn); }

static wr_shape wr_shape_form(const vc_plan *p, const vc_conv_args *a, const bool rows) {
  wr_shape sh;
  const vc_cuda_state *cs = vc_cuda(p->ctx);
  const int64_t ci = a->in_channels, co = a->out_channels, K = p->kvol, nb = (p->n_out + WR_BK - 1) / WR_BK;
  const int forced = cs->masked_bn;
  sh.v = forced ? (forced == 256 ? 2 : forced > 64 ? 1 : 0) : ci > 128 ? 2 : ci > 64 ? 1 : 0; /* 96: its 128 */
  sh.x3 = a->dtype == VC_DTYPE_F32;
  if (sh.x3 && sh.v > 1) sh.v = 1;
  sh.rows = rows;
  sh.wci = sh.x3 ? wr_slice_width(p, a, wr_bn[sh.v]) : ci;
  const int64_t tiles = wr_tiles(co, sh.wci, wr_bn[sh.v]); /* a launch's */
  const int64_t kt = K * tiles; /* CTAs a chunk */
  const int64_t s_min = rows ? (nb + WR_LIVE_MAX - 1) / WR_LIVE_MAX : 1;
  int64_t s = cs->masked_split;
  if (!s) {
    s = (WR_UNITS_PER_SM * cs->n_sm + kt - 1) / kt;
    /* the rows a launch reads: 16-bit, or tf32's fp32 dy and x slice's hi and lo halves */
    const double bytes = (double)(p->n_in * sh.wci + p->n_out * co) * (double)vc_dtype_size(a->dtype);
    const double in_flight = (double)cs->n_sm / (double)kt + 1.0; /* chunk positions */
    const double s_l2 = ceil(2.0 * bytes * in_flight / (double)(cs->l2_bytes > 0 ? cs->l2_bytes : 1));
    /* Where the CTAs alone need one chunk, the direct form (no fp32 dW to zero, add into
     * and convert, or slices to add) against the L2 window's S: measured at RES 64, C =
     * 1024 (ncu, one layer: S = 1 730 us, the window's S = 3 786 us plus 87 us of
     * conversion; bench/NOTES.md, session 16). */
    const bool direct = s == 1 && s_min == 1;
    if ((double)s < s_l2 && !direct) s = (int64_t)s_l2;
    int64_t s_max = rows ? nb / (WR_MIN_CHUNK / WR_BK) : p->n_pairs / (K * WR_MIN_CHUNK);
    const int64_t pair_blocks = (p->n_out + VC_PAIR_ROWS - 1) / VC_PAIR_ROWS; /* pairs: chunks by row block */
    if (!rows && s_max > pair_blocks) s_max = pair_blocks;
    if (s > s_max) s = s_max;
  }
  if (s < s_min) s = s_min;
  if (p->ctx->deterministic) {
    const int64_t by_memory = WR_SLICE_BYTES / (co * K * ci * 4);
    if (s > by_memory) s = by_memory;
    if (s > WR_MAX_SLICES) s = WR_MAX_SLICES;
    if (rows && s < s_min) return wr_shape_form(p, a, false);
  }
  if (s < 1 || p->n_pairs == 0) s = 1;
  sh.nsplit = s;
  sh.add = s > 1 && !p->ctx->deterministic;
  sh.blocks = p->n_pairs > 0 ? s * kt : 0;
  return sh;
}

static wr_shape wr_shape_of(const vc_plan *p, const vc_conv_args *a, int variant) {
  const int env = vc_cuda(p->ctx)->masked_wgrad;
  return wr_shape_form(p, a, env ? env == VC_WR_ROWS : variant == VC_WR_ROWS);
}

/* One chunk and pairs to run: the kernel writes dW itself (WR_DIRECT). */
static bool wr_direct(const wr_shape &sh) { return !sh.add && sh.nsplit == 1 && sh.blocks > 0; }

/* The workspace: the fp32 dW (16-bit add; tf32's adds go into dW itself) or the slices (none
 * for the direct form), tf32's bf16 split of a slice of x, then the bias gradient's
 * partials. */
static int64_t wr_slices(const wr_shape &sh) { return sh.add ? (sh.x3 ? 0 : 1) : wr_direct(sh) ? 0 : sh.nsplit; }
static size_t wr_part_bytes(const vc_plan *p, const vc_conv_args *a, const wr_shape &sh) {
  return (size_t)vc_round_up(wr_slices(sh) * a->out_channels * p->kvol * a->in_channels * 4, 256);
}
/* Bytes of one tensor's split (n rows of c hi values, then n of lo) */
static int64_t wr_split_bytes(int64_t n, int64_t c) { return vc_round_up(2 * n * c * 2, 256); }
static size_t wr_splits_bytes(const vc_plan *p, const wr_shape &sh) {
  return !sh.x3 ? 0 : (size_t)wr_split_bytes(p->n_in, sh.wci);
}

/* Rows a chunk may hold for the kernel's bias-gradient sums: they add up in fp32 (the mma's
 * accumulator) over a chunk, 16 rows a step, so at most 2^12 roundings: within 2^-12 of
 * the sum of the magnitudes even if each truncated, a quarter of a 16-bit db's unit. */
#define WR_SUMS_MAX_ROWS 65536

/* Whether the kernel sums the bias gradient itself: 16-bit, where one offset pairs every
 * row with itself (submanifold: the centre, (K - 1) / 2), so its units' dy tiles hold each
 * row once, and where a chunk's rows (its 256-row blocks) stay within WR_SUMS_MAX_ROWS.
 * Its partials are S rows (one a chunk) of fp32 sums widened to fp64, which
 * vc_cuda_wgrad_finish adds in a fixed order; it saves a pass over dy from DRAM
 * (column_partials, 2-3 % of a training step at suite S RES 256-1024, whose chunks hold at
 * most 17 k rows). db is then repeatable run to run but depends on S, unlike the pass's
 * (a function of the row count). tf32 keeps the pass: its stages hold dy in fp32, which the
 * sums' 16-bit mma does not read; so does a single chunk of more rows (the direct form at
 * C = 1024, a deterministic context's few slices). */
static bool wr_fused_sums(const vc_plan *p, const wr_shape &sh) {
  const int64_t chunk_rows = ((p->n_out + VC_PAIR_ROWS - 1) / VC_PAIR_ROWS + sh.nsplit - 1) / sh.nsplit * VC_PAIR_ROWS;
  return !sh.x3 && sh.blocks > 0 && p->desc.kind == VC_CONV_SUBMANIFOLD && p->n_in == p->n_out &&
         chunk_rows <= WR_SUMS_MAX_ROWS;
}
/* The bias gradient's partials: the kernel's, or column_partials' */
static size_t wr_sums_bytes(const vc_plan *p, const vc_conv_args *a, const wr_shape &sh) {
  const size_t fused = wr_fused_sums(p, sh) ? (size_t)(sh.nsplit * a->out_channels) * sizeof(double) : 0;
  const size_t pass = vc_cuda_column_sums_tmp_bytes(p->n_out, a->out_channels);
  return fused > pass ? fused : pass;
}

size_t vc_cuda_masked_wgrad_workspace(const vc_plan *p, const vc_conv_args *a, int variant) {
  const wr_shape sh = wr_shape_of(p, a, variant);
  return wr_part_bytes(p, a, sh) + wr_splits_bytes(p, sh) + wr_sums_bytes(p, a, sh);
}

/* The tf32 split of columns c0 .. c0 + w - 1 of src's n rows (ld values apart): dst's rows
 * [0, n) of w values are their bf16 hi parts, rows [n, 2 n) their lo parts (wr_split2);
 * w, c0 and ld multiples of 4, src and dst 16-byte aligned. A warp a row. */
__global__ static void k_wr_split(const float *src, int64_t n, int64_t ld, int64_t c0, int w, __nv_bfloat16 *dst) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < n; r += warps)
    for (int c = 4 * lane; c < w; c += 128) {
      const float4 v = *(const float4 *)(src + r * ld + c0 + c);
      uint32_t hi[2], lo[2];
      wr_split2(v.x, v.y, hi[0], lo[0]);
      wr_split2(v.z, v.w, hi[1], lo[1]);
      *(uint2 *)(dst + r * w + c) = make_uint2(hi[0], hi[1]);
      *(uint2 *)(dst + (n + r) * w + c) = make_uint2(lo[0], lo[1]);
    }
}

/* The fp32 dW [co][K][out_ld] of the add form (all input channels: a launch's start at
 * col0) as dims {out_ld, K, co}: box {32, 1, 64}, one consumer's 64 rows of 32 columns,
 * 128-byte swizzled. */
static vc_status wr_dw_map(vc_context *ctx, const imp_args &q, float *dw, CUtensorMap *map) {
  const cuuint64_t dims[3] = {(cuuint64_t)q.out_ld, (cuuint64_t)q.K, (cuuint64_t)q.co};
  const cuuint64_t strides[2] = {dims[0] * 4, dims[0] * dims[1] * 4};
  const cuuint32_t box[3] = {32, 1, 64};
  return vc_cuda_tensor_map_3d(ctx, map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, dw, dims, strides, box,
                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

vc_status vc_cuda_masked_wgrad_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, const imp_args &args,
                                   int variant, void *dw, void *db, void *ws, cudaStream_t s) {
  imp_args q = args;
  const wr_shape sh = wr_shape_of(p, a, variant);
  const int bn = wr_bn[sh.v];
  const int64_t n = q.co * q.K * q.ci;
  float *part = (float *)ws;
  char *splits = (char *)ws + wr_part_bytes(p, a, sh);
  q.nsplit = (int)sh.nsplit;
  q.rows = p->n_out;
  q.out_ld = q.ci; /* dW's rows hold all input channels; a launch's start at col0 */
  /* One chunk: the kernel writes dW itself (at C = 1024 the fp32 slice and its conversion
   * were ~80 us a layer, 20 % of RES 16's training step). No pairs: one zeroed slice. The
   * add form's sums: tf32's dW, else an fp32 dW in the workspace. */
  const bool direct = wr_direct(sh);
  const int form = sh.add ? WR_ADD : direct ? WR_DIRECT : WR_SLICES;
  const int64_t nsl = sh.blocks > 0 ? wr_slices(sh) : 1;
  float *sums = sh.add && sh.x3 ? (float *)dw : part;
  if (sh.add || sh.blocks == 0) VC_CUDA_TRY(ctx, cudaMemsetAsync(sums, 0, (size_t)n * 4, s));
  CUtensorMap dmap;
  memset(&dmap, 0, sizeof dmap); /* unread by the slices form */
  if (sh.add && sh.blocks > 0) {
    const vc_status e = wr_dw_map(ctx, q, sums, &dmap);
    if (e != VC_OK) return e;
  }
  void *tmp = splits + wr_splits_bytes(p, sh); /* the bias gradient's partials */
  const bool fuse = db && wr_fused_sums(p, sh);
  /* The slices and direct forms of pairs with short units: one CTA a multiprocessor walks
   * the units (wr_body). Units of WR_PERSIST_STAGES stages or fewer on average (suite S RES
   * 16 and 32 at C = 1024) gain or break even, longer ones lose to the hardware's dealing
   * of one CTA a unit (ncu, us a layer, walking against not: f16 RES 16 67 / 78, RES 32 224
   * / 223, RES 64 776 / 728; tf32 RES 16 144 / 164, RES 32 477 / 488; bench/NOTES.md,
   * session 25). */
  const bool walk = !sh.add && !sh.rows && p->n_pairs <= (int64_t)WR_PERSIST_STAGES * WR_BK * p->kvol * sh.nsplit;
  /* A launch a slice of the input channels (tf32: wr_slice_width; 16-bit: all of them), its
   * units those of the slice's tiles (a narrower last slice has fewer; the rows form's CTA
   * runs exactly one). */
  for (int64_t c0 = 0; sh.blocks > 0 && c0 < args.ci; c0 += sh.wci) {
    q.col0 = (int)c0, q.ci = args.ci - c0 < sh.wci ? args.ci - c0 : sh.wci;
    const int64_t units = sh.nsplit * q.K * wr_tiles(q.co, q.ci, bn);
    const int64_t grid = walk && units > vc_cuda(ctx)->n_sm ? vc_cuda(ctx)->n_sm : units;
    if (sh.x3) { /* x's slice as bf16 hi and lo rows; dy's fp32 rows are split in the kernel */
      __nv_bfloat16 *x2 = (__nv_bfloat16 *)splits;
      k_wr_split<<<vc_grid(p->n_in * 32), 256, 0, s>>>((const float *)args.b_src, p->n_in, args.ci, c0, (int)q.ci, x2);
      q.b_src = x2, q.b_lo = x2 + p->n_in * q.ci;
    }
    wr_kernels[sh.rows][sh.v][vc_cuda_dt_index(a->dtype)]<<<(unsigned)grid, HP_THREADS(HP_NP(bn)),
                                                            WR_SMEM(bn, sh.x3), s>>>(q, dmap, direct ? dw : sums, form,
                                                                                     fuse ? (double *)tmp : NULL,
                                                                                     (int)((p->kvol - 1) / 2));
  }
  vc_cuda_wgrad_finish(dw, a->dtype, part, nsl, n, db, args.a_src, p->n_out, q.co, tmp, fuse ? sh.nsplit : 0, s);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  if (fuse) __atomic_fetch_add(&vc_cuda(ctx)->wgrad_sums_runs, 1, __ATOMIC_RELAXED);
  return VC_OK;
}

extern "C" int64_t vc_cuda_masked_wgrad_sums_runs(const vc_context *ctx) {
  return __atomic_load_n(&vc_cuda((vc_context *)ctx)->wgrad_sums_runs, __ATOMIC_RELAXED);
}

/* The forms the tuner races: pairs, and rows where it can run. */
int vc_cuda_masked_wgrad_variants(const vc_plan *p, const vc_conv_args *a, int out[]) {
  int n = 0;
  out[n++] = VC_WR_PAIRS;
  if (wr_shape_form(p, a, true).rows) out[n++] = VC_WR_ROWS;
  return n;
}

vc_status vc_cuda_masked_wgrad_init(vc_context *ctx) {
  for (int f = 0; f < 2; f++)
    for (int v = 0; v < 3; v++)
      for (int d = 0; d < 3; d++)
        if (wr_kernels[f][v][d])
          VC_CUDA_TRY(ctx, cudaFuncSetAttribute(wr_kernels[f][v][d], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                WR_SMEM(wr_bn[v], d == 2)));
  return VC_OK;
}
