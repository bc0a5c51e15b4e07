/* bench_s.c — suite S of BENCHMARKS.md: per RES row, L stacked submanifold 3x3x3 C -> C
 * layers with bias on the sphere shell of shapes.h. */
#include "bench.h"
#include "shapes.h"

#include <stdlib.h>

typedef struct s_spec {
  int res;
  int64_t c;
  int layers;
  double infer_target, train_target; /* % of the dense peak, f16 and bf16 */
} s_spec;

/* BENCHMARKS.md's table. */
static const s_spec s_table[] = {{16, 1024, 8, 35, 35},  {32, 1024, 4, 45, 45},  {64, 1024, 2, 60, 65},
                                 {128, 512, 2, 60, 65},  {256, 256, 2, 60, 65},  {512, 128, 2, 55, 60},
                                 {1024, 64, 2, 35, 35}};
/* BENCHMARKS.md's tf32 targets, for C >= 256. */
#define S_TF32_INFER_TARGET 60.0
#define S_TF32_TRAIN_TARGET 50.0
enum { S_ROWS = sizeof s_table / sizeof *s_table, S_MAP_BUILDS = 5, S_CPU_MAX_RES = 64, S_CPU_MAX_C = 64 };

/* The order rows of one RES are printed in. */
static const bench_dtype s_order[BD_COUNT] = {BD_F16, BD_BF16, BD_TF32, BD_F32};

bool bench_s_known_res(int res) {
  for (int i = 0; i < S_ROWS; i++)
    if (s_table[i].res == res) return true;
  return false;
}

/* Asked with --res; by default every row on CUDA, RES <= 64 on the CPU. */
static bool s_selected(const bench_env *e, int i) {
  for (int k = 0; k < e->n_res; k++)
    if (e->res[k] == s_table[i].res) return true;
  return e->n_res == 0 && (e->dev.cuda || s_table[i].res <= S_CPU_MAX_RES);
}

static int64_t s_channels(const bench_env *e, int i) {
  if (e->channels) return e->channels;
  const int64_t c = s_table[i].c;
  return e->dev.cuda || c < S_CPU_MAX_C ? c : S_CPU_MAX_C;
}

static int s_row_dtypes(const bench_env *e, int64_t c) {
  if (e->dtypes) return e->dtypes;
  return BD_BIT(BD_F16) | BD_BIT(BD_BF16) | (c >= 256 ? BD_BIT(BD_TF32) : 0);
}

int bench_s_dtypes(const bench_env *e, int *rows) {
  int mask = 0;
  for (int i = 0; i < S_ROWS; i++) {
    if (!s_selected(e, i)) continue;
    const int row = s_row_dtypes(e, s_channels(e, i));
    mask |= row;
    *rows += __builtin_popcount((unsigned)row);
  }
  return mask;
}

/* ---- one RES: the shell and its plan, shared by every dtype ----------------------------- */

typedef struct s_shell {
  int64_t pairs;
  double map_ms;
  plan_build pb; /* pb.plan, pb.n, pb.coords (device) */
} s_shell;

static void s_shell_build(bench_env *e, s_shell *sh, int res) {
  int64_t n = 0;
  int32_t *host = vc_shape_shell(res, 0, &n);
  if (!host) fprintf(stderr, "voxconv: shell at res %d: out of host memory\n", res), exit(1);
  int32_t *coords = dev_from_host(&e->dev, host, (size_t)n * 4 * sizeof *coords);
  free(host);
  sh->pb = (plan_build){&e->dev, {0}, coords, n, NULL, NULL};
  vc_conv_desc_init(&sh->pb.desc, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  bench_progress(e, "S r%d: %lld voxels, building the map", res, (long long)n);
  sh->map_ms = median_ms(plan_timed, &sh->pb, 1, S_MAP_BUILDS);
  sh->pairs = vc_plan_pair_count(sh->pb.plan);
}

static void s_shell_free(bench_env *e, s_shell *sh) {
  vc_plan_destroy(sh->pb.plan);
  dev_free(&e->dev, (void *)sh->pb.coords);
}

/* ---- one (RES, dtype): the stack's tensors and passes ----------------------------------- */

typedef struct s_stack {
  vc_dev *dev;
  const vc_plan *plan;
  vc_conv_args args;
  int layers, sets, set;
  int64_t n, c;
  void *xs[BENCH_MAX_SETS], *dys[BENCH_MAX_SETS]; /* rotated inputs and top gradients */
  dev_params *prm;                                /* per layer */
  void **act;                                     /* per layer: its output */
  void *g[2];                                     /* backward-data outputs, alternating */
  workspace ws;
} s_stack;

static void s_stack_alloc(bench_env *e, s_stack *st) {
  const vc_dtype dt = st->args.dtype;
  const int64_t nc = st->n * st->c;
  st->sets = bench_input_sets((size_t)nc * vc_dtype_size(dt));
  for (int s = 0; s < st->sets; s++) st->xs[s] = dev_random(st->dev, dt, nc, 1.0);
  for (int s = 0; s < st->sets; s++) st->dys[s] = dev_random(st->dev, dt, nc, 1.0);
  st->prm = xcalloc((size_t)st->layers, sizeof *st->prm);
  st->act = xcalloc((size_t)st->layers, sizeof *st->act);
  for (int l = 0; l < st->layers; l++) {
    dev_params_alloc(st->dev, st->plan, &st->args, 1, &st->prm[l]);
    st->act[l] = dev_poisoned(st->dev, dt, nc);
  }
  for (int k = 0; k < 2; k++) st->g[k] = dev_poisoned(st->dev, dt, nc);
  st->ws.bytes = conv_ws_most(e->dev.ctx, st->plan, &st->args);
  st->ws.ptr = dev_alloc(st->dev, st->ws.bytes);
}

static void s_stack_free(s_stack *st) {
  for (int s = 0; s < st->sets; s++) dev_free(st->dev, st->xs[s]), dev_free(st->dev, st->dys[s]);
  for (int l = 0; l < st->layers; l++) dev_params_free(st->dev, &st->prm[l]), dev_free(st->dev, st->act[l]);
  free(st->prm), free(st->act);
  dev_free(st->dev, st->g[0]), dev_free(st->dev, st->g[1]);
  dev_free(st->dev, st->ws.ptr);
}

/* One pass of layer l reading x (and dy), writing act[l] (forward), dx or its dw and db. */
static void s_pass(s_stack *st, int l, vc_pass pass, const void *x, const void *dy, void *dx) {
  dev_pass(st->dev, st->plan, &st->args, pass, &st->prm[l], x, dy, pass == VC_PASS_FORWARD ? st->act[l] : dx,
             &st->ws);
}

static const void *s_input(const s_stack *st, int l) { return l ? st->act[l - 1] : st->xs[st->set]; }

static void s_forward(void *arg) {
  s_stack *st = arg;
  for (int l = 0; l < st->layers; l++) s_pass(st, l, VC_PASS_FORWARD, s_input(st, l), NULL, NULL);
}

/* Layer l's output gradient is the top gradient or layer l+1's backward-data output. */
static void s_backward(void *arg) {
  s_stack *st = arg;
  for (int l = st->layers - 1; l >= 0; l--) {
    const void *dy = l == st->layers - 1 ? st->dys[st->set] : st->g[(l + 1) & 1];
    s_pass(st, l, VC_PASS_BACKWARD_DATA, NULL, dy, st->g[l & 1]);
    s_pass(st, l, VC_PASS_BACKWARD_WEIGHT, s_input(st, l), dy, NULL);
  }
}

/* The row's targets, when it is the table's case: its C, and a dtype the table names. */
static void s_targets(const s_spec *spec, int64_t c, bench_dtype t, bench_row *r) {
  if (c != spec->c) return;
  if (t == BD_F16 || t == BD_BF16) r->infer_target = spec->infer_target, r->train_target = spec->train_target;
  if (t == BD_TF32 && c >= 256) r->infer_target = S_TF32_INFER_TARGET, r->train_target = S_TF32_TRAIN_TARGET;
}

static void s_run(bench_env *e, const s_shell *sh, const s_spec *spec, int64_t c, bench_dtype t) {
  s_stack st = {.dev = &e->dev, .plan = sh->pb.plan, .args = bench_args(c, c, t), .layers = spec->layers, .sets = 1,
                .n = sh->pb.n, .c = c};
  bench_progress(e, "S r%d c%lld %s: timing", spec->res, (long long)c, bench_dtype_names[t]);
  bench_tune(e, st.plan, &st.args);
  s_stack_alloc(e, &st);
  bench_row r = {.suite = "S", .dt = t, .voxels = st.n, .pairs = sh->pairs, .map_ms = sh->map_ms, .err = -1,
                 .plan_bytes = (int64_t)vc_plan_memory_bytes(st.plan), .ws_bytes = (int64_t)st.ws.bytes,
                 .out_bytes = st.n * c * (int64_t)vc_dtype_size(st.args.dtype), .map_share = -1};
  snprintf(r.name, sizeof r.name, "shell_r%d_c%lld_l%d", spec->res, (long long)c, spec->layers);
  s_targets(spec, c, t, &r);
  bench_algos(e, &st.plan, &st.args, 1, r.algos, sizeof r.algos);
  const bench_net net = {&st, s_forward, s_backward, &st.set, st.sets};
  bench_time_net(e, &net, &r.infer_ms, &r.train_ms);
  r.infer_flops = 2.0 * (double)sh->pairs * (double)c * (double)c * spec->layers;
  r.train_flops = 3 * r.infer_flops;
  if (e->check) {
    bench_progress(e, "S r%d c%lld %s: checking layer 0", spec->res, (long long)c, bench_dtype_names[t]);
    r.err = bench_check_layer(e, st.plan, &st.args, st.xs[0], st.prm[0].w, st.prm[0].b, &st.ws);
  }
  bench_emit(e, &r);
  s_stack_free(&st);
}

void bench_suite_s(bench_env *e) {
  for (int i = 0; i < S_ROWS; i++) {
    if (!s_selected(e, i)) continue;
    const int64_t c = s_channels(e, i);
    const int mask = s_row_dtypes(e, c);
    s_shell sh;
    s_shell_build(e, &sh, s_table[i].res);
    for (int k = 0; k < BD_COUNT; k++)
      if (mask & BD_BIT(s_order[k])) s_run(e, &sh, &s_table[i], c, s_order[k]);
    s_shell_free(e, &sh);
  }
}
