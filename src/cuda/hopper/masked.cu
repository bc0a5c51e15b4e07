/* masked.cu — VC_ALGO_MASKED: the masked implicit GEMM on Hopper (sm_90a) for forward and
 * dgrad in f16/bf16 on the fast path (channel counts multiple of 8, 16-byte aligned
 * operands, output and workspace). Other shapes and wgrad run the implicit kernels.
 *
 * Each CTA owns 128 output rows (taken in the plan's Gray-code order) and BN output
 * columns, and loops over the union of its rows' active offsets times the reduction
 * chunks of 64 channels: C[m, n] += sum_k A[nb[m, r], k] * B_r[n, k].
 *
 * Warp-specialised, three warpgroups:
 *   - the producer (warpgroup 0, registers cut to 56 a thread) gathers the 128 A rows of a
 *     stage with cp.async into a 128-byte-swizzled K-major tile, and one of its threads has
 *     the TMA copy the stage's BN x 64 weight box (swizzled the same way by the copy
 *     engine; out-of-range rows and channels arrive as zeros);
 *   - two consumers (warpgroups 1 and 2, 224 registers a thread) each issue m64nBNk16
 *     wgmma over 64 of the rows, with fp32 accumulators;
 *   - between them a ring of ST stages with two mbarriers per slot: `full` completes when
 *     the 128 producer threads' copies have landed (cp.async arrive) and the TMA bytes have
 *     arrived; `empty` when the 8 consumer warps have retired the wgmma that read the slot.
 * The consumers keep one wgmma group in flight, so the tensor cores run while the producer
 * gathers the next stages. The epilogue adds the bias, converts and leaves through shared
 * memory as 16-byte row stores; no atomics: each output row belongs to one CTA.
 *
 * dgrad uses the same kernel on the reversed map with a weight copy transposed per call
 * ([K][ci][co], in the workspace) so that its B operand is K-major like forward's. */
#include "../implicit.cuh"
#include "../ptx/cp_async.cuh"
#include "../ptx/mbarrier.cuh"
#include "../ptx/setmaxnreg.cuh"
#include "../ptx/tma.cuh"
#include "../ptx/wgmma.cuh"

#include <cudaTypedefs.h>

#define MK_BM 128
#define MK_BK 64 /* one 128-byte swizzle row of 16-bit values */
/* Producer warpgroups: one alone cannot issue the gathers of the narrower tiles fast
 * enough; BN = 256 keeps one, because its 128 accumulators a consumer thread need the
 * 168-register cap of a 384-thread CTA (ptxas compiles under the cap at entry). */
#define MK_NP(bn) ((bn) == 256 ? 1 : 2)
#define MK_THREADS(np) (128 * (np) + 256)
#define MK_A_TILE (MK_BM * MK_BK * 2)
#define MK_B_TILE(bn) ((bn) * MK_BK * 2)
#define MK_RING 196608 /* bytes of stage ring in every variant: ST = RING / (A + B tile) */
#define MK_STAGES(bn) (MK_RING / (MK_A_TILE + MK_B_TILE(bn)))
/* dynamic shared memory: 1024 bytes of alignment slack, the ring, 2 barriers per stage */
#define MK_SMEM(bn) (1024 + MK_STAGES(bn) * (MK_A_TILE + MK_B_TILE(bn)) + 16 * MK_STAGES(bn))
#define MK_CPAD 8 /* epilogue staging row padding (elements) */
static_assert(MK_BM * (256 + MK_CPAD) * 2 <= MK_RING, "the epilogue tile fits the ring");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VC_SM90A 1
#endif

#ifdef VC_SM90A
/* One m64nBNk16 step of one consumer warpgroup; bn and dt are compile-time constants in
 * every kernel, so this is one instruction. */
__device__ static __forceinline__ void mk_mma(float *acc, int bn, int dt, uint64_t da, uint64_t db) {
  if (bn == 64) dt == VC_DTYPE_BF16 ? vc_wgmma_n64_bf16(acc, da, db) : vc_wgmma_n64_f16(acc, da, db);
  else if (bn == 128) dt == VC_DTYPE_BF16 ? vc_wgmma_n128_bf16(acc, da, db) : vc_wgmma_n128_f16(acc, da, db);
  else dt == VC_DTYPE_BF16 ? vc_wgmma_n256_bf16(acc, da, db) : vc_wgmma_n256_f16(acc, da, db);
}
#endif

__device__ static __forceinline__ void mk_body(const imp_args &args, const CUtensorMap *bmap, const int mode,
                                               const int dt, const int bn, const int np) {
  const int pt = 128 * np; /* producer threads */
#ifdef VC_SM90A
  const int st = MK_STAGES(bn);
  imp_args p = args;
  p.mode = mode, p.dt = dt, p.fast = 1;
  extern __shared__ __align__(16) uint8_t mk_smem[];
  TILE_SETUP(MK_BM, bn, MK_BK, false);
  const uint32_t base = vc_smem_addr(mk_smem);
  uint8_t *ring = mk_smem + (((base + 1023) & ~1023u) - base);
  const uint32_t sA = vc_smem_addr(ring), sB = sA + st * MK_A_TILE;
  const uint32_t full = sB + st * MK_B_TILE(bn), empty = full + 8 * st;
  if (threadIdx.x == 0) {
    for (int s = 0; s < st; s++) {
      vc_mbar_init(full + 8 * s, pt + 1); /* the producers' cp.async arrivals + the TMA issuer's */
      vc_mbar_init(empty + 8 * s, 8);      /* one arrival per consumer warp */
    }
    vc_mbar_init_fence();
  }
  __syncthreads();
  /* the warpgroup index through a shuffle: ptxas then knows it is warp-uniform */
  const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 7), 0);

  if (wg < np) { /* ---- producer ---- */
    VC_SETMAXNREG_DEC(56);
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
        else vc_tma_load_3d(sB + s * MK_B_TILE(bn), bmap, k0, (int)t.n0, rw, full + 8 * s);
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
    /* what the producers' 56 registers a thread leave of the 64 K */
    if (np == 1) VC_SETMAXNREG_INC(224);
    else VC_SETMAXNREG_INC(192);
    const int cw = wg - np, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    float acc[128];
#pragma unroll
    for (int i = 0; i < bn / 2; i++) acc[i] = 0.0f;
    int s = 0, phase = 0, prev = 0;
    for (int it = 0; it < t.n_it; it++) {
      vc_mbar_wait(full + 8 * s, phase);
      vc_fence_proxy_async(); /* the cp.async (generic proxy) writes, seen here, to wgmma */
      vc_wgmma_fence();
      const uint32_t a0 = sA + s * MK_A_TILE + cw * 64 * 128, b0 = sB + s * MK_B_TILE(bn);
#pragma unroll
      for (int kk = 0; kk < MK_BK / 16; kk++) mk_mma(acc, bn, dt, vc_wgmma_desc(a0 + 32 * kk), vc_wgmma_desc(b0 + 32 * kk));
      vc_wgmma_commit();
      VC_WGMMA_WAIT(1); /* the group of stage it-1 has retired: its slot goes back */
      if (it > 0 && lane == 0) vc_mbar_arrive(empty + 8 * prev);
      prev = s;
      if (++s == st) s = 0, phase ^= 1;
    }
    VC_WGMMA_WAIT(0);
#pragma unroll
    for (int i = 0; i < bn / 2; i++) vc_reg_fence(acc[i]);
    vc_named_barrier(1, 256); /* neither consumer still reads the ring: it stages the output */

    uint16_t *sC = (uint16_t *)ring; /* [MK_BM][bn + MK_CPAD] */
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
  __global__ void __launch_bounds__(MK_THREADS(MK_NP(bn)), 1)                                          \
      name(const imp_args p, const __grid_constant__ CUtensorMap bmap) {                                \
    mk_body(p, &bmap, mode, dt, bn, MK_NP(bn));                                                        \
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

/* wt[r][ci][co] = w[co][r][ci] (16-bit values): dgrad's B operand, K-major. */
__global__ static void k_transpose_weight(const uint16_t *w, int64_t co, int K, int64_t ci, uint16_t *wt) {
  const int64_t total = co * K * ci;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = e % co, rc = e / co; /* e = (r * ci + c) * co + o: writes coalesced */
    const int64_t r = rc / ci, c = rc % ci;
    wt[e] = w[(o * K + r) * ci + c];
  }
}

size_t vc_cuda_masked_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  if (pass != VC_PASS_BACKWARD_DATA || a->dtype == VC_DTYPE_F32) return 0;
  return (size_t)vc_round_up(a->out_channels * p->kvol * a->in_channels * 2, 256);
}

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

/* B's tensor map: forward reads w[co][K][ci] as dims {ci, K, co}, box {64, 1, bn}; dgrad
 * the transposed copy wt[K][ci][co] as dims {co, ci, K}, box {64, bn, 1}. Both land as
 * bn rows of 64 reduction channels, 128-byte swizzled. */
static vc_status mk_tensor_map(vc_context *ctx, const imp_args &q, const void *w, int bn, CUtensorMap *map) {
  vc_cuda_state *st = vc_cuda(ctx);
  const bool fwd = q.mode == MODE_FWD;
  const cuuint64_t dims[3] = {(cuuint64_t)(fwd ? q.ci : q.co), (cuuint64_t)(fwd ? q.K : q.ci),
                              (cuuint64_t)(fwd ? q.co : q.K)};
  const cuuint64_t strides[2] = {dims[0] * 2, dims[0] * dims[1] * 2};
  const cuuint32_t box[3] = {MK_BK, fwd ? 1u : (cuuint32_t)bn, fwd ? (cuuint32_t)bn : 1u};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = ((PFN_cuTensorMapEncodeTiled_v12000)st->encode_tiled)(
      map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, (void *)w, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return vc_fail(ctx, VC_ERR_DEVICE, "voxconv: cuTensorMapEncodeTiled failed (CUresult %d)", (int)r);
  return VC_OK;
}

vc_status vc_cuda_masked_run(vc_context *ctx, const imp_args &args, void *ws, cudaStream_t s) {
  imp_args q = args;
  if (q.mode == MODE_DGRAD) {
    k_transpose_weight<<<vc_grid(q.co * q.K * q.ci), 256, 0, s>>>((const uint16_t *)q.w, q.co, q.K, q.ci, (uint16_t *)ws);
    q.w = ws;
  }
  const int v = mk_variant(q, vc_cuda(ctx)->n_sm, vc_cuda(ctx)->masked_bn), bn = mk_bn[v];
  CUtensorMap map;
  vc_status e = mk_tensor_map(ctx, q, q.w, bn, &map);
  if (e != VC_OK) return e;
  q.n_tiles = (q.n_cols + bn - 1) / bn;
  const int64_t blocks = (q.rows + MK_BM - 1) / MK_BM * q.n_tiles;
  mk_kernels[v][q.mode == MODE_DGRAD][q.dt == VC_DTYPE_BF16]<<<(unsigned)blocks, MK_THREADS(MK_NP(bn)), MK_SMEM(bn), s>>>(q, map);
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
