/* fuzz_plan.c — libFuzzer target: any bytes as a convolution descriptor and a coordinate list
 * through vc_plan_create on a CPU context (library errors are fine, crashes are not), and
 * when a plan is made, its queries and the three passes with one channel.
 *
 * Input: byte 0 the kind (mod 5: 4 is no kind); byte 1 flags; bytes 2..16 per axis the
 * kernel size, stride, dilation, padding and output bound, each mapped to a small range
 * that reaches a little past the valid one; the rest coordinates, 4 bytes a site (batch and
 * three int8 axes, optionally moved next to the range's upper end) or with flag RAW 16
 * (four little-endian int32), at most 512 sites. An inverse plan pairs with the sparse plan
 * of the same descriptor.
 *
 * Beyond "no crash", a made plan must be right: every kernel-map pair satisfies the conv's
 * equation, pairs are unique (outputs ascend within an offset), their number is the
 * brute-force count of reachable (site, offset) pairs, sparse and transposed outputs ascend
 * and each has a pair, and a submanifold plan's outputs are its inputs. */
#include "voxconv.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

enum {
  OLD_DESC = 1,       /* a 0.1 descriptor (no output_bound) */
  RAW = 2,            /* int32 coordinates as given */
  NEAR_MAX = 4,       /* compact x moved to VC_COORD_MAX - 127 */
  INVERSE_COORDS = 8, /* an inverse plan gets its paired plan's output coordinates */
  RUN_PASSES = 16,
  BATCHES = 32 /* compact batches in [0, 4) instead of 0 */
};

static vc_context *cpu(void) {
  static vc_context *ctx;
  if (!ctx && vc_context_create(VC_DEVICE_CPU, 0, &ctx) != VC_OK) abort();
  return ctx;
}

static int32_t le32(const uint8_t *b) {
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

/* Forward, backward-data and backward-weight with Ci = Co = 1 must succeed on any plan. */
static void run_passes(vc_context *ctx, const vc_plan *p) {
  int64_t nin = vc_plan_in_count(p), nout = vc_plan_out_count(p), K = vc_plan_kernel_volume(p);
  vc_conv_args a;
  vc_conv_args_init(&a, 1, 1, VC_DTYPE_F32);
  float *x = calloc((size_t)nin + 1, 4), *y = calloc((size_t)nout + 1, 4), *w = calloc((size_t)K, 4), b = 0.5f;
  for (int64_t i = 0; i < nin; i++) x[i] = (float)(i % 7) - 3;
  for (int64_t i = 0; i < K; i++) w[i] = (float)(i % 5) - 2;
  for (int pass = 0; pass < 3; pass++) {
    size_t bytes = 0;
    if (vc_conv_workspace_size(p, &a, (vc_pass)pass, &bytes) != VC_OK) abort();
    void *ws = malloc(bytes ? bytes : 1);
    vc_status s = pass == 0   ? vc_conv_forward(ctx, p, &a, x, w, &b, y, ws, bytes, NULL)
                  : pass == 1 ? vc_conv_backward_data(ctx, p, &a, y, w, x, ws, bytes, NULL)
                              : vc_conv_backward_weight(ctx, p, &a, x, y, w, &b, ws, bytes, NULL);
    free(ws);
    if (s != VC_OK) abort();
  }
  free(x), free(y), free(w);
}

/* Lexicographic (batch, x, y, z) for small non-negative and negative values alike; a qsort
 * and bsearch comparator too. */
static int site_order(const void *pa, const void *pb) {
  const int32_t *a = pa, *b = pb;
  for (int k = 0; k < 4; k++)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

/* Kernel offset r as (r0, r1, r2), last axis fastest. */
static void offset_of(const vc_conv_desc *d, int64_t r, int64_t o[3]) {
  o[2] = r % d->kernel_size[2], o[1] = r / d->kernel_size[2] % d->kernel_size[1];
  o[0] = r / ((int64_t)d->kernel_size[2] * d->kernel_size[1]);
}

/* Site far = near * s - pad + r * d, batch equal: the one equation of every kind. */
static bool reaches(const vc_conv_desc *d, const int32_t *near, const int32_t *far, int64_t r) {
  int64_t o[3];
  offset_of(d, r, o);
  if (near[0] != far[0]) return false;
  for (int a = 0; a < 3; a++)
    if ((int64_t)far[1 + a] != (int64_t)near[1 + a] * d->stride[a] - d->padding[a] + o[a] * d->dilation[a])
      return false;
  return true;
}

static bool in_bound(const vc_conv_desc *d, const int64_t *p) {
  for (int a = 0; a < 3; a++)
    if (d->output_bound[a] > 0 && (p[a] < 0 || p[a] >= d->output_bound[a])) return false;
  return true;
}

/* The pairs d's geometry reaches from input sites q[0..n), counted directly. */
static int64_t brute_pairs(const vc_conv_desc *d, const int32_t *q, int64_t n) {
  const vc_conv_kind kind = d->kind;
  int64_t K = (int64_t)d->kernel_size[0] * d->kernel_size[1] * d->kernel_size[2], count = 0;
  int32_t *sorted = malloc(((size_t)n + 1) * 4 * sizeof *sorted);
  if (kind == VC_CONV_SUBMANIFOLD) { /* only its lookups search the sites */
    memcpy(sorted, q, (size_t)n * 4 * sizeof *sorted);
    qsort(sorted, (size_t)n, 4 * sizeof *sorted, site_order);
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t r = 0; r < K; r++) {
      int64_t o[3], p[3];
      offset_of(d, r, o);
      bool ok = true;
      for (int a = 0; a < 3; a++) {
        int64_t t = q[4 * i + 1 + a], off = o[a] * d->dilation[a];
        if (kind == VC_CONV_TRANSPOSED) p[a] = t * d->stride[a] - d->padding[a] + off;
        else if (kind == VC_CONV_SUBMANIFOLD) p[a] = t - d->padding[a] + off; /* the input it reads */
        else {
          ok = ok && (t + d->padding[a] - off) % d->stride[a] == 0;
          p[a] = (t + d->padding[a] - off) / d->stride[a];
        }
      }
      if (kind == VC_CONV_SUBMANIFOLD) {
        int32_t key[4] = {q[4 * i], (int32_t)p[0], (int32_t)p[1], (int32_t)p[2]};
        ok = bsearch(key, sorted, (size_t)n, 4 * sizeof *sorted, site_order) != NULL;
      } else {
        ok = ok && in_bound(d, p);
      }
      count += ok;
    }
  free(sorted);
  return count;
}

/* Queries every plan answers, checked against the geometry (see the top). `in` holds the
 * plan's input sites; want_pairs is the brute-force count under the plan's own (validated)
 * descriptor, which a 0.1 caller's shorter struct leaves unbounded. */
static void inspect(vc_context *ctx, const vc_plan *p, const int32_t *in, int64_t n, int64_t want_pairs, bool passes) {
  const vc_conv_desc *d = vc_plan_desc(p);
  int64_t nout = vc_plan_out_count(p), pairs = vc_plan_pair_count(p), K = vc_plan_kernel_volume(p);
  int32_t *oc = malloc(((size_t)nout + 1) * 4 * sizeof *oc);
  int64_t *off = malloc(((size_t)K + 1) * sizeof *off);
  int32_t *pin = malloc(((size_t)pairs + 1) * sizeof *pin), *pout = malloc(((size_t)pairs + 1) * sizeof *pout);
  char *used = calloc((size_t)nout + 1, 1);
  if (vc_plan_in_count(p) != n || pairs != want_pairs) abort();
  if (vc_plan_out_coords(p, oc, NULL) != VC_OK || vc_plan_kernel_map(p, off, pin, pout, NULL) != VC_OK) abort();
  if (off[0] != 0 || off[K] != pairs) abort();
  for (int64_t r = 0; r < K; r++)
    for (int64_t e = off[r]; e < off[r + 1]; e++) {
      if (pin[e] < 0 || pin[e] >= n || pout[e] < 0 || pout[e] >= nout) abort();
      if (e > off[r] && pout[e] <= pout[e - 1]) abort();
      const int32_t *qi = in + 4 * (int64_t)pin[e], *po = oc + 4 * (int64_t)pout[e];
      /* transposed: the input writes the output; inverse: the sparse output (this plan's input)
       * reaches its input; submanifold and sparse: the output reads the input */
      bool ok = d->kind == VC_CONV_TRANSPOSED || d->kind == VC_CONV_INVERSE ? reaches(d, qi, po, r)
                                                                          : reaches(d, po, qi, r);
      if (!ok) abort();
      used[pout[e]] = 1;
    }
  if (d->kind == VC_CONV_SUBMANIFOLD && (nout != n || memcmp(oc, in, (size_t)n * 4 * sizeof *oc))) abort();
  if (d->kind == VC_CONV_SPARSE || d->kind == VC_CONV_TRANSPOSED)
    for (int64_t o = 0; o < nout; o++)
      if (!used[o] || (o && site_order(oc + 4 * (o - 1), oc + 4 * o) >= 0)) abort();
  if (passes) run_passes(ctx, p);
  free(oc), free(off), free(pin), free(pout), free(used);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  if (len < 17) return 0;
  vc_context *ctx = cpu();
  const uint8_t flags = data[1], *g = data + 2;
  vc_conv_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = flags & OLD_DESC ? VC_CONV_DESC_SIZE_0_1 : sizeof d;
  d.kind = (vc_conv_kind)(data[0] % 5);
  for (int a = 0; a < 3; a++) {
    d.kernel_size[a] = g[a] % 9;           /* 0 .. 8 */
    d.stride[a] = g[3 + a] % 6;            /* 0 .. 5 */
    d.dilation[a] = g[6 + a] % 6;          /* 0 .. 5 */
    d.padding[a] = (int32_t)(g[9 + a] % 40) - 4;       /* -4 .. 35 */
    d.output_bound[a] = (int32_t)(g[12 + a] % 80) - 8; /* -8 .. 71 */
  }
  const uint8_t *c = data + 17;
  size_t per = flags & RAW ? 16 : 4, rest = len - 17;
  int64_t n = (int64_t)(rest / per > 512 ? 512 : rest / per);
  int32_t *coords = malloc(((size_t)n + 1) * 4 * sizeof *coords);
  for (int64_t i = 0; i < n; i++, c += per)
    for (int k = 0; k < 4; k++)
      coords[4 * i + k] = flags & RAW ? le32(c + 4 * k)
                          : k == 0    ? (flags & BATCHES ? c[0] % 4 : 0)
                                      : (int8_t)c[k] + (k == 1 && (flags & NEAR_MAX) ? VC_COORD_MAX - 127 : 0);

  vc_plan *sparse = NULL, *p = NULL;
  if (d.kind == VC_CONV_INVERSE) {
    vc_conv_desc sd = d;
    sd.kind = VC_CONV_SPARSE;
    if (vc_plan_create(ctx, &sd, coords, n, NULL, NULL, &sparse) == VC_OK) {
      int64_t m = vc_plan_out_count(sparse);
      int32_t *oc = malloc(((size_t)m + 1) * 4 * sizeof *oc);
      if (vc_plan_out_coords(sparse, oc, NULL) != VC_OK) abort();
      vc_plan_create(ctx, &d, flags & INVERSE_COORDS ? oc : NULL, m, sparse, NULL, &p);
      if (p) inspect(ctx, p, oc, m, brute_pairs(vc_plan_desc(sparse), coords, n), flags & RUN_PASSES);
      free(oc);
    }
  } else if (vc_plan_create(ctx, &d, coords, n, NULL, NULL, &p) == VC_OK) {
    inspect(ctx, p, coords, n, brute_pairs(vc_plan_desc(p), coords, n), flags & RUN_PASSES);
  }
  vc_plan_destroy(p);
  vc_plan_destroy(sparse);
  free(coords);
  return 0;
}
