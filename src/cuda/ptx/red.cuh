/* red.cuh — fire-and-forget reductions into global memory (sm_90 vector form): the adds
 * happen in L2, and the issuing thread does not wait for them. */
#ifndef VC_PTX_RED_CUH
#define VC_PTX_RED_CUH

/* p[0] += a, p[1] += b (8-byte aligned p), relaxed, GPU scope. */
__device__ static inline void vc_red_add_f32x2(float *p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

#endif
