/* bench_l.c — suite L of BENCHMARKS.md: a MinkUNet-style encoder-decoder over a batch of
 * synthetic LiDAR scans (lidar.h).
 *
 * Levels 0..4 are the scan's voxels and four stride-2 down-samplings of them. The decoder
 * adds each encoder skip instead of concatenating it; the skip goes through a 1x1x1
 * submanifold conv to the decoder's width, so the decoder keeps BENCHMARKS.md's channels
 * (256, 128, 96, 96). Concatenation followed by a conv equals the sum of two convs, so this
 * is the cheap form of the same data flow. Norm and activation layers are left out: they
 * are not voxconv's work, and no layer here needs them to be timed or checked.
 */
#include "bench.h"
#include "lidar.h"
#include "progress.h"

#include <stdlib.h>
#include <string.h>

enum { LEVELS = 5, IN_CHANNELS = 4, L_MAP_BUILDS = 3 };

/* Plans: per level a 3x3x3 and a 1x1x1 submanifold conv; per level below the last a 2x2x2
 * stride-2 conv to the next level and its inverse back. */
#define SUB(l) (l)
#define ONE(l) (LEVELS + (l))
#define DOWN(l) (2 * LEVELS + (l))
#define UP(l) (3 * LEVELS - 1 + (l))
enum { N_PLANS = 4 * LEVELS - 2 };

typedef struct l_spec {
  const char *name;
  int plan;
  int64_t ci, co;
  int in;     /* the layer whose activation it reads; -1: the input features */
  int add_to; /* a skip projection: its output is added to this layer's activation; else -1 */
} l_spec;

static const l_spec mink[] = {
    {"stem", SUB(0), IN_CHANNELS, 32, -1, -1},
    {"enc1.down", DOWN(0), 32, 32, 0, -1},   {"enc1.a", SUB(1), 32, 32, 1, -1},
    {"enc1.b", SUB(1), 32, 32, 2, -1},       {"enc2.down", DOWN(1), 32, 64, 3, -1},
    {"enc2.a", SUB(2), 64, 64, 4, -1},       {"enc2.b", SUB(2), 64, 64, 5, -1},
    {"enc3.down", DOWN(2), 64, 128, 6, -1},  {"enc3.a", SUB(3), 128, 128, 7, -1},
    {"enc3.b", SUB(3), 128, 128, 8, -1},     {"enc4.down", DOWN(3), 128, 256, 9, -1},
    {"enc4.a", SUB(4), 256, 256, 10, -1},    {"enc4.b", SUB(4), 256, 256, 11, -1},
    {"dec1.up", UP(3), 256, 256, 12, -1},    {"dec1.skip", ONE(3), 128, 256, 9, 13},
    {"dec1.a", SUB(3), 256, 256, 13, -1},    {"dec1.b", SUB(3), 256, 256, 15, -1},
    {"dec2.up", UP(2), 256, 128, 16, -1},    {"dec2.skip", ONE(2), 64, 128, 6, 17},
    {"dec2.a", SUB(2), 128, 128, 17, -1},    {"dec2.b", SUB(2), 128, 128, 19, -1},
    {"dec3.up", UP(1), 128, 96, 20, -1},     {"dec3.skip", ONE(1), 32, 96, 3, 21},
    {"dec3.a", SUB(1), 96, 96, 21, -1},      {"dec3.b", SUB(1), 96, 96, 23, -1},
    {"dec4.up", UP(0), 96, 96, 24, -1},      {"dec4.skip", ONE(0), 32, 96, 0, 25},
    {"dec4.a", SUB(0), 96, 96, 25, -1},      {"dec4.b", SUB(0), 96, 96, 27, -1},
};
enum { N_NET = sizeof mink / sizeof *mink, CHECK_A = 0, CHECK_B = 4 }; /* checked: stem, enc2.down */

/* ---- the geometry: scans, levels and plans, shared by every dtype ----------------------- */

typedef struct l_geom {
  vc_dev *dev;
  int32_t *coords[LEVELS]; /* device; level l + 1 holds at most level l's count */
  int64_t n[LEVELS];
  vc_plan *plans[N_PLANS];
} l_geom;

static void l_plans_free(l_geom *g) {
  for (int i = N_PLANS - 1; i >= 0; i--) vc_plan_destroy(g->plans[i]), g->plans[i] = NULL; /* inverses first */
}

static vc_plan *l_plan(l_geom *g, vc_conv_kind kind, int k, int s, int l, const vc_plan *paired) {
  vc_conv_desc d;
  vc_plan *p = NULL;
  vc_conv_desc_init(&d, kind, k, s, -1, 1);
  const int32_t *coords = paired ? NULL : g->coords[l];
  check(g->dev->ctx, vc_plan_create(g->dev->ctx, &d, coords, paired ? 0 : g->n[l], paired, g->dev->stream, &p));
  return p;
}

/* Every plan from the level-0 sites, level by level; the inverses last. */
static void l_plans_build(void *arg) {
  l_geom *g = arg;
  for (int l = 0; l < LEVELS; l++) {
    g->plans[SUB(l)] = l_plan(g, VC_CONV_SUBMANIFOLD, 3, 1, l, NULL);
    if (l == LEVELS - 1) break;
    g->plans[ONE(l)] = l_plan(g, VC_CONV_SUBMANIFOLD, 1, 1, l, NULL);
    g->plans[DOWN(l)] = l_plan(g, VC_CONV_SPARSE, 2, 2, l, NULL);
    g->n[l + 1] = vc_plan_out_count(g->plans[DOWN(l)]);
    check(g->dev->ctx, vc_plan_out_coords(g->plans[DOWN(l)], g->coords[l + 1], g->dev->stream));
  }
  for (int l = 0; l < LEVELS - 1; l++) g->plans[UP(l)] = l_plan(g, VC_CONV_INVERSE, 2, 2, l, g->plans[DOWN(l)]);
}

/* A timed_body: all maps of the network, with the synchronisation; the old ones are freed
 * outside the timing. */
static double l_maps_timed(void *arg) {
  l_geom *g = arg;
  l_plans_free(g);
  return dev_timed_build(g->dev, l_plans_build, g);
}

/* The scans on the device, and room for every coarser level (a 2x2x2 stride-2 conv has at
 * most as many outputs as inputs). */
static void l_geom_init(bench_env *e, l_geom *g) {
  memset(g, 0, sizeof *g);
  g->dev = &e->dev;
  int32_t *host = vc_lidar_scans(e->batch, e->scale, e->seed, &g->n[0]);
  if (!host) fprintf(stderr, "voxconv: LiDAR scans: out of host memory\n"), exit(1);
  const size_t bytes = (size_t)g->n[0] * 4 * sizeof(int32_t);
  for (int l = 0; l < LEVELS; l++) g->coords[l] = dev_alloc(g->dev, bytes);
  dev_upload(g->dev, g->coords[0], host, bytes);
  free(host);
}

/* Memory all plans of the network own on the device. */
static int64_t l_plan_bytes(const l_geom *g) {
  size_t sum = 0;
  for (int i = 0; i < N_PLANS; i++) sum += vc_plan_memory_bytes(g->plans[i]);
  return (int64_t)sum;
}

static void l_geom_free(l_geom *g) {
  l_plans_free(g);
  for (int l = 0; l < LEVELS; l++) dev_free(g->dev, g->coords[l]);
}

/* ---- one dtype: the network's tensors and passes ---------------------------------------- */

typedef struct l_run {
  vc_dev *dev;
  const l_geom *g;
  vc_conv_args args[N_NET];
  dev_params prm[N_NET];
  void *act[N_NET];  /* layer outputs (for an up layer: with the skip added); NULL for skips */
  void *grad[N_NET]; /* gradients of act; grad[N_NET - 1] is the random top gradient */
  bool written[N_NET];
  void *xs[BENCH_MAX_SETS]; /* rotated input features */
  int sets, set;
  void *tmp; /* skip outputs and second backward-data outputs: the largest activation */
  workspace ws;
} l_run;

static const vc_plan *l_layer_plan(const l_run *r, int i) { return r->g->plans[mink[i].plan]; }
static int64_t l_out_elems(const l_run *r, int i) { return vc_plan_out_count(l_layer_plan(r, i)) * mink[i].co; }
static int64_t l_in_elems(const l_run *r, int i) { return vc_plan_in_count(l_layer_plan(r, i)) * mink[i].ci; }
static const void *l_input(const l_run *r, int i) { return mink[i].in < 0 ? r->xs[r->set] : r->act[mink[i].in]; }

/* Tunes each distinct (plan, Ci, Co) once. */
static void l_tune(bench_env *e, l_run *r) {
  for (int i = 0; i < N_NET; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = mink[j].plan == mink[i].plan && mink[j].ci == mink[i].ci && mink[j].co == mink[i].co;
    if (!seen) bench_tune(e, l_layer_plan(r, i), &r->args[i]);
  }
}

static void l_layer_alloc(l_run *r, int i, int64_t *largest) {
  const vc_dtype dt = r->args[i].dtype;
  const int64_t out = l_out_elems(r, i);
  dev_params_alloc(r->dev, l_layer_plan(r, i), &r->args[i], 1, &r->prm[i]);
  if (mink[i].add_to < 0) {
    r->act[i] = dev_poisoned(r->dev, dt, out);
    r->grad[i] = i == N_NET - 1 ? dev_random(r->dev, dt, out, 1.0) : dev_poisoned(r->dev, dt, out);
  }
  const int64_t in = l_in_elems(r, i), most = out > in ? out : in;
  *largest = most > *largest ? most : *largest;
}

static void l_run_alloc(bench_env *e, l_run *r) {
  const vc_dtype dt = r->args[0].dtype;
  const int64_t in = r->g->n[0] * IN_CHANNELS;
  int64_t largest = 0;
  size_t ws = 0;
  for (int i = 0; i < N_NET; i++) {
    l_layer_alloc(r, i, &largest);
    const size_t need = conv_ws_most(e->dev.ctx, l_layer_plan(r, i), &r->args[i]);
    ws = need > ws ? need : ws;
  }
  r->sets = bench_input_sets((size_t)in * vc_dtype_size(dt));
  for (int s = 0; s < r->sets; s++) r->xs[s] = dev_random(r->dev, dt, in, 1.0);
  r->tmp = dev_poisoned(r->dev, dt, largest);
  r->ws = (workspace){dev_alloc(r->dev, ws), ws};
}

static void l_run_free(l_run *r) {
  for (int i = 0; i < N_NET; i++) {
    dev_params_free(r->dev, &r->prm[i]);
    dev_free(r->dev, r->act[i]), dev_free(r->dev, r->grad[i]);
  }
  for (int s = 0; s < r->sets; s++) dev_free(r->dev, r->xs[s]);
  dev_free(r->dev, r->tmp), dev_free(r->dev, r->ws.ptr);
}

static void l_pass(l_run *r, int i, vc_pass pass, const void *dy, void *out) {
  dev_pass(r->dev, l_layer_plan(r, i), &r->args[i], pass, &r->prm[i], l_input(r, i), dy, out, &r->ws);
}

static void l_forward(void *arg) {
  l_run *r = arg;
  for (int i = 0; i < N_NET; i++) {
    const int to = mink[i].add_to;
    l_pass(r, i, VC_PASS_FORWARD, NULL, to < 0 ? r->act[i] : r->tmp);
    if (to >= 0) dev_add(r->dev, r->args[i].dtype, l_out_elems(r, i), r->tmp, r->act[to]);
  }
}

/* Reverse order: every reader of an activation comes after it, so its gradient is complete
 * when its layer is reached. The first reader writes it, later ones add to it. */
static void l_backward(void *arg) {
  l_run *r = arg;
  memset(r->written, 0, sizeof r->written);
  for (int i = N_NET - 1; i >= 0; i--) {
    const int to = mink[i].add_to, in = mink[i].in;
    const void *dy = r->grad[to < 0 ? i : to];
    l_pass(r, i, VC_PASS_BACKWARD_WEIGHT, dy, NULL);
    if (in < 0) continue; /* the stem: the input features need no gradient */
    l_pass(r, i, VC_PASS_BACKWARD_DATA, dy, r->written[in] ? r->tmp : r->grad[in]);
    if (r->written[in]) dev_add(r->dev, r->args[i].dtype, l_in_elems(r, i), r->tmp, r->grad[in]);
    r->written[in] = true;
  }
}

/* ---- rows ------------------------------------------------------------------------------- */

/* Useful FLOPs of the forward; of all three passes less the stem's backward-data. */
static void l_flops(const l_run *r, double *infer, double *train, int64_t *pairs) {
  *infer = *train = 0, *pairs = 0;
  for (int i = 0; i < N_NET; i++) {
    const int64_t np = vc_plan_pair_count(l_layer_plan(r, i));
    const double f = 2.0 * (double)np * (double)mink[i].ci * (double)mink[i].co;
    *pairs += np, *infer += f, *train += (mink[i].in < 0 ? 2 : 3) * f;
  }
}

static double l_check(bench_env *e, l_run *r) {
  double err = 0;
  const int layers[2] = {CHECK_A, CHECK_B};
  for (int k = 0; k < 2; k++) {
    const int i = layers[k];
    bench_progress(e, "L: checking %s", mink[i].name);
    err = worse(err, bench_check_layer(e, l_layer_plan(r, i), &r->args[i], l_input(r, i), r->prm[i].w, r->prm[i].b,
                                       &r->ws));
  }
  return err;
}

static void l_run_dtype(bench_env *e, const l_geom *g, double map_ms, bench_dtype t) {
  l_run r = {.dev = &e->dev, .g = g};
  for (int i = 0; i < N_NET; i++) r.args[i] = bench_args(mink[i].ci, mink[i].co, t);
  bench_progress(e, "L %s: tuning, allocating, timing", bench_dtype_names[t]);
  l_tune(e, &r);
  l_run_alloc(e, &r);
  bench_row row = {.suite = "L", .dt = t, .voxels = g->n[0], .map_ms = map_ms, .err = -1,
                   .plan_bytes = l_plan_bytes(g), .ws_bytes = (int64_t)r.ws.bytes,
                   .out_bytes = l_out_elems(&r, N_NET - 1) * (int64_t)vc_dtype_size(r.args[0].dtype)};
  snprintf(row.name, sizeof row.name, e->scale == 1 ? "minkunet_b%d" : "minkunet_b%d_s%g", e->batch, e->scale);
  l_flops(&r, &row.infer_flops, &row.train_flops, &row.pairs);
  const vc_plan *plans[N_NET];
  for (int i = 0; i < N_NET; i++) plans[i] = l_layer_plan(&r, i);
  bench_algos(e, plans, r.args, N_NET, row.algos, sizeof row.algos);
  const bench_net net = {&r, l_forward, l_backward, &r.set, r.sets};
  bench_time_net(e, &net, &row.infer_ms, &row.train_ms);
  row.map_share = 100 * map_ms / (map_ms + row.train_ms);
  if (e->check) row.err = l_check(e, &r);
  bench_emit(e, &row);
  l_run_free(&r);
}

static int l_dtypes(const bench_env *e) { return e->dtypes ? e->dtypes : BD_BIT(BD_F16) | BD_BIT(BD_F32); }

int bench_l_dtypes(const bench_env *e, int *rows) {
  *rows += __builtin_popcount((unsigned)l_dtypes(e));
  return l_dtypes(e);
}

static void l_note(const bench_env *e, const l_geom *g) {
  vc_progress_clear();
  printf("# suite L: %d scans at scale %g, seed %llu; voxels per level", e->batch, e->scale,
         (unsigned long long)e->seed);
  for (int l = 0; l < LEVELS; l++) printf(" %lld", (long long)g->n[l]);
  printf("; %d layers (stem; 4 x down + 2 subm; 4 x inverse + 1x1 skip add + 2 subm)\n", (int)N_NET);
}

void bench_suite_l(bench_env *e) {
  static const bench_dtype order[BD_COUNT] = {BD_F16, BD_F32, BD_BF16, BD_TF32};
  l_geom g;
  bench_progress(e, "L: %d scans at scale %g, building the maps", e->batch, e->scale);
  l_geom_init(e, &g);
  const double map_ms = median_ms(l_maps_timed, &g, 1, L_MAP_BUILDS);
  const int mask = l_dtypes(e);
  for (int k = 0; k < BD_COUNT; k++)
    if (mask & BD_BIT(order[k])) l_run_dtype(e, &g, map_ms, order[k]);
  l_note(e, &g);
  l_geom_free(&g);
}
