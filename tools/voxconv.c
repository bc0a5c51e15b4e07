/* voxconv.c — the `voxconv` command line.
 *
 *   voxconv demo       a small sparse U-Net, forward and backward; every pass is checked
 *                      against VC_ALGO_REFERENCE on a CPU context
 *   voxconv bench      the suites of BENCHMARKS.md (bench*.c): dense peak, map build,
 *                      inference and training rates, sampled f64 checks
 *   voxconv bench-cpu  one suite-S submanifold layer on the explicit CPU path, measured
 *                      against plain OpenBLAS SGEMM of the same FLOPs
 *   voxconv version
 *
 * Exit status: 0 success, 1 a failed check or a library error, 2 a usage error.
 * Library errors stop the tool at once (`check`): it is a one-shot program, and the
 * library's sentence already says what went wrong. Helpers shared by the commands live in
 * common.h (host side) and device.h (device buffers, timers, the dense ceiling).
 */
#include "bench.h"
#include "cli.h"
#include "common.h"
#include "device.h"
#include "shapes.h"
#include "voxconv.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Demo-only elementwise ops (op_add is shared, in common.c). */
static float op_copy(float a, float b) { return (void)b, a; }
static float op_relu(float a, float b) { return (void)b, a > 0 ? a : 0; }
static float op_relu_grad(float g, float z) { return z > 0 ? g : 0; } /* g where the ReLU passed z */

/* ---- one execute call, timed, and its check against the reference ------------------------ */

/* A timed_body: one execute call. */
static double conv_timed(void *arg) {
  const conv_call *c = arg;
  ws_reserve(c);
  double t0 = now_ms();
  check(c->ctx, conv_execute(c));
  return now_ms() - t0;
}

static void conv_poison_outputs(const conv_call *c) {
  int64_t n[2];
  conv_out_counts(c, n);
  for (int k = 0; k < 2; k++)
    if (n[k]) poison(c->args.dtype, c->out[k], n[k]);
}

/* Re-runs `c` with VC_ALGO_REFERENCE on ref_ctx/ref_plan from the same inputs and returns the
 * largest relative error of c's outputs. With a device backend the inputs and c's outputs
 * would be copied to the host here; today every tensor is host memory. */
static double reference_error(const conv_call *c, vc_context *ref_ctx, const vc_plan *ref_plan,
                              workspace *ref_ws) {
  conv_call r = *c;
  r.ctx = ref_ctx, r.plan = ref_plan, r.ws = ref_ws;
  r.args.algo = VC_ALGO_REFERENCE;
  int64_t n[2];
  conv_out_counts(c, n);
  for (int k = 0; k < 2; k++) r.out[k] = n[k] ? tensor_poisoned(c->args.dtype, n[k]) : NULL;
  ws_reserve(&r);
  check(ref_ctx, conv_execute(&r));
  double err = 0;
  for (int k = 0; k < 2; k++) {
    if (n[k]) err = worse(err, rel_err(c->args.dtype, c->out[k], r.out[k], n[k]));
    free(r.out[k]);
  }
  return err;
}

/* ---- command-line options ---------------------------------------------------------------- */

enum { PARSE_OK, PARSE_HELP, PARSE_ERROR };

static void print_command_help(const cli_command *cmd) {
  printf("usage: voxconv %s%s\n\n%s\n", cmd->name, cmd->n_opts ? " [options]" : "", cmd->about);
  printf("\noptions:\n");
  for (int i = 0; i < cmd->n_opts; i++) {
    const cli_option *o = &cmd->opts[i];
    char head[64];
    snprintf(head, sizeof head, "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    if (!o->metavar || (o->text && !**o->text)) printf("  %-18s %s\n", head, o->help);
    else if (o->text) printf("  %-18s %s (default %s)\n", head, o->help, *o->text);
    else if (o->choices) printf("  %-18s %s (default %s)\n", head, o->help, o->choices[*o->value]);
    else printf("  %-18s %s (default %lld)\n", head, o->help, *o->value);
  }
  printf("  %-18s show this help\n", "-h, --help");
}

/* Parses one value into o; prints the one-line complaint when it does not fit. */
static bool parse_value(const char *cmd, const cli_option *o, const char *text) {
  if (o->text) return *o->text = text, true;
  if (o->choices) {
    for (int i = 0; o->choices[i]; i++)
      if (!strcmp(text, o->choices[i])) return *o->value = i, true;
    fprintf(stderr, "voxconv %s: %s '%s' is not one of", cmd, o->name, text);
    for (int i = 0; o->choices[i]; i++) fprintf(stderr, "%s %s", i ? "," : "", o->choices[i]);
    fprintf(stderr, "\n");
    return false;
  }
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (*text && !*end && v >= o->lo && v <= o->hi) return *o->value = v, true;
  fprintf(stderr, "voxconv %s: %s '%s' is not an integer in [%lld, %lld]\n", cmd, o->name, text, o->lo, o->hi);
  return false;
}

/* The option `arg` names, up to an '=' if it has one; NULL if none does. */
static const cli_option *find_option(const cli_command *cmd, const char *arg) {
  const char *eq = strchr(arg, '=');
  const size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  for (int i = 0; i < cmd->n_opts; i++)
    if (strlen(cmd->opts[i].name) == len && !strncmp(cmd->opts[i].name, arg, len)) return &cmd->opts[i];
  return NULL;
}

/* argv[0] is the command name. Accepts `--name value` and `--name=value`. */
static int parse_options(const cli_command *cmd, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *eq = strchr(arg, '=');
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) return print_command_help(cmd), PARSE_HELP;
    const cli_option *o = find_option(cmd, arg);
    if (!o) {
      fprintf(stderr, "voxconv %s: unknown %s '%s' (try 'voxconv %s --help')\n", cmd->name,
              arg[0] == '-' ? "option" : "argument", arg, cmd->name);
      return PARSE_ERROR;
    }
    if (!o->metavar) { /* a flag */
      if (!eq) {
        *o->value = 1;
        continue;
      }
      fprintf(stderr, "voxconv %s: %s takes no value\n", cmd->name, o->name);
      return PARSE_ERROR;
    }
    const char *text = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
    if (!text) {
      fprintf(stderr, "voxconv %s: %s needs a value (%s)\n", cmd->name, o->name, o->metavar);
      return PARSE_ERROR;
    }
    if (!parse_value(cmd->name, o, text)) return PARSE_ERROR;
  }
  return PARSE_OK;
}

/* ---- the demo: a sparse U-Net ------------------------------------------------------------ */

enum { N_LAYERS = 8, DEMO_IN_CHANNELS = 4 };

typedef struct layer_spec {
  const char *name;
  vc_conv_kind kind;
  int32_t kernel, stride;
  int64_t ci, co;
  int paired; /* inverse: the sparse layer whose plan it inverts; else -1 */
  int share;  /* an earlier layer with the same sites and geometry whose plans it reuses; else -1 */
  int skip;   /* the layer whose activation is added after this layer's ReLU; else -1 */
  bool relu;
} layer_spec;

/* Layer i reads layer i-1's activation (the input features for i = 0). */
static const layer_spec unet[N_LAYERS] = {
    /* name    kind                 k  s  ci  co  paired share skip relu */
    {"stem",  VC_CONV_SUBMANIFOLD, 3, 1,  4, 16, -1,    -1,   -1,  true},
    {"down1", VC_CONV_SPARSE,      2, 2, 16, 32, -1,    -1,   -1,  true},
    {"sub1",  VC_CONV_SUBMANIFOLD, 3, 1, 32, 32, -1,    -1,   -1,  true},
    {"down2", VC_CONV_SPARSE,      2, 2, 32, 64, -1,    -1,   -1,  true},
    {"sub2",  VC_CONV_SUBMANIFOLD, 3, 1, 64, 64, -1,    -1,   -1,  true},
    {"up2",   VC_CONV_INVERSE,     2, 2, 64, 32,  3,    -1,    2,  true},
    {"up1",   VC_CONV_INVERSE,     2, 2, 32, 16,  1,    -1,    0,  true},
    {"head",  VC_CONV_SUBMANIFOLD, 3, 1, 16,  8, -1,     0,   -1,  false},
};

typedef struct layer {
  vc_plan *plan[2]; /* [0] on the run context, [1] on the reference CPU context */
  int64_t n_in, n_out, pairs;
  void *w, *b;     /* weight [co, K, ci], bias [co] */
  void *z, *a;     /* conv output [n_out, co]; activation: relu(z) (+ skip) */
  void *ga;        /* d loss / d a */
  void *dw, *db;
  double map_ms;   /* < 0: plans shared with an earlier layer */
  double fwd_ms, bwd_ms, err;
  const char *worst; /* the pass with the largest error */
} layer;

typedef struct demo {
  vc_dtype dt;
  vc_context *ctx, *ref_ctx;
  int32_t *coords;
  int64_t n, n_batch0;
  void *x, *g, *dx; /* input features [n, 4], d loss / d y, d loss / d x */
  layer L[N_LAYERS];
  workspace ws, ref_ws;
  double ref_ms;
} demo;


/* The run context. The demo keeps every tensor in host memory, so even a working CUDA
 * context is given back until this tool has a host-device copy path. */
static vc_context *demo_context(long long device) {
  char why[600] = "--device cpu";
  if (device != DEVICE_CPU) {
    vc_context *cuda = NULL;
    vc_status s = vc_context_create(VC_DEVICE_CUDA, 0, &cuda);
    if (s == VC_OK) {
      vc_context_destroy(cuda);
      snprintf(why, sizeof why, "a CUDA context opens, but this tool has no host-device copy path yet");
      if (device == DEVICE_CUDA) fprintf(stderr, "voxconv: --device cuda: %s\n", why), exit(1);
    } else {
      if (device == DEVICE_CUDA) check(NULL, s);
      snprintf(why, sizeof why, "no CUDA: %s", vc_last_error(NULL));
    }
  }
  vc_context *ctx = NULL;
  check(NULL, vc_context_create(VC_DEVICE_CPU, 0, &ctx));
  printf("backend: cpu (%s)\n", why);
  return ctx;
}

static void *layer_input(const demo *d, int i) { return i ? d->L[i - 1].a : d->x; }

/* Builds layer i's plans over `sites` on both contexts, or takes the shared layer's. */
static void layer_plans(demo *d, int i, const int32_t *sites, int64_t n) {
  const layer_spec *s = &unet[i];
  layer *L = &d->L[i];
  if (s->share >= 0) {
    memcpy(L->plan, d->L[s->share].plan, sizeof L->plan);
    L->map_ms = -1;
    return;
  }
  vc_conv_desc desc;
  vc_conv_desc_init(&desc, s->kind, s->kernel, s->stride, -1, 1);
  vc_context *ctxs[2] = {d->ctx, d->ref_ctx};
  for (int k = 0; k < 2; k++) {
    const vc_plan *paired = s->paired >= 0 ? d->L[s->paired].plan[k] : NULL;
    double t0 = now_ms();
    check(ctxs[k], vc_plan_create(ctxs[k], &desc, sites, n, paired, NULL, &L->plan[k]));
    if (k == 0) L->map_ms = now_ms() - t0;
  }
}

/* Both contexts must see the same kernel map sizes, and the chain must connect. */
static void layer_check_plans(const layer *L, const char *name, int64_t n_in) {
  const vc_plan *p = L->plan[0], *q = L->plan[1];
  if (vc_plan_in_count(p) == n_in && vc_plan_in_count(q) == n_in && vc_plan_out_count(p) == vc_plan_out_count(q) &&
      vc_plan_pair_count(p) == vc_plan_pair_count(q))
    return;
  fprintf(stderr,
          "voxconv: layer %s: plans disagree: in %lld/%lld (expected %lld), out %lld/%lld, pairs %lld/%lld "
          "(run/reference context)\n",
          name, (long long)vc_plan_in_count(p), (long long)vc_plan_in_count(q), (long long)n_in,
          (long long)vc_plan_out_count(p), (long long)vc_plan_out_count(q), (long long)vc_plan_pair_count(p),
          (long long)vc_plan_pair_count(q));
  exit(1);
}

static void demo_plans(demo *d) {
  const int32_t *sites = d->coords;
  int32_t *owned = NULL;
  int64_t n = d->n;
  for (int i = 0; i < N_LAYERS; i++) {
    layer *L = &d->L[i];
    layer_plans(d, i, sites, n);
    layer_check_plans(L, unet[i].name, n);
    L->n_in = n;
    L->n_out = vc_plan_out_count(L->plan[0]);
    L->pairs = vc_plan_pair_count(L->plan[0]);
    /* The next layer reads this one's output sites; the reference plan's copy is host
     * memory whatever the run backend. */
    int32_t *next = xmalloc((size_t)L->n_out * 4 * sizeof *next);
    check(d->ref_ctx, vc_plan_out_coords(L->plan[1], next, NULL));
    free(owned);
    sites = owned = next;
    n = L->n_out;
  }
  free(owned);
}

/* He-uniform weights over the full kernel fan-in keep activations of order one through
 * the stack, so f16 neither overflows nor flushes to zero. */
static void demo_weights(demo *d) {
  for (int i = 0; i < N_LAYERS; i++) {
    const layer_spec *s = &unet[i];
    const int64_t K = vc_plan_kernel_volume(d->L[i].plan[0]);
    d->L[i].w = tensor_random(d->dt, s->co * K * s->ci, sqrt(6.0 / (double)(K * s->ci)));
    d->L[i].b = tensor_random(d->dt, s->co, 0.1);
  }
}

/* One pass of layer i: VC_ALGO_AUTO on the run context, timed, then checked. */
static void demo_pass(demo *d, int i, vc_pass pass, const void *in0, const void *in1, const void *in2, void *out0,
                      void *out1) {
  layer *L = &d->L[i];
  conv_call c = {d->ctx, L->plan[0], {0}, pass, {in0, in1, in2}, {out0, out1}, &d->ws, NULL};
  vc_conv_args_init(&c.args, unet[i].ci, unet[i].co, d->dt);
  conv_poison_outputs(&c);
  double ms = conv_timed(&c);
  *(pass == VC_PASS_FORWARD ? &L->fwd_ms : &L->bwd_ms) += ms;
  double t0 = now_ms();
  double err = reference_error(&c, d->ref_ctx, L->plan[1], &d->ref_ws);
  d->ref_ms += now_ms() - t0;
  if (!L->worst || is_worse(err, L->err)) L->err = err, L->worst = pass_names[pass];
}

static void demo_forward(demo *d) {
  for (int i = 0; i < N_LAYERS; i++) {
    const layer_spec *s = &unet[i];
    layer *L = &d->L[i];
    const int64_t n = L->n_out * s->co;
    L->z = tensor_new(d->dt, n);
    demo_pass(d, i, VC_PASS_FORWARD, layer_input(d, i), L->w, L->b, L->z, NULL);
    L->a = elementwise(d->dt, n, L->z, NULL, s->relu ? op_relu : op_copy);
    if (s->skip >= 0) add_into(d->dt, n, &L->a, d->L[s->skip].a);
  }
}

/* d loss / d (activation of layer j) = layer j+1's dgrad plus every skip reader's gradient. */
static void collect_skip_grads(demo *d, int j) {
  for (int k = j + 1; k < N_LAYERS; k++)
    if (unet[k].skip == j) add_into(d->dt, d->L[j].n_out * unet[j].co, &d->L[j].ga, d->L[k].ga);
}

static void demo_backward(demo *d) {
  layer *top = &d->L[N_LAYERS - 1];
  top->ga = elementwise(d->dt, top->n_out * unet[N_LAYERS - 1].co, d->g, NULL, op_copy);
  for (int i = N_LAYERS - 1; i >= 0; i--) {
    const layer_spec *s = &unet[i];
    layer *L = &d->L[i];
    void *dz = elementwise(d->dt, L->n_out * s->co, L->ga, L->z, s->relu ? op_relu_grad : op_copy);
    void *dx = tensor_new(d->dt, L->n_in * s->ci);
    demo_pass(d, i, VC_PASS_BACKWARD_DATA, dz, L->w, NULL, dx, NULL);
    L->dw = tensor_new(d->dt, s->co * vc_plan_kernel_volume(L->plan[0]) * s->ci);
    L->db = tensor_new(d->dt, s->co);
    demo_pass(d, i, VC_PASS_BACKWARD_WEIGHT, layer_input(d, i), dz, NULL, L->dw, L->db);
    free(dz);
    if (i == 0) {
      d->dx = dx;
    } else {
      d->L[i - 1].ga = dx;
      collect_skip_grads(d, i - 1);
    }
  }
}

/* ---- the demo's table -------------------------------------------------------------------- */

typedef struct table_row {
  const char *name, *kind;
  int64_t n_in, n_out, pairs; /* < 0 prints "-" */
  double map_ms;              /* < 0 prints "shared" */
  double fwd_ms, bwd_ms, flops, err;
} table_row;

static void print_header(void) {
  printf("%-6s %-11s %8s %8s %9s %8s %8s %8s %8s %12s\n", "layer", "kind", "vox_in", "vox_out", "pairs", "map_ms",
         "fwd_ms", "bwd_ms", "GFLOP/s", "max_rel_err");
}

static void print_count(int64_t v, int width) {
  if (v < 0) printf(" %*s", width, "-");
  else printf(" %*lld", width, (long long)v);
}

static void print_row(const table_row *r) {
  printf("%-6s %-11s", r->name, r->kind);
  print_count(r->n_in, 8);
  print_count(r->n_out, 8);
  print_count(r->pairs, 9);
  if (r->map_ms < 0) printf(" %8s", "shared");
  else printf(" %8.3f", r->map_ms);
  const double ms = r->fwd_ms + r->bwd_ms;
  printf(" %8.3f %8.3f %8.2f %12.3e\n", r->fwd_ms, r->bwd_ms, ms > 0 ? r->flops / ms * 1e-6 : 0.0, r->err);
}

static const char *kind_name(vc_conv_kind k) {
  static const char *const names[] = {"submanifold", "sparse", "inverse", "transposed"};
  return names[k];
}

/* Prints the table; returns the totals row. */
static table_row demo_table(const demo *d) {
  table_row t = {"total", "", -1, -1, 0, 0, 0, 0, 0, 0};
  print_header();
  for (int i = 0; i < N_LAYERS; i++) {
    const layer *L = &d->L[i];
    const double flops = 3.0 * 2.0 * (double)L->pairs * (double)unet[i].ci * (double)unet[i].co; /* 3 passes */
    table_row r = {unet[i].name, kind_name(unet[i].kind), L->n_in, L->n_out, L->pairs, L->map_ms, L->fwd_ms,
                   L->bwd_ms, flops, L->err};
    print_row(&r);
    t.pairs += L->pairs, t.map_ms += L->map_ms > 0 ? L->map_ms : 0, t.fwd_ms += L->fwd_ms;
    t.bwd_ms += L->bwd_ms, t.flops += flops, t.err = worse(t.err, L->err);
  }
  print_row(&t);
  return t;
}

/* loss = sum(y * g), in f64: a one-number fingerprint of the run. */
static double demo_loss(const demo *d) {
  const int64_t n = d->L[N_LAYERS - 1].n_out * unet[N_LAYERS - 1].co;
  float *y = to_f32(d->dt, d->L[N_LAYERS - 1].z, n), *g = to_f32(d->dt, d->g, n);
  double loss = 0;
  for (int64_t i = 0; i < n; i++) loss += (double)y[i] * g[i];
  free(y);
  free(g);
  return loss;
}

/* Prints the verdict line; true on PASS. */
static bool demo_verdict(const demo *d) {
  const double tol = tolerance(d->dt, VC_MATH_F32);
  char why[1024] = "";
  size_t len = 0;
  for (int i = 0; i < N_LAYERS; i++) {
    const layer *L = &d->L[i];
    if (L->err <= tol) continue; /* false for NaN as well */
    len += (size_t)snprintf(why + len, sizeof why - len, "%s%s %s rel err %.2e > %.0e", len ? "; " : "",
                            unet[i].name, L->worst, L->err, tol);
    if (len >= sizeof why) break;
  }
  if (len == 0) printf("verdict: PASS\n");
  else printf("verdict: FAIL (%s)\n", why);
  return len == 0;
}

static void demo_free(demo *d) {
  for (int i = N_LAYERS - 1; i >= 0; i--) { /* inverse plans go before the plans they pair with */
    layer *L = &d->L[i];
    void *bufs[] = {L->w, L->b, L->z, L->a, L->ga, L->dw, L->db};
    for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) free(bufs[k]);
    if (unet[i].share < 0) vc_plan_destroy(L->plan[0]), vc_plan_destroy(L->plan[1]);
  }
  free(d->coords), free(d->x), free(d->g), free(d->dx);
  free(d->ws.ptr), free(d->ref_ws.ptr);
  vc_context_destroy(d->ctx);
  vc_context_destroy(d->ref_ctx);
}

/* A sphere shell in batch 0 and a torus in batch 1. */
static void demo_input(demo *d, int res) {
  static const vc_shape_fn shapes[2] = {vc_shape_shell, vc_shape_torus};
  d->coords = vc_shapes_batch(shapes, 2, res, &d->n);
  if (!d->coords) fprintf(stderr, "voxconv: demo shapes at res %d: out of host memory\n", res), exit(1);
  while (d->n_batch0 < d->n && d->coords[4 * d->n_batch0] == 0) d->n_batch0++;
  d->x = tensor_random(d->dt, d->n * DEMO_IN_CHANNELS, 1.0);
  printf("input: %lld voxels (sphere shell %lld in batch 0, torus %lld in batch 1), %d channels\n",
         (long long)d->n, (long long)d->n_batch0, (long long)(d->n - d->n_batch0), DEMO_IN_CHANNELS);
}

static int demo_run(long long res, vc_dtype dt, long long seed, long long device) {
  demo d = {.dt = dt};
  rng_seed((uint64_t)seed);
  printf("voxconv demo: sparse U-Net, res %lld, dtype %s, seed %lld\n", res, dtype_names[dt], seed);
  d.ctx = demo_context(device);
  check(NULL, vc_context_create(VC_DEVICE_CPU, 0, &d.ref_ctx));
  printf("reference: VC_ALGO_REFERENCE on its own CPU context, tolerance %.0e (DESIGN.md section 6)\n",
         tolerance(dt, VC_MATH_F32));
  demo_input(&d, (int)res);
  demo_plans(&d);
  demo_weights(&d);
  d.g = tensor_random(dt, d.L[N_LAYERS - 1].n_out * unet[N_LAYERS - 1].co, 1.0);
  demo_forward(&d);
  demo_backward(&d);
  printf("\n");
  table_row t = demo_table(&d);
  printf("\nloss sum(y*g) = %.6g; run passes %.3f ms (VC_ALGO_AUTO), reference checks %.1f ms\n", demo_loss(&d),
         t.fwd_ms + t.bwd_ms, d.ref_ms);
  bool pass = demo_verdict(&d);
  demo_free(&d);
  return pass ? 0 : 1;
}

static long long demo_res = 48, demo_dtype = VC_DTYPE_F32, demo_seed = 1, demo_device = DEVICE_AUTO;
static int demo_main(void) { return demo_run(demo_res, (vc_dtype)demo_dtype, demo_seed, demo_device); }
static cli_option demo_opts[] = {
    {"--res", "R", "grid resolution of both shapes", NULL, 8, 512, &demo_res, NULL},
    {"--dtype", "T", "storage type of features, weights and gradients: f32, f16 or bf16", dtype_names, 0, 0,
     &demo_dtype, NULL},
    {"--seed", "S", "seed of the random features, weights and output gradient", NULL, 0, LLONG_MAX, &demo_seed, NULL},
    {"--device", "D", "backend: auto (CUDA if it works, else CPU), cpu or cuda", device_names, 0, 0, &demo_device,
     NULL},
};

/* ---- bench-cpu ----------------------------------------------------------------------------- */

/* The foundation issue's CPU bar: the explicit forward at this share of plain SGEMM. */
#define BENCH_CPU_TARGET_PCT 40.0

/* Median rate of one plain SGEMM with the FLOPs of one pass: M = pairs, K = N = C. */
static double bcpu_sgemm(int64_t pairs, int64_t c, int reps, double *ms) {
  if (pairs > INT_MAX) fprintf(stderr, "voxconv: %lld pairs exceed one SGEMM call\n", (long long)pairs), exit(1);
  sgemm_case g = {(int)pairs, (int)c, (int)c, random_f32(pairs * c, 1), random_f32(c * c, 1),
                  random_f32(pairs * c, 1)};
  *ms = median_ms(sgemm_timed, &g, 1, reps);
  free(g.a), free(g.b), free(g.c);
  return 2.0 * (double)pairs * (double)c * (double)c / *ms * 1e-6;
}

typedef struct bcpu_case {
  vc_context *ctx;
  const vc_plan *plan;
  vc_dtype dt;
  int64_t n, c;
  void *x, *w, *b, *dy;       /* inputs */
  void *y, *dx, *dw, *db;     /* outputs */
  workspace ws, ref_ws;
} bcpu_case;

static conv_call bcpu_call(bcpu_case *bc, vc_pass pass) {
  vc_conv_args args;
  vc_conv_args_init(&args, bc->c, bc->c, bc->dt);
  args.algo = VC_ALGO_EXPLICIT;
  const conv_tensors t = {bc->x, bc->w, bc->b, bc->dy, bc->y, bc->dx, bc->dw, bc->db};
  return conv_call_for(bc->ctx, bc->plan, &args, pass, &t, &bc->ws, NULL);
}

static void bcpu_tensors(bcpu_case *bc) {
  const int64_t n = bc->n, c = bc->c, K = vc_plan_kernel_volume(bc->plan);
  bc->x = tensor_random(bc->dt, n * c, 1.0);
  bc->w = tensor_random(bc->dt, c * K * c, sqrt(6.0 / (double)(K * c)));
  bc->b = tensor_random(bc->dt, c, 0.1);
  bc->dy = tensor_random(bc->dt, n * c, 1.0);
  bc->y = tensor_poisoned(bc->dt, n * c);
  bc->dx = tensor_poisoned(bc->dt, n * c);
  bc->dw = tensor_poisoned(bc->dt, c * K * c);
  bc->db = tensor_poisoned(bc->dt, c);
}

static void bcpu_free(bcpu_case *bc) {
  void *bufs[] = {bc->x, bc->w, bc->b, bc->dy, bc->y, bc->dx, bc->dw, bc->db, bc->ws.ptr, bc->ref_ws.ptr};
  for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) free(bufs[k]);
}

/* Times the three explicit passes, checks each once against the reference, prints a row
 * each. Returns the forward share of plain SGEMM in %; *ok turns false on a bad error. */
static double bcpu_passes(bcpu_case *bc, int64_t pairs, int reps, double sgemm_rate, bool *ok) {
  double fwd_pct = 0;
  printf("%-16s %10s %10s %10s %14s\n", "pass", "median_ms", "GFLOP/s", "of_sgemm", "rel_err_vs_ref");
  for (int p = 0; p < 3; p++) {
    conv_call c = bcpu_call(bc, (vc_pass)p);
    const double ms = median_ms(conv_timed, &c, 1, reps);
    const double rate = 2.0 * (double)pairs * (double)bc->c * (double)bc->c / ms * 1e-6;
    const double err = reference_error(&c, bc->ctx, bc->plan, &bc->ref_ws);
    const double pct = 100.0 * rate / sgemm_rate;
    printf("%-16s %10.3f %10.2f %9.1f%% %14.3e\n", pass_names[p], ms, rate, pct, err);
    if (!(err <= tolerance(bc->dt, VC_MATH_F32))) {
      fprintf(stderr, "voxconv: bench-cpu: %s rel err %.3e exceeds %.0e\n", pass_names[p], err,
              tolerance(bc->dt, VC_MATH_F32));
      *ok = false;
    }
    if (p == VC_PASS_FORWARD) fwd_pct = pct;
  }
  return fwd_pct;
}

static void bcpu_header(int res, int64_t n, int64_t pairs, int64_t c, vc_dtype dt, double map_ms, int reps) {
  printf("bench-cpu: suite S shell at res %d: %lld voxels, %lld pairs (%.2f per voxel)\n", res, (long long)n,
         (long long)pairs, n ? (double)pairs / (double)n : 0.0);
  printf("layer: submanifold 3x3x3, %lld -> %lld channels, bias, dtype %s, VC_ALGO_EXPLICIT\n", (long long)c,
         (long long)c, dtype_names[dt]);
  /* Printed because the explicit path mixes OpenMP regions with OpenBLAS calls: a spinning
   * OpenMP pool and a pthreads OpenBLAS pool share the cores, and the timings show it. */
  static const char *const blas_threading[] = {"sequential", "pthreads", "OpenMP"};
  const char *wait = getenv("OMP_WAIT_POLICY");
  const int par = openblas_get_parallel();
  printf("threads: %d OpenMP (OMP_WAIT_POLICY=%s), %d OpenBLAS (%s core, %s build)\n", omp_get_max_threads(),
         wait ? wait : "unset", openblas_get_num_threads(), openblas_get_corename(),
         par >= 0 && par <= 2 ? blas_threading[par] : "unknown");
  printf("timings: median of %d runs after one warm-up\n", reps);
  printf("map build: %.3f ms\n", map_ms);
}

static int bcpu_run(int res, int64_t c, int reps, vc_dtype dt) {
  rng_seed(1);
  vc_dev dev;
  dev_open(&dev, DEVICE_CPU);
  bcpu_case bc = {.ctx = dev.ctx, .dt = dt, .c = c};
  plan_build pb = {&dev, {0}, NULL, 0, NULL, -1, NULL};
  vc_conv_desc_init(&pb.desc, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  int32_t *coords = vc_shape_shell(res, 0, &pb.n);
  if (!coords) fprintf(stderr, "voxconv: shell at res %d: out of host memory\n", res), exit(1);
  pb.coords = coords;
  const double map_ms = median_ms(plan_timed, &pb, 1, reps);
  bc.plan = pb.plan, bc.n = pb.n;
  const int64_t pairs = vc_plan_pair_count(bc.plan);
  bcpu_header(res, bc.n, pairs, c, dt, map_ms, reps);
  bcpu_tensors(&bc);
  double sgemm_ms;
  const double sgemm_rate = bcpu_sgemm(pairs, c, reps, &sgemm_ms);
  bool ok = true;
  const double fwd_pct = bcpu_passes(&bc, pairs, reps, sgemm_rate, &ok);
  printf("plain SGEMM M=%lld K=%lld N=%lld: %.3f ms, %.2f GFLOP/s\n", (long long)pairs, (long long)c, (long long)c,
         sgemm_ms, sgemm_rate);
  printf("bench-cpu: forward %.1f%% of plain SGEMM (target >= %.0f%%)%s\n", fwd_pct, BENCH_CPU_TARGET_PCT,
         ok ? "" : "; FAIL: a pass disagrees with the reference");
  bcpu_free(&bc);
  vc_plan_destroy(pb.plan);
  free(coords);
  dev_close(&dev);
  return ok ? 0 : 1;
}

static long long bcpu_res = 64, bcpu_channels = 64, bcpu_reps = 10, bcpu_dtype = VC_DTYPE_F32;
static int bcpu_main(void) {
  return bcpu_run((int)bcpu_res, bcpu_channels, (int)bcpu_reps, (vc_dtype)bcpu_dtype);
}
static cli_option bcpu_opts[] = {
    {"--res", "R", "resolution of the suite S sphere shell", NULL, 4, 1024, &bcpu_res, NULL},
    {"--channels", "C", "input and output channels of the layer", NULL, 1, 4096, &bcpu_channels, NULL},
    {"--reps", "N", "timed runs per measurement (after one warm-up); the median is reported", NULL, 1, 10000,
     &bcpu_reps, NULL},
    {"--dtype", "T", "storage type: f32, f16 or bf16; the SGEMM baseline stays f32", dtype_names, 0, 0,
     &bcpu_dtype, NULL},
};

/* ---- main ---------------------------------------------------------------------------------- */

static int version_main(void) {
  printf("voxconv %s\n", vc_version());
  return 0;
}

static const cli_command commands[] = {
    {"demo", "a sparse U-Net on two shapes, forward + backward, checked against the reference",
     "Runs a small sparse U-Net (stem, two strided downs, two inverse ups with skip additions,\n"
     "head) on a batch of two shapes: a sphere shell in batch 0 and a torus in batch 1, with 4\n"
     "random input channels. Every forward, backward-data and backward-weight pass runs with\n"
     "VC_ALGO_AUTO on the chosen backend and again with VC_ALGO_REFERENCE on a CPU context from\n"
     "the same inputs; the table shows per layer the voxels, pairs, map build, pass times,\n"
     "useful GFLOP/s and the largest relative error. Exit status 1 when an error exceeds the\n"
     "tolerance (1e-5 for f32, 1e-2 for f16/bf16).",
     demo_opts, (int)(sizeof demo_opts / sizeof *demo_opts), demo_main},
    {"bench-cpu", "one submanifold layer on the explicit CPU path vs plain OpenBLAS SGEMM",
     "Benchmarks one submanifold 3x3x3 C -> C layer with bias on the suite S sphere shell\n"
     "(BENCHMARKS.md) on the CPU backend with VC_ALGO_EXPLICIT: kernel-map build time, and for\n"
     "forward, backward-data and backward-weight the median time, the useful rate\n"
     "2*pairs*C*C/t and its share of one plain cblas_sgemm of the same FLOPs (M = pairs,\n"
     "K = N = C). Each pass is also checked once against VC_ALGO_REFERENCE; exit status 1 when\n"
     "one disagrees.",
     bcpu_opts, (int)(sizeof bcpu_opts / sizeof *bcpu_opts), bcpu_main},
    {"bench", bench_summary, bench_about, bench_opts, BENCH_N_OPTS, bench_main},
    {"version", "print the library version", "Prints the voxconv library version.", NULL, 0, version_main},
};
enum { N_COMMANDS = sizeof commands / sizeof *commands };

static void print_main_help(FILE *f) {
  fprintf(f, "usage: voxconv COMMAND [options]\n\nSparse 3D convolution: demo, benchmark and checks.\n\n"
             "commands:\n");
  for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'voxconv COMMAND --help' lists the options of a command.\n"
             "Exit status: 0 success, 1 a failed check or library error, 2 a usage error.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_main_help(stderr);
    return EXIT_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    print_main_help(stdout);
    return 0;
  }
  for (int i = 0; i < N_COMMANDS; i++) {
    if (strcmp(argv[1], commands[i].name)) continue;
    int parsed = parse_options(&commands[i], argc - 1, argv + 1);
    return parsed == PARSE_HELP ? 0 : parsed == PARSE_ERROR ? EXIT_USAGE : commands[i].run();
  }
  fprintf(stderr, "voxconv: unknown %s '%s' (try 'voxconv --help')\n", argv[1][0] == '-' ? "option" : "command",
          argv[1]);
  return EXIT_USAGE;
}
