/* common.h — what the `voxconv` commands share: stopping on errors, host memory, time,
 * random numbers, host tensors in any storage dtype, relative errors, one execute call.
 *
 * The tool is a one-shot program: a failed library call or allocation prints one line to
 * stderr and exits with status 1 (`check`, `xmalloc`).
 */
#ifndef VC_TOOLS_COMMON_H
#define VC_TOOLS_COMMON_H

#include "voxconv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { EXIT_USAGE = 2 };

extern const char *const dtype_names[]; /* vc_dtype order, NULL-terminated */
extern const char *const pass_names[];  /* vc_pass order */

/* ---- errors, memory, time, random numbers ------------------------------------------------ */

/* Stops with the library's sentence when a call failed. ctx NULL reads the thread's slot
 * (vc_context_create and the conversions have no context). */
void check(const vc_context *ctx, vc_status s);

/* A command-line tool has no better answer to a failed allocation than stopping. */
void *xmalloc(size_t bytes);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t bytes);

double now_ms(void); /* monotonic clock */

/* xorshift64*, 53 random bits: uniform in [lo, hi). The tool's own sequence, or one the
 * caller keeps (rng_state_for gives its start). */
void rng_seed(uint64_t seed);
double rng_uniform(double lo, double hi);
uint64_t rng_state_for(uint64_t seed);
double rng_uniform_at(uint64_t *state, double lo, double hi);

/* Sorts v in place; the median of n values. */
double median(double *v, int n);

/* A timed body measures only its own critical work and returns the milliseconds, so
 * setup it must do each time (freeing a plan, sizing a workspace) stays out. */
typedef double (*timed_body)(void *arg);

/* `warmup` untimed runs, then the median of `reps` runs. */
double median_ms(timed_body body, void *arg, int warmup, int reps);

/* ---- host tensors in any storage dtype --------------------------------------------------- */

/* All-ones bytes are NaN in f32, f16 and bf16: an element a pass forgets to write shows
 * up as a non-finite error instead of passing by luck. */
void *tensor_poisoned(vc_dtype dt, int64_t n);

float *to_f32(vc_dtype dt, const void *t, int64_t n);

/* Uniform in [-scale, scale): random, never zeros (DESIGN.md §6). */
float *random_f32(int64_t n, double scale);
void *tensor_random(vc_dtype dt, int64_t n, double scale);

/* out = op(a, b) elementwise, computed in f32 and stored in dt into caller memory `out`,
 * which may be a or b; b may be NULL. */
typedef float (*elementwise_op)(float a, float b);
void elementwise_into(vc_dtype dt, int64_t n, void *out, const void *a, const void *b, elementwise_op op);

/* ---- errors against a reference ---------------------------------------------------------- */

/* Running sums of ||out - ref||^2 and ||ref||^2; a non-finite out makes the error infinite. */
typedef struct err_acc {
  double num, den;
} err_acc;

void err_acc_add(err_acc *e, double out, double ref);
double err_acc_value(const err_acc *e); /* ||out - ref|| / ||ref|| */

/* ||out - ref|| / ||ref|| of two host tensors, infinite when out has a non-finite element. */
double rel_err(vc_dtype dt, const void *out, const void *ref, int64_t n);

/* Whether error b is worse than a; NaN counts as the worst, so a NaN never passes a check. */
bool is_worse(double b, double a);
double worse(double a, double b);

/* DESIGN.md §6: f32 storage computed in f32 1e-5, TF32 1e-3, f16/bf16 accumulating in f32 1e-2. */
double tolerance(vc_dtype dt, vc_math math);

/* ---- one execute call -------------------------------------------------------------------- */

/* Caller-owned workspace (host or device memory, as the context wants). */
typedef struct workspace {
  void *ptr;
  size_t bytes;
} workspace;

/* The operands of one execute call, in the order the pass's function takes them:
 * forward (x, w, bias) -> (y); backward-data (dy, w) -> (dx); backward-weight (x, dy) -> (dw, db). */
typedef struct conv_call {
  vc_context *ctx;
  const vc_plan *plan;
  vc_conv_args args;
  vc_pass pass;
  const void *in[3];
  void *out[2];
  workspace *ws;
  void *stream; /* a cudaStream_t on a CUDA context, else NULL */
} conv_call;

/* Every tensor of one layer's three passes; each call takes the ones its pass reads/writes. */
typedef struct conv_tensors {
  const void *x, *w, *b, *dy;
  void *y, *dx, *dw, *db;
} conv_tensors;

/* The call of `pass` over t's tensors, with args (channels, dtype, math, algo) copied. */
conv_call conv_call_for(vc_context *ctx, const vc_plan *plan, const vc_conv_args *args, vc_pass pass,
                        const conv_tensors *t, workspace *ws, void *stream);

/* Grows c->ws (host memory) to what the call needs; outside any timing. */
void ws_reserve(const conv_call *c);

vc_status conv_execute(const conv_call *c);

/* Element counts of the call's inputs and outputs (0 for an absent one). */
void conv_in_counts(const conv_call *c, int64_t n[3]);
void conv_out_counts(const conv_call *c, int64_t n[2]);

/* The largest workspace the three passes of this layer shape need. */
size_t conv_ws_most(const vc_context *ctx, const vc_plan *p, const vc_conv_args *a);

/* Uniform weight bound that keeps the outputs' variance at the inputs': the mean pairs per
 * output row times Ci times the weight variance is `gain` (1 for a linear layer, 2 ahead of
 * a ReLU, which halves the variance). */
double weight_bound(const vc_plan *p, int64_t ci, double gain);

/* ---- plain SGEMM (the CPU ceilings) ------------------------------------------------------ */

typedef struct sgemm_case {
  int m, n, k;
  float *a, *b, *c;
} sgemm_case;

/* A timed_body: C[m, n] = A[m, k] B[k, n], row-major, through cblas_sgemm. */
double sgemm_timed(void *arg);

#endif
