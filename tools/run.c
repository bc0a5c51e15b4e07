/* run.c — `voxconv run FILE...` (see run.h): read, voxelise, batch, run, report. */
#include "run.h"

#include "common.h"
#include "device.h"
#include "net.h"
#include "ply.h"
#include "progress.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RUN_MAX_RESOLUTION = 65536 }; /* the coordinate range's width is twice that */

/* ---- options ----------------------------------------------------------------------------- */

static long long o_net = NET_UNET, o_channels = 32, o_layers = 2, o_dtype = VC_DTYPE_F32, o_device = DEVICE_AUTO,
                 o_train = 0, o_reps = 3, o_warmup = 1, o_seed = 1, o_check = 0;
static const char *o_voxel_size = "", *o_resolution = "", *o_save = "";

cli_args run_files;

cli_option run_opts[RUN_N_OPTS] = {
    {"--voxel-size", "S", "voxel edge in the files' units (give this or --resolution)", NULL, 0, 0, NULL,
     &o_voxel_size},
    {"--resolution", "R", "voxels along the largest extent of any file (one voxel size for all)", NULL, 0, 0, NULL,
     &o_resolution},
    {"--net", "N", "unet (a sparse U-Net) or stack (submanifold layers)", net_kind_names, 0, 0, &o_net, NULL},
    {"--channels", "C", "unet: stem width, doubled per level; stack: width of every layer", NULL, 1, VC_CHANNELS_MAX,
     &o_channels, NULL},
    {"--layers", "L", "unet: levels down and up (2: the demo's depth); stack: layers", NULL, 1, NET_MAX_LAYERS,
     &o_layers, NULL},
    {"--dtype", "T", "storage type of features, weights and gradients: f32, f16 or bf16", dtype_names, 0, 0,
     &o_dtype, NULL},
    {"--device", "D", "backend: auto (CUDA if it works, else CPU), cpu or cuda", device_names, 0, 0, &o_device,
     NULL},
    {"--train", NULL, "forward and backward (backward-data and backward-weight) instead of forward only", NULL, 0, 0,
     &o_train, NULL},
    {"--reps", "N", "timed runs; per layer and pass the median is reported", NULL, 1, 100000, &o_reps, NULL},
    {"--warmup", "N", "untimed runs before them", NULL, 0, 100000, &o_warmup, NULL},
    {"--seed", "S", "seed of the random features, weights and output gradient", NULL, 0, LLONG_MAX, &o_seed, NULL},
    {"--check", NULL, "check every pass of the first run against VC_ALGO_REFERENCE on a CPU context", NULL, 0, 0,
     &o_check, NULL},
    {"--save-voxels", "FILE", "write the voxel centres (and batch index) to FILE as a binary PLY", NULL, 0, 0, NULL,
     &o_save},
};

const char run_summary[] = "a voxel network on PLY files: voxelise, batch, time every layer";

const char run_about[] =
    "Reads PLY files (ascii or binary, any vertex coordinate type, optional faces), voxelises\n"
    "them at one voxel size (--voxel-size, or --resolution voxels along the largest extent of\n"
    "any file; meshes on their whole surface, point clouds at their points) and batches them:\n"
    "file i is batch item i. Then runs a network on the sites with random input features in\n"
    "[-1, 1) (never zeros): --net unet, a sparse U-Net (a submanifold stem from 4 channels,\n"
    "--layers levels of a 2x2x2 stride-2 conv and a submanifold conv, inverse convs back up\n"
    "with skip additions, a head; ReLUs between), or --net stack, --layers submanifold 3x3x3\n"
    "C -> C layers (suite S of BENCHMARKS.md). --train adds the backward passes.\n"
    "\n"
    "Prints per file the vertices, triangles, voxels and grid size; the neighbour statistics\n"
    "of the input sites (pairs of the 3x3x3 submanifold map, neighbours per voxel, the share\n"
    "of voxels with a neighbour at each of the 27 offsets); per layer the sites, pairs, map\n"
    "build, median pass times and useful GFLOP/s (2 * pairs * Ci * Co per pass over the time);\n"
    "and the totals with the voxels per second. --check runs every pass once more with\n"
    "VC_ALGO_REFERENCE (exit status 1 over DESIGN.md's tolerance). --save-voxels writes the\n"
    "voxel centres, which voxelise back to the same sites at the same voxel size.\n"
    "Progress goes to stderr when it is a terminal.";

/* One line on stderr; returns EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "voxconv run: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return EXIT_USAGE;
}

/* The voxel size options: exactly one, and a positive size or resolution. */
static int parse_size(double *size, int *resolution) {
  *size = 0, *resolution = 0;
  if (*o_voxel_size && *o_resolution) return usage("--voxel-size and --resolution exclude each other; give one");
  if (!*o_voxel_size && !*o_resolution)
    return usage("no voxel size: give --voxel-size S or --resolution R");
  char *end = NULL, err[200];
  if (*o_voxel_size) {
    *size = strtod(o_voxel_size, &end);
    if (end == o_voxel_size || *end) return usage("--voxel-size '%s': expected a number", o_voxel_size);
    if (vc_voxel_size_check(*size, err, sizeof err)) return usage("--voxel-size '%s': %s", o_voxel_size, err);
    return 0;
  }
  const long r = strtol(o_resolution, &end, 10);
  if (*end || r < 1 || r > RUN_MAX_RESOLUTION)
    return usage("--resolution '%s': expected an integer in [1, %d]", o_resolution, RUN_MAX_RESOLUTION);
  *resolution = (int)r;
  return 0;
}

/* ---- the input --------------------------------------------------------------------------- */

typedef struct input {
  int n_files;
  vc_ply *ply;
  double size;      /* voxel edge */
  int32_t *coords;  /* [n, 4], batch item i = file i, ascending */
  int64_t n;
  int64_t *voxels;  /* per file */
} input;

/* Stops with "voxconv run: FILE: reason". */
static void file_error(const char *path, const char *err) {
  vc_progress_clear();
  fprintf(stderr, "voxconv run: %s: %s\n", path, err);
  exit(1);
}

static void read_files(input *in) {
  char err[256];
  in->ply = xcalloc((size_t)in->n_files, sizeof *in->ply);
  for (int i = 0; i < in->n_files; i++) {
    vc_progress("run: reading %s (%d/%d)", run_files.v[i], i + 1, in->n_files);
    if (vc_ply_read(run_files.v[i], &in->ply[i], err, sizeof err)) file_error(run_files.v[i], err);
  }
}

/* One voxel size for the batch: the given one, or the largest that --resolution asks of any
 * file, so that every file fits R voxels. */
static void choose_size(input *in, int resolution) {
  char err[256];
  for (int i = 0; i < in->n_files && resolution; i++) {
    double s = 0;
    if (vc_voxel_size_for(&in->ply[i], resolution, &s, err, sizeof err)) file_error(run_files.v[i], err);
    in->size = s > in->size ? s : in->size;
  }
}

static void voxelize_files(input *in) {
  char err[256];
  in->voxels = xcalloc((size_t)in->n_files, sizeof *in->voxels);
  for (int i = 0; i < in->n_files; i++) {
    vc_progress("run: voxelising %s (%d/%d)", run_files.v[i], i + 1, in->n_files);
    int32_t *c = NULL;
    int64_t n = 0;
    if (vc_voxelize(&in->ply[i], in->size, i, &c, &n, err, sizeof err)) file_error(run_files.v[i], err);
    in->coords = xrealloc(in->coords, (size_t)(in->n + n) * 4 * sizeof *in->coords);
    memcpy(in->coords + 4 * in->n, c, (size_t)n * 4 * sizeof *c);
    in->n += n, in->voxels[i] = n;
    free(c);
  }
  vc_progress_clear();
}

/* Per file: vertices, triangles, voxels and the extent of its sites in voxels. */
static void print_files(const input *in, int resolution) {
  if (resolution)
    printf("voxel size %.9g: the largest extent of %s over %d voxels\n", in->size,
           in->n_files > 1 ? "any file" : "the file", resolution);
  else printf("voxel size %.9g (--voxel-size)\n", in->size);
  printf("%-5s %-28s %10s %10s %10s  %s\n", "batch", "file", "vertices", "triangles", "voxels", "grid (voxels)");
  const int32_t *c = in->coords;
  for (int i = 0; i < in->n_files; i++) {
    int32_t lo[3], hi[3];
    for (int a = 0; a < 3; a++) lo[a] = hi[a] = c[1 + a];
    for (int64_t v = 0; v < in->voxels[i]; v++)
      for (int a = 0; a < 3; a++) {
        const int32_t x = c[4 * v + 1 + a];
        lo[a] = x < lo[a] ? x : lo[a], hi[a] = x > hi[a] ? x : hi[a];
      }
    printf("%-5d %-28s %10lld %10lld %10lld  %d x %d x %d\n", i, run_files.v[i], (long long)in->ply[i].n_vertices,
           (long long)in->ply[i].n_tris, (long long)in->voxels[i], hi[0] - lo[0] + 1, hi[1] - lo[1] + 1,
           hi[2] - lo[2] + 1);
    c += 4 * in->voxels[i];
  }
}

static void input_free(input *in) {
  for (int i = 0; i < in->n_files; i++) vc_ply_free(&in->ply[i]);
  free(in->ply), free(in->coords), free(in->voxels);
}

/* ---- neighbour statistics ---------------------------------------------------------------- */

/* From the first layer's map, a submanifold 3x3x3 one over the input sites: pairs,
 * neighbours per voxel (itself included), and per offset the share of voxels that have a
 * neighbour there, as three dx rows of three dy blocks of three dz values. */
static void print_neighbours(const vc_dev *d, const vc_plan *p) {
  int64_t *off = NULL;
  int32_t *out = NULL;
  dev_kernel_map(d, p, &off, NULL, &out);
  const int64_t n = vc_plan_out_count(p), pairs = vc_plan_pair_count(p);
  int32_t *count = xcalloc((size_t)n, sizeof *count);
  for (int64_t k = 0; k < pairs; k++) count[out[k]]++;
  int32_t lo = INT32_MAX, hi = 0;
  for (int64_t v = 0; v < n; v++) lo = count[v] < lo ? count[v] : lo, hi = count[v] > hi ? count[v] : hi;
  printf("neighbours (the 3x3x3 submanifold map of the input voxels): %lld pairs; per voxel, itself included,\n"
         "  mean %.2f, min %d, max %d of 27\n",
         (long long)pairs, (double)pairs / (double)n, lo, hi);
  printf("  voxels with a neighbour at offset (dx, dy, dz), %%; dz = -1, 0, +1 in each block:\n");
  printf("%7s %18s %18s %18s\n", "", "dy = -1", "dy = 0", "dy = +1");
  static const char *const steps[] = {"-1", " 0", "+1"};
  for (int dx = 0; dx < 3; dx++) {
    printf("  dx %s", steps[dx]);
    for (int dy = 0; dy < 3; dy++) {
      printf(" ");
      for (int dz = 0; dz < 3; dz++) {
        const int r = (dx * 3 + dy) * 3 + dz;
        printf(" %5.1f", 100.0 * (double)(off[r + 1] - off[r]) / (double)n);
      }
    }
    printf("\n");
  }
  free(off), free(out), free(count);
}

/* ---- the run ----------------------------------------------------------------------------- */

/* The totals: pass times per batch, voxels per second and useful rates. */
static void print_totals(const net *nt, const net_total *t, int64_t voxels) {
  const double passes = nt->train ? 3 : 1, fwd_flops = t->flops / passes;
  printf("\ninference:     %10.3f ms per batch, %8.3f M voxels/s, %9.2f GFLOP/s useful (forward)\n", t->fwd_ms,
         (double)voxels / t->fwd_ms * 1e-3, fwd_flops / t->fwd_ms * 1e-6);
  if (nt->train) {
    const double ms = t->fwd_ms + t->bwd_ms;
    printf("training step: %10.3f ms per batch, %8.3f M voxels/s, %9.2f GFLOP/s useful (forward + backward)\n", ms,
           (double)voxels / ms * 1e-3, t->flops / ms * 1e-6);
  }
  printf("kernel maps:   %10.3f ms (built once per set of sites and geometry, shared by every pass)\n", t->map_ms);
}

static void print_intro(const net *nt, int reps, int warmup) {
  if (o_net == NET_UNET)
    printf("network: unet of depth %lld and width %lld: %d layers, %lld -> %lld channels\n", o_layers, o_channels,
           nt->n_layers, (long long)nt->L[0].s.ci, (long long)nt->L[nt->n_layers - 1].s.co);
  else printf("network: stack of %d submanifold 3x3x3 layers, %lld channels\n", nt->n_layers, o_channels);
  printf("dtype %s, %s; times are medians of %d runs after %d warm-up run%s\n", dtype_names[nt->dt],
         nt->train ? "training (forward + backward)" : "inference (forward)", reps, warmup, warmup == 1 ? "" : "s");
}

int run_main(void) {
  double size = 0;
  int resolution = 0;
  if (run_files.n == 0) return usage("no input file (usage: voxconv run [options] FILE...)");
  if (run_files.n > VC_BATCH_MAX) return usage("%d files: a batch holds at most %d", run_files.n, VC_BATCH_MAX);
  if (parse_size(&size, &resolution)) return EXIT_USAGE;
  net_spec specs[NET_MAX_LAYERS];
  char err[200];
  const int layers = net_specs((net_kind)o_net, (int)o_layers, o_channels, specs, err, sizeof err);
  if (!layers) return usage("--net %s --layers %lld --channels %lld: %s", net_kind_names[o_net], o_layers, o_channels, err);

  vc_dev dev;
  dev_open(&dev, (int)o_device);
  printf("voxconv run %s: device %s\n", vc_version(), dev.name);
  input in = {.n_files = run_files.n, .size = size};
  read_files(&in);
  choose_size(&in, resolution);
  voxelize_files(&in);
  print_files(&in, resolution);
  if (*o_save) {
    if (vc_ply_write_voxels(o_save, in.coords, in.n, in.size, err, sizeof err)) file_error(o_save, err);
    printf("saved %lld voxel centres to %s\n", (long long)in.n, o_save);
  }
  printf("input: %lld voxels in %d batch item%s, %lld random feature channels in [-1, 1)\n", (long long)in.n,
         in.n_files, in.n_files > 1 ? "s" : "", (long long)specs[0].ci);

  rng_seed((uint64_t)o_seed);
  net nt;
  net_create(&nt, &dev, (vc_dtype)o_dtype, specs, layers, in.coords, in.n, o_train != 0, o_check != 0, "run");
  print_neighbours(&dev, nt.L[0].plan);
  print_intro(&nt, (int)o_reps, (int)o_warmup);
  net_run(&nt, (int)o_warmup, (int)o_reps);
  printf("\n");
  const net_total t = net_table(&nt);
  print_totals(&nt, &t, in.n);
  bool pass = true;
  if (nt.check) {
    printf("reference checks: %.1f ms (VC_ALGO_REFERENCE, tolerance %.0e)\n", nt.ref_ms, tolerance(nt.dt, VC_MATH_F32));
    pass = net_verdict(&nt);
  }
  net_free(&nt);
  input_free(&in);
  dev_close(&dev);
  return pass ? 0 : 1;
}
