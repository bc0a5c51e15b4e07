/* dtype.cuh — storage-type loads and stores for device code. */
#ifndef VC_DTYPE_CUH
#define VC_DTYPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ static inline float vc_load(const void *p, int dt, int64_t i) {
  switch (dt) {
  case VC_DTYPE_F16: return __half2float(((const __half *)p)[i]);
  case VC_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  default: return ((const float *)p)[i];
  }
}

__device__ static inline void vc_store(void *p, int dt, int64_t i, float v) {
  switch (dt) {
  case VC_DTYPE_F16: ((__half *)p)[i] = __float2half_rn(v); break;
  case VC_DTYPE_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
  default: ((float *)p)[i] = v;
  }
}

/* v0, v1 as one 32-bit pair of 16-bit values of dtype dt (f16 or bf16). */
__device__ static __forceinline__ uint32_t vc_pack2(int dt, float v0, float v1) {
  if (dt == VC_DTYPE_F16) {
    __half2 h = __floats2half2_rn(v0, v1);
    return *(uint32_t *)&h;
  }
  __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
  return *(uint32_t *)&b;
}

/* The two 16-bit values (f16 or bf16) of a 32-bit word: lo = bits 0-15, hi = bits 16-31. */
__device__ static inline void vc_unpack16x2(uint32_t w, int dt, float *lo, float *hi) {
  if (dt == VC_DTYPE_F16) {
    *lo = __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
    *hi = __half2float(__ushort_as_half((unsigned short)(w >> 16)));
  } else {
    *lo = __uint_as_float(w << 16);
    *hi = __uint_as_float(w & 0xffff0000u);
  }
}

#endif
