/* wgmma.cuh — Hopper warpgroup MMA (sm_90a): asynchronous D += A * B with both operands in
 * shared memory, described by 64-bit matrix descriptors; fp32 accumulators in registers.
 *
 * Operand tiles here are K-major with the 128-byte swizzle: a row holds 64 16-bit values
 * (128 bytes), 16-byte chunk q of row m sits at chunk q ^ (m % 8), groups of 8 rows are
 * 1024 bytes apart, and a tile starts 1024-byte aligned. The k16 step j of a tile is the same
 * descriptor with its start advanced by 32 * j bytes (the swizzle is applied by the hardware
 * to the full address). */
#ifndef VC_PTX_WGMMA_CUH
#define VC_PTX_WGMMA_CUH

#include <stdint.h>

/* Byte offset of 16-byte chunk q of row m in a 128-byte-swizzled K-major tile. */
__device__ static inline uint32_t vc_sw128(int m, int q) { return (uint32_t)(m * 128 + ((q ^ (m & 7)) << 4)); }

/* Descriptor of a K-major, 128-byte-swizzled tile at shared address `addr`: leading byte
 * offset unused by this layout (encoded 1), stride byte offset 1024 (8 rows), layout type 1
 * (128B swizzle) in bits 62-63. */
__device__ static inline uint64_t vc_wgmma_desc(uint32_t addr) {
  return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

/* Orders this warpgroup's register and shared-memory accesses before the wgmma that follow. */
__device__ static inline void vc_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ static inline void vc_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* Waits until at most n committed groups are pending (n: a literal). */
#define VC_WGMMA_WAIT(n) asm volatile("wgmma.wait_group.sync.aligned " #n ";\n" ::: "memory")

/* Makes generic-proxy writes to shared memory (cp.async, st.shared) visible to wgmma. */
__device__ static inline void vc_fence_proxy_async(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* Keeps the compiler from moving reads or writes of an accumulator across a wait. */
__device__ static inline void vc_reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }

/* One m64n128k16 step: d (64 x 128 per warpgroup, 64 floats a thread) += A(64 x 16) * B(16 x 128),
 * A and B K-major. Accumulator element (row, col) of warp w, lane l: row = 16 w + l / 4 + 8 h,
 * col = 8 j + 2 (l % 4) + e, at d[4 j + 2 h + e]. */
#define VC_WGMMA_M64N128K16(name, ty)                                                                      \
  __device__ static inline void name(float d[64], uint64_t da, uint64_t db) {                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                          \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." ty "." ty " "                           \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "                                                                             \
                 "%64, %65, p, 1, 1, 0, 0;\n}\n"                                                             \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                                  \
                 : "l"(da), "l"(db), "r"(1));                                                             \
  }
VC_WGMMA_M64N128K16(vc_wgmma_f16, "f16")
VC_WGMMA_M64N128K16(vc_wgmma_bf16, "bf16")

#endif
