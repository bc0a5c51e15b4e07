/* kmap.cu — kernel maps on the GPU for the four conv kinds, with the same output sites and
 * pair order as the CPU engine (src/cpu/kmap.c):
 *   1. range check and hash insert of the input sites (atomicCAS, linear probing); for
 *      submanifold convs of many sites a table of 4x4x4 bricks of sites instead;
 *   2. output sites: submanifold = inputs; sparse/transposed = every site reached, found by
 *      inserting candidates into a second table, then radix-sorted by packed key;
 *      inverse = the paired plan's input sites;
 *   3. the dense neighbour table nb[n_out, K] (build scratch; small submanifold maps fill
 *      both halves from one lookup), with the row masks, per-block pair counts and row
 *      counts;
 *   4. pairs grouped by offset, ascending by output row, through one prefix sum (a
 *      submanifold plan's below the centre only, vc_plan.lists);
 *   5. encodings for the fused kernels: Gray order within windows, per-block active
 *      offsets, the tiles by their active offsets, the reverse table for dgrad; they run
 *      on a side stream once the prefix sum has the pair counts, beside the read-back of
 *      the counts;
 *   6. the neighbour map the plan keeps instead of the table (cuda_internal.h,
 *      VC_MAP_WORDS): its entries written with the pair lists (4) from one read of the
 *      table, its headers in the Gray order on the side stream, and there too the reverse
 *      map from the reverse table. */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* Input table slot: key and row side by side, so a hit costs one cache line. */
typedef struct __align__(16) slot {
  unsigned long long key;
  long long row;
} slot;

/* Tables have any size `cap` (not a power of two, so that their load stays near one half
 * and they stay small enough for L2): the hash's high product bits pick the first slot. */
__device__ static inline uint64_t hash_start(uint64_t key, uint64_t cap) { return __umul64hi(vc_hash_mix(key), cap); }
__device__ static inline uint64_t hash_next(uint64_t s, uint64_t cap) { return s + 1 == cap ? 0 : s + 1; }

/* The row of `key`, or -1, probing from slot s0 whose content `first` the caller has read
 * (so that the first probes of several lookups can be issued together). */
__device__ static inline int32_t hash_probe(const slot *t, uint64_t cap, uint64_t key, uint64_t s0, slot first) {
  for (uint64_t s = s0;;) {
    if (first.key == key) return (int32_t)first.row;
    if (first.key == VC_KEY_EMPTY) return -1;
    s = hash_next(s, cap);
    first = t[s];
  }
}

__device__ static inline int32_t hash_find(const slot *t, uint64_t cap, uint64_t key) {
  const uint64_t s0 = hash_start(key, cap);
  return hash_probe(t, cap, key, s0, t[s0]);
}

/* off[r] = offset r's displacement (vc_geom_offset) for r < count, less the padding when
 * `centred` (r*d - pad: the step from a site to its neighbour at stride 1): a shared table
 * instead of three divisions a lookup. Every thread of the block calls it; it synchronises. */
__device__ static void load_offsets(const vc_geom &g, int count, bool centred, int32_t (*off)[3]) {
  for (int r = threadIdx.x; r < count; r += blockDim.x) {
    vc_geom_offset(&g, r, off[r]);
    for (int a = 0; centred && a < 3; a++) off[r][a] -= g.pad[a];
  }
  __syncthreads();
}

/* Claims key's slot; returns its index, or -1 when the key was there already. */
__device__ static inline int64_t hash_claim(unsigned long long *key_of_slot0, size_t stride, uint64_t cap, uint64_t key,
                                           uint64_t s0) {
  for (uint64_t s = s0;; s = hash_next(s, cap)) {
    unsigned long long prev = atomicCAS(key_of_slot0 + s * stride, (unsigned long long)VC_KEY_EMPTY, (unsigned long long)key);
    if (prev == VC_KEY_EMPTY) return (int64_t)s;
    if (prev == key) return -1;
  }
}

/* Range check, and the sites' keys the plan keeps (a row out of range fails the build). */
__global__ static void k_check_pack(const int32_t *c, int64_t n, uint64_t *keys, unsigned long long *bad) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int32_t *v = c + 4 * i; /* the caller's rows need only 4-byte alignment */
    if (!vc_site_in_range(v[0], v[1], v[2], v[3])) atomicMin(bad, (unsigned long long)i);
    keys[i] = vc_key_pack(v[0], v[1], v[2], v[3]);
  }
}

__global__ static void k_insert_inputs(const uint64_t *keys, int64_t n, slot *t, uint64_t cap, unsigned long long *dup) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const uint64_t key = keys[i];
    int64_t at = hash_claim(&t[0].key, sizeof(slot) / sizeof(unsigned long long), cap, key, hash_start(key, cap));
    if (at < 0) atomicMin(dup, (unsigned long long)i);
    else t[at].row = i;
  }
}

__global__ static void k_out_candidates(const int32_t *c, int64_t n, vc_geom g, bool transposed, uint64_t *okeys,
                                        uint64_t ocap, uint64_t *list, unsigned long long *count,
                                        unsigned long long *bad) {
  __shared__ int32_t off[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX][3];
  load_offsets(g, g.K, false, off);
  const int64_t total = n * g.K;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = j / g.K;
    const int r = (int)(j % g.K);
    int64_t t[3];
    if (!vc_geom_pair_at(&g, transposed, c + 4 * i, off[r], t) || !vc_geom_in_bound(&g, t)) continue;
    if (!vc_site_in_range(c[4 * i], t[0], t[1], t[2])) {
      atomicMin(bad, (unsigned long long)j);
      continue;
    }
    uint64_t key = vc_key_pack(c[4 * i], (int32_t)t[0], (int32_t)t[1], (int32_t)t[2]);
    if (hash_claim((unsigned long long *)okeys, 1, ocap, key, hash_start(key, ocap)) >= 0) list[atomicAdd(count, 1ull)] = key;
  }
}

__global__ static void k_unpack(const uint64_t *keys, int64_t n, int32_t *c) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    vc_key_unpack(keys[i], c + 4 * i);
}

/* Submanifold: offsets r and K-1-r are opposite displacements, so one lookup for r below
 * the centre fills nb[o, r] and nb[q, K-1-r]; the centre is the identity. A group of 2^lg
 * lanes per row (lane r < half looks up offset r, lane half writes the centre): shifts
 * instead of a 64-bit division per lookup, and displacements from a shared table instead of
 * three divisions each. */
__global__ static void k_neighbors_submanifold(const uint64_t *keys, int64_t n, vc_geom g, int lg, const slot *t,
                                               uint64_t cap, int32_t *nb) {
  __shared__ int32_t disp[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX / 2][3];
  const int half = g.K / 2;
  load_offsets(g, half, true, disp);
  const int64_t total = n << lg;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = j >> lg;
    const int r = (int)(j & ((1 << lg) - 1));
    if (r >= half) {
      if (r == half) nb[o * g.K + half] = (int32_t)o;
      continue;
    }
    int32_t co[4];
    vc_key_unpack(keys[o], co);
    const int64_t x = (int64_t)co[1] + disp[r][0], y = (int64_t)co[2] + disp[r][1], z = (int64_t)co[3] + disp[r][2];
    if (!vc_site_in_range(co[0], x, y, z)) continue;
    int32_t i = hash_find(t, cap, vc_key_pack(co[0], (int32_t)x, (int32_t)y, (int32_t)z));
    if (i < 0) continue;
    nb[o * g.K + r] = i;
    nb[(int64_t)i * g.K + (g.K - 1 - r)] = (int32_t)o;
  }
}

/* Inverse: nb[paired input row, r] = paired output row, for every paired pair. */
__global__ static void k_inverse_neighbors(const int64_t *offsets, int K, const int32_t *pin, const int32_t *pout,
                                           int64_t n_pairs, int32_t *nb) {
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n_pairs; j += (int64_t)gridDim.x * blockDim.x) {
    int lo = 0, hi = K; /* offset r with offsets[r] <= j < offsets[r+1] */
    while (hi - lo > 1) {
      int mid = (lo + hi) / 2;
      if (offsets[mid] <= j) lo = mid;
      else hi = mid;
    }
    nb[(int64_t)pin[j] * K + lo] = pout[j];
  }
}

#define PAIR_ROWS VC_PAIR_ROWS /* rows per block of the row kernels (one thread per row) */
#define PAIR_COLS 32  /* offsets staged in shared memory at a time: one mask word */
static_assert(PAIR_COLS == 32, "a staged chunk of columns is one word of the map's headers (k_write_pairs)");

/* Where all K <= 32 columns fit one chunk, a block's rows of nb are one contiguous run
 * (16-byte aligned: PAIR_ROWS * K words from an aligned base), read and written 16 bytes a
 * thread. Word e of the run is (row e / K, column e % K): the quotient by a multiply and a
 * shift (run_word; with m = ceil(2^19 / K) the error is below e / 2^19 < 1/64 <= 1/K for
 * e < 2^13 and K <= 32, and e m < 2^32), since a division a word cost more instructions
 * than the loads. (k_write_pairs took 96-98 us at suite S RES 512 so, 150 us with a warp a
 * row instead: bench/NOTES.md, session 45.) */
static_assert(PAIR_ROWS * PAIR_COLS <= 8192, "run_word's row is exact below 2^13");
__device__ static inline uint32_t run_div(int K) { return ((1u << 19) + (uint32_t)K - 1) / (uint32_t)K; }
/* The tile's word for word e of a run (m = run_div(K)). */
__device__ static inline int32_t &run_word(int32_t (*tile)[PAIR_COLS + 1], int e, int K, uint32_t m) {
  const int row = (int)(((uint32_t)e * m) >> 19);
  return tile[row][e - row * K];
}

/* Stages nb[rows of block b, r0 .. r0+PAIR_COLS) in shared memory (rows past n_out read as
 * -1; columns past K are left alone, no caller reads them): one contiguous run where the
 * chunk holds every column, else a warp a row, its lanes over the row's slice. */
__device__ static void stage_columns(const int32_t *nb, int64_t n_out, int K, int r0, int32_t (*tile)[PAIR_COLS + 1]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t o0 = (int64_t)blockIdx.x * PAIR_ROWS;
  const int rows = (int)min((int64_t)PAIR_ROWS, n_out - o0), ncols = min(PAIR_COLS, K - r0);
  if (ncols == K) {
    const int total = rows * K;
    const uint32_t m = run_div(K);
    const int4 *src = (const int4 *)(nb + o0 * K);
    for (int i = threadIdx.x; i * 4 < total; i += blockDim.x) {
      int32_t v[4];
      if (i * 4 + 3 < total) {
        const int4 q = src[i];
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
        for (int e = 0; e < 4; e++) v[e] = i * 4 + e < total ? nb[o0 * K + i * 4 + e] : -1;
      }
      for (int e = 0; e < 4 && i * 4 + e < total; e++) run_word(tile, i * 4 + e, K, m) = v[e];
    }
    for (int i = threadIdx.x; i < (PAIR_ROWS - rows) * K; i += blockDim.x) run_word(tile + rows, i, K, m) = -1;
  } else {
#pragma unroll 4
    for (int row = warp; row < PAIR_ROWS; row += nwarps)
      if (lane < ncols) tile[row][lane] = row < rows ? nb[(o0 + row) * K + r0 + lane] : -1;
  }
  __syncthreads();
}

/* From a staged tile of columns r0 .. r0+PAIR_COLS (complete: callers synchronise after
 * filling it), each where its pointer is non-NULL: mask word r0/32 of each row (rmask); its
 * live count added up over the calls (rcnt: the neighbour map's entries of the row; r0 == 0
 * starts it); the live count of each column in this block (cnt[r * nblk + b], the layout
 * the pair scan wants); the tile itself written out (nb: one contiguous run where the chunk
 * holds every column, else a warp a row). Masks a warp a row, lanes over the columns (one
 * ballot); counts a warp a column. The tile's row stride of PAIR_COLS + 1 words keeps both
 * walks free of bank conflicts. */
__device__ static void emit_columns(int32_t (*tile)[PAIR_COLS + 1], int64_t n_out, int K, int r0, int W,
                                    int32_t *nb, uint32_t *rmask, int32_t *cnt, int32_t *rcnt, int centre) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t o0 = (int64_t)blockIdx.x * PAIR_ROWS;
  const int rows = (int)min((int64_t)PAIR_ROWS, n_out - o0), ncols = min(PAIR_COLS, K - r0);
  for (int row = warp; row < rows; row += nwarps) {
    const int32_t v = lane < ncols ? tile[row][lane] : -1;
    const uint32_t m = __ballot_sync(0xffffffffu, v >= 0);
    const int64_t o = o0 + row;
    if (nb && ncols < K && lane < ncols) nb[o * K + r0 + lane] = v;
    if (lane == 0 && rmask) rmask[o * W + r0 / 32] = m;
    if (lane == 0 && rcnt) rcnt[o] = (r0 ? rcnt[o] : 0) + __popc(m & ~vc_map_skip(centre, r0 / 32));
  }
  if (nb && ncols == K) {
    const int total = rows * K;
    const uint32_t m = run_div(K);
    int4 *dst = (int4 *)(nb + o0 * K);
    for (int i = threadIdx.x; i * 4 < total; i += blockDim.x) {
      int32_t v[4];
      for (int e = 0; e < 4; e++) v[e] = run_word(tile, i * 4 + e, K, m);
      if (i * 4 + 3 < total) dst[i] = make_int4(v[0], v[1], v[2], v[3]);
      else
        for (int e = 0; e < 4 && i * 4 + e < total; e++) nb[o0 * K + i * 4 + e] = v[e];
    }
  }
  for (int c = warp; cnt && c < ncols; c += nwarps) {
    int n = 0;
    for (int row = lane; row < PAIR_ROWS; row += 32) n += tile[row][c] >= 0;
    for (int d = 16; d > 0; d >>= 1) n += __shfl_xor_sync(0xffffffffu, n, d);
    if (lane == 0) cnt[(int64_t)(r0 + c) * gridDim.x + blockIdx.x] = n;
  }
  __syncthreads();
}

/* nb, row masks and per-block column counts of sparse and transposed plans: one thread per
 * output row, one lookup per offset (the relation that produced the outputs, inverted).
 * Every entry is written, so nb needs no clearing. */
__global__ static void __launch_bounds__(PAIR_ROWS) k_lookup_rows(const uint64_t *okeys, int64_t n_out, vc_geom g,
                                                                  bool transposed, const slot *t,
                                                                  uint64_t hcap, int32_t *nb, uint32_t *rmask,
                                                                  int W, int32_t *cnt, int32_t *rcnt) {
  __shared__ int32_t tile[PAIR_ROWS][PAIR_COLS + 1];
  __shared__ int32_t off[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX][3];
  load_offsets(g, g.K, false, off);
  const int64_t o = (int64_t)blockIdx.x * PAIR_ROWS + threadIdx.x;
  int32_t c[4] = {0, 0, 0, 0};
  if (o < n_out) vc_key_unpack(okeys[o], c);
  for (int r0 = 0; r0 < g.K; r0 += PAIR_COLS) {
    for (int j = 0; j < PAIR_COLS && r0 + j < g.K; j++) {
      const int r = r0 + j;
      int32_t v = -1;
      int64_t q[3];
      if (o < n_out && vc_geom_pair_at(&g, !transposed, c, off[r], q) && vc_site_in_range(c[0], q[0], q[1], q[2]))
        v = hash_find(t, hcap, vc_key_pack(c[0], (int32_t)q[0], (int32_t)q[1], (int32_t)q[2]));
      tile[threadIdx.x][j] = v;
    }
    __syncthreads();
    emit_columns(tile, n_out, g.K, r0, W, nb, rmask, cnt, rcnt, -1);
  }
}

/* ---- submanifold maps through a brick table ----------------------------------------------
 * Sites are grouped in 4x4x4 bricks: a hash table maps each occupied brick to a 64-entry row
 * block of a pool (-1: no site). A row's 26 neighbours then lie in at most 8 bricks (3.4 on
 * average with a 3x3x3 kernel): the lanes looking them up share a few table lines and a few
 * 256-byte pool blocks, where a site table costs a random line per neighbour (and the
 * symmetric half-lookup scheme a scattered mirror write per hit). */
#define BRICK_SITES 64
#ifndef VC_BRICK_MIN_SITES /* -DVC_BRICK_MIN_SITES=0 puts every submanifold map on bricks (for testing) */
#define VC_BRICK_MIN_SITES (1 << 19)
#endif

/* Key of the brick holding an in-range site: 15 bits an axis (VC_AXIS_BIAS is a multiple of
 * 4, so the shift is a floor division of the signed coordinate). */
__device__ static inline uint64_t brick_key(int64_t b, int64_t x, int64_t y, int64_t z) {
  return (uint64_t)b << 45 | (uint64_t)((x + VC_AXIS_BIAS) >> 2) << 30 | (uint64_t)((y + VC_AXIS_BIAS) >> 2) << 15 |
         (uint64_t)((z + VC_AXIS_BIAS) >> 2);
}
__device__ static inline int brick_local(int64_t x, int64_t y, int64_t z) {
  return (int)((x & 3) << 4 | (y & 3) << 2 | (z & 3));
}

/* First slot of a brick key: a 32-bit mix (the lookups are bound by instruction issue, and
 * splitmix64's 64-bit multiplies cost several 32-bit ones each); cap < 2^32 here. */
__device__ static inline uint64_t brick_start(uint64_t key, uint64_t cap) {
  uint32_t h = (uint32_t)key * 0x9e3779b1u ^ (uint32_t)(key >> 32) * 0x85ebca77u;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 13;
  return __umulhi(h, (uint32_t)cap);
}

/* Claims each occupied brick once and numbers it. Out-of-range sites are skipped
 * (k_check_pack reports them before the pool is filled). The lanes of a warp holding one
 * brick leave it to the lowest of them (rows in scan order share bricks, and their atomics
 * on one slot serialise), and a block's new bricks take their numbers with one atomic on
 * the count (ranks from ballots, warp bases from shared memory), where each took one on
 * that one address. The loop is uniform across the block: every lane reaches the match, the
 * ballots and the barriers. */
#define CLAIM_THREADS 256
__global__ static void __launch_bounds__(CLAIM_THREADS) k_claim_bricks(const int32_t *c, int64_t n, slot *bt,
                                                                       uint64_t bcap, unsigned long long *count) {
  __shared__ unsigned wbase[CLAIM_THREADS / 32];
  __shared__ unsigned long long base;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t i0 = (int64_t)blockIdx.x * blockDim.x; i0 < n; i0 += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = i0 + threadIdx.x;
    uint64_t key = VC_KEY_EMPTY;
    if (i < n) {
      const int32_t *s = c + 4 * i;
      if (vc_site_in_range(s[0], s[1], s[2], s[3])) key = brick_key(s[0], s[1], s[2], s[3]);
    }
    const unsigned same = __match_any_sync(0xffffffffu, key);
    int64_t at = -1;
    if (key != VC_KEY_EMPTY && lane == __ffs(same) - 1)
      at = hash_claim(&bt[0].key, sizeof(slot) / sizeof(unsigned long long), bcap, key, brick_start(key, bcap));
    const unsigned won = __ballot_sync(0xffffffffu, at >= 0);
    if (lane == 0) wbase[warp] = __popc(won);
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned total = 0;
      for (int w = 0; w < CLAIM_THREADS / 32; w++) {
        const unsigned k = wbase[w];
        wbase[w] = total, total += k;
      }
      base = total ? atomicAdd(count, (unsigned long long)total) : 0;
    }
    __syncthreads();
    if (at >= 0) bt[at].row = (long long)(base + wbase[warp] + __popc(won & ((1u << lane) - 1)));
    __syncthreads(); /* wbase and base read before the next round writes them */
  }
}

/* pool[brick * 64 + local] = row; a site already there is a duplicate (the lowest losing row
 * is kept in *dup, as k_insert_inputs does). */
__global__ static void k_fill_bricks(const int32_t *c, int64_t n, const slot *bt, uint64_t bcap, int32_t *pool,
                                     unsigned long long *dup) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int32_t *s = c + 4 * i;
    const uint64_t key = brick_key(s[0], s[1], s[2], s[3]);
    const uint64_t s0 = brick_start(key, bcap);
    const int32_t b = hash_probe(bt, bcap, key, s0, bt[s0]);
    if (atomicCAS(pool + (int64_t)b * BRICK_SITES + brick_local(s[1], s[2], s[3]), -1, (int32_t)i) != -1)
      atomicMin(dup, (unsigned long long)i);
  }
}

#define BRICK_LANES 8 /* lanes per row in k_lookup_bricks: each looks up PAIR_COLS / 8 offsets */
#define BRICK_PER_LANE (PAIR_COLS / BRICK_LANES)
#define BRICK_NEAR_ROWS 4 /* rows whose probes a lane has in flight at once (brick_rows_near) */
static_assert(BRICK_LANES == 8, "a row's 8 lanes probe its 2 x 2 x 2 candidate bricks (brick_rows_near)");

/* Fills tile[row][0 .. PAIR_COLS) with the rows of offsets r0 .. r0+PAIR_COLS where the
 * neighbourhood spans at most 5 cells an axis (reach[1] - reach[0] <= 4; 5 consecutive cells
 * meet at most 2 bricks of 4), so a row's neighbours lie in its 2 x 2 x 2 candidate bricks
 * from the brick of its low corner (c + reach[0]) on. Each of a row's 8 lanes probes one
 * candidate (those past a brick edge the neighbourhood does not cross are skipped), and each
 * lookup takes its brick's number from the lane that probed it (a shuffle): at most 8 table
 * walks a row where a walk a lookup took 27, with the lookup's brick and cell from 4-bit fields
 * (upk[r]: offset r's step from the low corner; the corner's cell in its brick added, each
 * field stays below 8). The coordinate range is brick-aligned (VC_COORD_MIN and VC_COORD_MAX
 * + 1 multiples of 4), so a brick is wholly in range or wholly out: the range check is the
 * brick's, once a probe. */
__device__ static void brick_rows_near(const int4 *rc, int64_t n, const int32_t *upk, int K, int r0,
                                       const int32_t (*reach)[3], const slot *bt, uint64_t bcap, const int32_t *pool,
                                       int32_t (*tile)[PAIR_COLS + 1]) {
  const int64_t o0 = (int64_t)blockIdx.x * PAIR_ROWS;
  const int lane = threadIdx.x % BRICK_LANES, grp = threadIdx.x / BRICK_LANES, src0 = threadIdx.x & 31 & ~7;
  const int step[3] = {lane & 1, lane >> 1 & 1, lane >> 2}; /* this lane's candidate: + step bricks an axis */
  for (int row0 = grp; row0 < PAIR_ROWS; row0 += BRICK_NEAR_ROWS * (PAIR_ROWS / BRICK_LANES)) {
    uint64_t key[BRICK_NEAR_ROWS];
    uint32_t s0[BRICK_NEAR_ROWS], cell[BRICK_NEAR_ROWS];
    slot first[BRICK_NEAR_ROWS];
#pragma unroll
    for (int i = 0; i < BRICK_NEAR_ROWS; i++) {
      const int row = row0 + i * (PAIR_ROWS / BRICK_LANES);
      const int4 c = rc[row];
      const int64_t lo[3] = {(int64_t)c.y + reach[0][0], (int64_t)c.z + reach[0][1], (int64_t)c.w + reach[0][2]};
      int64_t q[3]; /* a cell of this lane's candidate brick */
      bool probe = o0 + row < n;
      cell[i] = 0;
#pragma unroll
      for (int a = 0; a < 3; a++) {
        q[a] = lo[a] + 4 * step[a];
        probe = probe && (!step[a] || (lo[a] & 3) + reach[1][a] - reach[0][a] >= 4);
        cell[i] |= (uint32_t)(lo[a] & 3) << (8 - 4 * a);
      }
      key[i] = probe && vc_site_in_range(c.x, q[0], q[1], q[2]) ? brick_key(c.x, q[0], q[1], q[2]) : VC_KEY_EMPTY;
      s0[i] = (uint32_t)brick_start(key[i], bcap);
      if (probe) first[i] = bt[s0[i]];
    }
#pragma unroll
    for (int i = 0; i < BRICK_NEAR_ROWS; i++) {
      const int32_t b = key[i] != VC_KEY_EMPTY ? hash_probe(bt, bcap, key[i], s0[i], first[i]) : -1;
      const int row = row0 + i * (PAIR_ROWS / BRICK_LANES);
#pragma unroll
      for (int j = 0; j < BRICK_PER_LANE; j++) {
        const int r = r0 + lane + BRICK_LANES * j;
        const uint32_t p = cell[i] + (uint32_t)upk[min(r, K - 1)];
        const int src = src0 | (int)((p >> 10 & 1) | (p >> 5 & 2) | (p & 4));
        const int32_t bb = __shfl_sync(0xffffffffu, b, src);
        const int local = (int)((p >> 4 & 0x30) | (p >> 2 & 0xc) | (p & 3));
        tile[row][lane + BRICK_LANES * j] = r < K && bb >= 0 ? pool[(int64_t)bb * BRICK_SITES + local] : -1;
      }
    }
  }
}

/* The same for any neighbourhood: a brick probe a lookup, BRICK_PER_LANE independent ones a
 * lane in flight, with the range checked per lookup where the row's neighbourhood leaves it. */
__device__ static void brick_rows_far(const int4 *rc, int64_t n, const int32_t (*disp)[3], int K, int r0,
                                      const int32_t (*reach)[3], const slot *bt, uint64_t bcap, const int32_t *pool,
                                      int32_t (*tile)[PAIR_COLS + 1]) {
  const int64_t o0 = (int64_t)blockIdx.x * PAIR_ROWS;
  const int lane = threadIdx.x % BRICK_LANES;
  for (int row = threadIdx.x / BRICK_LANES; row < PAIR_ROWS; row += PAIR_ROWS / BRICK_LANES) {
    const int4 c = rc[row];
    const bool live = o0 + row < n;
    /* rows whose whole neighbourhood is in range skip the per-lookup check */
    const bool inside = vc_site_in_range(c.x, (int64_t)c.y + reach[0][0], (int64_t)c.z + reach[0][1],
                                         (int64_t)c.w + reach[0][2]) &&
                        vc_site_in_range(c.x, (int64_t)c.y + reach[1][0], (int64_t)c.z + reach[1][1],
                                         (int64_t)c.w + reach[1][2]);
    uint64_t key[BRICK_PER_LANE], s0[BRICK_PER_LANE];
    int local[BRICK_PER_LANE];
    slot first[BRICK_PER_LANE];
#pragma unroll
    for (int i = 0; i < BRICK_PER_LANE; i++) {
      const int r = r0 + lane + BRICK_LANES * i;
      key[i] = VC_KEY_EMPTY;
      if (live && r < K) {
        const int64_t x = (int64_t)c.y + disp[r][0], y = (int64_t)c.z + disp[r][1], z = (int64_t)c.w + disp[r][2];
        if (inside || vc_site_in_range(c.x, x, y, z)) key[i] = brick_key(c.x, x, y, z), local[i] = brick_local(x, y, z);
      }
      s0[i] = brick_start(key[i], bcap);
      if (key[i] != VC_KEY_EMPTY) first[i] = bt[s0[i]];
    }
#pragma unroll
    for (int i = 0; i < BRICK_PER_LANE; i++) {
      int32_t v = -1;
      if (key[i] != VC_KEY_EMPTY) {
        const int32_t b = hash_probe(bt, bcap, key[i], s0[i], first[i]);
        if (b >= 0) v = pool[(int64_t)b * BRICK_SITES + local[i]];
      }
      tile[row][lane + BRICK_LANES * i] = v;
    }
  }
}

/* nb, row masks and per-block column counts of a submanifold plan. A block's PAIR_ROWS rows
 * fill the staging tile 32 columns at a time, BRICK_LANES lanes a row, with many rows' loads
 * in flight at once (brick_rows_near, or brick_rows_far for neighbourhoods wider than 5
 * cells an axis); row counts without the centre (vc_cuda_plan.centre). */
__global__ static void __launch_bounds__(PAIR_ROWS) k_lookup_bricks(const uint64_t *keys, int64_t n, vc_geom g,
                                                                    const slot *bt, uint64_t bcap, const int32_t *pool,
                                                                    int32_t *nb, uint32_t *rmask, int W, int32_t *cnt,
                                                                    int32_t *rcnt, int centre) {
  __shared__ int32_t tile[PAIR_ROWS][PAIR_COLS + 1];
  __shared__ int4 rc[PAIR_ROWS];
  __shared__ int32_t disp[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX][3];
  __shared__ int32_t upk[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX]; /* brick_rows_near's steps */
  load_offsets(g, g.K, true, disp);
  int32_t reach[2][3]; /* smallest and largest displacement per axis: offsets 0 and k-1 */
  bool near = true;
  for (int a = 0; a < 3; a++) {
    reach[0][a] = -g.pad[a], reach[1][a] = (g.k[a] - 1) * g.d[a] - g.pad[a];
    near = near && reach[1][a] - reach[0][a] <= 4;
  }
  for (int r = threadIdx.x; near && r < g.K; r += blockDim.x)
    upk[r] = (disp[r][0] - reach[0][0]) << 8 | (disp[r][1] - reach[0][1]) << 4 | (disp[r][2] - reach[0][2]);
  const int64_t o0 = (int64_t)blockIdx.x * PAIR_ROWS;
  int32_t c[4] = {0, 0, 0, 0};
  if (o0 + threadIdx.x < n) vc_key_unpack(keys[o0 + threadIdx.x], c);
  rc[threadIdx.x] = make_int4(c[0], c[1], c[2], c[3]);
  __syncthreads();
  for (int r0 = 0; r0 < g.K; r0 += PAIR_COLS) {
    if (near) brick_rows_near(rc, n, upk, g.K, r0, reach, bt, bcap, pool, tile);
    else brick_rows_far(rc, n, disp, g.K, r0, reach, bt, bcap, pool, tile);
    __syncthreads();
    emit_columns(tile, n, g.K, r0, W, nb, rmask, cnt, rcnt, centre);
  }
}

/* Row masks, per-block column counts and row counts (each NULL: skipped) of an nb built by
 * scattering (submanifold, inverse), or of the reverse table. */
__global__ static void __launch_bounds__(PAIR_ROWS) k_row_stats(const int32_t *nb, int64_t n_out, int K, int W,
                                                                uint32_t *rmask, int32_t *cnt, int32_t *rcnt,
                                                                int centre) {
  __shared__ int32_t tile[PAIR_ROWS][PAIR_COLS + 1];
  for (int r0 = 0; r0 < K; r0 += PAIR_COLS) {
    stage_columns(nb, n_out, K, r0, tile);
    emit_columns(tile, n_out, K, r0, W, NULL, rmask, cnt, rcnt, centre);
  }
}

/* Writes the pairs of (column r < cols, block b) from start[r * nblk + b] on, in row order:
 * one warp per column, ranks from ballots (cols 0: none, start unread). pin or pout NULL:
 * that list is skipped. Where nbl is non-NULL, also the neighbour map's entries
 * (cuda_internal.h, VC_MAP_WORDS), which the plan keeps in row order: row o's from
 * rstart[o] on, a warp a row (lanes over the staged columns). So the build reads the table
 * once for both (a pass of its own over the table, in the plan's order, took the build
 * 1.84 -> 2.30 ms at 4 M rows; bench/NOTES.md, session 44). */
__global__ static void k_write_pairs(const int32_t *nb, int64_t n_out, int K, int cols, const int64_t *start,
                                     int32_t *pin, int32_t *pout, const int64_t *rstart, int32_t *nbl, int centre) {
  __shared__ int32_t tile[PAIR_ROWS][PAIR_COLS + 1];
  __shared__ uint32_t next[PAIR_ROWS]; /* the map: each row's next entry (< 2^32) */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t o0 = (int64_t)blockIdx.x * PAIR_ROWS;
  const int rows = (int)min((int64_t)PAIR_ROWS, n_out - o0);
  if (nbl)
    for (int i = threadIdx.x; i < rows; i += blockDim.x) next[i] = (uint32_t)rstart[o0 + i];
  for (int r0 = 0; r0 < (nbl ? K : cols); r0 += PAIR_COLS) {
    stage_columns(nb, n_out, K, r0, tile); /* its barrier also publishes next[] */
    if (nbl)
      for (int row = warp; row < rows; row += nwarps) {
        const int32_t v = r0 + lane < K && r0 + lane != centre ? tile[row][lane] : -1;
        const uint32_t bal = __ballot_sync(0xffffffffu, v >= 0);
        /* lane 0 alone reads and writes the row's next entry: a read by every lane before
         * lane 0's write is ordered only where the warp runs converged */
        const uint32_t a = __shfl_sync(0xffffffffu, lane == 0 ? next[row] : 0u, 0);
        if (v >= 0) nbl[a + __popc(bal & ((1u << lane) - 1))] = v;
        if (lane == 0) next[row] = a + __popc(bal);
      }
    for (int c = warp; c < PAIR_COLS && r0 + c < cols; c += nwarps) {
      int64_t at = start[(int64_t)(r0 + c) * gridDim.x + blockIdx.x];
      for (int row0 = 0; row0 < PAIR_ROWS; row0 += 32) {
        const int32_t q = tile[row0 + lane][c];
        const unsigned live = __ballot_sync(0xffffffffu, q >= 0);
        if (q >= 0) {
          const int64_t j = at + __popc(live & ((1u << lane) - 1));
          if (pin) pin[j] = q;
          if (pout) pout[j] = (int32_t)(o0 + row0 + lane);
        }
        at += __popc(live);
      }
    }
    __syncthreads();
  }
}

__global__ static void k_reverse(const int32_t *nb, int64_t n_out, int K, int32_t *nbt) {
  const int64_t total = n_out * K;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (int64_t)gridDim.x * blockDim.x) {
    int32_t q = nb[j];
    if (q >= 0) nbt[(int64_t)q * K + j % K] = (int32_t)(j / K);
  }
}

/* ---- the compact neighbour map (cuda_internal.h, VC_MAP_WORDS) ----------------------------
 * The build writes the dense table nb[n, K] (scratch), and from it the plan keeps the map:
 * per neighbour one entry, in row order (k_write_pairs), and per position of the plan's
 * order its headers (k_map_hdrs; the reverse map: per row). */

/* The map's headers over the positions of `order` (NULL: the identity) from the row masks
 * (W words a row) and each row's first entry (rstart: the entries in row order). */
__global__ static void k_map_hdrs(const uint32_t *rmask, const int64_t *rstart, const int32_t *order, int64_t n, int W,
                                  int centre, uint2 *hdr) {
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = order ? order[q] : q;
    uint32_t at = (uint32_t)rstart[row];
    for (int w = 0; w < W; w++) {
      const uint32_t m = rmask[row * W + w] & ~vc_map_skip(centre, w);
      hdr[q * W + w] = make_uint2(at, m);
      at += __popc(m);
    }
  }
}

/* The dense table nb[n, K] back from the map (vc_plan_kernel_map's lists are written from
 * it), a warp a position. */
__global__ static void k_map_expand(const uint2 *hdr, const int32_t *nbl, const int32_t *order, int64_t n, int K,
                                    int centre, int32_t *nb) {
  const int lane = threadIdx.x & 31, W = VC_MAP_WORDS(K);
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t q = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; q < n; q += warps) {
    const int64_t row = order ? order[q] : q;
    for (int w = 0; w < W; w++) {
      const int c = w * 32 + lane;
      const int64_t at = vc_map_index1(hdr[q * W + w], lane);
      if (c < K) nb[row * K + c] = c == centre ? (int32_t)row : at >= 0 ? nbl[at] : -1;
    }
  }
}

/* Where each offset's bit of mask word 0 goes in the sort key: pos[r] for r < min(K, 32). */
typedef struct order_bits {
  uint8_t pos[32];
} order_bits;

/* The sort key's bit for each offset of mask word 0 (offsets 0 .. min(K, 32) - 1; the key
 * holds no other word): the more evenly an offset splits the rows (its pair count nearest
 * n_out / 2), the higher its bit, ties to the lower offset; pos[r] = r for the unused bits
 * r >= K. The radix sort then parts the rows first on the offsets they differ on most, and
 * a run of rows shares the rarely-split ones: on the suite S shells the 64-row unions (the
 * masked kernels' issued MMAs) shrink by 3-5 % at RES 32-128 against the offsets in index
 * order (bench/NOTES.md, session 15). Lane r of one warp computes pos[r] from the pair
 * offsets on the device, so the sort needs nothing from the host (it runs while the host
 * waits for the pair counts: see encodings). */
__device__ static void order_bits_warp(const int64_t *off, int64_t n_out, int K, uint8_t pos[32]) {
  const int r = threadIdx.x & 31, kw = K < 32 ? K : 32;
  const int64_t c = r < kw ? off[r + 1] - off[r] : 0;
  const long long d = 2 * c > n_out ? 2 * c - n_out : n_out - 2 * c;
  int above = 0; /* offsets of word 0 placed above r */
  for (int q = 0; q < kw; q++) {
    const long long dq = __shfl_sync(~0u, d, q);
    above += q != r && (dq < d || (dq == d && q < r));
  }
  pos[r] = (uint8_t)(r < kw ? kw - 1 - above : r);
}

/* Gray-code rank: the integer whose reflected Gray code is m, so rows whose masks differ in
 * one offset sit next to each other. */
__device__ static inline uint32_t gray_rank(uint32_t m) {
  m ^= m >> 16;
  m ^= m >> 8;
  m ^= m >> 4;
  m ^= m >> 2;
  m ^= m >> 1;
  return m;
}

/* One block per window of rows (windows keep the caller's, usually spatially local, row
 * order at large scale): a stable least-significant-digit radix sort of the rows' Gray
 * ranks in shared memory, 4 bits a pass, so equal masks keep row order. Keys are
 * rank << 14 | position; the thread that owns positions [t*ITEMS, (t+1)*ITEMS) counts its
 * digits in cnt[digit][t], and an exclusive scan of cnt in (digit, thread) order gives
 * every key its place. Two sizes: VC_ORDER_WINDOW, and VC_ORDER_WINDOW_SMALL where a
 * block's shared memory cannot hold the larger one (vc_cuda_kmap_init picks). */
#define ORDER_ITEMS 32 /* keys per thread: window = threads * ORDER_ITEMS */
#define ORDER_BINS 16
#define ORDER_POS_BITS 14
#define ORDER_MAX_WARPS 16
#define ORDER_PAD(i) ((i) + (i) / 32) /* one spare key every 32: a thread's run of keys starts on its own bank */
#define ORDER_SMEM(window) \
  (ORDER_PAD(window) * sizeof(uint64_t) + ORDER_BINS * ((window) / ORDER_ITEMS) * sizeof(uint32_t))
static_assert(VC_ORDER_WINDOW <= 1 << ORDER_POS_BITS && VC_ORDER_WINDOW_SMALL <= VC_ORDER_WINDOW,
              "window positions fit the key's low bits");
static_assert(VC_ORDER_WINDOW / ORDER_ITEMS <= 32 * ORDER_MAX_WARPS, "one thread per ORDER_ITEMS keys");

/* Row mask word m with offset r's bit moved to ob.pos[r]. */
__device__ static __forceinline__ uint32_t order_key_mask(uint32_t m, const order_bits &ob) {
  uint32_t k = 0;
#pragma unroll
  for (int r = 0; r < 32; r++) k |= (m >> r & 1u) << ob.pos[r];
  return k;
}

__device__ static __forceinline__ void order_window(const uint32_t *mask, int64_t n_out, int W, int bits,
                                                    const int64_t *off, int K, int32_t *order, const int window) {
  const int threads = window / ORDER_ITEMS;
  extern __shared__ uint64_t key[];
  uint32_t *cnt = (uint32_t *)(key + ORDER_PAD(window));
  __shared__ uint32_t wsum[ORDER_MAX_WARPS][ORDER_BINS], dbase[ORDER_BINS];
  __shared__ order_bits sob;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int64_t base = (int64_t)blockIdx.x * window;
  if (warp == 0) order_bits_warp(off, n_out, K, sob.pos);
  __syncthreads();
  const order_bits ob = sob;
  /* rows past n_out get all-ones keys: the largest, and already last */
  for (int i = t; i < window; i += threads)
    key[ORDER_PAD(i)] =
        base + i < n_out ? ((uint64_t)gray_rank(order_key_mask(mask[(base + i) * W], ob)) << ORDER_POS_BITS) | (uint32_t)i
                         : ~0ull;
  __syncthreads();
  for (int shift = ORDER_POS_BITS; shift < ORDER_POS_BITS + bits; shift += 4) {
    uint64_t k[ORDER_ITEMS];
#pragma unroll
    for (int i = 0; i < ORDER_ITEMS; i++) k[i] = key[ORDER_PAD(t * ORDER_ITEMS + i)];
#pragma unroll
    for (int d = 0; d < ORDER_BINS; d++) cnt[d * threads + t] = 0;
#pragma unroll
    for (int i = 0; i < ORDER_ITEMS; i++) cnt[((k[i] >> shift) & (ORDER_BINS - 1)) * threads + t]++;
#pragma unroll
    for (int d = 0; d < ORDER_BINS; d++) { /* cnt becomes the exclusive prefix within the warp */
      const uint32_t c = cnt[d * threads + t], x = vc_warp_inclusive_sum(c, lane);
      cnt[d * threads + t] = x - c;
      if (lane == 31) wsum[warp][d] = x;
    }
    __syncthreads(); /* also: every key of the window is in registers before the scatter */
    if (t < ORDER_BINS) { /* warp prefixes within digit t, then its total */
      uint32_t run = 0;
      for (int w = 0; w < threads / 32; w++) {
        const uint32_t v = wsum[w][t];
        wsum[w][t] = run;
        run += v;
      }
      dbase[t] = run;
    }
    __syncthreads();
    if (t == 0) {
      uint32_t run = 0;
      for (int d = 0; d < ORDER_BINS; d++) {
        const uint32_t v = dbase[d];
        dbase[d] = run;
        run += v;
      }
    }
    __syncthreads();
#pragma unroll
    for (int d = 0; d < ORDER_BINS; d++) cnt[d * threads + t] += dbase[d] + wsum[warp][d];
#pragma unroll
    for (int i = 0; i < ORDER_ITEMS; i++) {
      const uint32_t at = cnt[((k[i] >> shift) & (ORDER_BINS - 1)) * threads + t]++;
      key[ORDER_PAD(at)] = k[i];
    }
    __syncthreads();
  }
  for (int i = t; i < window; i += threads)
    if (base + i < n_out) order[base + i] = (int32_t)(base + (key[ORDER_PAD(i)] & ((1u << ORDER_POS_BITS) - 1)));
}

#define ORDER_KERNEL(name, window)                                                                                 \
  __global__ static void __launch_bounds__((window) / ORDER_ITEMS)                                                 \
      name(const uint32_t *mask, int64_t n_out, int W, int bits, const int64_t *off, int K, int32_t *order) {      \
    order_window(mask, n_out, W, bits, off, K, order, window);                                                     \
  }
ORDER_KERNEL(k_order, VC_ORDER_WINDOW)
ORDER_KERNEL(k_order_small, VC_ORDER_WINDOW_SMALL)

/* blk[b * W + w] = the OR of mask word w over the rows of block b of the order: a warp a
 * (block, word), two rows a lane (one thread a block, walking its 64 rows, took 15 us at
 * suite S RES 128). */
__global__ static void k_block_masks(const uint32_t *mask, const int32_t *order, int64_t n_out, int W, uint32_t *blk) {
  const int64_t nblk = (n_out + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK, warps = (int64_t)gridDim.x * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; j < nblk * W; j += warps) {
    const int64_t b = j / W, end = min(n_out, (b + 1) * VC_ORDER_BLOCK);
    const int w = (int)(j % W);
    uint32_t m = 0;
    for (int64_t i = b * VC_ORDER_BLOCK + lane; i < end; i += 32) m |= mask[(int64_t)order[i] * W + w];
    m = __reduce_or_sync(~0u, m);
    if (lane == 0) blk[j] = m;
  }
}

/* The masked kernels' stages follow each 128-row tile's union of offsets (a stage an offset
 * and channel chunk, whichever of its two 64-row blocks meets it), so fewer offsets in the
 * unions is fewer stages. The Gray order only sorts the masks; k_group then regroups each
 * WIN rows of it greedily into runs of VC_TILE_ROWS: a run starts at the row left with the
 * fewest offsets (ties: the first), takes every row left whose mask adds nothing to the
 * run's union (in order, while the run has room) and then the row that adds the fewest
 * offsets (ties: the most offsets of its own, then the first), until it is full. A larger
 * window gives each run more rows to choose from: on the suite S shell of RES 64 the
 * tiles' offsets are 1.60x the rows' in the Gray order, 1.44x after windows of 2048 and
 * 1.37x after windows of 8192 (simulated), and the masked forward and dgrad ran ~4 % faster
 * (ncu, RES 64 and 128). But a window is one chain of steps (a step a row that grows the
 * union or seeds a run, after placing the rows that add nothing: ~130 of them in 2048
 * rows, ~450 in 8192), so the larger window costs 0.46-0.61 ms a plan against 0.09-0.12
 * (ncu, RES 64 and 256), and only the widest layers (VC_GROUP_LARGE_CHANNELS) and large
 * plans (VC_GROUP_LARGE_ROWS) take it (vc_cuda_plan_groups; bench/NOTES.md, sessions
 * 21-23). One CTA of T threads a window (the windows run side by side): thread t holds rows
 * t PER .. in registers, the rows left as one bit each; a step is one pass over them, a
 * warp scan of the rows that add nothing and a warp minimum of the keys, one barrier, and
 * three warp reductions of the warps' results (the count before this warp, the total, the
 * least key). The rows' masks come from the map's headers (hdr, in the Gray order `in`);
 * the placed rows' window positions are kept in shared memory, and a last pass writes the
 * new order, its headers (hdr's, moved) and the window's block masks (blk, VC_ORDER_BLOCK
 * rows each) from them (block masks from a pass over the table in the new order took
 * 0.25 ms at 4 M rows; bench/NOTES.md, session 43). */
template <int WIN, int T>
__global__ static void __launch_bounds__(T) k_group(const uint2 *hdr, int64_t n_out, const int32_t *in, int32_t *order,
                                                    uint2 *ghdr, uint32_t *blk, uint32_t cbit) {
  constexpr int PER = WIN / T, WARPS = T / 32, RB = WIN <= 2048 ? 11 : WIN <= 8192 ? 13 : 15;
  static_assert(PER <= 32 && WARPS <= 32 && WIN <= 1 << RB && RB + 12 <= 32,
                "a thread's rows in one word, a warp's result a lane; the key's fields fit");
  static_assert(VC_ORDER_WINDOW % WIN == 0 && VC_ORDER_WINDOW_SMALL % WIN == 0 && WIN % VC_TILE_ROWS == 0 &&
                    WIN % VC_ORDER_BLOCK == 0,
                "windows lie inside the Gray windows and hold whole tiles and mask blocks");
  extern __shared__ uint32_t grp_smem[]; /* the WIN rows' masks, the rows by placed position */
  uint32_t *ms = grp_smem, *ps = grp_smem + WIN;
  __shared__ uint64_t wsum[2][WARPS]; /* a step's warp results, by step parity: best << 32 | zero rows */
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int64_t w0 = (int64_t)blockIdx.x * WIN;
  const int nw = (int)min((int64_t)WIN, n_out - w0);
  /* the row's mask (bit c: it meets offset c; K <= 32), which in a map with a centre lacks
   * the centre's bit (cbit: vc_map_skip): a bit every row has changes no choice below,
   * and the block masks get it back */
  for (int i = t; i < nw; i += T) ms[i] = hdr[w0 + i].y;
  __syncthreads();
  /* this thread's rows t PER + j: masks, their keys' fixed part (32 - own offsets) << RB |
   * row, and which are left */
  uint32_t v[PER], kc[PER], rem = 0;
#pragma unroll
  for (int j = 0; j < PER; j++) {
    const int i = t * PER + j;
    v[j] = i < nw ? ms[i] : 0u;
    kc[j] = (uint32_t)(32 - __popc(v[j])) << RB | (uint32_t)i;
    if (i < nw) rem |= 1u << j;
  }
  uint32_t u = 0;
  int pos = 0, run = 0, par = 0; /* rows placed, rows in the current run, wsum's half: uniform */
  while (pos < nw) {
    uint32_t zb = 0, best = ~0u; /* a seed: own offsets << RB | row; else growth << RB + 6 | kc */
    if (run == 0) {
#pragma unroll
      for (int j = 0; j < PER; j++)
        if (rem >> j & 1) best = min(best, (uint32_t)__popc(v[j]) << RB | (uint32_t)(t * PER + j));
    } else {
#pragma unroll
      for (int j = 0; j < PER; j++) {
        const uint32_t x = v[j] & ~u;
        if (rem >> j & 1) {
          if (!x) zb |= 1u << j;
          else best = min(best, (uint32_t)__popc(x) << (RB + 6) | kc[j]);
        }
      }
    }
    const int zc = __popc(zb), incl = (int)vc_warp_inclusive_sum((uint32_t)zc, lane);
    const uint32_t wbest = __reduce_min_sync(~0u, best);
    if (lane == 31) wsum[par][warp] = (uint64_t)wbest << 32 | (uint32_t)incl;
    __syncthreads();
    /* lane l reads warp l's result (reading all of them in every thread cost more than the
     * step's pass at 32 warps) */
    const uint64_t wl = lane < WARPS ? wsum[par][lane] : ~0ull << 32;
    const uint32_t cl = (uint32_t)wl;
    const int before = (int)__reduce_add_sync(~0u, lane < warp ? cl : 0u), total = (int)__reduce_add_sync(~0u, cl);
    best = __reduce_min_sync(~0u, (uint32_t)(wl >> 32));
    par ^= 1;
    const int need = VC_TILE_ROWS - run;
    for (int k = before + incl - zc; zb && k < need; k++) {
      const int j = __ffs(zb) - 1;
      zb &= zb - 1, rem &= ~(1u << j);
      ps[pos + k] = (uint32_t)(t * PER + j);
    }
    const int took = min(total, need);
    pos += took, run += took;
    if (run < VC_TILE_ROWS && pos < nw) { /* every row left adds an offset (or starts the run) */
      const int i = (int)(best & ((1u << RB) - 1));
      if (i / PER == t) rem &= ~(1u << (i % PER)), ps[pos] = (uint32_t)i;
      u = run == 0 ? ms[i] : u | ms[i];
      pos++, run++;
    }
    if (run == VC_TILE_ROWS) run = 0;
  }
  __syncthreads();
  for (int i = t; i < nw; i += T) order[w0 + i] = in[w0 + ps[i]], ghdr[w0 + i] = hdr[w0 + ps[i]];
  for (int b = warp; b * VC_ORDER_BLOCK < nw; b += WARPS) { /* a warp a block */
    uint32_t m = 0;
    for (int i = b * VC_ORDER_BLOCK + lane; i < min(nw, (b + 1) * VC_ORDER_BLOCK); i += 32) m |= ms[ps[i]];
    m = __reduce_or_sync(~0u, m);
    if (lane == 0) blk[w0 / VC_ORDER_BLOCK + b] = m | cbit;
  }
}
#define GRP_SMALL_WIN 2048
#define GRP_LARGE_WIN 8192
#define GRP_SMALL GRP_SMALL_WIN, 256 /* window, threads */
#define GRP_LARGE GRP_LARGE_WIN, 1024
#define GRP_SMEM(win) ((size_t)(win) * 8) /* a window's masks, rows by placed position */

template <int WIN, int T>
static void group_rows(const uint2 *hdr, int64_t n, const int32_t *in, int32_t *out, uint2 *ghdr, uint32_t *blk,
                       uint32_t cbit, cudaStream_t s) {
  k_group<WIN, T><<<(unsigned)((n + WIN - 1) / WIN), T, GRP_SMEM(WIN), s>>>(hdr, n, in, out, ghdr, blk, cbit);
}

/* tord = the VC_TILE_ROWS-row tiles by the count of offsets their rows meet (from the block
 * masks), descending, ties in tile order: a stable counting sort in one block of
 * TORD_THREADS, a chunk of TORD_THREADS tiles at a time (rank among equal counts: earlier
 * warps' counts, then earlier lanes of the warp). Counts from TORD_BINS - 1 up share a bin. */
#define TORD_THREADS 1024
#define TORD_BINS 128

/* The bin of tile i: the most offsets, bin 0. */
__device__ static inline int tord_bin(const uint32_t *blk, int64_t n_out, int W, int64_t i) {
  int c = 0;
  for (int w = 0; w < W; w++) c += __popc(vc_cuda_blk_union(blk, W, n_out, i * VC_TILE_ROWS, VC_TILE_ROWS, w));
  return TORD_BINS - 1 - min(c, TORD_BINS - 1);
}

__global__ static void __launch_bounds__(TORD_THREADS)
    k_tile_order(const uint32_t *blk, int64_t n_out, int W, int32_t *tord) {
  __shared__ uint32_t start[TORD_BINS];                   /* the bin's next place */
  __shared__ uint32_t wpos[TORD_THREADS / 32][TORD_BINS]; /* a chunk's count, then place, by warp and bin */
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int64_t tiles = (n_out + VC_TILE_ROWS - 1) / VC_TILE_ROWS;
  for (int b = t; b < TORD_BINS; b += TORD_THREADS) start[b] = 0;
  __syncthreads();
  for (int64_t i = t; i < tiles; i += TORD_THREADS) atomicAdd(&start[tord_bin(blk, n_out, W, i)], 1u);
  __syncthreads();
  if (t == 0)
    for (uint32_t b = 0, run = 0; b < TORD_BINS; b++) {
      const uint32_t c = start[b];
      start[b] = run, run += c;
    }
  for (int64_t c0 = 0; c0 < tiles; c0 += TORD_THREADS) {
    for (int i = t; i < TORD_THREADS / 32 * TORD_BINS; i += TORD_THREADS) wpos[i / TORD_BINS][i % TORD_BINS] = 0;
    __syncthreads(); /* also: start is written (first chunk) */
    const int64_t i = c0 + t;
    const int b = i < tiles ? tord_bin(blk, n_out, W, i) : -1;
    const uint32_t peers = __match_any_sync(0xffffffffu, b), rank = __popc(peers & ((1u << lane) - 1));
    if (b >= 0 && rank == 0) wpos[warp][b] = __popc(peers);
    __syncthreads();
    for (int bb = t; bb < TORD_BINS; bb += TORD_THREADS) {
      uint32_t run = start[bb];
      for (int w = 0; w < TORD_THREADS / 32; w++) {
        const uint32_t c = wpos[w][bb];
        wpos[w][bb] = run, run += c;
      }
      start[bb] = run;
    }
    __syncthreads();
    if (b >= 0) tord[wpos[warp][b] + rank] = (int32_t)i;
    __syncthreads(); /* wpos read before the next chunk clears it */
  }
}

/* ---- host side ------------------------------------------------------------------------- */

#define TRY(call)                                                                                                      \
  do {                                                                                                                 \
    vc_status st_ = (call);                                                                                            \
    if (st_ != VC_OK) return st_;                                                                                      \
  } while (0)

static vc_status dev_alloc(vc_context *ctx, void **ptr, size_t bytes, cudaStream_t s, const char *api, const char *what) {
  cudaError_t e = cudaMallocFromPoolAsync(ptr, bytes ? bytes : 16, vc_cuda(ctx)->pool, s);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *ptr = NULL;
    return vc_fail(ctx, e == cudaErrorMemoryAllocation ? VC_ERR_OUT_OF_MEMORY : VC_ERR_DEVICE,
                   "%s: allocating %zu bytes of device memory for %s failed: %s", api, bytes, what,
                   cudaGetErrorString(e));
  }
  return VC_OK;
}

/* A buffer the plan owns (vc_cuda_plan_release frees it), counted for vc_plan_memory_bytes. */
static vc_status plan_alloc(vc_context *ctx, vc_plan *p, void **ptr, size_t bytes, cudaStream_t s, const char *what) {
  TRY(dev_alloc(ctx, ptr, bytes, s, "vc_plan_create", what));
  p->mem_bytes += bytes;
  return VC_OK;
}

/* Slots per key, in quarters: load 1/2 keeps linear probes short (1.5 expected on a hit). */
#define VC_TABLE_QUARTERS 8
static uint64_t table_capacity(int64_t n) {
  const uint64_t cap = (uint64_t)n * VC_TABLE_QUARTERS / 4 + 1;
  return cap < 1024 ? 1024 : cap;
}

/* Temporary device memory of one plan build, released on every path. */
#define SCRATCH_MAX 16 /* a build takes at most 13 (a strided plan's) */

typedef struct scratch {
  void *p[SCRATCH_MAX];
  int n;
  cudaStream_t s;
  bool forked; /* encodings queued work on the side stream (a build that then returns VC_OK
                  has recorded its end, vc_cuda_state.join) */
  const char *api; /* the call, for its messages */
} scratch;

static vc_status scratch_alloc(vc_context *ctx, scratch *t, void **ptr, size_t bytes, const char *what) {
  if (t->n == SCRATCH_MAX) return vc_fail(ctx, VC_ERR_INTERNAL, "%s: more than %d scratch buffers", t->api, SCRATCH_MAX);
  vc_status st = dev_alloc(ctx, ptr, bytes, t->s, t->api, what);
  if (st == VC_OK) t->p[t->n++] = *ptr;
  return st;
}

static void scratch_free(scratch *t) {
  for (int i = 0; i < t->n; i++) cudaFreeAsync(t->p[i], t->s);
  t->n = 0;
}

/* Range check and hash of the input sites. Nothing is read back here: flags[0] (first
 * out-of-range row) and flags[1] (a duplicated row) are checked at the build's next
 * synchronisation by input_error. */
static vc_status hash_inputs(vc_context *ctx, const int32_t *coords, int64_t n, uint64_t *keys, scratch *t,
                             slot **table, uint64_t *cap, unsigned long long *flags) {
  const cudaStream_t s = t->s;
  *cap = table_capacity(n);
  TRY(scratch_alloc(ctx, t, (void **)table, *cap * sizeof(slot), "the input hash table"));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(*table, 0xff, *cap * sizeof(slot), s));
  k_check_pack<<<vc_grid(n), 256, 0, s>>>(coords, n, keys, flags);
  k_insert_inputs<<<vc_grid(n), 256, 0, s>>>(keys, n, *table, *cap, flags + 1);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

/* Device memory home, ordered on the build's stream (the caller's coordinates may still be
 * being written by work queued there), then waited for. */
static vc_status read_back(vc_context *ctx, void *dst, const void *src, size_t bytes, cudaStream_t s) {
  if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)
    return vc_fail(ctx, VC_ERR_DEVICE, "vc_plan_create: reading coords back failed: %s",
                   cudaGetErrorString(cudaGetLastError()));
  return VC_OK;
}

/* The CPU engine's message for bad input rows, from the flags of hash_inputs. */
static vc_status input_error(vc_context *ctx, const int32_t *coords, int64_t n, const unsigned long long h[2],
                             cudaStream_t s) {
  if (h[0] == ~0ull && h[1] == ~0ull) return VC_OK;
  /* Error path: bring the coordinates home to name the culprit exactly as the CPU does. */
  int32_t *hc = (int32_t *)malloc((size_t)n * 4 * sizeof(int32_t));
  if (!hc) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
  vc_status st = read_back(ctx, hc, coords, (size_t)n * 4 * sizeof(int32_t), s);
  if (st == VC_OK && h[0] != ~0ull) {
    st = vc_check_coords(ctx, hc, n);
  } else if (st == VC_OK) {
    /* Either copy may have lost the insert race: name the first pair of equal rows. */
    const int32_t *d = hc + 4 * h[1];
    for (int64_t i = 0; i < n; i++)
      if (i != (int64_t)h[1] && !memcmp(hc + 4 * i, d, 4 * sizeof(int32_t))) {
        st = vc_fail_duplicate(ctx, i, (int64_t)h[1], d);
        break;
      }
  }
  free(hc);
  return st;
}

/* The brick table and pool of the input sites (submanifold). The pool's size is the brick
 * count, so this is the build's first synchronisation; input range errors are reported
 * here, duplicates (flags[1]) at the next one. */
static vc_status hash_bricks(vc_context *ctx, const int32_t *coords, int64_t n, uint64_t *keys, scratch *t,
                             slot **table, uint64_t *cap, int32_t **pool, unsigned long long *flags) {
  const cudaStream_t s = t->s;
  /* bricks <= sites: load at most 2/3, usually far less (a surface fills a brick's face);
   * sites < 2^31, so the capacity stays below 2^32 as brick_start needs */
  *cap = (uint64_t)n + (uint64_t)n / 2 + 1024;
  TRY(scratch_alloc(ctx, t, (void **)table, *cap * sizeof(slot), "the brick table"));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(*table, 0xff, *cap * sizeof(slot), s));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(flags + 2, 0, sizeof *flags, s));
  k_check_pack<<<vc_grid(n), 256, 0, s>>>(coords, n, keys, flags);
  k_claim_bricks<<<vc_grid(n), CLAIM_THREADS, 0, s>>>(coords, n, *table, *cap, flags + 2);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  unsigned long long h[3]; /* input range, (duplicates: not yet), brick count */
  VC_CUDA_TRY(ctx, cudaMemcpyAsync(h, flags, sizeof h, cudaMemcpyDeviceToHost, s));
  VC_CUDA_TRY(ctx, cudaStreamSynchronize(s));
  h[1] = ~0ull;
  TRY(input_error(ctx, coords, n, h, s));
  const size_t bytes = (size_t)h[2] * BRICK_SITES * sizeof(int32_t);
  TRY(scratch_alloc(ctx, t, (void **)pool, bytes ? bytes : 1, "the brick pool"));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(*pool, 0xff, bytes, s));
  k_fill_bricks<<<vc_grid(n), 256, 0, s>>>(coords, n, *table, *cap, *pool, flags + 1);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

/* Output sites of a sparse or transposed conv, sorted; allocates p->out_keys. */
static vc_status output_sites(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_geom &g, bool transposed,
                              scratch *t, unsigned long long *flags) {
  const cudaStream_t s = t->s;
  const int64_t n = p->n_in;
  /* Outputs one input can reach, per axis: transposed k; strided, the offsets r with
   * r*d = c + pad (mod s), which recur every s / gcd(s, d) offsets. */
  int64_t reach = 1;
  for (int a = 0; a < 3; a++) {
    int x = g.s[a], y = g.d[a];
    while (y) {
      const int z = x % y;
      x = y, y = z;
    }
    const int period = g.s[a] / x;
    reach *= transposed ? g.k[a] : (g.k[a] + period - 1) / period;
  }
  const int64_t bound = n * reach;
  uint64_t cap = table_capacity(bound), *okeys, *list;
  TRY(scratch_alloc(ctx, t, (void **)&okeys, cap * sizeof(uint64_t), "the output hash table"));
  TRY(scratch_alloc(ctx, t, (void **)&list, (size_t)(bound + 1) * sizeof(uint64_t), "output sites"));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(okeys, 0xff, cap * sizeof(uint64_t), s));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(flags + 2, 0, sizeof *flags, s));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(flags + 3, 0xff, sizeof *flags, s));
  k_out_candidates<<<vc_grid(n * g.K), 256, 0, s>>>(coords, n, g, transposed, okeys, cap, list, flags + 2, flags + 3);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  unsigned long long h[4]; /* input range, input duplicate, output count, output range */
  VC_CUDA_TRY(ctx, cudaMemcpyAsync(h, flags, sizeof h, cudaMemcpyDeviceToHost, s));
  VC_CUDA_TRY(ctx, cudaStreamSynchronize(s));
  TRY(input_error(ctx, coords, n, h, s));
  if (h[3] != ~0ull) {
    int64_t i = (int64_t)(h[3] / g.K), tt[3];
    int r = (int)(h[3] % g.K);
    int32_t c[4];
    TRY(read_back(ctx, c, coords + 4 * i, sizeof c, s));
    vc_geom_pair(&g, transposed, c, r, tt);
    return vc_fail_output_range(ctx, c, tt, i, r);
  }
  p->n_out = (int64_t)h[2];
  if (p->n_out > INT32_MAX - 1)
    return vc_fail(ctx, VC_ERR_OUT_OF_RANGE, "output sites: %lld exceed the limit of %d", (long long)p->n_out,
                   INT32_MAX - 1);
  void *sort_tmp;
  TRY(scratch_alloc(ctx, t, &sort_tmp, vc_cuda_sort_tmp_bytes(p->n_out), "sorting output sites"));
  vc_cuda_sort_u64(list, p->n_out, sort_tmp, s);
  TRY(plan_alloc(ctx, p, (void **)&p->out_keys, (size_t)p->n_out * sizeof(uint64_t), s, "output sites"));
  VC_CUDA_TRY(ctx, cudaMemcpyAsync(p->out_keys, list, (size_t)p->n_out * sizeof(uint64_t), cudaMemcpyDeviceToDevice, s));
  return VC_OK;
}

/* off[r] = start[r * nblk] for the offsets with lists (r < L), off[L] = their total; where
 * L < K (vc_plan.lists) the centre's n pairs follow, then offset r past it as many as
 * offset K-1-r: the only numbers the host needs. The starts are loaded in parallel and the
 * running sum kept in shared memory: one thread's chain of global reads after its own
 * writes took 7.8 us at suite S RES 512, on the build's critical path. */
__global__ static void __launch_bounds__(256) k_pair_offsets(const int64_t *start, const int32_t *cnt, int64_t nblk,
                                                             int K, int L, int64_t n, int64_t *off) {
  __shared__ int64_t o[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX + 1];
  for (int r = threadIdx.x; r < L; r += blockDim.x) o[r] = start[(int64_t)r * nblk];
  if (threadIdx.x == 0) o[L] = L > 0 ? start[nblk * L - 1] + cnt[nblk * L - 1] : 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    if (L < K) o[L + 1] = o[L] + n;
    for (int r = L + 1; r < K; r++) o[r + 1] = o[r] + (o[K - r] - o[K - 1 - r]);
  }
  __syncthreads();
  for (int r = threadIdx.x; r <= K; r += blockDim.x) off[r] = o[r];
}

/* pair_start's rows of the offsets without lists (r >= L, vc_plan.lists), after
 * k_pair_offsets: the centre's block b starts at its row b PAIR_ROWS, and offset r past it
 * where offset K-1-r's block b does, by input rows (vc_cuda_plan.pair_start). */
__global__ static void k_mirror_starts(int64_t *start, const int64_t *off, int64_t nblk, int K, int L, int64_t n) {
  const int64_t total = (K - L) * nblk;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int r = L + (int)(i / nblk), m = K - 1 - r;
    const int64_t b = i % nblk;
    start[r * nblk + b] = r == L ? off[L] + min(b * PAIR_ROWS, n) : start[m * nblk + b] - off[m] + off[r];
  }
}

/* Column counts -> cp->offsets_dev and cp->pair_start (the counts' exclusive scan in
 * (offset, row block) order, over the offsets with lists, then k_mirror_starts), on the
 * device: nothing waits here. cnt holds the counts of every (offset, row block) from the row
 * kernels. */
static vc_status pair_counts(vc_context *ctx, vc_plan *p, vc_cuda_plan *cp, const int32_t *cnt, scratch *t) {
  const cudaStream_t s = t->s;
  const int K = p->kvol;
  const int64_t nblk = (p->n_out + PAIR_ROWS - 1) / PAIR_ROWS, ncnt = nblk * K, nlist = nblk * p->lists;
  TRY(plan_alloc(ctx, p, (void **)&cp->offsets_dev, (size_t)(K + 1) * sizeof(int64_t), s, "pair offsets"));
  if (nblk > 0) {
    TRY(plan_alloc(ctx, p, (void **)&cp->pair_start, (size_t)ncnt * sizeof(int64_t), s, "pair block starts"));
    if (nlist > 0) {
      void *tmp;
      TRY(scratch_alloc(ctx, t, &tmp, vc_cuda_scan_tmp_bytes(nlist), "pair counts"));
      vc_cuda_scan_exclusive(cnt, cp->pair_start, nlist, tmp, s);
    }
    k_pair_offsets<<<1, 256, 0, s>>>(cp->pair_start, cnt, nblk, K, p->lists, p->n_out, cp->offsets_dev);
    if (p->lists < K)
      k_mirror_starts<<<vc_grid((K - p->lists) * nblk), 256, 0, s>>>(cp->pair_start, cp->offsets_dev, nblk, K,
                                                                     p->lists, p->n_out);
    VC_CUDA_TRY(ctx, cudaGetLastError());
  } else {
    VC_CUDA_TRY(ctx, cudaMemsetAsync(cp->offsets_dev, 0, (size_t)(K + 1) * sizeof(int64_t), s));
  }
  return VC_OK;
}

/* p->offsets (host) after pair_counts, and p->pair_in and p->pair_out allocated (the build
 * writes them); also checks the input flags (flags[0..1] of hash_inputs, or ~0 for inverse
 * plans) at this, the build's synchronisation, which waits for the build's stream only (not
 * the encodings' side stream). */
static vc_status pair_lists(vc_context *ctx, vc_plan *p, vc_cuda_plan *cp, const int32_t *coords, scratch *t,
                            const unsigned long long *flags) {
  const cudaStream_t s = t->s;
  const int K = p->kvol;
  p->offsets = (int64_t *)calloc((size_t)K + 1, sizeof(int64_t));
  if (!p->offsets) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
  unsigned long long h[2];
  VC_CUDA_TRY(ctx, cudaMemcpyAsync(p->offsets, cp->offsets_dev, (size_t)(K + 1) * sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, s));
  VC_CUDA_TRY(ctx, cudaMemcpyAsync(h, flags, sizeof h, cudaMemcpyDeviceToHost, s));
  VC_CUDA_TRY(ctx, cudaStreamSynchronize(s));
  TRY(input_error(ctx, coords, p->n_in, h, s));
  p->n_pairs = p->offsets[K];
  if (p->n_pairs > (int64_t)UINT32_MAX) /* the map's 32-bit entry indices */
    return vc_fail(ctx, VC_ERR_OUT_OF_RANGE, "vc_plan_create: %lld neighbour pairs; a CUDA plan holds fewer than 2^32",
                   (long long)p->n_pairs);
  p->max_pairs = 0;
  for (int r = 0; r < K; r++)
    if (p->offsets[r + 1] - p->offsets[r] > p->max_pairs) p->max_pairs = p->offsets[r + 1] - p->offsets[r];
  const size_t stored = (size_t)p->offsets[p->lists] * sizeof(int32_t);
  TRY(plan_alloc(ctx, p, (void **)&p->pair_in, stored, s, "the kernel map"));
  TRY(plan_alloc(ctx, p, (void **)&p->pair_out, stored, s, "the kernel map"));
  return VC_OK;
}

/* The regrouped order's buffer (vc_cuda_plan_groups), where the order could pay: the masked
 * kernels, one mask word, and a tile order with at least half a tile a multiprocessor, or
 * VC_GROUP_LARGE_ROWS rows. One buffer of 4-byte words: the map's headers in that order (8
 * bytes a row, first: 8-byte aligned), the order, tile order (where the plan has one),
 * block masks (with four allocations suite L's map build read 0.15-0.27 ms longer, with
 * one within the spread). The order is built from the masks in the map's headers, not from
 * kept row masks: 4 bytes a site less (15.7 MiB at suite S RES 1024; bench/NOTES.md,
 * session 43). */
static vc_status group_buffer(vc_context *ctx, vc_plan *p, vc_cuda_plan *cp, int W, cudaStream_t s) {
  const int64_t n = p->n_out, nblk = (n + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK,
                tiles = (n + VC_TILE_ROWS - 1) / VC_TILE_ROWS;
  const int n_sm = vc_cuda(ctx)->n_sm;
  const bool tord = vc_cuda_tile_order_used(tiles, n_sm);
  if (!vc_cuda(ctx)->masked || W != 1 || n == 0 || !(tord ? 2 * tiles >= n_sm : n >= VC_GROUP_LARGE_ROWS))
    return VC_OK;
  const int64_t gt = tord ? tiles : 0;
  TRY(plan_alloc(ctx, p, (void **)&cp->g_hdr, (size_t)(3 * n + gt + nblk) * 4, s, "the regrouped order"));
  cp->g_order = (int32_t *)(cp->g_hdr + n);
  cp->g_tile = gt ? cp->g_order + n : NULL;
  cp->g_blk = (uint32_t *)(cp->g_order + n + gt);
  VC_CUDA_TRY(ctx, cudaEventCreateWithFlags(&cp->g_done, cudaEventDisableTiming));
  return VC_OK;
}

/* Gray order, block masks and tile order from the row masks (W words a row), and
 * (non-submanifold) the reverse table *nbt (scratch) from the table nb, after pair_counts.
 * The buffers are allocated on the build's stream; the kernels run on the context's side
 * stream (vc_cuda_state.aux), from an event on the build's stream, so the sort (its longest
 * part: one block a window of rows, 73 us at suite S RES 128 and 1 M rows) runs while the
 * host reads the pair counts back; the build's stream waits on the join event before the
 * scratch (rmask, the tables) goes (vc_cuda_plan_build). */
static vc_status encodings(vc_context *ctx, vc_plan *p, vc_cuda_plan *cp, const int32_t *nb, const uint32_t *rmask,
                           int W, int32_t **nbt, scratch *t) {
  const int K = p->kvol;
  const cudaStream_t s = t->s;
  const vc_cuda_state *cs = vc_cuda(ctx);
  const int64_t n = p->n_out, nblk = (n + VC_ORDER_BLOCK - 1) / VC_ORDER_BLOCK;
  TRY(plan_alloc(ctx, p, (void **)&cp->order, (size_t)n * sizeof(int32_t), s, "the row order"));
  TRY(plan_alloc(ctx, p, (void **)&cp->blk_mask, (size_t)nblk * W * sizeof(uint32_t), s, "block masks"));
  const int64_t tiles = (n + VC_TILE_ROWS - 1) / VC_TILE_ROWS;
  if (vc_cuda_tile_order_used(tiles, cs->n_sm)) /* else no call has so few units */
    TRY(plan_alloc(ctx, p, (void **)&cp->tile_order, (size_t)tiles * sizeof(int32_t), s, "the tile order"));
  const bool reverse = p->desc.kind != VC_CONV_SUBMANIFOLD;
  if (reverse) TRY(scratch_alloc(ctx, t, (void **)nbt, (size_t)p->n_in * K * sizeof(int32_t), "the reverse table"));
  const cudaStream_t a = cs->aux;
  VC_CUDA_TRY(ctx, cudaEventRecord(cs->fork, s));
  t->forked = true;
  VC_CUDA_TRY(ctx, cudaStreamWaitEvent(a, cs->fork, 0));
  if (n > 0) {
    const int bits = (min(K, 32) + 3) / 4 * 4; /* the Gray rank of mask word 0 */
    const int window = cs->order_window;
    (window == VC_ORDER_WINDOW ? k_order : k_order_small)<<<(unsigned)((n + window - 1) / window),
                                                           window / ORDER_ITEMS, ORDER_SMEM(window), a>>>(
        rmask, n, W, bits, cp->offsets_dev, K, cp->order);
    k_block_masks<<<vc_grid(nblk * W * 32), 256, 0, a>>>(rmask, cp->order, n, W, cp->blk_mask);
    if (cp->tile_order) k_tile_order<<<1, TORD_THREADS, 0, a>>>(cp->blk_mask, n, W, cp->tile_order);
  }
  if (reverse) {
    VC_CUDA_TRY(ctx, cudaMemsetAsync(*nbt, 0xff, (size_t)p->n_in * K * sizeof(int32_t), a));
    if (n > 0) k_reverse<<<vc_grid(n * K), 256, 0, a>>>(nb, n, K, *nbt);
  }
  VC_CUDA_TRY(ctx, cudaGetLastError());
  VC_CUDA_TRY(ctx, cudaEventRecord(cs->join, a));
  return VC_OK;
}

/* Built at the first call that asks, not with the plan: it costs about 0.1 ms (ncu, suite S
 * RES 64-256), which wide layers repay in a call or two and narrow ones not at all (suite
 * L's map build went 4.4 -> 5.3 ms for 2 % less convolution time; bench/NOTES.md, session
 * 21). That call's width picks the window, once for the plan: `large` (8192 rows) costs
 * 0.46-0.61 ms and saves 30-40 us a forward or dgrad at C = 1024 and 512 (session 22), and
 * 0.45 / 1.5 ms for 50 / 75 us at 1 M rows and C = 128 / 4 M and C = 64 (session 23). The
 * window of the built order is kept for vc_cuda_plan_group_window. */
extern "C" vc_status vc_cuda_plan_groups(vc_context *ctx, const vc_plan *p, cudaStream_t s, bool large,
                                         const int32_t **order, const uint2 **hdr, const uint32_t **blk,
                                         const int32_t **tile) {
  vc_cuda_plan *cp = (vc_cuda_plan *)p->backend_data; /* its lazily built part only */
  *order = NULL, *hdr = NULL, *blk = NULL, *tile = NULL;
  if (!cp->g_order) return VC_OK;
  /* a call captured into a graph keeps the Gray order: a build recorded there would run only
   * with the graph, and waits on events from outside a capture are not allowed in it */
  cudaStreamCaptureStatus cap;
  VC_CUDA_TRY(ctx, cudaStreamIsCapturing(s, &cap));
  if (cap != cudaStreamCaptureStatusNone) return VC_OK;
  const int64_t n = p->n_out;
  if (!cp->g_window) {
    (large ? group_rows<GRP_LARGE> : group_rows<GRP_SMALL>)(cp->hdr, n, cp->order, cp->g_order, cp->g_hdr, cp->g_blk,
                                                            vc_map_skip(cp->centre, 0), s);
    if (cp->g_tile) k_tile_order<<<1, TORD_THREADS, 0, s>>>(cp->g_blk, n, 1, cp->g_tile);
    VC_CUDA_TRY(ctx, cudaGetLastError());
    VC_CUDA_TRY(ctx, cudaEventRecord(cp->g_done, s));
    cp->g_window = large ? GRP_LARGE_WIN : GRP_SMALL_WIN, cp->g_stream = s;
  } else if (s != cp->g_stream) {
    VC_CUDA_TRY(ctx, cudaStreamWaitEvent(s, cp->g_done, 0));
  }
  *order = cp->g_order, *hdr = cp->g_hdr, *blk = cp->g_blk, *tile = cp->g_tile;
  return VC_OK;
}

extern "C" int vc_cuda_plan_group_window(const vc_plan *p) {
  const vc_cuda_plan *cp = vc_cuda_plan_of(p);
  return cp ? cp->g_window : 0;
}

/* The scratch of an exclusive scan of n counts, one allocation: the starts, the counts, the
 * scan's temporary. The map's entries are kept in row order, each row's from such a scan of
 * the rows' entry counts (the row kernels write them: emit_columns); vc_plan_kernel_map
 * scans its pair counts in one too. */
typedef struct scan_scratch {
  int64_t *start;
  int32_t *cnt;
  void *tmp;
} scan_scratch;

static vc_status scan_scratch_alloc(vc_context *ctx, int64_t n, scan_scratch *sc, scratch *t) {
  const int64_t m = n > 0 ? n : 1, a = vc_round_up(m * 8, 256), b = vc_round_up(m * 4, 256);
  char *base;
  TRY(scratch_alloc(ctx, t, (void **)&base, (size_t)(a + b) + vc_cuda_scan_tmp_bytes(m), "a prefix sum"));
  sc->start = (int64_t *)base, sc->cnt = (int32_t *)(base + a), sc->tmp = base + a + b;
  return VC_OK;
}

/* A map's plan memory, one allocation (the allocations of a build are a large share of its
 * time on small plans): headers over its n positions, then its p->n_pairs entries, less
 * the centre's n where it has one (cuda_internal.h, vc_map_skip). */
static vc_status map_alloc(vc_context *ctx, vc_plan *p, int64_t n, int centre, uint2 **hdr, int32_t **nbl,
                           scratch *t) {
  const size_t hb = (size_t)n * VC_MAP_WORDS(p->kvol) * sizeof(uint2);
  const int64_t entries = p->n_pairs - (centre >= 0 ? n : 0);
  TRY(plan_alloc(ctx, p, (void **)hdr, hb + (size_t)entries * sizeof(int32_t), t->s, "the neighbour map"));
  *nbl = (int32_t *)((char *)*hdr + hb);
  return VC_OK;
}

static vc_status build(vc_context *ctx, vc_plan *p, vc_cuda_plan *cp, const int32_t *coords, const vc_plan *paired,
                       scratch *t) {
  const cudaStream_t s = t->s;
  const vc_conv_kind kind = p->desc.kind;
  const vc_geom g = vc_geom_of(&p->desc);
  cp->centre = kind == VC_CONV_SUBMANIFOLD ? g.K / 2 : -1; /* its entries are the order's (vc_map_skip) */
  unsigned long long *flags; /* see hash_inputs and output_sites */
  TRY(scratch_alloc(ctx, t, (void **)&flags, 4 * sizeof *flags, "flags"));
  VC_CUDA_TRY(ctx, cudaMemsetAsync(flags, 0xff, 2 * sizeof *flags, s));
  slot *table = NULL; /* sites, or bricks (submanifold) */
  uint64_t cap = 0;
  int32_t *pool = NULL; /* submanifold: the brick pool */
  /* Submanifold maps of many sites go through bricks; below VC_BRICK_MIN_SITES the brick
   * table's extra synchronisation (its pool is sized by the brick count) costs more than
   * the symmetric site-table lookups it saves. */
  const bool bricks = kind == VC_CONV_SUBMANIFOLD && p->n_in >= VC_BRICK_MIN_SITES;

  if (kind == VC_CONV_INVERSE) {
    p->n_in = paired->n_out;
    p->n_out = paired->n_in;
    const size_t kin = (size_t)p->n_in * sizeof(uint64_t), kout = (size_t)p->n_out * sizeof(uint64_t);
    TRY(plan_alloc(ctx, p, (void **)&p->in_keys, kin, s, "input sites"));
    TRY(plan_alloc(ctx, p, (void **)&p->out_keys, kout, s, "output sites"));
    VC_CUDA_TRY(ctx, cudaMemcpyAsync(p->in_keys, paired->out_keys, kin, cudaMemcpyDeviceToDevice, s));
    VC_CUDA_TRY(ctx, cudaMemcpyAsync(p->out_keys, paired->in_keys, kout, cudaMemcpyDeviceToDevice, s));
    if (coords && p->n_in > 0) { /* must equal the paired outputs: compare on the host */
      int32_t *a = (int32_t *)malloc((size_t)p->n_in * 4 * sizeof(int32_t));
      uint64_t *b = (uint64_t *)malloc(kin);
      vc_status st = VC_OK;
      if (!a || !b) st = vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
      if (st == VC_OK) st = read_back(ctx, a, coords, (size_t)p->n_in * 4 * sizeof(int32_t), s);
      if (st == VC_OK) st = read_back(ctx, b, p->in_keys, kin, s);
      if (st == VC_OK) st = vc_check_paired_coords(ctx, a, b, p->n_in);
      free(a), free(b);
      if (st != VC_OK) return st;
    }
  } else {
    TRY(plan_alloc(ctx, p, (void **)&p->in_keys, (size_t)p->n_in * sizeof(uint64_t), s, "input sites"));
    if (bricks) TRY(hash_bricks(ctx, coords, p->n_in, p->in_keys, t, &table, &cap, &pool, flags));
    else TRY(hash_inputs(ctx, coords, p->n_in, p->in_keys, t, &table, &cap, flags));
    if (kind == VC_CONV_SUBMANIFOLD) {
      p->n_out = p->n_in;
      p->out_keys = p->in_keys;
    } else {
      TRY(output_sites(ctx, p, coords, g, kind == VC_CONV_TRANSPOSED, t, flags));
    }
  }

  /* nb (the dense table, [n_out, K]: the map, the pair lists and the reverse table are
   * written from it), row masks and the per-block column counts the pair scan needs */
  const int64_t nbn = p->n_out * g.K, nrb = (p->n_out + PAIR_ROWS - 1) / PAIR_ROWS;
  const int W = VC_MAP_WORDS(g.K); /* mask words a row: the map's headers' */
  int32_t *cnt, *nb, *nbt = NULL;
  uint32_t *rmask; /* [n_out, W] bit r set when nb[o, r] >= 0: the orders, block masks and map headers */
  TRY(scratch_alloc(ctx, t, (void **)&nb, (size_t)nbn * sizeof(int32_t), "the neighbour table"));
  TRY(group_buffer(ctx, p, cp, W, s));
  TRY(scratch_alloc(ctx, t, (void **)&rmask, (size_t)p->n_out * W * sizeof(uint32_t), "row masks"));
  TRY(scratch_alloc(ctx, t, (void **)&cnt, (size_t)(nrb * g.K) * sizeof(int32_t), "pair counts"));
  scan_scratch rs, ts; /* the map's and the reverse map's row starts */
  TRY(scan_scratch_alloc(ctx, p->n_out, &rs, t));
  if (p->n_out > 0) {
    if (kind == VC_CONV_INVERSE) {
      VC_CUDA_TRY(ctx, cudaMemsetAsync(nb, 0xff, (size_t)nbn * sizeof(int32_t), s));
      k_inverse_neighbors<<<vc_grid(paired->n_pairs), 256, 0, s>>>(vc_cuda_plan_of(paired)->offsets_dev, g.K,
                                                                   paired->pair_in, paired->pair_out, paired->n_pairs,
                                                                   nb);
      k_row_stats<<<(unsigned)nrb, PAIR_ROWS, 0, s>>>(nb, p->n_out, g.K, W, rmask, cnt, rs.cnt, cp->centre);
    } else if (bricks) {
      k_lookup_bricks<<<(unsigned)nrb, PAIR_ROWS, 0, s>>>(p->in_keys, p->n_out, g, table, cap, pool,
                                                                       nb, rmask, W, cnt, rs.cnt, cp->centre);
    } else if (kind == VC_CONV_SUBMANIFOLD) {
      VC_CUDA_TRY(ctx, cudaMemsetAsync(nb, 0xff, (size_t)nbn * sizeof(int32_t), s));
      int lg = 0; /* lanes per row: a power of two above K / 2 */
      while ((1 << lg) <= g.K / 2) lg++;
      k_neighbors_submanifold<<<vc_grid(p->n_out << lg), 256, 0, s>>>(p->in_keys, p->n_out, g, lg, table, cap, nb);
      k_row_stats<<<(unsigned)nrb, PAIR_ROWS, 0, s>>>(nb, p->n_out, g.K, W, rmask, cnt, rs.cnt, cp->centre);
    } else {
      k_lookup_rows<<<(unsigned)nrb, PAIR_ROWS, 0, s>>>(p->out_keys, p->n_out, g, kind == VC_CONV_TRANSPOSED, table,
                                                        cap, nb, rmask, W, cnt, rs.cnt);
    }
    VC_CUDA_TRY(ctx, cudaGetLastError());
  }
  if (cp->centre >= 0) p->lists = cp->centre; /* the offsets past the centre mirror those before it (vc_plan.lists) */
  TRY(pair_counts(ctx, p, cp, cnt, t));
  TRY(encodings(ctx, p, cp, nb, rmask, W, &nbt, t));
  /* the map's row starts, queued before the pair counts' copy (the build's synchronisation):
   * the order's kernels run on the side stream meanwhile */
  if (p->n_out > 0) vc_cuda_scan_exclusive(rs.cnt, rs.start, p->n_out, rs.tmp, s);
  TRY(pair_lists(ctx, p, cp, coords, t, flags));
  TRY(map_alloc(ctx, p, p->n_out, cp->centre, &cp->hdr, &cp->nbl, t));
  uint32_t *tmask = NULL; /* the reverse table's row masks */
  if (nbt) {
    TRY(map_alloc(ctx, p, p->n_in, -1, &cp->hdr_t, &cp->nbl_t, t));
    TRY(scan_scratch_alloc(ctx, p->n_in, &ts, t));
    TRY(scratch_alloc(ctx, t, (void **)&tmask, (size_t)p->n_in * W * sizeof(uint32_t), "reverse row masks"));
  }
  /* The side stream, after the order (its work): the map's headers in it, and the reverse
   * map from its table (written there), by the same kernels in row order; the build's
   * stream meanwhile: the pair lists and the map's entries. */
  const vc_cuda_state *cs = vc_cuda(ctx);
  const cudaStream_t a = cs->aux;
  VC_CUDA_TRY(ctx, cudaEventRecord(cs->fork, s));
  VC_CUDA_TRY(ctx, cudaStreamWaitEvent(a, cs->fork, 0));
  if (p->n_out > 0) k_map_hdrs<<<vc_grid(p->n_out), 256, 0, a>>>(rmask, rs.start, cp->order, p->n_out, W, cp->centre,
                                                               cp->hdr);
  if (nbt && p->n_in > 0) {
    const int64_t nib = (p->n_in + PAIR_ROWS - 1) / PAIR_ROWS;
    k_row_stats<<<(unsigned)nib, PAIR_ROWS, 0, a>>>(nbt, p->n_in, g.K, W, tmask, NULL, ts.cnt, -1);
    vc_cuda_scan_exclusive(ts.cnt, ts.start, p->n_in, ts.tmp, a);
    k_map_hdrs<<<vc_grid(p->n_in), 256, 0, a>>>(tmask, ts.start, NULL, p->n_in, W, -1, cp->hdr_t);
    k_write_pairs<<<(unsigned)nib, PAIR_ROWS, 0, a>>>(nbt, p->n_in, g.K, 0, NULL, NULL, NULL, ts.start, cp->nbl_t, -1);
  }
  VC_CUDA_TRY(ctx, cudaEventRecord(cs->join, a));
  if (nrb > 0)
    k_write_pairs<<<(unsigned)nrb, PAIR_ROWS, 0, s>>>(nb, p->n_out, g.K, p->lists, cp->pair_start, p->pair_in,
                                                      p->pair_out, rs.start, cp->nbl, cp->centre);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

/* Picks the larger Gray-order window when one block's shared memory holds its sort (sm_90:
 * 227 KB a block), else the smaller one (sm_80: 163 KB, sm_86 and sm_89: 99 KB). */
extern "C" vc_status vc_cuda_kmap_init(vc_context *ctx, size_t optin) {
  vc_cuda_state *cs = vc_cuda(ctx);
  VC_CUDA_TRY(ctx, cudaStreamCreateWithFlags(&cs->aux, cudaStreamNonBlocking));
  VC_CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->fork, cudaEventDisableTiming));
  VC_CUDA_TRY(ctx, cudaEventCreateWithFlags(&cs->join, cudaEventDisableTiming));
  cudaFuncAttributes fa;
  VC_CUDA_TRY(ctx, cudaFuncGetAttributes(&fa, k_order));
  const bool large = fa.sharedSizeBytes + ORDER_SMEM(VC_ORDER_WINDOW) <= optin;
  vc_cuda(ctx)->order_window = large ? VC_ORDER_WINDOW : VC_ORDER_WINDOW_SMALL;
  VC_CUDA_TRY(ctx, cudaFuncSetAttribute(large ? k_order : k_order_small, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)ORDER_SMEM(vc_cuda(ctx)->order_window)));
  VC_CUDA_TRY(ctx, cudaFuncSetAttribute(k_group<GRP_LARGE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)GRP_SMEM(GRP_LARGE_WIN)));
  return VC_OK;
}

extern "C" vc_status vc_cuda_plan_build(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_plan *paired,
                                        void *stream) {
  vc_cuda_plan *cp = (vc_cuda_plan *)calloc(1, sizeof *cp);
  if (!cp) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
  p->backend_data = cp;
  scratch t = {{0}, 0, (cudaStream_t)stream, false, "vc_plan_create"};
  vc_status st = build(ctx, p, cp, coords, paired, &t);
  if (t.forked) { /* the side stream reads the scratch: the frees below wait for it */
    if (st == VC_OK && cudaStreamWaitEvent(t.s, vc_cuda(ctx)->join, 0) != cudaSuccess)
      st = vc_fail(ctx, VC_ERR_DEVICE, "vc_plan_create: %s", cudaGetErrorString(cudaGetLastError()));
    if (st != VC_OK) {
      cudaStreamSynchronize(vc_cuda(ctx)->aux);
      (void)cudaGetLastError(); /* the build's error is the one to report */
    }
  }
  scratch_free(&t);
  if (st == VC_OK) {
    cudaError_t e = cudaStreamSynchronize(t.s); /* the plan is complete when create returns */
    if (e != cudaSuccess) st = vc_fail(ctx, VC_ERR_DEVICE, "vc_plan_create: %s", cudaGetErrorString(e));
  }
  return st;
}

/* vc_plan_kernel_map's lists: where the plan keeps every offset's, copies; else written
 * as the build writes its own, from the dense table expanded from the map (scratch), with
 * counts and starts for all K offsets. */
extern "C" vc_status vc_cuda_kernel_map(const vc_plan *p, int32_t *in_index, int32_t *out_index, cudaStream_t s) {
  vc_context *ctx = p->ctx;
  const int K = p->kvol;
  if (p->lists == K) {
    const size_t bytes = (size_t)p->n_pairs * sizeof(int32_t);
    if (in_index) VC_CUDA_TRY(ctx, cudaMemcpyAsync(in_index, p->pair_in, bytes, cudaMemcpyDeviceToDevice, s));
    if (out_index) VC_CUDA_TRY(ctx, cudaMemcpyAsync(out_index, p->pair_out, bytes, cudaMemcpyDeviceToDevice, s));
    return VC_OK;
  }
  const vc_cuda_plan *cp = vc_cuda_plan_of(p);
  const int64_t nblk = (p->n_out + PAIR_ROWS - 1) / PAIR_ROWS, ncnt = nblk * K;
  scratch t = {{0}, 0, s, false, "vc_plan_kernel_map"};
  int32_t *nb;
  scan_scratch sc; /* the pair counts of every (offset, row block) and their starts */
  vc_status st = scratch_alloc(ctx, &t, (void **)&nb, (size_t)p->n_out * K * sizeof(int32_t), "the neighbour table");
  if (st == VC_OK) st = scan_scratch_alloc(ctx, ncnt, &sc, &t);
  if (st == VC_OK) {
    if (p->n_out > 0)
      k_map_expand<<<vc_grid(p->n_out * 32), 256, 0, s>>>(cp->hdr, cp->nbl, cp->order, p->n_out, K, cp->centre, nb);
    k_row_stats<<<(unsigned)nblk, PAIR_ROWS, 0, s>>>(nb, p->n_out, K, VC_MAP_WORDS(K), NULL, sc.cnt, NULL, -1);
    vc_cuda_scan_exclusive(sc.cnt, sc.start, ncnt, sc.tmp, s);
    k_write_pairs<<<(unsigned)nblk, PAIR_ROWS, 0, s>>>(nb, p->n_out, K, K, sc.start, in_index, out_index, NULL, NULL,
                                                       -1);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) st = vc_fail(ctx, VC_ERR_DEVICE, "vc_plan_kernel_map: %s", cudaGetErrorString(e));
  }
  scratch_free(&t);
  return st;
}

extern "C" vc_status vc_cuda_out_coords(const vc_plan *p, int32_t *dst, cudaStream_t s) {
  k_unpack<<<vc_grid(p->n_out), 256, 0, s>>>(p->out_keys, p->n_out, dst);
  VC_CUDA_TRY(p->ctx, cudaGetLastError());
  return VC_OK;
}

extern "C" void vc_cuda_plan_release(vc_plan *p) {
  vc_cuda_plan *cp = (vc_cuda_plan *)p->backend_data;
  if (p->out_keys != p->in_keys) cudaFree(p->out_keys);
  cudaFree(p->in_keys);
  cudaFree(p->pair_in);
  cudaFree(p->pair_out);
  if (cp) {
    cudaFree(cp->hdr); /* and its entries (nbl) */
    cudaFree(cp->hdr_t);
    cudaFree(cp->order);
    cudaFree(cp->blk_mask);
    cudaFree(cp->tile_order);
    cudaFree(cp->g_hdr); /* and the rest of its buffer */
    if (cp->g_done) cudaEventDestroy(cp->g_done);
    cudaFree(cp->offsets_dev);
    cudaFree(cp->pair_start);
    free(cp);
  }
}
