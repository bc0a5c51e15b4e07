/* test_grad.c — dgrad and wgrad against the adjoint identities
 *   <dY, conv(X, W)> = <dgrad(dY, W), X> = <wgrad(X, dY), W>,  <dY, bias rows> = <db, bias>
 * and against central finite differences of L = <G, conv(X, W) + b> evaluated in f64. */
#include "vc_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct grad_case {
  vc_context *ctx;
  vc_plan *paired, *p;
  int32_t *coords;
  vc_conv_args a;
  int64_t nin, nout, nw;
} grad_case;

static void grad_make(grad_case *g, vc_conv_kind kind) {
  memset(g, 0, sizeof *g);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &g->ctx));
  int64_t n = 90;
  g->coords = vc_rand_coords(n, 2, -4, 4);
  vc_conv_desc d;
  vc_conv_desc_init(&d, kind == VC_CONV_INVERSE ? VC_CONV_SPARSE : kind, kind == VC_CONV_SUBMANIFOLD ? 3 : 2,
                    kind == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
  if (kind == VC_CONV_INVERSE) {
    CHECK_OK(g->ctx, vc_plan_create(g->ctx, &d, g->coords, n, NULL, NULL, &g->paired));
    d.kind = VC_CONV_INVERSE;
    CHECK_OK(g->ctx, vc_plan_create(g->ctx, &d, NULL, 0, g->paired, NULL, &g->p));
  } else {
    CHECK_OK(g->ctx, vc_plan_create(g->ctx, &d, g->coords, n, NULL, NULL, &g->p));
  }
  vc_conv_args_init(&g->a, vc_rand_int(2, 9), vc_rand_int(2, 9), VC_DTYPE_F32);
  g->a.algo = VC_ALGO_EXPLICIT;
  g->nin = vc_plan_in_count(g->p), g->nout = vc_plan_out_count(g->p);
  g->nw = g->a.out_channels * vc_plan_kernel_volume(g->p) * g->a.in_channels;
}

static void grad_free(grad_case *g) {
  vc_plan_destroy(g->p);
  vc_plan_destroy(g->paired);
  free(g->coords);
  vc_context_destroy(g->ctx);
}

static double dot(const float *a, const float *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* Runs one pass with a workspace of the right size; algo from g->a unless overridden. */
static void run(grad_case *g, vc_pass pass, vc_algo algo, const float *in0, const float *in1, const float *bias,
                float *out0, float *out1) {
  vc_conv_args a = g->a;
  a.algo = algo;
  size_t bytes = 0;
  CHECK_OK(g->ctx, vc_conv_workspace_size(g->p, &a, pass, &bytes));
  void *ws = malloc(bytes ? bytes : 1);
  if (pass == VC_PASS_FORWARD)
    CHECK_OK(g->ctx, vc_conv_forward(g->ctx, g->p, &a, in0, in1, bias, out0, ws, bytes, NULL));
  else if (pass == VC_PASS_BACKWARD_DATA)
    CHECK_OK(g->ctx, vc_conv_backward_data(g->ctx, g->p, &a, in0, in1, out0, ws, bytes, NULL));
  else
    CHECK_OK(g->ctx, vc_conv_backward_weight(g->ctx, g->p, &a, in0, in1, out0, out1, ws, bytes, NULL));
  free(ws);
}

static void check_adjoint(vc_conv_kind kind) {
  grad_case g;
  grad_make(&g, kind);
  const int64_t ci = g.a.in_channels, co = g.a.out_channels;
  float *x = vc_rand_tensor(VC_DTYPE_F32, g.nin * ci, NULL), *w = vc_rand_tensor(VC_DTYPE_F32, g.nw, NULL);
  float *b = vc_rand_tensor(VC_DTYPE_F32, co, NULL), *dy = vc_rand_tensor(VC_DTYPE_F32, g.nout * co, NULL);
  float *y = malloc((size_t)(g.nout * co + 1) * 4), *dx = malloc((size_t)(g.nin * ci + 1) * 4);
  float *dw = malloc((size_t)g.nw * 4), *db = malloc((size_t)co * 4);
  run(&g, VC_PASS_FORWARD, VC_ALGO_EXPLICIT, x, w, NULL, y, NULL);
  run(&g, VC_PASS_BACKWARD_DATA, VC_ALGO_EXPLICIT, dy, w, NULL, dx, NULL);
  run(&g, VC_PASS_BACKWARD_WEIGHT, VC_ALGO_EXPLICIT, x, dy, NULL, dw, db);
  double lhs = dot(dy, y, g.nout * co), via_dx = dot(dx, x, g.nin * ci), via_dw = dot(dw, w, g.nw);
  double scale = sqrt(dot(dy, dy, g.nout * co) * dot(y, y, g.nout * co)) + 1e-30;
  CHECK(fabs(lhs - via_dx) / scale < 1e-5, "%s: <dY,conv X> = %.9g but <dgrad dY, X> = %.9g", vc_kind_name(kind),
        lhs, via_dx);
  CHECK(fabs(lhs - via_dw) / scale < 1e-5, "%s: <dY,conv X> = %.9g but <wgrad, W> = %.9g", vc_kind_name(kind), lhs,
        via_dw);
  double sum_b = 0; /* <dY, 1 b^T> = <db, b> */
  for (int64_t i = 0; i < g.nout; i++)
    for (int64_t c = 0; c < co; c++) sum_b += (double)dy[i * co + c] * b[c];
  CHECK(fabs(sum_b - dot(db, b, co)) <= 1e-5 * (fabs(sum_b) + 1), "%s: <dY, b> = %.9g, <db, b> = %.9g",
        vc_kind_name(kind), sum_b, dot(db, b, co));
  CHECK(g.nout > 0 && g.nin > 0, "%s: degenerate case", vc_kind_name(kind));
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
  grad_free(&g);
}

/* L(X, W, b) = <G, conv(X, W) + b> with the f64-accumulating reference forward. */
static double loss(grad_case *g, const float *x, const float *w, const float *b, const float *G, float *y) {
  run(g, VC_PASS_FORWARD, VC_ALGO_REFERENCE, x, w, b, y, NULL);
  return dot(G, y, g->nout * g->a.out_channels);
}

/* Central differences on a few entries of `v` vs the analytic gradient `grad`. The loss is
 * linear in each argument, so with h a power of two the difference quotient is exact up to
 * the f32 rounding of y; the step actually applied is measured after rounding. */
static double fd_error(grad_case *g, float *v, int64_t n, const float *grad, float *x, float *w, float *b,
                       const float *G, float *y) {
  double num = 0, den = 0;
  for (int t = 0; t < 12; t++) {
    int64_t k = (int64_t)(vc_rand_u64() % (uint64_t)n);
    float keep = v[k];
    v[k] = keep + 0.25f;
    double up = v[k] - (double)keep, lp = loss(g, x, w, b, G, y);
    v[k] = keep - 0.25f;
    double dn = (double)keep - v[k], lm = loss(g, x, w, b, G, y);
    v[k] = keep;
    double fd = (lp - lm) / (up + dn);
    num += (fd - grad[k]) * (fd - grad[k]);
    den += (double)grad[k] * grad[k];
  }
  return sqrt(num / (den + 1e-30));
}

static void check_finite_differences(vc_conv_kind kind) {
  grad_case g;
  grad_make(&g, kind);
  const int64_t ci = g.a.in_channels, co = g.a.out_channels;
  float *x = vc_rand_tensor(VC_DTYPE_F32, g.nin * ci, NULL), *w = vc_rand_tensor(VC_DTYPE_F32, g.nw, NULL);
  float *b = vc_rand_tensor(VC_DTYPE_F32, co, NULL), *G = vc_rand_tensor(VC_DTYPE_F32, g.nout * co, NULL);
  float *y = malloc((size_t)(g.nout * co + 1) * 4), *dx = malloc((size_t)(g.nin * ci + 1) * 4);
  float *dw = malloc((size_t)g.nw * 4), *db = malloc((size_t)co * 4);
  run(&g, VC_PASS_BACKWARD_DATA, VC_ALGO_EXPLICIT, G, w, NULL, dx, NULL);
  run(&g, VC_PASS_BACKWARD_WEIGHT, VC_ALGO_EXPLICIT, x, G, NULL, dw, db);
  double ex = fd_error(&g, x, g.nin * ci, dx, x, w, b, G, y);
  double ew = fd_error(&g, w, g.nw, dw, x, w, b, G, y);
  double eb = fd_error(&g, b, co, db, x, w, b, G, y);
  CHECK(ex < 1e-4, "%s: dX vs finite differences: rel err %.3g", vc_kind_name(kind), ex);
  CHECK(ew < 1e-4, "%s: dW vs finite differences: rel err %.3g", vc_kind_name(kind), ew);
  CHECK(eb < 1e-4, "%s: db vs finite differences: rel err %.3g", vc_kind_name(kind), eb);
  free(x), free(w), free(b), free(G), free(y), free(dx), free(dw), free(db);
  grad_free(&g);
}

static void test_grad_adjoint(void) {
  for (int k = VC_CONV_SUBMANIFOLD; k <= VC_CONV_TRANSPOSED; k++) check_adjoint((vc_conv_kind)k);
}

static void test_grad_finite_differences(void) {
  for (int k = VC_CONV_SUBMANIFOLD; k <= VC_CONV_TRANSPOSED; k++) check_finite_differences((vc_conv_kind)k);
}

const vc_test_case vc_tests_grad[] = {
    {"grad_adjoint_identity", test_grad_adjoint},
    {"grad_finite_differences", test_grad_finite_differences},
    {NULL, NULL},
};
