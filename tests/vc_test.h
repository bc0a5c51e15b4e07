/* vc_test.h — the tiny test harness: CHECK records a failure and goes on; each test file
 * exports a NULL-terminated table of cases that main.c runs (tests/gpu/test_gpu.c has its
 * own table and main, on the same runner). */
#ifndef VC_TEST_H
#define VC_TEST_H

#include "voxconv.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct vc_test_case {
  const char *name;
  void (*fn)(void);
} vc_test_case;

/* Records a failure of the running case; prints the first 8 of a case, then one line that
 * more were not shown. */
void vc_test_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Failures recorded since the last reset (the runner resets before each case). */
int vc_test_failures(void);
void vc_test_reset_failures(void);

/* VC_TEST_SEED, or the time when it is unset. */
uint64_t vc_test_seed_from_env(void);
/* Milliseconds of a monotonic clock. */
double vc_test_now_ms(void);
/* $TMPDIR, else /tmp. */
const char *vc_test_tmp_dir(void);
/* A new directory $TMPDIR/<prefix>.XXXXXX into buf; false when it cannot be made. */
bool vc_test_make_temp_dir(char *buf, size_t len, const char *prefix);
/* Removes a flat directory such as a tune cache: its files, then the directory. */
void vc_test_remove_dir(const char *dir);

typedef struct vc_test_runner {
  uint64_t seed;                       /* the run's VC_TEST_SEED */
  const char *filter;                  /* runs only the names that contain it; NULL runs all */
  bool (*skip)(const vc_test_case *t); /* true leaves a case out (vc_gpu_tests --small); may be NULL */
  bool seed_by_index;                  /* a case's seed from its index in its table (vc_gpu_tests),
                                          not from the number of cases run before it (vc_tests) */
  bool wall_clock;                     /* times in wall ms (GPU work), not the process's CPU ms */
  int name_width;                      /* of the name column */
  int passed, failed;                  /* totals so far */
} vc_test_runner;

/* Runs the cases of a NULL-terminated table that filter and skip leave in, each on its own
 * seed of the random data; prints "ok" or "FAIL", the name and the time; adds to the totals. */
void vc_test_run_cases(vc_test_runner *r, const vc_test_case *cases);
/* Prints "N passed, N failed" and returns the exit status: 1 when any failed. */
int vc_test_summary(const vc_test_runner *r);

/* CHECK(cond, "printf-style context", ...): on failure prints file:line, the expression
 * and the context, and marks the running test failed. */
#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    if (!(cond)) vc_test_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                     \
  } while (0)

/* Status and message check for the bad-input tests: the call must return `want` and the
 * context's last error must contain `needle`. */
#define CHECK_STATUS(ctx, call, want, needle)                                              \
  do {                                                                                     \
    vc_status st_ = (call);                                                                \
    CHECK(st_ == (want), "%s returned %s, expected %s (last error: %s)", #call,            \
          vc_status_string(st_), vc_status_string(want), vc_last_error(ctx));              \
    CHECK(vc_test_contains(vc_last_error(ctx), needle), "%s: message '%s' lacks '%s'",     \
          #call, vc_last_error(ctx), needle);                                              \
  } while (0)

#define CHECK_OK(ctx, call)                                                                \
  do {                                                                                     \
    vc_status st_ = (call);                                                                \
    CHECK(st_ == VC_OK, "%s returned %s: %s", #call, vc_status_string(st_),                \
          vc_last_error(ctx));                                                             \
  } while (0)

bool vc_test_contains(const char *hay, const char *needle);
/* Overwrites the error slot of ctx (or the thread's slot when ctx is NULL) with a message no
 * check looks for, so a stale sentence from an earlier call can never satisfy the next check. */
void vc_test_scrub(vc_context *ctx);
/* Runs check(arg) in a child process and returns its verdict, so that undefined behaviour
 * caught by a sanitizer (which aborts) fails one test instead of ending the suite. */
bool vc_test_in_child(bool (*check)(void *), void *arg);

/* ---- util.c: random data, coordinates, comparisons ---- */
/* Seeded per test from VC_TEST_SEED (default: time) so failures can be replayed. */
uint64_t vc_rand_u64(void);
double vc_rand_uniform(double lo, double hi);
int32_t vc_rand_int(int32_t lo, int32_t hi); /* inclusive */
/* n unique random sites: batches [0, nb), each axis in [lo, hi]. Caller frees. */
int32_t *vc_rand_coords(int64_t n, int32_t nb, int32_t lo, int32_t hi);
/* Random values in [-1, 1) stored as dtype; also returns the stored values as f64. */
void *vc_rand_tensor(vc_dtype dt, int64_t n, double **as_f64);
/* Reads n values of dtype into a fresh f64 array. */
double *vc_to_f64(vc_dtype dt, const void *src, int64_t n);
/* Fills n elements with NaN of dtype, so unwritten outputs are caught. */
void vc_poison(vc_dtype dt, void *dst, int64_t n);
/* ||out - ref|| / ||ref|| (1 if out has NaN; |out| if ref is 0). */
double vc_rel_err(const double *out, const double *ref, int64_t n);
/* DESIGN.md §6 tolerance for a dtype/math. */
double vc_tolerance(vc_dtype dt, vc_math m);
const char *vc_dtype_name(vc_dtype dt);
const char *vc_kind_name(vc_conv_kind k);
const char *vc_algo_name(vc_algo a);
const char *vc_pass_name(vc_pass p);
/* Kernel k, stride s, dilation dil on every axis; with `aniso` each axis draws its own
 * values up to those. Submanifold keeps odd kernels, stride 1 and its fixed padding; other
 * kinds draw padding in [0, (kernel-1)*dilation] and, half the time per axis, an
 * output_bound in [0, max_bound]. */
void vc_rand_desc(vc_conv_desc *d, vc_conv_kind kind, int k, int s, int dil, bool aniso, int max_bound);
/* "kind k=(..) s=(..) p=(..) d=(..) bound=(..) n=N": every per-axis field of d, for messages. */
void vc_desc_describe(char *buf, size_t len, const vc_conv_desc *d, int64_t n);

#endif
