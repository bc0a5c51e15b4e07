/* bench.c — `voxconv bench`: options, the dense ceilings, the rows and the helpers the
 * suites share (see bench.h). */
#include "bench.h"

#include "plot.h"
#include "progress.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_dtype_names[] = {"f32", "f16", "bf16", "tf32", NULL};

vc_dtype bd_storage(bench_dtype t) {
  return t == BD_F16 ? VC_DTYPE_F16 : t == BD_BF16 ? VC_DTYPE_BF16 : VC_DTYPE_F32;
}

vc_math bd_math(bench_dtype t) { return t == BD_TF32 ? VC_MATH_TF32 : VC_MATH_F32; }

vc_conv_args bench_args(int64_t ci, int64_t co, bench_dtype t) {
  vc_conv_args a;
  vc_conv_args_init(&a, ci, co, bd_storage(t));
  a.math = bd_math(t);
  return a;
}

/* ---- options ----------------------------------------------------------------------------- */

enum { SUITE_S, SUITE_L, SUITE_ALL };
static const char *const suite_names[] = {"S", "L", "all", NULL};

static long long o_device = DEVICE_AUTO, o_suite = SUITE_ALL, o_reps = 10, o_warmup = 2, o_channels = 0,
                 o_batch = 4, o_seed = 1, o_no_check = 0, o_tune = 0;
static const char *o_dtype = "", *o_res = "", *o_scale = "", *o_csv = "", *o_plot = "";

cli_option bench_opts[BENCH_N_OPTS] = {
    {"--device", "D", "backend: auto (CUDA when a context can be created, else the CPU), cpu or cuda", device_names,
     0, 0, &o_device, NULL},
    {"--suite", "S", "S (surface shells), L (LiDAR U-Net) or all", suite_names, 0, 0, &o_suite, NULL},
    {"--dtype", "LIST",
     "comma list of f32,f16,bf16,tf32 for every row (default: S f16,bf16 + tf32 at C >= 256; L f16,f32)", NULL, 0,
     0, NULL, &o_dtype},
    {"--res", "LIST", "suite S rows by RES, e.g. 16,32 (default: all 7 on CUDA, RES <= 64 on the CPU)", NULL, 0, 0,
     NULL, &o_res},
    {"--channels", "C", "C of every suite S row; 0: the table's on CUDA, min(table, 64) on the CPU", NULL, 0,
     VC_CHANNELS_MAX, &o_channels, NULL},
    {"--scale", "F", "suite L rays per scan x F, in (0, 4] (default: 1 on CUDA, 0.01 on the CPU)", NULL, 0, 0, NULL,
     &o_scale},
    {"--batch", "B", "suite L scans in the batch", NULL, 1, 256, &o_batch, NULL},
    {"--reps", "N", "timed runs per measurement; the median is reported", NULL, 1, 100000, &o_reps, NULL},
    {"--warmup", "N", "untimed runs before each measurement", NULL, 0, 100000, &o_warmup, NULL},
    {"--seed", "S", "seed of the random tensors and of the LiDAR scenes", NULL, 0, LLONG_MAX, &o_seed, NULL},
    {"--csv", "FILE", "also write the rows to FILE as CSV (header line first)", NULL, 0, 0, NULL, &o_csv},
    {"--plot", "FILE", "also draw the rows into FILE as an SVG bar chart (% of the dense peak)", NULL, 0, 0, NULL,
     &o_plot},
    {"--no-check", NULL, "skip the sampled f64 checks (max_rel_err prints -)", NULL, 0, 0, &o_no_check, NULL},
    {"--tune", NULL, "call vc_conv_tune once per layer shape and pass before timing", NULL, 0, 0, &o_tune, NULL},
};

const char bench_summary[] = "the BENCHMARKS.md suites: dense peak, map build, inference and training rates";

const char bench_about[] =
    "Runs the benchmark of BENCHMARKS.md and prints one row per (suite, case, dtype):\n"
    "  suite, case, dtype, voxels, pairs, map_ms, infer_ms, train_ms, infer_%peak,\n"
    "  train_%peak, max_rel_err_vs_reference\n"
    "then: check (ok, FAIL, - when not checked), plan_MB (memory the plans own on the device,\n"
    "vc_plan_memory_bytes; host memory on the CPU), ws_MB (largest workspace of any pass),\n"
    "extra/out ((plan + workspace) / one output tensor, target <= 1), map_share% (suite L)\n"
    "and the algorithms VC_ALGO_AUTO ran (vc_conv_algo_for; mixed: the layers differ).\n"
    "pairs counts one layer's kernel map (suite S) or the sum over the network (suite L).\n"
    "\n"
    "Dense peak: first, one 8192^3 cublasGemmEx per dtype (f16, bf16 with f32 accumulation,\n"
    "tf32 via CUBLAS_COMPUTE_32F_FAST_TF32, f32 when a row needs it) on random data, median\n"
    "of --reps after --warmup, CUDA events. On the CPU one 2048^3 cblas_sgemm stands in for\n"
    "every dtype. infer_% and train_% are useful rates (2 * pairs * Ci * Co per layer and\n"
    "pass; 1 pass for inference, 3 for training) over the peak of the row's dtype.\n"
    "\n"
    "Suite S: the sphere shell of each RES row, L submanifold 3x3x3 C -> C layers with bias.\n"
    "map_ms is the plan build incl. synchronisation (median of 5); infer_ms the forward of all\n"
    "L layers; train_ms forward + backward-data + backward-weight (with db) of all L layers.\n"
    "Inputs that fit the 50 MB L2 rotate between several random sets.\n"
    "\n"
    "Suite L: --batch synthetic LiDAR scans (~100 k voxels each at 5 cm) through a MinkUNet-\n"
    "style network: stem subm 4->32; encoder stages of a 2x2x2 stride-2 conv and two subm convs\n"
    "(32, 64, 128, 256); decoder stages of an inverse conv (paired with the encoder's) whose\n"
    "output gets the encoder skip added through a 1x1x1 subm projection (the concatenation\n"
    "becomes a sum), then two subm convs (256, 128, 96, 96). All layers have bias; no norm or\n"
    "activation layers (not voxconv's). map_ms builds every plan of the network; train_ms\n"
    "includes all adds; the stem's backward-data (the input needs no gradient) is skipped;\n"
    "map_share% = map_ms / (map_ms + train_ms).\n"
    "\n"
    "Check: per row the first layer (suite S), or the stem and the second stride-2 conv\n"
    "(suite L), runs its three passes once more and ~256 output rows, ~256 input rows, ~16\n"
    "dw rows and db are compared with an f64 host computation over the plan's kernel map.\n"
    "A row above DESIGN.md's tolerance (f32 1e-5, tf32 1e-3, f16/bf16 1e-2) is flagged FAIL\n"
    "and the exit status is 1. Progress goes to stderr when it is a terminal.\n"
    "\n"
    "Plot: --plot FILE.svg draws one group per row (case, and dtype when several ran), an\n"
    "inference and a training bar each in % of the dense peak, and dashed marks at\n"
    "BENCHMARKS.md's targets for suite S rows run as its table defines them (its C; f16,\n"
    "bf16, and tf32 at C >= 256). A plain SVG file: any browser opens it.";

/* Splits a comma list; calls item(text, arg) on each piece; false on an empty piece or when
 * item refuses one. */
static bool for_each_item(const char *list, bool (*item)(const char *s, size_t len, void *arg), void *arg) {
  for (const char *s = list;;) {
    const char *comma = strchr(s, ',');
    const size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (!len || !item(s, len, arg)) return false;
    if (!comma) return true;
    s = comma + 1;
  }
}

static bool dtype_item(const char *s, size_t len, void *arg) {
  for (int t = 0; t < BD_COUNT; t++)
    if (strlen(bench_dtype_names[t]) == len && !strncmp(s, bench_dtype_names[t], len)) {
      *(int *)arg |= BD_BIT(t);
      return true;
    }
  return false;
}

static bool res_item(const char *s, size_t len, void *arg) {
  bench_env *e = arg;
  char *end = NULL;
  const long v = strtol(s, &end, 10);
  if (end != s + len || !bench_s_known_res((int)v) || e->n_res == BENCH_MAX_RES) return false;
  e->res[e->n_res++] = (int)v;
  return true;
}

static bool usage(const char *opt, const char *text, const char *want) {
  fprintf(stderr, "voxconv bench: %s '%s': %s\n", opt, text, want);
  return false;
}

/* The list and decimal options; false after printing the complaint. */
static bool parse_texts(bench_env *e) {
  if (*o_dtype && !for_each_item(o_dtype, dtype_item, &e->dtypes))
    return usage("--dtype", o_dtype, "expected a comma list of f32, f16, bf16, tf32");
  if (*o_res && !for_each_item(o_res, res_item, e))
    return usage("--res", o_res, "expected a comma list of 16, 32, 64, 128, 256, 512, 1024");
  if (!*o_scale) return true; /* the default depends on the device: bench_setup */
  char *end = NULL;
  e->scale = strtod(o_scale, &end);
  if (*end || !(e->scale > 0 && e->scale <= 4)) return usage("--scale", o_scale, "expected a number in (0, 4]");
  return true;
}

/* ---- helpers the suites share ------------------------------------------------------------ */

void bench_progress(const bench_env *e, const char *fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  vc_progress("bench %d/%d: %s", e->rows + 1, e->rows_planned, text);
}

typedef struct net_step {
  vc_dev *dev;
  const bench_net *n;
  bool train;
} net_step;

static double net_step_timed(void *arg) {
  const net_step *st = arg;
  const bench_net *n = st->n;
  *n->set = (*n->set + 1) % n->sets;
  dev_timer_start(st->dev);
  n->forward(n->net);
  if (st->train) n->backward(n->net);
  return dev_timer_stop(st->dev);
}

void bench_time_net(bench_env *e, const bench_net *n, double *infer_ms, double *train_ms) {
  net_step st = {&e->dev, n, false};
  *infer_ms = median_ms(net_step_timed, &st, e->warmup, e->reps);
  st.train = true;
  *train_ms = median_ms(net_step_timed, &st, e->warmup, e->reps);
}

int bench_input_sets(size_t bytes) {
  const double l2 = 50e6;
  if ((double)bytes > l2) return 1;
  const int sets = (int)ceil(2 * l2 / (double)(bytes ? bytes : 1));
  return sets < 2 ? 2 : sets > BENCH_MAX_SETS ? BENCH_MAX_SETS : sets;
}

void bench_tune(bench_env *e, const vc_plan *p, const vc_conv_args *a) {
  if (!e->tune) return;
  for (int pass = 0; pass < 3; pass++)
    check(e->dev.ctx, vc_conv_tune(e->dev.ctx, p, a, (vc_pass)pass, e->dev.stream, NULL));
}

void bench_algos(const bench_env *e, const vc_plan *const *plans, const vc_conv_args *args, int n, char *out,
                 size_t len) {
  static const char *const names[] = {"auto", "reference", "explicit", "implicit", "masked", "grouped"};
  size_t used = 0;
  for (int pass = 0; pass < 3; pass++) {
    const char *name = NULL;
    for (int i = 0; i < n; i++) {
      vc_algo algo = VC_ALGO_AUTO;
      check(e->dev.ctx, vc_conv_algo_for(plans[i], &args[i], (vc_pass)pass, &algo));
      const char *now = (unsigned)algo < sizeof names / sizeof *names ? names[algo] : "?";
      name = !name || !strcmp(name, now) ? now : "mixed";
    }
    used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s", pass ? "/" : "", name ? name : "-");
  }
}

/* ---- rows -------------------------------------------------------------------------------- */

static const char *const columns[] = {"suite", "case", "dtype", "voxels", "pairs", "map_ms", "infer_ms", "train_ms",
                                      "infer_%peak", "train_%peak", "max_rel_err_vs_reference", "check", "plan_MB",
                                      "ws_MB", "extra/out", "map_share%", "algo_fwd/dgrad/wgrad"};
enum { N_COLUMNS = sizeof columns / sizeof *columns, CELL = 64 };
static const int widths[N_COLUMNS] = {-5, -22, -5, 9, 10, 9, 10, 10, 11, 11, 24, -5, 9, 9, 9, 10, -1};

/* A useful rate in % of the row's dense peak. */
static double pct_of_peak(const bench_env *e, const bench_row *r, double flops, double ms) {
  return flops / ms / e->peak[r->dt] * 1e-7;
}

/* Checked and over DESIGN.md's tolerance; a NaN error fails too. */
static bool row_failed(const bench_row *r) {
  return !(r->err < 0) && !(r->err <= tolerance(bd_storage(r->dt), bd_math(r->dt)));
}

/* A row's cells as text: `table` picks the printed form ("-" for absent), else CSV's. */
static void row_cells(const bench_env *e, const bench_row *r, bool table, char cells[N_COLUMNS][CELL]) {
  const double mb = 1.0 / (1 << 20), extra = (double)r->plan_bytes + (double)r->ws_bytes;
  const char *absent = table ? "-" : "";
  snprintf(cells[0], CELL, "%s", r->suite);
  snprintf(cells[1], CELL, "%s", r->name);
  snprintf(cells[2], CELL, "%s", bench_dtype_names[r->dt]);
  snprintf(cells[3], CELL, "%lld", (long long)r->voxels);
  snprintf(cells[4], CELL, "%lld", (long long)r->pairs);
  snprintf(cells[5], CELL, table ? "%.3f" : "%.6g", r->map_ms);
  snprintf(cells[6], CELL, table ? "%.3f" : "%.6g", r->infer_ms);
  snprintf(cells[7], CELL, table ? "%.3f" : "%.6g", r->train_ms);
  snprintf(cells[8], CELL, table ? "%.1f" : "%.4g", pct_of_peak(e, r, r->infer_flops, r->infer_ms));
  snprintf(cells[9], CELL, table ? "%.1f" : "%.4g", pct_of_peak(e, r, r->train_flops, r->train_ms));
  if (r->err < 0) snprintf(cells[10], CELL, "%s", absent);
  else snprintf(cells[10], CELL, "%.3e", r->err);
  snprintf(cells[11], CELL, "%s", r->err < 0 ? "-" : row_failed(r) ? "FAIL" : "ok");
  snprintf(cells[12], CELL, "%.2f", (double)r->plan_bytes * mb);
  snprintf(cells[13], CELL, "%.2f", (double)r->ws_bytes * mb);
  snprintf(cells[14], CELL, "%.3f", extra / (double)r->out_bytes);
  if (r->map_share < 0) snprintf(cells[15], CELL, "%s", absent);
  else snprintf(cells[15], CELL, "%.1f", r->map_share);
  snprintf(cells[16], CELL, "%s", r->algos);
}

static void print_cells(FILE *f, const char *const *cells, bool table) {
  for (int i = 0; i < N_COLUMNS; i++) {
    if (table) fprintf(f, "%s%*s", i ? " " : "", widths[i], cells[i]);
    else fprintf(f, "%s%s", i ? "," : "", cells[i]);
  }
  fprintf(f, "\n");
}

static void print_headers(const bench_env *e) {
  print_cells(stdout, columns, true);
  if (e->csv) print_cells(e->csv, columns, false);
}

void bench_emit(bench_env *e, const bench_row *r) {
  char cells[N_COLUMNS][CELL];
  const char *ptrs[N_COLUMNS];
  for (int i = 0; i < N_COLUMNS; i++) ptrs[i] = cells[i];
  vc_progress_clear();
  if (e->rows++ == 0) print_headers(e);
  row_cells(e, r, true, cells);
  print_cells(stdout, ptrs, true);
  fflush(stdout);
  if (row_failed(r)) e->fails++;
  if (e->plot) {
    e->kept = xrealloc(e->kept, (size_t)e->rows * sizeof *e->kept);
    e->kept[e->rows - 1] = *r;
  }
  if (!e->csv) return;
  row_cells(e, r, false, cells);
  print_cells(e->csv, ptrs, false);
  fflush(e->csv);
}

/* ---- the run ----------------------------------------------------------------------------- */

/* The ceilings the rows need (always f16, bf16 and tf32 on CUDA); the CPU measures one. */
static void measure_peaks(bench_env *e, int need) {
  char label[200];
  if (!e->dev.cuda) {
    bench_progress(e, "dense peak (cblas_sgemm)");
    const double p = dev_dense_peak(&e->dev, VC_DTYPE_F32, VC_MATH_F32, e->warmup, e->reps, label, sizeof label);
    for (int t = 0; t < BD_COUNT; t++) e->peak[t] = p;
    vc_progress_clear();
    printf("dense peak: %.4f TFLOP/s, %s\n", p, label);
    snprintf(e->peak_what, sizeof e->peak_what, "%s", label);
    return;
  }
  need |= BD_BIT(BD_F16) | BD_BIT(BD_BF16) | BD_BIT(BD_TF32);
  snprintf(e->peak_what, sizeof e->peak_what, "one 8192^3 cublasGemmEx per dtype, f32 accumulation");
  for (int t = 0; t < BD_COUNT; t++) {
    if (!(need & BD_BIT(t))) continue;
    bench_progress(e, "dense peak %s", bench_dtype_names[t]);
    const bench_dtype bt = (bench_dtype)t;
    e->peak[t] = dev_dense_peak(&e->dev, bd_storage(bt), bd_math(bt), e->warmup, e->reps, label, sizeof label);
    vc_progress_clear();
    printf("dense peak %-4s: %7.1f TFLOP/s, %s\n", bench_dtype_names[t], e->peak[t], label);
  }
}

static void print_intro(const bench_env *e) {
  printf("voxconv bench %s: device %s\n", vc_version(), e->dev.name);
  printf("timings: median of %d runs after %d warm-up runs, %s; checks %s; tuning %s\n", e->reps, e->warmup,
         e->dev.cuda ? "CUDA events" : "host clock", e->check ? "sampled f64" : "off (--no-check)",
         e->tune ? "vc_conv_tune per layer shape" : "off (VC_ALGO_AUTO as it stands)");
}

/* ---- the plot --------------------------------------------------------------------------- */

/* Title and subtitle: the device, the dtypes in row order, their ceilings and what the
 * bars count. */
static void plot_titles(const bench_env *e, char *title, size_t tlen, char *sub, size_t slen) {
  char names[64] = "", peaks[200] = "";
  size_t nl = 0, pl = 0;
  int seen = 0;
  for (int i = 0; i < e->rows; i++) {
    const bench_dtype t = e->kept[i].dt;
    if (seen & BD_BIT(t)) continue;
    seen |= BD_BIT(t);
    nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", bench_dtype_names[t]);
    if (e->dev.cuda) /* one ceiling per dtype; the CPU has one for all */
      pl += (size_t)snprintf(peaks + pl, sizeof peaks - pl, "%s%s %.4g", pl ? ", " : "", bench_dtype_names[t],
                             e->peak[t]);
  }
  if (!e->dev.cuda) snprintf(peaks, sizeof peaks, "%.4g", e->peak[BD_F32]);
  snprintf(title, tlen, "voxconv bench on %s: useful rate in %% of the dense peak (%s)", e->dev.cuda ? "cuda" : "cpu",
           names);
  snprintf(sub, slen,
           "device %s\ndense peak %s TFLOP/s: %s\nuseful FLOPs 2 x pairs x Ci x Co per layer and pass; training = "
           "forward + backward-data + backward-weight; median of %d runs",
           e->dev.name, peaks, e->peak_what, e->reps);
}

/* Draws the kept rows into e->plot (bench.h's --plot). */
static void write_plot(bench_env *e) {
  const int n = e->rows;
  int dtypes = 0;
  for (int i = 0; i < n; i++) dtypes |= BD_BIT(e->kept[i].dt);
  const bool several = __builtin_popcount((unsigned)dtypes) > 1;
  char(*labels)[96] = xcalloc((size_t)n + 1, sizeof *labels);
  const char **groups = xcalloc((size_t)n + 1, sizeof *groups);
  double *values = xcalloc(2 * (size_t)n + 1, sizeof *values), *targets = xcalloc(2 * (size_t)n + 1, sizeof *targets);
  for (int i = 0; i < n; i++) {
    const bench_row *r = &e->kept[i];
    snprintf(labels[i], sizeof labels[i], "%s%s%s%s", r->name, several ? "\n" : "", several ? bench_dtype_names[r->dt] : "",
             row_failed(r) ? " FAIL" : "");
    groups[i] = labels[i];
    values[2 * i] = pct_of_peak(e, r, r->infer_flops, r->infer_ms);
    values[2 * i + 1] = pct_of_peak(e, r, r->train_flops, r->train_ms);
    targets[2 * i] = r->infer_target, targets[2 * i + 1] = r->train_target;
  }
  char title[200], sub[800], err[200];
  plot_titles(e, title, sizeof title, sub, sizeof sub);
  static const char *const series[] = {"inference (forward)", "training (forward + backward)"};
  const vc_bar_chart chart = {title, sub, "useful rate, % of the dense peak", n, 2, groups, series, values, targets,
                              "target (BENCHMARKS.md, for an H100)"};
  const char *why = NULL;
  if (n == 0) why = "no rows to draw";
  else if (vc_bar_chart_svg(e->plot, &chart, err, sizeof err)) why = err;
  if (fclose(e->plot) && !why) why = "write failed"; /* closed on every path */
  if (why) {
    fprintf(stderr, "voxconv bench: --plot '%s': %s\n", o_plot, why);
    e->fails++;
  }
  e->plot = NULL;
  free(labels), free(groups), free(values), free(targets);
}

/* Options into e; false on a usage error (already printed). Opens the device and the CSV. */
static bool bench_setup(bench_env *e) {
  memset(e, 0, sizeof *e);
  e->reps = (int)o_reps, e->warmup = (int)o_warmup, e->check = !o_no_check, e->tune = o_tune != 0;
  e->channels = o_channels, e->batch = (int)o_batch, e->seed = (uint64_t)o_seed;
  if (!parse_texts(e)) return false;
  if (*o_csv && !(e->csv = fopen(o_csv, "w"))) {
    fprintf(stderr, "voxconv bench: --csv '%s': cannot open it for writing\n", o_csv);
    exit(1);
  }
  if (*o_plot && !(e->plot = fopen(o_plot, "w"))) {
    fprintf(stderr, "voxconv bench: --plot '%s': cannot open it for writing\n", o_plot);
    exit(1);
  }
  dev_open(&e->dev, (int)o_device);
  if (!*o_scale) e->scale = e->dev.cuda ? 1.0 : 0.01;
  return true;
}

int bench_main(void) {
  bench_env e;
  if (!bench_setup(&e)) return EXIT_USAGE;
  rng_seed(e.seed);
  print_intro(&e);
  const bool s = o_suite != SUITE_L, l = o_suite != SUITE_S;
  measure_peaks(&e, (s ? bench_s_dtypes(&e, &e.rows_planned) : 0) | (l ? bench_l_dtypes(&e, &e.rows_planned) : 0));
  printf("\n");
  if (s) bench_suite_s(&e);
  if (l) bench_suite_l(&e);
  vc_progress_clear();
  printf("\n%d rows, %d over tolerance%s\n", e.rows, e.fails, e.fails ? ": FAIL" : "");
  if (e.csv && fclose(e.csv)) fprintf(stderr, "voxconv bench: --csv '%s': write failed\n", o_csv), e.fails++;
  if (e.plot) write_plot(&e);
  free(e.kept);
  dev_close(&e.dev);
  return e.fails ? 1 : 0;
}
