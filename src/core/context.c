/* context.c — contexts, status text, the last-error sentence, small helpers. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Errors raised before any context exists land here, one slot per thread. */
static _Thread_local char vc_thread_error[VC_ERROR_LEN];

vc_status vc_fail(vc_context *ctx, vc_status s, const char *fmt, ...) {
  char *buf = ctx ? ctx->error : vc_thread_error;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, VC_ERROR_LEN, fmt, ap);
  va_end(ap);
  return s;
}

const char *vc_status_string(vc_status s) {
  switch (s) {
  case VC_OK: return "VC_OK: success";
  case VC_ERR_INVALID_ARGUMENT: return "VC_ERR_INVALID_ARGUMENT: an argument is invalid";
  case VC_ERR_OUT_OF_RANGE: return "VC_ERR_OUT_OF_RANGE: a value is outside the supported range";
  case VC_ERR_DUPLICATE_COORDS: return "VC_ERR_DUPLICATE_COORDS: a site appears twice";
  case VC_ERR_UNSUPPORTED: return "VC_ERR_UNSUPPORTED: not supported by this build or backend";
  case VC_ERR_OUT_OF_MEMORY: return "VC_ERR_OUT_OF_MEMORY: out of memory or workspace too small";
  case VC_ERR_DEVICE: return "VC_ERR_DEVICE: the device runtime reported an error";
  case VC_ERR_IO: return "VC_ERR_IO: a file could not be read or written";
  case VC_ERR_INTERNAL: return "VC_ERR_INTERNAL: internal error in voxconv";
  }
  return "unknown vc_status";
}

const char *vc_last_error(const vc_context *ctx) { return ctx ? ctx->error : vc_thread_error; }

#define VC_STR_(x) #x
#define VC_STR(x) VC_STR_(x)
const char *vc_version(void) {
  return VC_STR(VC_VERSION_MAJOR) "." VC_STR(VC_VERSION_MINOR) "." VC_STR(VC_VERSION_PATCH);
}

vc_status vc_context_create(vc_device_kind kind, int device, vc_context **out) {
  if (!out) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_context_create: out is NULL");
  *out = NULL;
  const vc_backend *be = NULL;
  switch (kind) {
  case VC_DEVICE_CPU:
    if (device != 0)
      return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT,
                     "vc_context_create: device = %d, but the CPU backend has only device 0",
                     device);
    be = &vc_cpu_backend;
    break;
  case VC_DEVICE_CUDA:
#ifdef VC_HAVE_CUDA
    be = &vc_cuda_backend;
    break;
#else
    return vc_fail(NULL, VC_ERR_UNSUPPORTED,
                   "vc_context_create: kind = VC_DEVICE_CUDA, but this build of voxconv has no "
                   "CUDA backend");
#endif
  default:
    return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_context_create: kind = %d is not a vc_device_kind",
                   (int)kind);
  }
  if (device < 0)
    return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_context_create: device = %d is negative", device);
  vc_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return vc_fail(NULL, VC_ERR_OUT_OF_MEMORY, "vc_context_create: out of host memory");
  ctx->kind = kind;
  ctx->device = device;
  ctx->backend = be;
  vc_status s = be->context_init ? be->context_init(ctx) : VC_OK;
  if (s != VC_OK) {
    memcpy(vc_thread_error, ctx->error, VC_ERROR_LEN);
    if (be->context_release) be->context_release(ctx); /* what init had set up before it failed */
    free(ctx);
    return s;
  }
  vc_tune_load(ctx);
  *out = ctx;
  return VC_OK;
}

void vc_context_destroy(vc_context *ctx) {
  if (!ctx) return;
  if (ctx->backend->context_release) ctx->backend->context_release(ctx);
  vc_tune_release(ctx);
  free(ctx);
}

vc_device_kind vc_context_device_kind(const vc_context *ctx) {
  return ctx ? ctx->kind : VC_DEVICE_CPU;
}

void vc_conv_desc_init(vc_conv_desc *d, vc_conv_kind kind, int32_t kernel_size, int32_t stride,
                       int32_t padding, int32_t dilation) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->kind = kind;
  if (padding < 0) padding = kind == VC_CONV_SUBMANIFOLD ? (kernel_size / 2) * dilation : 0;
  for (int i = 0; i < 3; i++) {
    d->kernel_size[i] = kernel_size;
    d->stride[i] = stride;
    d->padding[i] = padding;
    d->dilation[i] = dilation;
  }
}

void vc_conv_args_init(vc_conv_args *a, int64_t in_channels, int64_t out_channels, vc_dtype dtype) {
  if (!a) return;
  memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
  a->in_channels = in_channels;
  a->out_channels = out_channels;
  a->dtype = dtype;
  a->math = VC_MATH_F32;
  a->algo = VC_ALGO_AUTO;
}

size_t vc_dtype_size(vc_dtype dtype) {
  switch (dtype) {
  case VC_DTYPE_F32: return 4;
  case VC_DTYPE_F16:
  case VC_DTYPE_BF16: return 2;
  }
  return 0;
}

vc_status vc_check_coords(vc_context *ctx, const int32_t *c, int64_t n) {
  static const char *axis[4] = {"batch", "x", "y", "z"};
  for (int64_t i = 0; i < n; i++) {
    const int32_t *r = c + 4 * i;
    if (vc_site_in_range(r[0], r[1], r[2], r[3])) continue;
    for (int a = 0; a < 4; a++) {
      int64_t lo = a == 0 ? 0 : VC_COORD_MIN, hi = a == 0 ? VC_BATCH_MAX - 1 : VC_COORD_MAX;
      if (r[a] < lo || r[a] > hi)
        return vc_fail(ctx, VC_ERR_OUT_OF_RANGE,
                       "coords row %lld: %s = %d is outside the supported range [%lld, %lld]",
                       (long long)i, axis[a], r[a], (long long)lo, (long long)hi);
    }
  }
  return VC_OK;
}
