/* ldmatrix.cuh — four 8x8 b16 matrices from shared memory into mma fragments. */
#ifndef VC_PTX_LDMATRIX_CUH
#define VC_PTX_LDMATRIX_CUH

__device__ static inline uint32_t vc_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ static inline void vc_ldmatrix_x4(uint32_t r[4], const void *p) {
  asm("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(vc_smem_addr(p)));
}

__device__ static inline void vc_ldmatrix_x4_trans(uint32_t r[4], const void *p) {
  asm("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(vc_smem_addr(p)));
}

#endif
