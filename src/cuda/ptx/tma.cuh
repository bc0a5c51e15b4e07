/* tma.cuh — the tensor memory accelerator (sm_90): a box of a tensor described by a
 * CUtensorMap (made on the host, passed as a __grid_constant__ kernel parameter) copied into
 * shared memory, swizzled as the map says, completing on an mbarrier. */
#ifndef VC_PTX_TMA_CUH
#define VC_PTX_TMA_CUH

#include <cuda.h>
#include <stdint.h>

/* Copies the box at element coordinates (c0, c1, c2) (innermost first) to `dst` (shared,
 * 1024-byte aligned for the 128-byte swizzle); elements outside the tensor arrive as zeros.
 * The copy's bytes complete the transaction count of barrier `bar`. */
__device__ static inline void vc_tma_load_3d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2,
                                             uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
               "%4}], [%5];\n" ::"r"(dst),
               "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}


#endif
