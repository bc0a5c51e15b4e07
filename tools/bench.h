/* bench.h — `voxconv bench`: the suites of BENCHMARKS.md (see bench_about in bench.c).
 *
 *   bench.c        options, the dense ceilings, the rows (table and CSV), shared helpers
 *   bench_s.c      suite S: stacked submanifold layers on sphere shells
 *   bench_l.c      suite L: a MinkUNet-style network on synthetic LiDAR scans (lidar.h)
 *   bench_check.c  the sampled f64 check of one layer's three passes
 *
 * All tensors, coordinates and kernel-map copies live on the bench's device (device.h):
 * device memory on CUDA, host memory on the CPU.
 */
#ifndef VC_TOOLS_BENCH_H
#define VC_TOOLS_BENCH_H

#include "cli.h"
#include "common.h"
#include "device.h"

#include <stdio.h>

/* ---- the command, for voxconv.c's table -------------------------------------------------- */

enum { BENCH_N_OPTS = 14 };
extern cli_option bench_opts[BENCH_N_OPTS];
extern const char bench_summary[], bench_about[];
int bench_main(void);

/* ---- what the bench files share ---------------------------------------------------------- */

/* A row's type: storage dtype plus math (tf32 is f32 storage with VC_MATH_TF32). */
typedef enum bench_dtype { BD_F32, BD_F16, BD_BF16, BD_TF32, BD_COUNT } bench_dtype;
extern const char *const bench_dtype_names[]; /* "f32", "f16", "bf16", "tf32", NULL */
#define BD_BIT(t) (1 << (t))

vc_dtype bd_storage(bench_dtype t);
vc_math bd_math(bench_dtype t);
vc_conv_args bench_args(int64_t ci, int64_t co, bench_dtype t); /* VC_ALGO_AUTO */

enum { BENCH_MAX_RES = 16 };

typedef struct bench_env {
  vc_dev dev;
  int reps, warmup;
  bool check, tune;
  int dtypes;                 /* BD_BIT mask asked with --dtype; 0: each suite's default */
  int res[BENCH_MAX_RES], n_res; /* --res; n_res 0: the default rows */
  int64_t channels;           /* --channels; 0: the default */
  double scale;               /* suite L scan scale */
  int batch;                  /* suite L scans */
  uint64_t seed;
  double peak[BD_COUNT];      /* dense ceiling in TFLOP/s; 0: not measured */
  char peak_what[200];        /* how the ceilings were measured */
  FILE *csv;                  /* NULL without --csv */
  FILE *plot;                 /* NULL without --plot */
  struct bench_row *kept;     /* the emitted rows, for the plot */
  int rows, fails;
  int rows_planned;           /* what the suites will emit, for the progress line */
} bench_env;

/* One printed row. Negative values of the optional fields print "-" (blank in the CSV). */
typedef struct bench_row {
  const char *suite;
  char name[48];
  bench_dtype dt;
  int64_t voxels, pairs;
  double map_ms, infer_ms, train_ms;
  double infer_flops, train_flops; /* useful FLOPs of one inference / one training step */
  double err;                      /* max_rel_err_vs_reference; < 0: not checked */
  int64_t plan_bytes, ws_bytes;    /* memory the plans own (vc_plan_memory_bytes), largest workspace */
  int64_t out_bytes;               /* one output tensor: the target for plan + workspace */
  double map_share;                /* map_ms / (map_ms + train_ms) in %, suite L; < 0: none */
  char algos[48];                  /* bench_algos */
  double infer_target, train_target; /* BENCHMARKS.md's targets in % of the peak; <= 0: none */
} bench_row;

/* Prints r (and writes its CSV line, and keeps it for the plot), judging its error against
 * DESIGN.md's tolerance: a row over it is flagged FAIL and counted in e->fails. */
void bench_emit(bench_env *e, const bench_row *r);

/* The progress line (progress.h) of the row being measured: "bench 3/7: " and the text. */
void bench_progress(const bench_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A network as the timing sees it: its passes, and the input set they read, which each
 * timed run moves on by one. */
typedef struct bench_net {
  void *net;
  void (*forward)(void *net);
  void (*backward)(void *net); /* after forward: backward-data and backward-weight */
  int *set, sets;
} bench_net;

/* Median times of one inference (forward) and one training step (forward + backward),
 * each after e->warmup untimed runs. */
void bench_time_net(bench_env *e, const bench_net *n, double *infer_ms, double *train_ms);

/* How many input sets to rotate through: enough that an input of `bytes` is not still in
 * the H100's 50 MB L2 from the previous run (at least 2 when it fits there, else 1), at
 * most BENCH_MAX_SETS. */
enum { BENCH_MAX_SETS = 16 };
int bench_input_sets(size_t bytes);

/* With --tune: vc_conv_tune for the three passes of this layer shape (before any timing). */
void bench_tune(bench_env *e, const vc_plan *p, const vc_conv_args *a);

/* "forward/backward-data/backward-weight" algorithms VC_ALGO_AUTO runs for these n layers
 * (vc_conv_algo_for), a pass's name being "mixed" when the layers differ. */
void bench_algos(const bench_env *e, const vc_plan *const *plans, const vc_conv_args *args, int n, char *out,
                 size_t len);

/* Runs forward, backward-data and backward-weight (with db) of one layer from x, w, b
 * (device memory; b may be NULL) and a random dy, then compares sampled outputs with an
 * f64 host computation over the plan's kernel map: ~256 output rows of y, ~256 input rows
 * of dx, ~16 (output channel, offset) rows of dw, and all of db. Returns the largest
 * ||out - ref|| / ||ref|| of the three passes. ws must fit the passes (conv_ws_most). */
double bench_check_layer(bench_env *e, const vc_plan *p, const vc_conv_args *a, const void *x, const void *w,
                         const void *b, workspace *ws);

/* The suites: each emits its rows. The *_dtypes functions say which dtypes they will run
 * (a BD_BIT mask), so the ceilings can be measured first, and add the rows they will emit
 * to *rows. */
bool bench_s_known_res(int res);
int bench_s_dtypes(const bench_env *e, int *rows);
void bench_suite_s(bench_env *e);
int bench_l_dtypes(const bench_env *e, int *rows);
void bench_suite_l(bench_env *e);

#endif
