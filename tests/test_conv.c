/* test_conv.c — every pass x dtype x algorithm x kind against the dense f64 oracle, on fresh
 * random data, with poisoned outputs and odd channel counts. */
#include "dense.h"

#include <stdlib.h>
#include <string.h>

typedef struct conv_case {
  vc_context *ctx;
  vc_plan *paired, *p;
  vc_oracle *o;
  int32_t *coords;
} conv_case;

/* Builds a random plan of `kind` (inverse: over a random sparse plan) and its oracle. */
static bool case_make(conv_case *c, vc_conv_kind kind, int64_t n, int32_t nb, int32_t lo, int32_t hi) {
  memset(c, 0, sizeof *c);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &c->ctx));
  c->coords = vc_rand_coords(n, nb, lo, hi);
  vc_conv_desc d;
  int k = vc_rand_int(kind == VC_CONV_SUBMANIFOLD ? 1 : 2, 3), s = vc_rand_int(1, 3), dil = vc_rand_int(1, 2);
  if (kind == VC_CONV_SUBMANIFOLD) k = 3, s = 1;
  vc_conv_desc_init(&d, kind == VC_CONV_INVERSE ? VC_CONV_SPARSE : kind, k, s, -1, dil);
  if (kind != VC_CONV_SUBMANIFOLD)
    for (int a = 0; a < 3; a++) d.padding[a] = vc_rand_int(0, (k - 1) * dil);
  vc_status st;
  if (kind == VC_CONV_INVERSE) {
    CHECK_OK(c->ctx, st = vc_plan_create(c->ctx, &d, c->coords, n, NULL, NULL, &c->paired));
    if (st != VC_OK) return false;
    d.kind = VC_CONV_INVERSE;
    CHECK_OK(c->ctx, st = vc_plan_create(c->ctx, &d, NULL, 0, c->paired, NULL, &c->p));
    if (st != VC_OK) return false;
    int64_t m = vc_plan_in_count(c->p);
    int32_t *in = malloc((size_t)(m + 1) * 4 * sizeof *in);
    vc_plan_out_coords(c->paired, in, NULL);
    c->o = vc_oracle_build(&d, in, m, c->coords, n);
    free(in);
  } else {
    CHECK_OK(c->ctx, st = vc_plan_create(c->ctx, &d, c->coords, n, NULL, NULL, &c->p));
    if (st != VC_OK) return false;
    c->o = vc_oracle_build(&d, c->coords, n, NULL, 0);
  }
  CHECK(vc_plan_out_count(c->p) == c->o->n_out, "output counts differ");
  return vc_plan_out_count(c->p) == c->o->n_out;
}

static void case_free(conv_case *c) {
  vc_oracle_free(c->o);
  vc_plan_destroy(c->p);
  vc_plan_destroy(c->paired);
  free(c->coords);
  vc_context_destroy(c->ctx);
}

static void *workspace(const vc_plan *p, const vc_conv_args *a, vc_pass pass, size_t *bytes) {
  *bytes = 0;
  CHECK_OK(NULL, vc_conv_workspace_size(p, a, pass, bytes));
  return malloc(*bytes ? *bytes : 1);
}

/* Runs forward, dgrad and wgrad with args `a` and checks each against the oracle. */
static void check_passes(conv_case *c, const vc_conv_args *a, const char *what) {
  const vc_dtype dt = a->dtype;
  const int64_t ci = a->in_channels, co = a->out_channels, K = c->o->K;
  const int64_t nin = vc_plan_in_count(c->p), nout = vc_plan_out_count(c->p), nw = co * K * ci;
  const size_t es = vc_dtype_size(dt);
  double *x64, *w64, *b64, *dy64;
  void *x = vc_rand_tensor(dt, nin * ci, &x64), *w = vc_rand_tensor(dt, nw, &w64), *b = vc_rand_tensor(dt, co, &b64);
  void *dy = vc_rand_tensor(dt, nout * co, &dy64);
  void *y = malloc((size_t)(nout * co + 1) * es), *dx = malloc((size_t)(nin * ci + 1) * es);
  void *dw = malloc((size_t)nw * es), *db = malloc((size_t)co * es);
  double *ry = malloc((size_t)(nout * co + 1) * sizeof *ry), *rdx = malloc((size_t)(nin * ci + 1) * sizeof *rdx);
  double *rdw = malloc((size_t)nw * sizeof *rdw), *rdb = malloc((size_t)co * sizeof *rdb);
  const double tol = vc_tolerance(dt, a->math);
  size_t bytes;
  void *ws;

  vc_poison(dt, y, nout * co);
  ws = workspace(c->p, a, VC_PASS_FORWARD, &bytes);
  CHECK_OK(c->ctx, vc_conv_forward(c->ctx, c->p, a, x, w, b, y, ws, bytes, NULL));
  free(ws);
  vc_oracle_forward(c->o, ci, co, x64, w64, b64, ry);
  double *got = vc_to_f64(dt, y, nout * co), e = vc_rel_err(got, ry, nout * co);
  CHECK(e < tol, "%s forward: rel err %.3g >= %.1g", what, e, tol);
  free(got);

  vc_poison(dt, dx, nin * ci);
  ws = workspace(c->p, a, VC_PASS_BACKWARD_DATA, &bytes);
  CHECK_OK(c->ctx, vc_conv_backward_data(c->ctx, c->p, a, dy, w, dx, ws, bytes, NULL));
  free(ws);
  vc_oracle_backward_data(c->o, ci, co, dy64, w64, rdx);
  got = vc_to_f64(dt, dx, nin * ci), e = vc_rel_err(got, rdx, nin * ci);
  CHECK(e < tol, "%s backward_data: rel err %.3g >= %.1g", what, e, tol);
  free(got);

  vc_poison(dt, dw, nw);
  vc_poison(dt, db, co);
  ws = workspace(c->p, a, VC_PASS_BACKWARD_WEIGHT, &bytes);
  CHECK_OK(c->ctx, vc_conv_backward_weight(c->ctx, c->p, a, x, dy, dw, db, ws, bytes, NULL));
  free(ws);
  vc_oracle_backward_weight(c->o, ci, co, x64, dy64, rdw, rdb);
  got = vc_to_f64(dt, dw, nw), e = vc_rel_err(got, rdw, nw);
  CHECK(e < tol, "%s backward_weight dw: rel err %.3g >= %.1g", what, e, tol);
  free(got);
  got = vc_to_f64(dt, db, co), e = vc_rel_err(got, rdb, co);
  CHECK(e < tol, "%s backward_weight db: rel err %.3g >= %.1g", what, e, tol);
  free(got);

  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
  free(x64), free(w64), free(b64), free(dy64), free(ry), free(rdx), free(rdw), free(rdb);
}

static void check_kind(vc_conv_kind kind) {
  static const int64_t chans[] = {1, 4, 5, 7, 16, 19, 33};
  static const vc_algo algos[] = {VC_ALGO_REFERENCE, VC_ALGO_EXPLICIT, VC_ALGO_AUTO};
  for (int mode = 0; mode < 4; mode++) {
    conv_case c;
    if (case_make(&c, kind, kind == VC_CONV_TRANSPOSED ? 40 : 120, 2, -5, 4)) {
      vc_dtype dt = mode < 2 ? VC_DTYPE_F32 : mode == 2 ? VC_DTYPE_F16 : VC_DTYPE_BF16;
      vc_conv_args a;
      vc_conv_args_init(&a, chans[vc_rand_int(0, 6)], chans[vc_rand_int(0, 6)], dt);
      a.math = mode == 1 ? VC_MATH_TF32 : VC_MATH_F32;
      for (int i = 0; i < 3; i++) {
        a.algo = algos[i];
        char what[128];
        snprintf(what, sizeof what, "%s %s%s %s ci=%lld co=%lld", vc_kind_name(kind), vc_dtype_name(dt),
                 mode == 1 ? "/tf32" : "", vc_algo_name(a.algo), (long long)a.in_channels, (long long)a.out_channels);
        check_passes(&c, &a, what);
      }
    }
    case_free(&c);
  }
}

static void test_conv_submanifold(void) { check_kind(VC_CONV_SUBMANIFOLD); }
static void test_conv_sparse(void) { check_kind(VC_CONV_SPARSE); }
static void test_conv_inverse(void) { check_kind(VC_CONV_INVERSE); }
static void test_conv_transposed(void) { check_kind(VC_CONV_TRANSPOSED); }

/* More pairs per offset than one gather chunk holds, so the chunk loop is exercised. */
static void test_conv_many_pairs_per_offset(void) {
  conv_case c;
  if (case_make(&c, VC_CONV_SUBMANIFOLD, 6000, 1, 0, 18)) {
    for (int m = 0; m < 2; m++) {
      vc_conv_args a;
      vc_conv_args_init(&a, 6, 10, m ? VC_DTYPE_BF16 : VC_DTYPE_F32);
      a.algo = VC_ALGO_EXPLICIT;
      check_passes(&c, &a, m ? "6000 sites bf16 explicit" : "6000 sites f32 explicit");
    }
  }
  case_free(&c);
}

const vc_test_case vc_tests_conv[] = {
    {"conv_submanifold_all_dtypes_algos", test_conv_submanifold},
    {"conv_sparse_all_dtypes_algos", test_conv_sparse},
    {"conv_inverse_all_dtypes_algos", test_conv_inverse},
    {"conv_transposed_all_dtypes_algos", test_conv_transposed},
    {"conv_many_pairs_per_offset", test_conv_many_pairs_per_offset},
    {NULL, NULL},
};
