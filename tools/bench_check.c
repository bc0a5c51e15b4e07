/* bench_check.c — the sampled f64 check of one layer's three passes (bench.h).
 *
 * A full reference is too slow at millions of voxels, but every output element depends only
 * on a few rows: y[o] on the input rows paired with o, dx[i] on the output rows paired with
 * i, dw[co, r] on the pairs of offset r. The plan's kernel map (copied to the host) names
 * them; for a given row and offset there is at most one partner, so a [rows, K] table of
 * partners holds everything the sampled rows need.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

enum { CHECK_ROWS = 256, CHECK_DW_ROWS = 16 };

/* One layer's operands and results, copied to the host in their storage dtype. */
typedef struct host_layer {
  vc_dtype dt;
  int kvol;
  int64_t n_in, n_out, ci, co;
  int64_t *off;              /* kernel map: pairs of offset r are off[r] .. off[r+1]-1 */
  int32_t *in_idx, *out_idx; /* ... with these input and output rows */
  float *w, *b;              /* f32 copies [co, K, ci] and [co] (b NULL without bias) */
  void *x, *dy, *y, *dx, *dw, *db;
} host_layer;

/* out[0..count) = elements first .. first+count-1 of t, as f32. */
static void load_f32(vc_dtype dt, const void *t, int64_t first, int64_t count, float *out) {
  check(NULL, vc_convert_to_f32(dt, (const char *)t + (size_t)first * vc_dtype_size(dt), out, count));
}

/* ---- copying the layer to the host ------------------------------------------------------- */

static void *host_tensor(const vc_dev *d, vc_dtype dt, const void *src, int64_t n) {
  return dev_to_host(d, src, (size_t)n * vc_dtype_size(dt));
}

/* t's tensors (device) into h; the outputs must have been computed. */
static void host_layer_fill(const vc_dev *d, const vc_plan *p, const vc_conv_args *a, const conv_tensors *t,
                            host_layer *h) {
  *h = (host_layer){.dt = a->dtype, .kvol = vc_plan_kernel_volume(p), .n_in = vc_plan_in_count(p),
                    .n_out = vc_plan_out_count(p), .ci = a->in_channels, .co = a->out_channels};
  const int64_t wn = h->co * h->kvol * h->ci;
  dev_kernel_map(d, p, &h->off, &h->in_idx, &h->out_idx);
  h->w = dev_to_f32(d, h->dt, t->w, wn);
  h->b = t->b ? dev_to_f32(d, h->dt, t->b, h->co) : NULL;
  h->x = host_tensor(d, h->dt, t->x, h->n_in * h->ci), h->dx = host_tensor(d, h->dt, t->dx, h->n_in * h->ci);
  h->dy = host_tensor(d, h->dt, t->dy, h->n_out * h->co), h->y = host_tensor(d, h->dt, t->y, h->n_out * h->co);
  h->dw = host_tensor(d, h->dt, t->dw, wn), h->db = host_tensor(d, h->dt, t->db, h->co);
}

static void host_layer_free(host_layer *h) {
  void *bufs[] = {h->off, h->in_idx, h->out_idx, h->w, h->b, h->x, h->dy, h->y, h->dx, h->dw, h->db};
  for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) free(bufs[k]);
}

/* ---- sampling ---------------------------------------------------------------------------- */

/* min(n, want) distinct rows in ascending order, one at random in each of as many equal
 * strata of [0, n). */
static int64_t *sample_rows(int64_t n, int64_t want, int64_t *k) {
  *k = n < want ? n : want;
  int64_t *rows = xmalloc((size_t)(*k ? *k : 1) * sizeof *rows);
  for (int64_t j = 0; j < *k; j++) {
    const int64_t lo = j * n / *k, hi = (j + 1) * n / *k;
    rows[j] = lo + (int64_t)rng_uniform(0, (double)(hi - lo));
  }
  return rows;
}

/* partner[s * K + r]: the row paired with rows[s] through offset r, or -1. by_out: rows are
 * output rows and partners input rows; else the reverse. */
static int32_t *partners(const host_layer *h, const int64_t *rows, int64_t k, bool by_out) {
  const int64_t n = by_out ? h->n_out : h->n_in;
  int32_t *slot = xmalloc((size_t)n * sizeof *slot), *part = xmalloc((size_t)(k * h->kvol + 1) * sizeof *part);
  memset(slot, 0xff, (size_t)n * sizeof *slot);
  memset(part, 0xff, (size_t)(k * h->kvol + 1) * sizeof *part);
  for (int64_t s = 0; s < k; s++) slot[rows[s]] = (int32_t)s;
  const int32_t *key = by_out ? h->out_idx : h->in_idx, *other = by_out ? h->in_idx : h->out_idx;
  for (int r = 0; r < h->kvol; r++)
    for (int64_t p = h->off[r]; p < h->off[r + 1]; p++)
      if (slot[key[p]] >= 0) part[(int64_t)slot[key[p]] * h->kvol + r] = other[p];
  free(slot);
  return part;
}

/* ||t[rows] - ref|| / ||ref|| over k rows of `width` elements. */
static double rows_error(vc_dtype dt, const void *t, const int64_t *rows, int64_t k, int64_t width,
                         const double *ref) {
  float *row = xmalloc((size_t)width * sizeof *row);
  err_acc e = {0, 0};
  for (int64_t s = 0; s < k; s++) {
    load_f32(dt, t, rows[s] * width, width, row);
    for (int64_t j = 0; j < width; j++) err_acc_add(&e, row[j], ref[s * width + j]);
  }
  free(row);
  return err_acc_value(&e);
}

/* ---- the f64 values ---------------------------------------------------------------------- */

/* y[o] = b + sum over offsets r of W[:, r, :] x[part[r]]. */
static void forward_row(const host_layer *h, const int32_t *part, double *out) {
  float *xr = xmalloc((size_t)h->ci * sizeof *xr);
  for (int64_t j = 0; j < h->co; j++) out[j] = h->b ? h->b[j] : 0;
  for (int r = 0; r < h->kvol; r++) {
    if (part[r] < 0) continue;
    load_f32(h->dt, h->x, part[r] * h->ci, h->ci, xr);
    for (int64_t j = 0; j < h->co; j++) {
      const float *wr = h->w + (j * h->kvol + r) * h->ci;
      double acc = 0;
      for (int64_t i = 0; i < h->ci; i++) acc += (double)wr[i] * xr[i];
      out[j] += acc;
    }
  }
  free(xr);
}

/* dx[i] = sum over offsets r of W[:, r, :]^T dy[part[r]]. */
static void backward_data_row(const host_layer *h, const int32_t *part, double *out) {
  float *dyr = xmalloc((size_t)h->co * sizeof *dyr);
  for (int64_t i = 0; i < h->ci; i++) out[i] = 0;
  for (int r = 0; r < h->kvol; r++) {
    if (part[r] < 0) continue;
    load_f32(h->dt, h->dy, part[r] * h->co, h->co, dyr);
    for (int64_t j = 0; j < h->co; j++) {
      const float *wr = h->w + (j * h->kvol + r) * h->ci;
      for (int64_t i = 0; i < h->ci; i++) out[i] += (double)dyr[j] * wr[i];
    }
  }
  free(dyr);
}

typedef void (*row_fn)(const host_layer *h, const int32_t *part, double *out);

/* Samples output rows (forward) or input rows (backward-data), computes them in f64 and
 * compares with y or dx. */
static double check_rows(const host_layer *h, bool by_out, row_fn fn) {
  const int64_t n = by_out ? h->n_out : h->n_in, width = by_out ? h->co : h->ci;
  int64_t k = 0, *rows = sample_rows(n, CHECK_ROWS, &k);
  int32_t *part = partners(h, rows, k, by_out);
  double *ref = xmalloc((size_t)(k * width + 1) * sizeof *ref);
#pragma omp parallel for schedule(dynamic)
  for (int64_t s = 0; s < k; s++) fn(h, part + s * h->kvol, ref + s * width);
  const double err = rows_error(h->dt, by_out ? h->y : h->dx, rows, k, width, ref);
  free(rows), free(part), free(ref);
  return err;
}

/* dw[co, r, :] = sum over the pairs (in, out) of offset r of dy[out, co] x[in, :]. */
static void backward_weight_row(const host_layer *h, int64_t co, int r, double *out) {
  float *xr = xmalloc((size_t)h->ci * sizeof *xr), d = 0;
  for (int64_t i = 0; i < h->ci; i++) out[i] = 0;
  for (int64_t p = h->off[r]; p < h->off[r + 1]; p++) {
    load_f32(h->dt, h->dy, h->out_idx[p] * h->co + co, 1, &d);
    load_f32(h->dt, h->x, h->in_idx[p] * h->ci, h->ci, xr);
    for (int64_t i = 0; i < h->ci; i++) out[i] += (double)d * xr[i];
  }
  free(xr);
}

/* db = the sum of dy's rows, all of it. */
static double check_db(const host_layer *h) {
  double *ref = xcalloc((size_t)h->co, sizeof *ref);
  float *row = xmalloc((size_t)h->co * sizeof *row);
  for (int64_t o = 0; o < h->n_out; o++) {
    load_f32(h->dt, h->dy, o * h->co, h->co, row);
    for (int64_t j = 0; j < h->co; j++) ref[j] += row[j];
  }
  const int64_t zero = 0;
  const double err = rows_error(h->dt, h->db, &zero, 1, h->co, ref);
  free(ref), free(row);
  return err;
}

/* dw viewed as [co * K, ci]: row f is (co, r) = (f / K, f % K). */
static double check_weight(const host_layer *h) {
  int64_t k = 0, *rows = sample_rows(h->co * h->kvol, CHECK_DW_ROWS, &k);
  double *ref = xmalloc((size_t)(k * h->ci + 1) * sizeof *ref);
#pragma omp parallel for schedule(dynamic)
  for (int64_t s = 0; s < k; s++) backward_weight_row(h, rows[s] / h->kvol, (int)(rows[s] % h->kvol), ref + s * h->ci);
  const double err = rows_error(h->dt, h->dw, rows, k, h->ci, ref);
  free(rows), free(ref);
  return worse(err, check_db(h));
}

/* ---- the check --------------------------------------------------------------------------- */

double bench_check_layer(bench_env *e, const vc_plan *p, const vc_conv_args *a, const void *x, const void *w,
                         const void *b, workspace *ws) {
  const vc_dev *d = &e->dev;
  const vc_dtype dt = a->dtype;
  const int64_t n_in = vc_plan_in_count(p), n_out = vc_plan_out_count(p);
  const int64_t wn = a->out_channels * vc_plan_kernel_volume(p) * a->in_channels;
  conv_tensors t = {x, w, b, dev_random(d, dt, n_out * a->out_channels, 1.0),
                    dev_poisoned(d, dt, n_out * a->out_channels), dev_poisoned(d, dt, n_in * a->in_channels),
                    dev_poisoned(d, dt, wn), dev_poisoned(d, dt, a->out_channels)};
  for (int pass = 0; pass < 3; pass++) {
    const conv_call c = conv_call_for(d->ctx, p, a, (vc_pass)pass, &t, ws, d->stream);
    check(d->ctx, conv_execute(&c));
  }
  dev_sync(d);
  host_layer h;
  host_layer_fill(d, p, a, &t, &h);
  double err = check_rows(&h, true, forward_row);
  err = worse(err, check_rows(&h, false, backward_data_row));
  err = worse(err, check_weight(&h));
  host_layer_free(&h);
  void *owned[] = {(void *)t.dy, t.y, t.dx, t.dw, t.db};
  for (int k = 0; k < 5; k++) dev_free(d, owned[k]);
  return err;
}
