/* wgrad.cu — VC_ALGO_MASKED's weight gradient on Hopper (sm_90a), f16/bf16 on the fast path
 * (channel counts multiple of 8, 16-byte aligned x, dy and workspace); other shapes run the
 * implicit kernel.
 *
 * dW_r[co][ci] = sum over the pairs j of offset r of dy[pout_j][co] * x[pin_j][ci]: one GEMM
 * per offset whose reduction runs over gathered rows, all offsets in one launch (the
 * offsets are the groups of a grouped GEMM). Each offset's pairs are cut into chunks of one
 * length for all offsets, so every CTA has the same work (the last chunk of an offset
 * aside) whatever the offsets' pair counts; a CTA owns 128 output channels x BN input
 * channels of one chunk; stages hold 64 pairs.
 *
 * The gathered rows are contiguous along the channels, so both wgmma operands are
 * MN-major: a stage row is one pair's 64 channels (128 bytes, 128-byte swizzled), and the
 * tiles are 64-channel atoms of 64 rows. The warp roles and the stage ring are ring.cuh's:
 * producer warpgroups gather with cp.async (no TMA: both operands are gathers), two
 * consumer warpgroups issue m64nBNk16 wgmma over 64 output channels each.
 *
 * No atomics: chunk c of offset r writes its fp32 partial dW_r to slice c of the workspace,
 * and a second kernel adds each offset's slices in chunk order and converts, so the result
 * is bitwise repeatable. */
#include "../implicit.cuh"
#include "ring.cuh"

#define WR_BM 128 /* output channels per CTA: two consumer warpgroups of 64 */
#define WR_BK 64  /* pairs per stage */
#define WR_A_TILE (2 * HP_ATOM) /* a stage: 64 pairs x 128 output channels, two atoms */
#define WR_B_TILE(bn) ((bn) / 64 * HP_ATOM)
#define WR_STAGES(bn) HP_STAGES(WR_A_TILE, WR_B_TILE(bn))
#define WR_SMEM(bn) HP_SMEM(WR_A_TILE, WR_B_TILE(bn))
#define WR_MIN_CHUNK 512 /* pairs per chunk at least: 8 stages */
/* Stages ahead that a producer thread loads its pair indices: they stream from memory, so
 * the narrow tiles' short stages need more of them in flight; the 256-wide tile's thread
 * copies 4 pairs a stage (8 index registers a stage ahead) and its stages last longer. */
#define WR_PF(np) ((np) == 1 ? 2 : 6)

/* p: a_src = dy, b_src = x, pin/pout/offsets, K, ci, co, split_len (the chunk length);
 * part = the workspace slices [nsplit][co][K][ci]. */
__device__ static __forceinline__ void wr_body(const imp_args &p, float *part, const int dt, const int bn,
                                               const int np) {
#ifdef VC_SM90A
  const int st = WR_STAGES(bn), pt = 128 * np, PF = WR_PF(np);
  extern __shared__ __align__(16) uint8_t wr_smem[];
  const int n_ci_t = (int)((p.ci + bn - 1) / bn), n_co_t = (int)((p.co + WR_BM - 1) / WR_BM);
  /* consecutive CTAs share a chunk: the same gathered rows, read once from L2 */
  int64_t bid = blockIdx.x;
  const int nt = (int)(bid % n_ci_t);
  bid /= n_ci_t;
  const int ct = (int)(bid % n_co_t);
  bid /= n_co_t;
  /* chunk bid of the concatenated chunk lists of the offsets */
  int r = 0;
  int64_t lo = p.offsets[0], hi = p.offsets[1];
  for (int64_t n; bid >= (n = (hi - lo + p.split_len - 1) / p.split_len);) bid -= n, r++, lo = hi, hi = p.offsets[r + 1];
  const int split = (int)bid;
  const int64_t m0 = (int64_t)ct * WR_BM, n0 = (int64_t)nt * bn;
  const int64_t j0 = lo + split * p.split_len, j1 = min(hi, j0 + p.split_len);
  const int n_it = (int)((j1 - j0 + WR_BK - 1) / WR_BK);

  const hp_ring ring = hp_ring_init(wr_smem, st, WR_A_TILE, WR_B_TILE(bn), pt); /* cp.async arrivals only */
  const uint32_t sA = ring.a, sB = ring.b, full = ring.full, empty = ring.empty;
  const int wg = hp_warpgroup();

  if (wg < np) { /* ---- producers ---- */
    hp_producer_regs();
    /* thread tid: 16-byte chunk q of every atom, pair rows k0 + KR h of each stage */
    const int KR = pt / 8, tid = threadIdx.x, q = tid & 7, k0 = tid >> 3;
    const uint16_t *dy = (const uint16_t *)p.a_src, *x = (const uint16_t *)p.b_src;
    /* The pair indices of a stage are loaded PF stages ahead, so that no global load
     * latency sits between the slot becoming free and its copies being issued. */
    const int nh = WR_BK / KR; /* pair rows per thread and stage: 2 or 4 */
    int32_t io[6][4], ii[6][4]; /* [PF][nh] used */
#pragma unroll
    for (int d = 0; d < PF; d++)
#pragma unroll
      for (int h = 0; h < nh; h++) {
        const int64_t j = j0 + (int64_t)d * WR_BK + k0 + KR * h;
        const bool valid = j < j1;
        io[d][h] = valid ? p.pout[j] : -1;
        ii[d][h] = valid ? p.pin[j] : -1;
      }
    int s = 0, phase = 0;
    for (int it = 0; it < n_it; it++) {
      if (it >= st) vc_mbar_wait(empty + 8 * s, phase ^ 1);
      int32_t o4[4], i4[4];
#pragma unroll
      for (int h = 0; h < nh; h++) {
        o4[h] = io[0][h], i4[h] = ii[0][h];
#pragma unroll
        for (int d = 0; d + 1 < PF; d++) io[d][h] = io[d + 1][h], ii[d][h] = ii[d + 1][h];
        const int64_t j = j0 + (int64_t)(it + PF) * WR_BK + k0 + KR * h;
        const bool valid = j < j1;
        io[PF - 1][h] = valid ? p.pout[j] : -1;
        ii[PF - 1][h] = valid ? p.pin[j] : -1;
      }
#pragma unroll
      for (int h = 0; h < 4; h++) {
        if (h >= nh) break;
        const int k = k0 + KR * h;
        const bool valid = o4[h] >= 0; /* pairs past the chunk arrive as -1: zero rows */
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
    hp_pos pos = {0, 0};
    hp_consume(acc, ring, pos, n_it, st, WR_A_TILE, WR_B_TILE(bn), cw * HP_ATOM, bn, dt, HP_MNMN, 0u, 0u, 1, 0);
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

/* dw[co][r][ci] = the sum of offset r's chunk slices, in chunk order, converted to the
 * dtype; offsets without pairs get zeros. A block walks whole rows (co, r) of ci values. */
__global__ static void k_add_splits(const float *part, const int64_t *offsets, int64_t chunk, int K, int64_t ci,
                                    int64_t n, void *dw, int dt) {
  for (int64_t row = blockIdx.x; row * ci < n; row += gridDim.x) {
    const int r = (int)(row % K);
    const int64_t chunks = (offsets[r + 1] - offsets[r] + chunk - 1) / chunk;
    for (int64_t e = row * ci + threadIdx.x; e < (row + 1) * ci; e += blockDim.x) {
      float v = chunks > 0 ? part[e] : 0.0f;
      for (int64_t c = 1; c < chunks; c++) v += part[c * n + e];
      vc_store(dw, dt, e, v);
    }
  }
}

/* The tile width (VOXCONV_MASKED_BN's, else from the input channels) and the chunk length:
 * about four CTAs a multiprocessor over all offsets' pairs, at least WR_MIN_CHUNK pairs, and
 * at most 64 and 256 MB of slices (the longest offset's chunk count); one chunk an offset
 * where the tiles of the K offsets are enough CTAs. */
typedef struct wr_shape {
  int v;
  int64_t chunk, nsplit, blocks;
} wr_shape;

static wr_shape wr_shape_of(const vc_plan *p, const vc_conv_args *a) {
  wr_shape sh;
  const int64_t ci = a->in_channels, co = a->out_channels;
  const int forced = vc_cuda(p->ctx)->masked_bn;
  sh.v = forced ? (forced == 256 ? 2 : forced == 128 ? 1 : 0) : ci > 128 ? 2 : ci > 64 ? 1 : 0;
  const int64_t tiles = (co + WR_BM - 1) / WR_BM * ((ci + wr_bn[sh.v] - 1) / wr_bn[sh.v]);
  const int64_t want = (4 * vc_cuda(p->ctx)->n_sm + tiles - 1) / tiles; /* chunks over all offsets */
  int64_t chunk = vc_round_up((p->n_pairs + want - 1) / (want > 0 ? want : 1), WR_BK);
  int64_t max_slices = ((int64_t)256 << 20) / (co * p->kvol * ci * 4);
  if (max_slices > 64) max_slices = 64;
  if (max_slices < 1) max_slices = 1;
  const int64_t by_memory = vc_round_up((p->max_pairs + max_slices - 1) / max_slices, WR_BK);
  if (chunk < WR_MIN_CHUNK) chunk = WR_MIN_CHUNK;
  if (chunk < by_memory) chunk = by_memory;
  /* one chunk an offset already gives the CTAs wanted: no slices to add */
  if (want <= p->kvol) chunk = vc_round_up(p->max_pairs > 0 ? p->max_pairs : 1, WR_BK);
  sh.chunk = chunk;
  sh.nsplit = (p->max_pairs + chunk - 1) / chunk;
  if (sh.nsplit < 1) sh.nsplit = 1;
  int64_t chunks = 0;
  for (int r = 0; r < p->kvol; r++) chunks += (p->offsets[r + 1] - p->offsets[r] + chunk - 1) / chunk;
  sh.blocks = chunks * tiles;
  return sh;
}

size_t vc_cuda_masked_wgrad_workspace(const vc_plan *p, const vc_conv_args *a) {
  const wr_shape sh = wr_shape_of(p, a);
  return (size_t)vc_round_up(sh.nsplit * a->out_channels * p->kvol * a->in_channels * 4, 256) +
         vc_cuda_column_sums_tmp_bytes(a->out_channels);
}

vc_status vc_cuda_masked_wgrad_run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, const imp_args &args,
                                   void *dw, void *db, void *ws, cudaStream_t s) {
  imp_args q = args;
  const wr_shape sh = wr_shape_of(p, a);
  const int bn = wr_bn[sh.v];
  const int64_t n = q.co * q.K * q.ci;
  float *part = (float *)ws;
  q.split_len = sh.chunk;
  if (sh.blocks > 0)
    wr_kernels[sh.v][q.dt == VC_DTYPE_BF16]<<<(unsigned)sh.blocks, HP_THREADS(HP_NP(bn)), WR_SMEM(bn), s>>>(q, part);
  const int64_t rows = q.co * q.K;
  k_add_splits<<<(unsigned)(rows < 65535 ? rows : 65535), 128, 0, s>>>(part, q.offsets, sh.chunk, q.K, q.ci, n, dw, q.dt);
  if (db)
    vc_cuda_column_sums(db, a->dtype, q.a_src, p->n_out, q.co,
                        (char *)ws + vc_round_up(sh.nsplit * n * 4, 256), s);
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
