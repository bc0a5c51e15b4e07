/* test_gpu.c — the CUDA backend against the CPU backend, which is the oracle:
 *   kmap_*         kernel maps of every kind identical to the CPU's; bad sites rejected alike
 *   conv_*         every algorithm x pass x dtype/math x kind against the f64 reference
 *   masked_tiles   the Hopper masked kernels at each tile width (VOXCONV_MASKED_BN), all passes
 *   masked_groups  the regrouped order of wide or large layers: built by the first call, waited for on
 *                  another stream, checked and bitwise repeatable
 *   masked_pairs   the masked pairs form (VOXCONV_MASKED_FORM=pairs), all passes; where it does not
 *                  apply, and in a deterministic context, the tiles form
 *   masked_wgrad_fallback  the masked weight gradient on the implicit kernel (unaligned or odd
 *                  operands): wide layers unsplit, with no fp32 copy of dW
 *   determinism    repeated runs agree; with VOXCONV_DETERMINISTIC=1 bitwise
 *   tune           vc_conv_tune's pick is what VC_ALGO_AUTO runs, and it lands in the cache file;
 *                  masked tile variants from the file apply, unknown ones are skipped;
 *                  a cached masked/rows line runs the wgrad's rows form
 *   graph_capture  execute calls recorded into a CUDA graph (so they neither allocate nor sync),
 *                  bf16's masked pairs form with its programmatic dependent launch among them
 *   large_*        feature tensors past 2^31 elements, sampled against an f64 host computation
 * Usage: vc_gpu_tests [--small] [name-substring]
 *   --small  only the small cases, at reduced sizes (for compute-sanitizer)
 * VC_TEST_SEED=S replays a run's random data. Exit status: 0 all passed, 1 a failure,
 * 2 bad usage, 77 skipped because no CUDA device is available. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */
#endif

#include "vc_test.h"

#include <cuda_runtime_api.h>

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static vc_context *g_cpu, *g_gpu; /* the oracle and the backend under test */
static cudaStream_t g_stream;     /* non-blocking, so work the library puts elsewhere races visibly */
static bool g_small;              /* --small */
static char g_cache_dir[512];     /* VOXCONV_CACHE_DIR of the run: no user cache leaks in or out */

/* ---- CUDA and memory helpers: every failure is recorded, callers go on with NULL -------- */

static bool cuda_ok(cudaError_t e, const char *expr, const char *file, int line) {
  if (e != cudaSuccess) vc_test_fail(file, line, expr, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  return e == cudaSuccess;
}
#define CU(call) cuda_ok((call), #call, __FILE__, __LINE__)

static void *host_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "vc_gpu_tests: out of host memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  return CU(cudaMalloc(&p, bytes ? bytes : 1)) ? p : NULL;
}

static void dev_free(void *p) {
  if (p) CU(cudaFree(p));
}

/* Pageable sources are staged before cudaMemcpyAsync returns, so `host` may be freed at once. */
static void *dev_upload(const void *host, size_t bytes) {
  void *d = dev_alloc(bytes);
  if (d && bytes) CU(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, g_stream));
  return d;
}

/* Copies device memory to the host and waits; on failure the copy reads as all ones. */
static bool dev_download(void *host, const void *dev, size_t bytes) {
  bool ok = dev && (bytes == 0 || (CU(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, g_stream)) &&
                                   CU(cudaStreamSynchronize(g_stream))));
  if (!ok) memset(host, 0xff, bytes);
  return ok;
}

/* NaN in every element, so whatever the library leaves unwritten is caught. */
static void dev_poison(vc_dtype dt, void *dev, int64_t n) {
  const size_t bytes = (size_t)n * vc_dtype_size(dt);
  void *h = host_alloc(bytes);
  vc_poison(dt, h, n);
  if (dev) CU(cudaMemcpyAsync(dev, h, bytes, cudaMemcpyHostToDevice, g_stream));
  free(h);
}

static bool on_gpu(const vc_context *ctx) { return vc_context_device_kind(ctx) == VC_DEVICE_CUDA; }
static void *side_stream(bool gpu) { return gpu ? (void *)g_stream : NULL; }
static void *side_alloc(bool gpu, size_t bytes) { return gpu ? dev_alloc(bytes) : host_alloc(bytes); }

/* Host copy of a buffer from side_alloc; the original is freed. */
static void *side_to_host(bool gpu, void *buf, size_t bytes) {
  if (!gpu) return buf;
  void *h = host_alloc(bytes);
  dev_download(h, buf, bytes);
  dev_free(buf);
  return h;
}

/* Index of the first element where a and b differ, or -1. */
static int64_t first_diff(const void *a, const void *b, int64_t n, size_t elem) {
  if (memcmp(a, b, (size_t)n * elem) == 0) return -1;
  for (int64_t i = 0; i < n; i++)
    if (memcmp((const char *)a + i * elem, (const char *)b + i * elem, elem)) return i;
  return -1;
}

/* Whether `msg` contains the decimal number v on its own (so row 12 does not match 123). */
static bool mentions_number(const char *msg, long long v) {
  char num[32];
  const size_t len = (size_t)snprintf(num, sizeof num, "%lld", v);
  for (const char *p = msg; (p = strstr(p, num)) != NULL; p++)
    if ((p == msg || !isdigit((unsigned char)p[-1])) && !isdigit((unsigned char)p[len])) return true;
  return false;
}

/* ---- geometry and plan pairs ------------------------------------------------------------ */

/* A box [lo, hi] per axis that n sites in nb batches fill to about 40 %: full neighbourhoods
 * and holes both occur, and the box straddles zero so coordinates go negative. */
static void box_for(int64_t n, int32_t nb, int32_t *lo, int32_t *hi) {
  int32_t side = (int32_t)ceil(cbrt((double)n / (0.4 * nb)));
  if (side < 2) side = 2;
  *lo = -side / 2;
  *hi = *lo + side - 1;
}

static int32_t *coords_for(int64_t n, int32_t nb) {
  int32_t lo, hi;
  box_for(n, nb, &lo, &hi);
  return vc_rand_coords(n, nb, lo, hi);
}

typedef struct plan_pair {
  vc_plan *cpu, *gpu;               /* the same geometry over the same sites */
  vc_plan *cpu_paired, *gpu_paired; /* the sparse plans an inverse plan inverts */
  int32_t *d_coords;                /* device copy of the sites */
  vc_conv_desc desc;
  int64_t n;
  char what[160];
} plan_pair;

static bool plan_make(vc_context *ctx, const vc_conv_desc *d, const int32_t *coords, int64_t n,
                      const vc_plan *paired, vc_plan **out, const char *what) {
  vc_status s = vc_plan_create(ctx, d, coords, n, paired, side_stream(on_gpu(ctx)), out);
  CHECK(s == VC_OK, "%s: vc_plan_create on the %s: %s (%s)", what, on_gpu(ctx) ? "GPU" : "CPU",
        vc_status_string(s), vc_last_error(ctx));
  return s == VC_OK;
}

/* Builds `d` over the same n sites on the CPU and on gctx (an inverse over a sparse plan of
 * the same geometry on each side). True when both exist with the same shape. */
static bool pair_build(plan_pair *pp, vc_context *gctx, const vc_conv_desc *d, const int32_t *coords, int64_t n) {
  memset(pp, 0, sizeof *pp);
  pp->desc = *d;
  pp->n = n;
  vc_desc_describe(pp->what, sizeof pp->what, d, n);
  pp->d_coords = dev_upload(coords, (size_t)n * 4 * sizeof *coords);
  const bool inverse = d->kind == VC_CONV_INVERSE;
  vc_conv_desc base = *d;
  if (inverse) base.kind = VC_CONV_SPARSE;
  bool ok = plan_make(g_cpu, &base, coords, n, NULL, inverse ? &pp->cpu_paired : &pp->cpu, pp->what) &&
            plan_make(gctx, &base, pp->d_coords, n, NULL, inverse ? &pp->gpu_paired : &pp->gpu, pp->what);
  if (ok && inverse)
    ok = plan_make(g_cpu, d, NULL, 0, pp->cpu_paired, &pp->cpu, pp->what) &&
         plan_make(gctx, d, NULL, 0, pp->gpu_paired, &pp->gpu, pp->what);
  if (!ok) return false;
  const bool same = vc_plan_in_count(pp->cpu) == vc_plan_in_count(pp->gpu) &&
                    vc_plan_out_count(pp->cpu) == vc_plan_out_count(pp->gpu) &&
                    vc_plan_kernel_volume(pp->cpu) == vc_plan_kernel_volume(pp->gpu);
  CHECK(same, "%s: the CPU maps %lld -> %lld sites, the GPU %lld -> %lld", pp->what,
        (long long)vc_plan_in_count(pp->cpu), (long long)vc_plan_out_count(pp->cpu),
        (long long)vc_plan_in_count(pp->gpu), (long long)vc_plan_out_count(pp->gpu));
  return same;
}

static void pair_free(plan_pair *pp) {
  vc_plan_destroy(pp->cpu);
  vc_plan_destroy(pp->gpu);
  vc_plan_destroy(pp->cpu_paired);
  vc_plan_destroy(pp->gpu_paired);
  dev_free(pp->d_coords);
  memset(pp, 0, sizeof *pp);
}

/* ---- kernel-map snapshots --------------------------------------------------------------- */

typedef struct map_snapshot {
  int64_t n_in, n_out, pairs;
  int32_t kvol;
  int32_t *out_coords;           /* [n_out, 4] */
  int64_t *offsets;              /* [kvol + 1] */
  int32_t *in_index, *out_index; /* [pairs] */
} map_snapshot;

/* Everything a plan exposes, copied to the host whichever device the plan lives on. */
static void snapshot_take(vc_context *ctx, const vc_plan *p, map_snapshot *s) {
  const bool gpu = on_gpu(ctx);
  s->n_in = vc_plan_in_count(p);
  s->n_out = vc_plan_out_count(p);
  s->pairs = vc_plan_pair_count(p);
  s->kvol = vc_plan_kernel_volume(p);
  const size_t cb = (size_t)s->n_out * 4 * sizeof(int32_t), pb = (size_t)s->pairs * sizeof(int32_t);
  void *oc = side_alloc(gpu, cb), *pin = side_alloc(gpu, pb), *pout = side_alloc(gpu, pb);
  s->offsets = host_alloc((size_t)(s->kvol + 1) * sizeof *s->offsets);
  CHECK_OK(ctx, vc_plan_out_coords(p, oc, side_stream(gpu)));
  CHECK_OK(ctx, vc_plan_kernel_map(p, s->offsets, pin, pout, side_stream(gpu)));
  s->out_coords = side_to_host(gpu, oc, cb);
  s->in_index = side_to_host(gpu, pin, pb);
  s->out_index = side_to_host(gpu, pout, pb);
}

static void snapshot_free(map_snapshot *s) {
  free(s->out_coords);
  free(s->offsets);
  free(s->in_index);
  free(s->out_index);
}

/* The GPU snapshot g must equal the CPU snapshot c exactly: counts, output sites in order,
 * offsets, and every pair in order. */
static void snapshots_equal(const map_snapshot *c, const map_snapshot *g, const char *what) {
  const bool counts = c->n_in == g->n_in && c->n_out == g->n_out && c->kvol == g->kvol && c->pairs == g->pairs;
  CHECK(counts, "%s: CPU has %lld inputs, %lld outputs, K=%d, %lld pairs; GPU %lld, %lld, K=%d, %lld", what,
        (long long)c->n_in, (long long)c->n_out, c->kvol, (long long)c->pairs, (long long)g->n_in,
        (long long)g->n_out, g->kvol, (long long)g->pairs);
  if (!counts) return;
  int64_t i = first_diff(c->out_coords, g->out_coords, c->n_out * 4, sizeof(int32_t));
  CHECK(i < 0, "%s: output row %lld is (%d,%d,%d,%d) on the CPU, (%d,%d,%d,%d) on the GPU", what,
        (long long)(i / 4), c->out_coords[i / 4 * 4], c->out_coords[i / 4 * 4 + 1], c->out_coords[i / 4 * 4 + 2],
        c->out_coords[i / 4 * 4 + 3], g->out_coords[i / 4 * 4], g->out_coords[i / 4 * 4 + 1],
        g->out_coords[i / 4 * 4 + 2], g->out_coords[i / 4 * 4 + 3]);
  i = first_diff(c->offsets, g->offsets, c->kvol + 1, sizeof(int64_t));
  CHECK(i < 0, "%s: kernel offset %lld starts at pair %lld on the CPU, %lld on the GPU", what, (long long)i,
        (long long)c->offsets[i < 0 ? 0 : i], (long long)g->offsets[i < 0 ? 0 : i]);
  const int32_t *cpu_side[2] = {c->in_index, c->out_index}, *gpu_side[2] = {g->in_index, g->out_index};
  for (int k = 0; k < 2; k++) {
    i = first_diff(cpu_side[k], gpu_side[k], c->pairs, sizeof(int32_t));
    CHECK(i < 0, "%s: pair %lld has %s row %d on the CPU, %d on the GPU", what, (long long)i, k ? "output" : "input",
          cpu_side[k][i < 0 ? 0 : i], gpu_side[k][i < 0 ? 0 : i]);
  }
}

static void compare_plans(vc_context *gctx, const vc_plan *cpu, const vc_plan *gpu, const char *what) {
  map_snapshot c, g;
  snapshot_take(g_cpu, cpu, &c);
  snapshot_take(gctx, gpu, &g);
  snapshots_equal(&c, &g, what);
  snapshot_free(&c);
  snapshot_free(&g);
}

/* ---- (a) kernel maps -------------------------------------------------------------------- */

/* The inverse plan once more, now given the paired plan's output sites (device memory);
 * then given them with one row moved, which both backends must reject naming that row and
 * both sites. */
static void inverse_with_coords(const plan_pair *pp) {
  const int64_t m = vc_plan_out_count(pp->gpu_paired);
  const size_t bytes = (size_t)m * 4 * sizeof(int32_t);
  int32_t *dc = dev_alloc(bytes);
  CHECK_OK(g_gpu, vc_plan_out_coords(pp->gpu_paired, dc, g_stream));
  vc_plan *p = NULL;
  if (plan_make(g_gpu, &pp->desc, dc, m, pp->gpu_paired, &p, pp->what)) compare_plans(g_gpu, pp->cpu, p, pp->what);
  vc_plan_destroy(p);
  if (m > 0) {
    int32_t *hc = host_alloc(bytes);
    dev_download(hc, dc, bytes);
    const int64_t row = m / 2;
    char site[64], moved[64];
    snprintf(site, sizeof site, "(%d, %d, %d, %d)", hc[4 * row], hc[4 * row + 1], hc[4 * row + 2], hc[4 * row + 3]);
    hc[4 * row + 3] += hc[4 * row + 3] < VC_COORD_MAX ? 1 : -1;
    snprintf(moved, sizeof moved, "coords row %lld (%d, %d, %d, %d) differs", (long long)row, hc[4 * row],
             hc[4 * row + 1], hc[4 * row + 2], hc[4 * row + 3]);
    int32_t *bad = dev_upload(hc, bytes);
    vc_context *ctxs[2] = {g_cpu, g_gpu};
    const vc_plan *paired[2] = {pp->cpu_paired, pp->gpu_paired};
    for (int b = 0; b < 2; b++) {
      p = NULL;
      const vc_status s = vc_plan_create(ctxs[b], &pp->desc, b ? bad : hc, m, paired[b], b ? g_stream : NULL, &p);
      const char *msg = vc_last_error(ctxs[b]);
      CHECK(s == VC_ERR_INVALID_ARGUMENT && p == NULL && vc_test_contains(msg, moved) && vc_test_contains(msg, site),
            "%s, a moved coords row on the %s: %s, plan %p, message '%s'", pp->what, b ? "GPU" : "CPU",
            vc_status_string(s), (void *)p, msg);
      vc_plan_destroy(p);
    }
    dev_free(bad);
    free(hc);
  }
  dev_free(dc);
}

static void kmap_check(vc_conv_kind kind, int k, int s, int dil, bool aniso, int64_t n, int32_t nb) {
  int32_t *coords = coords_for(n, nb);
  vc_conv_desc d;
  vc_rand_desc(&d, kind, k, s, dil, aniso, 12);
  plan_pair pp;
  if (pair_build(&pp, g_gpu, &d, coords, n)) {
    if (kind == VC_CONV_INVERSE) {
      compare_plans(g_gpu, pp.cpu_paired, pp.gpu_paired, pp.what);
      inverse_with_coords(&pp);
    }
    compare_plans(g_gpu, pp.cpu, pp.gpu, pp.what);
  }
  pair_free(&pp);
  free(coords);
}

static int64_t kmap_n(void) { return g_small ? 400 : 3000; }

static void test_kmap_submanifold(void) {
  for (int k = 1; k <= 5; k += 2)
    for (int dil = 1; dil <= 2; dil++)
      for (int aniso = 0; aniso < 2; aniso++) kmap_check(VC_CONV_SUBMANIFOLD, k, 1, dil, aniso, kmap_n(), 3);
}

/* Kernels 1..kmax (odd and even), strides 1-3, dilations 1-2; anisotropic for some. */
static void kmap_strided(vc_conv_kind kind, int kmax, int64_t n) {
  for (int k = 1; k <= kmax; k++)
    for (int s = 1; s <= 3; s++)
      for (int dil = 1; dil <= 2; dil++) kmap_check(kind, k, s, dil, k > 2 && (s + dil) % 2 == 1, n, 3);
}

static void test_kmap_sparse(void) { kmap_strided(VC_CONV_SPARSE, 5, kmap_n()); }
static void test_kmap_inverse(void) { kmap_strided(VC_CONV_INVERSE, 4, kmap_n()); }
/* Each input writes K sites, so fewer inputs keep the outputs comparable. */
static void test_kmap_transposed(void) { kmap_strided(VC_CONV_TRANSPOSED, 5, kmap_n() / 3); }

static void bad_sites_for(vc_conv_kind kind, int64_t n);
static void kmap_edges(int k, int dil, int32_t batches);

/* Hash tables and kernels spanning many blocks. */
static void test_kmap_large(void) {
  kmap_check(VC_CONV_SUBMANIFOLD, 3, 1, 1, false, 200000, 2);
  kmap_check(VC_CONV_SUBMANIFOLD, 5, 1, 2, true, 100000, 2);
  /* past 2^19 sites submanifold maps go through the brick table: its lookups (kernels and
   * dilations reaching past the neighbouring bricks too) and its input errors */
  kmap_check(VC_CONV_SUBMANIFOLD, 3, 1, 1, false, 600000, 2);
  kmap_check(VC_CONV_SUBMANIFOLD, 5, 1, 3, true, 550000, 3);
  bad_sites_for(VC_CONV_SUBMANIFOLD, 600000);
  /* 566 k sites each: bricks, against the range's faces. Spans of at most 5 cells an axis
   * (two bricks) take the lookups by candidate brick: 3x3x3 and 5x5x5 (125 offsets, four
   * chunks) at dilation 1, 3x3x3 at dilation 2; 5x5x5 at dilation 2 the general lookups. */
  kmap_edges(3, 1, 4096);
  kmap_edges(5, 1, 4096);
  kmap_edges(3, 2, 4096);
  kmap_edges(5, 2, 4096);
  kmap_check(VC_CONV_SPARSE, 2, 2, 1, false, 200000, 2);
  kmap_check(VC_CONV_INVERSE, 3, 2, 1, false, 100000, 2);
  kmap_check(VC_CONV_TRANSPOSED, 3, 2, 1, false, 50000, 2);
}

/* Sites far apart share no output, so each reaches its full count of outputs and the
 * GPU's bound on them must hold: with stride 2 and dilation 2 a 3-wide kernel reaches 3
 * outputs per axis, not ceil(3 / 2). Sparse, its inverse and transposed. */
static void test_kmap_isolated_sites(void) {
  const int64_t n = 2000;
  int32_t *c = malloc((size_t)n * 4 * sizeof *c);
  for (int64_t i = 0; i < n; i++) {
    c[4 * i] = (int32_t)(i % 2);
    c[4 * i + 1] = (int32_t)((i / 2) % 10) * 8 - 40;
    c[4 * i + 2] = (int32_t)((i / 20) % 10) * 8 - 40;
    c[4 * i + 3] = (int32_t)(i / 200) * 8 - 40;
  }
  const vc_conv_kind kinds[3] = {VC_CONV_SPARSE, VC_CONV_INVERSE, VC_CONV_TRANSPOSED};
  for (int k = 0; k < 3; k++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, kinds[k], 3, 2, 2, 2);
    plan_pair pp;
    if (pair_build(&pp, g_gpu, &d, c, n)) compare_plans(g_gpu, pp.cpu, pp.gpu, pp.what);
    pair_free(&pp);
  }
  free(c);
}

/* Submanifold sites packed against the faces of the coordinate range: neighbours past a
 * face do not exist. Each batch fills about 64 % of a 6 x 6 x 6 box (a fixed LCG), its cells
 * on each axis, by the batch's bits, the 6 lowest, the 6 highest, the 3 lowest and the 3
 * highest (so a lookup wrapping around the range would find sites), or -3 .. 2 (an inner
 * brick edge). On bricks (past 2^19 sites, or every size with -DVC_BRICK_MIN_SITES=0) the
 * lookups decide that a brick at a time, since the range is brick-aligned; the site table
 * a lookup at a time. */
static void kmap_edges(int k, int dil, int32_t batches) {
  int32_t *c = malloc((size_t)batches * 216 * 4 * sizeof *c);
  int64_t n = 0;
  uint32_t rng = 12345u;
  for (int32_t b = 0; b < batches; b++)
    for (int i = 0; i < 216; i++) {
      rng = rng * 1664525u + 1013904223u;
      if (rng >> 24 >= 164) continue; /* 164 / 256: 64 % */
      int32_t *r = c + 4 * n++;
      r[0] = b;
      for (int a = 0, cell = i; a < 3; a++, cell /= 6) {
        const int x = cell % 6;
        switch (b >> (2 * a) & 3) {
        case 0: r[1 + a] = VC_COORD_MIN + x; break;
        case 1: r[1 + a] = VC_COORD_MAX - 5 + x; break;
        case 2: r[1 + a] = x < 3 ? VC_COORD_MIN + x : VC_COORD_MAX - 5 + x; break;
        default: r[1 + a] = x - 3;
        }
      }
    }
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, k, 1, -1, dil);
  plan_pair pp;
  if (pair_build(&pp, g_gpu, &d, c, n)) compare_plans(g_gpu, pp.cpu, pp.gpu, pp.what);
  pair_free(&pp);
  free(c);
}

/* Small: 3x3x3 and 5x5x5 (the row kernels take a 125-offset map in four chunks of 32),
 * dilation 1 and 2; the site table, or bricks with -DVC_BRICK_MIN_SITES=0 (kmap_large
 * runs the bricks' cases at full size). */
static void test_kmap_edges(void) {
  for (int k = 3; k <= 5; k += 2)
    for (int dil = 1; dil <= 2; dil++) kmap_edges(k, dil, 64);
}

/* The CPU and the GPU must reject the input with the same status, and the GPU's message must
 * name the offending coordinate rows, as the CPU's does. */
static void expect_rejected(const vc_conv_desc *d, const int32_t *coords, int64_t n, vc_status want,
                            const int64_t *rows, int nrows, const char *what) {
  vc_plan *p = NULL;
  vc_status s = vc_plan_create(g_cpu, d, coords, n, NULL, NULL, &p);
  CHECK(s == want, "%s: the CPU oracle returned %s, expected %s", what, vc_status_string(s), vc_status_string(want));
  vc_plan_destroy(p);
  int32_t *dc = dev_upload(coords, (size_t)n * 4 * sizeof *coords);
  p = NULL;
  s = vc_plan_create(g_gpu, d, dc, n, NULL, g_stream, &p);
  const char *msg = vc_last_error(g_gpu);
  CHECK(s == want, "%s: the GPU returned %s, expected %s (%s)", what, vc_status_string(s), vc_status_string(want), msg);
  CHECK(p == NULL, "%s: a failed vc_plan_create left a plan in *out", what);
  CHECK(vc_test_contains(msg, "coords row"), "%s: message '%s' names no coords row", what, msg);
  for (int i = 0; i < nrows; i++)
    CHECK(mentions_number(msg, rows[i]), "%s: message '%s' does not name row %lld", what, msg, (long long)rows[i]);
  vc_plan_destroy(p);
  dev_free(dc);
}

/* One repeated site, then one site outside the range per axis; afterwards the context must
 * still build a correct plan (no error state left behind on the device). */
static void bad_sites_for(vc_conv_kind kind, int64_t n) {
  static const struct { int axis; int32_t value; } bad[] = {
      {0, -1}, {0, VC_BATCH_MAX}, {1, VC_COORD_MIN - 1}, {2, VC_COORD_MAX + 1}, {3, INT32_MAX}};
  const int64_t dup[2] = {123, 877}, row = 456;
  vc_conv_desc d;
  vc_conv_desc_init(&d, kind, 3, kind == VC_CONV_SUBMANIFOLD ? 1 : 2, -1, 1);
  int32_t *c = coords_for(n, 3), saved[4];
  char what[128];
  memcpy(saved, c + 4 * dup[1], sizeof saved);
  memcpy(c + 4 * dup[1], c + 4 * dup[0], sizeof saved);
  snprintf(what, sizeof what, "%s: row %lld repeats row %lld", vc_kind_name(kind), (long long)dup[1], (long long)dup[0]);
  expect_rejected(&d, c, n, VC_ERR_DUPLICATE_COORDS, dup, 2, what);
  memcpy(c + 4 * dup[1], saved, sizeof saved);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const int32_t keep = c[4 * row + bad[i].axis];
    c[4 * row + bad[i].axis] = bad[i].value;
    snprintf(what, sizeof what, "%s: row %lld column %d = %d", vc_kind_name(kind), (long long)row, bad[i].axis,
             bad[i].value);
    expect_rejected(&d, c, n, VC_ERR_OUT_OF_RANGE, &row, 1, what);
    c[4 * row + bad[i].axis] = keep;
  }
  plan_pair pp;
  if (pair_build(&pp, g_gpu, &d, c, n)) compare_plans(g_gpu, pp.cpu, pp.gpu, pp.what);
  pair_free(&pp);
  free(c);
}

static void test_kmap_bad_coords(void) {
  bad_sites_for(VC_CONV_SUBMANIFOLD, 1000);
  bad_sites_for(VC_CONV_SPARSE, 1000);
  bad_sites_for(VC_CONV_TRANSPOSED, 1000);
  /* Sites in range whose outputs are not: above the top and below the bottom. */
  static const struct { vc_conv_kind kind; int k, s, axis; int32_t value; } reach[] = {
      {VC_CONV_TRANSPOSED, 2, 2, 1, VC_COORD_MAX}, {VC_CONV_SPARSE, 3, 1, 2, VC_COORD_MIN}};
  const int64_t row = 456;
  for (size_t i = 0; i < sizeof reach / sizeof *reach; i++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, reach[i].kind, reach[i].k, reach[i].s, 0, 1);
    int32_t *c = coords_for(1000, 2);
    c[4 * row + reach[i].axis] = reach[i].value;
    char what[96];
    snprintf(what, sizeof what, "%s: row %lld reaches outside the range", vc_kind_name(reach[i].kind), (long long)row);
    expect_rejected(&d, c, 1000, VC_ERR_OUT_OF_RANGE, &row, 1, what);
    free(c);
  }
}

/* ---- (b) convolutions against the reference ---------------------------------------------- */

/* Tensor roles: inputs first, then outputs. */
enum { T_X, T_W, T_BIAS, T_DY, T_Y, T_DX, T_DW, T_DB, T_COUNT };
static const char *const role_name[T_COUNT] = {"x", "w", "bias", "dy", "y", "dx", "dw", "db"};
static const int pass_out[3][2] = {{T_Y, -1}, {T_DX, -1}, {T_DW, T_DB}};
#define GUARD 64 /* poisoned elements after each device output: catch writes past its end */
#define ALL_PASSES 7u

typedef struct conv_data {
  vc_conv_args args;      /* channels and dtype; math and algo are set per run */
  int64_t n[T_COUNT];     /* elements per role */
  void *host[T_COUNT];    /* inputs as stored */
  float *f32[T_COUNT];    /* inputs' exact values, and the reference's outputs */
  double *ref[T_COUNT];   /* reference outputs */
  void *dev[T_COUNT];     /* device tensors; outputs carry GUARD more elements */
} conv_data;

static vc_status run_pass(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass,
                          void *const t[T_COUNT], void *ws, size_t bytes, void *stream) {
  switch (pass) {
  case VC_PASS_FORWARD: return vc_conv_forward(ctx, p, a, t[T_X], t[T_W], t[T_BIAS], t[T_Y], ws, bytes, stream);
  case VC_PASS_BACKWARD_DATA: return vc_conv_backward_data(ctx, p, a, t[T_DY], t[T_W], t[T_DX], ws, bytes, stream);
  default: return vc_conv_backward_weight(ctx, p, a, t[T_X], t[T_DY], t[T_DW], t[T_DB], ws, bytes, stream);
  }
}

/* Fresh random inputs of dtype dt for the plan's shape, on the host and the device. */
static void data_make(conv_data *cd, const vc_plan *p, int64_t ci, int64_t co, vc_dtype dt) {
  memset(cd, 0, sizeof *cd);
  vc_conv_args_init(&cd->args, ci, co, dt);
  const int64_t nin = vc_plan_in_count(p), nout = vc_plan_out_count(p), nw = co * vc_plan_kernel_volume(p) * ci;
  const int64_t n[T_COUNT] = {nin * ci, nw, co, nout * co, nout * co, nin * ci, nw, co};
  const size_t es = vc_dtype_size(dt);
  memcpy(cd->n, n, sizeof n);
  for (int t = 0; t < T_COUNT; t++) {
    cd->f32[t] = host_alloc((size_t)n[t] * sizeof(float));
    if (t >= T_Y) {
      cd->dev[t] = dev_alloc((size_t)(n[t] + GUARD) * es);
      continue;
    }
    double *v;
    cd->host[t] = vc_rand_tensor(dt, n[t], &v);
    for (int64_t i = 0; i < n[t]; i++) cd->f32[t][i] = (float)v[i]; /* exact: f16/bf16 values fit f32 */
    free(v);
    cd->dev[t] = dev_upload(cd->host[t], (size_t)n[t] * es);
  }
}

/* The CPU reference (f64 accumulation) on the same values in f32 storage, so the oracle adds
 * no rounding of its own beyond f32. `passes` is a bit mask of vc_pass. */
static void data_reference(conv_data *cd, const vc_plan *cpu_plan, unsigned passes) {
  vc_conv_args a = cd->args;
  a.dtype = VC_DTYPE_F32, a.math = VC_MATH_F32, a.algo = VC_ALGO_REFERENCE;
  for (int pass = 0; pass < 3; pass++) {
    if (!(passes >> pass & 1)) continue;
    size_t bytes = 0;
    CHECK_OK(g_cpu, vc_conv_workspace_size(cpu_plan, &a, (vc_pass)pass, &bytes));
    void *ws = host_alloc(bytes), *tensors[T_COUNT];
    for (int i = 0; i < T_COUNT; i++) tensors[i] = cd->f32[i];
    CHECK_OK(g_cpu, run_pass(g_cpu, cpu_plan, &a, (vc_pass)pass, tensors, ws, bytes, NULL));
    free(ws);
    for (int i = 0; i < 2; i++) {
      const int t = pass_out[pass][i];
      if (t >= 0) cd->ref[t] = vc_to_f64(VC_DTYPE_F32, cd->f32[t], cd->n[t]);
    }
  }
}

static void data_free(conv_data *cd) {
  for (int t = 0; t < T_COUNT; t++) {
    free(cd->host[t]);
    free(cd->f32[t]);
    free(cd->ref[t]);
    dev_free(cd->dev[t]);
  }
  memset(cd, 0, sizeof *cd);
}

static void free_outputs(void *out[2]) {
  free(out[0]);
  free(out[1]);
  out[0] = out[1] = NULL;
}

static void poison_outputs(conv_data *cd, vc_pass pass) {
  for (int i = 0; i < 2; i++) {
    const int t = pass_out[pass][i];
    if (t >= 0) dev_poison(cd->args.dtype, cd->dev[t], cd->n[t] + GUARD);
  }
}

static bool guard_intact(vc_dtype dt, const void *tail, const char *role, const char *what) {
  unsigned char expect[GUARD * sizeof(float)];
  vc_poison(dt, expect, GUARD);
  const bool ok = memcmp(tail, expect, GUARD * vc_dtype_size(dt)) == 0;
  CHECK(ok, "%s: something was written past the end of %s", what, role);
  return ok;
}

/* Host copies (storage dtype) of a pass's outputs; out[1] is NULL for one-output passes. */
static bool download_outputs(const conv_data *cd, vc_pass pass, void *out[2], const char *what) {
  const size_t es = vc_dtype_size(cd->args.dtype);
  bool ok = true;
  out[0] = out[1] = NULL;
  for (int i = 0; i < 2; i++) {
    const int t = pass_out[pass][i];
    if (t < 0) continue;
    out[i] = host_alloc((size_t)(cd->n[t] + GUARD) * es);
    ok = dev_download(out[i], cd->dev[t], (size_t)(cd->n[t] + GUARD) * es) && ok;
    ok = guard_intact(cd->args.dtype, (char *)out[i] + cd->n[t] * es, role_name[t], what) && ok;
  }
  if (!ok) free_outputs(out);
  return ok;
}

/* One GPU run of `pass` with args `a`: outputs and workspace poisoned, the call, a sync, the
 * outputs copied back. False (and recorded) when anything failed. VC_ERR_UNSUPPORTED is a
 * failure: every algorithm must serve every pass, dtype and kind. */
static bool gpu_run(vc_context *ctx, const vc_plan *p, conv_data *cd, const vc_conv_args *a, vc_pass pass,
                    void *out[2], const char *what) {
  out[0] = out[1] = NULL;
  poison_outputs(cd, pass);
  size_t bytes = 0;
  void *ws = NULL;
  vc_status s = vc_conv_workspace_size(p, a, pass, &bytes);
  /* All ones (NaN in every dtype), so a workspace the library assumes zeroed shows. */
  if (s == VC_OK && bytes > 0 && (ws = dev_alloc(bytes)) != NULL) CU(cudaMemsetAsync(ws, 0xff, bytes, g_stream));
  if (s == VC_OK) s = run_pass(ctx, p, a, pass, cd->dev, ws, bytes, g_stream);
  CHECK(s == VC_OK, "%s: %s%s (%s)", what, vc_status_string(s),
        s == VC_ERR_UNSUPPORTED ? " -- every algorithm must serve every pass, dtype and kind" : "",
        vc_last_error(ctx));
  const bool ok = s == VC_OK && CU(cudaStreamSynchronize(g_stream));
  dev_free(ws);
  return ok && download_outputs(cd, pass, out, what);
}

/* Where the largest difference is, for the log of a failed comparison. */
static void report_worst(const double *got, const double *ref, int64_t n, int64_t cols, const char *what) {
  int64_t worst = 0, nonfinite = 0;
  double worst_diff = -1;
  for (int64_t i = 0; i < n; i++) {
    const double d = fabs(got[i] - ref[i]);
    nonfinite += !isfinite(got[i]);
    if (isfinite(worst_diff) && !(d <= worst_diff)) worst = i, worst_diff = d; /* the first NaN stays */
  }
  fprintf(stderr, "    %s: worst at row %lld col %lld: got %.6g, reference %.6g; %lld of %lld not finite\n", what,
          (long long)(worst / cols), (long long)(worst % cols), got[worst], ref[worst], (long long)nonfinite,
          (long long)n);
}

static int64_t role_cols(const conv_data *cd, int t) {
  return t == T_Y || t == T_DY ? cd->args.out_channels : t == T_BIAS || t == T_DB ? cd->n[t] : cd->args.in_channels;
}

/* ||out - ref|| / ||ref|| of each output of `pass` against the reference. */
static void check_close(const conv_data *cd, vc_pass pass, double tol, void *const out[2], const char *what) {
  for (int i = 0; i < 2; i++) {
    const int t = pass_out[pass][i];
    if (t < 0) continue;
    double *got = vc_to_f64(cd->args.dtype, out[i], cd->n[t]);
    const double e = vc_rel_err(got, cd->ref[t], cd->n[t]);
    CHECK(e < tol, "%s %s: rel err %.3g >= %.0e", what, role_name[t], e, tol);
    if (!(e < tol)) report_worst(got, cd->ref[t], cd->n[t], role_cols(cd, t), what);
    free(got);
  }
}

/* Two runs' outputs: bitwise equal when tol == 0, else within tol of each other. */
static void compare_runs(const conv_data *cd, vc_pass pass, double tol, void *const a[2], void *const b[2],
                         const char *what) {
  for (int i = 0; i < 2; i++) {
    const int t = pass_out[pass][i];
    if (t < 0) continue;
    if (tol == 0) {
      const int64_t at = first_diff(a[i], b[i], cd->n[t], vc_dtype_size(cd->args.dtype));
      CHECK(at < 0, "%s %s: the runs differ, first at element %lld of %lld", what, role_name[t], (long long)at,
            (long long)cd->n[t]);
      continue;
    }
    double *x = vc_to_f64(cd->args.dtype, a[i], cd->n[t]), *y = vc_to_f64(cd->args.dtype, b[i], cd->n[t]);
    const double e = vc_rel_err(y, x, cd->n[t]);
    CHECK(e < tol, "%s %s: two runs differ by rel %.3g >= %.0e", what, role_name[t], e, tol);
    free(x);
    free(y);
  }
}

/* The calls must leave their inputs as they found them. */
static void check_inputs_intact(const conv_data *cd, const char *what) {
  const size_t es = vc_dtype_size(cd->args.dtype);
  for (int t = 0; t < T_Y; t++) {
    void *h = host_alloc((size_t)cd->n[t] * es);
    dev_download(h, cd->dev[t], (size_t)cd->n[t] * es);
    const int64_t at = first_diff(h, cd->host[t], cd->n[t], es);
    CHECK(at < 0, "%s: input %s was modified (element %lld)", what, role_name[t], (long long)at);
    free(h);
  }
}

static const vc_algo tested_algos[] = {VC_ALGO_EXPLICIT, VC_ALGO_IMPLICIT, VC_ALGO_MASKED, VC_ALGO_AUTO};
static bool g_has_masked; /* the backend offers VC_ALGO_MASKED (sm_90, VOXCONV_WGMMA not 0) */
static bool algo_available(vc_algo algo) { return algo != VC_ALGO_MASKED || g_has_masked; }

/* One GPU run of `pass`, its outputs checked against cd's reference and kept in out (NULL
 * when the run failed); returns whether it ran. */
static bool run_kept(vc_context *ctx, const vc_plan *p, conv_data *cd, const vc_conv_args *a, vc_pass pass,
                     void *out[2], const char *what) {
  if (!gpu_run(ctx, p, cd, a, pass, out, what)) return false;
  check_close(cd, pass, vc_tolerance(a->dtype, a->math), out, what);
  return true;
}

/* The same, its outputs freed. */
static void run_checked(vc_context *ctx, const vc_plan *p, conv_data *cd, const vc_conv_args *a, vc_pass pass,
                        const char *what) {
  void *out[2];
  run_kept(ctx, p, cd, a, pass, out, what);
  free_outputs(out);
}

/* Every tested algorithm x math x pass on one data set. */
static void check_all_runs(const plan_pair *pp, conv_data *cd) {
  const vc_dtype dt = cd->args.dtype;
  char what[256];
  for (int m = 0; m < (dt == VC_DTYPE_F32 ? 2 : 1); m++)
    for (size_t k = 0; k < sizeof tested_algos / sizeof *tested_algos; k++) {
      if (!algo_available(tested_algos[k])) continue;
      for (int pass = 0; pass < 3; pass++) {
        vc_conv_args a = cd->args;
        a.math = m ? VC_MATH_TF32 : VC_MATH_F32;
        a.algo = tested_algos[k];
        snprintf(what, sizeof what, "%s %s%s ci=%lld co=%lld %s %s", pp->what, vc_dtype_name(dt), m ? "+tf32" : "",
                 (long long)a.in_channels, (long long)a.out_channels, vc_algo_name(a.algo), vc_pass_name(pass));
        run_checked(g_gpu, pp->gpu, cd, &a, (vc_pass)pass, what);
      }
    }
  snprintf(what, sizeof what, "%s %s", pp->what, vc_dtype_name(dt));
  check_inputs_intact(cd, what);
}

/* Channel counts off every multiple of 8 and of tile sizes, and some multiples; 200/264
 * take the 16-bit fast path (wgmma on sm_90) with reduction tails and several column
 * tiles; 4 -> 40 is a stem: the narrow forward's vector stores, over a full and a partial
 * group of columns. */
enum { N_CONV_CHANNELS = 11 };
static const int64_t conv_channels[N_CONV_CHANNELS][2] = {{1, 4},    {5, 33},    {96, 130},  {64, 128},
                                                          {4, 1},    {33, 5},    {130, 96},  {128, 64},
                                                          {200, 264}, {264, 200}, {4, 40}};

/* Case i of a kind: kernels 1, 2, 3 and 5, strides 1-3, dilation 1-2, some anisotropic. */
static void conv_desc_for(vc_conv_desc *d, vc_conv_kind kind, int i) {
  if (kind == VC_CONV_SUBMANIFOLD)
    vc_rand_desc(d, kind, i % 4 == 2 ? 5 : i % 4 == 3 ? 1 : 3, 1, 1 + i % 2, i >= 4, 12);
  else
    vc_rand_desc(d, kind, 2 + i % 2, 1 + i % 3, 1 + i / 4, i % 4 == 3, 12);
}

static void conv_kind(vc_conv_kind kind) {
  static const int small_pick[4] = {8, 5, 10, 9}; /* --small: one channel pair per kind */
  static const vc_dtype dtypes[3] = {VC_DTYPE_F32, VC_DTYPE_F16, VC_DTYPE_BF16};
  for (int j = 0; j < (g_small ? 1 : N_CONV_CHANNELS); j++) {
    const int i = g_small ? small_pick[kind] : j;
    /* Site counts off tile multiples; a transposed conv multiplies its outputs. */
    int64_t n = g_small ? 301 + 37 * i : 2001 + 997 * (i % 3);
    if (kind == VC_CONV_TRANSPOSED) n /= 2;
    int32_t *coords = coords_for(n, 2 + i % 2);
    vc_conv_desc d;
    conv_desc_for(&d, kind, i);
    plan_pair pp;
    if (pair_build(&pp, g_gpu, &d, coords, n))
      for (int k = 0; k < 3; k++) {
        conv_data cd;
        data_make(&cd, pp.cpu, conv_channels[i][0], conv_channels[i][1], dtypes[k]);
        data_reference(&cd, pp.cpu, ALL_PASSES);
        check_all_runs(&pp, &cd);
        data_free(&cd);
      }
    pair_free(&pp);
    free(coords);
  }
}

static void test_conv_submanifold(void) { conv_kind(VC_CONV_SUBMANIFOLD); }
static void test_conv_sparse(void) { conv_kind(VC_CONV_SPARSE); }
static void test_conv_inverse(void) { conv_kind(VC_CONV_INVERSE); }
static void test_conv_transposed(void) { conv_kind(VC_CONV_TRANSPOSED); }

/* A submanifold 3x3x3 plan pair with data of dtype dt and its reference, for the cases below. */
static bool subm_setup(plan_pair *pp, conv_data *cd, vc_context *gctx, int64_t n, int64_t ci, int64_t co,
                       vc_dtype dt, unsigned passes) {
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  int32_t *coords = coords_for(n, 2);
  memset(cd, 0, sizeof *cd);
  const bool ok = pair_build(pp, gctx, &d, coords, n);
  free(coords);
  if (!ok) return false;
  data_make(cd, pp->cpu, ci, co, dt);
  data_reference(cd, pp->cpu, passes);
  return true;
}

/* cd's arguments with VC_ALGO_MASKED (tf32 math for f32 storage); what[] names the run: pp,
 * the dtype, the channels, "masked" and then `rest`. */
static vc_conv_args masked_args(const plan_pair *pp, const conv_data *cd, char *what, size_t len, const char *rest) {
  vc_conv_args a = cd->args;
  a.algo = VC_ALGO_MASKED;
  if (a.dtype == VC_DTYPE_F32) a.math = VC_MATH_TF32;
  snprintf(what, len, "%s %s ci=%lld co=%lld masked%s", pp->what,
           a.dtype == VC_DTYPE_F32 ? "f32+tf32" : vc_dtype_name(a.dtype), (long long)a.in_channels,
           (long long)a.out_channels, rest);
  return a;
}

int64_t vc_cuda_masked_wgrad_sums_runs(const vc_context *ctx); /* wgrad.cu; in no public header */

/* All three passes of cd on pp's GPU plan with VC_ALGO_MASKED (tf32 math for f32 storage)
 * against the reference, in ctx, whose configuration cfg (BN, split, deterministic, the
 * wgrad's form, pipelines; as below) names the runs. The wgrad's kernel must have summed the
 * bias gradient itself (vc_cuda_masked_wgrad_sums_runs: once) exactly where `fused_db` says
 * (16-bit submanifold plans), else left it to the pass over dy. */
static void masked_passes(vc_context *ctx, const plan_pair *pp, conv_data *cd, const char *const cfg[5],
                          bool fused_db) {
  for (int pass = 0; pass < 3; pass++) {
    char rest[128], what[400];
    snprintf(rest, sizeof rest, " BN=%s split=%s%s%s%s %s", cfg[0], cfg[1] ? cfg[1] : "auto",
             cfg[2] ? " deterministic" : "", cfg[3] ? " wgrad=rows" : "", cfg[4] ? " pipes=2 asked" : "",
             vc_pass_name(pass));
    const vc_conv_args a = masked_args(pp, cd, what, sizeof what, rest);
    const int64_t sums = vc_cuda_masked_wgrad_sums_runs(ctx);
    run_checked(ctx, pp->gpu, cd, &a, (vc_pass)pass, what);
    const int64_t want = pass == VC_PASS_BACKWARD_WEIGHT && fused_db ? 1 : 0;
    CHECK(vc_cuda_masked_wgrad_sums_runs(ctx) - sums == want, "%s: the wgrad summed db itself %lld times, expected %lld",
          what, (long long)(vc_cuda_masked_wgrad_sums_runs(ctx) - sums), (long long)want);
  }
}

/* The regrouped order (kmap.cu's k_group, vc_cuda_plan_groups): a submanifold plan of at
 * least half a 128-row tile a multiprocessor (12000 sites: 94 tiles; --small 9000: 71; 68
 * sites a multiprocessor where that is more) and 256 or more reduction channels, so the
 * masked forward and dgrad take it, in a deterministic context. The first call's reduction
 * channels pick the window: 256 (ci of the forward) build it from windows of 2048 rows, 512
 * from windows of 8192 (one full window and a part), checked through the library's
 * vc_cuda_plan_group_window. Per case, on a fresh plan: the first forward on a second
 * stream, not waited for (the build, but where the dgrad ran first), then the forward on
 * the test's stream, which must wait for that build, checked against the reference and
 * bitwise equal to the first; then the dgrad, checked. Two more cases check the rows rule: 128
 * reduction channels on the same plan size keep the Gray order (window 0), and a plan of
 * 2^19 sites (cuda_internal.h's VC_GROUP_LARGE_ROWS; not at --small), too many tiles for a
 * tile order, regroups from windows of 8192 at 64 channels: its dgrad (16 channels) runs
 * first and must keep the Gray order, then the forward builds it. */
int vc_cuda_plan_group_window(const vc_plan *p); /* kmap.cu; in no public header */

static void test_masked_groups(void) {
  if (!g_has_masked) {
    printf("  no sm_90 device (or VOXCONV_WGMMA=0): nothing to test\n");
    return;
  }
  static const struct {
    vc_dtype dtype;
    int64_t ci, co;
    bool dgrad_first, big;
    int after_dgrad, window; /* the window after a first dgrad, and at the end */
  } cases[] = {{VC_DTYPE_F16, 256, 264, false, false, 0, 2048},  {VC_DTYPE_BF16, 256, 264, false, false, 0, 2048},
               {VC_DTYPE_F32, 256, 264, false, false, 0, 2048},  {VC_DTYPE_F16, 512, 264, false, false, 0, 8192},
               {VC_DTYPE_F32, 512, 264, false, false, 0, 8192},  {VC_DTYPE_BF16, 264, 512, true, false, 8192, 8192},
               {VC_DTYPE_F16, 128, 128, false, false, 0, 0},     {VC_DTYPE_F16, 64, 16, true, true, 0, 8192}};
  enum { N_CASES = sizeof cases / sizeof cases[0] };
  int n_sm = 0;
  if (!CU(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0))) return;
  const int64_t base = g_small ? 9000 : 12000, sites = base > 68 * (int64_t)n_sm ? base : 68 * (int64_t)n_sm;
  vc_context *ctx = NULL;
  setenv("VOXCONV_DETERMINISTIC", "1", 1);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &ctx));
  unsetenv("VOXCONV_DETERMINISTIC");
  cudaStream_t other;
  if (!ctx || !CU(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking))) {
    vc_context_destroy(ctx);
    return;
  }
  for (int t = 0; t < N_CASES; t++) {
    if (cases[t].big && g_small) continue;
    plan_pair pp;
    conv_data cd;
    if (!subm_setup(&pp, &cd, ctx, cases[t].big ? (int64_t)1 << 19 : sites, cases[t].ci, cases[t].co, cases[t].dtype,
                    3u))
      continue;
    char what[256], rest[64];
    snprintf(rest, sizeof rest, ", %s%s", cases[t].window ? "regrouped" : "Gray order",
             cases[t].dgrad_first ? ", dgrad first" : "");
    const vc_conv_args a = masked_args(&pp, &cd, what, sizeof what, rest);
    if (cases[t].dgrad_first) {
      run_checked(ctx, pp.gpu, &cd, &a, VC_PASS_BACKWARD_DATA, what);
      const int window = vc_cuda_plan_group_window(pp.gpu);
      CHECK(window == cases[t].after_dgrad, "%s: after the first dgrad the window is %d rows, expected %d", what,
            window, cases[t].after_dgrad);
    }
    size_t bytes = 0;
    CHECK_OK(ctx, vc_conv_workspace_size(pp.gpu, &a, VC_PASS_FORWARD, &bytes));
    void *ws = bytes ? dev_alloc(bytes) : NULL, *y = dev_alloc((size_t)cd.n[T_Y] * vc_dtype_size(a.dtype));
    void *t_other[T_COUNT];
    memcpy(t_other, cd.dev, sizeof t_other);
    t_other[T_Y] = y;
    CHECK_OK(ctx, run_pass(ctx, pp.gpu, &a, VC_PASS_FORWARD, t_other, ws, bytes, (void *)other));
    void *out[2] = {NULL, NULL}, *first[2] = {NULL, NULL};
    if (run_kept(ctx, pp.gpu, &cd, &a, VC_PASS_FORWARD, out, what) && CU(cudaStreamSynchronize(other))) {
      first[0] = host_alloc((size_t)cd.n[T_Y] * vc_dtype_size(a.dtype));
      if (dev_download(first[0], y, (size_t)cd.n[T_Y] * vc_dtype_size(a.dtype)))
        compare_runs(&cd, VC_PASS_FORWARD, 0, first, out, what);
    }
    CU(cudaStreamSynchronize(other));
    free_outputs(out);
    free(first[0]);
    dev_free(ws);
    dev_free(y);
    run_checked(ctx, pp.gpu, &cd, &a, VC_PASS_BACKWARD_DATA, what);
    const int window = vc_cuda_plan_group_window(pp.gpu);
    CHECK(window == cases[t].window, "%s: the regrouped order was built from windows of %d rows, expected %d", what,
          window, cases[t].window);
    data_free(&cd);
    pair_free(&pp);
  }
  CU(cudaStreamDestroy(other));
  vc_context_destroy(ctx);
}

/* The masked kernel's four tile widths, each forced through VOXCONV_MASKED_BN in a context
 * of its own, and each with forced reduction splits (VOXCONV_MASKED_SPLIT; 1: the wgrad's
 * one chunk stores dW itself; 16 leaves some splits without stages; wgrad's chunks
 * then add their partials with reductions, and in the VOXCONV_DETERMINISTIC context as
 * ordered slices); the wgrad's rows form
 * (VOXCONV_MASKED_WGRAD=rows) in three of those configurations; BN 64 on two pipelines a CTA
 * (VOXCONV_MASKED_PIPES=2: the passes whose stages are 128-byte, i.e. all but the 16-bit
 * forward of 24 and 16 channels, run on two; split 3 gives a pipeline several units in a
 * row, unsplit one at most), unsplit and split: all passes of a submanifold and a
 * strided plan in f16, bf16 and tf32, with enough rows and channels for several row and
 * column tiles and reduction tails (and 48 -> 64, whose wgrad runs one consumer warpgroup;
 * --small: the first and that pair), and both stage depths (64-byte stages where the
 * reduction's channels fit in 64 bytes: the forward of 24 channels in f16 and of 16 in f16
 * and tf32; 128-byte ones elsewhere, with half-full last chunks); and bad values of the four
 * variables refused with their messages; and a dense 5x5x5 case (below). */
static void test_masked_tiles(void) {
  if (!g_has_masked) {
    printf("  no sm_90 device (or VOXCONV_WGMMA=0): nothing to test\n");
    return;
  }
  enum { NCFG = 13 };
  /* BN, split, deterministic, the wgrad's rows form, two pipelines */
  static const char *const cfg[NCFG][5] = {
      {"64", NULL, NULL, NULL, NULL},    {"96", "1", NULL, NULL, NULL},   {"128", NULL, NULL, NULL, NULL},
      {"256", NULL, NULL, NULL, NULL},   {"64", "3", NULL, NULL, NULL},   {"256", "16", NULL, NULL, NULL},
      {"128", "5", "1", NULL, NULL},     {"64", NULL, NULL, "rows", NULL}, {"256", "16", NULL, "rows", NULL},
      {"128", "5", "1", "rows", NULL},   {"64", NULL, NULL, NULL, "2"},   {"64", "3", NULL, NULL, "2"},
      {"96", "2", NULL, NULL, NULL}};
  /* the last: a wgrad of one consumer warpgroup (at most 64 output channels) */
  static const int64_t ch[][2] = {{24, 232}, {16, 520}, {200, 136}, {48, 64}};
  /* f16, bf16, and f32 storage with tf32 math (every pass on wgmma; the wgrad as three bf16
   * products of split operands, BN at most 128) */
  static const vc_dtype dtypes[3] = {VC_DTYPE_F16, VC_DTYPE_BF16, VC_DTYPE_F32};
  static const vc_conv_kind kinds[2] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE};
  static const char *const bad[6][3] = {{"VOXCONV_MASKED_BN", "32", "VOXCONV_MASKED_BN = \"32\"; use 64, 96, 128 or 256"},
                                         {"VOXCONV_MASKED_PIPES", "3", "VOXCONV_MASKED_PIPES = \"3\"; use 1 or 2"},
                                         {"VOXCONV_MASKED_SPLIT", "0", "VOXCONV_MASKED_SPLIT = \"0\"; use 1 to 16"},
                                         {"VOXCONV_MASKED_SPLIT", "17", "VOXCONV_MASKED_SPLIT = \"17\"; use 1 to 16"},
                                         {"VOXCONV_MASKED_SPLIT", "4x", "VOXCONV_MASKED_SPLIT = \"4x\"; use 1 to 16"},
                                         {"VOXCONV_MASKED_WGRAD", "row", "VOXCONV_MASKED_WGRAD = \"row\"; use pairs or rows"}};
  for (int i = 0; i < 6; i++) {
    vc_context *b = NULL;
    setenv(bad[i][0], bad[i][1], 1);
    vc_test_scrub(NULL);
    CHECK_STATUS(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &b), VC_ERR_INVALID_ARGUMENT, bad[i][2]);
    vc_context_destroy(b);
    unsetenv(bad[i][0]);
  }
  vc_context *ctx[NCFG] = {NULL};
  bool all = true;
  for (int b = 0; b < NCFG; b++) {
    setenv("VOXCONV_MASKED_BN", cfg[b][0], 1);
    if (cfg[b][1]) setenv("VOXCONV_MASKED_SPLIT", cfg[b][1], 1);
    else unsetenv("VOXCONV_MASKED_SPLIT");
    if (cfg[b][2]) setenv("VOXCONV_DETERMINISTIC", cfg[b][2], 1);
    if (cfg[b][3]) setenv("VOXCONV_MASKED_WGRAD", cfg[b][3], 1);
    if (cfg[b][4]) setenv("VOXCONV_MASKED_PIPES", cfg[b][4], 1);
    CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &ctx[b]));
    unsetenv("VOXCONV_DETERMINISTIC");
    unsetenv("VOXCONV_MASKED_WGRAD");
    unsetenv("VOXCONV_MASKED_PIPES");
    all = all && ctx[b];
  }
  unsetenv("VOXCONV_MASKED_BN");
  unsetenv("VOXCONV_MASKED_SPLIT");
  for (int k = 0; all && k < 2; k++) {
    const int64_t n = g_small ? 1500 : 6000;
    int32_t *coords = coords_for(n, 2);
    vc_conv_desc d;
    if (kinds[k] == VC_CONV_SUBMANIFOLD) vc_conv_desc_init(&d, kinds[k], 3, 1, -1, 1);
    else vc_conv_desc_init(&d, kinds[k], 2, 2, 0, 1);
    plan_pair pp[NCFG];
    bool built = true;
    for (int b = 0; b < NCFG; b++) built = pair_build(&pp[b], ctx[b], &d, coords, n) && built;
    /* one data set and reference per channel pair and dtype, run in every configuration */
    for (size_t c = 0; built && c < sizeof ch / sizeof *ch; c++)
      for (int t = 0; t < 3; t++) {
        if (g_small && c > 0 && ch[c][1] > 64) continue; /* --small: the first and the one-consumer pair */
        conv_data cd;
        data_make(&cd, pp[0].cpu, ch[c][0], ch[c][1], dtypes[t]);
        data_reference(&cd, pp[0].cpu, ALL_PASSES);
        for (int b = 0; b < NCFG; b++)
          masked_passes(ctx[b], &pp[b], &cd, cfg[b], kinds[k] == VC_CONV_SUBMANIFOLD && dtypes[t] != VC_DTYPE_F32);
        data_free(&cd);
      }
    for (int b = 0; b < NCFG; b++) pair_free(&pp[b]);
    free(coords);
  }
  /* tf32's wgrad splits x into the workspace a slice of its columns at a time (wgrad.cu,
   * wr_slice_width), dy not at all: at 256 channels each way, BN 128, two slices of 128
   * columns, so the workspace holds at most 0.6 of dy's bytes (half for a slice's split;
   * the bias gradient's partials, 512 KB at 256 channels, are 6 % of dy at 8000 sites);
   * checked against the reference with the auto split (the add form, into dW itself) and
   * in the deterministic context (slices). */
  for (int i = 0; all && i < 2; i++) {
    const int b = i ? 6 : 2; /* BN 128: auto split; split 5, deterministic */
    const int64_t n = 8000;
    int32_t *coords = coords_for(n, 2);
    vc_conv_desc d;
    vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
    plan_pair pp;
    if (pair_build(&pp, ctx[b], &d, coords, n)) {
      conv_data cd;
      data_make(&cd, pp.cpu, 256, 256, VC_DTYPE_F32);
      data_reference(&cd, pp.cpu, 1u << VC_PASS_BACKWARD_WEIGHT);
      char what[400];
      const vc_conv_args a = masked_args(&pp, &cd, what, sizeof what, i ? " BN=128 split=5 deterministic backward_weight"
                                                                           : " BN=128 backward_weight");
      run_checked(ctx[b], pp.gpu, &cd, &a, VC_PASS_BACKWARD_WEIGHT, what);
      size_t bytes = 0;
      CHECK_OK(ctx[b], vc_conv_workspace_size(pp.gpu, &a, VC_PASS_BACKWARD_WEIGHT, &bytes));
      const size_t dy_bytes = (size_t)vc_plan_out_count(pp.gpu) * 256 * 4;
      if (!i)
        CHECK(bytes * 10 <= dy_bytes * 6, "%s: workspace %zu bytes, expected at most 0.6 of dy's %zu", what, bytes,
              dy_bytes);
      data_free(&cd);
    }
    pair_free(&pp);
    free(coords);
  }
  /* A 5x5x5 submanifold conv on a dense cube: K = 125 takes the producers' offset list of
   * several mask words, and tiles meeting more offsets than masked.cu's gather table holds
   * read their gather rows from the map, not from shared memory; both tile widths that
   * apply, all passes, the wgrad's rows form (block masks of four words) and two pipelines
   * (each building its tables in place). */
  enum { SIDE = 11 };
  int32_t *cube = malloc((size_t)SIDE * SIDE * SIDE * 4 * sizeof *cube);
  for (int i = 0; i < SIDE * SIDE * SIDE; i++) {
    cube[4 * i] = 0;
    cube[4 * i + 1] = i % SIDE, cube[4 * i + 2] = i / SIDE % SIDE, cube[4 * i + 3] = i / (SIDE * SIDE);
  }
  vc_conv_desc d5;
  vc_conv_desc_init(&d5, VC_CONV_SUBMANIFOLD, 5, 1, -1, 1);
  static const int cube_cfg[4] = {0, 1, 7, 10};
  for (int i = 0; all && i < 4; i++) {
    const int b = cube_cfg[i];
    plan_pair pp;
    if (pair_build(&pp, ctx[b], &d5, cube, SIDE * SIDE * SIDE))
      for (int t = 0; t < 3; t++) {
        conv_data cd;
        data_make(&cd, pp.cpu, 24, 40, dtypes[t]);
        data_reference(&cd, pp.cpu, ALL_PASSES);
        masked_passes(ctx[b], &pp, &cd, cfg[b], dtypes[t] != VC_DTYPE_F32);
        data_free(&cd);
      }
    pair_free(&pp);
  }
  free(cube);
  for (int b = 0; b < NCFG; b++) vc_context_destroy(ctx[b]);
}

/* ---- (c) determinism ---------------------------------------------------------------------- */

/* Two runs: each against the reference, and against each other (bitwise when tol is 0). */
static void run_twice(vc_context *ctx, const vc_plan *p, conv_data *cd, const vc_conv_args *a, vc_pass pass,
                      double between, const char *what) {
  void *o1[2] = {NULL, NULL}, *o2[2] = {NULL, NULL};
  if (gpu_run(ctx, p, cd, a, pass, o1, what) && gpu_run(ctx, p, cd, a, pass, o2, what)) {
    check_close(cd, pass, vc_tolerance(a->dtype, a->math), o1, what);
    compare_runs(cd, pass, between, o1, o2, what);
  }
  free_outputs(o1);
  free_outputs(o2);
}

/* The masked pairs form (VOXCONV_MASKED_FORM=pairs): the forward and dgrad multiply each
 * offset's pair list in tiles of 128 pairs, 256 columns wide, and add them into the output
 * (f16, tf32) or fp32 windows of it (bf16: most in y's own memory, mk_pairs_windows) with L2
 * reductions. All passes of a submanifold plan (K 27) and a strided one (K 8: offsets of
 * unequal pair counts, last tiles of fewer than 64 pairs) in f16, bf16 and tf32, with columns
 * past one tile ending in a partial one (520, 264) and reductions ending in partial chunks
 * (264, 136). Where the form does not apply the tiles form runs: 24 input channels (the 16-bit
 * forward's 64-byte stages), the dgrad's 24 columns, a 5x5x5 plan (K 125, f16). --small: the
 * first channel pair only. The library's count of pairs-form calls (vc_cuda_masked_pairs_runs)
 * must grow by exactly the calls where the form applies; the bf16 forward's workspace holds at
 * most 0.6 of y's bytes (its fp32 window of about a quarter of the columns, odd widths
 * rounded), f16's none (it adds into y). In a VOXCONV_DETERMINISTIC context with the variable
 * set the tiles form runs (the count stays), bitwise repeatable; so it does with
 * VOXCONV_MASKED_FORM=rows, and for a bf16 forward given an unaligned workspace (the form's
 * fp32 window needs an aligned one), where f16's runs the form; a bad value is refused. The
 * form runs its tiles chunk by chunk of output rows: one chunk at these sizes (where the rows
 * it adds into fit in half of L2), and with VOXCONV_MASKED_PAIR_ROWS=1 one 256-row block a
 * chunk (16 x 27 table entries at 4000 sites: more than a thread each; bad values refused),
 * checked against the reference for the first channel pair of each plan and dtype. A plan with
 * no outputs (a sparse plan whose output_bound leaves none) runs its dgrad in the form, f16 and
 * bf16: no pairs, no launch, dx zero. */
int64_t vc_cuda_masked_pairs_runs(const vc_context *ctx);   /* masked.cu; in no public header */
int64_t vc_cuda_masked_pairs_chunks(const vc_context *ctx); /* the last pairs call's chunks */

static void test_masked_pairs(void) {
  if (!g_has_masked) {
    printf("  no sm_90 device (or VOXCONV_WGMMA=0): nothing to test\n");
    return;
  }
  vc_context *bad = NULL, *ctx = NULL, *det = NULL, *rows = NULL, *chunked = NULL;
  setenv("VOXCONV_MASKED_FORM", "pair", 1);
  vc_test_scrub(NULL);
  CHECK_STATUS(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &bad), VC_ERR_INVALID_ARGUMENT,
               "VOXCONV_MASKED_FORM = \"pair\"; use rows or pairs");
  vc_context_destroy(bad);
  setenv("VOXCONV_MASKED_FORM", "pairs", 1);
  static const char *const bad_rows[3] = {"0", "256x", "2000000000"};
  for (int i = 0; i < 3; i++) {
    char msg[96];
    snprintf(msg, sizeof msg, "VOXCONV_MASKED_PAIR_ROWS = \"%s\"; use 1 to 2^30", bad_rows[i]);
    setenv("VOXCONV_MASKED_PAIR_ROWS", bad_rows[i], 1);
    bad = NULL;
    CHECK_STATUS(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &bad), VC_ERR_INVALID_ARGUMENT, msg);
    vc_context_destroy(bad);
  }
  setenv("VOXCONV_MASKED_PAIR_ROWS", "1", 1);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &chunked));
  unsetenv("VOXCONV_MASKED_PAIR_ROWS");
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &ctx));
  setenv("VOXCONV_DETERMINISTIC", "1", 1);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &det));
  unsetenv("VOXCONV_DETERMINISTIC");
  setenv("VOXCONV_MASKED_FORM", "rows", 1);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &rows));
  unsetenv("VOXCONV_MASKED_FORM");
  static const int64_t ch[3][2] = {{264, 520}, {136, 264}, {24, 264}};
  static const vc_dtype dtypes[3] = {VC_DTYPE_F16, VC_DTYPE_BF16, VC_DTYPE_F32};
  static const char *const cfg[5] = {"256 (pairs form where it applies)", "1", NULL, NULL, NULL};
  /* every channel pair and dtype on the 3x3x3 plan; fewer where the reference is dearer */
  static const int n_ch[3] = {3, 2, 1}, n_dt[3] = {3, 3, 1};
  int l2 = 0;
  CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  for (int k = 0; ctx && det && rows && chunked && k < 3; k++) {
    const int64_t n = g_small ? 1500 : 4000;
    int32_t *coords = coords_for(n, 2);
    vc_conv_desc d;
    if (k == 1) vc_conv_desc_init(&d, VC_CONV_SPARSE, 2, 2, 0, 1);
    else vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, k == 0 ? 3 : 5, 1, -1, 1);
    plan_pair pp, pd;
    memset(&pd, 0, sizeof pd);
    const bool built = pair_build(&pp, ctx, &d, coords, n);
    const bool built_det = built && pair_build(&pd, det, &d, coords, n);
    for (int c = 0; built_det && c < (g_small ? 1 : n_ch[k]); c++)
      for (int t = 0; t < n_dt[k]; t++) {
        conv_data cd;
        data_make(&cd, pp.cpu, ch[c][0], ch[c][1], dtypes[t]);
        data_reference(&cd, pp.cpu, ALL_PASSES);
        /* the form applies to a pass with at most 32 offsets, more than 128 output columns
         * and more than 64 bytes of reduction values a row */
        const int64_t es = dtypes[t] == VC_DTYPE_F32 ? 4 : 2, ci = ch[c][0], co = ch[c][1];
        const int want = (k < 2 && co > 128 && ci * es > 64) + (k < 2 && ci > 128 && co * es > 64);
        const int64_t before = vc_cuda_masked_pairs_runs(ctx);
        masked_passes(ctx, &pp, &cd, cfg, k != 1 && dtypes[t] != VC_DTYPE_F32);
        char what[256];
        const vc_conv_args a = masked_args(&pp, &cd, what, sizeof what, ", VOXCONV_MASKED_FORM=pairs");
        if (k == 0 && a.dtype != VC_DTYPE_F32 && a.in_channels > 32) {
          size_t bytes = 0;
          CHECK_OK(ctx, vc_conv_workspace_size(pp.gpu, &a, VC_PASS_FORWARD, &bytes));
          const size_t y_bytes = (size_t)vc_plan_out_count(pp.gpu) * (size_t)a.out_channels * 2;
          if (a.dtype == VC_DTYPE_BF16) /* about a quarter of the columns in fp32 (mk_pairs_windows) */
            CHECK(bytes > 0 && bytes * 10 <= y_bytes * 6, "%s: forward workspace %zu bytes, expected (0, 0.6] of y's %zu",
                  what, bytes, y_bytes);
          else /* f16 adds into y itself */
            CHECK(bytes == 0, "%s: forward workspace %zu bytes, the f16 form needs none (y: %zu)", what, bytes,
                  y_bytes);
        }
        const int64_t ran = vc_cuda_masked_pairs_runs(ctx) - before;
        CHECK(ran == want, "%s: %lld of its forward and dgrad ran the pairs form, expected %d", what, (long long)ran,
              want);
        /* the last call of the form: the dgrad where it applies (its rows: the inputs) */
        const bool dg = k < 2 && ci > 128 && co * es > 64;
        const int64_t last_rows = dg ? vc_plan_in_count(pp.gpu) * ci : vc_plan_out_count(pp.gpu) * co;
        if (want && last_rows * 4 <= (int64_t)l2 / 2)
          CHECK(vc_cuda_masked_pairs_chunks(ctx) == 1, "%s: %lld chunks of rows, expected 1", what,
                (long long)vc_cuda_masked_pairs_chunks(ctx));
        if (want && c == 0) { /* chunks of one 256-row block of output rows, in both passes */
          char what_c[300];
          snprintf(what_c, sizeof what_c, "%s, VOXCONV_MASKED_PAIR_ROWS=1", what);
          plan_pair pc;
          const int64_t runs = vc_cuda_masked_pairs_runs(chunked);
          if (pair_build(&pc, chunked, &d, coords, n)) {
            masked_passes(chunked, &pc, &cd, cfg, k != 1 && dtypes[t] != VC_DTYPE_F32);
            const int64_t blocks = (vc_plan_out_count(pc.gpu) + 255) / 256;
            CHECK(vc_cuda_masked_pairs_runs(chunked) - runs == want && vc_cuda_masked_pairs_chunks(chunked) == blocks,
                  "%s: %lld pairs-form calls, the last in %lld chunks; expected %d, %lld", what_c,
                  (long long)(vc_cuda_masked_pairs_runs(chunked) - runs), (long long)vc_cuda_masked_pairs_chunks(chunked),
                  want, (long long)blocks);
          }
          pair_free(&pc);
        }
        char what_det[300];
        snprintf(what_det, sizeof what_det, "%s, deterministic context", what);
        run_twice(det, pd.gpu, &cd, &a, VC_PASS_FORWARD, 0.0, what_det);
        run_twice(det, pd.gpu, &cd, &a, VC_PASS_BACKWARD_DATA, 0.0, what_det);
        CHECK(vc_cuda_masked_pairs_runs(det) == 0, "%s: the pairs form ran", what_det);
        if (k == 0 && c == 0 && t < 2) { /* 264 -> 520, 16 bits: the form applies to both passes */
          char what_x[300];
          snprintf(what_x, sizeof what_x, "%s, VOXCONV_MASKED_FORM=rows", what);
          if (t == 0) { /* the rows context's f16 run */
            plan_pair pr;
            if (pair_build(&pr, rows, &d, coords, n)) masked_passes(rows, &pr, &cd, cfg, true);
            pair_free(&pr);
          }
          CHECK(vc_cuda_masked_pairs_runs(rows) == 0, "%s: the pairs form ran", what_x);
          snprintf(what_x, sizeof what_x, "%s, workspace 4 bytes off alignment", what);
          size_t bytes = 0;
          CHECK_OK(ctx, vc_conv_workspace_size(pp.gpu, &a, VC_PASS_FORWARD, &bytes));
          char *ws = dev_alloc(bytes + 16);
          const int64_t runs = vc_cuda_masked_pairs_runs(ctx);
          void *out[2] = {NULL, NULL};
          poison_outputs(&cd, VC_PASS_FORWARD);
          if (ws) CHECK_OK(ctx, run_pass(ctx, pp.gpu, &a, VC_PASS_FORWARD, cd.dev, ws + 4, bytes, g_stream));
          if (ws && CU(cudaStreamSynchronize(g_stream)) && download_outputs(&cd, VC_PASS_FORWARD, out, what_x))
            check_close(&cd, VC_PASS_FORWARD, vc_tolerance(a.dtype, a.math), out, what_x);
          /* f16 adds into y (the form runs), bf16 needs its aligned workspace (the tiles run) */
          const int64_t want_x = a.dtype == VC_DTYPE_F16;
          CHECK(vc_cuda_masked_pairs_runs(ctx) - runs == want_x, "%s: the pairs form ran %lld times, expected %lld",
                what_x, (long long)(vc_cuda_masked_pairs_runs(ctx) - runs), (long long)want_x);
          free_outputs(out);
          dev_free(ws);
        }
        data_free(&cd);
      }
    pair_free(&pd);
    pair_free(&pp);
    free(coords);
  }
  if (ctx) { /* no outputs: sites at 10 and beyond, outputs only at 0 (reached from 0 .. 2) */
    const int64_t n = 1000;
    int32_t *coords = coords_for(n, 2);
    for (int64_t i = 0; i < n; i++)
      for (int a = 1; a < 4; a++) coords[4 * i + a] += 10;
    vc_conv_desc d;
    vc_conv_desc_init(&d, VC_CONV_SPARSE, 3, 1, 0, 1);
    d.output_bound[0] = d.output_bound[1] = d.output_bound[2] = 1;
    plan_pair pp;
    if (pair_build(&pp, ctx, &d, coords, n)) {
      CHECK(vc_plan_out_count(pp.gpu) == 0, "no-output plan: %lld outputs", (long long)vc_plan_out_count(pp.gpu));
      for (int t = 0; t < 2; t++) { /* bf16's too: no windows without pairs */
        conv_data cd;
        data_make(&cd, pp.cpu, 264, 264, dtypes[t]);
        data_reference(&cd, pp.cpu, ALL_PASSES);
        const int64_t before = vc_cuda_masked_pairs_runs(ctx);
        masked_passes(ctx, &pp, &cd, cfg, false);
        CHECK(vc_cuda_masked_pairs_runs(ctx) - before == 1 && vc_cuda_masked_pairs_chunks(ctx) == 0,
              "no-output plan, %s: %lld pairs-form calls, the last in %lld chunks; expected its dgrad, 0",
              vc_dtype_name(dtypes[t]), (long long)(vc_cuda_masked_pairs_runs(ctx) - before),
              (long long)vc_cuda_masked_pairs_chunks(ctx));
        data_free(&cd);
      }
    }
    pair_free(&pp);
    free(coords);
  }
  vc_context_destroy(chunked);
  vc_context_destroy(rows);
  vc_context_destroy(det);
  vc_context_destroy(ctx);
}

/* VC_ALGO_MASKED's weight gradient where its Hopper kernel does not apply (an x pointer one
 * element off 16-byte alignment; channel counts off multiples of 8), on layers wide enough
 * that the (offset, tile) CTAs fill the multiprocessors twice (520 x 264 and 517 x 263: 15
 * tiles of 128 x 128, 405 CTAs with K 27, against 2 x 132 on an H100): the implicit kernel
 * runs unsplit and stores dW itself, so the workspace holds no fp32 copy of dW. f16, bf16
 * and f32 (tf32 math) against the reference, bitwise repeatable, and the 16-bit workspace
 * below the fp32 dW's bytes. Where the CTAs do not fill the device twice (264 x 200: 162
 * CTAs; x off alignment again) the split kernel and its fp32 copy stay: checked too. Every
 * case has offsets of more than 2048 pairs (4000 sites; checked), below which any call runs
 * unsplit; the context has VOXCONV_MASKED_SPLIT=1, so the Hopper kernel's own part of the
 * workspace is small. --small: 2100 sites, not the split case. */
static void test_masked_wgrad_fallback(void) {
  if (!g_has_masked) {
    printf("  no sm_90 device (or VOXCONV_WGMMA=0): nothing to test\n");
    return;
  }
  int n_sm = 0;
  CU(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
  /* The size covers the Hopper kernel too, whose add form holds an fp32 dW of its own where
   * it splits (at 4000 sites it would): one split (its direct form) leaves the fallback's
   * share alone in the figure. */
  vc_context *ctx = NULL;
  setenv("VOXCONV_MASKED_SPLIT", "1", 1);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &ctx));
  unsetenv("VOXCONV_MASKED_SPLIT");
  static const int64_t ch[3][3] = {{520, 264, 1}, {517, 263, 0}, {264, 200, 1}}; /* ci, co, x off alignment */
  static const vc_dtype dtypes[3] = {VC_DTYPE_F16, VC_DTYPE_BF16, VC_DTYPE_F32};
  for (int c = 0; ctx && c < (g_small ? 2 : 3); c++)
    for (int t = 0; t < 3; t++) {
      plan_pair pp;
      conv_data cd;
      /* offsets of more than 2048 pairs (implicit.cu's WGRAD_SPLIT_MIN): below that every
       * call runs unsplit, whatever the rule for wide layers says */
      const int64_t n = g_small ? 2100 : 4000;
      if (!subm_setup(&pp, &cd, ctx, n, ch[c][0], ch[c][1], dtypes[t], 1u << VC_PASS_BACKWARD_WEIGHT)) {
        pair_free(&pp);
        continue;
      }
      char what[300];
      const vc_conv_args a = masked_args(&pp, &cd, what, sizeof what, ch[c][2] ? " backward_weight, x off alignment"
                                                                               : " backward_weight");
      int64_t off[28];
      CHECK_OK(ctx, vc_plan_kernel_map(pp.gpu, off, NULL, NULL, NULL));
      int64_t most = 0;
      for (int r = 0; r < 27; r++) most = off[r + 1] - off[r] > most ? off[r + 1] - off[r] : most;
      CHECK(most > 2048, "%s: the largest offset has %lld pairs: the case needs more than 2048", what, (long long)most);
      void *x = cd.dev[T_X], *shifted = NULL;
      if (ch[c][2]) { /* x one element on: the kernels' 16-byte copies cannot take it */
        const size_t es = vc_dtype_size(a.dtype), bytes = (size_t)cd.n[T_X] * es;
        shifted = dev_alloc(bytes + es);
        if (shifted && CU(cudaMemcpyAsync((char *)shifted + es, x, bytes, cudaMemcpyDeviceToDevice, g_stream)))
          cd.dev[T_X] = (char *)shifted + es;
      }
      size_t ws = 0;
      CHECK_OK(ctx, vc_conv_workspace_size(pp.gpu, &a, VC_PASS_BACKWARD_WEIGHT, &ws));
      const size_t dw32 = (size_t)(a.out_channels * 27 * a.in_channels) * 4;
      const int64_t tiles = (a.out_channels + 127) / 128 * ((a.in_channels + 127) / 128);
      const bool unsplit = 27 * tiles >= 2 * (int64_t)n_sm;
      /* 16-bit only: f32's dW is the accumulator itself, and its workspace holds the tf32
       * kernel's bf16 split of a slice of x where the shape would take that kernel */
      if (a.dtype != VC_DTYPE_F32)
        CHECK(unsplit ? ws < dw32 : ws >= dw32, "%s: workspace %zu bytes, the fp32 dW %zu: expected %s", what, ws,
              dw32, unsplit ? "no copy" : "the copy");
      run_twice(ctx, pp.gpu, &cd, &a, VC_PASS_BACKWARD_WEIGHT, unsplit ? 0.0 : vc_tolerance(a.dtype, a.math), what);
      cd.dev[T_X] = x;
      dev_free(shifted);
      data_free(&cd);
      pair_free(&pp);
    }
  vc_context_destroy(ctx);
}

/* With VOXCONV_DETERMINISTIC=1 (set before the context exists and during the calls, whichever
 * the library reads), VC_ALGO_AUTO's backward-weight is bitwise repeatable, in math m. */
static void deterministic_wgrad(const plan_pair *pp, conv_data *cd, vc_math m, vc_context **det, vc_plan **det_plan) {
  setenv("VOXCONV_DETERMINISTIC", "1", 1);
  if (!*det) CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, det));
  if (*det && !*det_plan) plan_make(*det, &pp->desc, pp->d_coords, pp->n, NULL, det_plan, pp->what);
  if (*det_plan) {
    vc_conv_args a = cd->args;
    a.math = m;
    vc_algo algo = VC_ALGO_AUTO;
    CHECK_OK(*det, vc_conv_algo_for(*det_plan, &a, VC_PASS_BACKWARD_WEIGHT, &algo));
    const char *mn = m == VC_MATH_TF32 ? "+tf32" : "";
    printf("  deterministic %s%s backward_weight runs %s\n", vc_dtype_name(a.dtype), mn, vc_algo_name(algo));
    char what[200];
    snprintf(what, sizeof what, "%s %s%s deterministic auto", pp->what, vc_dtype_name(a.dtype), mn);
    run_twice(*det, *det_plan, cd, &a, VC_PASS_BACKWARD_WEIGHT, 0, what);
  }
  unsetenv("VOXCONV_DETERMINISTIC");
}

static void test_determinism(void) {
  static const vc_dtype dtypes[2] = {VC_DTYPE_F32, VC_DTYPE_F16};
  static const vc_pass passes[2] = {VC_PASS_FORWARD, VC_PASS_BACKWARD_WEIGHT};
  vc_context *det = NULL;
  vc_plan *det_plan = NULL;
  for (int k = 0; k < 2; k++) {
    plan_pair pp;
    conv_data cd;
    /* Enough pairs per offset that split-K and atomics, where an algorithm has them, engage. */
    if (subm_setup(&pp, &cd, g_gpu, g_small ? 3000 : 30000, 64, 64, dtypes[k],
                   1u << VC_PASS_FORWARD | 1u << VC_PASS_BACKWARD_WEIGHT)) {
      for (size_t g = 0; g < sizeof tested_algos / sizeof *tested_algos; g++) {
        if (!algo_available(tested_algos[g])) continue;
        for (int p = 0; p < 2; p++) {
          vc_conv_args a = cd.args;
          a.algo = tested_algos[g];
          char what[200];
          snprintf(what, sizeof what, "%s %s %s twice", pp.what, vc_dtype_name(a.dtype), vc_algo_name(a.algo));
          run_twice(g_gpu, pp.gpu, &cd, &a, passes[p], vc_tolerance(a.dtype, a.math), what);
        }
      }
      deterministic_wgrad(&pp, &cd, VC_MATH_F32, &det, &det_plan);
      /* tf32's wgrad: three split products a stage on the masked kernels, chunks meeting as
       * slices */
      if (dtypes[k] == VC_DTYPE_F32) deterministic_wgrad(&pp, &cd, VC_MATH_TF32, &det, &det_plan);
    }
    data_free(&cd);
    vc_plan_destroy(det_plan); /* built over this iteration's sites */
    det_plan = NULL;
    pair_free(&pp);
  }
  vc_context_destroy(det);
}

/* ---- (d) tuner ---------------------------------------------------------------------------- */

/* Tunes each pass, checks that VC_ALGO_AUTO now reports and runs the winner correctly. */
static void tune_passes(vc_context *ctx, const plan_pair *pp, conv_data *cd, vc_algo best[3]) {
  for (int pass = 0; pass < 3; pass++) {
    vc_conv_args a = cd->args;
    vc_algo now = VC_ALGO_AUTO;
    best[pass] = VC_ALGO_AUTO;
    const double t0 = vc_test_now_ms();
    CHECK_OK(ctx, vc_conv_tune(ctx, pp->gpu, &a, (vc_pass)pass, g_stream, &best[pass]));
    printf("  tune %s: %s (%.0f ms)\n", vc_pass_name(pass), vc_algo_name(best[pass]), vc_test_now_ms() - t0);
    CHECK(best[pass] > VC_ALGO_AUTO && best[pass] <= VC_ALGO_GROUPED, "tune %s returned algo %d", vc_pass_name(pass),
          (int)best[pass]);
    CHECK_OK(ctx, vc_conv_algo_for(pp->gpu, &a, (vc_pass)pass, &now));
    CHECK(now == best[pass], "%s: tune picked %s, vc_conv_algo_for reports %s", vc_pass_name(pass),
          vc_algo_name(best[pass]), vc_algo_name(now));
    char what[200];
    snprintf(what, sizeof what, "%s tuned auto %s", pp->what, vc_pass_name(pass));
    run_checked(ctx, pp->gpu, cd, &a, (vc_pass)pass, what);
  }
}

/* A new context reads the winners back from the cache file. */
/* A fresh context (it reads the cache file as it stands) and pp's plan in it; false when
 * either could not be made. The caller destroys both. */
static bool fresh_plan(const plan_pair *pp, vc_context **ctx, vc_plan **p) {
  *ctx = NULL, *p = NULL;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, ctx));
  return *ctx && plan_make(*ctx, &pp->desc, pp->d_coords, pp->n, NULL, p, pp->what);
}

static void check_cached_choice(const plan_pair *pp, const conv_data *cd, const vc_algo best[3]) {
  vc_context *ctx;
  vc_plan *p;
  if (fresh_plan(pp, &ctx, &p))
    for (int pass = 0; pass < 3; pass++) {
      vc_algo now = VC_ALGO_AUTO;
      CHECK_OK(ctx, vc_conv_algo_for(p, &cd->args, (vc_pass)pass, &now));
      CHECK(now == best[pass], "a fresh context runs %s for %s, the cache file says %s", vc_algo_name(now),
            vc_pass_name(pass), vc_algo_name(best[pass]));
    }
  vc_plan_destroy(p);
  vc_context_destroy(ctx);
}

/* Rewrites the cache file's line of pass `tag` ("|forward|", "|backward_weight|") to
 * `choice`; false when it has none. */
static bool set_choice(const char *file, const char *tag, const char *choice) {
  char lines[16][512];
  int n = 0, hit = -1;
  FILE *f = fopen(file, "r");
  if (!f) return false;
  while (n < 16 && fgets(lines[n], sizeof lines[n], f)) {
    if (strstr(lines[n], tag)) hit = n;
    n++;
  }
  const bool whole = n < 16 || fgetc(f) == EOF; /* a longer file would be cut short by the rewrite */
  fclose(f);
  char *space = hit >= 0 ? strrchr(lines[hit], ' ') : NULL;
  if (!whole || !space || !(f = fopen(file, "w"))) return false;
  *space = 0;
  for (int i = 0; i < n; i++) fprintf(f, i == hit ? "%s %s\n" : "%s", lines[i], choice);
  return fclose(f) == 0;
}

/* One run of `pass` with `algo` in a fresh context (under the cache file and environment as
 * they stand), checked against the reference; its outputs are kept in out (NULL on a
 * failure) or, with out NULL, freed. Returns the pass's workspace bytes. */
static size_t fresh_run(const plan_pair *pp, conv_data *cd, vc_pass pass, vc_algo algo, void *out[2],
                        const char *what) {
  vc_context *ctx;
  vc_plan *p;
  size_t bytes = 0;
  void *mine[2] = {NULL, NULL}, **got = out ? out : mine;
  got[0] = got[1] = NULL;
  if (fresh_plan(pp, &ctx, &p)) {
    vc_conv_args a = cd->args;
    a.algo = algo;
    CHECK_OK(ctx, vc_conv_workspace_size(p, &a, pass, &bytes));
    run_kept(ctx, p, cd, &a, pass, got, what);
  }
  free_outputs(mine);
  vc_plan_destroy(p);
  vc_context_destroy(ctx);
  return bytes;
}

/* The forward workspace and result of a fresh context under the cache file as it stands. */
static size_t forward_with_cache(const plan_pair *pp, conv_data *cd, const char *what) {
  return fresh_run(pp, cd, VC_PASS_FORWARD, cd->args.algo, NULL, what);
}

/* The masked kernels' tile variants through the cache file: a forced wide, split variant
 * is read back and runs (its split partials show in the workspace size) and computes the
 * same result; a variant name that does not exist is skipped like any malformed line. */
static void check_variants(const char *file, const plan_pair *pp, conv_data *cd) {
  FILE *f = fopen(file, "r");
  char text[4096] = "";
  if (f) {
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
  }
  /* every masked forward candidate is a tile variant or the pairs form, so a masked pick
   * names one */
  const char *fwd = strstr(text, "|forward|");
  const char *choice = fwd ? strchr(fwd, ' ') : NULL;
  CHECK(choice && (strncmp(choice, " masked", 7) || !strncmp(choice, " masked/bn", 10) ||
                   !strncmp(choice, " masked/pairs.bn256\n", 20)),
        "the cache file's forward line has no choice, or masked without its variant:\n%s", text);
  /* and every masked backward-weight candidate is one of the wgrad's forms */
  const char *wg = strstr(text, "|backward_weight|");
  const char *wchoice = wg ? strchr(wg, ' ') : NULL;
  CHECK(wchoice && (strncmp(wchoice, " masked", 7) || !strncmp(wchoice, " masked/pairs\n", 14) ||
                    !strncmp(wchoice, " masked/rows\n", 13)),
        "the cache file's backward_weight line has no choice, or masked without its form:\n%s", text);
  if (!g_has_masked) return;
  const size_t plain = forward_with_cache(pp, cd, "tuned forward");
  CHECK(set_choice(file, "|forward|", "masked/bn128.split5"), "cannot rewrite %s", file);
  const size_t forced = forward_with_cache(pp, cd, "forward, cached variant masked/bn128.split5");
  CHECK(set_choice(file, "|forward|", "masked/bn80.split5"), "cannot rewrite %s", file);
  const size_t bad = forward_with_cache(pp, cd, "forward, cache line with no such variant");
  CHECK(set_choice(file, "|forward|", "implicit"), "cannot rewrite %s", file);
  const size_t none = forward_with_cache(pp, cd, "forward, cached implicit");
  printf("  forward workspace: tuned %zu, bn128.split5 %zu, bn80.split5 (skipped) %zu, implicit %zu bytes\n", plain,
         forced, bad, none);
  /* 64 columns in 128-wide tiles, 5 splits: 5 partial tiles of 128 x 128 floats a row tile */
  const size_t want = (size_t)((pp->n + 127) / 128) * 5 * 128 * 128 * 4;
  CHECK(forced >= want, "masked/bn128.split5 from the cache file: workspace %zu < %zu, the variant did not apply",
        forced, want);
  CHECK(none == 0, "implicit from the cache file: forward workspace %zu, want 0", none);
  CHECK(bad < want, "a cache line naming no variant (bn80) was not skipped: workspace %zu", bad);
}

/* dW and db of pp's shape in a fresh VOXCONV_DETERMINISTIC context (every wgrad form bitwise
 * repeatable there): AUTO under the cache file as it stands (form NULL), or VC_ALGO_MASKED
 * with VOXCONV_MASKED_WGRAD=form; checked against the reference, kept in out. */
static bool wgrad_deterministic(const plan_pair *pp, conv_data *cd, const char *form, void *out[2], const char *what) {
  setenv("VOXCONV_DETERMINISTIC", "1", 1);
  if (form) setenv("VOXCONV_MASKED_WGRAD", form, 1);
  fresh_run(pp, cd, VC_PASS_BACKWARD_WEIGHT, form ? VC_ALGO_MASKED : VC_ALGO_AUTO, out, what);
  unsetenv("VOXCONV_DETERMINISTIC");
  unsetenv("VOXCONV_MASKED_WGRAD");
  return out[0] != NULL;
}

/* A backward_weight line naming masked/rows runs the rows form in a real call: its dW
 * equals the rows form's bit for bit, and the pairs form's (another order of additions)
 * differs, so the check can tell the forms apart. */
static void check_wgrad_form(const char *file, const plan_pair *pp, conv_data *cd) {
  if (!g_has_masked) return;
  CHECK(set_choice(file, "|backward_weight|", "masked/rows"), "cannot rewrite %s", file);
  void *rows[2], *pairs[2], *cached[2];
  bool ok = wgrad_deterministic(pp, cd, "rows", rows, "backward_weight, VOXCONV_MASKED_WGRAD=rows");
  ok = wgrad_deterministic(pp, cd, "pairs", pairs, "backward_weight, VOXCONV_MASKED_WGRAD=pairs") && ok;
  ok = wgrad_deterministic(pp, cd, NULL, cached, "backward_weight, cached masked/rows") && ok;
  if (ok) {
    const int64_t at = first_diff(rows[0], pairs[0], cd->n[T_DW], vc_dtype_size(cd->args.dtype));
    CHECK(at >= 0, "the rows and pairs forms gave the same dw bit for bit: the check cannot tell them apart");
    compare_runs(cd, VC_PASS_BACKWARD_WEIGHT, 0, rows, cached, "backward_weight, cached masked/rows against rows");
    printf("  backward_weight: cached masked/rows equals the rows form bitwise; pairs differs from element %lld\n",
           (long long)at);
  }
  free_outputs(rows);
  free_outputs(pairs);
  free_outputs(cached);
}

static void test_tune(void) {
  char dir[600], file[700];
  if (!vc_test_make_temp_dir(dir, sizeof dir, "vc_gpu_tests")) {
    CHECK(false, "cannot create a temporary directory for the tune cache");
    return;
  }
  setenv("VOXCONV_CACHE_DIR", dir, 1);
  vc_context *ctx = NULL;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &ctx));
  plan_pair pp;
  conv_data cd;
  memset(&pp, 0, sizeof pp);
  memset(&cd, 0, sizeof cd);
  if (ctx && subm_setup(&pp, &cd, ctx, g_small ? 2000 : 30000, 64, 64, VC_DTYPE_F16, ALL_PASSES)) {
    vc_algo best[3];
    tune_passes(ctx, &pp, &cd, best);
    snprintf(file, sizeof file, "%s/tune-v2.txt", dir);
    struct stat st;
    CHECK(stat(file, &st) == 0 && st.st_size > 0, "no tune cache file %s after vc_conv_tune", file);
    check_cached_choice(&pp, &cd, best);
    check_variants(file, &pp, &cd);
    check_wgrad_form(file, &pp, &cd);
  }
  data_free(&cd);
  pair_free(&pp);
  /* Few sites, wide channels: dw is larger than every other tensor of the tuning buffers. */
  if (ctx && subm_setup(&pp, &cd, ctx, 300, 128, 136, VC_DTYPE_BF16, ALL_PASSES)) {
    vc_algo best[3];
    tune_passes(ctx, &pp, &cd, best);
  }
  data_free(&cd);
  pair_free(&pp);
  vc_context_destroy(ctx);
  setenv("VOXCONV_CACHE_DIR", g_cache_dir, 1);
  vc_test_remove_dir(dir);
}

/* ---- (f) execute calls inside a CUDA graph ------------------------------------------------- */

static const vc_pass graph_passes[2] = {VC_PASS_FORWARD, VC_PASS_BACKWARD_DATA};

/* Records forward and backward-data into a graph. Global capture mode makes any allocation,
 * synchronisation or legacy-stream use inside the calls invalidate the capture. */
static cudaGraphExec_t capture_passes(vc_context *ctx, const plan_pair *pp, conv_data *cd, const vc_conv_args *a,
                                      void *const ws[2], const size_t bytes[2]) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  if (!CU(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal))) return NULL;
  vc_status s[2];
  for (int i = 0; i < 2; i++) s[i] = run_pass(ctx, pp->gpu, a, graph_passes[i], cd->dev, ws[i], bytes[i], g_stream);
  const cudaError_t e = cudaStreamEndCapture(g_stream, &graph);
  for (int i = 0; i < 2; i++)
    CHECK(s[i] == VC_OK, "under capture, %s returned %s (%s)", vc_pass_name(graph_passes[i]), vc_status_string(s[i]),
          vc_last_error(ctx));
  CHECK(e == cudaSuccess, "cudaStreamEndCapture: %s -- an execute call allocated, synchronised or left the stream",
        cudaGetErrorString(e));
  if (e == cudaSuccess && s[0] == VC_OK && s[1] == VC_OK) CU(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  if (graph) CU(cudaGraphDestroy(graph));
  return exec;
}

/* Replays the graph twice over poisoned outputs; each replay must equal the eager run
 * bitwise, or (an algorithm whose additions come in a varying order) the reference. */
static void replay_and_compare(cudaGraphExec_t exec, conv_data *cd, void *eager[2][2], bool bitwise,
                               const char *label) {
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 2; i++) poison_outputs(cd, graph_passes[i]);
    if (!CU(cudaGraphLaunch(exec, g_stream)) || !CU(cudaStreamSynchronize(g_stream))) return;
    for (int i = 0; i < 2; i++) {
      char what[128];
      snprintf(what, sizeof what, "graph replay %d, %s %s", r + 1, label, vc_pass_name(graph_passes[i]));
      void *got[2];
      if (download_outputs(cd, graph_passes[i], got, what)) {
        if (bitwise) compare_runs(cd, graph_passes[i], 0, eager[i], got, what);
        else check_close(cd, graph_passes[i], vc_tolerance(cd->args.dtype, cd->args.math), got, what);
      }
      free_outputs(got);
    }
  }
}

/* Forward and backward-data of one layer under `algo` on ctx: eager, then captured and
 * replayed (see replay_and_compare). */
static void graph_case(vc_context *ctx, int64_t n, int64_t ci, int64_t co, vc_dtype dt, vc_algo algo, bool bitwise,
                       const char *label) {
  plan_pair pp;
  conv_data cd;
  if (!subm_setup(&pp, &cd, ctx, n, ci, co, dt, 1u << VC_PASS_FORWARD | 1u << VC_PASS_BACKWARD_DATA)) {
    pair_free(&pp);
    return;
  }
  vc_conv_args a = cd.args;
  a.algo = algo;
  void *eager[2][2] = {{NULL, NULL}, {NULL, NULL}}, *ws[2] = {NULL, NULL};
  size_t bytes[2] = {0, 0};
  bool ok = true;
  for (int i = 0; i < 2; i++) {
    char what[200];
    snprintf(what, sizeof what, "%s eager %s %s", pp.what, label, vc_pass_name(graph_passes[i]));
    if (gpu_run(ctx, pp.gpu, &cd, &a, graph_passes[i], eager[i], what))
      check_close(&cd, graph_passes[i], vc_tolerance(a.dtype, a.math), eager[i], what);
    else
      ok = false;
    /* Workspaces exist before the capture: the calls themselves may not allocate. */
    CHECK_OK(ctx, vc_conv_workspace_size(pp.gpu, &a, graph_passes[i], &bytes[i]));
    if (bytes[i] && (ws[i] = dev_alloc(bytes[i])) != NULL) CU(cudaMemsetAsync(ws[i], 0xff, bytes[i], g_stream));
  }
  cudaGraphExec_t exec =
      ok && CU(cudaStreamSynchronize(g_stream)) ? capture_passes(ctx, &pp, &cd, &a, ws, bytes) : NULL;
  if (exec) {
    replay_and_compare(exec, &cd, eager, bitwise, label);
    CU(cudaGraphExecDestroy(exec));
  }
  for (int i = 0; i < 2; i++) {
    free_outputs(eager[i]);
    dev_free(ws[i]);
  }
  data_free(&cd);
  pair_free(&pp);
}

/* The implicit kernels (f16, 33 -> 64), bitwise; on sm_90, bf16's masked pairs form (264 ->
 * 264, both passes: two launches a pass, the second a programmatic dependent launch, which a
 * capture records as a graph edge of its own), against the reference. */
static void test_graph_capture(void) {
  graph_case(g_gpu, g_small ? 600 : 6000, 33, 64, VC_DTYPE_F16, VC_ALGO_IMPLICIT, true, "implicit");
  if (!g_has_masked) return;
  vc_context *ctx = NULL;
  setenv("VOXCONV_MASKED_FORM", "pairs", 1);
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CUDA, 0, &ctx));
  unsetenv("VOXCONV_MASKED_FORM");
  if (!ctx) return;
  graph_case(ctx, g_small ? 1500 : 4000, 264, 264, VC_DTYPE_BF16, VC_ALGO_MASKED, false, "masked pairs");
  /* eager and captured: two calls each */
  CHECK(vc_cuda_masked_pairs_runs(ctx) == 4, "graph capture: %lld pairs-form calls, expected 4",
        (long long)vc_cuda_masked_pairs_runs(ctx));
  vc_context_destroy(ctx);
}

/* ---- (e) feature tensors past 2^31 elements ------------------------------------------------ */

#define LARGE_C 512           /* channels in and out */
#define LARGE_K 27            /* 3x3x3 */
#define LARGE_SAMPLES 300     /* output rows checked on the host */
#define LARGE_PERIOD 33554467 /* x repeats with this odd period: never in step with rows or 2^31 */

typedef struct large_case {
  int64_t n;
  int32_t nb, lo, side;
  int32_t *coords, *grid, *slot; /* grid: box cell -> row or -1; slot: row -> sample or -1 */
  int64_t sample[LARGE_SAMPLES];
  float *xval;                   /* x element i (flat) is xval[i % LARGE_PERIOD] */
  double *w, *bias;              /* the uploaded values */
  void *d_x, *d_w, *d_bias, *d_y;
  vc_plan *plan;
} large_case;

static int64_t large_cell(const large_case *L, int32_t b, const int32_t q[3]) {
  int64_t cell = b;
  for (int a = 0; a < 3; a++) {
    if (q[a] < L->lo || q[a] >= L->lo + L->side) return -1;
    cell = cell * L->side + (q[a] - L->lo);
  }
  return cell;
}

/* The input row output `row` meets through offset r (pad 1: q = p - 1 + r), or -1: found in a
 * dense grid, independently of any hash table. */
static int32_t large_neighbour(const large_case *L, int64_t row, int r) {
  const int32_t *c = L->coords + 4 * row;
  const int32_t q[3] = {c[1] + r / 9 - 1, c[2] + r / 3 % 3 - 1, c[3] + r % 3 - 1};
  const int64_t cell = large_cell(L, c[0], q);
  return cell < 0 ? -1 : L->grid[cell];
}

static void large_index(large_case *L) {
  const int64_t cells = (int64_t)L->nb * L->side * L->side * L->side;
  L->grid = host_alloc((size_t)cells * sizeof *L->grid);
  memset(L->grid, 0xff, (size_t)cells * sizeof *L->grid);
  for (int64_t i = 0; i < L->n; i++) L->grid[large_cell(L, L->coords[4 * i], L->coords + 4 * i + 1)] = (int32_t)i;
  /* Rows around element 2^31 and at the very end, where 32-bit offsets would wrap, and
   * rows anywhere. */
  const int64_t r31 = ((int64_t)1 << 31) / LARGE_C;
  const int64_t fixed[4] = {0, r31 - 1, r31, L->n - 1};
  L->slot = host_alloc((size_t)L->n * sizeof *L->slot);
  memset(L->slot, 0xff, (size_t)L->n * sizeof *L->slot);
  for (int k = 0; k < LARGE_SAMPLES;) {
    const int64_t row = k < 4 ? fixed[k] : k < LARGE_SAMPLES / 2 ? vc_rand_int(0, (int32_t)L->n - 1)
                                                                 : vc_rand_int((int32_t)r31 - 64, (int32_t)L->n - 1);
    if (L->slot[row] >= 0) continue;
    L->slot[row] = k;
    L->sample[k++] = row;
  }
}

/* The GPU's pair count against the grid, and every pair of the sampled rows. */
static void large_check_map(const large_case *L) {
  int64_t expect = 0;
  for (int64_t i = 0; i < L->n; i++)
    for (int r = 0; r < LARGE_K; r++) expect += large_neighbour(L, i, r) >= 0;
  CHECK(vc_plan_pair_count(L->plan) == expect, "large: %lld pairs, the grid finds %lld",
        (long long)vc_plan_pair_count(L->plan), (long long)expect);
  map_snapshot s;
  snapshot_take(g_gpu, L->plan, &s);
  int32_t seen[LARGE_SAMPLES] = {0};
  int64_t wrong = 0;
  for (int r = 0; r < s.kvol && s.kvol == LARGE_K; r++)
    for (int64_t j = s.offsets[r]; j < s.offsets[r + 1]; j++) {
      const int32_t o = s.out_index[j];
      if (o < 0 || o >= L->n) {
        wrong++;
        continue;
      }
      if (L->slot[o] < 0) continue;
      seen[L->slot[o]]++;
      wrong += s.in_index[j] != large_neighbour(L, o, r);
    }
  for (int k = 0; k < LARGE_SAMPLES; k++) {
    int32_t want = 0;
    for (int r = 0; r < LARGE_K; r++) want += large_neighbour(L, L->sample[k], r) >= 0;
    wrong += seen[k] != want;
  }
  CHECK(wrong == 0, "large: %lld kernel-map entries of the sampled rows disagree with the grid", (long long)wrong);
  snapshot_free(&s);
}

static bool large_upload(large_case *L) {
  const int64_t nx = L->n * LARGE_C, nw = (int64_t)LARGE_C * LARGE_K * LARGE_C;
  void *block = vc_rand_tensor(VC_DTYPE_F16, LARGE_PERIOD, NULL);
  L->xval = host_alloc((size_t)LARGE_PERIOD * sizeof *L->xval);
  vc_convert_to_f32(VC_DTYPE_F16, block, L->xval, LARGE_PERIOD);
  L->d_x = dev_alloc((size_t)nx * 2);
  L->d_y = dev_alloc((size_t)nx * 2);
  /* Tiling one random block fills 4 GiB without a 4 GiB host buffer. */
  for (int64_t off = 0; L->d_x && off < nx; off += LARGE_PERIOD) {
    const int64_t m = nx - off < LARGE_PERIOD ? nx - off : LARGE_PERIOD;
    CU(cudaMemcpyAsync((char *)L->d_x + off * 2, block, (size_t)m * 2, cudaMemcpyHostToDevice, g_stream));
  }
  free(block);
  void *w = vc_rand_tensor(VC_DTYPE_F16, nw, &L->w), *b = vc_rand_tensor(VC_DTYPE_F16, LARGE_C, &L->bias);
  L->d_w = dev_upload(w, (size_t)nw * 2);
  L->d_bias = dev_upload(b, LARGE_C * 2);
  free(w);
  free(b);
  return L->d_x && L->d_y && L->d_w && L->d_bias;
}

/* y[row] in f64 from the grid's neighbours; xrow is scratch of LARGE_C. */
static void large_reference(const large_case *L, int64_t row, double *y, double *xrow) {
  for (int c = 0; c < LARGE_C; c++) y[c] = L->bias[c];
  for (int r = 0; r < LARGE_K; r++) {
    const int64_t q = large_neighbour(L, row, r);
    if (q < 0) continue;
    for (int k = 0; k < LARGE_C; k++) xrow[k] = L->xval[(q * LARGE_C + k) % LARGE_PERIOD];
    for (int c = 0; c < LARGE_C; c++) {
      const double *w = L->w + ((int64_t)c * LARGE_K + r) * LARGE_C;
      double s = 0;
      for (int k = 0; k < LARGE_C; k++) s += w[k] * xrow[k];
      y[c] += s;
    }
  }
}

/* Every output element finite (f16 exponent not all ones), i.e. every row written. */
static void large_check_finite(const large_case *L, const char *what) {
  const int64_t total = L->n * LARGE_C, chunk = (int64_t)1 << 26;
  uint16_t *h = host_alloc((size_t)chunk * sizeof *h);
  int64_t bad = 0, first = -1;
  for (int64_t off = 0; off < total; off += chunk) {
    const int64_t m = total - off < chunk ? total - off : chunk;
    if (!dev_download(h, (const uint16_t *)L->d_y + off, (size_t)m * sizeof *h)) break;
    for (int64_t i = 0; i < m; i++)
      if ((h[i] & 0x7c00) == 0x7c00 && bad++ == 0) first = off + i;
  }
  CHECK(bad == 0, "%s: %lld of %lld outputs are not finite, the first in row %lld", what, (long long)bad,
        (long long)total, (long long)(first / LARGE_C));
  free(h);
}

static void large_check_samples(const large_case *L, const char *what) {
  const int64_t m = (int64_t)LARGE_SAMPLES * LARGE_C;
  uint16_t *raw = host_alloc((size_t)m * sizeof *raw);
  for (int k = 0; k < LARGE_SAMPLES; k++)
    CU(cudaMemcpyAsync(raw + k * LARGE_C, (const uint16_t *)L->d_y + L->sample[k] * LARGE_C, LARGE_C * sizeof *raw,
                       cudaMemcpyDeviceToHost, g_stream));
  CU(cudaStreamSynchronize(g_stream));
  double *got = vc_to_f64(VC_DTYPE_F16, raw, m), *ref = host_alloc((size_t)m * sizeof *ref);
  double *xrow = host_alloc(LARGE_C * sizeof *xrow), worst = 0;
  int64_t worst_row = -1;
  for (int k = 0; k < LARGE_SAMPLES; k++) {
    large_reference(L, L->sample[k], ref + k * LARGE_C, xrow);
    const double e = vc_rel_err(got + k * LARGE_C, ref + k * LARGE_C, LARGE_C);
    if (!(e <= worst)) worst = e, worst_row = L->sample[k];
  }
  const double e = vc_rel_err(got, ref, m), tol = vc_tolerance(VC_DTYPE_F16, VC_MATH_F32);
  CHECK(e < tol, "%s: sampled rows rel err %.3g >= %.0e; worst row %lld (byte offset %lld) at %.3g", what, e, tol,
        (long long)worst_row, (long long)(worst_row * LARGE_C * 2), worst);
  free(raw), free(got), free(ref), free(xrow);
}

/* Forward with `algo` if its workspace fits, timed with events, then checked. */
static void large_forward(const large_case *L, vc_algo algo) {
  vc_conv_args a;
  vc_conv_args_init(&a, LARGE_C, LARGE_C, VC_DTYPE_F16);
  a.algo = algo;
  char what[64];
  snprintf(what, sizeof what, "large f16 %s forward", vc_algo_name(algo));
  size_t bytes = 0, free_b = 0, total_b = 0;
  vc_status s = vc_conv_workspace_size(L->plan, &a, VC_PASS_FORWARD, &bytes);
  CHECK(s == VC_OK, "%s: workspace size: %s (%s)", what, vc_status_string(s), vc_last_error(g_gpu));
  if (s != VC_OK || !CU(cudaMemGetInfo(&free_b, &total_b))) return;
  if (bytes + ((size_t)1 << 30) > free_b) {
    printf("  note: %s skipped: it needs %.1f GiB of workspace, %.1f GiB are free\n", what, bytes / 1073741824.0,
           free_b / 1073741824.0);
    return;
  }
  void *ws = bytes ? dev_alloc(bytes) : NULL;
  /* All ones is NaN in f16; poisoning 4 GiB through the host would double the host memory. */
  CU(cudaMemsetAsync(L->d_y, 0xff, (size_t)(L->n * LARGE_C) * 2, g_stream));
  cudaEvent_t ev[2] = {NULL, NULL};
  const bool events = CU(cudaEventCreate(&ev[0])) && CU(cudaEventCreate(&ev[1])) && CU(cudaEventRecord(ev[0], g_stream));
  s = vc_conv_forward(g_gpu, L->plan, &a, L->d_x, L->d_w, L->d_bias, L->d_y, ws, bytes, g_stream);
  CHECK(s == VC_OK, "%s: %s (%s)", what, vc_status_string(s), vc_last_error(g_gpu));
  float ms = 0;
  if (events && CU(cudaEventRecord(ev[1], g_stream)) && CU(cudaEventSynchronize(ev[1])) && s == VC_OK &&
      CU(cudaEventElapsedTime(&ms, ev[0], ev[1]))) {
    printf("  %s: %.1f ms, %.0f TFLOP/s useful\n", what, ms,
           2.0 * (double)vc_plan_pair_count(L->plan) * LARGE_C * LARGE_C / (ms * 1e9));
    large_check_finite(L, what);
    large_check_samples(L, what);
  }
  for (int i = 0; i < 2; i++)
    if (ev[i]) CU(cudaEventDestroy(ev[i]));
  dev_free(ws);
}

static void large_free(large_case *L) {
  vc_plan_destroy(L->plan);
  free(L->coords), free(L->grid), free(L->slot), free(L->xval), free(L->w), free(L->bias);
  dev_free(L->d_x), dev_free(L->d_w), dev_free(L->d_bias), dev_free(L->d_y);
}

/* Submanifold 3x3x3 over 4.3 M sites (two batches half filling a 163^3 box) with 512 channels
 * in f16: x and y hold 2.2e9 elements each, past 2^31. */
static void test_large_2e31_elements(void) {
  large_case L;
  memset(&L, 0, sizeof L);
  L.n = 4300000, L.nb = 2, L.side = 163, L.lo = -81;
  const size_t tensor = (size_t)(L.n * LARGE_C) * 2;
  size_t free_b = 0, total_b = 0;
  if (!CU(cudaMemGetInfo(&free_b, &total_b))) return;
  if (free_b < 2 * tensor + ((size_t)6 << 30)) {
    printf("  note: skipped: %.1f GiB free, the case needs about %.1f GiB\n", free_b / 1073741824.0,
           (2 * tensor + ((size_t)6 << 30)) / 1073741824.0);
    return;
  }
  double t = vc_test_now_ms();
  L.coords = vc_rand_coords(L.n, L.nb, L.lo, L.lo + L.side - 1);
  large_index(&L);
  printf("  %lld sites generated and indexed in %.0f ms\n", (long long)L.n, vc_test_now_ms() - t);
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  int32_t *dc = dev_upload(L.coords, (size_t)L.n * 4 * sizeof *dc);
  t = vc_test_now_ms();
  const bool ok = plan_make(g_gpu, &d, dc, L.n, NULL, &L.plan, "large") && CU(cudaStreamSynchronize(g_stream));
  dev_free(dc);
  if (ok) {
    printf("  plan: %lld pairs in %.1f ms\n", (long long)vc_plan_pair_count(L.plan), vc_test_now_ms() - t);
    large_check_map(&L);
    if (large_upload(&L)) {
      large_forward(&L, VC_ALGO_IMPLICIT);
      large_forward(&L, VC_ALGO_EXPLICIT);
    }
  }
  large_free(&L);
}

/* ---- main --------------------------------------------------------------------------------- */

static const vc_test_case cases[] = {
    {"kmap_submanifold", test_kmap_submanifold},
    {"kmap_sparse", test_kmap_sparse},
    {"kmap_inverse", test_kmap_inverse},
    {"kmap_transposed", test_kmap_transposed},
    {"kmap_bad_coords", test_kmap_bad_coords},
    {"kmap_isolated_sites", test_kmap_isolated_sites},
    {"kmap_edges", test_kmap_edges},
    {"kmap_large", test_kmap_large},
    {"conv_submanifold", test_conv_submanifold},
    {"conv_sparse", test_conv_sparse},
    {"conv_inverse", test_conv_inverse},
    {"conv_transposed", test_conv_transposed},
    {"masked_tiles", test_masked_tiles},
    {"masked_groups", test_masked_groups},
    {"masked_pairs", test_masked_pairs},
    {"masked_wgrad_fallback", test_masked_wgrad_fallback},
    {"determinism", test_determinism},
    {"tune", test_tune},
    {"graph_capture", test_graph_capture},
    {"large_2e31_elements", test_large_2e31_elements},
    {NULL, NULL},
};

/* --small runs every case but the two whose size is their point. */
static bool skip_case(const vc_test_case *t) {
  return g_small && (t->fn == test_kmap_large || t->fn == test_large_2e31_elements);
}

/* The environment of the run: no forced algorithms or determinism from the caller's shell,
 * and a private tune cache, so AUTO starts from the heuristic. */
static bool setup(void) {
  static const char *const forced[] = {"VOXCONV_ALGO_FORWARD", "VOXCONV_ALGO_BACKWARD_DATA",
                                       "VOXCONV_ALGO_BACKWARD_WEIGHT", "VOXCONV_DETERMINISTIC"};
  for (size_t i = 0; i < sizeof forced / sizeof *forced; i++) unsetenv(forced[i]);
  if (!vc_test_make_temp_dir(g_cache_dir, sizeof g_cache_dir, "vc_gpu_tests")) {
    fprintf(stderr, "vc_gpu_tests: cannot create a temporary directory\n");
    return false;
  }
  setenv("VOXCONV_CACHE_DIR", g_cache_dir, 1);
  unsetenv("VOXCONV_MASKED_BN");
  unsetenv("VOXCONV_MASKED_SPLIT");
  unsetenv("VOXCONV_MASKED_PIPES");
  unsetenv("VOXCONV_MASKED_WGRAD");
  unsetenv("VOXCONV_MASKED_FORM");
  const char *wg = getenv("VOXCONV_WGMMA");
  struct cudaDeviceProp prop;
  g_has_masked = CU(cudaGetDeviceProperties(&prop, 0)) && prop.major == 9 && prop.minor == 0 && !(wg && !strcmp(wg, "0"));
  vc_status s = vc_context_create(VC_DEVICE_CPU, 0, &g_cpu);
  if (s == VC_OK) s = vc_context_create(VC_DEVICE_CUDA, 0, &g_gpu);
  if (s != VC_OK) {
    fprintf(stderr, "vc_gpu_tests: vc_context_create: %s (%s)%s\n", vc_status_string(s), vc_last_error(NULL),
            s == VC_ERR_UNSUPPORTED ? " -- this libvoxconv was built without the CUDA backend" : "");
    return false;
  }
  return CU(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
}

static void teardown(void) {
  vc_context_destroy(g_gpu);
  vc_context_destroy(g_cpu);
  if (g_stream) CU(cudaStreamDestroy(g_stream));
  if (g_cache_dir[0]) vc_test_remove_dir(g_cache_dir);
  /* Ends the CUDA context, so compute-sanitizer's leak check sees everything released. */
  CU(cudaDeviceReset());
}

static void print_device(void) {
  struct cudaDeviceProp prop;
  int dev = 0, rt = 0, drv = 0;
  if (CU(cudaGetDevice(&dev)) && CU(cudaGetDeviceProperties(&prop, dev)) && CU(cudaRuntimeGetVersion(&rt)) &&
      CU(cudaDriverGetVersion(&drv)))
    printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB; runtime %d, driver %d\n", dev, prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, rt, drv);
}

int main(int argc, char **argv) {
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--small")) {
      g_small = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: %s [--small] [name-substring]\n", argv[0]);
      return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
    } else {
      filter = argv[i];
    }
  }
  int ndev = 0;
  const cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev < 1) {
    printf("vc_gpu_tests: no CUDA device is available (%s): GPU tests skipped\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "the runtime reports 0 devices");
    return 77;
  }
  vc_test_runner r = {.seed = vc_test_seed_from_env(), .filter = filter, .skip = skip_case, .seed_by_index = true,
                      .wall_clock = true, .name_width = 28};
  printf("voxconv GPU tests%s, VC_TEST_SEED=%llu\n", g_small ? " (--small)" : "", (unsigned long long)r.seed);
  print_device();
  if (!setup()) r.failed = 1;
  else vc_test_run_cases(&r, cases);
  vc_test_reset_failures();
  teardown();
  if (vc_test_failures()) r.failed++; /* a failing teardown is a failure too */
  return vc_test_summary(&r);
}
