/* dense.c — the dense-grid oracle (see dense.h). Deliberately naive. */
#include "dense.h"

#include <stdlib.h>
#include <string.h>

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

bool vc_oracle_relation(const vc_oracle *o, const int32_t *c, int r, int64_t q[3]) {
  for (int a = 0; a < 3; a++) {
    int64_t s = o->d.stride[a], pad = o->d.padding[a];
    if (o->d.kind == VC_CONV_SUBMANIFOLD || o->d.kind == VC_CONV_SPARSE) {
      q[a] = (int64_t)c[a + 1] * s - pad + o->off[r][a];
    } else { /* transposed and inverse: c = q*s - pad + r*d */
      int64_t v = (int64_t)c[a + 1] + pad - o->off[r][a];
      if (floor_div(v, s) * s != v) return false;
      q[a] = v / s;
    }
  }
  return true;
}

int64_t vc_oracle_cell(const vc_oracle *o, int32_t b, const int64_t q[3]) {
  if (b < 0 || b >= o->nb) return -1;
  int64_t cell = b;
  for (int a = 0; a < 3; a++) {
    int64_t i = q[a] - o->lo[a];
    if (i < 0 || i >= o->dim[a]) return -1;
    cell = cell * o->dim[a] + i;
  }
  return cell;
}

static int32_t lookup(const vc_oracle *o, const int32_t *c, int r) {
  int64_t q[3];
  if (!vc_oracle_relation(o, c, r, q)) return -1;
  int64_t cell = vc_oracle_cell(o, c[0], q);
  return cell < 0 ? -1 : o->grid[cell];
}

vc_oracle *vc_oracle_build(const vc_conv_desc *d, const int32_t *in, int64_t n_in, const int32_t *out_coords,
                           int64_t n_out) {
  vc_oracle *o = calloc(1, sizeof *o);
  o->d = *d;
  o->n_in = n_in;
  const int32_t *k = d->kernel_size;
  o->K = k[0] * k[1] * k[2];
  for (int r0 = 0, r = 0; r0 < k[0]; r0++)
    for (int r1 = 0; r1 < k[1]; r1++)
      for (int r2 = 0; r2 < k[2]; r2++, r++) {
        o->off[r][0] = r0 * d->dilation[0];
        o->off[r][1] = r1 * d->dilation[1];
        o->off[r][2] = r2 * d->dilation[2];
      }
  int64_t hi[3] = {0, 0, 0};
  o->nb = 1;
  for (int a = 0; a < 3; a++) o->lo[a] = 0;
  for (int64_t i = 0; i < n_in; i++) {
    for (int a = 0; a < 3; a++) {
      int64_t v = in[4 * i + a + 1];
      if (i == 0 || v < o->lo[a]) o->lo[a] = v;
      if (i == 0 || v > hi[a]) hi[a] = v;
    }
    if (in[4 * i] + 1 > o->nb) o->nb = in[4 * i] + 1;
  }
  int64_t cells = o->nb;
  for (int a = 0; a < 3; a++) {
    o->dim[a] = hi[a] - o->lo[a] + 1;
    cells *= o->dim[a];
  }
  o->grid = malloc((size_t)cells * sizeof *o->grid);
  for (int64_t c = 0; c < cells; c++) o->grid[c] = -1;
  for (int64_t i = 0; i < n_in; i++) {
    int64_t q[3] = {in[4 * i + 1], in[4 * i + 2], in[4 * i + 3]};
    o->grid[vc_oracle_cell(o, in[4 * i], q)] = (int32_t)i;
  }

  if (d->kind == VC_CONV_SUBMANIFOLD || d->kind == VC_CONV_INVERSE) {
    if (d->kind == VC_CONV_SUBMANIFOLD) out_coords = in, n_out = n_in;
    o->n_out = n_out;
    o->out_coords = malloc((size_t)(n_out ? n_out : 1) * 4 * sizeof(int32_t));
    memcpy(o->out_coords, out_coords, (size_t)n_out * 4 * sizeof(int32_t));
  } else if (n_in > 0) {
    /* Scan every candidate output site of the box in (b, x, y, z) order. */
    int64_t plo[3], phi[3];
    for (int a = 0; a < 3; a++) {
      int64_t s = d->stride[a], pad = d->padding[a], ext = (int64_t)(k[a] - 1) * d->dilation[a];
      if (d->kind == VC_CONV_SPARSE) {
        plo[a] = floor_div(o->lo[a] + pad - ext, s);
        phi[a] = floor_div(hi[a] + pad, s);
      } else {
        plo[a] = o->lo[a] * s - pad;
        phi[a] = hi[a] * s - pad + ext;
      }
      if (d->output_bound[a] > 0) { /* only sites inside the bound are outputs */
        if (plo[a] < 0) plo[a] = 0;
        if (phi[a] > d->output_bound[a] - 1) phi[a] = d->output_bound[a] - 1;
      }
    }
    int64_t cap = 1024;
    o->out_coords = malloc((size_t)cap * 4 * sizeof(int32_t));
    for (int32_t b = 0; b < o->nb; b++)
      for (int64_t x = plo[0]; x <= phi[0]; x++)
        for (int64_t y = plo[1]; y <= phi[1]; y++)
          for (int64_t z = plo[2]; z <= phi[2]; z++) {
            int32_t c[4] = {b, (int32_t)x, (int32_t)y, (int32_t)z};
            bool hit = false;
            for (int r = 0; r < o->K && !hit; r++) hit = lookup(o, c, r) >= 0;
            if (!hit) continue;
            if (o->n_out == cap) o->out_coords = realloc(o->out_coords, (size_t)(cap *= 2) * 4 * sizeof(int32_t));
            memcpy(o->out_coords + 4 * o->n_out++, c, sizeof c);
          }
  }
  o->nbr = malloc((size_t)(o->n_out ? o->n_out : 1) * o->K * sizeof *o->nbr);
  for (int64_t i = 0; i < o->n_out; i++)
    for (int r = 0; r < o->K; r++) o->nbr[i * o->K + r] = lookup(o, o->out_coords + 4 * i, r);
  return o;
}

void vc_oracle_free(vc_oracle *o) {
  if (!o) return;
  free(o->grid);
  free(o->out_coords);
  free(o->nbr);
  free(o);
}

/* Dense feature grid: every cell of the box, zero where no site is. */
static double *scatter_dense(const vc_oracle *o, const double *x, int64_t c) {
  int64_t cells = o->nb * o->dim[0] * o->dim[1] * o->dim[2];
  double *g = calloc((size_t)(cells ? cells : 1) * (size_t)c, sizeof *g);
  for (int64_t cell = 0; cell < cells; cell++)
    if (o->grid[cell] >= 0) memcpy(g + cell * c, x + (int64_t)o->grid[cell] * c, (size_t)c * sizeof *g);
  return g;
}

void vc_oracle_forward(const vc_oracle *o, int64_t ci, int64_t co, const double *x, const double *w,
                       const double *bias, double *y) {
  double *g = scatter_dense(o, x, ci);
  for (int64_t i = 0; i < o->n_out; i++) {
    const int32_t *c = o->out_coords + 4 * i;
    for (int64_t oc = 0; oc < co; oc++) y[i * co + oc] = bias ? bias[oc] : 0;
    for (int r = 0; r < o->K; r++) {
      int64_t q[3];
      if (!vc_oracle_relation(o, c, r, q)) continue;
      int64_t cell = vc_oracle_cell(o, c[0], q);
      if (cell < 0) continue;
      for (int64_t oc = 0; oc < co; oc++)
        for (int64_t k = 0; k < ci; k++) y[i * co + oc] += w[(oc * o->K + r) * ci + k] * g[cell * ci + k];
    }
  }
  free(g);
}

void vc_oracle_backward_data(const vc_oracle *o, int64_t ci, int64_t co, const double *dy, const double *w,
                             double *dx) {
  int64_t cells = o->nb * o->dim[0] * o->dim[1] * o->dim[2];
  double *g = calloc((size_t)(cells ? cells : 1) * (size_t)ci, sizeof *g);
  for (int64_t i = 0; i < o->n_out; i++) {
    const int32_t *c = o->out_coords + 4 * i;
    for (int r = 0; r < o->K; r++) {
      int64_t q[3];
      if (!vc_oracle_relation(o, c, r, q)) continue;
      int64_t cell = vc_oracle_cell(o, c[0], q);
      if (cell < 0) continue;
      for (int64_t oc = 0; oc < co; oc++)
        for (int64_t k = 0; k < ci; k++) g[cell * ci + k] += w[(oc * o->K + r) * ci + k] * dy[i * co + oc];
    }
  }
  for (int64_t cell = 0; cell < cells; cell++) /* read back at the input sites */
    if (o->grid[cell] >= 0) memcpy(dx + (int64_t)o->grid[cell] * ci, g + cell * ci, (size_t)ci * sizeof *g);
  free(g);
}

void vc_oracle_backward_weight(const vc_oracle *o, int64_t ci, int64_t co, const double *x, const double *dy,
                               double *dw, double *db) {
  double *g = scatter_dense(o, x, ci);
  memset(dw, 0, (size_t)(co * o->K * ci) * sizeof *dw);
  for (int64_t oc = 0; oc < co; oc++) db[oc] = 0;
  for (int64_t i = 0; i < o->n_out; i++) {
    const int32_t *c = o->out_coords + 4 * i;
    for (int64_t oc = 0; oc < co; oc++) db[oc] += dy[i * co + oc];
    for (int r = 0; r < o->K; r++) {
      int64_t q[3];
      if (!vc_oracle_relation(o, c, r, q)) continue;
      int64_t cell = vc_oracle_cell(o, c[0], q);
      if (cell < 0) continue;
      for (int64_t oc = 0; oc < co; oc++)
        for (int64_t k = 0; k < ci; k++) dw[(oc * o->K + r) * ci + k] += dy[i * co + oc] * g[cell * ci + k];
    }
  }
  free(g);
}
