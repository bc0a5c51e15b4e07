/* test_misc.c — f16/bf16 conversions against an independent reference, the conversion
 * helpers' argument errors, status texts, version, descriptor defaults, dtype sizes. */
#include "vc_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- independent reference: decode from the bit fields, round by searching the sorted
 * table of representable magnitudes (ties to the even pattern) --------------------------- */

static double half_value(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t h) {
  int e = (h >> 7) & 255, m = h & 127;
  double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
  return (h & 0x8000) ? -v : v;
}

/* Magnitudes of patterns 0..top, where `top` is +inf, entered as the next power of two so
 * that values at or past the midpoint above the largest finite value overflow (IEEE). */
typedef struct table {
  double v[0x7f81];
  int top;
} table;

static table half_tab, bf16_tab;

static void tables_init(void) {
  half_tab.top = 0x7c00;
  for (int h = 0; h < 0x7c00; h++) half_tab.v[h] = half_value((uint16_t)h);
  half_tab.v[0x7c00] = 65536.0;
  bf16_tab.top = 0x7f80;
  for (int h = 0; h < 0x7f80; h++) bf16_tab.v[h] = bf16_value((uint16_t)h);
  bf16_tab.v[0x7f80] = ldexp(1.0, 128);
}

/* Nearest pattern to the non-negative, non-NaN magnitude a; ties to the even pattern. */
static uint16_t ref_round_mag(const table *t, double a) {
  if (a >= t->v[t->top]) return (uint16_t)t->top;
  int lo = 0, hi = t->top; /* t->v[lo] <= a < t->v[hi] */
  while (hi - lo > 1) {
    int m = (lo + hi) / 2;
    if (t->v[m] <= a) lo = m;
    else hi = m;
  }
  double mid = (t->v[lo] + t->v[hi]) / 2; /* exact: both have few significant bits */
  if (a < mid) return (uint16_t)lo;
  if (a > mid) return (uint16_t)hi;
  return (uint16_t)((lo & 1) ? hi : lo);
}

/* Expected pattern for f; returns false for NaN (any NaN pattern is then accepted). */
static bool ref_round(const table *t, float f, uint16_t *out) {
  if (isnan(f)) return false;
  *out = (uint16_t)(ref_round_mag(t, fabs((double)f)) | (signbit(f) ? 0x8000 : 0));
  return true;
}

static bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

/* ---- decode and round trip of all 65536 patterns -------------------------------------- */

static void check_all_patterns(vc_dtype dt) {
  const bool f16 = dt == VC_DTYPE_F16;
  uint16_t *h = malloc(65536 * sizeof *h), *back = malloc(65536 * sizeof *back);
  float *f = malloc(65536 * sizeof *f);
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  CHECK_OK(NULL, vc_convert_to_f32(dt, h, f, 65536));
  CHECK_OK(NULL, vc_convert_from_f32(dt, f, back, 65536));
  int bad = 0;
  for (int i = 0; i < 65536 && bad < 8; i++) {
    double want = f16 ? half_value(h[i]) : bf16_value(h[i]);
    bool nan = f16 ? is_half_nan(h[i]) : is_bf16_nan(h[i]);
    if (nan) {
      if (!isnan(f[i]) || !(f16 ? is_half_nan(back[i]) : is_bf16_nan(back[i]))) {
        CHECK(false, "%s 0x%04x (NaN) -> %a -> 0x%04x: NaN lost", vc_dtype_name(dt), h[i], f[i], back[i]);
        bad++;
      }
      continue;
    }
    /* exact value and sign (so -0 stays -0), then exactly the same pattern back */
    if ((double)f[i] != want || !signbit(f[i]) != !signbit(want) || back[i] != h[i]) {
      CHECK(false, "%s 0x%04x -> %a (expected %a) -> 0x%04x", vc_dtype_name(dt), h[i], f[i], want, back[i]);
      bad++;
    }
  }
  free(h), free(back), free(f);
}

static void test_misc_f16_all_patterns(void) { check_all_patterns(VC_DTYPE_F16); }
static void test_misc_bf16_all_patterns(void) { check_all_patterns(VC_DTYPE_BF16); }

/* ---- float -> half/bf16 rounding on many floats ---------------------------------------- */

/* The bits of an exact tie between patterns h and h + 1 of t, h random in [0, max_h]; with
 * `neighbour`, of the float one ulp either side of it. */
static uint32_t tie_bits(const table *t, int max_h, const char *name, bool neighbour) {
  int h = vc_rand_int(0, max_h);
  float x = (float)((t->v[h] + t->v[h + 1]) / 2);
  CHECK((double)x == (t->v[h] + t->v[h + 1]) / 2, "%s midpoint %d is not a float", name, h);
  if (neighbour) x = nextafterf(x, (vc_rand_u64() & 1) ? INFINITY : 0.0f);
  return f32_bits(x);
}

/* Floats that exercise every rounding region: random bits (all exponents, NaNs, infs),
 * dense sampling of each format's range, exact ties and their neighbours, subnormals. */
static float *rounding_inputs(int64_t *count) {
  static const uint32_t special[] = {
      0x00000000, 0x80000000, 0x3f800000, 0x477fe000 /* 65504 */, 0x477fefff, 0x477ff000 /* 65520 */,
      0x477ff001, 0x47800000 /* 65536 */, 0x7f7fffff /* FLT_MAX */, 0x7f7f8000 /* bf16 overflow tie */,
      0x7f7f7fff, 0x7f800000, 0xff800000, 0x7f800001 /* NaN, payload only in low bits */, 0x7fc00000,
      0xffc00000, 0x7f802000, 0x7fbfffff, 0xff800001, 0x33800000 /* 2^-24 */, 0x33000000 /* 2^-25: tie to 0 */,
      0x33000001, 0x32ffffff, 0x33400000 /* 1.5 * 2^-25 */, 0x38800000 /* 2^-14 */, 0x387fc000 /* tie at the
      subnormal/normal boundary */, 0x387fbfff, 0x00000001 /* FLT_TRUE_MIN */, 0x007fffff, 0x00800000, 0x80000001,
      0x3f808000 /* bf16 tie, even below */, 0x3f818000 /* bf16 tie, odd below */, 0x3f801000, 0x3f802000};
  const int64_t n_rand = 300000, n_special = (int64_t)(sizeof special / sizeof *special);
  int64_t n = n_special + n_rand, k = 0;
  float *f = malloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n_special; i++) f[k++] = bits_f32(special[i]);
  for (int64_t i = 0; i < n_rand; i++) {
    uint32_t sign = (uint32_t)(vc_rand_u64() & 1) << 31, u;
    switch (i % 7) {
    case 0: u = (uint32_t)vc_rand_u64(); break; /* the whole float space */
    case 1: /* exponents around the half range, random mantissa */
      u = sign | ((uint32_t)vc_rand_int(127 - 27, 127 + 17) << 23) | ((uint32_t)vc_rand_u64() & 0x7fffff);
      break;
    case 2: case 3: /* an exact half tie, or one float ulp either side of it */
      u = sign | tie_bits(&half_tab, 0x7bff, "half", i % 7 == 3);
      break;
    case 4: case 5: /* an exact bf16 tie (all exponents, subnormals too), or a neighbour */
      u = sign | tie_bits(&bf16_tab, 0x7f7f, "bf16", i % 7 == 5);
      break;
    default: /* f32 subnormals, and the half subnormal range */
      u = (vc_rand_u64() & 1) ? sign | ((uint32_t)vc_rand_u64() & 0x7fffff)
                              : sign | ((uint32_t)vc_rand_int(127 - 26, 127 - 14) << 23) |
                                    ((uint32_t)vc_rand_u64() & 0x7fffff);
    }
    f[k++] = bits_f32(u);
  }
  *count = n;
  return f;
}

static void check_rounding(vc_dtype dt) {
  tables_init();
  const table *t = dt == VC_DTYPE_F16 ? &half_tab : &bf16_tab;
  int64_t n;
  float *f = rounding_inputs(&n);
  uint16_t *got = malloc((size_t)n * sizeof *got);
  CHECK_OK(NULL, vc_convert_from_f32(dt, f, got, n));
  int64_t bad = 0, ties = 0;
  for (int64_t i = 0; i < n; i++) {
    uint16_t want;
    if (!ref_round(t, f[i], &want)) {
      bool nan = dt == VC_DTYPE_F16 ? is_half_nan(got[i]) : is_bf16_nan(got[i]);
      if (!nan && bad++ < 8) CHECK(false, "%s: NaN 0x%08x became 0x%04x", vc_dtype_name(dt), f32_bits(f[i]), got[i]);
      continue;
    }
    if (got[i] != want && bad++ < 8)
      CHECK(false, "%s: %a (0x%08x) -> 0x%04x, expected 0x%04x", vc_dtype_name(dt), f[i], f32_bits(f[i]), got[i],
            want);
    uint16_t m = want & 0x7fff;
    if (m > 0 && m < t->top) { /* count inputs that were exact ties, so the test is known to cover them */
      double a = fabs((double)f[i]), v = t->v[m];
      if (a != v && (a == (v + t->v[m - 1]) / 2 || a == (v + t->v[m + 1]) / 2)) ties++;
    }
  }
  CHECK(bad == 0, "%s: %lld of %lld conversions wrong", vc_dtype_name(dt), (long long)bad, (long long)n);
  CHECK(ties > 10000, "%s: only %lld exact ties were tested", vc_dtype_name(dt), (long long)ties);
  free(f), free(got);
}

static void test_misc_f16_rounding(void) { check_rounding(VC_DTYPE_F16); }
static void test_misc_bf16_rounding(void) { check_rounding(VC_DTYPE_BF16); }

/* Spot values a reader can check by hand, so the reference itself is anchored. */
static void test_misc_half_known_values(void) {
  const struct { float f; uint16_t half, bf16; } known[] = {
      {1.0f, 0x3c00, 0x3f80},        {-2.0f, 0xc000, 0xc000},        {65504.0f, 0x7bff, 0x4780},
      {65520.0f, 0x7c00, 0x4780},    {0x1p-24f, 0x0001, 0x3380},     {0x1p-25f, 0x0000, 0x3300},
      {0x1.8p-25f, 0x0001, 0x3340},  {0x1p-14f, 0x0400, 0x3880},     {1.0f + 0x1p-11f, 0x3c00, 0x3f80},
      {1.0f + 0x3p-11f, 0x3c02, 0x3f80}, {INFINITY, 0x7c00, 0x7f80}, {-0.0f, 0x8000, 0x8000},
      {1.0f + 0x1p-8f, 0x3c04, 0x3f80}, {1.0f + 0x3p-8f, 0x3c0c, 0x3f82}};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    uint16_t h, b;
    CHECK_OK(NULL, vc_convert_from_f32(VC_DTYPE_F16, &known[i].f, &h, 1));
    CHECK_OK(NULL, vc_convert_from_f32(VC_DTYPE_BF16, &known[i].f, &b, 1));
    CHECK(h == known[i].half, "f16(%a) = 0x%04x, expected 0x%04x", known[i].f, h, known[i].half);
    CHECK(b == known[i].bf16, "bf16(%a) = 0x%04x, expected 0x%04x", known[i].f, b, known[i].bf16);
  }
}

/* ---- conversion helpers: argument errors ---------------------------------------------- */

#define EXPECT_CONVERT(call, needle)                                                       \
  do {                                                                                     \
    memset(dst, 0x77, sizeof dst);                                                         \
    vc_test_scrub(NULL); /* the helpers have no context */                                 \
    CHECK_STATUS(NULL, call, VC_ERR_INVALID_ARGUMENT, needle);                             \
    for (size_t i_ = 0; i_ < sizeof dst; i_++)                                             \
      if (dst[i_] != 0x77) {                                                               \
        CHECK(false, "%s failed but wrote dst byte %zu", #call, i_);                      \
        break;                                                                             \
      }                                                                                    \
  } while (0)

static void test_misc_convert_errors(void) {
  float src[4] = {1.0f, -2.0f, 3.5f, 0.25f};
  unsigned char dst[16];
  const vc_dtype dts[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  for (int t = 0; t < 3; t++) {
    EXPECT_CONVERT(vc_convert_from_f32(dts[t], src, dst, -1), "vc_convert_from_f32: n = -1 is negative");
    EXPECT_CONVERT(vc_convert_to_f32(dts[t], src, (float *)dst, -1), "vc_convert_to_f32: n = -1 is negative");
    EXPECT_CONVERT(vc_convert_from_f32(dts[t], NULL, dst, 3), "vc_convert_from_f32: src is NULL");
    EXPECT_CONVERT(vc_convert_from_f32(dts[t], src, NULL, 3), "vc_convert_from_f32: dst is NULL");
    EXPECT_CONVERT(vc_convert_to_f32(dts[t], NULL, (float *)dst, 3), "vc_convert_to_f32: src is NULL");
    EXPECT_CONVERT(vc_convert_to_f32(dts[t], src, NULL, 3), "vc_convert_to_f32: dst is NULL");
  }
  const int bad[3] = {3, -1, 42};
  for (int i = 0; i < 3; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "vc_convert_from_f32: dtype = %d is not a vc_dtype", bad[i]);
    EXPECT_CONVERT(vc_convert_from_f32((vc_dtype)bad[i], src, dst, 2), needle);
    snprintf(needle, sizeof needle, "vc_convert_to_f32: dtype = %d is not a vc_dtype", bad[i]);
    EXPECT_CONVERT(vc_convert_to_f32((vc_dtype)bad[i], src, (float *)dst, 2), needle);
  }
  /* Control: f32 -> f32 is a copy. */
  float out[4];
  CHECK_OK(NULL, vc_convert_from_f32(VC_DTYPE_F32, src, out, 4));
  CHECK(memcmp(out, src, sizeof src) == 0, "f32 copy differs");
}

static bool zero_length_null_ok(void *unused) {
  const vc_dtype dts[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  bool ok = true;
  for (int t = 0; t < 3; t++) {
    vc_status a = vc_convert_from_f32(dts[t], NULL, NULL, 0), b = vc_convert_to_f32(dts[t], NULL, NULL, 0);
    CHECK(a == VC_OK && b == VC_OK, "%s, n = 0, NULL pointers: %s / %s (%s)", vc_dtype_name(dts[t]),
          vc_status_string(a), vc_status_string(b), vc_last_error(NULL));
    ok = ok && a == VC_OK && b == VC_OK;
  }
  return ok;
}

static void test_misc_convert_zero_length_null(void) {
  /* n = 0 with NULL pointers is valid: the header makes only "NULL with n > 0" an error. */
  CHECK(vc_test_in_child(zero_length_null_ok, NULL), "vc_convert_*(dtype, NULL, NULL, 0) failed, crashed or hit undefined "
        "behaviour (see the sanitizer report above)");
}

/* ---- status text, version, descriptor defaults ---------------------------------------- */

static void test_misc_status_strings(void) {
  static const char *names[] = {"VC_OK",           "VC_ERR_INVALID_ARGUMENT", "VC_ERR_OUT_OF_RANGE",
                                "VC_ERR_DUPLICATE_COORDS", "VC_ERR_UNSUPPORTED", "VC_ERR_OUT_OF_MEMORY",
                                "VC_ERR_DEVICE",   "VC_ERR_IO",               "VC_ERR_INTERNAL"};
  const int n = (int)(sizeof names / sizeof *names);
  CHECK(n == VC_ERR_INTERNAL + 1, "status table out of date");
  for (int i = 0; i < n; i++) {
    const char *s = vc_status_string((vc_status)i);
    CHECK(s && s[0], "status %d has no text", i);
    if (!s) continue;
    /* documented form: "VC_ERR_OUT_OF_RANGE: ..." */
    size_t len = strlen(names[i]);
    CHECK(strncmp(s, names[i], len) == 0 && s[len] == ':', "status %d text '%s' does not start with '%s:'", i, s,
          names[i]);
    for (int j = 0; j < i; j++)
      CHECK(strcmp(s, vc_status_string((vc_status)j)) != 0, "statuses %d and %d share the text '%s'", j, i, s);
  }
  const char *unknown = vc_status_string((vc_status)1000);
  CHECK(unknown && unknown[0], "unknown status has no text");
  for (int i = 0; unknown && i < n; i++)
    CHECK(strcmp(unknown, vc_status_string((vc_status)i)) != 0, "unknown status reads as status %d", i);
}

static void test_misc_version(void) {
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", VC_VERSION_MAJOR, VC_VERSION_MINOR, VC_VERSION_PATCH);
  const char *v = vc_version();
  CHECK(v && strcmp(v, want) == 0, "vc_version() = '%s', macros say '%s'", v ? v : "(null)", want);
}

static void test_misc_desc_init(void) {
  const vc_conv_kind kinds[4] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE, VC_CONV_INVERSE, VC_CONV_TRANSPOSED};
  vc_context *ctx = NULL;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &ctx));
  int32_t *coords = vc_rand_coords(20, 1, -3, 3);
  for (int k = 0; k < 4; k++)
    for (int ks = 1; ks <= 7; ks += 2)
      for (int dil = 1; dil <= 3; dil++)
        for (int pad = -2; pad <= 2; pad++) {
          vc_conv_desc d;
          memset(&d, 0xab, sizeof d); /* every field must be written */
          vc_conv_desc_init(&d, kinds[k], ks, 2, pad, dil);
          int32_t want_pad = pad >= 0 ? pad : kinds[k] == VC_CONV_SUBMANIFOLD ? (ks / 2) * dil : 0;
          CHECK(d.struct_size == sizeof(vc_conv_desc) && d.kind == kinds[k], "kind %d: struct_size %zu, kind %d",
                (int)kinds[k], d.struct_size, (int)d.kind);
          for (int a = 0; a < 3; a++)
            CHECK(d.kernel_size[a] == ks && d.stride[a] == 2 && d.padding[a] == want_pad && d.dilation[a] == dil,
                  "kind %d k %d d %d pad %d axis %d: got k %d s %d pad %d d %d (padding expected %d)", (int)kinds[k],
                  ks, dil, pad, a, d.kernel_size[a], d.stride[a], d.padding[a], d.dilation[a], want_pad);
        }
  /* The submanifold default is one vc_plan_create accepts. */
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 5, 1, -1, 2);
  vc_plan *p = NULL;
  CHECK_OK(ctx, vc_plan_create(ctx, &d, coords, 20, NULL, NULL, &p));
  CHECK(p && vc_plan_desc(p)->padding[1] == 4, "submanifold default padding %d", p ? vc_plan_desc(p)->padding[1] : -1);
  vc_plan_destroy(p);
  vc_conv_desc_init(NULL, VC_CONV_SPARSE, 3, 2, 0, 1); /* NULL is ignored, not a crash */
  free(coords);
  vc_context_destroy(ctx);
}

static void test_misc_args_init(void) {
  const vc_dtype dts[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  for (int t = 0; t < 3; t++) {
    vc_conv_args a;
    memset(&a, 0xab, sizeof a);
    vc_conv_args_init(&a, 17 + t, 300 - t, dts[t]);
    CHECK(a.struct_size == sizeof(vc_conv_args) && a.in_channels == 17 + t && a.out_channels == 300 - t &&
              a.dtype == dts[t] && a.math == VC_MATH_F32 && a.algo == VC_ALGO_AUTO,
          "args_init: size %zu ci %lld co %lld dtype %d math %d algo %d", a.struct_size, (long long)a.in_channels,
          (long long)a.out_channels, (int)a.dtype, (int)a.math, (int)a.algo);
  }
  vc_conv_args_init(NULL, 1, 1, VC_DTYPE_F32);
}

static void test_misc_dtype_size(void) {
  CHECK(vc_dtype_size(VC_DTYPE_F32) == 4, "f32 size %zu", vc_dtype_size(VC_DTYPE_F32));
  CHECK(vc_dtype_size(VC_DTYPE_F16) == 2, "f16 size %zu", vc_dtype_size(VC_DTYPE_F16));
  CHECK(vc_dtype_size(VC_DTYPE_BF16) == 2, "bf16 size %zu", vc_dtype_size(VC_DTYPE_BF16));
  const int bad[3] = {3, -1, 1000};
  for (int i = 0; i < 3; i++)
    CHECK(vc_dtype_size((vc_dtype)bad[i]) == 0, "dtype %d size %zu", bad[i], vc_dtype_size((vc_dtype)bad[i]));
}

const vc_test_case vc_tests_misc[] = {
    {"misc_f16_all_patterns", test_misc_f16_all_patterns},
    {"misc_bf16_all_patterns", test_misc_bf16_all_patterns},
    {"misc_f16_rounding", test_misc_f16_rounding},
    {"misc_bf16_rounding", test_misc_bf16_rounding},
    {"misc_half_known_values", test_misc_half_known_values},
    {"misc_convert_errors", test_misc_convert_errors},
    {"misc_convert_zero_length_null", test_misc_convert_zero_length_null},
    {"misc_status_strings", test_misc_status_strings},
    {"misc_version", test_misc_version},
    {"misc_desc_init", test_misc_desc_init},
    {"misc_args_init", test_misc_args_init},
    {"misc_dtype_size", test_misc_dtype_size},
    {NULL, NULL},
};
