/* dense.h — the test oracle: input sites scattered into a dense grid, outputs found and
 * convolved by direct loops over that grid, independently of the library's hash tables. */
#ifndef VC_DENSE_H
#define VC_DENSE_H

#include "vc_test.h"

typedef struct vc_oracle {
  vc_conv_desc d;
  int K;
  int32_t off[343][3];   /* r_a * d_a */
  int32_t nb;            /* batches spanned by the grid */
  int64_t lo[3], dim[3]; /* dense input grid box */
  int32_t *grid;         /* cell -> input row or -1 */
  int64_t n_in, n_out;
  int32_t *out_coords;   /* [n_out, 4] in the documented order */
  int32_t *nbr;          /* [n_out, K]: input row through offset r, or -1 */
} vc_oracle;

/* For VC_CONV_INVERSE, in_coords are the paired conv's output sites and out_coords its
 * input sites; for the other kinds out_coords is NULL and the outputs are enumerated. */
vc_oracle *vc_oracle_build(const vc_conv_desc *d, const int32_t *in_coords, int64_t n_in,
                           const int32_t *out_coords, int64_t n_out);
void vc_oracle_free(vc_oracle *o);

/* Grid cell of input site (b, q) or -1 outside the grid. */
int64_t vc_oracle_cell(const vc_oracle *o, int32_t b, const int64_t q[3]);
/* The input site that output site c meets through offset r; false if none can exist. */
bool vc_oracle_relation(const vc_oracle *o, const int32_t *c, int r, int64_t q[3]);

/* f64 passes over the dense grid. x [n_in, ci], w [co, K, ci], y [n_out, co]. */
void vc_oracle_forward(const vc_oracle *o, int64_t ci, int64_t co, const double *x, const double *w,
                       const double *bias, double *y);
void vc_oracle_backward_data(const vc_oracle *o, int64_t ci, int64_t co, const double *dy, const double *w,
                             double *dx);
void vc_oracle_backward_weight(const vc_oracle *o, int64_t ci, int64_t co, const double *x, const double *dy,
                               double *dw, double *db);

#endif
