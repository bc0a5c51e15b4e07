/* cp_async.cuh — asynchronous 16-, 8- and 4-byte global -> shared copies (sm_80+). */
#ifndef VC_PTX_CP_ASYNC_CUH
#define VC_PTX_CP_ASYNC_CUH

/* Copies 16 bytes, or writes 16 zero bytes when !valid (src-size 0 reads nothing). */
__device__ static inline void vc_cp_async16(void *smem, const void *gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((uint32_t)__cvta_generic_to_shared(smem)),
               "l"(gmem), "r"(valid ? 16 : 0));
}

/* Copies 8 bytes (both 8-byte aligned). */
__device__ static inline void vc_cp_async8(void *smem, const void *gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"((uint32_t)__cvta_generic_to_shared(smem)), "l"(gmem)
               : "memory");
}

/* Copies 4 bytes (both 4-byte aligned). */
__device__ static inline void vc_cp_async4(void *smem, const void *gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((uint32_t)__cvta_generic_to_shared(smem)), "l"(gmem)
               : "memory");
}

__device__ static inline void vc_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* Waits until at most n committed groups are still in flight (n: a literal). */
#define VC_CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group " #n ";\n" ::: "memory")

#endif
