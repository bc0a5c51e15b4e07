/* conv.c — argument checks shared by the three passes, then dispatch to the backend. */
#include "internal.h"

#include <string.h>

static const char *pass_fn[3] = {"vc_conv_forward", "vc_conv_backward_data", "vc_conv_backward_weight"};

/* Copies the caller's args (possibly an older, shorter struct) and checks every field. */
vc_status vc_args_check(vc_context *ctx, const char *fn, const vc_conv_args *in, vc_conv_args *a) {
  if (!in) return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
  if (in->struct_size < sizeof(vc_conv_args))
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                   "%s: args->struct_size = %zu, expected %zu (set it to sizeof(vc_conv_args))", fn,
                   in->struct_size, sizeof(vc_conv_args));
  *a = *in;
  if (a->in_channels < 1 || a->in_channels > VC_CHANNELS_MAX)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: args->in_channels = %lld is outside [1, %d]", fn,
                   (long long)a->in_channels, VC_CHANNELS_MAX);
  if (a->out_channels < 1 || a->out_channels > VC_CHANNELS_MAX)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: args->out_channels = %lld is outside [1, %d]", fn,
                   (long long)a->out_channels, VC_CHANNELS_MAX);
  if (vc_dtype_size(a->dtype) == 0)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: args->dtype = %d is not a vc_dtype", fn, (int)a->dtype);
  if ((unsigned)a->math > VC_MATH_TF32)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: args->math = %d is not a vc_math", fn, (int)a->math);
  if (a->math == VC_MATH_TF32 && a->dtype != VC_DTYPE_F32)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                   "%s: args->math = VC_MATH_TF32 applies to f32 storage, but args->dtype = %d", fn,
                   (int)a->dtype);
  if ((unsigned)a->algo > VC_ALGO_GROUPED)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: args->algo = %d is not a vc_algo", fn, (int)a->algo);
  return VC_OK;
}

vc_status vc_check_pass(vc_context *ctx, const char *fn, vc_pass pass) {
  if ((unsigned)pass > VC_PASS_BACKWARD_WEIGHT)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: pass = %d is not a vc_pass", fn, (int)pass);
  return VC_OK;
}

vc_status vc_check_ctx_plan(vc_context *ctx, const char *fn, const vc_plan *p) {
  if (!ctx) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
  if (!p) return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: plan is NULL", fn);
  if (p->ctx != ctx) return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: plan belongs to a different context", fn);
  return VC_OK;
}

vc_status vc_conv_workspace_size(const vc_plan *p, const vc_conv_args *args, vc_pass pass, size_t *bytes) {
  if (!p) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_conv_workspace_size: plan is NULL");
  vc_context *ctx = p->ctx;
  if (!bytes) return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_conv_workspace_size: bytes is NULL");
  *bytes = 0;
  vc_conv_args a;
  vc_choice c;
  vc_status s = vc_check_pass(ctx, "vc_conv_workspace_size", pass);
  if (s == VC_OK) s = vc_args_check(ctx, "vc_conv_workspace_size", args, &a);
  if (s == VC_OK) s = vc_resolve_algo(ctx, p, &a, pass, &c);
  if (s != VC_OK) return s;
  a.algo = c.algo;
  return ctx->backend->workspace_size(p, &a, pass, c.variant, bytes);
}

typedef struct tensor_ref {
  const char *name;
  const void *ptr;
  int64_t elems;
  bool optional;
} tensor_ref;

/* The tensors of each pass, inputs first, then outputs; element counts are computed only
 * after the arguments are known to be in range. */
static int pass_tensors(const vc_plan *p, const vc_conv_args *a, vc_pass pass, const void *const ptr[4],
                        tensor_ref t[4], int *n_outputs) {
  const int64_t ci = a->in_channels, co = a->out_channels, nx = p->n_in * ci, ny = p->n_out * co;
  const int64_t nw = co * p->kvol * ci;
  switch (pass) {
  case VC_PASS_FORWARD:
    t[0] = (tensor_ref){"x", ptr[0], nx, false}, t[1] = (tensor_ref){"w", ptr[1], nw, false};
    t[2] = (tensor_ref){"bias", ptr[2], co, true}, t[3] = (tensor_ref){"y", ptr[3], ny, false};
    *n_outputs = 1;
    return 4;
  case VC_PASS_BACKWARD_DATA:
    t[0] = (tensor_ref){"dy", ptr[0], ny, false}, t[1] = (tensor_ref){"w", ptr[1], nw, false};
    t[2] = (tensor_ref){"dx", ptr[2], nx, false};
    *n_outputs = 1;
    return 3;
  default:
    t[0] = (tensor_ref){"x", ptr[0], nx, false}, t[1] = (tensor_ref){"dy", ptr[1], ny, false};
    t[2] = (tensor_ref){"dw", ptr[2], nw, false}, t[3] = (tensor_ref){"db", ptr[3], co, true};
    *n_outputs = 2;
    return 4;
  }
}

/* Common checks of one execute call: context, plan, args, pointers, aliasing, workspace;
 * a->algo and *variant are the resolved choice. */
static vc_status call_validate(vc_context *ctx, const vc_plan *p, const vc_conv_args *args, vc_pass pass,
                               vc_conv_args *a, int *variant, const void *const ptr[4], const void *ws,
                               size_t ws_bytes) {
  const char *fn = pass_fn[pass];
  vc_choice c;
  vc_status s = vc_check_ctx_plan(ctx, fn, p);
  if (s == VC_OK) s = vc_args_check(ctx, fn, args, a);
  if (s == VC_OK) s = vc_resolve_algo(ctx, p, a, pass, &c);
  if (s != VC_OK) return s;
  a->algo = c.algo, *variant = c.variant;
  tensor_ref t[4];
  int n_outputs, nt = pass_tensors(p, a, pass, ptr, t, &n_outputs);
  size_t esz = vc_dtype_size(a->dtype);
  for (int i = 0; i < nt; i++)
    if (!t[i].ptr && t[i].elems > 0 && !t[i].optional)
      return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, t[i].name);
  /* No output may overlap any other tensor. */
  for (int o = nt - n_outputs; o < nt; o++) {
    if (!t[o].ptr || t[o].elems == 0) continue;
    uintptr_t o0 = (uintptr_t)t[o].ptr, o1 = o0 + (uintptr_t)t[o].elems * esz;
    for (int i = 0; i < nt; i++) {
      if (i == o || !t[i].ptr || t[i].elems == 0) continue;
      uintptr_t i0 = (uintptr_t)t[i].ptr, i1 = i0 + (uintptr_t)t[i].elems * esz;
      if (o0 < i1 && i0 < o1)
        return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: output %s overlaps %s", fn, t[o].name, t[i].name);
    }
  }
  size_t need = 0;
  s = ctx->backend->workspace_size(p, a, pass, *variant, &need);
  if (s != VC_OK) return s;
  if (ws_bytes < need)
    return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY,
                   "%s: workspace_bytes = %zu, but this call needs %zu (ask vc_conv_workspace_size)", fn,
                   ws_bytes, need);
  if (need > 0 && !ws)
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: workspace is NULL but %zu bytes are needed", fn, need);
  return VC_OK;
}

vc_status vc_conv_forward(vc_context *ctx, const vc_plan *p, const vc_conv_args *args, const void *x,
                          const void *w, const void *bias, void *y, void *ws, size_t ws_bytes, void *stream) {
  vc_conv_args a;
  int variant;
  const void *ptr[4] = {x, w, bias, y};
  vc_status s = call_validate(ctx, p, args, VC_PASS_FORWARD, &a, &variant, ptr, ws, ws_bytes);
  if (s != VC_OK) return s;
  return ctx->backend->forward(ctx, p, &a, variant, x, w, bias, y, ws, ws_bytes, stream);
}

vc_status vc_conv_backward_data(vc_context *ctx, const vc_plan *p, const vc_conv_args *args, const void *dy,
                                const void *w, void *dx, void *ws, size_t ws_bytes, void *stream) {
  vc_conv_args a;
  int variant;
  const void *ptr[4] = {dy, w, dx, NULL};
  vc_status s = call_validate(ctx, p, args, VC_PASS_BACKWARD_DATA, &a, &variant, ptr, ws, ws_bytes);
  if (s != VC_OK) return s;
  return ctx->backend->backward_data(ctx, p, &a, variant, dy, w, dx, ws, ws_bytes, stream);
}

vc_status vc_conv_backward_weight(vc_context *ctx, const vc_plan *p, const vc_conv_args *args, const void *x,
                                  const void *dy, void *dw, void *db, void *ws, size_t ws_bytes, void *stream) {
  vc_conv_args a;
  int variant;
  const void *ptr[4] = {x, dy, dw, db};
  vc_status s = call_validate(ctx, p, args, VC_PASS_BACKWARD_WEIGHT, &a, &variant, ptr, ws, ws_bytes);
  if (s != VC_OK) return s;
  return ctx->backend->backward_weight(ctx, p, &a, variant, x, dy, dw, db, ws, ws_bytes, stream);
}
