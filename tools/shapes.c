/* shapes.c — procedural voxel shapes: a sphere shell (suite S) and a torus shell. */
#include "shapes.h"

#include "voxconv.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A growing coordinate list: shapes do not know their voxel count up front. */
typedef struct coord_list {
  int32_t *rows;
  int64_t n, cap;
} coord_list;

static bool list_push(coord_list *l, int32_t b, int32_t x, int32_t y, int32_t z) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 1024;
    int32_t *grown = realloc(l->rows, (size_t)cap * 4 * sizeof *grown);
    if (!grown) return false;
    l->rows = grown;
    l->cap = cap;
  }
  int32_t *r = l->rows + 4 * l->n++;
  r[0] = b, r[1] = x, r[2] = y, r[3] = z;
  return true;
}

/* Hands the list to the caller; an empty shape still gets a valid (freeable) pointer. */
static int32_t *list_finish(coord_list *l, int64_t *n) {
  if (!l->rows) l->rows = malloc(4 * sizeof *l->rows);
  *n = l->rows ? l->n : 0;
  return l->rows;
}

typedef bool (*site_test)(int res, int x, int y, int z);

/* Scans the res^3 grid in (x, y, z) order and keeps the sites `inside` accepts. */
static int32_t *collect(int res, int32_t batch, site_test inside, int64_t *n) {
  *n = 0;
  if (res < 1 || batch < 0 || batch >= VC_BATCH_MAX) return NULL;
  coord_list l = {0};
  for (int x = 0; x < res; x++)
    for (int y = 0; y < res; y++)
      for (int z = 0; z < res; z++)
        if (inside(res, x, y, z) && !list_push(&l, batch, x, y, z)) {
          free(l.rows);
          return NULL;
        }
  return list_finish(&l, n);
}

/* Doubled offsets from the centre, u = 2*(i + 0.5 - res/2) = 2i + 1 - res, keep the test
 * in exact integers, so counts never depend on floating-point rounding:
 * d^2 = S/4 with S = sum u^2; (res/2 - 1.25)^2 <= S/4 <= (res/2)^2. */
static bool in_shell(int res, int x, int y, int z) {
  const int64_t ux = 2 * x + 1 - res, uy = 2 * y + 1 - res, uz = 2 * z + 1 - res;
  const int64_t s = ux * ux + uy * uy + uz * uz, lo = 2 * (int64_t)res - 5;
  return s <= (int64_t)res * res && (lo <= 0 || 4 * s >= lo * lo);
}

int32_t *vc_shape_shell(int res, int32_t batch, int64_t *n) { return collect(res, batch, in_shell, n); }

static bool in_torus(int res, int x, int y, int z) {
  const double c = res / 2.0, major = 0.3 * res, tube = 0.15 * res;
  const double px = x + 0.5 - c, py = y + 0.5 - c, pz = z + 0.5 - c;
  const double ring = sqrt(px * px + py * py) - major, t = sqrt(ring * ring + pz * pz);
  return t >= tube - 1.25 && t <= tube;
}

int32_t *vc_shape_torus(int res, int32_t batch, int64_t *n) { return collect(res, batch, in_torus, n); }

int32_t *vc_shapes_batch(const vc_shape_fn *shapes, int count, int res, int64_t *n) {
  *n = 0;
  coord_list all = {0};
  for (int i = 0; i < count; i++) {
    int64_t m = 0;
    int32_t *part = shapes[i](res, i, &m);
    bool ok = part != NULL;
    for (int64_t j = 0; ok && j < m; j++) {
      const int32_t *r = part + 4 * j;
      ok = list_push(&all, r[0], r[1], r[2], r[3]);
    }
    free(part);
    if (!ok) {
      free(all.rows);
      return NULL;
    }
  }
  return list_finish(&all, n);
}
