/* device.c — buffers, copies, timers and the dense ceiling on the CPU or through CUDA
 * (see device.h). The CUDA half is compiled when the Makefile found nvcc (VC_HAVE_CUDA);
 * without it a CPU device is the only one. */
#include "device.h"

#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef VC_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

const char *const device_names[] = {"auto", "cpu", "cuda", NULL};

/* ---- CUDA: error checks and the parts with no CPU counterpart ----------------------------- */

#ifdef VC_HAVE_CUDA
static void cu_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "voxconv: %s: %s\n", what, cudaGetErrorString(e));
  exit(1);
}

static void blas_check(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fprintf(stderr, "voxconv: %s: %s\n", what, cublasGetStatusString(s));
  exit(1);
}

static cudaStream_t cu_stream(const vc_dev *d) { return (cudaStream_t)d->stream; }

/* Stream, cuBLAS handle and events for a CUDA context on device 0. */
static void cu_open(vc_dev *d) {
  cudaStream_t s;
  cublasHandle_t h;
  cudaEvent_t e[2];
  cu_check(cudaSetDevice(0), "cudaSetDevice");
  cu_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  blas_check(cublasCreate(&h), "cublasCreate");
  blas_check(cublasSetStream(h, s), "cublasSetStream");
  for (int i = 0; i < 2; i++) cu_check(cudaEventCreate(&e[i]), "cudaEventCreate");
  d->stream = s, d->blas = h, d->events[0] = e[0], d->events[1] = e[1];
  struct cudaDeviceProp prop;
  cu_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  snprintf(d->name, sizeof d->name, "cuda: %.100s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
           (double)prop.totalGlobalMem / (1 << 30));
}

static void cu_close(vc_dev *d) {
  for (int i = 0; i < 2; i++) cudaEventDestroy((cudaEvent_t)d->events[i]);
  cublasDestroy((cublasHandle_t)d->blas);
  cudaStreamDestroy(cu_stream(d));
}

static cudaDataType_t cu_type(vc_dtype dt) {
  return dt == VC_DTYPE_F16 ? CUDA_R_16F : dt == VC_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

typedef struct cu_gemm {
  vc_dev *dev;
  int n;
  vc_dtype dt;
  cublasComputeType_t compute;
  void *a, *b, *c;
} cu_gemm;

/* A timed_body: C = A B, n x n x n, f32 accumulation, on the device's stream. */
static double cu_gemm_timed(void *arg) {
  cu_gemm *g = arg;
  const float one = 1, zero = 0;
  const cudaDataType_t t = cu_type(g->dt);
  dev_timer_start(g->dev);
  blas_check(cublasGemmEx((cublasHandle_t)g->dev->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, t,
                          g->n, g->b, t, g->n, &zero, g->c, t, g->n, g->compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
  return dev_timer_stop(g->dev);
}

static double cu_dense_peak(vc_dev *d, vc_dtype dt, vc_math math, int warmup, int reps, char *label, size_t len) {
  enum { N = 8192 };
  const int64_t nn = (int64_t)N * N;
  cu_gemm g = {d, N, dt, math == VC_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
               dev_random(d, dt, nn, 1.0), dev_random(d, dt, nn, 1.0), dev_poisoned(d, dt, nn)};
  const double ms = median_ms(cu_gemm_timed, &g, warmup, reps);
  dev_free(d, g.a), dev_free(d, g.b), dev_free(d, g.c);
  snprintf(label, len, "one %dx%dx%d cublasGemmEx, %s storage, %s", N, N, N, dtype_names[dt],
           math == VC_MATH_TF32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F");
  return 2.0 * N * (double)N * N / ms * 1e-9;
}
#endif

/* ---- open and close ---------------------------------------------------------------------- */

static void cpu_open(vc_dev *d, const char *why) {
  check(NULL, vc_context_create(VC_DEVICE_CPU, 0, &d->ctx));
  snprintf(d->name, sizeof d->name, "cpu (%.150s)", why);
}

void dev_open(vc_dev *d, int choice) {
  memset(d, 0, sizeof *d);
  if (choice == DEVICE_CPU) {
    cpu_open(d, "--device cpu");
    return;
  }
#ifdef VC_HAVE_CUDA
  vc_status s = vc_context_create(VC_DEVICE_CUDA, 0, &d->ctx);
  if (s == VC_OK) {
    d->cuda = true;
    cu_open(d);
    return;
  }
  if (choice == DEVICE_CUDA) {
    fprintf(stderr, "voxconv: --device cuda: %s\n", vc_last_error(NULL));
    exit(1);
  }
  char why[600];
  snprintf(why, sizeof why, "no CUDA context: %s", vc_last_error(NULL));
  cpu_open(d, why);
#else
  if (choice == DEVICE_CUDA) {
    fprintf(stderr, "voxconv: --device cuda: this build has no CUDA (nvcc was not found at build time)\n");
    exit(1);
  }
  cpu_open(d, "this build has no CUDA");
#endif
}

void dev_close(vc_dev *d) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) cu_close(d);
#endif
  vc_context_destroy(d->ctx);
  memset(d, 0, sizeof *d);
}

/* ---- memory ------------------------------------------------------------------------------ */

void *dev_alloc(const vc_dev *d, size_t bytes) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
      fprintf(stderr, "voxconv: cudaMalloc of %zu bytes: %s\n", bytes, cudaGetErrorString(e));
      exit(1);
    }
    return p;
  }
#endif
  return xmalloc(bytes);
}

void dev_free(const vc_dev *d, void *p) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    if (p) cu_check(cudaFree(p), "cudaFree");
    return;
  }
#endif
  free(p);
}

/* Ordered on the device's stream, and finished when it returns. */
static void dev_copy(const vc_dev *d, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cu_stream(d)), "cudaMemcpyAsync");
    dev_sync(d);
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

void dev_upload(const vc_dev *d, void *dst, const void *src, size_t bytes) { dev_copy(d, dst, src, bytes); }
void dev_download(const vc_dev *d, void *dst, const void *src, size_t bytes) { dev_copy(d, dst, src, bytes); }

void *dev_to_host(const vc_dev *d, const void *src, size_t bytes) {
  void *h = xmalloc(bytes);
  dev_download(d, h, src, bytes);
  return h;
}

void *dev_from_host(const vc_dev *d, const void *src, size_t bytes) {
  void *p = dev_alloc(d, bytes);
  dev_upload(d, p, src, bytes);
  return p;
}

float *dev_to_f32(const vc_dev *d, vc_dtype dt, const void *src, int64_t n) {
  void *h = dev_to_host(d, src, (size_t)n * vc_dtype_size(dt));
  float *f = to_f32(dt, h, n);
  free(h);
  return f;
}

void dev_poison(const vc_dev *d, void *p, size_t bytes) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    cu_check(cudaMemsetAsync(p, 0xff, bytes, cu_stream(d)), "cudaMemsetAsync");
    return;
  }
#endif
  memset(p, 0xff, bytes);
}

void dev_sync(const vc_dev *d) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) cu_check(cudaStreamSynchronize(cu_stream(d)), "cudaStreamSynchronize");
#endif
  (void)d;
}

/* ---- tensors ----------------------------------------------------------------------------- */

void *dev_random(const vc_dev *d, vc_dtype dt, int64_t n, double scale) {
  void *h = tensor_random(dt, n, scale);
  if (!d->cuda) return h;
  const size_t bytes = (size_t)n * vc_dtype_size(dt);
  void *p = dev_from_host(d, h, bytes);
  free(h);
  return p;
}

void *dev_poisoned(const vc_dev *d, vc_dtype dt, int64_t n) {
  const size_t bytes = (size_t)n * vc_dtype_size(dt);
  void *p = dev_alloc(d, bytes);
  dev_poison(d, p, bytes);
  return p;
}

static float op_add(float a, float b) { return a + b; }

void dev_add(const vc_dev *d, vc_dtype dt, int64_t n, const void *x, void *y) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    const float one = 1;
    if (n > INT32_MAX) {
      fprintf(stderr, "voxconv: dev_add: %lld elements exceed one cuBLAS call\n", (long long)n);
      exit(1);
    }
    blas_check(cublasAxpyEx((cublasHandle_t)d->blas, (int)n, &one, CUDA_R_32F, x, cu_type(dt), 1, y, cu_type(dt), 1,
                            CUDA_R_32F),
               "cublasAxpyEx");
    return;
  }
#endif
  elementwise_into(dt, n, y, y, x, op_add); /* y + x, as cuBLAS's axpy */
}

void dev_map(const vc_dev *d, vc_dtype dt, int64_t n, void *out, const void *a, const void *b, elementwise_op op) {
  if (!d->cuda) {
    elementwise_into(dt, n, out, a, b, op);
    return;
  }
  const size_t bytes = (size_t)n * vc_dtype_size(dt);
  void *ha = dev_to_host(d, a, bytes), *hb = b ? dev_to_host(d, b, bytes) : NULL;
  elementwise_into(dt, n, ha, ha, hb, op);
  dev_upload(d, out, ha, bytes);
  free(ha), free(hb);
}

/* ---- timers and the dense ceiling -------------------------------------------------------- */

void dev_timer_start(vc_dev *d) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    cu_check(cudaEventRecord((cudaEvent_t)d->events[0], cu_stream(d)), "cudaEventRecord");
    return;
  }
#endif
  d->t0 = now_ms();
}

double dev_timer_stop(vc_dev *d) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) {
    float ms = 0;
    cu_check(cudaEventRecord((cudaEvent_t)d->events[1], cu_stream(d)), "cudaEventRecord");
    cu_check(cudaEventSynchronize((cudaEvent_t)d->events[1]), "cudaEventSynchronize");
    cu_check(cudaEventElapsedTime(&ms, (cudaEvent_t)d->events[0], (cudaEvent_t)d->events[1]), "cudaEventElapsedTime");
    return ms;
  }
#endif
  return now_ms() - d->t0;
}

static double cpu_dense_peak(int warmup, int reps, char *label, size_t len) {
  enum { N = 2048 };
  sgemm_case g = {N, N, N, random_f32((int64_t)N * N, 1), random_f32((int64_t)N * N, 1),
                  xmalloc((size_t)N * N * sizeof(float))};
  const double ms = median_ms(sgemm_timed, &g, warmup, reps);
  free(g.a), free(g.b), free(g.c);
  snprintf(label, len, "one %dx%dx%d cblas_sgemm in f32 (the CPU ceiling for every dtype)", N, N, N);
  return 2.0 * N * (double)N * N / ms * 1e-9;
}

double dev_dense_peak(vc_dev *d, vc_dtype dt, vc_math math, int warmup, int reps, char *label, size_t len) {
#ifdef VC_HAVE_CUDA
  if (d->cuda) return cu_dense_peak(d, dt, math, warmup, reps, label, len);
#endif
  return cpu_dense_peak(warmup, reps, label, len);
}

/* ---- plan builds ------------------------------------------------------------------------- */

double dev_timed_build(vc_dev *d, void (*build)(void *arg), void *arg) {
  dev_sync(d);
  const double t0 = now_ms();
  build(arg);
  dev_sync(d);
  return now_ms() - t0;
}

static void plan_build_once(void *arg) {
  plan_build *b = arg;
  check(b->dev->ctx,
        vc_plan_create(b->dev->ctx, &b->desc, b->coords, b->n, b->paired, b->dev->stream, &b->plan));
}

double plan_timed(void *arg) {
  plan_build *b = arg;
  vc_plan_destroy(b->plan);
  b->plan = NULL;
  return dev_timed_build(b->dev, plan_build_once, b);
}

/* ---- one layer --------------------------------------------------------------------------- */

void dev_params_alloc(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, double gain, dev_params *out) {
  const int64_t wn = a->out_channels * vc_plan_kernel_volume(p) * a->in_channels;
  out->w = dev_random(d, a->dtype, wn, weight_bound(p, a->in_channels, gain));
  out->b = dev_random(d, a->dtype, a->out_channels, 0.1);
  out->dw = dev_poisoned(d, a->dtype, wn);
  out->db = dev_poisoned(d, a->dtype, a->out_channels);
}

void dev_params_free(const vc_dev *d, dev_params *prm) {
  dev_free(d, prm->w), dev_free(d, prm->b), dev_free(d, prm->dw), dev_free(d, prm->db);
  memset(prm, 0, sizeof *prm);
}

conv_call dev_call(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, vc_pass pass, const dev_params *prm,
                   const void *x, const void *dy, void *y_or_dx, workspace *ws) {
  const conv_tensors t = {x, prm->w, prm->b, dy, y_or_dx, y_or_dx, prm->dw, prm->db};
  return conv_call_for(d->ctx, p, a, pass, &t, ws, d->stream);
}

void dev_pass(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, vc_pass pass, const dev_params *prm,
              const void *x, const void *dy, void *y_or_dx, workspace *ws) {
  const conv_call c = dev_call(d, p, a, pass, prm, x, dy, y_or_dx, ws);
  check(d->ctx, conv_execute(&c));
}

void dev_kernel_map(const vc_dev *d, const vc_plan *p, int64_t **off, int32_t **in, int32_t **out) {
  const size_t bytes = (size_t)vc_plan_pair_count(p) * sizeof(int32_t);
  int32_t *din = in ? dev_alloc(d, bytes) : NULL, *dout = dev_alloc(d, bytes);
  *off = xmalloc((size_t)(vc_plan_kernel_volume(p) + 1) * sizeof **off);
  check(d->ctx, vc_plan_kernel_map(p, *off, din, dout, d->stream));
  dev_sync(d);
  if (in) *in = dev_to_host(d, din, bytes);
  *out = dev_to_host(d, dout, bytes);
  dev_free(d, din), dev_free(d, dout);
}

/* A host copy of a device tensor (the tensor itself on a CPU device); NULL stays NULL. */
static void *host_view(const vc_dev *d, const void *t, int64_t n, vc_dtype dt) {
  if (!t || !d->cuda) return (void *)t;
  return dev_to_host(d, t, (size_t)n * vc_dtype_size(dt));
}

static void host_view_free(const vc_dev *d, void *h) {
  if (d->cuda) free(h);
}

double dev_reference_error(const vc_dev *d, const conv_call *c, vc_context *ref_ctx, const vc_plan *ref_plan,
                           workspace *ref_ws) {
  const vc_dtype dt = c->args.dtype;
  conv_call r = *c;
  r.ctx = ref_ctx, r.plan = ref_plan, r.ws = ref_ws, r.stream = NULL;
  r.args.algo = VC_ALGO_REFERENCE;
  int64_t n_in[3], n_out[2];
  conv_in_counts(c, n_in);
  conv_out_counts(c, n_out);
  void *in[3], *out[2];
  for (int k = 0; k < 3; k++) r.in[k] = in[k] = host_view(d, c->in[k], n_in[k], dt);
  for (int k = 0; k < 2; k++) r.out[k] = n_out[k] ? tensor_poisoned(dt, n_out[k]) : NULL;
  for (int k = 0; k < 2; k++) out[k] = host_view(d, c->out[k], n_out[k], dt);
  ws_reserve(&r);
  check(ref_ctx, conv_execute(&r));
  double err = 0;
  for (int k = 0; k < 2; k++)
    if (n_out[k]) err = worse(err, rel_err(dt, out[k], r.out[k], n_out[k]));
  for (int k = 0; k < 3; k++) host_view_free(d, in[k]);
  for (int k = 0; k < 2; k++) host_view_free(d, out[k]), free(r.out[k]);
  return err;
}
