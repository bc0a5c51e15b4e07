/* wgmma.cuh — Hopper warpgroup MMA (sm_90a): asynchronous D += A * B with both operands in
 * shared memory, described by 64-bit matrix descriptors (or A in registers: the _rk and
 * _rmn wrappers at the end); fp32 accumulators in registers.
 *
 * Operand tiles here use the 128-byte swizzle: a row holds 128 bytes (64 16-bit values or 32
 * tf32), 16-byte chunk q of row m sits at chunk q ^ (m % 8), groups of 8 rows are 1024 bytes
 * apart, and a tile starts 1024-byte aligned. K-major tiles may also use the 64-byte swizzle
 * (rows of 64 bytes, chunk q of row m at q ^ (m / 2 % 4), 8-row groups 512 bytes apart,
 * 512-byte aligned), for reductions whose last 128-byte step would be half empty. In a
 * K-major tile a row is one m (or n) and the 32-byte K step j (k16 of 16-bit values, k8 of
 * tf32) advances the descriptor's start by 32 * j bytes; in an MN-major tile a row is one k
 * and the step advances it by 2048 * j bytes (the swizzle is applied by the hardware to the
 * full address). */
#ifndef VC_PTX_WGMMA_CUH
#define VC_PTX_WGMMA_CUH

#include <stdint.h>

/* Byte offset of 16-byte chunk q of row m in a K-major tile of `sw`-byte swizzled rows
 * (sw 128 or 64). */
__device__ static inline uint32_t vc_sw(int sw, int m, int q) {
  return sw == 128 ? (uint32_t)(m * 128 + ((q ^ (m & 7)) << 4)) : (uint32_t)(m * 64 + ((q ^ (m >> 1 & 3)) << 4));
}

/* Descriptor of a K-major tile of `sw`-byte swizzled rows (128 or 64) at shared address
 * `addr`: leading byte offset unused by these layouts (encoded 1), stride byte offset 8 rows
 * (8 sw bytes), layout type in bits 62-63 (1: 128B swizzle, 2: 64B swizzle). */
__device__ static inline uint64_t vc_wgmma_desc_k(uint32_t addr, int sw) {
  return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)1 << 16 | (uint64_t)(8 * sw >> 4) << 32 |
         (uint64_t)(sw == 128 ? 1 : 2) << 62;
}

/* Descriptor of an MN-major, 128-byte-swizzled operand at `addr`: rows of 64 16-bit values
 * along M (or N), one row per k, 8-row groups 1024 bytes apart (stride byte offset), and
 * further 64-wide atoms along M or N `atom_stride` bytes apart (leading byte offset). The
 * k16 step j is the same descriptor advanced by 2048 * j bytes. */
__device__ static inline uint64_t vc_wgmma_desc_mn(uint32_t addr, uint32_t atom_stride) {
  return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)(atom_stride >> 4) << 16 | (uint64_t)(1024 >> 4) << 32 |
         (uint64_t)1 << 62;
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

/* One 32-byte K step of an m64nN warpgroup MMA, N = 64, 96, 128 or 256: k16 of f16 or bf16
 * operands, or k8 of tf32 (fp32 storage; the tensor cores read the top 19 bits of each value,
 * so operands are truncated, not rounded): d (64 x N per warpgroup, N / 2 floats a thread)
 * += A(64 x K) * B(K x N). `kind` is the shape's tail and types ("k16.f32.f16.f16"); `tail`
 * the transpose immediates of 16-bit types (", 0, 1": 0 for a K-major operand, 1 for an
 * MN-major one; tf32 has none and takes K-major operands only). Accumulator element (row,
 * col) of warp w, lane l: row = 16 w + l / 4 + 8 h, col = 8 j + 2 (l % 4) + e, at
 * d[4 j + 2 h + e]. The operand lists are spelled out because inline asm takes no arrays:
 * VC_WGMMA_D<N> names d's N / 2 registers %0 .., VC_WGMMA_D<N>_OUT their constraints; the
 * operands after them are numbered from N / 2 on. */
#define VC_WGMMA_D64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define VC_WGMMA_D64_OUT(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define VC_WGMMA_D96 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}"
#define VC_WGMMA_D96_OUT(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define VC_WGMMA_D128 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define VC_WGMMA_D128_OUT(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define VC_WGMMA_D256 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define VC_WGMMA_D256_OUT(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

/* name(d, A, db): the wgmma of shape m64n<n> and `kind`, A given by `a_param` and passed to
 * the asm as `a_in` (operands %<n/2> ..), `a_b` the PTX of A and B's operands, `pred` the
 * scale-d operand's (the last one, always 1: d += A B). */
#define VC_WGMMA_(name, n, kind, tail, a_param, a_in, a_b, pred)                                          \
  __device__ static inline void name(float d[(n) / 2], a_param, uint64_t db) {                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " pred ", 0;\n"                                          \
                 "wgmma.mma_async.sync.aligned.m64n" #n kind " " VC_WGMMA_D##n ", " a_b ", p, 1, 1" tail ";\n}\n" \
                 : VC_WGMMA_D##n##_OUT(d)                                                                    \
                 : a_in, "l"(db), "r"(1));                                                                   \
  }
/* A by descriptor (shared memory) */
#define VC_WGMMA_A_DESC "l"(da)
#define VC_WGMMA_N64(name, kind, tail) VC_WGMMA_(name, 64, kind, tail, uint64_t da, VC_WGMMA_A_DESC, "%32, %33", "%34")
#define VC_WGMMA_N96(name, kind, tail) VC_WGMMA_(name, 96, kind, tail, uint64_t da, VC_WGMMA_A_DESC, "%48, %49", "%50")
#define VC_WGMMA_N128(name, kind, tail) VC_WGMMA_(name, 128, kind, tail, uint64_t da, VC_WGMMA_A_DESC, "%64, %65", "%66")
#define VC_WGMMA_N256(name, kind, tail) VC_WGMMA_(name, 256, kind, tail, uint64_t da, VC_WGMMA_A_DESC, "%128, %129", "%130")

/* Instances: _kk both operands K-major (forward, and the row tiles' tf32 dgrad on a
 * transposed weight), _kmn B MN-major (16-bit dgrad reads the weight as stored), _mnmn both
 * MN-major (wgrad's gathered rows). */
#define VC_WGMMA_LAYOUTS(n, ty)                                                           \
  VC_WGMMA_N##n(vc_wgmma_n##n##_##ty##_kk, "k16.f32." #ty "." #ty, ", 0, 0")   \
  VC_WGMMA_N##n(vc_wgmma_n##n##_##ty##_kmn, "k16.f32." #ty "." #ty, ", 0, 1")  \
  VC_WGMMA_N##n(vc_wgmma_n##n##_##ty##_mnmn, "k16.f32." #ty "." #ty, ", 1, 1")
#define VC_WGMMA_TF32(n) VC_WGMMA_N##n(vc_wgmma_n##n##_tf32_kk, "k8.f32.tf32.tf32", "")
VC_WGMMA_LAYOUTS(64, f16)
VC_WGMMA_LAYOUTS(64, bf16)
VC_WGMMA_LAYOUTS(96, f16)
VC_WGMMA_LAYOUTS(96, bf16)
VC_WGMMA_LAYOUTS(128, f16)
VC_WGMMA_LAYOUTS(128, bf16)
VC_WGMMA_LAYOUTS(256, f16)
VC_WGMMA_LAYOUTS(256, bf16)
VC_WGMMA_TF32(64)
VC_WGMMA_TF32(96)
VC_WGMMA_TF32(128)
VC_WGMMA_TF32(256)


/* m64nNk8 tf32 (N = 64, 128) with A from registers and B K-major in shared memory (B's
 * descriptor as above): a[v] of warp w, lane l holds A's element (row 16 w + l / 4 + 8 (v &
 * 1), k l % 4 + 4 (v >> 1)). The registers, like the accumulators, must not be written until
 * a wait has retired the group; a wgmma.fence must order their writes before it. */
#define VC_WGMMA_A_REGS "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])
VC_WGMMA_(vc_wgmma_n64_tf32_rk, 64, "k8.f32.tf32.tf32", "", const uint32_t a[4], VC_WGMMA_A_REGS,
          "{%32, %33, %34, %35}, %36", "%37")
VC_WGMMA_(vc_wgmma_n128_tf32_rk, 128, "k8.f32.tf32.tf32", "", const uint32_t a[4], VC_WGMMA_A_REGS,
          "{%64, %65, %66, %67}, %68", "%69")

/* m64nNk16 bf16 (N = 64, 128) with A from registers and B MN-major in shared memory (the
 * transpose immediate 1; B's descriptor vc_wgmma_desc_mn): a[v] of warp w, lane l packs A's
 * elements (row 16 w + l / 4 + 8 (v & 1), k 2 (l % 4) + 8 (v >> 1)) and k + 1, the lower k
 * in the low half. The same rules for writing the registers as above. */
VC_WGMMA_(vc_wgmma_n64_bf16_rmn, 64, "k16.f32.bf16.bf16", ", 1", const uint32_t a[4], VC_WGMMA_A_REGS,
          "{%32, %33, %34, %35}, %36", "%37")
VC_WGMMA_(vc_wgmma_n128_bf16_rmn, 128, "k16.f32.bf16.bf16", ", 1", const uint32_t a[4], VC_WGMMA_A_REGS,
          "{%64, %65, %66, %67}, %68", "%69")

#endif
