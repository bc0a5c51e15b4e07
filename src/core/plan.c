/* plan.c — descriptor validation and the plan object; kernel maps come from the backend. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *kind_name(vc_conv_kind k) {
  switch (k) {
  case VC_CONV_SUBMANIFOLD: return "submanifold";
  case VC_CONV_SPARSE: return "sparse";
  case VC_CONV_INVERSE: return "inverse";
  case VC_CONV_TRANSPOSED: return "transposed";
  }
  return "?";
}

/* Copies the caller's descriptor (which may be an older, shorter struct) and checks it. */
static vc_status desc_validate(vc_context *ctx, const vc_conv_desc *in, vc_conv_desc *d) {
  if (in->struct_size < VC_CONV_DESC_SIZE_0_1)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                   "vc_plan_create: desc->struct_size = %zu, expected at least %zu (set it to sizeof(vc_conv_desc))",
                   in->struct_size, VC_CONV_DESC_SIZE_0_1);
  /* fields past the caller's struct_size read as 0; a newer caller's extra bytes are ignored */
  memset(d, 0, sizeof *d);
  memcpy(d, in, in->struct_size < sizeof *d ? in->struct_size : sizeof *d);
  d->struct_size = sizeof *d;
  if ((unsigned)d->kind > VC_CONV_TRANSPOSED)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: desc->kind = %d is not a vc_conv_kind",
                   (int)d->kind);
  for (int a = 0; a < 3; a++) {
    int32_t k = d->kernel_size[a], s = d->stride[a], p = d->padding[a], dl = d->dilation[a];
    if (k < 1 || k > VC_KERNEL_MAX)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: desc->kernel_size[%d] = %d is outside [1, %d]", a, k, VC_KERNEL_MAX);
    if (s < 1 || s > VC_STRIDE_MAX)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: desc->stride[%d] = %d is outside [1, %d]", a, s, VC_STRIDE_MAX);
    if (dl < 1 || dl > VC_DILATION_MAX)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: desc->dilation[%d] = %d is outside [1, %d]", a, dl, VC_DILATION_MAX);
    if (p < 0 || p > (k - 1) * dl)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: desc->padding[%d] = %d is outside [0, (kernel_size-1)*dilation = %d]",
                     a, p, (k - 1) * dl);
    const int32_t bound = d->output_bound[a];
    if (bound < 0)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: desc->output_bound[%d] = %d is negative (0: unbounded)",
                     a, bound);
    if (bound > 0 && d->kind == VC_CONV_SUBMANIFOLD)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: desc->output_bound[%d] = %d, but a submanifold plan's outputs are given (it must be 0)",
                     a, bound);
    if (d->kind == VC_CONV_SUBMANIFOLD) {
      if (k % 2 == 0)
        return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                       "vc_plan_create: desc->kernel_size[%d] = %d is even, but a submanifold conv needs an odd kernel",
                       a, k);
      if (s != 1)
        return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                       "vc_plan_create: desc->stride[%d] = %d, but a submanifold conv needs stride 1", a, s);
      if (p != (k / 2) * dl)
        return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                       "vc_plan_create: desc->padding[%d] = %d, but a submanifold conv needs (kernel_size/2)*dilation = %d",
                       a, p, (k / 2) * dl);
    }
  }
  return VC_OK;
}

static vc_status paired_validate(vc_context *ctx, const vc_conv_desc *d, const int32_t *coords,
                                 int64_t n, const vc_plan *paired) {
  if (d->kind != VC_CONV_INVERSE) {
    if (paired)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: paired is given, but only an inverse conv takes a paired plan (kind is %s)",
                     kind_name(d->kind));
    return VC_OK;
  }
  if (!paired)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                   "vc_plan_create: paired is NULL, but an inverse conv needs the sparse plan it inverts");
  if (paired->ctx != ctx)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: paired plan belongs to a different context");
  if (paired->desc.kind != VC_CONV_SPARSE)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                   "vc_plan_create: paired plan is %s, but an inverse conv inverts a sparse (strided) conv",
                   kind_name(paired->desc.kind));
  static const char *field[4] = {"kernel_size", "stride", "padding", "dilation"};
  const int32_t *mine[4] = {d->kernel_size, d->stride, d->padding, d->dilation};
  const int32_t *theirs[4] = {paired->desc.kernel_size, paired->desc.stride, paired->desc.padding,
                              paired->desc.dilation};
  for (int f = 0; f < 4; f++)
    for (int a = 0; a < 3; a++)
      if (mine[f][a] != theirs[f][a])
        return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                       "vc_plan_create: desc->%s[%d] = %d differs from the paired plan's %d",
                       field[f], a, mine[f][a], theirs[f][a]);
  /* the bound has no effect on an inverse plan: 0, or the paired plan's (a copied descriptor) */
  for (int a = 0; a < 3; a++)
    if (d->output_bound[a] != 0 && d->output_bound[a] != paired->desc.output_bound[a])
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: desc->output_bound[%d] = %d differs from the paired plan's %d (an inverse plan "
                     "takes 0 or the paired plan's)", a, d->output_bound[a], paired->desc.output_bound[a]);
  if (coords && n != paired->n_out)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                   "vc_plan_create: n = %lld, but the paired plan has %lld output sites",
                   (long long)n, (long long)paired->n_out);
  return VC_OK;
}

vc_status vc_fail_duplicate(vc_context *ctx, int64_t row_a, int64_t row_b, const int32_t site[4]) {
  return vc_fail(ctx, VC_ERR_DUPLICATE_COORDS, "coords rows %lld and %lld are the same site (%d, %d, %d, %d)",
                 (long long)(row_a < row_b ? row_a : row_b), (long long)(row_a < row_b ? row_b : row_a), site[0],
                 site[1], site[2], site[3]);
}

vc_status vc_fail_output_range(vc_context *ctx, const int32_t in_site[4], const int64_t t[3], int64_t row, int r) {
  return vc_fail(ctx, VC_ERR_OUT_OF_RANGE,
                 "output site (%d, %lld, %lld, %lld), reached from coords row %lld through kernel offset %d, is outside "
                 "the supported range [%d, %d]",
                 in_site[0], (long long)t[0], (long long)t[1], (long long)t[2], (long long)row, r, VC_COORD_MIN,
                 VC_COORD_MAX);
}

vc_status vc_check_paired_coords(vc_context *ctx, const int32_t *given, const uint64_t *paired, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const int32_t *a = given + 4 * i;
    int32_t b[4];
    vc_key_unpack(paired[i], b);
    if (memcmp(a, b, sizeof b))
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                     "vc_plan_create: coords row %lld (%d, %d, %d, %d) differs from the paired plan's output site "
                     "(%d, %d, %d, %d)",
                     (long long)i, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
  }
  return VC_OK;
}

vc_status vc_plan_create(vc_context *ctx, const vc_conv_desc *desc, const int32_t *coords, int64_t n,
                         const vc_plan *paired, void *stream, vc_plan **out) {
  if (out) *out = NULL;
  if (!ctx) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: ctx is NULL");
  if (!out) return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: out is NULL");
  if (!desc) return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: desc is NULL");
  vc_conv_desc d;
  vc_status s = desc_validate(ctx, desc, &d);
  if (s != VC_OK) return s;
  if (n < 0)
    return vc_fail(ctx, VC_ERR_OUT_OF_RANGE, "vc_plan_create: n = %lld is negative", (long long)n);
  /* Row indices are int32 in the kernel map. */
  if (n > INT32_MAX - 1)
    return vc_fail(ctx, VC_ERR_OUT_OF_RANGE, "vc_plan_create: n = %lld exceeds the limit of %d sites",
                   (long long)n, INT32_MAX - 1);
  if (!coords && n > 0 && d.kind != VC_CONV_INVERSE)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_create: coords is NULL with n = %lld", (long long)n);
  s = paired_validate(ctx, &d, coords, n, paired);
  if (s != VC_OK) return s;

  vc_plan *p = calloc(1, sizeof *p);
  if (!p) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
  p->ctx = ctx;
  p->desc = d;
  p->kvol = d.kernel_size[0] * d.kernel_size[1] * d.kernel_size[2];
  p->lists = p->kvol; /* a backend may keep fewer (vc_plan.lists) */
  p->n_in = d.kind == VC_CONV_INVERSE ? paired->n_out : n;
  s = ctx->backend->plan_build(ctx, p, coords, paired, stream);
  if (s != VC_OK) {
    vc_plan_destroy(p);
    return s;
  }
  *out = p;
  return VC_OK;
}

void vc_plan_destroy(vc_plan *p) {
  if (!p) return;
  p->ctx->backend->plan_release(p);
  free(p->offsets);
  free(p);
}

int64_t vc_plan_in_count(const vc_plan *p) { return p ? p->n_in : -1; }
int64_t vc_plan_out_count(const vc_plan *p) { return p ? p->n_out : -1; }
int32_t vc_plan_kernel_volume(const vc_plan *p) { return p ? p->kvol : -1; }
int64_t vc_plan_pair_count(const vc_plan *p) { return p ? p->n_pairs : -1; }
const vc_conv_desc *vc_plan_desc(const vc_plan *p) { return p ? &p->desc : NULL; }
size_t vc_plan_memory_bytes(const vc_plan *p) { return p ? p->mem_bytes : 0; }

vc_status vc_plan_out_coords(const vc_plan *p, int32_t *coords_out, void *stream) {
  if (!p) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_plan_out_coords: plan is NULL");
  if (p->n_out == 0) return VC_OK;
  if (!coords_out) return vc_fail(p->ctx, VC_ERR_INVALID_ARGUMENT, "vc_plan_out_coords: coords_out is NULL");
  return p->ctx->backend->out_coords(p, coords_out, stream);
}

vc_status vc_plan_kernel_map(const vc_plan *p, int64_t *offsets, int32_t *in_index, int32_t *out_index,
                             void *stream) {
  if (!p) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_plan_kernel_map: plan is NULL");
  if (offsets) memcpy(offsets, p->offsets, (size_t)(p->kvol + 1) * sizeof(int64_t));
  if (p->n_pairs == 0 || (!in_index && !out_index)) return VC_OK;
  return p->ctx->backend->kernel_map(p, in_index, out_index, stream);
}
