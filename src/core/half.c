/* half.c — f16 and bf16 storage conversions (bit exact, round to nearest even). */
#include "internal.h"

#include <string.h>

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float vc_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);
    /* subnormal: value = man * 2^-24, exact in f32 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t vc_float_to_half(float f) {
  uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN stays NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {
    /* result is subnormal or zero: scale to units of 2^-24 and round to nearest even */
    if (a < 0x33000000u) return (uint16_t)sign; /* below half of the smallest subnormal */
    uint32_t exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; /* 14..24 */
    uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t r = a - 0x38000000u; /* rebias exponent: 127 -> 15 */
  uint32_t q = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;
  return (uint16_t)(sign | q);
}

float vc_bf16_to_float(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t vc_float_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

vc_status vc_convert_from_f32(vc_dtype to, const float *src, void *dst, int64_t n) {
  if (n < 0) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_convert_from_f32: n = %lld is negative", (long long)n);
  if (n > 0 && (!src || !dst))
    return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_convert_from_f32: %s is NULL", src ? "dst" : "src");
  switch (to) {
  case VC_DTYPE_F32: if (n) memmove(dst, src, (size_t)n * 4); return VC_OK;
  case VC_DTYPE_F16:
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_float_to_half(src[i]);
    return VC_OK;
  case VC_DTYPE_BF16:
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_float_to_bf16(src[i]);
    return VC_OK;
  }
  return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_convert_from_f32: dtype = %d is not a vc_dtype", (int)to);
}

vc_status vc_convert_to_f32(vc_dtype from, const void *src, float *dst, int64_t n) {
  if (n < 0) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_convert_to_f32: n = %lld is negative", (long long)n);
  if (n > 0 && (!src || !dst))
    return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_convert_to_f32: %s is NULL", src ? "dst" : "src");
  switch (from) {
  case VC_DTYPE_F32: if (n) memmove(dst, src, (size_t)n * 4); return VC_OK;
  case VC_DTYPE_F16:
    for (int64_t i = 0; i < n; i++) dst[i] = vc_half_to_float(((const uint16_t *)src)[i]);
    return VC_OK;
  case VC_DTYPE_BF16:
    for (int64_t i = 0; i < n; i++) dst[i] = vc_bf16_to_float(((const uint16_t *)src)[i]);
    return VC_OK;
  }
  return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_convert_to_f32: dtype = %d is not a vc_dtype", (int)from);
}
