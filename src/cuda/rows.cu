/* rows.cu — elementwise kernels shared by the passes: bias fill, ordered slice sums with
 * dtype conversion, and the deterministic column sums behind the bias gradient. */
#include "cuda_internal.h"
#include "dtype.cuh"

/* Partial sums per column of the bias gradient: a function of the row count alone, so the
 * result is repeatable (the Hopper wgrad's own partials, where it sums db itself, are one
 * per chunk of its rows instead: hopper/wgrad.cu). One per 16 rows, in multiples of 8, up
 * to 256: a plan of 848 rows (suite S RES 16) kept 256 x 1024 fp64 partials, 2 MB against
 * its 1.7 MB output. */
#define SUM_ROW_BLOCKS_MAX 256
static int sum_row_blocks(int64_t n) {
  const int64_t b = (n + 16 * 8 - 1) / (16 * 8) * 8;
  return b < 8 ? 8 : b > SUM_ROW_BLOCKS_MAX ? SUM_ROW_BLOCKS_MAX : (int)b;
}

/* out[n, c] (storage type odt: f32, or f16 / bf16) = the bias row (of bias_dt; zeros
 * without one), `vec` values a thread: 4 where c % 4 == 0 and out is 16-byte aligned (a 16-
 * or 8-byte store), else 1 (one float a thread took 5.2 us for 848 x 1024 floats, suite S
 * RES 16, twice a layer around the masked pairs form; bench/NOTES.md, session 24). */
__global__ static void k_fill_rows(void *out, int odt, int64_t n, int64_t c, const void *bias, int bias_dt, int vec) {
  const int64_t items = n * c / vec;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < items; i += (int64_t)gridDim.x * blockDim.x) {
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; e++) v[e] = e < vec && bias ? vc_load(bias, bias_dt, (i * vec + e) % c) : 0.0f;
    if (vec == 1) vc_store(out, odt, i, v[0]);
    else if (odt == VC_DTYPE_F32) ((float4 *)out)[i] = make_float4(v[0], v[1], v[2], v[3]);
    else ((uint2 *)out)[i] = make_uint2(vc_pack2(odt, v[0], v[1]), vc_pack2(odt, v[2], v[3]));
  }
}

/* part[b, k] = sum over the rows of row block b (of gridDim.y) of column k, in f64: the bias
 * gradient sums up to millions of rows and must stay within f32 rounding of the truth. A
 * block is 32 columns (coalesced reads) x 8 row lanes, reduced in shared memory. */
__global__ static void k_column_partials(const void *dy, int dt, int64_t n, int64_t c, double *part) {
  __shared__ double red[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t k = (int64_t)blockIdx.x * 32 + tx;
  /* four running sums over every fourth row of the lane, added in a fixed order: four
   * loads in flight instead of a chain of dependent ones */
  const int64_t step = (int64_t)gridDim.y * 8;
  double s = 0, s1 = 0, s2 = 0, s3 = 0;
  if (k < c) {
    int64_t i = (int64_t)blockIdx.y * 8 + ty;
    for (; i + 3 * step < n; i += 4 * step) {
      const float v0 = vc_load(dy, dt, i * c + k), v1 = vc_load(dy, dt, (i + step) * c + k);
      const float v2 = vc_load(dy, dt, (i + 2 * step) * c + k), v3 = vc_load(dy, dt, (i + 3 * step) * c + k);
      s += v0, s1 += v1, s2 += v2, s3 += v3;
    }
    for (; i < n; i += step) s += vc_load(dy, dt, i * c + k);
    s += s1 + s2 + s3;
  }
  red[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && k < c) {
    for (int j = 1; j < 8; j++) s += red[j][tx];
    part[(int64_t)blockIdx.y * c + k] = s;
  }
}

/* The same partials where rows are whole 16-byte vectors (c * element size % 16 == 0, at
 * most 256 vectors a row, dy 16-byte aligned): thread t of a block reads vector t % cv of
 * rows in lane t / cv, 16 bytes a load and four rows in flight, so a warp reads 512
 * contiguous bytes where the kernel above reads 64 (the bias gradient ran at ~40 % of the
 * memory bandwidth). Lanes are added in lane order: a fixed order. */
#define SUM_VEC_THREADS 256
__global__ static void k_column_partials_vec(const void *dy, int dt, int64_t n, int64_t c, double *part) {
  __shared__ double red[SUM_VEC_THREADS * 8]; /* [lane][c]: lanes x c <= 256 x 8 */
  const int es = dt == VC_DTYPE_F32 ? 4 : 2, vpe = 16 / es;
  const int cv = (int)(c / vpe), nl = SUM_VEC_THREADS / cv;
  const int g = threadIdx.x % cv, rl = threadIdx.x / cv;
  double sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (rl < nl) {
    const int64_t step = (int64_t)gridDim.x * nl;
    const uint4 *src = (const uint4 *)dy;
    int64_t i = (int64_t)blockIdx.x * nl + rl;
    for (; i < n; i += 4 * step) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; u++) v[u] = i + u * step < n ? __ldg(src + (i + u * step) * cv + g) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
          if (es == 4) {
            sum[e] += __uint_as_float(w[e]);
          } else {
            float lo, hi;
            vc_unpack16x2(w[e], dt, &lo, &hi);
            sum[2 * e] += lo, sum[2 * e + 1] += hi;
          }
        }
      }
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
      if (e < vpe) red[rl * c + g * vpe + e] = sum[e];
  }
  __syncthreads();
  for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
    double t = red[k];
    for (int l = 1; l < nl; l++) t += red[l * c + k];
    part[(int64_t)blockIdx.x * c + k] = t;
  }
}

/* db[k] = the sum of the nblk partials of column k, for the 32 columns of block `blk`. A
 * block is 32 columns x 8 lanes, lane y adding partials y, y + 8, ... and the lanes adding
 * up in lane order: a fixed order, and up to 32 loads a thread in flight instead of 256 in a
 * row (one thread a column took ~22 us a call, a latency chain, in every bias gradient). */
__device__ static __forceinline__ void column_total(const double *part, int64_t nblk, int64_t c, void *db, int dt,
                                                    int64_t blk) {
  __shared__ double red[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t k = blk * 32 + tx;
  double s = 0;
  if (k < c)
    for (int64_t b0 = 0; b0 < nblk; b0 += SUM_ROW_BLOCKS_MAX) {
      double v[SUM_ROW_BLOCKS_MAX / 8];
#pragma unroll
      for (int b = 0; b < SUM_ROW_BLOCKS_MAX / 8; b++) {
        const int64_t i = b0 + ty + 8 * b;
        v[b] = i < nblk ? part[i * c + k] : 0.0;
      }
#pragma unroll
      for (int b = 0; b < SUM_ROW_BLOCKS_MAX / 8; b++) s += v[b];
    }
  red[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && k < c) {
    for (int j = 1; j < 8; j++) s += red[j][tx];
    vc_store(db, dt, k, (float)s);
  }
}

/* dst[e] = the sum over the slices c = 0 .. nslices - 1 of part[c * n + e], in slice order,
 * by blocks blk, + nblk, ...; with vec (slices_vec) four values a thread: one value a thread
 * took 5.2 us to convert 848 x 1024 floats (one slice: suite S RES 16, around the masked
 * pairs form; bench/NOTES.md, session 24), four 4.4 us. */
__device__ static __forceinline__ void add_slices(const float *part, int64_t nslices, int64_t n, void *dst, int dt,
                                                  bool vec, int64_t blk, int64_t nblk) {
  if (vec) {
    const float4 *p4 = (const float4 *)part;
    const int64_t n4 = n / 4;
    for (int64_t e = blk * blockDim.x + threadIdx.x; e < n4; e += nblk * blockDim.x) {
      float4 v = p4[e];
#pragma unroll 4
      for (int64_t c = 1; c < nslices; c++) {
        const float4 x = p4[c * n4 + e];
        v.x += x.x, v.y += x.y, v.z += x.z, v.w += x.w;
      }
      if (dt == VC_DTYPE_F32) ((float4 *)dst)[e] = v;
      else ((uint2 *)dst)[e] = make_uint2(vc_pack2(dt, v.x, v.y), vc_pack2(dt, v.z, v.w));
    }
    return;
  }
  for (int64_t e = blk * blockDim.x + threadIdx.x; e < n; e += nblk * blockDim.x) {
    float v = part[e];
#pragma unroll 8
    for (int64_t c = 1; c < nslices; c++) v += part[c * n + e];
    vc_store(dst, dt, e, v);
  }
}

/* Whether add_slices can take four values a thread, and the items it then walks. */
static bool slices_vec(const float *part, int64_t n, const void *dst) {
  return n % 4 == 0 && vc_aligned16(part) && vc_aligned16(dst);
}
static int64_t slices_items(int64_t n, bool vec) { return vec ? n / 4 : n; }

__global__ static void k_add_slices(const float *part, int64_t nslices, int64_t n, void *dst, int dt, bool vec) {
  add_slices(part, nslices, n, dst, dt, vec, blockIdx.x, gridDim.x);
}

/* The end of a backward-weight pass in one launch: blocks [0, slice_blocks) add the
 * slices, the others the bias gradient's column totals (each ran ~4 us a layer, mostly
 * latency, as two kernels). */
__global__ static void k_wgrad_finish(const float *part, int64_t nslices, int64_t n, void *dst, int dt, bool vec,
                                      int slice_blocks, const double *sums, int64_t nsums, int64_t c, void *db) {
  if ((int)blockIdx.x < slice_blocks) add_slices(part, nslices, n, dst, dt, vec, blockIdx.x, slice_blocks);
  else column_total(sums, nsums, c, db, dt, blockIdx.x - slice_blocks);
}

extern "C" void vc_cuda_fill_rows(void *out, vc_dtype odt, int64_t n, int64_t c, const void *bias, vc_dtype bias_dt,
                                  cudaStream_t s) {
  if (n * c <= 0) return;
  const int vec = c % 4 == 0 && vc_aligned16(out) ? 4 : 1;
  k_fill_rows<<<vc_grid(n * c / vec), 256, 0, s>>>(out, odt, n, c, bias, bias_dt, vec);
}

extern "C" void vc_cuda_add_slices(void *dst, vc_dtype dt, const float *part, int64_t nslices, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const bool vec = slices_vec(part, n, dst);
  k_add_slices<<<vc_grid(slices_items(n, vec)), 256, 0, s>>>(part, nslices, n, dst, dt, vec);
}

extern "C" size_t vc_cuda_column_sums_tmp_bytes(int64_t n_rows, int64_t c) {
  return (size_t)sum_row_blocks(n_rows) * (size_t)c * sizeof(double);
}

/* part[b, k] of the bias gradient's column sums into tmp (vc_cuda_column_sums_tmp_bytes). */
static void column_partials(vc_dtype dt, const void *dy, int64_t n, int64_t c, void *tmp, cudaStream_t s) {
  const int64_t es = (int64_t)vc_dtype_size(dt);
  if ((c * es) % 16 == 0 && c * es / 16 <= SUM_VEC_THREADS && vc_aligned16(dy)) {
    k_column_partials_vec<<<sum_row_blocks(n), SUM_VEC_THREADS, 0, s>>>(dy, dt, n, c, (double *)tmp);
  } else {
    dim3 grid(vc_blocks(c, 32), sum_row_blocks(n));
    k_column_partials<<<grid, 256, 0, s>>>(dy, dt, n, c, (double *)tmp);
  }
}

extern "C" void vc_cuda_wgrad_finish(void *dw, vc_dtype dt, const float *part, int64_t nslices, int64_t n, void *db,
                                     const void *dy, int64_t n_rows, int64_t c, void *tmp, int64_t tmp_parts,
                                     cudaStream_t s) {
  if (!db) {
    if (nslices > 0) vc_cuda_add_slices(dw, dt, part, nslices, n, s);
    return;
  }
  if (tmp_parts <= 0) column_partials(dt, dy, n_rows, c, tmp, s);
  const bool vec = slices_vec(part, n, dw);
  const int64_t slice_blocks = nslices > 0 && n > 0 ? vc_grid(slices_items(n, vec)) : 0;
  k_wgrad_finish<<<(unsigned)(slice_blocks + vc_blocks(c, 32)), 256, 0, s>>>(
      part, nslices, n, dw, dt, vec, (int)slice_blocks, (const double *)tmp,
      tmp_parts > 0 ? tmp_parts : sum_row_blocks(n_rows), c, db);
}
