/* net.c — the stack and the sparse U-Net of net.h: layers, plans, passes, checks, table. */
#include "net.h"

#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const net_kind_names[] = {"unet", "stack", NULL};

/* The elementwise ops between the layers (dev_add does the skip additions). */
static float op_copy(float a, float b) { return (void)b, a; }
static float op_relu(float a, float b) { return (void)b, a > 0 ? a : 0; }
static float op_relu_grad(float g, float z) { return z > 0 ? g : 0; } /* g where the ReLU passed z */

/* ---- the layers -------------------------------------------------------------------------- */

static net_spec spec(const char *name, vc_conv_kind kind, int32_t kernel, int32_t stride, int64_t ci, int64_t co,
                     int paired, int share, int skip, bool relu) {
  net_spec s = {"", kind, kernel, stride, ci, co, paired, share, skip, relu};
  snprintf(s.name, sizeof s.name, "%s", name);
  return s;
}

static int stack_specs(int depth, int64_t width, net_spec *out) {
  for (int i = 0; i < depth; i++) {
    char name[12];
    snprintf(name, sizeof name, "subm%d", i + 1);
    out[i] = spec(name, VC_CONV_SUBMANIFOLD, 3, 1, width, width, -1, i ? 0 : -1, -1, false);
  }
  return depth;
}

/* Layer indices: stem 0; level k's down 2k-1 and subm 2k; its up 3*depth+1-k; head last. */
static int unet_specs(int depth, int64_t width, net_spec *out) {
  char name[12];
  int n = 0;
  out[n++] = spec("stem", VC_CONV_SUBMANIFOLD, 3, 1, NET_UNET_IN_CHANNELS, width, -1, -1, -1, true);
  for (int k = 1; k <= depth; k++) {
    const int64_t c = width << k;
    snprintf(name, sizeof name, "down%d", k);
    out[n++] = spec(name, VC_CONV_SPARSE, 2, 2, c / 2, c, -1, -1, -1, true);
    snprintf(name, sizeof name, "sub%d", k);
    out[n++] = spec(name, VC_CONV_SUBMANIFOLD, 3, 1, c, c, -1, -1, -1, true);
  }
  for (int k = depth; k >= 1; k--) {
    const int64_t c = width << k;
    snprintf(name, sizeof name, "up%d", k);
    out[n++] = spec(name, VC_CONV_INVERSE, 2, 2, c, c / 2, 2 * k - 1, -1, k > 1 ? 2 * (k - 1) : 0, true);
  }
  out[n++] = spec("head", VC_CONV_SUBMANIFOLD, 3, 1, width, width > 1 ? width / 2 : 1, -1, 0, -1, false);
  return n;
}

int net_specs(net_kind kind, int depth, int64_t width, net_spec *out, char *err, size_t err_len) {
  const int most = kind == NET_STACK ? NET_MAX_LAYERS : NET_UNET_MAX_DEPTH;
  if (depth < 1 || depth > most) {
    snprintf(err, err_len, "%s depth %d is outside [1, %d]", net_kind_names[kind], depth, most);
    return 0;
  }
  if (width < 1 || (kind == NET_UNET && width > (VC_CHANNELS_MAX >> depth)) || width > VC_CHANNELS_MAX) {
    snprintf(err, err_len, "%s width %lld%s exceeds VC_CHANNELS_MAX = %d", net_kind_names[kind], (long long)width,
             kind == NET_UNET ? " doubled at every level" : "", VC_CHANNELS_MAX);
    return 0;
  }
  return kind == NET_STACK ? stack_specs(depth, width, out) : unet_specs(depth, width, out);
}

/* ---- plans ------------------------------------------------------------------------------- */

/* Both contexts must see the same kernel map sizes, and the chain must connect. */
static void check_plan_sizes(const net_layer *L, int64_t n_in) {
  const vc_plan *p = L->plan, *q = L->ref_plan;
  if (vc_plan_in_count(p) == n_in && (!q || (vc_plan_in_count(q) == n_in && vc_plan_out_count(p) == vc_plan_out_count(q) &&
                                             vc_plan_pair_count(p) == vc_plan_pair_count(q))))
    return;
  fprintf(stderr,
          "voxconv: layer %s: plans disagree: in %lld/%lld (expected %lld), out %lld/%lld, pairs %lld/%lld "
          "(device/reference context)\n",
          L->s.name, (long long)vc_plan_in_count(p), (long long)vc_plan_in_count(q), (long long)n_in,
          (long long)vc_plan_out_count(p), (long long)vc_plan_out_count(q), (long long)vc_plan_pair_count(p),
          (long long)vc_plan_pair_count(q));
  exit(1);
}

/* The sites a layer reads, on the device and (checks) on the host, and their count. */
typedef struct sites {
  int32_t *dev, *host;
  int64_t n;
  bool own_host; /* host is not the caller's coords */
} sites;

/* Builds layer i's plans over s, or takes the shared layer's. */
static void layer_plans(net *nt, int i, const sites *s) {
  net_layer *L = &nt->L[i];
  if (L->s.share >= 0) {
    L->plan = nt->L[L->s.share].plan, L->ref_plan = nt->L[L->s.share].ref_plan;
    L->map_ms = -1;
    return;
  }
  const bool inverse = L->s.paired >= 0; /* its sites come from the paired plan */
  plan_build pb = {nt->dev, {0}, inverse ? NULL : s->dev, inverse ? 0 : s->n, NULL,
                   inverse ? nt->L[L->s.paired].plan : NULL};
  vc_conv_desc_init(&pb.desc, L->s.kind, L->s.kernel, L->s.stride, -1, 1);
  L->map_ms = plan_timed(&pb);
  L->plan = pb.plan;
  if (!nt->check) return;
  const vc_plan *paired = inverse ? nt->L[L->s.paired].ref_plan : NULL;
  check(nt->ref_ctx, vc_plan_create(nt->ref_ctx, &pb.desc, inverse ? NULL : s->host, inverse ? 0 : s->n, paired, NULL,
                                    &L->ref_plan));
}

/* Moves s on to the output sites of layer i (a submanifold layer keeps them, in order). */
static void next_sites(net *nt, int i, sites *s) {
  const net_layer *L = &nt->L[i];
  if (L->s.kind == VC_CONV_SUBMANIFOLD) return;
  const int64_t n = L->n_out;
  const size_t bytes = (size_t)n * 4 * sizeof(int32_t);
  int32_t *dev = dev_alloc(nt->dev, bytes);
  check(nt->dev->ctx, vc_plan_out_coords(L->plan, dev, nt->dev->stream));
  dev_sync(nt->dev);
  dev_free(nt->dev, s->dev);
  s->dev = dev;
  if (nt->check) {
    int32_t *host = xmalloc(bytes);
    check(nt->ref_ctx, vc_plan_out_coords(L->ref_plan, host, NULL));
    if (s->own_host) free(s->host);
    s->host = host, s->own_host = true;
  }
  s->n = n;
}

static void net_plans(net *nt, const int32_t *coords, int64_t n) {
  sites s = {dev_from_host(nt->dev, coords, (size_t)n * 4 * sizeof(int32_t)), (int32_t *)coords, n, false};
  for (int i = 0; i < nt->n_layers; i++) {
    net_layer *L = &nt->L[i];
    vc_progress("%s: kernel maps, layer %d/%d (%s)", nt->what, i + 1, nt->n_layers, L->s.name);
    layer_plans(nt, i, &s);
    check_plan_sizes(L, s.n);
    L->n_in = s.n;
    L->n_out = vc_plan_out_count(L->plan);
    L->pairs = vc_plan_pair_count(L->plan);
    next_sites(nt, i, &s);
  }
  dev_free(nt->dev, s.dev);
  if (s.own_host) free(s.host);
  vc_progress_clear();
}

/* ---- tensors ----------------------------------------------------------------------------- */

static void net_tensors(net *nt) {
  const vc_dev *d = nt->dev;
  int64_t scratch = 0;
  size_t ws = 0;
  for (int i = 0; i < nt->n_layers; i++) {
    net_layer *L = &nt->L[i];
    const int64_t out = L->n_out * L->s.co;
    vc_conv_args_init(&L->args, L->s.ci, L->s.co, nt->dt);
    dev_params_alloc(d, L->plan, &L->args, L->s.relu ? 2 : 1, &L->prm);
    L->z = dev_poisoned(d, nt->dt, out);
    L->a = L->s.relu || L->s.skip >= 0 ? dev_poisoned(d, nt->dt, out) : L->z;
    const bool top = i == nt->n_layers - 1;
    if (nt->train) L->ga = top ? dev_random(d, nt->dt, out, 1.0) : dev_poisoned(d, nt->dt, out);
    if (L->s.relu && out > scratch) scratch = out;
    const size_t need = conv_ws_most(d->ctx, L->plan, &L->args);
    ws = need > ws ? need : ws;
  }
  const int64_t nx = nt->L[0].n_in * nt->L[0].s.ci; /* the input features */
  nt->x = dev_random(d, nt->dt, nx, 1.0);
  if (nt->train) {
    nt->dx = dev_poisoned(d, nt->dt, nx);
    nt->dz = dev_poisoned(d, nt->dt, scratch);
  }
  nt->ws = (workspace){dev_alloc(d, ws), ws};
}

void net_create(net *nt, vc_dev *dev, vc_dtype dt, const net_spec *specs, int n_layers, const int32_t *coords,
                int64_t n, bool train, bool check_passes, const char *what) {
  memset(nt, 0, sizeof *nt);
  nt->dev = dev, nt->dt = dt, nt->train = train, nt->check = check_passes, nt->what = what;
  nt->n_layers = n_layers;
  for (int i = 0; i < n_layers; i++) nt->L[i].s = specs[i], nt->L[i].err = -1;
  if (check_passes) check(NULL, vc_context_create(VC_DEVICE_CPU, 0, &nt->ref_ctx));
  net_plans(nt, coords, n);
  net_tensors(nt);
}

void net_free(net *nt) {
  const vc_dev *d = nt->dev;
  for (int i = nt->n_layers - 1; i >= 0; i--) { /* inverse plans go before the plans they pair with */
    net_layer *L = &nt->L[i];
    dev_params_free(d, &L->prm);
    if (L->a != L->z) dev_free(d, L->a);
    dev_free(d, L->z), dev_free(d, L->ga);
    if (L->s.share < 0) vc_plan_destroy(L->plan), vc_plan_destroy(L->ref_plan);
  }
  dev_free(d, nt->x), dev_free(d, nt->dx), dev_free(d, nt->dz), dev_free(d, nt->ws.ptr);
  free(nt->ref_ws.ptr);
  vc_context_destroy(nt->ref_ctx);
  memset(nt, 0, sizeof *nt);
}

/* ---- passes ------------------------------------------------------------------------------ */

/* One pass of layer i with VC_ALGO_AUTO: outputs poisoned, the pass timed into *ms, then
 * checked when `check_it`. */
static void layer_pass(net *nt, int i, vc_pass pass, const void *x, const void *dy, void *y_or_dx, bool check_it,
                       double *ms) {
  net_layer *L = &nt->L[i];
  vc_dev *d = nt->dev;
  const conv_call c = dev_call(d, L->plan, &L->args, pass, &L->prm, x, dy, y_or_dx, &nt->ws);
  int64_t n[2];
  conv_out_counts(&c, n);
  for (int k = 0; k < 2; k++)
    if (n[k]) dev_poison(d, c.out[k], (size_t)n[k] * vc_dtype_size(nt->dt));
  dev_timer_start(d);
  check(d->ctx, conv_execute(&c));
  *ms += dev_timer_stop(d);
  if (!check_it) return;
  const double t0 = now_ms();
  const double err = dev_reference_error(d, &c, nt->ref_ctx, L->ref_plan, &nt->ref_ws);
  nt->ref_ms += now_ms() - t0;
  if (!L->worst || is_worse(err, L->err)) L->err = err, L->worst = pass_names[pass];
}

static const void *layer_input(const net *nt, int i) { return i ? nt->L[i - 1].a : nt->x; }

static void net_forward(net *nt, bool check_it, double *ms) {
  for (int i = 0; i < nt->n_layers; i++) {
    net_layer *L = &nt->L[i];
    const int64_t n = L->n_out * L->s.co;
    layer_pass(nt, i, VC_PASS_FORWARD, layer_input(nt, i), NULL, L->z, check_it, &ms[i]);
    if (L->a != L->z) dev_map(nt->dev, nt->dt, n, L->a, L->z, NULL, L->s.relu ? op_relu : op_copy);
    if (L->s.skip >= 0) dev_add(nt->dev, nt->dt, n, nt->L[L->s.skip].a, L->a);
  }
}

/* d loss / d (activation of layer j) is layer j+1's backward-data output plus the gradient
 * of every layer that adds j's activation as its skip. */
static void net_backward(net *nt, bool check_it, double *ms) {
  for (int i = nt->n_layers - 1; i >= 0; i--) {
    net_layer *L = &nt->L[i];
    void *dz = L->ga;
    if (L->s.relu) dev_map(nt->dev, nt->dt, L->n_out * L->s.co, dz = nt->dz, L->ga, L->z, op_relu_grad);
    void *dx = i ? nt->L[i - 1].ga : nt->dx;
    layer_pass(nt, i, VC_PASS_BACKWARD_DATA, NULL, dz, dx, check_it, &ms[i]);
    layer_pass(nt, i, VC_PASS_BACKWARD_WEIGHT, layer_input(nt, i), dz, NULL, check_it, &ms[i]);
    for (int k = i; k < nt->n_layers && i > 0; k++)
      if (nt->L[k].s.skip == i - 1) dev_add(nt->dev, nt->dt, L->n_in * L->s.ci, nt->L[k].ga, dx);
  }
}

void net_run(net *nt, int warmup, int reps) {
  const int runs = warmup + reps, n = nt->n_layers;
  double *fwd = xcalloc((size_t)(runs * n), sizeof *fwd), *bwd = xcalloc((size_t)(runs * n), sizeof *bwd);
  for (int r = 0; r < runs; r++) {
    vc_progress("%s: %s %d/%d%s", nt->what, nt->train ? "forward + backward" : "forward", r + 1, runs,
                r < warmup ? " (warm-up)" : r == 0 && nt->check ? " (checked)" : "");
    net_forward(nt, r == 0 && nt->check, fwd + r * n);
    if (nt->train) net_backward(nt, r == 0 && nt->check, bwd + r * n);
  }
  vc_progress_clear();
  double *t = xmalloc((size_t)(reps ? reps : 1) * sizeof *t);
  for (int i = 0; i < n; i++) {
    for (int r = 0; r < reps; r++) t[r] = fwd[(warmup + r) * n + i];
    nt->L[i].fwd_ms = median(t, reps);
    for (int r = 0; r < reps; r++) t[r] = bwd[(warmup + r) * n + i];
    nt->L[i].bwd_ms = median(t, reps);
  }
  free(t), free(fwd), free(bwd);
}

double net_loss(const net *nt) {
  const net_layer *top = &nt->L[nt->n_layers - 1];
  const int64_t n = top->n_out * top->s.co;
  float *y = dev_to_f32(nt->dev, nt->dt, top->z, n), *g = dev_to_f32(nt->dev, nt->dt, top->ga, n);
  double loss = 0;
  for (int64_t i = 0; i < n; i++) loss += (double)y[i] * g[i];
  free(y), free(g);
  return loss;
}

/* ---- the table --------------------------------------------------------------------------- */

static const char *kind_name(vc_conv_kind k) {
  static const char *const names[] = {"submanifold", "sparse", "inverse", "transposed"};
  return names[k];
}

static void print_count(int64_t v, int width) {
  if (v < 0) printf(" %*s", width, "-");
  else printf(" %*lld", width, (long long)v);
}

/* One row; n_in, n_out < 0 print "-", map_ms < 0 prints "shared". */
static void print_row(const net *nt, const char *name, const char *kind, int64_t n_in, int64_t n_out, int64_t pairs,
                      double map_ms, double fwd_ms, double bwd_ms, double flops, double err) {
  printf("%-6s %-11s", name, kind);
  print_count(n_in, 9);
  print_count(n_out, 9);
  print_count(pairs, 10);
  if (map_ms < 0) printf(" %8s", "shared");
  else printf(" %8.3f", map_ms);
  printf(" %9.3f", fwd_ms);
  if (nt->train) printf(" %9.3f", bwd_ms);
  const double ms = fwd_ms + bwd_ms;
  printf(" %9.2f", ms > 0 ? flops / ms * 1e-6 : 0.0);
  if (nt->check) printf(" %12.3e", err);
  printf("\n");
}

net_total net_table(const net *nt) {
  net_total t = {0, 0, 0, 0, 0, 0};
  printf("%-6s %-11s %9s %9s %10s %8s %9s", "layer", "kind", "vox_in", "vox_out", "pairs", "map_ms", "fwd_ms");
  if (nt->train) printf(" %9s", "bwd_ms");
  printf(" %9s", "GFLOP/s");
  if (nt->check) printf(" %12s", "max_rel_err");
  printf("\n");
  const double passes = nt->train ? 3 : 1;
  for (int i = 0; i < nt->n_layers; i++) {
    const net_layer *L = &nt->L[i];
    const double flops = passes * 2.0 * (double)L->pairs * (double)L->s.ci * (double)L->s.co;
    print_row(nt, L->s.name, kind_name(L->s.kind), L->n_in, L->n_out, L->pairs, L->map_ms, L->fwd_ms, L->bwd_ms,
              flops, L->err);
    t.pairs += L->pairs, t.map_ms += L->map_ms > 0 ? L->map_ms : 0, t.fwd_ms += L->fwd_ms;
    t.bwd_ms += L->bwd_ms, t.flops += flops, t.err = worse(t.err, L->err);
  }
  print_row(nt, "total", "", -1, -1, t.pairs, t.map_ms, t.fwd_ms, t.bwd_ms, t.flops, t.err);
  return t;
}

bool net_verdict(const net *nt) {
  const double tol = tolerance(nt->dt, VC_MATH_F32);
  char why[1024] = "";
  size_t len = 0;
  for (int i = 0; i < nt->n_layers; i++) {
    const net_layer *L = &nt->L[i];
    if (L->err <= tol) continue; /* false for NaN as well */
    len += (size_t)snprintf(why + len, sizeof why - len, "%s%s %s rel err %.2e > %.0e", len ? "; " : "", L->s.name,
                            L->worst, L->err, tol);
    if (len >= sizeof why) break;
  }
  if (len == 0) printf("verdict: PASS\n");
  else printf("verdict: FAIL (%s)\n", why);
  return len == 0;
}
