/* masked.cu — VC_ALGO_MASKED: the masked implicit GEMM on Hopper (sm_90a) for forward and
 * dgrad in f16/bf16 on the fast path (channel counts multiple of 8, 16-byte aligned
 * operands and output); wgrad.cu is its weight gradient. Other shapes run the implicit
 * kernels.
 *
 * Each CTA owns 128 output rows (taken in the plan's Gray-code order) and BN output
 * columns, and loops over the union of its rows' active offsets times the reduction
 * chunks of 64 channels: C[m, n] += sum_k A[nb[m, r], k] * B_r[n, k].
 *
 * Warp-specialised (roles and stage ring in ring.cuh):
 *   - the producers (registers cut to 56 a thread) gather the 128 A rows of a stage with
 *     cp.async into a 128-byte-swizzled K-major tile, and one of their threads has the TMA
 *     copy the stage's weight box (swizzled the same way by the copy engine; out-of-range
 *     rows and channels arrive as zeros);
 *   - two consumers each issue m64nBNk16 wgmma over 64 of the rows, with fp32
 *     accumulators, one group in flight, so the tensor cores run while the producers
 *     gather the next stages.
 * The epilogue adds the bias, converts and leaves through shared memory as 16-byte row
 * stores; no atomics: each output row belongs to one CTA.
 *
 * dgrad is the same kernel on the reversed map. Its B_r[n = ci][k = co] is the weight as
 * stored, ci contiguous: an MN-major operand, copied as BN / 64 atoms of 64 ci x 64 co. */
#include "../implicit.cuh"
#include "../ptx/tma.cuh"
#include "ring.cuh"

#include <cudaTypedefs.h>

#define MK_BM 128
#define MK_BK 64 /* one 128-byte swizzle row of 16-bit values */
#define MK_A_TILE (MK_BM * MK_BK * 2)
#define MK_B_TILE(bn) ((bn) * MK_BK * 2)
#define MK_STAGES(bn) HP_STAGES(MK_A_TILE, MK_B_TILE(bn))
#define MK_SMEM(bn) HP_SMEM(MK_A_TILE, MK_B_TILE(bn))
#define MK_CPAD 8 /* epilogue staging row padding (elements) */
static_assert(MK_BM * (256 + MK_CPAD) * 2 <= HP_RING, "the epilogue tile fits the ring");

__device__ static __forceinline__ void mk_body(const imp_args &args, const CUtensorMap *bmap, const int mode,
                                               const int dt, const int bn, const int np) {
#ifdef VC_SM90A
  const int st = MK_STAGES(bn), pt = 128 * np; /* stages, producer threads */
  imp_args p = args;
  p.mode = mode, p.dt = dt, p.fast = 1;
  extern __shared__ __align__(16) uint8_t mk_smem[];
  TILE_SETUP(MK_BM, bn, MK_BK, false);
  /* full: the producers' cp.async arrivals + the TMA issuer's */
  const hp_ring ring = hp_ring_init(mk_smem, st, MK_A_TILE, MK_B_TILE(bn), pt + 1);
  const uint32_t sA = ring.a, sB = ring.b, full = ring.full, empty = ring.empty;
  const int wg = hp_warpgroup();

  if (wg < np) { /* ---- producer ---- */
    hp_producer_regs();
    /* Thread tid copies 16-byte chunk q of rows m0 + MR h of every stage; the swizzle only
     * depends on m % 8, so the destinations are one base + 128 MR h. The loop
     * keeps its offset, chunk and slot as counters: no divisions per stage. */
    const int MR = pt / 8; /* rows one pass of the producer threads covers */
    const int tid = threadIdx.x, q = tid & 7, m0 = tid >> 3;
    const uint32_t dst0 = sA + vc_sw128(m0, q);
    const uint16_t *a_src = (const uint16_t *)p.a_src;
    const bool in_gtab = n_act <= GTAB_OFFSETS;
    int a = 0, kc = 0, s = 0, phase = 0;
    for (int it = 0; it < t.n_it; it++) {
      if (it >= st) vc_mbar_wait(empty + 8 * s, phase ^ 1);
      const int col = act[a], rw = p.flip ? p.K - 1 - col : col, k0 = kc * MK_BK;
      if (tid == 0) {
        vc_mbar_arrive_expect_tx(full + 8 * s, MK_B_TILE(bn));
        if (mode == MODE_FWD) vc_tma_load_3d(sB + s * MK_B_TILE(bn), bmap, k0, rw, (int)t.n0, full + 8 * s);
        else
          for (int u = 0; u < bn / 64; u++) /* atom u: ci n0 + 64 u.., co k0.. */
            vc_tma_load_3d(sB + s * MK_B_TILE(bn) + u * HP_ATOM, bmap, (int)t.n0 + 64 * u, rw, k0, full + 8 * s);
      }
      int32_t row[MK_BM / 16]; /* MK_BM / MR of them used */
#pragma unroll
      for (int h = 0; h < MK_BM / MR; h++) {
        const int m = m0 + MR * h;
        row[h] = in_gtab ? gtab[a * GTAB_STRIDE(MK_BM) + m] : rowid[m] >= 0 ? p.tab[(int64_t)rowid[m] * p.K + col] : -1;
      }
      const int k = k0 + q * 8;
      const bool kin = k < p.c_red;
      const uint16_t *src_k = a_src + k;
      const uint32_t dst = dst0 + s * MK_A_TILE;
#pragma unroll
      for (int h = 0; h < MK_BM / MR; h++) {
        const bool ok = kin && row[h] >= 0;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst + 128 * MR * h),
                     "l"(ok ? src_k + (int64_t)row[h] * p.c_red : a_src), "r"(ok ? 16 : 0));
      }
      vc_mbar_arrive_cp_async(full + 8 * s);
      if (++kc == t.nkc) kc = 0, a++;
      if (++s == st) s = 0, phase ^= 1;
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory"); /* exit with no copy in flight */
  } else { /* ---- consumers ---- */
    hp_consumer_regs(np);
    const int cw = wg - np, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    float acc[128];
#pragma unroll
    for (int i = 0; i < bn / 2; i++) acc[i] = 0.0f;
    hp_consume(acc, ring, t.n_it, st, MK_A_TILE, MK_B_TILE(bn), cw * 64 * 128, bn, dt,
               mode == MODE_FWD ? HP_KK : HP_KMN);
    vc_named_barrier(1, 256); /* neither consumer still reads the ring: it stages the output */

    uint16_t *sC = (uint16_t *)ring.base; /* [MK_BM][bn + MK_CPAD] */
#pragma unroll
    for (int j = 0; j < bn / 8; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int m = cw * 64 + warp * 16 + (lane >> 2) + 8 * h, n = 8 * j + 2 * (lane & 3);
        if (t.n0 + n < p.n_cols) /* n_cols % 8 == 0 on the fast path */
          *(uint32_t *)(sC + m * (bn + MK_CPAD) + n) = pack2(p, t.n0 + n, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
    vc_named_barrier(1, 256);
    for (int c = threadIdx.x - pt; c < MK_BM * bn / 8; c += 256) {
      const int m = c / (bn / 8), n = (c % (bn / 8)) * 8;
      const int32_t row = rowid[m];
      if (row >= 0 && t.n0 + n < p.n_cols)
        *(uint4 *)((uint16_t *)p.out + (int64_t)row * p.n_cols + t.n0 + n) =
            *(const uint4 *)(sC + m * (bn + MK_CPAD) + n);
    }
  }
#else
  __trap(); /* launched only on sm_90 devices, which run the sm_90a code */
#endif
}

#define MK_KERNEL(name, mode, dt, bn)                                                                   \
  __global__ void __launch_bounds__(HP_THREADS(HP_NP(bn)), 1)                                          \
      name(const imp_args p, const __grid_constant__ CUtensorMap bmap) {                                \
    mk_body(p, &bmap, mode, dt, bn, HP_NP(bn));                                                        \
  }
#define MK_KERNELS(bn)                                        \
  MK_KERNEL(k_mk_fwd_f16_##bn, MODE_FWD, VC_DTYPE_F16, bn)    \
  MK_KERNEL(k_mk_fwd_bf16_##bn, MODE_FWD, VC_DTYPE_BF16, bn)  \
  MK_KERNEL(k_mk_dgrad_f16_##bn, MODE_DGRAD, VC_DTYPE_F16, bn) \
  MK_KERNEL(k_mk_dgrad_bf16_##bn, MODE_DGRAD, VC_DTYPE_BF16, bn)
MK_KERNELS(64)
MK_KERNELS(128)
MK_KERNELS(256)

typedef void (*mk_kernel)(const imp_args, const CUtensorMap);
/* The tile table: [variant][dgrad][bf16], variant i has BN = mk_bn[i]. */
static const int mk_bn[3] = {64, 128, 256};
static const mk_kernel mk_kernels[3][2][2] = {
    {{k_mk_fwd_f16_64, k_mk_fwd_bf16_64}, {k_mk_dgrad_f16_64, k_mk_dgrad_bf16_64}},
    {{k_mk_fwd_f16_128, k_mk_fwd_bf16_128}, {k_mk_dgrad_f16_128, k_mk_dgrad_bf16_128}},
    {{k_mk_fwd_f16_256, k_mk_fwd_bf16_256}, {k_mk_dgrad_f16_256, k_mk_dgrad_bf16_256}}};

/* VOXCONV_MASKED_BN's tile, else the widest tile that still gives every multiprocessor a
 * CTA, and no wider than the columns need. */
static int mk_variant(const imp_args &q, int n_sm, int forced_bn) {
  for (int v = 0; v < 3; v++)
    if (mk_bn[v] == forced_bn) return v;
  int v = q.n_cols > 128 ? 2 : q.n_cols > 64 ? 1 : 0;
  const int64_t row_tiles = (q.rows + MK_BM - 1) / MK_BM;
  while (v > 0 && row_tiles * ((q.n_cols + mk_bn[v] - 1) / mk_bn[v]) < n_sm) v--;
  return v;
}

/* B's tensor map: the weight w[co][K][ci] as dims {ci, K, co}. Forward's box {64, 1, bn}
 * lands as bn K-major rows of 64 ci; dgrad's box {64, 1, 64} as one MN-major atom, 64 co
 * rows of 64 ci. Both 128-byte swizzled. */
static vc_status mk_tensor_map(vc_context *ctx, const imp_args &q, int bn, CUtensorMap *map) {
  vc_cuda_state *st = vc_cuda(ctx);
  const cuuint64_t dims[3] = {(cuuint64_t)q.ci, (cuuint64_t)q.K, (cuuint64_t)q.co};
  const cuuint64_t strides[2] = {dims[0] * 2, dims[0] * dims[1] * 2};
  const cuuint32_t box[3] = {MK_BK, 1, q.mode == MODE_FWD ? (cuuint32_t)bn : 64u};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = ((PFN_cuTensorMapEncodeTiled_v12000)st->encode_tiled)(
      map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, (void *)q.w, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return vc_fail(ctx, VC_ERR_DEVICE, "voxconv: cuTensorMapEncodeTiled failed (CUresult %d)", (int)r);
  return VC_OK;
}

vc_status vc_cuda_masked_run(vc_context *ctx, const imp_args &args, cudaStream_t s) {
  imp_args q = args;
  const int v = mk_variant(q, vc_cuda(ctx)->n_sm, vc_cuda(ctx)->masked_bn), bn = mk_bn[v];
  CUtensorMap map;
  vc_status e = mk_tensor_map(ctx, q, bn, &map);
  if (e != VC_OK) return e;
  q.n_tiles = (q.n_cols + bn - 1) / bn;
  const int64_t blocks = (q.rows + MK_BM - 1) / MK_BM * q.n_tiles;
  mk_kernels[v][q.mode == MODE_DGRAD][q.dt == VC_DTYPE_BF16]<<<(unsigned)blocks, HP_THREADS(HP_NP(bn)), MK_SMEM(bn), s>>>(q, map);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

vc_status vc_cuda_masked_init(vc_context *ctx) {
  vc_cuda_state *st = vc_cuda(ctx);
  cudaDriverEntryPointQueryResult found;
  VC_CUDA_TRY(ctx, cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &st->encode_tiled, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !st->encode_tiled)
    return vc_fail(ctx, VC_ERR_DEVICE, "vc_context_create: the driver has no cuTensorMapEncodeTiled");
  for (int v = 0; v < 3; v++)
    for (int m = 0; m < 2; m++)
      for (int d = 0; d < 2; d++)
        VC_CUDA_TRY(ctx, cudaFuncSetAttribute(mk_kernels[v][m][d], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              MK_SMEM(mk_bn[v])));
  return VC_OK;
}
