/* util.c — the harness shared by vc_tests and vc_gpu_tests, random data and comparisons. */
#include "vc_test.h"

#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the harness ------------------------------------------------------------------------ */

#define MAX_REPORTS 8 /* failures printed per case: one broken loop should not flood the log */
static int failures;  /* of the running case */

void vc_test_fail(const char *file, int line, const char *expr, const char *fmt, ...) {
  if (++failures > MAX_REPORTS) {
    if (failures == MAX_REPORTS + 1) fprintf(stderr, "  (more failures of this case not shown)\n");
    return;
  }
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  %s:%d: CHECK(%s) failed: %s\n", file, line, expr, msg);
}

int vc_test_failures(void) { return failures; }

void vc_test_reset_failures(void) { failures = 0; }

static void vc_test_seed(uint64_t s);

uint64_t vc_test_seed_from_env(void) {
  const char *env = getenv("VC_TEST_SEED");
  return env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
}

const char *vc_test_tmp_dir(void) {
  const char *t = getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

bool vc_test_make_temp_dir(char *buf, size_t len, const char *prefix) {
  snprintf(buf, len, "%s/%s.XXXXXX", vc_test_tmp_dir(), prefix);
  return mkdtemp(buf) != NULL;
}

void vc_test_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

double vc_test_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static double cpu_ms(void) { return 1000.0 * (double)clock() / CLOCKS_PER_SEC; }

void vc_test_run_cases(vc_test_runner *r, const vc_test_case *cases) {
  for (size_t i = 0; cases[i].name; i++) {
    const vc_test_case *t = &cases[i];
    if ((r->filter && !strstr(t->name, r->filter)) || (r->skip && r->skip(t))) continue;
    const uint64_t k = r->seed_by_index ? (uint64_t)(i + 1) : (uint64_t)(r->passed + r->failed + 1);
    vc_test_seed(r->seed ^ k * 0x9e3779b97f4a7c15ull);
    failures = 0;
    const double t0 = r->wall_clock ? vc_test_now_ms() : cpu_ms();
    t->fn();
    const double ms = (r->wall_clock ? vc_test_now_ms() : cpu_ms()) - t0;
    printf("%s %-*s %*.1f ms%s\n", failures ? "FAIL" : "ok  ", r->name_width, t->name, r->wall_clock ? 9 : 8, ms,
           r->wall_clock ? "" : " cpu");
    fflush(stdout);
    if (failures) r->failed++;
    else r->passed++;
  }
}

int vc_test_summary(const vc_test_runner *r) {
  printf("%d passed, %d failed\n", r->passed, r->failed);
  return r->failed ? 1 : 0;
}

/* ---- checks ---------------------------------------------------------------------------- */

bool vc_test_contains(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle); }

void vc_test_scrub(vc_context *ctx) {
  if (ctx) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 2, 0, 1);
    vc_plan *p = NULL;
    vc_plan_create(ctx, &d, NULL, -7777, NULL, NULL, &p);
    vc_plan_destroy(p);
  } else {
    vc_context *c = NULL;
    vc_context_create((vc_device_kind)7777, 0, &c);
    vc_context_destroy(c);
  }
  CHECK(vc_test_contains(vc_last_error(ctx), "7777"), "scrub did not overwrite the error slot: '%s'",
        vc_last_error(ctx));
}

bool vc_test_in_child(bool (*check)(void *), void *arg) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return check(arg);
  if (pid == 0) {
    /* The parent's OpenMP thread pool does not exist in the child: stay on one thread. */
    omp_set_num_threads(1);
    alarm(60); /* a hang in the child becomes a failure, not a stuck suite */
    _exit(check(arg) ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

const char *vc_algo_name(vc_algo a) {
  static const char *const n[] = {"auto", "reference", "explicit", "implicit", "masked", "grouped"};
  return (unsigned)a <= VC_ALGO_GROUPED ? n[a] : "?";
}

const char *vc_pass_name(vc_pass p) {
  static const char *const n[] = {"forward", "backward_data", "backward_weight"};
  return (unsigned)p <= VC_PASS_BACKWARD_WEIGHT ? n[p] : "?";
}

void vc_desc_describe(char *buf, size_t len, const vc_conv_desc *d, int64_t n) {
  snprintf(buf, len, "%s k=(%d,%d,%d) s=(%d,%d,%d) p=(%d,%d,%d) d=(%d,%d,%d) bound=(%d,%d,%d) n=%lld",
           vc_kind_name(d->kind), d->kernel_size[0], d->kernel_size[1], d->kernel_size[2], d->stride[0], d->stride[1],
           d->stride[2], d->padding[0], d->padding[1], d->padding[2], d->dilation[0], d->dilation[1], d->dilation[2],
           d->output_bound[0], d->output_bound[1], d->output_bound[2], (long long)n);
}

void vc_rand_desc(vc_conv_desc *d, vc_conv_kind kind, int k, int s, int dil, bool aniso, int max_bound) {
  const bool subm = kind == VC_CONV_SUBMANIFOLD;
  vc_conv_desc_init(d, kind, k, subm ? 1 : s, -1, dil);
  for (int a = 0; a < 3; a++) {
    if (aniso) {
      d->kernel_size[a] = subm ? 2 * vc_rand_int(0, k / 2) + 1 : vc_rand_int(1, k);
      d->stride[a] = subm ? 1 : vc_rand_int(1, s);
      d->dilation[a] = vc_rand_int(1, dil);
    }
    const int32_t reach = (d->kernel_size[a] - 1) * d->dilation[a];
    d->padding[a] = subm ? reach / 2 : vc_rand_int(0, reach);
    if (!subm && vc_rand_int(0, 1)) d->output_bound[a] = vc_rand_int(0, max_bound);
  }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static void vc_test_seed(uint64_t s) { rng_state = s ? s : 0x9e3779b97f4a7c15ull; }

uint64_t vc_rand_u64(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

double vc_rand_uniform(double lo, double hi) { return lo + (hi - lo) * ((vc_rand_u64() >> 11) * 0x1p-53); }

int32_t vc_rand_int(int32_t lo, int32_t hi) { return lo + (int32_t)(vc_rand_u64() % (uint64_t)(hi - lo + 1)); }

int32_t *vc_rand_coords(int64_t n, int32_t nb, int32_t lo, int32_t hi) {
  int32_t *c = malloc((size_t)(n ? n : 1) * 4 * sizeof *c);
  int64_t side = (int64_t)hi - lo + 1, cells = nb * side * side * side;
  if (n > cells) n = cells;
  /* rejection with a small open-addressed set of flat indices */
  int64_t cap = 64;
  while (cap < 4 * n) cap <<= 1;
  int64_t *set = malloc((size_t)cap * sizeof *set);
  memset(set, 0xff, (size_t)cap * sizeof *set);
  for (int64_t i = 0; i < n;) {
    int64_t f = (int64_t)(vc_rand_u64() % (uint64_t)cells), h = (f * 0x9e3779b97f4a7c15ll) & (cap - 1);
    while (set[h] >= 0 && set[h] != f) h = (h + 1) & (cap - 1);
    if (set[h] == f) continue;
    set[h] = f;
    c[4 * i + 3] = (int32_t)(f % side) + lo, f /= side;
    c[4 * i + 2] = (int32_t)(f % side) + lo, f /= side;
    c[4 * i + 1] = (int32_t)(f % side) + lo, f /= side;
    c[4 * i + 0] = (int32_t)f;
    i++;
  }
  free(set);
  return c;
}

void *vc_rand_tensor(vc_dtype dt, int64_t n, double **as_f64) {
  size_t e = vc_dtype_size(dt);
  float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
  void *t = malloc((size_t)(n ? n : 1) * e);
  for (int64_t i = 0; i < n; i++) f[i] = (float)vc_rand_uniform(-1, 1);
  vc_convert_from_f32(dt, f, t, n);
  free(f);
  if (as_f64) *as_f64 = vc_to_f64(dt, t, n);
  return t;
}

double *vc_to_f64(vc_dtype dt, const void *src, int64_t n) {
  float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
  double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  vc_convert_to_f32(dt, src, f, n);
  for (int64_t i = 0; i < n; i++) d[i] = f[i];
  free(f);
  return d;
}

void vc_poison(vc_dtype dt, void *dst, int64_t n) {
  if (dt == VC_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = NAN;
  } else {
    uint16_t v = dt == VC_DTYPE_F16 ? 0x7e00 : 0x7fc0;
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = v;
  }
}

double vc_rel_err(const double *out, const double *ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(out[i])) return 1.0;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return sqrt(num);
  return sqrt(num / den);
}

double vc_tolerance(vc_dtype dt, vc_math m) {
  if (dt == VC_DTYPE_F32) return m == VC_MATH_TF32 ? 1e-3 : 1e-5;
  return 1e-2;
}

const char *vc_dtype_name(vc_dtype dt) {
  return dt == VC_DTYPE_F32 ? "f32" : dt == VC_DTYPE_F16 ? "f16" : dt == VC_DTYPE_BF16 ? "bf16" : "?";
}

const char *vc_kind_name(vc_conv_kind k) {
  static const char *n[] = {"submanifold", "sparse", "inverse", "transposed"};
  return (unsigned)k <= 3 ? n[k] : "?";
}
