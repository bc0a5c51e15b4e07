/* test_tune.c — how VC_ALGO_AUTO resolves on the CPU backend: the tune cache file's lines
 * (choices with and without variants, malformed lines, CRLF endings, the old v1 file), the
 * file against a context's own vc_conv_tune, and the VOXCONV_ALGO_* environment over both. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif

#include "vc_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tune_fixture {
  char dir[512];
  int32_t *coords; /* drawn once: every context's plan has the same pairs, so the same keys */
  vc_context *ctx;
  vc_plan *plan;
  vc_conv_args args;
} tune_fixture;

/* The cache key of the fixture's layer (include/voxconv.h documents its fields). */
static void key_of(const tune_fixture *f, vc_pass pass, vc_dtype dt, char *key, size_t len) {
  const int64_t pairs = vc_plan_pair_count(f->plan);
  const int lg = pairs > 1 ? (int)ceil(log2((double)pairs)) : 0;
  snprintf(key, len, "cpu|host|%s|%d|%lld|%lld|%d|%s|f32", vc_pass_name(pass), lg, (long long)f->args.in_channels,
           (long long)f->args.out_channels, vc_plan_kernel_volume(f->plan), vc_dtype_name(dt));
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *o = fopen(path, "wb");
  CHECK(o != NULL, "cannot write %s", path);
  if (o) {
    fputs(text, o);
    fclose(o);
  }
}

/* A fresh context (it reads the environment and the cache file) with a small submanifold
 * plan over the fixture's sites. */
static bool fx_open(tune_fixture *f) {
  f->ctx = NULL, f->plan = NULL;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &f->ctx));
  if (!f->ctx) return false;
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  CHECK_OK(f->ctx, vc_plan_create(f->ctx, &d, f->coords, 300, NULL, NULL, &f->plan));
  vc_conv_args_init(&f->args, 8, 16, VC_DTYPE_F32);
  return f->plan != NULL;
}

static void fx_close(tune_fixture *f) {
  vc_plan_destroy(f->plan);
  vc_context_destroy(f->ctx);
  f->plan = NULL, f->ctx = NULL;
}

static vc_algo algo_now(tune_fixture *f, vc_pass pass, vc_dtype dt) {
  vc_conv_args a = f->args;
  a.dtype = dt;
  vc_algo got = VC_ALGO_AUTO;
  CHECK_OK(f->ctx, vc_conv_algo_for(f->plan, &a, pass, &got));
  return got;
}

#define EXPECT_ALGO(f, pass, dt, want, why)                                                                       \
  do {                                                                                                            \
    const vc_algo got_ = algo_now(f, pass, dt);                                                                   \
    CHECK(got_ == (want), "%s %s: AUTO resolves to %s, want %s (%s)", vc_pass_name(pass), vc_dtype_name(dt),          \
          vc_algo_name(got_), vc_algo_name(want), why);                                                           \
  } while (0)

/* Lines of the cache file: a plain choice, a choice with a variant the backend does not have,
 * an unknown algorithm, lines without a choice, and a CRLF line; the v1 file is not read. */
static void test_tune_cache_lines(void) {
  tune_fixture f;
  if (!vc_test_make_temp_dir(f.dir, sizeof f.dir, "vc_tests_tune")) {
    CHECK(false, "cannot create a temporary directory");
    return;
  }
  const char *was = getenv("VOXCONV_CACHE_DIR");
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", was ? was : "");
  setenv("VOXCONV_CACHE_DIR", f.dir, 1);
  f.coords = vc_rand_coords(300, 1, 0, 9);
  if (fx_open(&f)) {
    char k[3][192], k16[192], text[2048];
    for (int p = 0; p < 3; p++) key_of(&f, (vc_pass)p, VC_DTYPE_F32, k[p], sizeof k[p]);
    key_of(&f, VC_PASS_FORWARD, VC_DTYPE_F16, k16, sizeof k16);
    snprintf(text, sizeof text,
             "%s reference\n"
             "%s reference/bn64.split2\n"
             "%s refrence\n"
             "no-choice-here\n"
             "%s\n"
             "%s reference\r\n",
             k[0], k[1], k[2], k[2], k16);
    write_file(f.dir, "tune-v2.txt", text);
    snprintf(text, sizeof text, "%s reference\n", k[2]);
    write_file(f.dir, "tune-v1.txt", text);
    fx_close(&f);
    if (fx_open(&f)) {
      EXPECT_ALGO(&f, VC_PASS_FORWARD, VC_DTYPE_F32, VC_ALGO_REFERENCE, "the file's choice");
      EXPECT_ALGO(&f, VC_PASS_FORWARD, VC_DTYPE_F16, VC_ALGO_REFERENCE, "a CRLF line");
      EXPECT_ALGO(&f, VC_PASS_BACKWARD_DATA, VC_DTYPE_F32, VC_ALGO_EXPLICIT,
                  "a variant the CPU does not have: the line is skipped");
      EXPECT_ALGO(&f, VC_PASS_BACKWARD_WEIGHT, VC_DTYPE_F32, VC_ALGO_EXPLICIT,
                  "an unknown algorithm is skipped, and tune-v1.txt is not read");
      /* One candidate: vc_conv_tune picks it untimed and keeps it in this context only. */
      vc_algo best = VC_ALGO_AUTO;
      CHECK_OK(f.ctx, vc_conv_tune(f.ctx, f.plan, &f.args, VC_PASS_FORWARD, NULL, &best));
      CHECK(best == VC_ALGO_EXPLICIT, "vc_conv_tune on the CPU picked %s", vc_algo_name(best));
      EXPECT_ALGO(&f, VC_PASS_FORWARD, VC_DTYPE_F32, VC_ALGO_EXPLICIT, "this context's vc_conv_tune");
    }
    fx_close(&f);
    if (fx_open(&f))
      EXPECT_ALGO(&f, VC_PASS_FORWARD, VC_DTYPE_F32, VC_ALGO_REFERENCE,
                  "an untimed tune is not written: the file still says reference");
    fx_close(&f);
    /* The environment goes before the file; a value naming no algorithm is refused. */
    setenv("VOXCONV_ALGO_FORWARD", "explicit", 1);
    if (fx_open(&f)) EXPECT_ALGO(&f, VC_PASS_FORWARD, VC_DTYPE_F32, VC_ALGO_EXPLICIT, "VOXCONV_ALGO_FORWARD");
    fx_close(&f);
    setenv("VOXCONV_ALGO_FORWARD", "masked/bn64.split2", 1);
    if (fx_open(&f)) {
      vc_algo got = VC_ALGO_AUTO;
      CHECK_STATUS(f.ctx, vc_conv_algo_for(f.plan, &f.args, VC_PASS_FORWARD, &got), VC_ERR_INVALID_ARGUMENT,
                   "VOXCONV_ALGO_FORWARD = 'masked/bn64.split2'");
    }
    fx_close(&f);
    unsetenv("VOXCONV_ALGO_FORWARD");
  }
  fx_close(&f);
  free(f.coords);
  if (was) setenv("VOXCONV_CACHE_DIR", saved, 1);
  else unsetenv("VOXCONV_CACHE_DIR");
  vc_test_remove_dir(f.dir);
}

/* The shipped table (src/core/tune_table.c, generated): every line is a key of nine fields
 * with known pass, dtype and math names, and a choice naming an algorithm and, for masked,
 * at most a tile variant "bn{64,96,128,256}.split{1..16}" or the pairs form "pairs.bn256"
 * (forward, backward_data) or a weight-gradient form "pairs" or "rows" (backward_weight).
 * The library skips a line that does not parse, so a broken generator would otherwise go
 * unnoticed. */
extern const char *const vc_tune_shipped[];

static bool shipped_line_ok(const char *line) {
  const char *sp = strrchr(line, ' ');
  if (!sp) return false;
  char f[9][64];
  int n = 0;
  for (const char *s = line; n < 9 && s < sp; n++) {
    const size_t len = strcspn(s, "|") < (size_t)(sp - s) ? strcspn(s, "|") : (size_t)(sp - s);
    if (len >= sizeof f[0]) return false;
    memcpy(f[n], s, len);
    f[n][len] = 0;
    s += len + 1;
  }
  bool pass_ok = false, dt_ok = !strcmp(f[7], "f16") || !strcmp(f[7], "bf16") || !strcmp(f[7], "f32");
  for (int p = 0; p < 3; p++) pass_ok = pass_ok || !strcmp(f[2], vc_pass_name((vc_pass)p));
  if (n != 9 || strcmp(f[0], "cuda") || !pass_ok || !dt_ok || (strcmp(f[8], "f32") && strcmp(f[8], "tf32"))) return false;
  for (int i = 3; i < 7; i++)
    if (!f[i][0] || strspn(f[i], "0123456789") != strlen(f[i])) return false;
  const char *c = sp + 1;
  if (!strcmp(c, "explicit") || !strcmp(c, "implicit") || !strcmp(c, "masked")) return true;
  if (!strcmp(f[2], "backward_weight")) return !strcmp(c, "masked/pairs") || !strcmp(c, "masked/rows");
  if (!strcmp(c, "masked/pairs.bn256")) return true; /* the forward and dgrad's pairs form */
  int bn = 0, split = 0, end = 0;
  return sscanf(c, "masked/bn%d.split%d%n", &bn, &split, &end) == 2 && !c[end] && (bn == 64 || bn == 96 || bn == 128 || bn == 256) &&
         split >= 1 && split <= 16;
}

static void test_tune_shipped_table(void) {
  int n = 0;
  for (; vc_tune_shipped[n]; n++)
    CHECK(shipped_line_ok(vc_tune_shipped[n]), "shipped tune table line %d is malformed: \"%s\"", n,
          vc_tune_shipped[n]);
  CHECK(n > 0, "the shipped tune table is empty");
}

const vc_test_case vc_tests_tune[] = {
    {"tune_cache_lines", test_tune_cache_lines},
    {"tune_shipped_table", test_tune_shipped_table},
    {NULL, NULL},
};
