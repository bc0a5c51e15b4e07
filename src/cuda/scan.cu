/* scan.cu — device prefix sums and a radix sort of unique 64-bit keys: the two primitives
 * the kernel-map builder needs (CUB is a C++ template library, which we do not use). */
#include "cuda_internal.h"

#define SCAN_THREADS 256
#define SCAN_ITEMS 8
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

/* Exclusive scan of one value per thread across the block; returns the block total in
 * *total. `sm` holds SCAN_THREADS / 32 + 1 values. */
__device__ static int64_t block_exclusive_scan(int64_t v, int64_t *sm, int64_t *total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  int64_t x = v;
  for (int d = 1; d < 32; d <<= 1) {
    int64_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) sm[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int64_t w = lane < nwarps ? sm[lane] : 0, t = w;
    for (int d = 1; d < 32; d <<= 1) {
      int64_t y = __shfl_up_sync(0xffffffffu, t, d);
      if (lane >= d) t += y;
    }
    if (lane < nwarps) sm[lane] = t - w;
    if (lane == nwarps - 1) sm[nwarps] = t;
  }
  __syncthreads();
  int64_t r = sm[warp] + x - v;
  *total = sm[nwarps];
  __syncthreads();
  return r;
}

/* Phase 1: each tile's sum into sums (reduce, then scan: the input is read twice, 4 bytes a
 * value, where a scan of each tile first read it once but wrote and rewrote 8 bytes a value
 * for a pass adding the tile's prefix). Loads striped across the block: coalesced. */
__global__ static void __launch_bounds__(SCAN_THREADS) scan_reduce(const int32_t *in, int64_t *sums, int64_t n) {
  __shared__ int64_t sm[SCAN_THREADS / 32 + 1];
  const int64_t t0 = (int64_t)blockIdx.x * SCAN_TILE;
  int64_t s = 0;
#pragma unroll
  for (int i = 0; i < SCAN_ITEMS; i++) {
    const int64_t j = t0 + i * SCAN_THREADS + threadIdx.x;
    if (j < n) s += in[j];
  }
  int64_t total;
  block_exclusive_scan(s, sm, &total);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

/* Phase 2: one block scans the tile sums in place (exclusive); sums[ntiles] = grand total. */
__global__ static void scan_sums(int64_t *sums, int64_t ntiles) {
  __shared__ int64_t sm[SCAN_THREADS / 32 + 1];
  int64_t carry = 0;
  for (int64_t b = 0; b < ntiles; b += SCAN_THREADS) {
    int64_t i = b + threadIdx.x, v = i < ntiles ? sums[i] : 0, total;
    int64_t pre = block_exclusive_scan(v, sm, &total);
    if (i < ntiles) sums[i] = carry + pre;
    carry += total;
  }
  if (threadIdx.x == 0) sums[ntiles] = carry;
}

/* Phase 3: each tile's exclusive scan from its prefix in sums. The tile is staged in shared
 * memory striped across the block (coalesced loads and stores), and each thread scans 8
 * consecutive values there (one pad word every 8 keeps that walk free of bank conflicts). */
#define SCAN_PAD(i) ((i) + (i) / SCAN_ITEMS)
__global__ static void __launch_bounds__(SCAN_THREADS) scan_tiles(const int32_t *in, int64_t *out, const int64_t *sums,
                                                                  int64_t n) {
  __shared__ int64_t buf[SCAN_PAD(SCAN_TILE)];
  __shared__ int64_t sm[SCAN_THREADS / 32 + 1];
  const int64_t t0 = (int64_t)blockIdx.x * SCAN_TILE;
#pragma unroll
  for (int i = 0; i < SCAN_ITEMS; i++) {
    const int j = i * SCAN_THREADS + threadIdx.x;
    buf[SCAN_PAD(j)] = t0 + j < n ? in[t0 + j] : 0;
  }
  __syncthreads();
  int64_t v[SCAN_ITEMS], s = 0;
#pragma unroll
  for (int i = 0; i < SCAN_ITEMS; i++) s += v[i] = buf[SCAN_PAD(threadIdx.x * SCAN_ITEMS + i)];
  int64_t total, pre = block_exclusive_scan(s, sm, &total) + sums[blockIdx.x];
#pragma unroll
  for (int i = 0; i < SCAN_ITEMS; i++) { /* a thread rewrites only the words it read */
    buf[SCAN_PAD(threadIdx.x * SCAN_ITEMS + i)] = pre;
    pre += v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < SCAN_ITEMS; i++) {
    const int j = i * SCAN_THREADS + threadIdx.x;
    if (t0 + j < n) out[t0 + j] = buf[SCAN_PAD(j)];
  }
}

extern "C" size_t vc_cuda_scan_tmp_bytes(int64_t n) {
  return (size_t)((n + SCAN_TILE - 1) / SCAN_TILE + 1) * sizeof(int64_t);
}

/* out[n] = exclusive prefix of in; ((int64_t *)tmp)[ntiles] holds the total afterwards. */
extern "C" void vc_cuda_scan_exclusive(const int32_t *in, int64_t *out, int64_t n, void *tmp, cudaStream_t s) {
  if (n <= 0) {
    cudaMemsetAsync(tmp, 0, sizeof(int64_t), s);
    return;
  }
  int64_t ntiles = (n + SCAN_TILE - 1) / SCAN_TILE, *sums = (int64_t *)tmp;
  scan_reduce<<<(unsigned)ntiles, SCAN_THREADS, 0, s>>>(in, sums, n);
  scan_sums<<<1, SCAN_THREADS, 0, s>>>(sums, ntiles);
  scan_tiles<<<(unsigned)ntiles, SCAN_THREADS, 0, s>>>(in, out, sums, n);
}

/* ---- radix sort: 8 passes of 8 bits, least significant first, stable -------------------- */

#define RADIX_BITS 8
#define RADIX_BINS 256

/* Per tile and digit, how many keys fall in that digit: hist[digit * ntiles + tile], so an
 * exclusive scan of hist gives every (digit, tile) its first output slot. */
__global__ static void radix_histogram(const uint64_t *keys, int32_t *hist, int64_t n, int shift, int64_t ntiles) {
  __shared__ int32_t h[RADIX_BINS];
  for (int i = threadIdx.x; i < RADIX_BINS; i += blockDim.x) h[i] = 0;
  __syncthreads();
  const int64_t base = (int64_t)blockIdx.x * SCAN_TILE;
  for (int i = threadIdx.x; i < SCAN_TILE; i += blockDim.x)
    if (base + i < n) atomicAdd(&h[(keys[base + i] >> shift) & (RADIX_BINS - 1)], 1);
  __syncthreads();
  for (int i = threadIdx.x; i < RADIX_BINS; i += blockDim.x) hist[(int64_t)i * ntiles + blockIdx.x] = h[i];
}

/* Stable scatter: the tile is ordered by digit in shared memory through 8 one-bit splits
 * (each a block scan), which keeps equal digits in input order; each key then goes to its
 * digit's global start for this tile plus its rank within the digit. */
__global__ static void radix_scatter(const uint64_t *in, uint64_t *out, const int64_t *start, int64_t n, int shift,
                                     int64_t ntiles) {
  __shared__ uint64_t tile[SCAN_TILE];
  __shared__ int64_t sm[SCAN_THREADS / 32 + 1];
  __shared__ int32_t first[RADIX_BINS];
  const int64_t base = (int64_t)blockIdx.x * SCAN_TILE;
  const int count = (int)min((int64_t)SCAN_TILE, n - base);
  for (int i = threadIdx.x; i < SCAN_TILE; i += blockDim.x) tile[i] = i < count ? in[base + i] : ~0ull;
  __syncthreads();
  for (int b = 0; b < RADIX_BITS; b++) {
    uint64_t k[SCAN_ITEMS];
    int64_t zeros = 0;
#pragma unroll
    for (int i = 0; i < SCAN_ITEMS; i++) {
      k[i] = tile[threadIdx.x * SCAN_ITEMS + i];
      zeros += !((k[i] >> (shift + b)) & 1);
    }
    int64_t total_zeros, zpre = block_exclusive_scan(zeros, sm, &total_zeros);
    int64_t opre = (int64_t)threadIdx.x * SCAN_ITEMS - zpre; /* ones before this thread */
#pragma unroll
    for (int i = 0; i < SCAN_ITEMS; i++) {
      bool one = (k[i] >> (shift + b)) & 1;
      int64_t dst = one ? total_zeros + opre++ : zpre++;
      tile[dst] = k[i];
    }
    __syncthreads();
  }
  /* padding keys (all ones) sort to the end: only the first `count` are real */
  for (int i = threadIdx.x; i < RADIX_BINS; i += blockDim.x) first[i] = SCAN_TILE;
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    int d = (int)((tile[i] >> shift) & (RADIX_BINS - 1));
    if (i == 0 || d != (int)((tile[i - 1] >> shift) & (RADIX_BINS - 1))) first[d] = i;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    int d = (int)((tile[i] >> shift) & (RADIX_BINS - 1));
    out[start[(int64_t)d * ntiles + blockIdx.x] + (i - first[d])] = tile[i];
  }
}

extern "C" size_t vc_cuda_sort_tmp_bytes(int64_t n) {
  int64_t ntiles = (n + SCAN_TILE - 1) / SCAN_TILE, h = ntiles * RADIX_BINS;
  return (size_t)n * sizeof(uint64_t) + (size_t)h * (sizeof(int32_t) + sizeof(int64_t)) + vc_cuda_scan_tmp_bytes(h) + 64;
}

extern "C" void vc_cuda_sort_u64(uint64_t *keys, int64_t n, void *tmp, cudaStream_t s) {
  if (n <= 1) return;
  const int64_t ntiles = (n + SCAN_TILE - 1) / SCAN_TILE, h = ntiles * RADIX_BINS;
  uint64_t *alt = (uint64_t *)tmp;
  int64_t *start = (int64_t *)(alt + n);
  int32_t *hist = (int32_t *)(start + h);
  void *scan_tmp = (void *)vc_round_up((int64_t)(uintptr_t)(hist + h), 16);
  uint64_t *src = keys, *dst = alt;
  for (int shift = 0; shift < 64; shift += RADIX_BITS) { /* 8 passes: result ends in `keys` */
    radix_histogram<<<(unsigned)ntiles, SCAN_THREADS, 0, s>>>(src, hist, n, shift, ntiles);
    vc_cuda_scan_exclusive(hist, start, h, scan_tmp, s);
    radix_scatter<<<(unsigned)ntiles, SCAN_THREADS, 0, s>>>(src, dst, start, n, shift, ntiles);
    uint64_t *t = src;
    src = dst, dst = t;
  }
}
