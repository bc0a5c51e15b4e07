/* mbarrier.cuh — shared-memory barriers with phases and transaction counts (sm_90), the
 * hand-off between a producer warpgroup and the consumers of a stage ring. Addresses are
 * 32-bit shared-window addresses of 8-byte-aligned words. */
#ifndef VC_PTX_MBARRIER_CUH
#define VC_PTX_MBARRIER_CUH

#include <stdint.h>

__device__ static inline uint32_t vc_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Sets the barrier to expect `count` arrivals per phase (one thread, before any use). */
__device__ static inline void vc_mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* Makes the initialised barriers visible to the asynchronous proxy (TMA) as well. */
__device__ static inline void vc_mbar_init_fence(void) {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ static inline void vc_mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}

/* Arrives and adds `bytes` to the transactions the current phase waits for (a TMA copy
 * completing on this barrier subtracts them). */
__device__ static inline void vc_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}

/* Arrives once every cp.async this thread issued so far has landed; the arrival is one of
 * the `count` the barrier was initialised with (.noinc). */
__device__ static inline void vc_mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/* Blocks until the phase with the given parity (0 or 1) has completed. */
__device__ static inline void vc_mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}

/* Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, a multiple of 32. */
__device__ static inline void vc_named_barrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif
