/* lidar.c — synthetic LiDAR scans: a street scene ray-cast from a spinning sensor,
 * quantised to voxels (see lidar.h). */
#include "lidar.h"

#include "common.h"
#include "ply.h"
#include "voxconv.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

enum { BEAMS = 64, AZIMUTHS = 3072, MAX_BOXES = 96, MAX_CYLS = 96 };
#define SENSOR_HEIGHT 1.73
#define MAX_RANGE 60.0
#define DEG (M_PI / 180.0)

/* A box standing on the ground: centre (cx, cy), half sizes (hx, hy) along its own axes,
 * height h, yaw given as cos/sin. A vertical cylinder standing on the ground. */
typedef struct box {
  double cx, cy, hx, hy, h, c, s;
} box;
typedef struct cyl {
  double cx, cy, r, h;
} cyl;

typedef struct scene {
  box boxes[MAX_BOXES];
  cyl cyls[MAX_CYLS];
  int n_boxes, n_cyls;
  uint64_t rng;
} scene;

typedef struct ray {
  double o[3], d[3]; /* origin, unit direction */
} ray;

/* ---- the scene --------------------------------------------------------------------------- */

/* The scan's own random sequence, so scans do not depend on what else the tool drew. */
static double uniform(scene *s, double lo, double hi) { return rng_uniform_at(&s->rng, lo, hi); }

static double side(scene *s) { return uniform(s, 0, 1) < 0.5 ? -1.0 : 1.0; }

static void add_box(scene *s, double cx, double cy, double lx, double ly, double h, double yaw) {
  if (s->n_boxes < MAX_BOXES) s->boxes[s->n_boxes++] = (box){cx, cy, lx / 2, ly / 2, h, cos(yaw), sin(yaw)};
}

static void add_cyl(scene *s, double cx, double cy, double r, double h) {
  if (s->n_cyls < MAX_CYLS) s->cyls[s->n_cyls++] = (cyl){cx, cy, r, h};
}

/* Blocks of buildings along both sides of the road (the x axis), set back 9-12 m. */
static void add_buildings(scene *s) {
  for (int sd = -1; sd <= 1; sd += 2)
    for (double x = -MAX_RANGE + uniform(s, 0, 8); x < MAX_RANGE;) {
      const double width = uniform(s, 8, 20), depth = uniform(s, 8, 15), front = uniform(s, 9, 12);
      add_box(s, x + width / 2, sd * (front + depth / 2), width, depth, uniform(s, 6, 20), 0);
      x += width + uniform(s, 2, 6);
    }
}

/* Cars in four lanes, none on the sensor's own spot. */
static void add_cars(scene *s) {
  static const double lanes[4] = {-5.25, -1.75, 1.75, 5.25};
  for (int i = 0; i < 24; i++) {
    const double x = uniform(s, -50, 50), y = lanes[i % 4] + uniform(s, -0.3, 0.3);
    if (fabs(x) < 4 && fabs(y) < 2.5) continue;
    add_box(s, x, y, uniform(s, 4.0, 4.8), uniform(s, 1.7, 1.9), uniform(s, 1.4, 1.7), uniform(s, -0.1, 0.1));
  }
}

/* Poles, tree trunks and pedestrians on the sidewalks. */
static void add_sidewalk(scene *s) {
  for (int i = 0; i < 20; i++)
    add_cyl(s, uniform(s, -60, 60), side(s) * uniform(s, 7, 8.5), uniform(s, 0.06, 0.12), uniform(s, 4, 8));
  for (int i = 0; i < 16; i++)
    add_cyl(s, uniform(s, -50, 50), side(s) * uniform(s, 7, 8.5), uniform(s, 0.15, 0.35), uniform(s, 2.5, 5));
  for (int i = 0; i < 12; i++)
    add_cyl(s, uniform(s, -30, 30), side(s) * uniform(s, 6.5, 8.5), 0.25, uniform(s, 1.5, 1.9));
}

static void scene_make(scene *s, uint64_t seed) {
  s->n_boxes = s->n_cyls = 0;
  s->rng = rng_state_for(seed);
  add_buildings(s);
  add_cars(s);
  add_sidewalk(s);
}

/* ---- ray casting ------------------------------------------------------------------------- */

/* Narrows [t0, t1] to where o + t d lies within [lo, hi] on one axis; false if empty. */
static bool slab(double o, double d, double lo, double hi, double *t0, double *t1) {
  if (fabs(d) < 1e-12) return o >= lo && o <= hi;
  double a = (lo - o) / d, b = (hi - o) / d;
  if (a > b) {
    const double t = a;
    a = b, b = t;
  }
  *t0 = fmax(*t0, a), *t1 = fmin(*t1, b);
  return *t0 <= *t1;
}

/* Entry distance of the ray into the box, or INFINITY. The sensor is never inside one. */
static double hit_box(const box *b, const ray *r) {
  const double px = r->o[0] - b->cx, py = r->o[1] - b->cy;
  const double ox = b->c * px + b->s * py, oy = -b->s * px + b->c * py;
  const double dx = b->c * r->d[0] + b->s * r->d[1], dy = -b->s * r->d[0] + b->c * r->d[1];
  double t0 = 1e-6, t1 = INFINITY;
  bool hit = slab(ox, dx, -b->hx, b->hx, &t0, &t1) && slab(oy, dy, -b->hy, b->hy, &t0, &t1) &&
             slab(r->o[2], r->d[2], 0, b->h, &t0, &t1);
  return hit ? t0 : INFINITY;
}

/* Distance to the cylinder's side, or INFINITY (its top is never seen from the sensor). */
static double hit_cyl(const cyl *c, const ray *r) {
  const double px = r->o[0] - c->cx, py = r->o[1] - c->cy;
  const double a = r->d[0] * r->d[0] + r->d[1] * r->d[1], b = px * r->d[0] + py * r->d[1];
  const double disc = b * b - a * (px * px + py * py - c->r * c->r);
  if (a < 1e-12 || disc < 0) return INFINITY;
  const double t = (-b - sqrt(disc)) / a, z = r->o[2] + t * r->d[2];
  return t > 0 && z >= 0 && z <= c->h ? t : INFINITY;
}

static double cast(const scene *s, const ray *r) {
  double t = r->d[2] < 0 ? -r->o[2] / r->d[2] : INFINITY; /* the ground plane z = 0 */
  for (int i = 0; i < s->n_boxes; i++) t = fmin(t, hit_box(&s->boxes[i], r));
  for (int i = 0; i < s->n_cyls; i++) t = fmin(t, hit_cyl(&s->cyls[i], r));
  return t;
}

/* ---- voxels ------------------------------------------------------------------------------ */

/* Casts every ray of scan b and appends the voxel keys of its hits; returns the new count. */
static int64_t scan_keys(scene *s, int b, int azimuths, uint64_t *keys, int64_t n) {
  ray r = {{0, 0, SENSOR_HEIGHT}, {0, 0, 0}};
  for (int i = 0; i < BEAMS; i++) {
    const double elev = (2.0 - 26.8 * i / (BEAMS - 1)) * DEG;
    for (int j = 0; j < azimuths; j++) {
      const double az = 2 * M_PI * (j + 0.5 * (i & 1)) / azimuths;
      r.d[0] = cos(elev) * cos(az), r.d[1] = cos(elev) * sin(az), r.d[2] = sin(elev);
      const double t = cast(s, &r) + uniform(s, -0.015, 0.015);
      if (!(t < MAX_RANGE)) continue;
      int64_t v[3];
      for (int a = 0; a < 3; a++) v[a] = (int64_t)floor((r.o[a] + t * r.d[a]) / VC_LIDAR_VOXEL_M);
      keys[n++] = vc_site_key(b, v[0], v[1], v[2]);
    }
  }
  return n;
}

int32_t *vc_lidar_scans(int batch, double scale, uint64_t seed, int64_t *n) {
  *n = 0;
  if (batch < 1 || batch > VC_BATCH_MAX || !(scale > 0 && scale <= 4)) return NULL;
  const int azimuths = (int)ceil(AZIMUTHS * scale);
  uint64_t *keys = malloc((size_t)batch * BEAMS * (size_t)azimuths * sizeof *keys);
  scene *s = malloc(sizeof *s);
  if (!keys || !s) {
    free(keys), free(s);
    return NULL;
  }
  int64_t count = 0;
  for (int b = 0; b < batch; b++) {
    scene_make(s, seed + (uint64_t)b);
    count = scan_keys(s, b, azimuths, keys, count);
  }
  free(s);
  return vc_sites_from_keys(keys, count, n); /* frees keys */
}
