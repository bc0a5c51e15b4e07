/* test_errors.c — every bad-input path returns its status and a sentence naming the
 * argument and its value (DESIGN.md §6); failing calls write nothing, failing plan
 * creation leaves *out NULL and leaks nothing; N = 0 is valid for every kind. */
#include "vc_test.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define VC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VC_TEST_ASAN 1
#endif
#endif

static const char *const pass_fn[3] = {"vc_conv_forward", "vc_conv_backward_data", "vc_conv_backward_weight"};
static const vc_conv_kind all_kinds[4] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE, VC_CONV_INVERSE,
                                          VC_CONV_TRANSPOSED};
/* the kinds that take coordinates (an inverse plan takes its paired plan's) */
static const vc_conv_kind direct_kinds[3] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE, VC_CONV_TRANSPOSED};

/* ---- helpers ------------------------------------------------------------------------ */

/* CHECK_STATUS on a freshly scrubbed slot: msgctx is where the error must be recorded. */
#define EXPECT(msgctx, call, want, needle)                                                 \
  do {                                                                                     \
    vc_test_scrub(msgctx);                                                                 \
    CHECK_STATUS(msgctx, call, want, needle);                                              \
  } while (0)

static vc_context *cpu_ctx(void) {
  vc_context *c = NULL;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &c));
  return c;
}

/* Any non-NULL value the library must replace with NULL when plan creation fails. */
static char plan_sentinel_byte;
#define PLAN_SENTINEL ((vc_plan *)(void *)&plan_sentinel_byte)

/* vc_plan_create must fail with `want`, a message containing `needle` on msgctx, and
 * *out == NULL. */
#define EXPECT_PLAN_FAIL(msgctx, ctx, desc, coords, n, paired, want, needle)                \
  expect_plan_fail(__FILE__, __LINE__, msgctx, ctx, desc, coords, n, paired, want, needle)
static void expect_plan_fail(const char *file, int line, vc_context *msgctx, vc_context *ctx,
                             const vc_conv_desc *d, const int32_t *coords, int64_t n, const vc_plan *paired,
                             vc_status want, const char *needle) {
  vc_plan *p = PLAN_SENTINEL;
  vc_test_scrub(msgctx);
  vc_status s = vc_plan_create(ctx, d, coords, n, paired, NULL, &p);
  const char *msg = vc_last_error(msgctx);
  if (s != want)
    vc_test_fail(file, line, "status", "vc_plan_create returned %s, expected %s (last error: %s)",
                 vc_status_string(s), vc_status_string(want), msg);
  if (!vc_test_contains(msg, needle))
    vc_test_fail(file, line, "message", "vc_plan_create: message '%s' lacks '%s'", msg, needle);
  if (p != NULL)
    vc_test_fail(file, line, "*out == NULL", "*out = %p after vc_plan_create returned %s", (void *)p,
                 vc_status_string(s));
  if (p && p != PLAN_SENTINEL) vc_plan_destroy(p);
}

static vc_plan *make_plan(vc_context *ctx, const vc_conv_desc *d, const int32_t *coords, int64_t n,
                          const vc_plan *paired) {
  vc_plan *p = NULL;
  CHECK_OK(ctx, vc_plan_create(ctx, d, coords, n, paired, NULL, &p));
  return p;
}

/* Small coordinate set in a box, two batches. */
static int32_t *box_coords(int64_t n) { return vc_rand_coords(n, 2, -4, 4); }

/* ---- the execute fixture -------------------------------------------------------------- */

/* A valid sparse conv (k 3, stride 2) with every tensor in one arena, so a failing call can
 * be shown to have written nothing: the whole arena is compared before and after. */
typedef struct fixture {
  vc_context *ctx;
  int32_t *coords;
  vc_plan *plan;
  vc_conv_args args; /* Ci 3, Co 5, f32 */
  int64_t n_in, n_out, K, ci, co;
  float *arena;
  unsigned char *snap;
  size_t arena_bytes;
  float *x, *w, *bias, *y, *dy, *dx, *dw, *db;
  void *ws;
  size_t ws_bytes; /* enough for every pass, dtype and CPU algorithm */
} fixture;

typedef struct io {
  const void *x, *w, *bias, *dy;
  void *y, *dx, *dw, *db;
} io;

static io fx_io(const fixture *f) {
  io t = {f->x, f->w, f->bias, f->dy, f->y, f->dx, f->dw, f->db};
  return t;
}

static vc_status run(vc_pass pass, vc_context *ctx, const vc_plan *p, const vc_conv_args *a, io t, void *ws,
                     size_t ws_bytes) {
  switch (pass) {
  case VC_PASS_FORWARD: return vc_conv_forward(ctx, p, a, t.x, t.w, t.bias, t.y, ws, ws_bytes, NULL);
  case VC_PASS_BACKWARD_DATA: return vc_conv_backward_data(ctx, p, a, t.dy, t.w, t.dx, ws, ws_bytes, NULL);
  default: return vc_conv_backward_weight(ctx, p, a, t.x, t.dy, t.dw, t.db, ws, ws_bytes, NULL);
  }
}

static void fx_init(fixture *f) {
  memset(f, 0, sizeof *f);
  f->ctx = cpu_ctx();
  f->coords = box_coords(60);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 2, 1, 1);
  f->plan = make_plan(f->ctx, &d, f->coords, 60, NULL);
  f->ci = 3, f->co = 5;
  f->n_in = vc_plan_in_count(f->plan), f->n_out = vc_plan_out_count(f->plan);
  f->K = vc_plan_kernel_volume(f->plan);
  vc_conv_args_init(&f->args, f->ci, f->co, VC_DTYPE_F32);
  int64_t nx = f->n_in * f->ci, nw = f->co * f->K * f->ci, ny = f->n_out * f->co;
  int64_t total = nx + nw + f->co + ny + ny + nx + nw + f->co;
  f->arena_bytes = (size_t)total * sizeof(float);
  f->arena = malloc(f->arena_bytes);
  f->snap = malloc(f->arena_bytes);
  for (int64_t i = 0; i < total; i++) f->arena[i] = (float)vc_rand_uniform(-1, 1);
  float *at = f->arena;
  f->x = at, at += nx;
  f->w = at, at += nw;
  f->bias = at, at += f->co;
  f->y = at, at += ny;
  f->dy = at, at += ny;
  f->dx = at, at += nx;
  f->dw = at, at += nw;
  f->db = at;
  static const vc_dtype dts[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  static const vc_algo algos[2] = {VC_ALGO_AUTO, VC_ALGO_REFERENCE};
  for (int pass = 0; pass < 3; pass++)
    for (int t = 0; t < 3; t++)
      for (int g = 0; g < 2; g++) {
        vc_conv_args a = f->args;
        a.dtype = dts[t], a.algo = algos[g];
        size_t b = 0;
        CHECK_OK(f->ctx, vc_conv_workspace_size(f->plan, &a, (vc_pass)pass, &b));
        if (b > f->ws_bytes) f->ws_bytes = b;
      }
  f->ws = malloc(f->ws_bytes ? f->ws_bytes : 1);
  /* The fixture itself is valid: every pass succeeds on it, so each failure below is caused
   * by the one bad argument. */
  CHECK(f->n_out > 0 && vc_plan_pair_count(f->plan) > 0, "fixture plan is empty");
  for (int pass = 0; pass < 3; pass++)
    CHECK_OK(f->ctx, run((vc_pass)pass, f->ctx, f->plan, &f->args, fx_io(f), f->ws, f->ws_bytes));
}

static void fx_free(fixture *f) {
  vc_plan_destroy(f->plan);
  vc_context_destroy(f->ctx);
  free(f->coords);
  free(f->arena);
  free(f->snap);
  free(f->ws);
}

/* Fills the outputs with a known pattern and remembers the whole arena. */
static void fx_arm(fixture *f) {
  int64_t ny = f->n_out * f->co, nx = f->n_in * f->ci, nw = f->co * f->K * f->ci;
  memset(f->y, 0xa5, (size_t)ny * sizeof(float));
  memset(f->dx, 0x5a, (size_t)nx * sizeof(float));
  memset(f->dw, 0xc3, (size_t)nw * sizeof(float));
  memset(f->db, 0x3c, (size_t)f->co * sizeof(float));
  memcpy(f->snap, f->arena, f->arena_bytes);
}

/* True when the arena is as fx_arm left it; else records a failure naming the first change. */
static bool fx_check_untouched(fixture *f, const char *call, const char *file, int line) {
  if (memcmp(f->snap, f->arena, f->arena_bytes) == 0) return true;
  size_t i = 0;
  while (i < f->arena_bytes && f->snap[i] == ((unsigned char *)f->arena)[i]) i++;
  vc_test_fail(file, line, "arena unchanged", "%s failed but changed tensor memory at float %zu of %zu", call,
               i / sizeof(float), f->arena_bytes / sizeof(float));
  return false;
}

/* EXPECT for an execute call on the fixture, plus: it wrote nothing. */
#define EXPECT_EXEC(f, msgctx, call, want, needle)                                         \
  do {                                                                                     \
    fx_arm(f);                                                                             \
    EXPECT(msgctx, call, want, needle);                                                    \
    fx_check_untouched(f, #call, __FILE__, __LINE__);                                      \
  } while (0)

/* ---- contexts ------------------------------------------------------------------------- */

static void test_errors_context_null_out(void) {
  /* No context exists yet, so the sentence lands in the thread's slot: vc_last_error(NULL). */
  EXPECT(NULL, vc_context_create(VC_DEVICE_CPU, 0, NULL), VC_ERR_INVALID_ARGUMENT, "out is NULL");
  vc_context *c = cpu_ctx();
  CHECK(c && strcmp(vc_last_error(c), "") == 0, "a fresh context has last error '%s', expected ''",
        c ? vc_last_error(c) : "(no context)");
  CHECK(vc_context_device_kind(c) == VC_DEVICE_CPU, "device kind %d", (int)vc_context_device_kind(c));
  vc_context_destroy(c);
  vc_context_destroy(NULL); /* destructors accept NULL */
}

/* vc_context_create must fail for each bad value of one argument (the kind, or the device
 * of a CPU context), name it and its value, and leave *out NULL. */
static void expect_context_fail(bool kind, const int bad[3]) {
  const char *arg = kind ? "kind" : "device";
  for (int i = 0; i < 3; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "%s = %d", arg, bad[i]);
    vc_context *c = (vc_context *)(void *)&plan_sentinel_byte;
    EXPECT(NULL, vc_context_create(kind ? (vc_device_kind)bad[i] : VC_DEVICE_CPU, kind ? 0 : bad[i], &c),
           VC_ERR_INVALID_ARGUMENT, needle);
    CHECK(c == NULL, "%s %d: *out = %p after failure", arg, bad[i], (void *)c);
  }
}

static void test_errors_context_bad_kind(void) { expect_context_fail(true, (const int[3]){2, -1, 1000}); }
static void test_errors_context_cpu_device(void) { expect_context_fail(false, (const int[3]){1, -1, 7}); }

static void test_errors_context_cuda(void) {
  /* This build has no CUDA backend: UNSUPPORTED. A CUDA build on a machine without a GPU may
   * answer VC_ERR_DEVICE instead; a CUDA build with a GPU succeeds (nothing to check then). */
  vc_context *c = (vc_context *)(void *)&plan_sentinel_byte;
  vc_test_scrub(NULL);
  vc_status s = vc_context_create(VC_DEVICE_CUDA, 0, &c);
  if (s == VC_OK) {
    vc_context_destroy(c);
    return;
  }
  CHECK(s == VC_ERR_UNSUPPORTED || s == VC_ERR_DEVICE, "CUDA context: %s (%s)", vc_status_string(s),
        vc_last_error(NULL));
  CHECK(c == NULL, "*out = %p after failure", (void *)c);
  if (s == VC_ERR_UNSUPPORTED)
    CHECK(vc_test_contains(vc_last_error(NULL), "VC_DEVICE_CUDA"), "message '%s' does not name VC_DEVICE_CUDA",
          vc_last_error(NULL));
  else
    CHECK(!vc_test_contains(vc_last_error(NULL), "7777") && vc_last_error(NULL)[0], "no message recorded: '%s'",
          vc_last_error(NULL));
}

/* ---- plan creation: pointers and descriptors ------------------------------------------ */

static void test_errors_plan_null_pointers(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(5);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  /* No context: the sentence goes to the thread's slot. */
  EXPECT_PLAN_FAIL(NULL, NULL, &d, c, 5, NULL, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: ctx is NULL");
  EXPECT(ctx, vc_plan_create(ctx, &d, c, 5, NULL, NULL, NULL), VC_ERR_INVALID_ARGUMENT, "vc_plan_create: out is NULL");
  EXPECT_PLAN_FAIL(ctx, ctx, NULL, c, 5, NULL, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: desc is NULL");
  for (int k = 0; k < 3; k++) { /* inverse may take NULL coords */
    vc_conv_desc_init(&d, direct_kinds[k], 3, direct_kinds[k] == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, NULL, 5, NULL, VC_ERR_INVALID_ARGUMENT, "coords is NULL with n = 5");
  }
  free(c);
  vc_context_destroy(ctx);
}

static void test_errors_plan_desc_struct_size(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(5);
  const size_t sizes[3] = {0, sizeof(size_t), VC_CONV_DESC_SIZE_0_1 - 1};
  for (int i = 0; i < 3; i++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
    d.struct_size = sizes[i];
    char needle[64];
    snprintf(needle, sizeof needle, "desc->struct_size = %zu", sizes[i]);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 5, NULL, VC_ERR_INVALID_ARGUMENT, needle);
  }
  free(c);
  vc_context_destroy(ctx);
}

/* A 0.1 caller's shorter descriptor still works: the fields past its size read as 0. */
static void test_plan_desc_0_1_size_accepted(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(5);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 2, 2, 0, 1);
  d.struct_size = VC_CONV_DESC_SIZE_0_1;
  for (int a = 0; a < 3; a++) d.output_bound[a] = -7; /* beyond the caller's struct: ignored */
  vc_plan *p = make_plan(ctx, &d, c, 5, NULL);
  CHECK(p && vc_plan_desc(p)->output_bound[0] == 0 && vc_plan_desc(p)->struct_size == sizeof(vc_conv_desc),
        "0.1-sized descriptor: bound %d", p ? vc_plan_desc(p)->output_bound[0] : -1);
  vc_plan_destroy(p);
  free(c);
  vc_context_destroy(ctx);
}

static void test_errors_plan_desc_output_bound(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(5);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 2, 2, 0, 1);
  d.output_bound[1] = -3;
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 5, NULL, VC_ERR_INVALID_ARGUMENT,
                   "desc->output_bound[1] = -3 is negative (0: unbounded)");
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  d.output_bound[2] = 8;
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 5, NULL, VC_ERR_INVALID_ARGUMENT,
                   "desc->output_bound[2] = 8, but a submanifold plan's outputs are given (it must be 0)");
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 2, 2, 0, 1);
  d.output_bound[0] = d.output_bound[1] = d.output_bound[2] = 4;
  vc_plan *sp = make_plan(ctx, &d, c, 5, NULL);
  d.kind = VC_CONV_INVERSE;
  d.output_bound[1] = 5;
  EXPECT_PLAN_FAIL(ctx, ctx, &d, NULL, 0, sp, VC_ERR_INVALID_ARGUMENT,
                   "desc->output_bound[1] = 5 differs from the paired plan's 4 (an inverse plan takes 0 or the "
                   "paired plan's)");
  vc_plan_destroy(sp);
  free(c);
  vc_context_destroy(ctx);
}

static void test_errors_plan_desc_bad_kind(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(5);
  const int kinds[3] = {4, -1, 99};
  for (int i = 0; i < 3; i++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 2, 0, 1);
    d.kind = (vc_conv_kind)kinds[i];
    char needle[64];
    snprintf(needle, sizeof needle, "desc->kind = %d", kinds[i]);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 5, NULL, VC_ERR_INVALID_ARGUMENT, needle);
  }
  free(c);
  vc_context_destroy(ctx);
}

/* Sets one field on one axis of an otherwise valid sparse (or submanifold) descriptor and
 * expects the sentence "desc-><field>[axis] = value". */
typedef enum field { F_KERNEL, F_STRIDE, F_PADDING, F_DILATION } field;
static const char *const field_name[4] = {"kernel_size", "stride", "padding", "dilation"};

static void expect_bad_field(vc_context *ctx, const int32_t *c, int64_t n, vc_conv_kind kind, field f, int axis,
                             int32_t value, const char *extra, int line) {
  vc_conv_desc d;
  vc_conv_desc_init(&d, kind, 3, kind == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
  int32_t *slot[4] = {d.kernel_size, d.stride, d.padding, d.dilation};
  slot[f][axis] = value;
  char needle[128];
  snprintf(needle, sizeof needle, "desc->%s[%d] = %d%s", field_name[f], axis, value, extra ? extra : "");
  expect_plan_fail(__FILE__, line, ctx, ctx, &d, c, n, NULL, VC_ERR_INVALID_ARGUMENT, needle);
}

/* expect_bad_field for each bad value of one field on every axis of each kind given. */
static void expect_bad_values(const vc_conv_kind *kinds, int n_kinds, field f, const int32_t bad[3], const char *extra,
                              int line) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(6);
  for (int k = 0; k < n_kinds; k++)
    for (int a = 0; a < 3; a++)
      for (int i = 0; i < 3; i++) expect_bad_field(ctx, c, 6, kinds[k], f, a, bad[i], extra, line);
  free(c);
  vc_context_destroy(ctx);
}

/* The strided kinds. */
static const vc_conv_kind strided_kinds[2] = {VC_CONV_SPARSE, VC_CONV_TRANSPOSED};

static void test_errors_plan_kernel_size(void) {
  expect_bad_values(direct_kinds, 3, F_KERNEL, (const int32_t[3]){0, 8, -3}, " is outside [1, 7]", __LINE__);
}
static void test_errors_plan_stride(void) {
  expect_bad_values(strided_kinds, 2, F_STRIDE, (const int32_t[3]){0, 5, -1}, " is outside [1, 4]", __LINE__);
}
static void test_errors_plan_dilation(void) {
  expect_bad_values(direct_kinds, 3, F_DILATION, (const int32_t[3]){0, 5, -2}, " is outside [1, 4]", __LINE__);
}

static void test_errors_plan_padding(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(6);
  for (int k = 0; k < 2; k++)
    for (int a = 0; a < 3; a++) {
      expect_bad_field(ctx, c, 6, strided_kinds[k], F_PADDING, a, -1, " is outside", __LINE__);
      expect_bad_field(ctx, c, 6, strided_kinds[k], F_PADDING, a, 3, " is outside [0, (kernel_size-1)*dilation = 2]",
                       __LINE__);
    }
  /* The bound scales with dilation: k 3, d 2 allows 4 but not 5. */
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 2, 4, 2);
  vc_plan *p = make_plan(ctx, &d, c, 6, NULL);
  vc_plan_destroy(p);
  d.padding[1] = 5;
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 6, NULL, VC_ERR_INVALID_ARGUMENT, "desc->padding[1] = 5");
  free(c);
  vc_context_destroy(ctx);
}

static void test_errors_plan_submanifold_geometry(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(6);
  for (int a = 0; a < 3; a++) {
    /* even kernel (padding inside the generic range so the parity check is what fires) */
    vc_conv_desc d;
    vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
    d.kernel_size[a] = 2, d.padding[a] = 1;
    char needle[128];
    snprintf(needle, sizeof needle, "desc->kernel_size[%d] = 2 is even", a);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 6, NULL, VC_ERR_INVALID_ARGUMENT, needle);
    d.kernel_size[a] = 4, d.padding[a] = 2;
    snprintf(needle, sizeof needle, "desc->kernel_size[%d] = 4 is even", a);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 6, NULL, VC_ERR_INVALID_ARGUMENT, needle);
    /* stride != 1 */
    expect_bad_field(ctx, c, 6, VC_CONV_SUBMANIFOLD, F_STRIDE, a, 2, ", but a submanifold conv needs stride 1", __LINE__);
    expect_bad_field(ctx, c, 6, VC_CONV_SUBMANIFOLD, F_STRIDE, a, 4, ", but a submanifold conv needs stride 1", __LINE__);
    /* padding other than (k/2)*d */
    expect_bad_field(ctx, c, 6, VC_CONV_SUBMANIFOLD, F_PADDING, a, 0, ", but a submanifold conv needs", __LINE__);
    expect_bad_field(ctx, c, 6, VC_CONV_SUBMANIFOLD, F_PADDING, a, 2, ", but a submanifold conv needs", __LINE__);
    vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 5, 1, -1, 2); /* needs padding 4 */
    d.padding[a] = 2;
    snprintf(needle, sizeof needle, "desc->padding[%d] = 2, but a submanifold conv needs (kernel_size/2)*dilation = 4", a);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 6, NULL, VC_ERR_INVALID_ARGUMENT, needle);
  }
  free(c);
  vc_context_destroy(ctx);
}

static void test_errors_plan_count(void) {
  vc_context *ctx = cpu_ctx();
  int32_t *c = box_coords(6);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 2, 0, 1);
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, -1, NULL, VC_ERR_OUT_OF_RANGE, "n = -1 is negative");
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, INT64_MIN, NULL, VC_ERR_OUT_OF_RANGE, "n = -9223372036854775808");
  /* Kernel-map rows are int32: the count is refused before coords is read. */
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, INT32_MAX, NULL, VC_ERR_OUT_OF_RANGE, "n = 2147483647");
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, INT64_MAX, NULL, VC_ERR_OUT_OF_RANGE, "n = 9223372036854775807");
  free(c);
  vc_context_destroy(ctx);
}

/* ---- plan creation: coordinates ------------------------------------------------------- */

static void test_errors_plan_coords_out_of_range(void) {
  static const char *axis[4] = {"batch", "x", "y", "z"};
  const int32_t lo[4] = {-1, VC_COORD_MIN - 1, VC_COORD_MIN - 1, VC_COORD_MIN - 1};
  const int32_t hi[4] = {VC_BATCH_MAX, VC_COORD_MAX + 1, VC_COORD_MAX + 1, VC_COORD_MAX + 1};
  vc_context *ctx = cpu_ctx();
  const vc_conv_kind kinds[3] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE, VC_CONV_TRANSPOSED};
  for (int k = 0; k < 3; k++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, kinds[k], 3, kinds[k] == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
    for (int a = 0; a < 4; a++)
      for (int end = 0; end < 4; end++) {
        int32_t *c = box_coords(8);
        int32_t v = end == 0 ? lo[a] : end == 1 ? hi[a] : end == 2 ? INT32_MIN : INT32_MAX;
        c[4 * 3 + a] = v;
        char needle[128];
        snprintf(needle, sizeof needle, "coords row 3: %s = %d is outside", axis[a], v);
        EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 8, NULL, VC_ERR_OUT_OF_RANGE, needle);
        /* One step inside is accepted by the submanifold conv (whose output sites are its
         * input sites, so no produced site can leave the range). */
        if (kinds[k] == VC_CONV_SUBMANIFOLD && end < 2) {
          c[4 * 3 + a] = end == 0 ? lo[a] + 1 : hi[a] - 1;
          vc_plan *p = NULL;
          vc_status s = vc_plan_create(ctx, &d, c, 8, NULL, NULL, &p);
          CHECK(s == VC_OK || s == VC_ERR_DUPLICATE_COORDS, "%s = %d at the edge: %s (%s)", axis[a],
                c[4 * 3 + a], vc_status_string(s), vc_last_error(ctx));
          /* every site meets itself through the centre offset, the edge site included */
          CHECK(!p || vc_plan_pair_count(p) >= 8, "%s = %d at the edge: only %lld pairs for 8 sites", axis[a],
                c[4 * 3 + a], (long long)vc_plan_pair_count(p));
          vc_plan_destroy(p);
        }
        free(c);
      }
  }
  vc_context_destroy(ctx);
}

static void test_errors_plan_duplicate_coords(void) {
  vc_context *ctx = cpu_ctx();
  const vc_conv_kind kinds[3] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE, VC_CONV_TRANSPOSED};
  for (int k = 0; k < 3; k++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, kinds[k], 3, kinds[k] == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
    int32_t *c = box_coords(10), row7[4];
    memcpy(row7, c + 4 * 7, sizeof row7);
    memcpy(c + 4 * 7, c + 4 * 2, 4 * sizeof *c);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 10, NULL, VC_ERR_DUPLICATE_COORDS, "coords rows 2 and 7");
    memcpy(c + 4 * 7, row7, sizeof row7); /* undo, then first and last */
    memcpy(c + 4 * 9, c + 4 * 0, 4 * sizeof *c);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 10, NULL, VC_ERR_DUPLICATE_COORDS, "coords rows 0 and 9");
    /* Control: the same (x, y, z) in another batch is a different site. */
    int32_t two[8] = {0, 1, 2, 3, 1, 1, 2, 3};
    vc_plan *p = make_plan(ctx, &d, two, 2, NULL);
    vc_plan_destroy(p);
    free(c);
  }
  vc_context_destroy(ctx);
}

static void test_errors_plan_produced_site_out_of_range(void) {
  vc_context *ctx = cpu_ctx();
  vc_conv_desc d;
  /* transposed, stride 2: site 65535 writes 131070 and beyond */
  vc_conv_desc_init(&d, VC_CONV_TRANSPOSED, 2, 2, 0, 1);
  int32_t hi[8] = {0, 0, 0, 0, 1, 5, VC_COORD_MAX, 7};
  EXPECT_PLAN_FAIL(ctx, ctx, &d, hi, 2, NULL, VC_ERR_OUT_OF_RANGE, "coords row 1");
  EXPECT_PLAN_FAIL(ctx, ctx, &d, hi, 2, NULL, VC_ERR_OUT_OF_RANGE, "131070");
  /* and at the low end: -65536 * 2 */
  int32_t lo[8] = {3, 0, 0, 0, 2, VC_COORD_MIN, 1, 1};
  EXPECT_PLAN_FAIL(ctx, ctx, &d, lo, 2, NULL, VC_ERR_OUT_OF_RANGE, "coords row 1");
  /* Control: stride 1, kernel 1 keeps 65535 where it is. */
  vc_conv_desc_init(&d, VC_CONV_TRANSPOSED, 1, 1, 0, 1);
  vc_plan *p = make_plan(ctx, &d, hi, 2, NULL);
  vc_plan_destroy(p);
  /* A strided sparse conv whose window reaches below the range from the lowest site. */
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 1, 0, 1);
  int32_t low_site[4] = {0, VC_COORD_MIN, 0, 0};
  EXPECT_PLAN_FAIL(ctx, ctx, &d, low_site, 1, NULL, VC_ERR_OUT_OF_RANGE, "coords row 0");
  vc_context_destroy(ctx);
}

/* ---- plan creation: inverse and paired plans ------------------------------------------ */

typedef struct pair_fixture {
  vc_context *ctx;
  int32_t *coords;
  vc_plan *sparse;
  vc_conv_desc inv;    /* the matching inverse descriptor */
  int32_t *out_coords; /* sparse's output sites, one spare row */
  int64_t n_out;
} pair_fixture;

static void pf_init(pair_fixture *f) {
  f->ctx = cpu_ctx();
  f->coords = box_coords(40);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 2, 2, 0, 1);
  f->sparse = make_plan(f->ctx, &d, f->coords, 40, NULL);
  f->inv = d;
  f->inv.kind = VC_CONV_INVERSE;
  f->n_out = vc_plan_out_count(f->sparse);
  f->out_coords = calloc((size_t)(f->n_out + 1) * 4, sizeof(int32_t));
  CHECK_OK(f->ctx, vc_plan_out_coords(f->sparse, f->out_coords, NULL));
  CHECK(f->n_out > 5, "paired plan has only %lld outputs", (long long)f->n_out);
}

static void pf_free(pair_fixture *f) {
  vc_plan_destroy(f->sparse);
  vc_context_destroy(f->ctx);
  free(f->coords);
  free(f->out_coords);
}

static void test_errors_plan_inverse_paired_missing(void) {
  pair_fixture f;
  pf_init(&f);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, NULL, 0, NULL, VC_ERR_INVALID_ARGUMENT, "paired is NULL");
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, f.out_coords, f.n_out, NULL, VC_ERR_INVALID_ARGUMENT, "paired is NULL");
  /* Controls: with the paired plan, NULL coords and the exact output coords both work. */
  vc_plan *p = make_plan(f.ctx, &f.inv, NULL, 0, f.sparse);
  CHECK(vc_plan_out_count(p) == 40, "inverse has %lld outputs", (long long)vc_plan_out_count(p));
  vc_plan_destroy(p);
  p = make_plan(f.ctx, &f.inv, f.out_coords, f.n_out, f.sparse);
  vc_plan_destroy(p);
  pf_free(&f);
}

static void test_errors_plan_inverse_paired_wrong_kind(void) {
  pair_fixture f;
  pf_init(&f);
  vc_conv_desc d;
  /* Geometry equal to the inverse descriptor, so only the kind is wrong. */
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  vc_plan *subm = make_plan(f.ctx, &d, f.coords, 40, NULL);
  vc_conv_desc inv = d;
  inv.kind = VC_CONV_INVERSE;
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &inv, NULL, 0, subm, VC_ERR_INVALID_ARGUMENT, "paired plan is submanifold");
  d = f.inv;
  d.kind = VC_CONV_TRANSPOSED;
  vc_plan *tr = make_plan(f.ctx, &d, f.coords, 40, NULL);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, NULL, 0, tr, VC_ERR_INVALID_ARGUMENT, "paired plan is transposed");
  vc_plan *inverse = make_plan(f.ctx, &f.inv, NULL, 0, f.sparse);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, NULL, 0, inverse, VC_ERR_INVALID_ARGUMENT, "paired plan is inverse");
  vc_plan_destroy(subm);
  vc_plan_destroy(tr);
  vc_plan_destroy(inverse);
  pf_free(&f);
}

static void test_errors_plan_inverse_geometry(void) {
  pair_fixture f;
  pf_init(&f);
  struct { field f; int axis; int32_t value, theirs; } cases[] = {
      {F_KERNEL, 0, 3, 2}, {F_STRIDE, 1, 1, 2}, {F_PADDING, 2, 1, 0}, {F_DILATION, 0, 2, 1}, {F_STRIDE, 2, 3, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    vc_conv_desc d = f.inv;
    int32_t *slot[4] = {d.kernel_size, d.stride, d.padding, d.dilation};
    slot[cases[i].f][cases[i].axis] = cases[i].value;
    char needle[128];
    snprintf(needle, sizeof needle, "desc->%s[%d] = %d differs from the paired plan's %d", field_name[cases[i].f],
             cases[i].axis, cases[i].value, cases[i].theirs);
    EXPECT_PLAN_FAIL(f.ctx, f.ctx, &d, NULL, 0, f.sparse, VC_ERR_INVALID_ARGUMENT, needle);
  }
  pf_free(&f);
}

static void test_errors_plan_inverse_coords_differ(void) {
  pair_fixture f;
  pf_init(&f);
  int32_t *c = malloc((size_t)(f.n_out + 1) * 4 * sizeof *c);
  memcpy(c, f.out_coords, (size_t)f.n_out * 4 * sizeof *c);
  c[4 * 4 + 3] += 100; /* still in range, but not the paired plan's site */
  char needle[160];
  const int32_t *w = f.out_coords + 4 * 4;
  snprintf(needle, sizeof needle,
           "coords row 4 (%d, %d, %d, %d) differs from the paired plan's output site (%d, %d, %d, %d)", w[0], w[1],
           w[2], w[3] + 100, w[0], w[1], w[2], w[3]);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, c, f.n_out, f.sparse, VC_ERR_INVALID_ARGUMENT, needle);
  memcpy(c, f.out_coords, (size_t)f.n_out * 4 * sizeof *c);
  /* Same set, other order: order matters, since row i of the inverse input is output i. */
  memcpy(c, f.out_coords + 4, 4 * sizeof *c);
  memcpy(c + 4, f.out_coords, 4 * sizeof *c);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, c, f.n_out, f.sparse, VC_ERR_INVALID_ARGUMENT, "coords row 0");
  /* A different n. */
  memcpy(c, f.out_coords, (size_t)f.n_out * 4 * sizeof *c);
  snprintf(needle, sizeof needle, "n = %lld, but the paired plan has %lld output sites", (long long)(f.n_out - 1),
           (long long)f.n_out);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, c, f.n_out - 1, f.sparse, VC_ERR_INVALID_ARGUMENT, needle);
  c[4 * f.n_out] = 1, c[4 * f.n_out + 1] = 99, c[4 * f.n_out + 2] = 99, c[4 * f.n_out + 3] = 99;
  snprintf(needle, sizeof needle, "n = %lld, but the paired plan has %lld output sites", (long long)(f.n_out + 1),
           (long long)f.n_out);
  EXPECT_PLAN_FAIL(f.ctx, f.ctx, &f.inv, c, f.n_out + 1, f.sparse, VC_ERR_INVALID_ARGUMENT, needle);
  free(c);
  pf_free(&f);
}

static void test_errors_plan_inverse_other_context(void) {
  pair_fixture f;
  pf_init(&f);
  vc_context *other = cpu_ctx();
  EXPECT_PLAN_FAIL(other, other, &f.inv, NULL, 0, f.sparse, VC_ERR_INVALID_ARGUMENT,
                   "paired plan belongs to a different context");
  vc_context_destroy(other);
  pf_free(&f);
}

static void test_errors_plan_paired_for_non_inverse(void) {
  pair_fixture f;
  pf_init(&f);
  for (int k = 0; k < 3; k++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, direct_kinds[k], 3, direct_kinds[k] == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
    char needle[128];
    snprintf(needle, sizeof needle, "paired is given, but only an inverse conv takes a paired plan (kind is %s)",
             vc_kind_name(direct_kinds[k]));
    EXPECT_PLAN_FAIL(f.ctx, f.ctx, &d, f.coords, 40, f.sparse, VC_ERR_INVALID_ARGUMENT, needle);
  }
  pf_free(&f);
}

/* Every failure path of vc_plan_create, including those that fail inside the backend after
 * allocating (duplicates, produced sites out of range, inverse coords differing). */
static void failing_creates(vc_context *ctx, const vc_plan *sparse, const int32_t *sparse_out, int64_t n_out) {
  vc_conv_desc d;
  int32_t *c = box_coords(50);
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  EXPECT_PLAN_FAIL(ctx, ctx, &d, NULL, 50, NULL, VC_ERR_INVALID_ARGUMENT, "coords is NULL");
  d.padding[0] = 0;
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 50, NULL, VC_ERR_INVALID_ARGUMENT, "padding[0]");
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 2, 0, 1);
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, -5, NULL, VC_ERR_OUT_OF_RANGE, "n = -5");
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 50, sparse, VC_ERR_INVALID_ARGUMENT, "paired is given");
  for (int k = 0; k < 3; k++) {
    vc_conv_kind kind = k == 0 ? VC_CONV_SUBMANIFOLD : k == 1 ? VC_CONV_SPARSE : VC_CONV_TRANSPOSED;
    vc_conv_desc_init(&d, kind, 3, kind == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
    int32_t keep = c[4 * 49 + 2];
    c[4 * 49 + 2] = VC_COORD_MAX + 1;
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 50, NULL, VC_ERR_OUT_OF_RANGE, "coords row 49");
    c[4 * 49 + 2] = keep;
    int32_t saved[4];
    memcpy(saved, c + 4 * 30, sizeof saved);
    memcpy(c + 4 * 30, c + 4 * 10, sizeof saved);
    EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 50, NULL, VC_ERR_DUPLICATE_COORDS, "coords rows 10 and 30");
    memcpy(c + 4 * 30, saved, sizeof saved);
  }
  vc_conv_desc_init(&d, VC_CONV_TRANSPOSED, 3, 2, 0, 1);
  int32_t keep = c[4 * 20 + 1];
  c[4 * 20 + 1] = VC_COORD_MAX;
  EXPECT_PLAN_FAIL(ctx, ctx, &d, c, 50, NULL, VC_ERR_OUT_OF_RANGE, "coords row 20");
  c[4 * 20 + 1] = keep;
  vc_conv_desc inv = *vc_plan_desc(sparse);
  inv.kind = VC_CONV_INVERSE;
  EXPECT_PLAN_FAIL(ctx, ctx, &inv, NULL, 0, NULL, VC_ERR_INVALID_ARGUMENT, "paired is NULL");
  int32_t *oc = malloc((size_t)n_out * 4 * sizeof *oc);
  memcpy(oc, sparse_out, (size_t)n_out * 4 * sizeof *oc);
  oc[4 * (n_out - 1) + 3] += 1000;
  char needle[64];
  snprintf(needle, sizeof needle, "coords row %lld", (long long)(n_out - 1));
  EXPECT_PLAN_FAIL(ctx, ctx, &inv, oc, n_out, sparse, VC_ERR_INVALID_ARGUMENT, needle);
  free(oc);
  free(c);
}

static void test_errors_plan_failure_leaks_nothing(void) {
  pair_fixture f;
  pf_init(&f);
  /* warm-up: one-time allocations. With several OpenMP threads some of them first appear
   * in the second round (656 bytes, for some seeds; never with OMP_NUM_THREADS=1), so the
   * measured rounds start after two. */
  for (int i = 0; i < 2; i++) failing_creates(f.ctx, f.sparse, f.out_coords, f.n_out);
#ifndef VC_TEST_ASAN
  /* Without ASan, heap bytes in use must not grow over repeated failures. Under ASan,
   * LeakSanitizer checks the same thing at exit (mallinfo2 does not see its heap). */
  size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 20; i++) failing_creates(f.ctx, f.sparse, f.out_coords, f.n_out);
  size_t after = mallinfo2().uordblks;
  CHECK(after == before, "heap in use grew from %zu to %zu bytes over 20 rounds of failing vc_plan_create", before,
        after);
#endif
  pf_free(&f);
}

/* ---- execute calls -------------------------------------------------------------------- */

static void test_errors_exec_null_ctx_plan_args(void) {
  fixture f;
  fx_init(&f);
  for (int pass = 0; pass < 3; pass++) {
    char needle[128];
    snprintf(needle, sizeof needle, "%s: ctx is NULL", pass_fn[pass]);
    EXPECT_EXEC(&f, NULL, run((vc_pass)pass, NULL, f.plan, &f.args, fx_io(&f), f.ws, f.ws_bytes),
                VC_ERR_INVALID_ARGUMENT, needle);
    snprintf(needle, sizeof needle, "%s: plan is NULL", pass_fn[pass]);
    EXPECT_EXEC(&f, f.ctx, run((vc_pass)pass, f.ctx, NULL, &f.args, fx_io(&f), f.ws, f.ws_bytes),
                VC_ERR_INVALID_ARGUMENT, needle);
    snprintf(needle, sizeof needle, "%s: args is NULL", pass_fn[pass]);
    EXPECT_EXEC(&f, f.ctx, run((vc_pass)pass, f.ctx, f.plan, NULL, fx_io(&f), f.ws, f.ws_bytes),
                VC_ERR_INVALID_ARGUMENT, needle);
  }
  fx_free(&f);
}

static void test_errors_exec_null_tensors(void) {
  fixture f;
  fx_init(&f);
  struct { vc_pass pass; const char *name; } cases[] = {
      {VC_PASS_FORWARD, "x"},        {VC_PASS_FORWARD, "w"},         {VC_PASS_FORWARD, "y"},
      {VC_PASS_BACKWARD_DATA, "dy"}, {VC_PASS_BACKWARD_DATA, "w"},   {VC_PASS_BACKWARD_DATA, "dx"},
      {VC_PASS_BACKWARD_WEIGHT, "x"}, {VC_PASS_BACKWARD_WEIGHT, "dy"}, {VC_PASS_BACKWARD_WEIGHT, "dw"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    io t = fx_io(&f);
    const char *n = cases[i].name;
    if (!strcmp(n, "x")) t.x = NULL;
    if (!strcmp(n, "w")) t.w = NULL;
    if (!strcmp(n, "y")) t.y = NULL;
    if (!strcmp(n, "dy")) t.dy = NULL;
    if (!strcmp(n, "dx")) t.dx = NULL;
    if (!strcmp(n, "dw")) t.dw = NULL;
    char needle[128];
    snprintf(needle, sizeof needle, "%s: %s is NULL", pass_fn[cases[i].pass], n);
    EXPECT_EXEC(&f, f.ctx, run(cases[i].pass, f.ctx, f.plan, &f.args, t, f.ws, f.ws_bytes), VC_ERR_INVALID_ARGUMENT,
                needle);
  }
  /* Controls: bias and db are optional. */
  io t = fx_io(&f);
  t.bias = NULL, t.db = NULL;
  CHECK_OK(f.ctx, run(VC_PASS_FORWARD, f.ctx, f.plan, &f.args, t, f.ws, f.ws_bytes));
  CHECK_OK(f.ctx, run(VC_PASS_BACKWARD_WEIGHT, f.ctx, f.plan, &f.args, t, f.ws, f.ws_bytes));
  fx_free(&f);
}

static void test_errors_exec_plan_other_context(void) {
  fixture f;
  fx_init(&f);
  vc_context *other = cpu_ctx();
  vc_conv_desc d = *vc_plan_desc(f.plan);
  vc_plan *foreign = make_plan(other, &d, f.coords, 60, NULL); /* same geometry, other context */
  for (int pass = 0; pass < 3; pass++) {
    char needle[128];
    snprintf(needle, sizeof needle, "%s: plan belongs to a different context", pass_fn[pass]);
    EXPECT_EXEC(&f, f.ctx, run((vc_pass)pass, f.ctx, foreign, &f.args, fx_io(&f), f.ws, f.ws_bytes),
                VC_ERR_INVALID_ARGUMENT, needle);
  }
  vc_plan_destroy(foreign);
  vc_context_destroy(other);
  fx_free(&f);
}

/* Runs one bad args struct through vc_conv_workspace_size and all three passes; true when
 * each returned `want` with `needle` in the message and wrote nothing. */
static bool expect_bad_args(fixture *f, const vc_conv_args *a, vc_status want, const char *needle, int line) {
  size_t bytes = 12345;
  bool ok = true;
  vc_test_scrub(f->ctx);
  vc_status s = vc_conv_workspace_size(f->plan, a, VC_PASS_FORWARD, &bytes);
  if (s != want || !vc_test_contains(vc_last_error(f->ctx), needle)) {
    vc_test_fail(__FILE__, line, "workspace_size", "vc_conv_workspace_size: %s, '%s' (expected %s, '%s')",
                 vc_status_string(s), vc_last_error(f->ctx), vc_status_string(want), needle);
    ok = false;
  }
  for (int pass = 0; pass < 3; pass++) {
    fx_arm(f);
    vc_test_scrub(f->ctx);
    s = run((vc_pass)pass, f->ctx, f->plan, a, fx_io(f), f->ws, f->ws_bytes);
    if (s != want || !vc_test_contains(vc_last_error(f->ctx), needle)) {
      vc_test_fail(__FILE__, line, pass_fn[pass], "%s: %s, '%s' (expected %s, '%s')", pass_fn[pass],
                   vc_status_string(s), vc_last_error(f->ctx), vc_status_string(want), needle);
      ok = false;
    }
    if (!fx_check_untouched(f, pass_fn[pass], __FILE__, line)) ok = false;
  }
  return ok;
}

static void test_errors_args_struct_size(void) {
  fixture f;
  fx_init(&f);
  const size_t sizes[3] = {0, sizeof(size_t), sizeof(vc_conv_args) - 1};
  for (int i = 0; i < 3; i++) {
    vc_conv_args a = f.args;
    a.struct_size = sizes[i];
    char needle[64];
    snprintf(needle, sizeof needle, "args->struct_size = %zu", sizes[i]);
    expect_bad_args(&f, &a, VC_ERR_INVALID_ARGUMENT, needle, __LINE__);
  }
  fx_free(&f);
}

typedef struct channel_case {
  fixture *f;
  vc_conv_args a;
  char needle[96];
} channel_case;

static bool channel_case_ok(void *p) {
  channel_case *c = p;
  return expect_bad_args(c->f, &c->a, VC_ERR_INVALID_ARGUMENT, c->needle, __LINE__);
}

static void test_errors_args_channels(void) {
  fixture f;
  fx_init(&f);
  /* The int64 extremes go through a child: multiplying them by row counts before the
   * range check would be signed overflow, which UBSan turns into an abort. */
  const int64_t bad[5] = {0, -1, VC_CHANNELS_MAX + 1, INT64_MIN, INT64_MAX};
  for (int i = 0; i < 5; i++)
    for (int which = 0; which < 2; which++) {
      channel_case c = {&f, f.args, ""};
      if (which == 0) c.a.in_channels = bad[i];
      else c.a.out_channels = bad[i];
      snprintf(c.needle, sizeof c.needle, "args->%s_channels = %lld is outside [1, 65536]", which ? "out" : "in",
               (long long)bad[i]);
      CHECK(vc_test_in_child(channel_case_ok, &c), "%s_channels = %lld: wrong answer, or the call crashed / hit undefined "
            "behaviour (see the sanitizer report above)", which ? "out" : "in", (long long)bad[i]);
    }
  /* Control: the limit itself is accepted by the size query. */
  vc_conv_args a = f.args;
  a.in_channels = VC_CHANNELS_MAX;
  size_t bytes = 0;
  CHECK_OK(f.ctx, vc_conv_workspace_size(f.plan, &a, VC_PASS_FORWARD, &bytes));
  fx_free(&f);
}

static void test_errors_args_bad_enums(void) {
  fixture f;
  fx_init(&f);
  const int bad[3] = {-1, 3, 100};
  for (int i = 0; i < 3; i++) {
    char needle[64];
    vc_conv_args a = f.args;
    a.dtype = (vc_dtype)bad[i];
    snprintf(needle, sizeof needle, "args->dtype = %d is not a vc_dtype", bad[i]);
    expect_bad_args(&f, &a, VC_ERR_INVALID_ARGUMENT, needle, __LINE__);
    a = f.args;
    a.math = (vc_math)(bad[i] == 3 ? 2 : bad[i]);
    snprintf(needle, sizeof needle, "args->math = %d is not a vc_math", (int)a.math);
    expect_bad_args(&f, &a, VC_ERR_INVALID_ARGUMENT, needle, __LINE__);
    a = f.args;
    a.algo = (vc_algo)(bad[i] == 3 ? 6 : bad[i]);
    snprintf(needle, sizeof needle, "args->algo = %d is not a vc_algo", (int)a.algo);
    expect_bad_args(&f, &a, VC_ERR_INVALID_ARGUMENT, needle, __LINE__);
    size_t bytes = 12345;
    snprintf(needle, sizeof needle, "pass = %d is not a vc_pass", bad[i]);
    EXPECT(f.ctx, vc_conv_workspace_size(f.plan, &f.args, (vc_pass)bad[i], &bytes), VC_ERR_INVALID_ARGUMENT, needle);
  }
  fx_free(&f);
}

static void test_errors_args_tf32_needs_f32(void) {
  fixture f;
  fx_init(&f);
  const vc_dtype dts[2] = {VC_DTYPE_F16, VC_DTYPE_BF16};
  for (int i = 0; i < 2; i++) {
    vc_conv_args a = f.args;
    a.dtype = dts[i], a.math = VC_MATH_TF32;
    char needle[128];
    snprintf(needle, sizeof needle, "args->math = VC_MATH_TF32 applies to f32 storage, but args->dtype = %d",
             (int)dts[i]);
    expect_bad_args(&f, &a, VC_ERR_INVALID_ARGUMENT, needle, __LINE__);
  }
  /* Control: TF32 with f32 runs (the CPU computes it in f32). */
  vc_conv_args a = f.args;
  a.math = VC_MATH_TF32;
  for (int pass = 0; pass < 3; pass++) CHECK_OK(f.ctx, run((vc_pass)pass, f.ctx, f.plan, &a, fx_io(&f), f.ws, f.ws_bytes));
  fx_free(&f);
}

static void test_errors_algo_unsupported_on_cpu(void) {
  fixture f;
  fx_init(&f);
  const vc_algo gpu_only[3] = {VC_ALGO_MASKED, VC_ALGO_IMPLICIT, VC_ALGO_GROUPED};
  const char *names[3] = {"args->algo = VC_ALGO_MASKED", "args->algo = VC_ALGO_IMPLICIT", "args->algo = VC_ALGO_GROUPED"};
  for (int i = 0; i < 3; i++) {
    vc_conv_args a = f.args;
    a.algo = gpu_only[i];
    expect_bad_args(&f, &a, VC_ERR_UNSUPPORTED, names[i], __LINE__);
  }
  /* Controls: the CPU's algorithms run. */
  const vc_algo cpu[3] = {VC_ALGO_AUTO, VC_ALGO_EXPLICIT, VC_ALGO_REFERENCE};
  for (int i = 0; i < 3; i++) {
    vc_conv_args a = f.args;
    a.algo = cpu[i];
    for (int pass = 0; pass < 3; pass++)
      CHECK_OK(f.ctx, run((vc_pass)pass, f.ctx, f.plan, &a, fx_io(&f), f.ws, f.ws_bytes));
  }
  fx_free(&f);
}

static void test_errors_workspace(void) {
  fixture f;
  fx_init(&f);
  const vc_dtype dts[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  const vc_algo algos[2] = {VC_ALGO_AUTO, VC_ALGO_REFERENCE};
  for (int pass = 0; pass < 3; pass++)
    for (int t = 0; t < 3; t++)
      for (int g = 0; g < 2; g++) {
        vc_conv_args a = f.args;
        a.dtype = dts[t], a.algo = algos[g];
        size_t need = 0;
        CHECK_OK(f.ctx, vc_conv_workspace_size(f.plan, &a, (vc_pass)pass, &need));
        CHECK(need > 0, "%s %s algo %d: needs no workspace, so this test checks nothing", pass_fn[pass],
              vc_dtype_name(dts[t]), (int)algos[g]);
        if (need == 0) continue;
        char needle[160];
        snprintf(needle, sizeof needle, "%s: workspace_bytes = %zu, but this call needs %zu", pass_fn[pass], need - 1,
                 need);
        EXPECT_EXEC(&f, f.ctx, run((vc_pass)pass, f.ctx, f.plan, &a, fx_io(&f), f.ws, need - 1), VC_ERR_OUT_OF_MEMORY,
                    needle);
        snprintf(needle, sizeof needle, "%s: workspace_bytes = 0, but this call needs %zu", pass_fn[pass], need);
        EXPECT_EXEC(&f, f.ctx, run((vc_pass)pass, f.ctx, f.plan, &a, fx_io(&f), NULL, 0), VC_ERR_OUT_OF_MEMORY, needle);
        snprintf(needle, sizeof needle, "%s: workspace is NULL but %zu bytes are needed", pass_fn[pass], need);
        EXPECT_EXEC(&f, f.ctx, run((vc_pass)pass, f.ctx, f.plan, &a, fx_io(&f), NULL, need), VC_ERR_INVALID_ARGUMENT,
                    needle);
        /* Control: exactly `need` bytes at an odd address suffice (ASan checks the bound). */
        unsigned char *block = malloc(need + 1);
        CHECK_OK(f.ctx, run((vc_pass)pass, f.ctx, f.plan, &a, fx_io(&f), block + 1, need));
        free(block);
      }
  fx_free(&f);
}

static void test_errors_workspace_size_null(void) {
  fixture f;
  fx_init(&f);
  size_t bytes = 12345;
  /* No plan, so no context: the thread's slot. */
  EXPECT(NULL, vc_conv_workspace_size(NULL, &f.args, VC_PASS_FORWARD, &bytes), VC_ERR_INVALID_ARGUMENT,
         "vc_conv_workspace_size: plan is NULL");
  EXPECT(f.ctx, vc_conv_workspace_size(f.plan, &f.args, VC_PASS_FORWARD, NULL), VC_ERR_INVALID_ARGUMENT,
         "vc_conv_workspace_size: bytes is NULL");
  EXPECT(f.ctx, vc_conv_workspace_size(f.plan, NULL, VC_PASS_FORWARD, &bytes), VC_ERR_INVALID_ARGUMENT,
         "vc_conv_workspace_size: args is NULL");
  fx_free(&f);
}

static void test_errors_exec_output_overlap(void) {
  fixture f;
  fx_init(&f);
  int64_t nw = f.co * f.K * f.ci;
  struct overlap_case { vc_pass pass; const char *what; io t; } cases[9];
  int n = 0;
  io t;
#define OVERLAP(p_, what_, field_, at_) \
  (t = fx_io(&f), t.field_ = (at_), cases[n++] = (struct overlap_case){p_, what_, t})
  OVERLAP(VC_PASS_FORWARD, "output y overlaps x", y, f.x);
  OVERLAP(VC_PASS_FORWARD, "output y overlaps x", y, f.x + 1);
  OVERLAP(VC_PASS_FORWARD, "output y overlaps w", y, f.w + nw - 1);
  OVERLAP(VC_PASS_FORWARD, "output y overlaps bias", y, f.bias);
  OVERLAP(VC_PASS_BACKWARD_DATA, "output dx overlaps dy", dx, f.dy);
  OVERLAP(VC_PASS_BACKWARD_DATA, "output dx overlaps w", dx, f.w + 2);
  OVERLAP(VC_PASS_BACKWARD_WEIGHT, "output dw overlaps x", dw, f.x);
  OVERLAP(VC_PASS_BACKWARD_WEIGHT, "output dw overlaps dy", dw, f.dy);
  OVERLAP(VC_PASS_BACKWARD_WEIGHT, "output dw overlaps db", db, f.dw + nw - 1);
#undef OVERLAP
  for (int i = 0; i < n; i++)
    EXPECT_EXEC(&f, f.ctx, run(cases[i].pass, f.ctx, f.plan, &f.args, cases[i].t, f.ws, f.ws_bytes),
                VC_ERR_INVALID_ARGUMENT, cases[i].what);
  /* f16: extents are 2 bytes an element. y right after x, or x right after y, is fine; one
   * element less apart is not. */
  vc_conv_args a;
  size_t xb = (size_t)(f.n_in * f.ci) * 2, yb = (size_t)(f.n_out * f.co) * 2;
  unsigned char *blk = malloc(xb + yb);
  memset(blk, 0, xb + yb);
  t = fx_io(&f);
  t.x = blk, t.y = blk + xb;
  vc_conv_args_init(&a, f.ci, f.co, VC_DTYPE_F16);
  void *w16 = vc_rand_tensor(VC_DTYPE_F16, nw, NULL), *b16 = vc_rand_tensor(VC_DTYPE_F16, f.co, NULL);
  t.w = w16, t.bias = b16;
  CHECK_OK(f.ctx, run(VC_PASS_FORWARD, f.ctx, f.plan, &a, t, f.ws, f.ws_bytes));
  t.y = blk + xb - 2;
  EXPECT(f.ctx, run(VC_PASS_FORWARD, f.ctx, f.plan, &a, t, f.ws, f.ws_bytes), VC_ERR_INVALID_ARGUMENT,
         "output y overlaps x");
  t.y = blk, t.x = blk + yb;
  CHECK_OK(f.ctx, run(VC_PASS_FORWARD, f.ctx, f.plan, &a, t, f.ws, f.ws_bytes));
  t.x = blk + yb - 2;
  EXPECT(f.ctx, run(VC_PASS_FORWARD, f.ctx, f.plan, &a, t, f.ws, f.ws_bytes), VC_ERR_INVALID_ARGUMENT,
         "output y overlaps x");
  free(blk), free(w16), free(b16);
  fx_free(&f);
}

static void test_errors_plan_queries_null(void) {
  fixture f;
  fx_init(&f);
  EXPECT(NULL, vc_plan_out_coords(NULL, (int32_t *)f.y, NULL), VC_ERR_INVALID_ARGUMENT, "vc_plan_out_coords: plan is NULL");
  EXPECT(f.ctx, vc_plan_out_coords(f.plan, NULL, NULL), VC_ERR_INVALID_ARGUMENT, "vc_plan_out_coords: coords_out is NULL");
  int64_t off[28];
  EXPECT(NULL, vc_plan_kernel_map(NULL, off, NULL, NULL, NULL), VC_ERR_INVALID_ARGUMENT, "vc_plan_kernel_map: plan is NULL");
  CHECK(vc_plan_in_count(NULL) == -1 && vc_plan_out_count(NULL) == -1 && vc_plan_kernel_volume(NULL) == -1 &&
            vc_plan_pair_count(NULL) == -1 && vc_plan_desc(NULL) == NULL,
        "NULL plan getters: %lld %lld %d %lld %p", (long long)vc_plan_in_count(NULL),
        (long long)vc_plan_out_count(NULL), vc_plan_kernel_volume(NULL), (long long)vc_plan_pair_count(NULL),
        (const void *)vc_plan_desc(NULL));
  vc_plan_destroy(NULL);
  fx_free(&f);
}

/* ---- the valid edge: N = 0 ------------------------------------------------------------ */

static bool all_zero(vc_dtype dt, const void *t, int64_t n) {
  double *v = vc_to_f64(dt, t, n);
  bool z = true;
  for (int64_t i = 0; i < n; i++) z = z && v[i] == 0.0;
  free(v);
  return z;
}

typedef struct empty_case {
  vc_context *ctx;
  vc_plan *plans[4]; /* one empty plan per kind */
  vc_algo algo;
  vc_pass pass;
} empty_case;

/* One pass with one algorithm on the empty plan of every kind and dtype: succeeds with
 * NULL row tensors, and backward-weight zeroes dw and db. */
static bool empty_pass_ok(void *arg) {
  const empty_case *e = arg;
  const vc_dtype dts[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  bool ok = true;
  for (int k = 0; k < 4; k++)
    for (int t = 0; t < 3; t++) {
      vc_plan *p = e->plans[k];
      if (!p) continue;
      const char *what = vc_kind_name(vc_plan_desc(p)->kind), *dn = vc_dtype_name(dts[t]);
      vc_conv_args a;
      vc_conv_args_init(&a, 3, 4, dts[t]);
      a.algo = e->algo;
      const int64_t nw = 4 * 27 * 3;
      void *w = vc_rand_tensor(dts[t], nw, NULL), *bias = vc_rand_tensor(dts[t], 4, NULL);
      void *dw = malloc((size_t)nw * 4), *db = malloc(16);
      size_t need = 777;
      vc_status s = vc_conv_workspace_size(p, &a, e->pass, &need);
      void *ws = s == VC_OK && need ? malloc(need) : NULL;
      CHECK(s == VC_OK, "%s %s: workspace query: %s", what, dn, vc_last_error(e->ctx));
      ok = ok && s == VC_OK;
      vc_status r[2] = {VC_OK, VC_OK};
      switch (e->pass) {
      case VC_PASS_FORWARD: /* x and y have no elements: NULL is allowed */
        r[0] = vc_conv_forward(e->ctx, p, &a, NULL, w, bias, NULL, ws, need, NULL);
        r[1] = vc_conv_forward(e->ctx, p, &a, NULL, w, NULL, NULL, ws, need, NULL);
        break;
      case VC_PASS_BACKWARD_DATA: r[0] = vc_conv_backward_data(e->ctx, p, &a, NULL, w, NULL, ws, need, NULL); break;
      default:
        vc_poison(dts[t], dw, nw);
        vc_poison(dts[t], db, 4);
        r[0] = vc_conv_backward_weight(e->ctx, p, &a, NULL, NULL, dw, db, ws, need, NULL);
        if (r[0] == VC_OK) {
          bool z = all_zero(dts[t], dw, nw) && all_zero(dts[t], db, 4);
          CHECK(z, "%s %s: dw or db not zeroed for N = 0", what, dn);
          ok = ok && z;
        }
        vc_poison(dts[t], dw, nw);
        r[1] = vc_conv_backward_weight(e->ctx, p, &a, NULL, NULL, dw, NULL, ws, need, NULL);
      }
      for (int i = 0; i < 2; i++) {
        CHECK(r[i] == VC_OK, "%s %s call %d: %s (%s)", what, dn, i, vc_status_string(r[i]), vc_last_error(e->ctx));
        ok = ok && r[i] == VC_OK;
      }
      free(ws), free(w), free(bias), free(dw), free(db);
    }
  return ok;
}

static void test_errors_empty_input_is_valid(void) {
  vc_context *ctx = cpu_ctx();
  int32_t dummy[4] = {0, 0, 0, 0}; /* a non-NULL coords pointer with n = 0 is fine too */
  empty_case e = {ctx, {NULL}, VC_ALGO_AUTO, VC_PASS_FORWARD};
  vc_plan *paired = NULL;
  for (int k = 0; k < 4; k++) {
    vc_conv_kind kind = all_kinds[k];
    vc_conv_desc d;
    vc_conv_desc_init(&d, kind, 3, kind == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
    vc_plan *p;
    if (kind == VC_CONV_INVERSE) {
      vc_conv_desc s = d;
      s.kind = VC_CONV_SPARSE;
      paired = make_plan(ctx, &s, NULL, 0, NULL);
      p = make_plan(ctx, &d, NULL, 0, paired);
    } else {
      vc_plan_destroy(make_plan(ctx, &d, dummy, 0, NULL));
      p = make_plan(ctx, &d, NULL, 0, NULL);
    }
    e.plans[k] = p;
    if (!p) continue;
    CHECK(vc_plan_in_count(p) == 0 && vc_plan_out_count(p) == 0 && vc_plan_pair_count(p) == 0 &&
              vc_plan_kernel_volume(p) == 27,
          "%s: empty plan has in %lld out %lld pairs %lld K %d", vc_kind_name(kind), (long long)vc_plan_in_count(p),
          (long long)vc_plan_out_count(p), (long long)vc_plan_pair_count(p), vc_plan_kernel_volume(p));
    CHECK_OK(ctx, vc_plan_out_coords(p, NULL, NULL));
    int64_t off[28];
    memset(off, 0xff, sizeof off);
    CHECK_OK(ctx, vc_plan_kernel_map(p, off, NULL, NULL, NULL));
    for (int r = 0; r <= 27; r++) CHECK(off[r] == 0, "%s: offsets[%d] = %lld", vc_kind_name(kind), r, (long long)off[r]);
    /* w still has elements when N = 0, so it is still required. */
    vc_conv_args a;
    vc_conv_args_init(&a, 3, 4, VC_DTYPE_F32);
    EXPECT(ctx, vc_conv_forward(ctx, p, &a, NULL, NULL, NULL, NULL, NULL, 0, NULL), VC_ERR_INVALID_ARGUMENT,
           "vc_conv_forward: w is NULL");
  }
  /* Each (algorithm, pass) in a child: an abort from UBSan names that pair alone. */
  const vc_algo algos[3] = {VC_ALGO_AUTO, VC_ALGO_EXPLICIT, VC_ALGO_REFERENCE};
  const char *algo_names[3] = {"VC_ALGO_AUTO", "VC_ALGO_EXPLICIT", "VC_ALGO_REFERENCE"};
  for (int g = 0; g < 3; g++)
    for (int pass = 0; pass < 3; pass++) {
      e.algo = algos[g], e.pass = (vc_pass)pass;
      CHECK(vc_test_in_child(empty_pass_ok, &e), "N = 0, %s, %s: failed, crashed or hit undefined behaviour (see above)",
            pass_fn[pass], algo_names[g]);
    }
  for (int k = 0; k < 4; k++) vc_plan_destroy(e.plans[k]);
  vc_plan_destroy(paired);
  vc_context_destroy(ctx);
}

const vc_test_case vc_tests_errors[] = {
    {"errors_context_null_out", test_errors_context_null_out},
    {"errors_context_bad_kind", test_errors_context_bad_kind},
    {"errors_context_cpu_device", test_errors_context_cpu_device},
    {"errors_context_cuda", test_errors_context_cuda},
    {"errors_plan_null_pointers", test_errors_plan_null_pointers},
    {"errors_plan_desc_struct_size", test_errors_plan_desc_struct_size},
    {"plan_desc_0_1_size_accepted", test_plan_desc_0_1_size_accepted},
    {"errors_plan_desc_output_bound", test_errors_plan_desc_output_bound},
    {"errors_plan_desc_bad_kind", test_errors_plan_desc_bad_kind},
    {"errors_plan_kernel_size", test_errors_plan_kernel_size},
    {"errors_plan_stride", test_errors_plan_stride},
    {"errors_plan_dilation", test_errors_plan_dilation},
    {"errors_plan_padding", test_errors_plan_padding},
    {"errors_plan_submanifold_geometry", test_errors_plan_submanifold_geometry},
    {"errors_plan_count", test_errors_plan_count},
    {"errors_plan_coords_out_of_range", test_errors_plan_coords_out_of_range},
    {"errors_plan_duplicate_coords", test_errors_plan_duplicate_coords},
    {"errors_plan_produced_site_out_of_range", test_errors_plan_produced_site_out_of_range},
    {"errors_plan_inverse_paired_missing", test_errors_plan_inverse_paired_missing},
    {"errors_plan_inverse_paired_wrong_kind", test_errors_plan_inverse_paired_wrong_kind},
    {"errors_plan_inverse_geometry", test_errors_plan_inverse_geometry},
    {"errors_plan_inverse_coords_differ", test_errors_plan_inverse_coords_differ},
    {"errors_plan_inverse_other_context", test_errors_plan_inverse_other_context},
    {"errors_plan_paired_for_non_inverse", test_errors_plan_paired_for_non_inverse},
    {"errors_plan_failure_leaks_nothing", test_errors_plan_failure_leaks_nothing},
    {"errors_exec_null_ctx_plan_args", test_errors_exec_null_ctx_plan_args},
    {"errors_exec_null_tensors", test_errors_exec_null_tensors},
    {"errors_exec_plan_other_context", test_errors_exec_plan_other_context},
    {"errors_args_struct_size", test_errors_args_struct_size},
    {"errors_args_channels", test_errors_args_channels},
    {"errors_args_bad_enums", test_errors_args_bad_enums},
    {"errors_args_tf32_needs_f32", test_errors_args_tf32_needs_f32},
    {"errors_algo_unsupported_on_cpu", test_errors_algo_unsupported_on_cpu},
    {"errors_workspace", test_errors_workspace},
    {"errors_workspace_size_null", test_errors_workspace_size_null},
    {"errors_exec_output_overlap", test_errors_exec_output_overlap},
    {"errors_plan_queries_null", test_errors_plan_queries_null},
    {"errors_empty_input_is_valid", test_errors_empty_input_is_valid},
    {NULL, NULL},
};
