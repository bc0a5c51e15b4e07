/* tune.c — the CPU backend's algorithm list and pass timing for vc_conv_tune. */
#include "cpu.h"

#include <stdlib.h>
#include <time.h>

int vc_cpu_algos(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo out[8], int *n_tunable) {
  (void)p, (void)a, (void)pass;
  out[0] = VC_ALGO_EXPLICIT;
  out[1] = VC_ALGO_REFERENCE; /* the oracle: runnable, never a tuning candidate */
  *n_tunable = 1;
  return 2;
}

vc_algo vc_cpu_heuristic(const vc_plan *p, const vc_conv_args *a, vc_pass pass) {
  (void)p, (void)a, (void)pass;
  return VC_ALGO_EXPLICIT;
}

bool vc_cpu_deterministic(vc_algo algo, vc_pass pass) {
  (void)algo, (void)pass;
  return true; /* fixed chunking and thread partitions: same order every run */
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* Random bytes that decode to moderate finite values in every dtype. */
static void *random_buffer(vc_dtype dt, int64_t n, uint64_t seed) {
  size_t es = vc_dtype_size(dt);
  void *b = malloc((size_t)(n ? n : 1) * es);
  if (!b) return NULL;
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
    vc_convert_from_f32(dt, &v, (char *)b + i * es, 1);
  }
  return b;
}

vc_status vc_cpu_time_pass(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass, void *stream,
                           double *ms) {
  const int64_t ci = a->in_channels, co = a->out_channels, nw = co * p->kvol * ci;
  size_t bytes;
  vc_status s = ctx->backend->workspace_size(p, a, pass, &bytes);
  if (s != VC_OK) return s;
  void *x = random_buffer(a->dtype, p->n_in * ci, 1), *w = random_buffer(a->dtype, nw, 2);
  void *dy = random_buffer(a->dtype, p->n_out * co, 3), *o0 = malloc((size_t)(p->n_in * ci + p->n_out * co + nw + 1) * 4);
  void *b = random_buffer(a->dtype, co, 4), *db = malloc((size_t)co * 4), *ws = malloc(bytes ? bytes : 1);
  double best = 1e300;
  if (!x || !w || !dy || !o0 || !b || !db || !ws) {
    s = vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_conv_tune: out of host memory");
  } else {
    for (int rep = 0; rep < 3 && s == VC_OK; rep++) {
      double t0 = now_ms();
      if (pass == VC_PASS_FORWARD) s = vc_cpu_forward(ctx, p, a, x, w, b, o0, ws, bytes, stream);
      else if (pass == VC_PASS_BACKWARD_DATA) s = vc_cpu_backward_data(ctx, p, a, dy, w, o0, ws, bytes, stream);
      else s = vc_cpu_backward_weight(ctx, p, a, x, dy, o0, db, ws, bytes, stream);
      double t = now_ms() - t0;
      if (t < best) best = t;
    }
  }
  free(x), free(w), free(dy), free(o0), free(b), free(db), free(ws);
  *ms = best;
  return s;
}

const char *vc_cpu_device_name(vc_context *ctx) {
  (void)ctx;
  return "host";
}
