/* wgrad.cu — VC_ALGO_MASKED's weight gradient on Hopper (sm_90a), f16/bf16 on the fast path
 * (channel counts multiple of 8, 16-byte aligned x, dy and workspace); other shapes run the
 * implicit kernel.
 *
 * dW_r[co][ci] = sum over the pairs j of offset r of dy[pout_j][co] * x[pin_j][ci]: one GEMM
 * per offset whose reduction runs over gathered rows, all offsets in one launch (the
 * offsets are the groups of a grouped GEMM). A CTA owns 128 output channels x BN input
 * channels of one offset and one split of its pairs; stages hold 64 pairs.
 *
 * The gathered rows are contiguous along the channels, so both wgmma operands are
 * MN-major: a stage row is one pair's 64 channels (128 bytes, 128-byte swizzled), and the
 * tiles are 64-channel atoms of 64 rows. The warp roles and the stage ring are ring.cuh's:
 * producer warpgroups gather with cp.async (no TMA: both operands are gathers), two
 * consumer warpgroups issue m64nBNk16 wgmma over 64 output channels each.
 *
 * No atomics: every split writes its fp32 partial dW to its own slice of the workspace
 * (tiles with no pairs write zeros), and a second kernel adds the slices in split order and
 * converts, so the result is bitwise repeatable. */
#include "../implicit.cuh"
#include "ring.cuh"

#define WR_BM 128 /* output channels per CTA: two consumer warpgroups of 64 */
#define WR_BK 64  /* pairs per stage */
#define WR_A_TILE (2 * HP_ATOM) /* a stage: 64 pairs x 128 output channels, two atoms */
#define WR_B_TILE(bn) ((bn) / 64 * HP_ATOM)
#define WR_STAGES(bn) HP_STAGES(WR_A_TILE, WR_B_TILE(bn))
#define WR_SMEM(bn) HP_SMEM(WR_A_TILE, WR_B_TILE(bn))
#define WR_MIN_SPLIT 512 /* pairs per split at least: 8 stages */

/* p: a_src = dy, b_src = x, pin/pout/offsets, K, ci, co, nsplit, split_len; part = the
 * workspace slices [nsplit][co][K][ci]. */
__device__ static __forceinline__ void wr_body(const imp_args &p, float *part, const int dt, const int bn,
                                               const int np) {
#ifdef VC_SM90A
  const int st = WR_STAGES(bn), pt = 128 * np;
  extern __shared__ __align__(16) uint8_t wr_smem[];
  const int n_ci_t = (int)((p.ci + bn - 1) / bn), n_co_t = (int)((p.co + WR_BM - 1) / WR_BM);
  /* consecutive CTAs share (offset, split): the same gathered rows, read once from L2 */
  int64_t bid = blockIdx.x;
  const int nt = (int)(bid % n_ci_t);
  bid /= n_ci_t;
  const int ct = (int)(bid % n_co_t);
  bid /= n_co_t;
  const int split = (int)(bid % p.nsplit), r = (int)(bid / p.nsplit);
  const int64_t m0 = (int64_t)ct * WR_BM, n0 = (int64_t)nt * bn;
  const int64_t lo = p.offsets[r], hi = p.offsets[r + 1];
  const int64_t j0 = lo + split * p.split_len, j1 = min(hi, j0 + p.split_len);
  const int n_it = j1 > j0 ? (int)((j1 - j0 + WR_BK - 1) / WR_BK) : 0;

  const hp_ring ring = hp_ring_init(wr_smem, st, WR_A_TILE, WR_B_TILE(bn), pt); /* cp.async arrivals only */
  const uint32_t sA = ring.a, sB = ring.b, full = ring.full, empty = ring.empty;
  const int wg = hp_warpgroup();

  if (wg < np) { /* ---- producers ---- */
    hp_producer_regs();
    /* thread tid: 16-byte chunk q of every atom, pair rows k0 + KR h of each stage */
    const int KR = pt / 8, tid = threadIdx.x, q = tid & 7, k0 = tid >> 3;
    const uint16_t *dy = (const uint16_t *)p.a_src, *x = (const uint16_t *)p.b_src;
    /* The pair indices of a stage are loaded two stages ahead, so that no global load
     * latency sits between the slot becoming free and its copies being issued. */
    const int nh = WR_BK / KR; /* pair rows per thread and stage: 2 or 4 */
    int32_t io[2][4], ii[2][4];
#pragma unroll
    for (int d = 0; d < 2; d++)
#pragma unroll
      for (int h = 0; h < 4; h++) {
        const int64_t j = j0 + (int64_t)d * WR_BK + k0 + KR * h;
        const bool valid = h < nh && d < n_it && j < j1;
        io[d][h] = valid ? p.pout[j] : -1;
        ii[d][h] = valid ? p.pin[j] : -1;
      }
    int s = 0, phase = 0;
    for (int it = 0; it < n_it; it++) {
      if (it >= st) vc_mbar_wait(empty + 8 * s, phase ^ 1);
      int32_t o4[4], i4[4];
#pragma unroll
      for (int h = 0; h < 4; h++) {
        o4[h] = io[0][h], i4[h] = ii[0][h];
        io[0][h] = io[1][h], ii[0][h] = ii[1][h];
        const int64_t j = j0 + (int64_t)(it + 2) * WR_BK + k0 + KR * h;
        const bool valid = h < nh && j < j1;
        io[1][h] = valid ? p.pout[j] : -1;
        ii[1][h] = valid ? p.pin[j] : -1;
      }
#pragma unroll
      for (int h = 0; h < 4; h++) {
        if (h >= nh) break;
        const int k = k0 + KR * h;
        const bool valid = o4[h] >= 0; /* pairs past the split arrive as -1: zero rows */
        const int64_t o = valid ? o4[h] : 0, i = valid ? i4[h] : 0;
        const uint32_t off = vc_sw128(k, q);
#pragma unroll
        for (int w = 0; w < 2; w++) {
          const int64_t c = m0 + 64 * w + 8 * q;
          const bool ok = valid && c < p.co;
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sA + s * WR_A_TILE + w * HP_ATOM + off),
                       "l"(ok ? dy + o * p.co + c : dy), "r"(ok ? 16 : 0));
        }
#pragma unroll
        for (int u = 0; u < bn / 64; u++) {
          const int64_t c = n0 + 64 * u + 8 * q;
          const bool ok = valid && c < p.ci;
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sB + s * WR_B_TILE(bn) + u * HP_ATOM + off),
                       "l"(ok ? x + i * p.ci + c : x), "r"(ok ? 16 : 0));
        }
      }
      vc_mbar_arrive_cp_async(full + 8 * s);
      if (++s == st) s = 0, phase ^= 1;
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else { /* ---- consumers ---- */
    hp_consumer_regs(np);
    const int cw = wg - np, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    float acc[128];
#pragma unroll
    for (int i = 0; i < bn / 2; i++) acc[i] = 0.0f;
    hp_consume(acc, ring, n_it, st, WR_A_TILE, WR_B_TILE(bn), cw * HP_ATOM, bn, dt, HP_MNMN);
    /* the fragment: row = output channel, column = input channel */
    const int64_t kci = (int64_t)p.K * p.ci;
    float *dst = part + (int64_t)split * p.co * kci + (int64_t)r * p.ci;
#pragma unroll
    for (int j = 0; j < bn / 8; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t co = m0 + cw * 64 + warp * 16 + (lane >> 2) + 8 * h, ci = n0 + 8 * j + 2 * (lane & 3);
        if (co < p.co && ci < p.ci) /* ci % 8 == 0: both columns are inside */
          *(float2 *)(dst + co * kci + ci) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
  }
#else
  __trap();
#endif
}

#define WR_KERNEL(name, dt, bn)                                                                  \
  __global__ void __launch_bounds__(HP_THREADS(HP_NP(bn)), 1) name(const imp_args p, float *part) { \
    wr_body(p, part, dt, bn, HP_NP(bn));                                                        \
  }
WR_KERNEL(k_wr_f16_64, VC_DTYPE_F16, 64)
WR_KERNEL(k_wr_bf16_64, VC_DTYPE_BF16, 64)
WR_KERNEL(k_wr_f16_128, VC_DTYPE_F16, 128)
WR_KERNEL(k_wr_bf16_128, VC_DTYPE_BF16, 128)
WR_KERNEL(k_wr_f16_256, VC_DTYPE_F16, 256)
WR_KERNEL(k_wr_bf16_256, VC_DTYPE_BF16, 256)

typedef void (*wr_kernel)(const imp_args, float *);
static const int wr_bn[3] = {64, 128, 256};
static const wr_kernel wr_kernels[3][2] = {
    {k_wr_f16_64, k_wr_bf16_64}, {k_wr_f16_128, k_wr_bf16_128}, {k_wr_f16_256, k_wr_bf16_256}};

/* dw[e] = the sum of the nsplit slices at e, in split order, converted to the dtype. */
__global__ static void k_add_splits(const float *part, int nsplit, int64_t n, void *dw, int dt) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    float v = part[e];
    for (int s = 1; s < nsplit; s++) v += part[(int64_t)s * n + e];
    vc_store(dw, dt, e, v);
  }
}

/* The tile width (VOXCONV_MASKED_BN's, else from the input channels), and the splits: enough CTAs for two waves,
 * at least WR_MIN_SPLIT pairs per split, and at most 256 MB of partial slices. */
static void wr_shape(const vc_plan *p, const vc_conv_args *a, int *variant, int *nsplit) {
  const int64_t ci = a->in_channels, co = a->out_channels;
  const int forced = vc_cuda(p->ctx)->masked_bn;
  const int v = forced ? (forced == 256 ? 2 : forced == 128 ? 1 : 0) : ci > 128 ? 2 : ci > 64 ? 1 : 0;
  const int64_t tiles = (co + WR_BM - 1) / WR_BM * ((ci + wr_bn[v] - 1) / wr_bn[v]) * p->kvol;
  int64_t n = (2 * vc_cuda(p->ctx)->n_sm + tiles - 1) / tiles;
  const int64_t by_pairs = (p->max_pairs + WR_MIN_SPLIT - 1) / WR_MIN_SPLIT;
  const int64_t by_memory = ((int64_t)256 << 20) / (co * p->kvol * ci * 4);
  if (n > by_pairs) n = by_pairs;
  if (n > by_memory) n = by_memory;
  if (n > 64) n = 64;
  *variant = v;
  *nsplit = n < 1 ? 1 : (int)n;
}

size_t vc_cuda_masked_wgrad_workspace(const vc_plan *p, const vc_conv_args *a) {
  int v, nsplit;
  wr_shape(p, a, &v, &nsplit);
  return (size_t)vc_round_up((int64_t)nsplit * a->out_channels * p->kvol * a->in_channels * 4, 256) +
         vc_cuda_column_sums_tmp_bytes(a->out_channels);
}

vc_status vc_cuda_masked_wgrad_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, const imp_args &args,
                                   void *dw, void *db, void *ws, cudaStream_t s) {
  imp_args q = args;
  int v, nsplit;
  wr_shape(p, a, &v, &nsplit);
  const int bn = wr_bn[v];
  const int64_t n = q.co * q.K * q.ci;
  float *part = (float *)ws;
  q.nsplit = nsplit;
  q.split_len = vc_round_up((p->max_pairs + nsplit - 1) / nsplit, WR_BK);
  const int64_t blocks = (q.co + WR_BM - 1) / WR_BM * ((q.ci + bn - 1) / bn) * q.K * nsplit;
  wr_kernels[v][q.dt == VC_DTYPE_BF16]<<<(unsigned)blocks, HP_THREADS(HP_NP(bn)), WR_SMEM(bn), s>>>(q, part);
  k_add_splits<<<vc_grid(n), 256, 0, s>>>(part, nsplit, n, dw, q.dt);
  if (db)
    vc_cuda_column_sums(db, a->dtype, q.a_src, p->n_out, q.co,
                        (char *)ws + vc_round_up((int64_t)nsplit * n * 4, 256), s);
  VC_CUDA_TRY(ctx, cudaGetLastError());
  return VC_OK;
}

vc_status vc_cuda_masked_wgrad_init(vc_context *ctx) {
  for (int v = 0; v < 3; v++)
    for (int d = 0; d < 2; d++)
      VC_CUDA_TRY(ctx, cudaFuncSetAttribute(wr_kernels[v][d], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            WR_SMEM(wr_bn[v])));
  return VC_OK;
}
