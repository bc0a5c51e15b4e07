/* implicit_sm90.cu — the implicit algorithm's forward and dgrad on Hopper (sm_90a), f16 and
 * bf16 on the fast path (channel counts multiple of 8, 16-byte aligned operands).
 *
 * The same gathered GEMM as implicit.cu (C[m, n] = sum over the tile's active offsets r and
 * reduction channels k of A[nb[m, r], k] * W_r[n, k]) with the MMAs issued as asynchronous
 * warpgroup wgmma from shared memory instead of mma.sync from registers: the ldmatrix
 * traffic, the register-file operand fetch and the per-warp issue of 16 MMAs per k16 step
 * go away, and the tensor cores run while the next stages are gathered.
 *
 * Tile 128 rows x 128 columns x 64 reduction channels per stage, two warpgroups of 64 rows
 * each (m64n128k16, 64 fp32 accumulators a thread), every thread also gathering: the rows
 * of a stage arrive by cp.async into 128-byte-swizzled K-major tiles, a WG_STAGES-deep ring
 * with WG_STAGES - 2 stages in flight and one wgmma group per warpgroup outstanding. dgrad
 * reads a per-call transposed weight copy [K][ci][co] so that both passes have K-major B.
 */
#include "implicit.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/wgmma.cuh"

#define WG_BM 128
#define WG_BN 128
#define WG_BK 64 /* one 128-byte swizzle row of 16-bit values */
#define WG_STAGES 5
#define WG_THREADS 256
#define WG_TILE (WG_BM * WG_BK * 2) /* bytes of one operand tile (WG_BN == WG_BM) */
#define WG_SMEM (2 * WG_STAGES * WG_TILE + 1024) /* + slack to align the ring to 1024 bytes */
#define WG_CPAD 8                                /* epilogue staging row padding (elements) */
static_assert(WG_BN == WG_BM, "A and B tiles share one size");
static_assert(WG_BM * (WG_BN + WG_CPAD) * 2 <= 2 * WG_STAGES * WG_TILE, "the epilogue tile fits the ring");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VC_SM90A 1
#endif

#ifdef VC_SM90A
/* Stage `it` into ring slot (sA, sB): A = the tile's 128 rows gathered through the stage's
 * offset, B = the offset's weight slice for the tile's 128 columns, both 64 reduction
 * channels wide. B[n][k] = w[n * b_sn + rw * b_sr + k]. Missing rows and channels past the
 * end are zero-filled. */
__device__ static __forceinline__ void wg_load(const imp_args &p, const tile_pos &t, const int32_t *rowid,
                                               const int16_t *act, const int32_t *gtab, int n_act, int it, uint8_t *sA,
                                               uint8_t *sB, int64_t b_sn, int64_t b_sr) {
  const uint16_t *a_src = (const uint16_t *)p.a_src, *w = (const uint16_t *)p.w;
  const int a = it / t.nkc, col = act[a], rw = p.flip ? p.K - 1 - col : col;
  const int64_t k0 = (int64_t)(it % t.nkc) * WG_BK;
#pragma unroll
  for (int h = 0; h < WG_BM * WG_BK / 8 / WG_THREADS; h++) {
    const int c = threadIdx.x + h * WG_THREADS, m = c >> 3, q = c & 7;
    const int64_t k = k0 + q * 8;
    const bool kin = k < p.c_red;
    const int32_t row = gather_row(p, rowid, gtab, n_act, WG_BM, a, col, m);
    const bool oka = row >= 0 && kin;
    vc_cp_async16(sA + vc_sw128(m, q), oka ? a_src + (int64_t)row * p.c_red + k : a_src, oka);
    const int64_t n = t.n0 + m;
    const bool okb = n < p.n_cols && kin;
    vc_cp_async16(sB + vc_sw128(m, q), okb ? w + n * b_sn + rw * b_sr + k : w, okb);
  }
}

#endif

__device__ static __forceinline__ void wg_body(const imp_args &args, const int mode, const int dt) {
#ifdef VC_SM90A
  imp_args p = args;
  p.mode = mode, p.dt = dt, p.fast = 1;
  extern __shared__ __align__(16) uint8_t wg_smem[];
  TILE_SETUP(WG_BM, WG_BN, WG_BK, false);
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(wg_smem);
  uint8_t *ring = wg_smem + (((base + 1023) & ~1023u) - base);
  uint8_t *sA = ring, *sB = ring + WG_STAGES * WG_TILE;
  const int64_t b_sn = mode == MODE_FWD ? (int64_t)p.K * p.ci : p.co;
  const int64_t b_sr = mode == MODE_FWD ? p.ci : p.ci * p.co;
  const int wg = threadIdx.x >> 7;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; i++) acc[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < WG_STAGES - 2; s++) {
    if (s < t.n_it) wg_load(p, t, rowid, act, gtab, n_act, s, sA + s * WG_TILE, sB + s * WG_TILE, b_sn, b_sr);
    vc_cp_async_commit();
  }
  for (int it = 0; it < t.n_it; it++) {
    VC_CP_ASYNC_WAIT(2); /* == WG_STAGES - 3: this thread's copies of stage `it` have landed */
    vc_fence_proxy_async();
    /* every thread's copies of stage it are visible to wgmma, and both warpgroups have
     * retired the wgmma group of stage it-2, whose slot the next load reuses */
    __syncthreads();
    const int nxt = it + WG_STAGES - 2;
    if (nxt < t.n_it)
      wg_load(p, t, rowid, act, gtab, n_act, nxt, sA + (nxt % WG_STAGES) * WG_TILE, sB + (nxt % WG_STAGES) * WG_TILE,
              b_sn, b_sr);
    vc_cp_async_commit();
    /* No skip of a warpgroup whose rows all miss the offset: wgmma under a branch the
     * compiler cannot prove warpgroup-uniform is serialised (ptxas C7520), which costs more
     * than the few percent of MMAs such a skip saves over the tile's offset union. */
    vc_wgmma_fence();
    const uint32_t a0 = (uint32_t)__cvta_generic_to_shared(sA + (it % WG_STAGES) * WG_TILE) + wg * 64 * 128;
    const uint32_t b0 = (uint32_t)__cvta_generic_to_shared(sB + (it % WG_STAGES) * WG_TILE);
#pragma unroll
    for (int kk = 0; kk < WG_BK / 16; kk++) {
      if (dt == VC_DTYPE_BF16) vc_wgmma_n128_bf16(acc, vc_wgmma_desc(a0 + 32 * kk), vc_wgmma_desc(b0 + 32 * kk));
      else vc_wgmma_n128_f16(acc, vc_wgmma_desc(a0 + 32 * kk), vc_wgmma_desc(b0 + 32 * kk));
    }
    vc_wgmma_commit();
    VC_WGMMA_WAIT(1);
  }
  VC_WGMMA_WAIT(0);
#pragma unroll
  for (int i = 0; i < 64; i++) vc_reg_fence(acc[i]);
  VC_CP_ASYNC_WAIT(0);
  __syncthreads(); /* the ring is idle: it stages the output tile */

  /* Output rows leave as 16-byte stores through shared memory (the fragments' own layout
   * writes 4 bytes per row per thread). */
  uint16_t *sC = (uint16_t *)ring; /* [WG_BM][WG_BN + WG_CPAD] */
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < WG_BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int m = wg * 64 + warp * 16 + (lane >> 2) + 8 * h, n = 8 * j + 2 * (lane & 3);
      if (t.n0 + n < p.n_cols) /* n_cols % 8 == 0 on the fast path */
        *(uint32_t *)(sC + m * (WG_BN + WG_CPAD) + n) = pack2(p, t.n0 + n, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
  __syncthreads();
  for (int c = threadIdx.x; c < WG_BM * WG_BN / 8; c += WG_THREADS) {
    const int m = c / (WG_BN / 8), n = (c % (WG_BN / 8)) * 8;
    const int32_t row = rowid[m];
    if (row >= 0 && t.n0 + n < p.n_cols)
      *(uint4 *)((uint16_t *)p.out + (int64_t)row * p.n_cols + t.n0 + n) =
          *(const uint4 *)(sC + m * (WG_BN + WG_CPAD) + n);
  }
#else
  __trap(); /* launched only on sm_90 devices, which run the sm_90a code */
#endif
}

#define WG_KERNEL(name, mode, dt) \
  __global__ void __launch_bounds__(WG_THREADS, 1) name(const imp_args p) { wg_body(p, mode, dt); }
WG_KERNEL(k_wg_fwd_f16, MODE_FWD, VC_DTYPE_F16)
WG_KERNEL(k_wg_fwd_bf16, MODE_FWD, VC_DTYPE_BF16)
WG_KERNEL(k_wg_dgrad_f16, MODE_DGRAD, VC_DTYPE_F16)
WG_KERNEL(k_wg_dgrad_bf16, MODE_DGRAD, VC_DTYPE_BF16)

typedef void (*wg_kernel)(const imp_args);
static const wg_kernel wg_kernels[2][2] = {{k_wg_fwd_f16, k_wg_fwd_bf16}, {k_wg_dgrad_f16, k_wg_dgrad_bf16}};

/* wt[r][ci][co] = w[co][r][ci] (16-bit values): dgrad's B operand, K-major. */
__global__ static void k_transpose_weight(const uint16_t *w, int64_t co, int K, int64_t ci, uint16_t *wt) {
  const int64_t total = co * K * ci;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = e % co, rc = e / co; /* e = (r * ci + c) * co + o: writes coalesced */
    const int64_t r = rc / ci, c = rc % ci;
    wt[e] = w[(o * K + r) * ci + c];
  }
}

size_t vc_cuda_implicit_sm90_workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  if (pass != VC_PASS_BACKWARD_DATA || a->dtype == VC_DTYPE_F32) return 0;
  return (size_t)vc_round_up(a->out_channels * p->kvol * a->in_channels * 2, 256);
}

vc_status vc_cuda_implicit_sm90_run(vc_context *ctx, const imp_args &args, void *ws, cudaStream_t s) {
  imp_args q = args;
  if (q.mode == MODE_DGRAD) {
    k_transpose_weight<<<vc_grid(q.co * q.K * q.ci), 256, 0, s>>>((const uint16_t *)q.w, q.co, q.K, q.ci, (uint16_t *)ws);
    q.w = ws;
  }
  q.n_tiles = (q.n_cols + WG_BN - 1) / WG_BN;
  const int64_t blocks = (q.rows + WG_BM - 1) / WG_BM * q.n_tiles;
  wg_kernels[q.mode == MODE_DGRAD][q.dt == VC_DTYPE_BF16]<<<(unsigned)blocks, WG_THREADS, WG_SMEM, s>>>(q);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

vc_status vc_cuda_implicit_sm90_init(vc_context *ctx) {
  for (int m = 0; m < 2; m++)
    for (int d = 0; d < 2; d++)
      VC_CUDA_TRY(ctx, cudaFuncSetAttribute(wg_kernels[m][d], cudaFuncAttributeMaxDynamicSharedMemorySize, WG_SMEM));
  return VC_OK;
}
