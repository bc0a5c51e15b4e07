/* ring.cuh — what the Hopper kernels (masked.cu: forward and dgrad, wgrad.cu) share: the
 * warp roles, the shared-memory stage ring between producer and consumer warpgroups with
 * its full/empty mbarriers, and the consumers' main loop of wgmma steps.
 *
 * A CTA has np producer warpgroups (warpgroups 0..np-1) and two consumer warpgroups. A
 * stage is an A tile (the consumers' 2 x 64 rows, kb = 128 or 64 bytes of reduction values
 * deep: 64 or 32 16-bit values, 32 or 16 tf32) and a B tile (bn columns), K-major tiles
 * kb-byte swizzled, MN-major ones 128-byte swizzled in atoms 64 kb bytes apart (see
 * ptx/wgmma.cuh; masked.cu's swapped tf32 dgrad: 32 kb), in a 192 KB ring. Producer
 * warpgroup g issues stages g, g + np, ... alone (where a CTA runs two pipelines, masked.cu,
 * each warpgroup every stage of its own).
 * Slot s's `full` barrier completes when that warpgroup's copies of the stage have landed;
 * its `empty` barrier when the consumer warps that read it (8, or 4 where a CTA runs two
 * pipelines on half the ring each: masked.cu, or where the wgrad's second consumer has no
 * output channels: wgrad.cu) have retired the wgmma that read it. */
#ifndef VC_CUDA_HOPPER_RING_CUH
#define VC_CUDA_HOPPER_RING_CUH

#include "../dtype.cuh"
#include "../ptx/mbarrier.cuh"
#include "../ptx/mma.cuh"
#include "../ptx/setmaxnreg.cuh"
#include "../ptx/wgmma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VC_SM90A 1
#endif

#define HP_RING 196608 /* bytes of stage ring in every kernel */
#define HP_STAGES(a_tile, b_tile) (HP_RING / ((a_tile) + (b_tile)))
/* dynamic shared memory: 1024 bytes of alignment slack, the ring, 2 barriers per stage */
#define HP_SMEM(a_tile, b_tile) (1024 + HP_RING + 16 * HP_STAGES(a_tile, b_tile))
/* Producer warpgroups: one alone cannot issue the gathers of the narrower tiles fast
 * enough; bn = 256 keeps one, because its 128 accumulators a consumer thread need the
 * 168-register cap of a 384-thread CTA (ptxas compiles under the cap at entry). */
#define HP_NP(bn) ((bn) == 256 ? 1 : 2)
#define HP_THREADS(np) (128 * (np) + 256)
/* bytes between 64-column atoms of an MN-major tile: 64 rows of 128 bytes */
#define HP_ATOM 8192

/* Operand layouts of the kernels' wgmma (see ptx/wgmma.cuh). */
enum { HP_KK, HP_KMN, HP_MNMN };

typedef struct hp_ring {
  uint32_t a, b;         /* shared addresses of slot 0's A and B tiles */
  uint32_t full, empty;  /* slot 0's barriers; slot s's are 8 * s further */
} hp_ring;

#ifdef VC_SM90A
/* Lays the ring out in dynamic shared memory and initialises its barriers (full expects
 * `arrivals` arrivals, empty one per consumer warp that reads a slot: `readers`); every
 * thread of the CTA calls it. */
__device__ static __forceinline__ hp_ring hp_ring_init(uint8_t *smem, int st, int a_tile, int b_tile, int arrivals,
                                                       int readers) {
  hp_ring r;
  r.a = (vc_smem_addr(smem) + 1023) & ~1023u, r.b = r.a + st * a_tile;
  r.full = r.b + st * b_tile, r.empty = r.full + 8 * st;
  if (threadIdx.x == 0) {
    for (int s = 0; s < st; s++) {
      vc_mbar_init(r.full + 8 * s, arrivals);
      vc_mbar_init(r.empty + 8 * s, readers);
    }
    vc_mbar_init_fence();
  }
  __syncthreads();
  return r;
}

/* The ring seen from slot s0: slots s0, s0 + 1, ... of r are its 0, 1, ... (a CTA that
 * runs two pipelines gives each its half). */
__device__ static __forceinline__ hp_ring hp_ring_from(hp_ring r, int s0, int a_tile, int b_tile) {
  r.a += s0 * a_tile, r.b += s0 * b_tile, r.full += 8 * s0, r.empty += 8 * s0;
  return r;
}

/* This thread's warpgroup, through a shuffle: ptxas then knows it is warp-uniform. */
__device__ static __forceinline__ int hp_warpgroup(void) {
  return __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 7), 0);
}

/* The role split's register moves: producers keep 56 a thread, consumers take what that
 * leaves of the 64 K (their cap at entry is already enough with two producer warpgroups). */
__device__ static __forceinline__ void hp_producer_regs(void) { VC_SETMAXNREG_DEC(56); }
__device__ static __forceinline__ void hp_consumer_regs(int np) {
  if (np == 1) VC_SETMAXNREG_INC(224);
  else VC_SETMAXNREG_INC(192);
}

/* One 32-byte K step (k16 of f16/bf16, k8 of tf32: dt VC_DTYPE_F32, K-major operands
 * only); bn, dt and layout are compile-time constants in every kernel, so this is one
 * instruction. */
__device__ static __forceinline__ void hp_mma(float *acc, int bn, int dt, int layout, uint64_t da, uint64_t db) {
#define HP_MMA_N(n)                                                                                               \
  if (dt == VC_DTYPE_F32) vc_wgmma_n##n##_tf32_kk(acc, da, db);                                                  \
  else if (layout == HP_KK) dt == VC_DTYPE_BF16 ? vc_wgmma_n##n##_bf16_kk(acc, da, db) : vc_wgmma_n##n##_f16_kk(acc, da, db); \
  else if (layout == HP_KMN)                                                                                     \
    dt == VC_DTYPE_BF16 ? vc_wgmma_n##n##_bf16_kmn(acc, da, db) : vc_wgmma_n##n##_f16_kmn(acc, da, db);          \
  else dt == VC_DTYPE_BF16 ? vc_wgmma_n##n##_bf16_mnmn(acc, da, db) : vc_wgmma_n##n##_f16_mnmn(acc, da, db);
  if (bn == 64) {
    HP_MMA_N(64)
  } else if (bn == 96) {
    HP_MMA_N(96)
  } else if (bn == 128) {
    HP_MMA_N(128)
  } else {
    HP_MMA_N(256)
  }
#undef HP_MMA_N
}

/* The position of worker b's k-th unit where rounds of g positions are dealt to workers
 * 0 .. g - 1, every other round in reverse where `snake`: with the units longest first, a
 * worker dealt a long one in one round is dealt a short one in the next (masked.cu's
 * mk_unit_at, wgrad.cu's wr_pos). */
__device__ static __forceinline__ int64_t hp_deal(int64_t k, int64_t g, int64_t b, bool snake) {
  return k * g + (k & 1 && snake ? g - 1 - b : b);
}

/* Where a consumer warpgroup stands in the ring: a persistent CTA carries it from one work
 * unit to the next. */
typedef struct hp_pos {
  int s, phase;
} hp_pos;

/* The column sums of `atom`, a 64-row x 64-column MN-major tile of 16-bit values (dt),
 * 128-byte swizzled, added into cs on the tensor cores: warp w's columns 16 w .. 16 w + 15
 * as one m16n8k16 mma.sync a 16-row step, A the tile transposed (ldmatrix.trans of four 8 x
 * 8 blocks, one 16-byte row a lane: the 8 rows of a block meet 8 distinct chunks of the
 * swizzle, so no bank conflict) and B all ones, D in fp32 (over a unit's stages: bounded by
 * wgrad.cu's WR_SUMS_MAX_ROWS). The 8 columns of D are then the same: lane 4 g + t holds
 * column 16 w + g in cs[0] and 16 w + 8 + g in cs[2] (and again in cs[1], cs[3]). 8
 * instructions a warp a stage, against ~70 for 16-byte loads and fp32 adds on the CUDA
 * cores (which cost the kernel as much time, bench/NOTES.md, session 31). */
__device__ static __forceinline__ void hp_col_sums(float *cs, uint32_t atom, int dt) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, m = lane >> 3, rw = lane & 7;
  /* this lane's row of block m (a[m] of the fragment): columns 8 (m % 2) .. of the warp's
   * 16, rows (k) 8 (m / 2) .. of the step */
  const uint32_t at = atom + (uint32_t)((8 * (m >> 1) + rw) * 128 + (((2 * warp + (m & 1)) ^ rw) << 4));
  const uint32_t one = dt == VC_DTYPE_BF16 ? 0x3f803f80u : 0x3c003c00u, b[2] = {one, one};
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t a[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(at + (uint32_t)kk * 2048u)
                 : "memory");
    if (dt == VC_DTYPE_BF16) vc_mma_bf16(cs, a, b);
    else vc_mma_f16(cs, a, b);
  }
}

/* Consumer warpgroup cw's 128 threads at named barrier 4 + cw (the ids wgrad.cu's add-form
 * epilogue gives the same threads). The barrier orders every lane's reads of the slot
 * before lane 0's arrival, which releases them to the producers' acquiring wait (each
 * warp's lane 0 arrives for its own warp, so a __syncwarp would order them too; the
 * barrier is what the tests and measurements ran on).
 * compute-sanitizer's racecheck credits an arrival with the arriving thread's own accesses
 * only: it reports the other lanes' reads against the producers' next copies into the
 * slot, with this barrier or a __syncwarp alike, and is clean where every reading lane
 * arrives itself, which made the RES 1024 wgrad 19 % slower (bench/NOTES.md, session 31). */
__device__ static __forceinline__ void hp_sums_bar(int cw) {
  if (cw == 0) vc_named_barrier(4, 128); /* constant ids: ptxas then reserves 6 barriers, not 16 */
  else vc_named_barrier(5, 128);
}

/* The consumers' ring protocol (hp_consume below; masked.cu's mk_consume_swapped and
 * wgrad.cu's wr_consume_split, whose stages are several wgmma groups). A warp hands a slot
 * back through its lane 0 (the barrier counts warps). The register-A consumers' other lanes
 * read the slot with ld.shared, whose values fed the warp's wgmma (.sync.aligned, all
 * lanes) issued before, so those loads are done; compute-sanitizer's racecheck does not
 * credit that edge (nor a __syncwarp's, as hp_sums_bar says) and reports the loads against
 * the producers' next copies. A __syncwarp here made the tf32 wgrad 11 % slower (suite S
 * RES 64; bench/NOTES.md, session 38). */
__device__ static __forceinline__ void hp_slot_back(const hp_ring &r, int slot) {
  if ((threadIdx.x & 31) == 0) vc_mbar_arrive(r.empty + 8 * slot);
}
/* Commits the group just issued and waits until only it is pending; where it is its stage's
 * first group, the previous stage's slot (prev; -1: none), whose last group has then
 * retired, goes back (with sums, after the warpgroup's barrier: hp_sums_bar). */
__device__ static __forceinline__ void hp_group_retire(const hp_ring &r, int prev, bool first, bool sums = false,
                                                       int cw = 0) {
  vc_wgmma_commit();
  VC_WGMMA_WAIT(1);
  if (sums) hp_sums_bar(cw);
  if (first && prev >= 0) hp_slot_back(r, prev);
}
/* A walk's end: no wgmma pending, the last slot read (prev) handed back (with sums, after
 * the warpgroup's barrier), the n accumulators fenced, the ring position (s, phase) kept
 * for the next unit. */
__device__ static __forceinline__ void hp_walk_end(float *acc, int n, const hp_ring &r, int prev, int s, int phase,
                                                   hp_pos &pos, bool sums = false, int cw = 0) {
  VC_WGMMA_WAIT(0);
  if (sums) hp_sums_bar(cw);
  if (prev >= 0) hp_slot_back(r, prev);
#pragma unroll
  for (int i = 0; i < n; i++) vc_reg_fence(acc[i]);
  pos.s = s, pos.phase = phase;
}

/* The consumers' main loop over n_it stages: consumer warpgroup cw multiplies its A rows
 * (a_off bytes into the A tile) by the whole B tile into acc, kb / 32 K steps a stage (kb:
 * the stage's bytes of reduction values a row, as above), keeps one wgmma group in
 * flight and hands each slot back once the group that read it has retired. Ends with no
 * wgmma pending and every slot it read handed back. nb (1 or 2, compile-time) is the
 * number of 64-row blocks the warpgroup multiplies: block b's rows are 64 b further into
 * the A tile and its accumulators are acc + b bn / 2.
 *
 * Skipping (uni != 0): the stages walk the set bits of uni (offsets), nkc stages each,
 * starting at stage it0 of that walk; block b issues no wgmma for a stage whose offset is
 * not in live[b] (none of its rows meets it, so its A rows are the producers' zeros). A
 * stage no block multiplies is still waited for (its copies must land before the slot is
 * reused) and handed back at once, after the group in flight: a slot held across skips
 * could be the one the producers wait for.
 *
 * Column sums (sums, 16-bit, nb == 1, every stage multiplied; wgrad.cu's bias gradient):
 * cs[4] also adds up the warpgroup's MN-major A atom of every stage (hp_col_sums), read while
 * the stage's wgmma run. The warpgroup (cw: consumer 0 or 1) then meets at a named barrier
 * (hp_sums_bar) before its warps' lane 0 hand the slot back: every lane has read it. */
__device__ static __forceinline__ void hp_consume(float *acc, const hp_ring &r, hp_pos &pos, int n_it, int st,
                                                  int a_tile, int b_tile, int kb, uint32_t a_off, int bn, int dt, int layout,
                                                  uint32_t uni, const uint32_t *live, int nb, int nkc, int it0,
                                                  bool sums = false, float *cs = NULL, int cw = 0) {
  /* Slot 0's descriptors; a descriptor's address field is linear (16-byte units, 14 bits
   * hold any shared address), so a slot's and a K step's are these plus their offsets:
   * no descriptor is built in the loop (it was half the consumers' instructions). K steps
   * are 32 bytes along a K-major row, 2048 bytes (16 rows of 128) in an MN-major tile. */
  const uint64_t da0 = layout == HP_MNMN ? vc_wgmma_desc_mn(r.a + a_off, 64 * kb) : vc_wgmma_desc_k(r.a + a_off, kb);
  const uint64_t db0 = layout == HP_KK ? vc_wgmma_desc_k(r.b, kb) : vc_wgmma_desc_mn(r.b, 64 * kb);
  const uint32_t a_step = (layout == HP_MNMN ? 2048 : 32) >> 4, b_step = (layout == HP_KK ? 32 : 2048) >> 4;
  const uint32_t a_blk = (uint32_t)(64 * kb) >> 4; /* the next 64 rows of a K-major A tile */
  int s = pos.s, phase = pos.phase, prev = -1, kc = 0;
  uint32_t rem = uni;
  if (uni && it0 > 0) { /* it0 > 0 in splits only: the divisions skipped elsewhere */
    for (int i = 0; i < it0 / nkc; i++) rem &= rem - 1;
    kc = it0 % nkc;
  }
  for (int it = 0; it < n_it; it++) {
    const uint32_t bit = uni ? 1u << (__ffs(rem) - 1) : 0u;
    const bool on0 = !uni || (live[0] & bit), on1 = nb == 2 && (!uni || (live[nb - 1] & bit));
    vc_mbar_wait(r.full + 8 * s, phase);
    if (on0 || on1) {
      vc_fence_proxy_async(); /* the cp.async (generic proxy) writes, seen here, to wgmma */
      vc_wgmma_fence();
      const uint64_t da = da0 + (uint32_t)(s * a_tile >> 4), db = db0 + (uint32_t)(s * b_tile >> 4);
      /* one branch a stage: a branch around each wgmma made ptxas put a warpgroup.arrive
       * between them (info C7519) */
      if (nb == 1 || !on1) {
#pragma unroll
        for (int kk = 0; kk < kb / 32; kk++) hp_mma(acc, bn, dt, layout, da + kk * a_step, db + kk * b_step);
      } else if (on0) {
#pragma unroll
        for (int kk = 0; kk < kb / 32; kk++) {
          hp_mma(acc, bn, dt, layout, da + kk * a_step, db + kk * b_step);
          hp_mma(acc + bn / 2, bn, dt, layout, da + a_blk + kk * a_step, db + kk * b_step);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < kb / 32; kk++) hp_mma(acc + bn / 2, bn, dt, layout, da + a_blk + kk * a_step, db + kk * b_step);
      }
      /* the group of the previous issued stage has retired: its slot goes back, after the
       * barrier that orders every lane's hp_col_sums reads of it */
      hp_group_retire(r, prev, true, sums, cw);
      /* after the hand-back: summed between the commit and the wait, the previous slot went
       * back that much later (ncu, suite S RES 256 / 512 / 1024 f16, an 8-mma version of
       * the sums: the wgrad 2.3 / 4.2 / 2.4 % slower than without them there, 1.6 / 3.4 /
       * 1.2 % here) */
      if (sums) hp_col_sums(cs, r.a + (uint32_t)(s * a_tile) + a_off, dt);
      prev = s;
    } else {
      VC_WGMMA_WAIT(0);
      if (sums) hp_sums_bar(cw);
      if (prev >= 0) hp_slot_back(r, prev);
      hp_slot_back(r, s);
      prev = -1;
    }
    if (uni && ++kc == nkc) kc = 0, rem &= rem - 1;
    if (++s == st) s = 0, phase ^= 1;
  }
  hp_walk_end(acc, nb * bn / 2, r, prev, s, phase, pos, sums, cw);
}
/* For 16-byte stores of 16-bit values from a wgmma fragment (quad lane q holds columns
 * 8 j + 2 q, + 1 of a row): w[k] of quad lane q holds columns 8 k + 2 q, + 1 (packed);
 * after, lane q's w[k] holds columns 8 q + 2 k, + 1, so each lane has 8 consecutive
 * columns. Round t sends lane q's w[(q - t) & 3] to lane (q - t) & 3. Every lane of the
 * warp must call it. */
__device__ static __forceinline__ void hp_quad_transpose(uint32_t *w, int q) {
  uint32_t o[4] = {w[0], w[1], w[2], w[3]}; /* o[q] keeps w[q] */
#pragma unroll
  for (int t = 1; t < 4; t++) {
    const int to = (q - t) & 3, from = (q + t) & 3;
    uint32_t v = w[0];
#pragma unroll
    for (int k = 1; k < 4; k++) v = k == to ? w[k] : v;
    v = __shfl_sync(~0u, v, (threadIdx.x & 28) | from);
#pragma unroll
    for (int k = 0; k < 4; k++) o[k] = k == from ? v : o[k];
  }
#pragma unroll
  for (int k = 0; k < 4; k++) w[k] = o[k];
}

#endif

#endif
