/* backend.cu — the CUDA backend's entry in the dispatch table: context, plan memory copies,
 * workspace sizes, dispatch of the passes to explicit.cu / implicit.cu, tuning hooks. */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vc_status use_device(vc_context *ctx) {
  VC_CUDA_TRY(ctx, cudaSetDevice(ctx->device)); /* the caller's thread may point elsewhere */
  return VC_OK;
}

/* A knob's decimal value in [lo, hi], the whole string: *v, true; else false. */
static bool env_in_range(const char *text, long long lo, long long hi, long long *v) {
  char *end = NULL;
  *v = strtoll(text, &end, 10);
  return !*end && *v >= lo && *v <= hi;
}

static vc_status cuda_context_init(vc_context *ctx) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    return vc_fail(ctx, VC_ERR_DEVICE, "vc_context_create: no CUDA device is available (%s)",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  }
  if (ctx->device >= count)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: device = %d, but only %d CUDA devices exist",
                   ctx->device, count);
  vc_cuda_state *st = (vc_cuda_state *)calloc(1, sizeof *st);
  if (!st) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_context_create: out of host memory");
  ctx->backend_state = st;
  cudaDeviceProp prop;
  VC_CUDA_TRY(ctx, cudaSetDevice(ctx->device));
  VC_CUDA_TRY(ctx, cudaGetDeviceProperties(&prop, ctx->device));
  if (prop.major < 8)
    return vc_fail(ctx, VC_ERR_UNSUPPORTED, "vc_context_create: %s has compute capability %d.%d; voxconv needs 8.0 or newer",
                   prop.name, prop.major, prop.minor);
  const char *wg = getenv("VOXCONV_WGMMA");
  const bool sm90 = prop.major == 9 && prop.minor == 0;
  st->masked = sm90 && !(wg && !strcmp(wg, "0"));
  st->n_sm = prop.multiProcessorCount;
  st->l2_bytes = prop.l2CacheSize;
  const char *bn = getenv("VOXCONV_MASKED_BN");
  if (bn && *bn) {
    st->masked_bn = atoi(bn);
    if (strcmp(bn, "64") && strcmp(bn, "96") && strcmp(bn, "128") && strcmp(bn, "256"))
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: VOXCONV_MASKED_BN = \"%s\"; use 64, 96, 128 or 256", bn);
  }
  const char *sp = getenv("VOXCONV_MASKED_SPLIT");
  long long v = 0;
  if (sp && *sp) {
    if (!env_in_range(sp, 1, 16, &v))
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: VOXCONV_MASKED_SPLIT = \"%s\"; use 1 to 16", sp);
    st->masked_split = (int)v;
  }
  const char *pipes = getenv("VOXCONV_MASKED_PIPES");
  if (pipes && *pipes) {
    if (strcmp(pipes, "1") && strcmp(pipes, "2"))
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: VOXCONV_MASKED_PIPES = \"%s\"; use 1 or 2", pipes);
    st->masked_pipes = atoi(pipes);
  }
  const char *wf = getenv("VOXCONV_MASKED_WGRAD");
  if (wf && *wf) {
    st->masked_wgrad = vc_cuda_masked_variant_parse(VC_PASS_BACKWARD_WEIGHT, wf); /* the cache file's names */
    if (st->masked_wgrad <= 0)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: VOXCONV_MASKED_WGRAD = \"%s\"; use pairs or rows", wf);
  }
  const char *mf = getenv("VOXCONV_MASKED_FORM");
  if (mf && *mf) {
    if (strcmp(mf, "rows") && strcmp(mf, "pairs"))
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: VOXCONV_MASKED_FORM = \"%s\"; use rows or pairs", mf);
    st->masked_form = strcmp(mf, "rows") ? VC_FORM_PAIRS : VC_FORM_ROWS;
  }
  const char *pr = getenv("VOXCONV_MASKED_PAIR_ROWS");
  if (pr && *pr) {
    if (!env_in_range(pr, 1, 1LL << 30, &v))
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_context_create: VOXCONV_MASKED_PAIR_ROWS = \"%s\"; use 1 to 2^30", pr);
    st->masked_pair_rows = v;
  }
  /* The tune key's device: a context whose candidates or tiles the environment changed
   * must not share cache entries with normal ones. */
  char tag[256] = "";
  if (sm90 && !st->masked) snprintf(tag, sizeof tag, " [VOXCONV_WGMMA=0]");
  if (st->masked_bn) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " [VOXCONV_MASKED_BN=%d]", st->masked_bn);
  if (st->masked_split)
    snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " [VOXCONV_MASKED_SPLIT=%d]", st->masked_split);
  if (st->masked_pipes) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " [VOXCONV_MASKED_PIPES=%d]", st->masked_pipes);
  if (st->masked_wgrad) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " [VOXCONV_MASKED_WGRAD=%s]", wf);
  if (st->masked_form) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " [VOXCONV_MASKED_FORM=%s]", mf);
  if (st->masked_pair_rows)
    snprintf(tag + strlen(tag), sizeof tag - strlen(tag), " [VOXCONV_MASKED_PAIR_ROWS=%lld]", (long long)st->masked_pair_rows);
  snprintf(st->name, sizeof st->name, "%s%s", prop.name, tag);
  cublasStatus_t b = cublasCreate(&st->blas);
  if (b != CUBLAS_STATUS_SUCCESS)
    return vc_fail(ctx, VC_ERR_DEVICE, "vc_context_create: cublasCreate failed: %s", cublasGetStatusString(b));
  cudaMemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = cudaMemAllocationTypePinned;
  pp.location.type = cudaMemLocationTypeDevice;
  pp.location.id = ctx->device;
  VC_CUDA_TRY(ctx, cudaMemPoolCreate(&st->pool, &pp));
  uint64_t keep = UINT64_MAX; /* never hand cached blocks back to the driver before destroy */
  VC_CUDA_TRY(ctx, cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &keep));
  vc_status s = vc_cuda_kmap_init(ctx, prop.sharedMemPerBlockOptin);
  return s == VC_OK ? vc_cuda_implicit_init(ctx) : s;
}

static void cuda_context_release(vc_context *ctx) {
  vc_cuda_state *st = vc_cuda(ctx);
  if (!st) return;
  if (st->blas) cublasDestroy(st->blas);
  if (st->join) cudaEventDestroy(st->join);
  if (st->fork) cudaEventDestroy(st->fork);
  if (st->aux) cudaStreamDestroy(st->aux);
  if (st->pool) cudaMemPoolDestroy(st->pool);
  free(st);
  ctx->backend_state = NULL;
}

static vc_status cuda_plan_build(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_plan *paired, void *stream) {
  vc_status s = use_device(ctx);
  return s == VC_OK ? vc_cuda_plan_build(ctx, p, coords, paired, stream) : s;
}

static vc_status cuda_out_coords(const vc_plan *p, int32_t *dst, void *stream) {
  vc_status st = use_device(p->ctx);
  return st == VC_OK ? vc_cuda_out_coords(p, dst, (cudaStream_t)stream) : st;
}

static vc_status cuda_kernel_map(const vc_plan *p, int32_t *in_index, int32_t *out_index, void *stream) {
  vc_status st = use_device(p->ctx);
  return st == VC_OK ? vc_cuda_kernel_map(p, in_index, out_index, (cudaStream_t)stream) : st;
}

static vc_status cuda_workspace_size(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant, size_t *bytes) {
  *bytes = a->algo == VC_ALGO_EXPLICIT ? vc_cuda_explicit_workspace(p, a, pass)
                                       : vc_cuda_implicit_workspace(p, a, pass, variant);
  return VC_OK;
}

/* in0..out1 as in explicit.cu: fwd (x, w, bias, y), dgrad (dy, w, -, dx), wgrad (x, dy, -, dw, db). */
static vc_status run(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, vc_pass pass,
                     const void *in0, const void *in1, const void *in2, void *out0, void *out1, void *ws, void *stream) {
  vc_status s = use_device(ctx);
  if (s != VC_OK) return s;
  cudaStream_t st = (cudaStream_t)stream;
  if (a->algo == VC_ALGO_EXPLICIT) return vc_cuda_explicit_run(ctx, p, a, pass, in0, in1, in2, out0, out1, ws, st);
  return vc_cuda_implicit_run(ctx, p, a, variant, pass, in0, in1, in2, out0, out1, ws, st);
}

static vc_status cuda_forward(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *x,
                              const void *w, const void *bias, void *y, void *ws, size_t ws_bytes, void *stream) {
  return run(ctx, p, a, variant, VC_PASS_FORWARD, x, w, bias, y, NULL, ws, stream);
}

static vc_status cuda_backward_data(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant,
                                    const void *dy, const void *w, void *dx, void *ws, size_t ws_bytes, void *stream) {
  return run(ctx, p, a, variant, VC_PASS_BACKWARD_DATA, dy, w, NULL, dx, NULL, ws, stream);
}

static vc_status cuda_backward_weight(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant,
                                      const void *x, const void *dy, void *dw, void *db, void *ws, size_t ws_bytes,
                                      void *stream) {
  return run(ctx, p, a, variant, VC_PASS_BACKWARD_WEIGHT, x, dy, NULL, dw, db, ws, stream);
}

/* masked exists on sm_90 devices only; where its kernels do not apply (f32, channels off
 * multiples of 8, unaligned operands, an unaligned wgrad workspace) it runs the implicit
 * kernels. */
static int cuda_algos(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo out[8], int *n_tunable) {
  int n = 0;
  if (vc_cuda(p->ctx)->masked) out[n++] = VC_ALGO_MASKED;
  out[n++] = VC_ALGO_IMPLICIT;
  out[n++] = VC_ALGO_EXPLICIT;
  *n_tunable = n;
  return n;
}

/* Tensor cores through the fused kernels for 16-bit storage (masked on sm_90), and for
 * tf32 on sm_90 where the channels suit the wgmma kernels (elsewhere masked would run the
 * exact FFMA kernel); cuBLAS for exact f32 and the rest of tf32. */
static vc_algo cuda_heuristic(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  const bool masked = vc_cuda(p->ctx)->masked && vc_cuda_masked_kernels(a);
  if (a->dtype == VC_DTYPE_F32)
    return masked && a->in_channels % 8 == 0 && a->out_channels % 8 == 0 ? VC_ALGO_MASKED : VC_ALGO_EXPLICIT;
  return masked ? VC_ALGO_MASKED : VC_ALGO_IMPLICIT;
}

/* The implicit wgrad adds split partials with atomics. Masked's wgrad adds them in L2 too
 * (TMA reduce-adds), except in a deterministic context, where it adds ordered slices (and
 * where it falls back to the implicit kernel, runs that with one split, so each CTA stores
 * its elements of dW itself): so masked counts as deterministic, because it is wherever
 * that is asked for. Everything else has a fixed order. */
static bool cuda_deterministic(vc_algo algo, vc_pass pass) {
  return !(algo == VC_ALGO_IMPLICIT && pass == VC_PASS_BACKWARD_WEIGHT);
}

/* Variants: the masked forward and dgrad's tile shapes (masked.cu), its wgrad's forms
 * (wgrad.cu); none where the environment fixes them or the masked kernels do not run this
 * dtype. */
static int cuda_variants(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int out[], bool *restricted) {
  const vc_cuda_state *cs = vc_cuda(p->ctx);
  if (a->algo != VC_ALGO_MASKED || !vc_cuda_masked_kernels(a) || !cs->masked) return 0;
  if (pass == VC_PASS_BACKWARD_WEIGHT) return cs->masked_wgrad ? 0 : vc_cuda_masked_wgrad_variants(p, a, out);
  if (cs->masked_bn || cs->masked_split || cs->masked_form) return 0;
  return vc_cuda_masked_variants(p, a, pass, out, restricted);
}

static const char *cuda_device_name(vc_context *ctx) { return vc_cuda(ctx)->name; }

/* ---- tuning: random buffers, events, median of 5 ------------------------------------------ */

__global__ static void k_random(uint16_t *b, int64_t n_halves, uint64_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_halves; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t z = (seed + (uint64_t)i) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    /* a half or bf16 in [-1, 1); pairs of halves read as f32 stay finite (exponent < 128) */
    b[i] = (uint16_t)(0x3800 | (z >> 54)) ^ (uint16_t)((z & 1) << 15);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One set of random buffers for all candidates (the workspace at the largest any of them
 * needs); each candidate: a warm-up, then the median of 5 runs. */
static vc_status cuda_time_choices(vc_context *ctx, const vc_plan *p, const vc_conv_args *args, vc_pass pass,
                                   const vc_choice *cand, int n, void *stream, double *ms) {
  const cudaStream_t s = (cudaStream_t)stream;
  vc_conv_args a = *args;
  const int64_t es = (int64_t)vc_dtype_size(a.dtype), ci = a.in_channels, co = a.out_channels;
  /* x, w, bias, dy, the pass's output (y, dx or dw: room for the largest), db */
  const int64_t nx = p->n_in * ci, nw = co * p->kvol * ci, ny = p->n_out * co;
  const int64_t sizes[6] = {nx, nw, co, ny, nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw), co};
  size_t ws_bytes = 0;
  for (int c = 0; c < n; c++) {
    size_t b = 0;
    a.algo = cand[c].algo;
    cuda_workspace_size(p, &a, pass, cand[c].variant, &b);
    if (b > ws_bytes) ws_bytes = b;
  }
  void *buf[7] = {0};
  vc_status st = use_device(ctx);
  for (int i = 0; i < 6 && st == VC_OK; i++) {
    if (cudaMalloc(&buf[i], (size_t)(sizes[i] + 8) * es) != cudaSuccess) {
      cudaGetLastError();
      st = vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_conv_tune: allocating tuning buffers failed");
    } else {
      k_random<<<1024, 256, 0, s>>>((uint16_t *)buf[i], (sizes[i] + 8) * es / 2, (uint64_t)i * 7919);
    }
  }
  if (st == VC_OK && cudaMalloc(&buf[6], ws_bytes ? ws_bytes : 16) != cudaSuccess) {
    cudaGetLastError();
    st = vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_conv_tune: allocating the workspace failed");
  }
  cudaEvent_t e0 = NULL, e1 = NULL;
  if (st == VC_OK && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess))
    st = vc_fail(ctx, VC_ERR_DEVICE, "vc_conv_tune: cudaEventCreate failed");
  for (int c = 0; c < n && st == VC_OK; c++) {
    const int v = cand[c].variant;
    double t[6];
    a.algo = cand[c].algo;
    for (int rep = 0; rep < 6 && st == VC_OK; rep++) { /* rep 0 warms up */
      cudaEventRecord(e0, s);
      if (pass == VC_PASS_FORWARD) st = run(ctx, p, &a, v, pass, buf[0], buf[1], buf[2], buf[4], NULL, buf[6], stream);
      else if (pass == VC_PASS_BACKWARD_DATA) st = run(ctx, p, &a, v, pass, buf[3], buf[1], NULL, buf[4], NULL, buf[6], stream);
      else st = run(ctx, p, &a, v, pass, buf[0], buf[3], NULL, buf[4], buf[5], buf[6], stream);
      cudaEventRecord(e1, s);
      float f = 0;
      if (st == VC_OK && (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&f, e0, e1) != cudaSuccess))
        st = vc_fail(ctx, VC_ERR_DEVICE, "vc_conv_tune: timing failed: %s", cudaGetErrorString(cudaGetLastError()));
      t[rep] = f;
    }
    qsort(t + 1, 5, sizeof(double), cmp_double);
    ms[c] = t[3];
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  for (int i = 0; i < 7; i++) cudaFree(buf[i]);
  return st;
}

extern "C" {
extern const vc_backend vc_cuda_backend;
const vc_backend vc_cuda_backend = {
    "cuda",
    cuda_context_init,
    cuda_context_release,
    cuda_plan_build,
    vc_cuda_plan_release,
    cuda_out_coords,
    cuda_kernel_map,
    cuda_workspace_size,
    cuda_forward,
    cuda_backward_data,
    cuda_backward_weight,
    cuda_algos,
    cuda_heuristic,
    cuda_deterministic,
    cuda_variants,
    vc_cuda_masked_variant_name,
    vc_cuda_masked_variant_parse,
    cuda_time_choices,
    cuda_device_name,
};
}
