/* tma.cuh — the tensor memory accelerator (sm_90): a box of a tensor described by a
 * CUtensorMap (made on the host, passed as a __grid_constant__ kernel parameter) copied into
 * shared memory, swizzled as the map says, completing on an mbarrier; or added from shared
 * memory into the tensor, completing as a bulk group. */
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

/* Adds the box at element coordinates (c0, c1, c2) of the tensor (f32: add in L2, elements
 * outside the tensor skipped) from `src` (shared, laid out as a load of the same box would
 * land it), as one bulk-group operation of this thread; the source must be written and
 * fenced (fence.proxy.async) before, and stay until vc_bulk_commit_wait_read. */
__device__ static inline void vc_tma_reduce_add_3d(const CUtensorMap *map, int c0, int c1, int c2, uint32_t src) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
               " [%0, {%1, %2, %3}], [%4];\n" ::"l"((uint64_t)map),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
}

/* Closes this thread's bulk group and waits until its operations have read their shared
 * sources (the writes to global memory complete on their own). */
__device__ static inline void vc_bulk_commit_wait_read(void) {
  asm volatile("cp.async.bulk.commit_group;\n"
               "cp.async.bulk.wait_group.read 0;\n" ::
                   : "memory");
}

#endif
