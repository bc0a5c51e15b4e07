/* voxelize.c — points and triangles to unique voxel sites (ply.h).
 *
 * Coordinates are taken in voxel units (p / size), where voxel v is the half-open cell
 * [v, v + 1) per axis. A triangle is clipped to the x slabs of its bounding box, each piece
 * to the y slabs of its own extent, and each of those to the z slabs: every non-empty cell
 * piece is a site. That is exact (no sampling that could miss a corner the surface grazes),
 * and its work is proportional to the sites it finds, which a bound from the triangle's area
 * and perimeter limits before any work starts. Sites are collected as packed keys, repeats
 * included (cells on shared edges), then radix-sorted and made unique (vc_sites_from_keys,
 * which lidar.c's scans share).
 */
#include "ply.h"

#include "voxconv.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int vc_voxel_size_check(double size, char *err, size_t err_len) {
  if (size > 0 && isfinite(size)) return 0;
  return vc_ply_error(err, err_len, "voxel size %g is not a positive finite number", size);
}

/* ---- sites as keys (ply.h): collected with repeats, radix-sorted, repeats dropped ------- */

#define AXIS_BITS 17
#define AXIS_MASK ((UINT64_C(1) << AXIS_BITS) - 1)
#define KEY_BITS (3 * AXIS_BITS + 12) /* the batch takes 12 bits: VC_BATCH_MAX is 4096 */

uint64_t vc_site_key(int64_t b, int64_t x, int64_t y, int64_t z) {
  return (uint64_t)b << (3 * AXIS_BITS) | (uint64_t)(x - VC_COORD_MIN) << (2 * AXIS_BITS) |
         (uint64_t)(y - VC_COORD_MIN) << AXIS_BITS | (uint64_t)(z - VC_COORD_MIN);
}

static void site_of_key(uint64_t k, int32_t *row) {
  row[0] = (int32_t)(k >> (3 * AXIS_BITS));
  for (int a = 0; a < 3; a++) row[1 + a] = (int32_t)((k >> (AXIS_BITS * (2 - a))) & AXIS_MASK) + VC_COORD_MIN;
}

/* LSD radix, 11-bit digits (a count table small enough for tiny lists): stable passes over
 * the key bits, skipping a digit every key shares (the batch of one voxelised mesh). */
#define DIGIT_BITS 11
int32_t *vc_sites_from_keys(uint64_t *keys, int64_t count, int64_t *n) {
  enum { BUCKETS = 1 << DIGIT_BITS };
  const size_t len = (size_t)count;
  uint64_t *v = keys, *tmp = malloc((len ? len : 1) * sizeof *tmp);
  *n = 0;
  if (!tmp) {
    free(keys);
    return NULL;
  }
  for (int shift = 0; shift < KEY_BITS; shift += DIGIT_BITS) {
    size_t at[BUCKETS] = {0};
    for (size_t i = 0; i < len; i++) at[(v[i] >> shift) & (BUCKETS - 1)]++;
    if (len == 0 || at[(v[0] >> shift) & (BUCKETS - 1)] == len) continue;
    for (size_t b = 0, sum = 0; b < BUCKETS; b++) {
      size_t c = at[b];
      at[b] = sum, sum += c;
    }
    for (size_t i = 0; i < len; i++) tmp[at[(v[i] >> shift) & (BUCKETS - 1)]++] = v[i];
    uint64_t *t = v;
    v = tmp, tmp = t;
  }
  free(tmp); /* the other buffer: keys or the scratch, whichever the last pass left behind */
  size_t m = 0;
  for (size_t i = 0; i < len; i++)
    if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
  int32_t *rows = malloc((m ? m : 1) * 4 * sizeof *rows);
  for (size_t i = 0; rows && i < m; i++) site_of_key(v[i], rows + 4 * i);
  free(v);
  if (rows) *n = (int64_t)m;
  return rows;
}

typedef struct key_list {
  uint64_t *v;
  size_t n, cap;
  int32_t batch;
} key_list;

static bool push(key_list *l, const int64_t v[3]) {
  if (!vc_ply_grow((void **)&l->v, &l->cap, l->n, sizeof *l->v, 1024)) return false;
  l->v[l->n++] = vc_site_key(l->batch, v[0], v[1], v[2]);
  return true;
}

/* ---- clipping ----------------------------------------------------------------------------- */

typedef struct pt {
  double v[3];
} pt;

/* Sutherland-Hodgman against one plane: keeps the part of the convex polygon in[0..n) with
 * p[axis] >= bound (above) or p[axis] <= bound. Crossing points land exactly on the plane.
 * A convex polygon gains at most one vertex; out must hold 2n, which even a rounding-bent
 * polygon cannot exceed (each edge emits at most two points). */
static int clip_plane(const pt *in, int n, int axis, double bound, bool above, pt *out) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    const pt *s = &in[i], *e = &in[(i + 1) % n];
    double ds = above ? s->v[axis] - bound : bound - s->v[axis];
    double de = above ? e->v[axis] - bound : bound - e->v[axis];
    if (ds >= 0) out[m++] = *s;
    if ((ds >= 0) != (de >= 0)) {
      double t = ds / (ds - de);
      pt x;
      for (int a = 0; a < 3; a++) x.v[a] = s->v[a] + t * (e->v[a] - s->v[a]);
      x.v[axis] = bound;
      out[m++] = x;
    }
  }
  return m;
}

/* The piece of in[0..n) inside the closed slab lo <= p[axis] <= lo + 1; out holds 4n, n <= 48. */
static int clip_slab(const pt *in, int n, int axis, double lo, pt *out) {
  pt mid[2 * 48];
  int m = clip_plane(in, n, axis, lo, true, mid);
  return clip_plane(mid, m, axis, lo + 1, false, out);
}

static void extent(const pt *p, int n, int axis, double *lo, double *hi) {
  *lo = *hi = p[0].v[axis];
  for (int i = 1; i < n; i++) {
    if (p[i].v[axis] < *lo) *lo = p[i].v[axis];
    if (p[i].v[axis] > *hi) *hi = p[i].v[axis];
  }
}

/* The cells [lo, hi] (clamped to the triangle's cell box c0..c1) that the piece p spans. */
static void cell_range(const pt *p, int n, int axis, const int64_t *c0, const int64_t *c1, int64_t *lo, int64_t *hi) {
  double a, b;
  extent(p, n, axis, &a, &b);
  *lo = (int64_t)fmax(floor(a), (double)c0[axis]);
  *hi = (int64_t)fmin(floor(b), (double)c1[axis]);
}

/* Whether the piece of the closed cell reaches into the half-open cell: a convex piece does
 * exactly when, per axis, one of its points is below the upper face (mix those points). */
static bool below_upper(const pt *p, int n, int axis, int64_t cell) {
  double a, b;
  extent(p, n, axis, &a, &b);
  return a < (double)cell + 1;
}

/* Every cell the triangle q (voxel units; its vertices in cells c0..c1) meets. A slab adds at
 * most 2 vertices to a convex piece (5, 7, 9 in practice) and at most multiplies a
 * rounding-bent one by 4: the buffers hold 3 -> 12 -> 48 -> 192. */
static bool raster_triangle(const pt q[3], const int64_t c0[3], const int64_t c1[3], key_list *s) {
  pt px[4 * 3], py[4 * 4 * 3], pz[4 * 4 * 4 * 3];
  int64_t c[3];
  for (c[0] = c0[0]; c[0] <= c1[0]; c[0]++) {
    int nx = clip_slab(q, 3, 0, (double)c[0], px);
    if (!nx || !below_upper(px, nx, 0, c[0])) continue;
    int64_t ylo, yhi;
    cell_range(px, nx, 1, c0, c1, &ylo, &yhi);
    for (c[1] = ylo; c[1] <= yhi; c[1]++) {
      int ny = clip_slab(px, nx, 1, (double)c[1], py);
      if (!ny || !below_upper(py, ny, 0, c[0]) || !below_upper(py, ny, 1, c[1])) continue;
      int64_t zlo, zhi;
      cell_range(py, ny, 2, c0, c1, &zlo, &zhi);
      for (c[2] = zlo; c[2] <= zhi; c[2]++) {
        int nz = clip_slab(py, ny, 2, (double)c[2], pz);
        if (nz && below_upper(pz, nz, 0, c[0]) && below_upper(pz, nz, 1, c[1]) && below_upper(pz, nz, 2, c[2]))
          if (!push(s, c)) return false;
      }
    }
  }
  return true;
}

/* At most how many cells the triangle can meet: its cell box, and the volume of the triangle
 * grown by a cell diagonal (sqrt 3), which holds every cell it meets (Steiner's formula for
 * a flat convex set: 2rA + (pi/2) r^2 P + (4/3) pi r^3). */
static double triangle_bound(const pt q[3], const int64_t c0[3], const int64_t c1[3]) {
  double box = 1, e[3][3], perimeter = 0;
  for (int a = 0; a < 3; a++) box *= (double)(c1[a] - c0[a] + 1);
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 3; a++) e[i][a] = q[(i + 1) % 3].v[a] - q[i].v[a];
  for (int i = 0; i < 3; i++) perimeter += sqrt(e[i][0] * e[i][0] + e[i][1] * e[i][1] + e[i][2] * e[i][2]);
  double cx = e[0][1] * e[1][2] - e[0][2] * e[1][1], cy = e[0][2] * e[1][0] - e[0][0] * e[1][2],
         cz = e[0][0] * e[1][1] - e[0][1] * e[1][0];
  const double pi = 3.14159265358979323846, r = 1.7320508075688772;
  double area = 0.5 * sqrt(cx * cx + cy * cy + cz * cz);
  double grown = 2 * r * area + pi / 2 * r * r * perimeter + 4.0 / 3.0 * pi * r * r * r;
  return fmin(box, grown);
}

/* ---- the voxeliser ------------------------------------------------------------------------- */

static const char axis_name[3] = {'x', 'y', 'z'};

/* The cell of vertex v, checked against the supported coordinate range. */
static int vertex_cell(const vc_ply *p, int64_t v, double size, pt *q, int64_t cell[3], char *err, size_t el) {
  for (int a = 0; a < 3; a++) {
    double x = p->xyz[3 * v + a];
    if (!isfinite(x)) return vc_ply_error(err, el, "vertex %lld: coordinate is not finite", (long long)v);
    q->v[a] = x / size;
    double f = floor(q->v[a]);
    if (!(f >= VC_COORD_MIN && f <= VC_COORD_MAX))
      return vc_ply_error(err, el, "vertex %lld: voxel index %.15g on axis %c is outside [%d, %d] at voxel size %g",
                          (long long)v, f, axis_name[a], VC_COORD_MIN, VC_COORD_MAX, size);
    cell[a] = (int64_t)f;
  }
  return 0;
}

/* Loads triangle t: its vertices in voxel units and its cell box. */
static int triangle_cells(const vc_ply *p, int64_t t, double size, pt q[3], int64_t c0[3], int64_t c1[3], char *err,
                          size_t el) {
  for (int i = 0; i < 3; i++) {
    int64_t v = p->tris[3 * t + i], cell[3];
    if (v < 0 || v >= p->n_vertices)
      return vc_ply_error(err, el, "triangle %lld: vertex index %lld is outside [0, %lld)", (long long)t, (long long)v,
                          (long long)p->n_vertices);
    if (vertex_cell(p, v, size, &q[i], cell, err, el)) return -1;
    for (int a = 0; a < 3; a++) {
      if (i == 0 || cell[a] < c0[a]) c0[a] = cell[a];
      if (i == 0 || cell[a] > c1[a]) c1[a] = cell[a];
    }
  }
  return 0;
}

int vc_voxelize_limited(const vc_ply *p, double size, int32_t batch, int64_t max_sites, int32_t **coords,
                        int64_t *n, char *err, size_t err_len) {
  if (coords) *coords = NULL;
  if (n) *n = 0;
  if (!p || !coords || !n || p->n_vertices < 0 || p->n_tris < 0 || (p->n_vertices && !p->xyz) ||
      (p->n_tris && !p->tris))
    return vc_ply_error(err, err_len, "NULL or inconsistent argument");
  if (vc_voxel_size_check(size, err, err_len)) return -1;
  if (batch < 0 || batch >= VC_BATCH_MAX)
    return vc_ply_error(err, err_len, "batch %d is outside [0, %d)", (int)batch, VC_BATCH_MAX);

  /* Everything is checked and the work bounded before the first site is stored. */
  pt q[3];
  int64_t c0[3], c1[3];
  double bound = (double)p->n_vertices;
  for (int64_t v = 0; v < p->n_vertices; v++)
    if (vertex_cell(p, v, size, &q[0], c0, err, err_len)) return -1;
  for (int64_t t = 0; t < p->n_tris; t++) {
    if (triangle_cells(p, t, size, q, c0, c1, err, err_len)) return -1;
    bound += triangle_bound(q, c0, c1);
  }
  if (bound > (double)max_sites)
    return vc_ply_error(err, err_len,
                        "at voxel size %g the surface could cover more than %lld voxels (the limit); use a larger "
                        "voxel size",
                        size, (long long)max_sites);

  key_list keys = {NULL, 0, 0, batch};
  bool ok = true;
  for (int64_t v = 0; ok && v < p->n_vertices; v++) {
    vertex_cell(p, v, size, &q[0], c0, NULL, 0);
    ok = push(&keys, c0);
  }
  for (int64_t t = 0; ok && t < p->n_tris; t++) {
    triangle_cells(p, t, size, q, c0, c1, NULL, 0);
    ok = raster_triangle(q, c0, c1, &keys);
  }
  if (!ok) {
    free(keys.v);
    return vc_ply_error(err, err_len, "out of memory");
  }
  int32_t *out = vc_sites_from_keys(keys.v, (int64_t)keys.n, n);
  if (!out) return vc_ply_error(err, err_len, "out of memory");
  *coords = out;
  return 0;
}

int vc_voxelize(const vc_ply *p, double size, int32_t batch, int32_t **coords, int64_t *n, char *err,
                size_t err_len) {
  return vc_voxelize_limited(p, size, batch, VC_VOXELIZE_MAX_SITES, coords, n, err, err_len);
}

int vc_voxel_size_for(const vc_ply *p, int resolution, double *size, char *err, size_t err_len) {
  if (!p || !size || (p->n_vertices > 0 && !p->xyz)) return vc_ply_error(err, err_len, "NULL or inconsistent argument");
  if (resolution < 1) return vc_ply_error(err, err_len, "resolution %d is not positive", resolution);
  if (p->n_vertices <= 0) return vc_ply_error(err, err_len, "no vertices to fit");
  double lo[3], hi[3], span = 0;
  for (int64_t v = 0; v < p->n_vertices; v++)
    for (int a = 0; a < 3; a++) {
      double x = p->xyz[3 * v + a];
      if (!isfinite(x)) return vc_ply_error(err, err_len, "vertex %lld: coordinate is not finite", (long long)v);
      if (v == 0 || x < lo[a]) lo[a] = x;
      if (v == 0 || x > hi[a]) hi[a] = x;
    }
  for (int a = 0; a < 3; a++) span = fmax(span, hi[a] - lo[a]);
  if (span == 0) return vc_ply_error(err, err_len, "all vertices lie at one point: there is no extent to fit");
  *size = span / resolution;
  if (!(*size > 0 && isfinite(*size)))
    return vc_ply_error(err, err_len, "the vertices' extent %g gives no usable voxel size at resolution %d", span,
                        resolution);
  return 0;
}
