/* cpu.h — what the CPU backend's files share. */
#ifndef VC_CPU_H
#define VC_CPU_H

#include "../core/internal.h"

/* ---- hash.c: open addressing, linear probing, capacity a power of two, load <= 0.5 ---- */
typedef struct vc_hash {
  uint64_t *keys; /* VC_KEY_EMPTY marks a free slot */
  int32_t *vals;
  uint64_t mask;  /* capacity - 1 */
} vc_hash;

vc_status vc_hash_init(vc_context *ctx, vc_hash *h, int64_t n);
void vc_hash_free(vc_hash *h);
/* Inserts key -> val; returns -1 if inserted, else the value already stored. */
int32_t vc_hash_insert(vc_hash *h, uint64_t key, int32_t val);
int32_t vc_hash_find(const vc_hash *h, uint64_t key); /* -1 if absent */

/* ---- kmap.c ---- */
vc_status vc_cpu_plan_build(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_plan *paired,
                            void *stream);
void vc_cpu_plan_release(vc_plan *p);

/* ---- rows.c: dtype-aware row movement between tensors and f32/f64 buffers ---- */
/* dst[j, :] = f32(src[idx[j], :]) for j < m. */
void vc_cpu_gather_rows(float *dst, const void *src, vc_dtype dt, int64_t c, const int32_t *idx, int64_t m);
/* acc[idx[j], :] += src[j, :]; idx entries must be distinct (true within one offset). */
void vc_cpu_scatter_add_rows(float *acc, int64_t c, const float *src, const int32_t *idx, int64_t m);
/* n values: f32 <-> storage dtype, and storage -> f64. */
void vc_cpu_to_f32(float *dst, const void *src, vc_dtype dt, int64_t n);
void vc_cpu_from_f32(void *dst, vc_dtype dt, const float *src, int64_t n);
void vc_cpu_to_f64(double *dst, const void *src, vc_dtype dt, int64_t n);
void vc_cpu_from_f64(void *dst, vc_dtype dt, const double *src, int64_t n);
/* rows[i, :] = f32(bias) (or 0) for i < n; bias has storage dtype dt. */
void vc_cpu_fill_rows(float *rows, int64_t n, int64_t c, const void *bias, vc_dtype dt);
/* db[c] = sum over n rows of dy, accumulated in f64. */
void vc_cpu_column_sums(void *db, vc_dtype dt, const void *dy, int64_t n, int64_t c);

/* ---- workspace.c: one layout per (pass, algo), used by the size query and the passes ---- */
enum { VC_WS_MAX_PARTS = 4 };
typedef struct vc_cpu_ws {
  size_t bytes[VC_WS_MAX_PARTS]; /* 0 = part unused */
  size_t total;                  /* including alignment slack */
} vc_cpu_ws;

/* a->algo is resolved by the core (reference or explicit) before any backend call. */
void vc_cpu_ws_layout(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_cpu_ws *ws);
/* Splits an (unaligned) caller workspace into 64-byte aligned parts. */
void vc_cpu_ws_split(const vc_cpu_ws *ws, void *base, void *part[VC_WS_MAX_PARTS]);
/* Rows per gather/GEMM/scatter chunk. */
int64_t vc_cpu_chunk_rows(const vc_plan *p);
/* Every pass starts here: splits the workspace into its parts. */
void vc_cpu_pass_begin(const vc_plan *p, const vc_conv_args *a, vc_pass pass, void *ws, void *part[VC_WS_MAX_PARTS]);

/* The explicit gather -> GEMM -> scatter loop shared by forward and backward-data: for every
 * offset r and chunk of its pairs, acc[dst_idx] += f32(src[src_idx]) * op(W_r), where W_r is
 * the [co, ci] slice of w32 at column r*ci (row stride K*ci). `forward`: the source rows are
 * the pairs' inputs and op = transpose (ci -> co); otherwise (backward-data) the source rows
 * are the pairs' outputs and op = identity (co -> ci). */
void vc_cpu_gather_gemm_scatter(const vc_plan *p, const void *src, vc_dtype dt, int64_t c_src, const float *w32,
                                int64_t c_dst, bool forward, float *acc, float *ga, float *gc);

/* ---- the passes: conv_forward.c, conv_backward_data.c, conv_backward_weight.c ---- */
/* variant: unused (the CPU backend has no variants; the dispatch table passes one) */
vc_status vc_cpu_forward(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *x,
                         const void *w, const void *bias, void *y, void *ws, size_t ws_bytes, void *stream);
vc_status vc_cpu_backward_data(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *dy,
                               const void *w, void *dx, void *ws, size_t ws_bytes, void *stream);
vc_status vc_cpu_backward_weight(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant, const void *x,
                                 const void *dy, void *dw, void *db, void *ws, size_t ws_bytes,
                                 void *stream);

/* ---- tune.c ---- */
int vc_cpu_algos(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo out[8], int *n_tunable);
vc_algo vc_cpu_heuristic(const vc_plan *p, const vc_conv_args *a, vc_pass pass);
bool vc_cpu_deterministic(vc_algo algo, vc_pass pass);
const char *vc_cpu_device_name(vc_context *ctx);

#endif
