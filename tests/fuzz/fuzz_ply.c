/* fuzz_ply.c — libFuzzer target: any bytes through vc_ply_parse and, when they parse, through
 * vc_voxel_size_for and vc_voxelize_limited at a resolution and at a raw voxel size both
 * taken from the input's last byte (raw sizes from 2^-32 to 2^31 reach the range errors).
 * The site bound is small so that one input stays fast. Beyond "no crash", it checks what
 * ply.h promises of a result: batch column, strictly ascending sites, every vertex's cell
 * present, and no site outside the vertices' cell box (a triangle stays in its corners' box). */
#include "../../tools/ply.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void check_sites(const vc_ply *p, double size, const int32_t *c, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    const int32_t *a = c + 4 * (i - 1), *b = c + 4 * i;
    if (!(a[1] < b[1] || (a[1] == b[1] && (a[2] < b[2] || (a[2] == b[2] && a[3] < b[3]))))) abort();
  }
  int64_t box[2][3];
  for (int64_t v = 0; v < p->n_vertices; v++) {
    int64_t lo = 0, hi = n, cell[3];
    for (int a = 0; a < 3; a++) {
      cell[a] = (int64_t)floor(p->xyz[3 * v + a] / size);
      if (v == 0 || cell[a] < box[0][a]) box[0][a] = cell[a];
      if (v == 0 || cell[a] > box[1][a]) box[1][a] = cell[a];
    }
    while (lo < hi) { /* first row >= cell */
      int64_t mid = (lo + hi) / 2;
      const int32_t *r = c + 4 * mid + 1;
      bool less = r[0] < cell[0] || (r[0] == cell[0] && (r[1] < cell[1] || (r[1] == cell[1] && r[2] < cell[2])));
      if (less) lo = mid + 1;
      else hi = mid;
    }
    if (lo == n || c[4 * lo + 1] != cell[0] || c[4 * lo + 2] != cell[1] || c[4 * lo + 3] != cell[2]) abort();
  }
  for (int64_t i = 0; i < n; i++) {
    if (c[4 * i] != 3) abort();
    for (int a = 0; a < 3; a++)
      if (c[4 * i + 1 + a] < box[0][a] || c[4 * i + 1 + a] > box[1][a]) abort();
  }
}

static void voxelize(const vc_ply *p, double size) {
  char err[256];
  int32_t *c = NULL;
  int64_t n = 0;
  if (vc_voxelize_limited(p, size, 3, (int64_t)1 << 16, &c, &n, err, sizeof err) == 0) check_sites(p, size, c, n);
  free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char err[256];
  vc_ply p;
  if (vc_ply_parse(data, len, &p, err, sizeof err) == 0) {
    unsigned last = data[len - 1];
    double size;
    if (vc_voxel_size_for(&p, 1 + (int)(last % 64), &size, err, sizeof err) == 0) voxelize(&p, size);
    voxelize(&p, ldexp(1.0, (int)(last % 64) - 32));
  }
  vc_ply_free(&p);
  return 0;
}
