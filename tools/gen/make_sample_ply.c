/* make_sample_ply.c — writes data/shape.ply, the small mesh shipped for `voxconv run` and the
 * tests: a (2, 3) torus knot tube, 256 rings of 16 vertices, 4096 quads (8192 triangles once
 * fanned), as a binary little-endian PLY with float positions and normals and
 * uchar-counted int index lists, the layout most exporters write.
 *
 * Usage: make_sample_ply [out.ply]   (make sample). The knot is
 * c(t) = ((2 + cos 3t) cos 2t, (2 + cos 3t) sin 2t, -sin 3t), the tube radius 0.4; the ring
 * frame is the curve's Frenet frame, which closes up because the curve is periodic.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { RINGS = 256, SIDES = 16 };
static const double TUBE = 0.4, PI = 3.14159265358979323846;

static void knot(double t, double *p) {
  double r = 2 + cos(3 * t);
  p[0] = r * cos(2 * t), p[1] = r * sin(2 * t), p[2] = -sin(3 * t);
}

static void normalize(double *v) {
  double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  for (int a = 0; a < 3; a++) v[a] /= n;
}

static void put_u32(FILE *f, uint32_t v) {
  unsigned char b[4];
  for (int k = 0; k < 4; k++) b[k] = (unsigned char)(v >> (8 * k));
  fwrite(b, 1, 4, f);
}

static void put_f32(FILE *f, double v) {
  float x = (float)v;
  uint32_t u;
  memcpy(&u, &x, 4);
  put_u32(f, u);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "data/shape.ply";
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  fprintf(f, "ply\nformat binary_little_endian 1.0\ncomment a (2, 3) torus knot tube, tools/gen/make_sample_ply.c\n"
             "element vertex %d\nproperty float x\nproperty float y\nproperty float z\n"
             "property float nx\nproperty float ny\nproperty float nz\n"
             "element face %d\nproperty list uchar int vertex_indices\nend_header\n",
          RINGS * SIDES, RINGS * SIDES);
  const double h = 1e-4;
  for (int i = 0; i < RINGS; i++) {
    double t = 2 * PI * i / RINGS, c[3], a[3], b[3], tan[3], nor[3], bin[3];
    knot(t, c), knot(t - h, a), knot(t + h, b);
    for (int k = 0; k < 3; k++) tan[k] = b[k] - a[k], nor[k] = a[k] + b[k] - 2 * c[k];
    normalize(tan);
    double d = nor[0] * tan[0] + nor[1] * tan[1] + nor[2] * tan[2];
    for (int k = 0; k < 3; k++) nor[k] -= d * tan[k];
    normalize(nor);
    bin[0] = tan[1] * nor[2] - tan[2] * nor[1];
    bin[1] = tan[2] * nor[0] - tan[0] * nor[2];
    bin[2] = tan[0] * nor[1] - tan[1] * nor[0];
    for (int j = 0; j < SIDES; j++) {
      double s = 2 * PI * j / SIDES, n[3];
      for (int k = 0; k < 3; k++) n[k] = cos(s) * nor[k] + sin(s) * bin[k];
      for (int k = 0; k < 3; k++) put_f32(f, c[k] + TUBE * n[k]);
      for (int k = 0; k < 3; k++) put_f32(f, n[k]);
    }
  }
  for (int i = 0; i < RINGS; i++)
    for (int j = 0; j < SIDES; j++) { /* counter-clockwise seen from outside: (d/ds) x t = n */
      int i1 = (i + 1) % RINGS, j1 = (j + 1) % SIDES;
      fputc(4, f);
      put_u32(f, (uint32_t)(i * SIDES + j));
      put_u32(f, (uint32_t)(i * SIDES + j1));
      put_u32(f, (uint32_t)(i1 * SIDES + j1));
      put_u32(f, (uint32_t)(i1 * SIDES + j));
    }
  if (fclose(f) != 0) {
    perror(path);
    return 1;
  }
  return 0;
}
