/* device.h — the tool's view of one device: a voxconv context plus, on CUDA, a stream,
 * a cuBLAS handle and two events. Buffers, copies, timers and the dense ceiling go through
 * it, so a command is written once for the CPU and for CUDA.
 *
 * On a CPU device every "device" pointer is host memory, copies are memcpy and timers read
 * the host clock (CPU execute calls return when done). On CUDA, buffers are cudaMalloc'd,
 * work is queued on `stream`, and timers are CUDA events on that stream.
 * Like common.h, failures print one line and exit with status 1.
 */
#ifndef VC_TOOLS_DEVICE_H
#define VC_TOOLS_DEVICE_H

#include "common.h"
#include "voxconv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA }; /* a --device choice */
extern const char *const device_names[];        /* "auto", "cpu", "cuda", NULL */

typedef struct vc_dev {
  vc_context *ctx;
  bool cuda;
  void *stream;    /* cudaStream_t (NULL on the CPU) */
  void *blas;      /* cublasHandle_t */
  void *events[2]; /* cudaEvent_t start, stop */
  double t0;       /* host timer start (CPU) */
  char name[200];  /* "NVIDIA H100 80GB HBM3", "cpu (no CUDA: ...)" */
} vc_dev;

/* Opens `choice`: auto takes CUDA when a context can be created, else the CPU (and says
 * why in d->name); cuda stops with "voxconv: --device cuda: " and the reason when it cannot. */
void dev_open(vc_dev *d, int choice);
void dev_close(vc_dev *d); /* frees what dev_open made; the device's buffers must be freed */

void *dev_alloc(const vc_dev *d, size_t bytes);
void dev_free(const vc_dev *d, void *p); /* NULL is fine */
void dev_upload(const vc_dev *d, void *dst, const void *src, size_t bytes);
void dev_download(const vc_dev *d, void *dst, const void *src, size_t bytes);
void *dev_to_host(const vc_dev *d, const void *src, size_t bytes); /* a malloc'd host copy */
void *dev_from_host(const vc_dev *d, const void *src, size_t bytes); /* a new device copy */
float *dev_to_f32(const vc_dev *d, vc_dtype dt, const void *src, int64_t n); /* malloc'd, in f32 */
void dev_poison(const vc_dev *d, void *p, size_t bytes);          /* all-ones bytes: NaN */
void dev_sync(const vc_dev *d);

/* n random elements of dt, uniform in [-scale, scale) (common.h's generator), on the device. */
void *dev_random(const vc_dev *d, vc_dtype dt, int64_t n, double scale);
/* n poisoned elements of dt on the device. */
void *dev_poisoned(const vc_dev *d, vc_dtype dt, int64_t n);
/* y[n] += x[n], in f32 arithmetic (cublasAxpyEx on CUDA). Allocates nothing: suite L
 * times it between its passes. */
void dev_add(const vc_dev *d, vc_dtype dt, int64_t n, const void *x, void *y);

/* out[n] = op(a, b) elementwise in f32 arithmetic (b may be NULL; out may be a or b). On
 * CUDA the operands go through host memory: for the tools' few activation functions,
 * outside every timing. */
void dev_map(const vc_dev *d, vc_dtype dt, int64_t n, void *out, const void *a, const void *b, elementwise_op op);

/* Times the work queued between start and stop, in ms; stop synchronises. */
void dev_timer_start(vc_dev *d);
double dev_timer_stop(vc_dev *d);

/* The dense ceiling of BENCHMARKS.md in TFLOP/s: on CUDA one 8192^3 cublasGemmEx in dt
 * (f32 accumulation; math TF32 selects CUBLAS_COMPUTE_32F_FAST_TF32), on the CPU one
 * 2048^3 cblas_sgemm whatever dt. Random operands; median of reps after warmup.
 * `label` receives a description of what was measured. */
double dev_dense_peak(vc_dev *d, vc_dtype dt, vc_math math, int warmup, int reps, char *label, size_t len);

/* Runs build(arg) between two device synchronisations and returns its milliseconds.
 * For kernel-map builds: the timing includes the synchronisation. */
double dev_timed_build(vc_dev *d, void (*build)(void *arg), void *arg);

/* Builds (or rebuilds) one plan; a timed_body measuring vc_plan_create plus the device
 * synchronisation. The previous plan is freed outside the timing. coords are device memory. */
typedef struct plan_build {
  vc_dev *dev;
  vc_conv_desc desc;
  const int32_t *coords;
  int64_t n;
  vc_plan *plan; /* the last one built */
  const vc_plan *paired; /* an inverse plan's strided plan (coords may then be NULL), else NULL */
} plan_build;

double plan_timed(void *arg);

/* Host copies of p's kernel map (vc_plan_kernel_map): *off [K + 1], the input rows *in and
 * the output rows *out of every pair; malloc'd, the caller frees them. in == NULL skips the
 * input rows. */
void dev_kernel_map(const vc_dev *d, const vc_plan *p, int64_t **off, int32_t **in, int32_t **out);

/* Re-runs c, a call on device d, with VC_ALGO_REFERENCE on ref_ctx and ref_plan (a CPU
 * context and its plan of the same geometry) from host copies of c's inputs, and returns
 * the largest ||out - ref|| / ||ref|| of c's outputs (infinite for a non-finite output).
 * ref_ws is host memory, grown as needed. */
double dev_reference_error(const vc_dev *d, const conv_call *c, vc_context *ref_ctx, const vc_plan *ref_plan,
                           workspace *ref_ws);

/* ---- one layer --------------------------------------------------------------------------- */

/* A layer's parameters and their gradients (device memory). */
typedef struct dev_params {
  void *w, *b, *dw, *db;
} dev_params;

/* Random w (bound weight_bound(p, Ci, gain)) and b (bound 0.1); poisoned dw and db. */
void dev_params_alloc(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, double gain, dev_params *out);
void dev_params_free(const vc_dev *d, dev_params *prm); /* NULL members are fine */

/* The call of one pass of a layer on the device's context and stream: forward x -> y,
 * backward-data dy -> dx (both in y_or_dx), backward-weight (x, dy) -> prm's dw and db. */
conv_call dev_call(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, vc_pass pass, const dev_params *prm,
                   const void *x, const void *dy, void *y_or_dx, workspace *ws);

/* Runs dev_call's call (asynchronous on CUDA). */
void dev_pass(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, vc_pass pass, const dev_params *prm,
              const void *x, const void *dy, void *y_or_dx, workspace *ws);

#endif
