/* common.c — helpers shared by the `voxconv` commands (see common.h). */
#include "common.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const dtype_names[] = {"f32", "f16", "bf16", NULL};
const char *const pass_names[] = {"forward", "backward-data", "backward-weight"};

/* ---- errors, memory, time, random numbers ------------------------------------------------ */

void check(const vc_context *ctx, vc_status s) {
  if (s == VC_OK) return;
  const char *msg = vc_last_error(ctx);
  fprintf(stderr, "voxconv: %s\n", msg && *msg ? msg : vc_status_string(s));
  exit(1);
}

static void *out_of_memory(size_t bytes) {
  fprintf(stderr, "voxconv: out of host memory (%zu bytes)\n", bytes);
  exit(1);
}

void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  return p ? p : out_of_memory(bytes);
}

void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  return p ? p : out_of_memory(count * size);
}

void *xrealloc(void *p, size_t bytes) {
  void *q = realloc(p, bytes ? bytes : 1);
  return q ? q : out_of_memory(bytes);
}

double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static uint64_t rng_state = 1;

uint64_t rng_state_for(uint64_t seed) {
  const uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  return s ? s : 1; /* xorshift must not start at 0 */
}

double rng_uniform_at(uint64_t *state, double lo, double hi) {
  uint64_t s = *state;
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  *state = s;
  return lo + (hi - lo) * (double)((s * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

void rng_seed(uint64_t seed) { rng_state = rng_state_for(seed); }
double rng_uniform(double lo, double hi) { return rng_uniform_at(&rng_state, lo, hi); }

double median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is a repetition count */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double median_ms(timed_body body, void *arg, int warmup, int reps) {
  double *t = xmalloc((size_t)reps * sizeof *t);
  for (int r = 0; r < warmup; r++) body(arg);
  for (int r = 0; r < reps; r++) t[r] = body(arg);
  double m = median(t, reps);
  free(t);
  return m;
}

/* ---- host tensors in any storage dtype --------------------------------------------------- */

static void *tensor_new(vc_dtype dt, int64_t n) { return xmalloc((size_t)n * vc_dtype_size(dt)); }

static void poison(vc_dtype dt, void *t, int64_t n) { memset(t, 0xff, (size_t)n * vc_dtype_size(dt)); }

void *tensor_poisoned(vc_dtype dt, int64_t n) {
  void *t = tensor_new(dt, n);
  poison(dt, t, n);
  return t;
}

float *to_f32(vc_dtype dt, const void *t, int64_t n) {
  float *f = xmalloc((size_t)n * sizeof *f);
  check(NULL, vc_convert_to_f32(dt, t, f, n));
  return f;
}

static void *from_f32(vc_dtype dt, const float *f, int64_t n) {
  void *t = tensor_new(dt, n);
  check(NULL, vc_convert_from_f32(dt, f, t, n));
  return t;
}

float *random_f32(int64_t n, double scale) {
  float *f = xmalloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n; i++) f[i] = (float)rng_uniform(-scale, scale);
  return f;
}

void *tensor_random(vc_dtype dt, int64_t n, double scale) {
  float *f = random_f32(n, scale);
  void *t = from_f32(dt, f, n);
  free(f);
  return t;
}

void elementwise_into(vc_dtype dt, int64_t n, void *out, const void *a, const void *b, elementwise_op op) {
  /* through f32 in stack chunks: no allocation (timed adds call it); a chunk reads its a
   * and b before writing out, so out may be a or b */
  enum { CHUNK = 1024 };
  float fa[CHUNK], fb[CHUNK];
  const size_t es = vc_dtype_size(dt);
  for (int64_t i = 0; i < n; i += CHUNK) {
    const int64_t m = n - i < CHUNK ? n - i : CHUNK;
    check(NULL, vc_convert_to_f32(dt, (const char *)a + (size_t)i * es, fa, m));
    if (b) check(NULL, vc_convert_to_f32(dt, (const char *)b + (size_t)i * es, fb, m));
    for (int64_t j = 0; j < m; j++) fa[j] = op(fa[j], b ? fb[j] : 0);
    check(NULL, vc_convert_from_f32(dt, fa, (char *)out + (size_t)i * es, m));
  }
}

/* ---- errors against a reference ---------------------------------------------------------- */

void err_acc_add(err_acc *e, double out, double ref) {
  e->num = isfinite(out) && isfinite(e->num) ? e->num + (out - ref) * (out - ref) : INFINITY;
  e->den += ref * ref;
}

double err_acc_value(const err_acc *e) { return e->den > 0 ? sqrt(e->num / e->den) : sqrt(e->num); }

double rel_err(vc_dtype dt, const void *out, const void *ref, int64_t n) {
  float *o = to_f32(dt, out, n), *r = to_f32(dt, ref, n);
  err_acc e = {0, 0};
  for (int64_t i = 0; i < n && isfinite(e.num); i++) err_acc_add(&e, o[i], r[i]);
  free(o);
  free(r);
  return err_acc_value(&e);
}

bool is_worse(double b, double a) { return !isnan(a) && (isnan(b) || b > a); }
double worse(double a, double b) { return is_worse(b, a) ? b : a; }

double tolerance(vc_dtype dt, vc_math math) {
  if (dt != VC_DTYPE_F32) return 1e-2;
  return math == VC_MATH_TF32 ? 1e-3 : 1e-5;
}

/* ---- one execute call -------------------------------------------------------------------- */

conv_call conv_call_for(vc_context *ctx, const vc_plan *plan, const vc_conv_args *args, vc_pass pass,
                        const conv_tensors *t, workspace *ws, void *stream) {
  conv_call c = {ctx, plan, *args, pass, {NULL, NULL, NULL}, {NULL, NULL}, ws, stream};
  const void *in[3][3] = {{t->x, t->w, t->b}, {t->dy, t->w, NULL}, {t->x, t->dy, NULL}};
  void *out[3][2] = {{t->y, NULL}, {t->dx, NULL}, {t->dw, t->db}};
  memcpy(c.in, in[pass], sizeof c.in);
  memcpy(c.out, out[pass], sizeof c.out);
  return c;
}

void ws_reserve(const conv_call *c) {
  size_t need = 0;
  check(c->ctx, vc_conv_workspace_size(c->plan, &c->args, c->pass, &need));
  if (need <= c->ws->bytes) return;
  free(c->ws->ptr);
  c->ws->ptr = xmalloc(need);
  c->ws->bytes = need;
}

vc_status conv_execute(const conv_call *c) {
  void *ws = c->ws->ptr, *s = c->stream;
  size_t wb = c->ws->bytes;
  switch (c->pass) {
  case VC_PASS_FORWARD:
    return vc_conv_forward(c->ctx, c->plan, &c->args, c->in[0], c->in[1], c->in[2], c->out[0], ws, wb, s);
  case VC_PASS_BACKWARD_DATA:
    return vc_conv_backward_data(c->ctx, c->plan, &c->args, c->in[0], c->in[1], c->out[0], ws, wb, s);
  default:
    return vc_conv_backward_weight(c->ctx, c->plan, &c->args, c->in[0], c->in[1], c->out[0], c->out[1], ws, wb,
                                   s);
  }
}

void conv_in_counts(const conv_call *c, int64_t n[3]) {
  const int64_t ci = c->args.in_channels, co = c->args.out_channels;
  const int64_t x = vc_plan_in_count(c->plan) * ci, y = vc_plan_out_count(c->plan) * co;
  const int64_t w = co * vc_plan_kernel_volume(c->plan) * ci;
  const int64_t counts[3][3] = {{x, w, c->in[2] ? co : 0}, {y, w, 0}, {x, y, 0}};
  memcpy(n, counts[c->pass], sizeof counts[0]);
}

void conv_out_counts(const conv_call *c, int64_t n[2]) {
  const int64_t ci = c->args.in_channels, co = c->args.out_channels;
  n[1] = 0;
  if (c->pass == VC_PASS_FORWARD) n[0] = vc_plan_out_count(c->plan) * co;
  else if (c->pass == VC_PASS_BACKWARD_DATA) n[0] = vc_plan_in_count(c->plan) * ci;
  else n[0] = co * vc_plan_kernel_volume(c->plan) * ci, n[1] = c->out[1] ? co : 0;
}

size_t conv_ws_most(const vc_context *ctx, const vc_plan *p, const vc_conv_args *a) {
  size_t most = 0;
  for (int pass = 0; pass < 3; pass++) {
    size_t need = 0;
    check(ctx, vc_conv_workspace_size(p, a, (vc_pass)pass, &need));
    most = need > most ? need : most;
  }
  return most;
}

double weight_bound(const vc_plan *p, int64_t ci, double gain) {
  const int64_t out = vc_plan_out_count(p);
  const double per_row = (double)vc_plan_pair_count(p) / (double)(out > 0 ? out : 1);
  return sqrt(3.0 * gain / ((per_row > 0 ? per_row : 1) * (double)ci));
}

/* ---- plain SGEMM ------------------------------------------------------------------------- */

double sgemm_timed(void *arg) {
  const sgemm_case *g = arg;
  double t0 = now_ms();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, 1.0f, g->a, g->k, g->b, g->n, 0.0f,
              g->c, g->n);
  return now_ms() - t0;
}
