/* voxconv.c — the `voxconv` command line.
 *
 *   voxconv demo       a small sparse U-Net (net.h), forward and backward; every pass is
 *                      checked against VC_ALGO_REFERENCE on a CPU context
 *   voxconv run        a network (net.h) on the user's PLY files, voxelised and batched
 *                      (run.c): neighbour statistics, per-layer times and useful rates
 *   voxconv bench      the suites of BENCHMARKS.md (bench*.c): dense peak, map build,
 *                      inference and training rates, sampled f64 checks
 *   voxconv bench-cpu  one suite-S submanifold layer on the explicit CPU path, measured
 *                      against plain OpenBLAS SGEMM of the same FLOPs
 *   voxconv version
 *
 * Exit status: 0 success, 1 a failed check or a library error, 2 a usage error.
 * Library errors stop the tool at once (`check`): it is a one-shot program, and the
 * library's sentence already says what went wrong. Helpers shared by the commands live in
 * common.h (host side), device.h (device buffers, timers, the dense ceiling, one layer) and
 * net.h (the networks demo and run execute).
 */
#include "bench.h"
#include "cli.h"
#include "common.h"
#include "device.h"
#include "net.h"
#include "run.h"
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

/* ---- one execute call, timed ------------------------------------------------------------- */

/* A timed_body: one execute call; its workspace reserved beforehand (ws_reserve). */
static double conv_timed(void *arg) {
  const conv_call *c = arg;
  double t0 = now_ms();
  check(c->ctx, conv_execute(c));
  return now_ms() - t0;
}

/* ---- command-line options ---------------------------------------------------------------- */

enum { PARSE_OK, PARSE_HELP, PARSE_ERROR };

static void print_command_help(const cli_command *cmd) {
  printf("usage: voxconv %s%s%s%s\n\n%s\n", cmd->name, cmd->n_opts ? " [options]" : "", cmd->positional ? " " : "",
         cmd->positional ? cmd->positional : "", cmd->about);
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

/* argv[0] is the command name. Accepts `--name value` and `--name=value`; other arguments
 * (and all after `--`) are positional when the command takes them. */
static int parse_options(const cli_command *cmd, int argc, char **argv) {
  if (cmd->args) cmd->args->v = xcalloc((size_t)argc, sizeof *cmd->args->v), cmd->args->n = 0;
  bool options = true;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *eq = strchr(arg, '=');
    if (options && !strcmp(arg, "--")) {
      options = false;
      continue;
    }
    if (cmd->positional && (!options || arg[0] != '-' || !arg[1])) {
      cmd->args->v[cmd->args->n++] = arg;
      continue;
    }
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

/* ---- the demo: a sparse U-Net (net.h) ----------------------------------------------------- */

enum { DEMO_DEPTH = 2, DEMO_WIDTH = 16 };

/* A sphere shell in batch 0 and a torus in batch 1. */
static int32_t *demo_input(int res, int64_t *n) {
  static const vc_shape_fn shapes[2] = {vc_shape_shell, vc_shape_torus};
  int32_t *coords = vc_shapes_batch(shapes, 2, res, n);
  if (!coords) fprintf(stderr, "voxconv: demo shapes at res %d: out of host memory\n", res), exit(1);
  int64_t n0 = 0;
  while (n0 < *n && coords[4 * n0] == 0) n0++;
  printf("input: %lld voxels (sphere shell %lld in batch 0, torus %lld in batch 1), %d channels\n", (long long)*n,
         (long long)n0, (long long)(*n - n0), NET_UNET_IN_CHANNELS);
  return coords;
}

static int demo_run(long long res, vc_dtype dt, long long seed, long long device) {
  rng_seed((uint64_t)seed);
  printf("voxconv demo: sparse U-Net, res %lld, dtype %s, seed %lld\n", res, dtype_names[dt], seed);
  vc_dev dev;
  dev_open(&dev, (int)device);
  printf("device: %s\n", dev.name);
  printf("reference: VC_ALGO_REFERENCE on its own CPU context, tolerance %.0e (DESIGN.md section 6)\n",
         tolerance(dt, VC_MATH_F32));
  int64_t n = 0;
  int32_t *coords = demo_input((int)res, &n);
  net_spec specs[NET_MAX_LAYERS];
  char err[200];
  const int layers = net_specs(NET_UNET, DEMO_DEPTH, DEMO_WIDTH, specs, err, sizeof err);
  net nt;
  net_create(&nt, &dev, dt, specs, layers, coords, n, true, true, "demo");
  free(coords);
  net_run(&nt, 0, 1);
  printf("\n");
  const net_total t = net_table(&nt);
  printf("\nloss sum(y*g) = %.6g; run passes %.3f ms (VC_ALGO_AUTO), reference checks %.1f ms\n", net_loss(&nt),
         t.fwd_ms + t.bwd_ms, nt.ref_ms);
  const bool pass = net_verdict(&nt);
  net_free(&nt);
  dev_close(&dev);
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
  const vc_dev *dev;
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
  return conv_call_for(bc->dev->ctx, bc->plan, &args, pass, &t, &bc->ws, NULL);
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
    ws_reserve(&c);
    const double ms = median_ms(conv_timed, &c, 1, reps);
    const double rate = 2.0 * (double)pairs * (double)bc->c * (double)bc->c / ms * 1e-6;
    const double err = dev_reference_error(bc->dev, &c, bc->dev->ctx, bc->plan, &bc->ref_ws);
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
  bcpu_case bc = {.dev = &dev, .dt = dt, .c = c};
  plan_build pb = {&dev, {0}, NULL, 0, NULL, NULL};
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
     demo_opts, (int)(sizeof demo_opts / sizeof *demo_opts), demo_main, NULL, NULL},
    {"bench-cpu", "one submanifold layer on the explicit CPU path vs plain OpenBLAS SGEMM",
     "Benchmarks one submanifold 3x3x3 C -> C layer with bias on the suite S sphere shell\n"
     "(BENCHMARKS.md) on the CPU backend with VC_ALGO_EXPLICIT: kernel-map build time, and for\n"
     "forward, backward-data and backward-weight the median time, the useful rate\n"
     "2*pairs*C*C/t and its share of one plain cblas_sgemm of the same FLOPs (M = pairs,\n"
     "K = N = C). Each pass is also checked once against VC_ALGO_REFERENCE; exit status 1 when\n"
     "one disagrees.",
     bcpu_opts, (int)(sizeof bcpu_opts / sizeof *bcpu_opts), bcpu_main, NULL, NULL},
    {"run", run_summary, run_about, run_opts, RUN_N_OPTS, run_main, "FILE...", &run_files},
    {"bench", bench_summary, bench_about, bench_opts, BENCH_N_OPTS, bench_main, NULL, NULL},
    {"version", "print the library version", "Prints the voxconv library version.", NULL, 0, version_main, NULL,
     NULL},
};
enum { N_COMMANDS = sizeof commands / sizeof *commands };

static void print_main_help(FILE *f) {
  fprintf(f, "usage: voxconv COMMAND [options]\n\nSparse 3D convolution: demo, your data, benchmark and checks.\n\n"
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
