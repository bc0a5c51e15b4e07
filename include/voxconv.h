/*
 * voxconv.h — sparse 3D convolution for voxel networks. The one public header.
 *
 * A sparse tensor is a list of N unique integer sites `coords` (int32 [N,4], rows
 * (batch, x, y, z)) and a row-major feature matrix `feats` [N, C]. A convolution is
 * described by a vc_conv_desc (kind, kernel, stride, padding, dilation); a vc_plan binds
 * a descriptor to one coordinate set and owns the kernel map (which input row meets which
 * output row through which kernel offset). Plans are channel- and dtype-agnostic: one
 * plan serves every layer with the same geometry, and all three passes (forward,
 * backward-data, backward-weight).
 *
 * Rules that hold for every function below:
 *  - Every function returns a vc_status and never aborts, exits or prints. On failure the
 *    context keeps a sentence naming the argument and its value: vc_last_error(ctx).
 *  - Descriptor structs start with their own size (`struct_size`); fill it with sizeof.
 *    They only ever grow at the end, so an older caller keeps working.
 *  - The caller owns tensors and workspaces. A plan owns its kernel map.
 *  - Pointers are host pointers for a CPU context and device pointers for a CUDA context.
 *    `stream` is a cudaStream_t for CUDA contexts and ignored (pass NULL) for CPU.
 *  - Execute calls (vc_conv_forward, vc_conv_backward_data, vc_conv_backward_weight)
 *    never allocate memory and never synchronise the host with a device.
 *  - A context may be used by one thread at a time; separate contexts are independent.
 *  - Destructors accept NULL.
 *
 * Geometry (cross-correlation, spconv conventions): output site p reads input site
 * q = p*s - pad + r*d for kernel offset r = (r0, r1, r2), per axis. The weight is
 * [Co, K0, K1, K2, Ci] contiguous; the flat offset index is r = (r0*K1 + r1)*K2 + r2.
 */
#ifndef VOXCONV_H
#define VOXCONV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libvoxconv.so; everything else in the library is hidden. */
#if defined(VC_BUILDING_LIBRARY) && defined(__GNUC__)
#define VC_API __attribute__((visibility("default")))
#else
#define VC_API
#endif

#define VC_VERSION_MAJOR 0
#define VC_VERSION_MINOR 2
#define VC_VERSION_PATCH 0

/* Supported coordinate range: anything outside is VC_ERR_OUT_OF_RANGE. */
#define VC_BATCH_MAX 4096      /* batch index in [0, VC_BATCH_MAX) */
#define VC_COORD_MIN (-65536)  /* each spatial axis in [VC_COORD_MIN, VC_COORD_MAX] */
#define VC_COORD_MAX 65535
#define VC_KERNEL_MAX 7        /* kernel size per axis in [1, 7] */
#define VC_STRIDE_MAX 4        /* stride per axis in [1, 4] */
#define VC_DILATION_MAX 4      /* dilation per axis in [1, 4] */
#define VC_CHANNELS_MAX 65536  /* channel counts in [1, 65536] */

typedef enum vc_status {
  VC_OK = 0,
  VC_ERR_INVALID_ARGUMENT, /* NULL pointer, bad size, value outside its documented set */
  VC_ERR_OUT_OF_RANGE,     /* coordinate or count outside the supported range */
  VC_ERR_DUPLICATE_COORDS, /* the same site appears twice in one coordinate list */
  VC_ERR_UNSUPPORTED,      /* valid request this build or backend cannot serve */
  VC_ERR_OUT_OF_MEMORY,    /* an allocation failed, or the workspace is too small */
  VC_ERR_DEVICE,           /* the device runtime reported an error */
  VC_ERR_IO,               /* a file could not be read or written */
  VC_ERR_INTERNAL          /* a bug in voxconv: please report it */
} vc_status;

typedef enum vc_device_kind { VC_DEVICE_CPU = 0, VC_DEVICE_CUDA = 1 } vc_device_kind;

/* Storage type of features, weights, bias and all their gradients. */
typedef enum vc_dtype { VC_DTYPE_F32 = 0, VC_DTYPE_F16 = 1, VC_DTYPE_BF16 = 2 } vc_dtype;

/* Arithmetic for f32 storage. f16/bf16 always accumulate in f32 (or better).
 * VC_MATH_TF32 lets a backend use TF32 tensor cores; the CPU computes it in full f32. */
typedef enum vc_math { VC_MATH_F32 = 0, VC_MATH_TF32 = 1 } vc_math;

typedef enum vc_conv_kind {
  /* Output sites = input sites, same order. Odd kernel, stride 1, pad = (K/2)*d. */
  VC_CONV_SUBMANIFOLD = 0,
  /* Strided: output = every site p with some input at p*s - pad + r*d.
   * Output order: ascending (batch, x, y, z). */
  VC_CONV_SPARSE = 1,
  /* Adjoint geometry of a paired VC_CONV_SPARSE plan: input sites are that plan's output
   * sites, output sites are its input sites in its input order, same kernel offsets. */
  VC_CONV_INVERSE = 2,
  /* Generative transposed conv: input site q writes output q*s - pad + r*d.
   * Output = every site reached, in ascending (batch, x, y, z) order. */
  VC_CONV_TRANSPOSED = 3
} vc_conv_kind;

typedef enum vc_pass {
  VC_PASS_FORWARD = 0,        /* y = conv(x, w) + bias */
  VC_PASS_BACKWARD_DATA = 1,  /* dx = conv^T(dy, w) */
  VC_PASS_BACKWARD_WEIGHT = 2 /* dw = sum over pairs dy x^T, db = sum of dy rows */
} vc_pass;

typedef enum vc_algo {
  VC_ALGO_AUTO = 0,      /* the backend picks (tuner) */
  VC_ALGO_REFERENCE = 1, /* plain loops, f64 accumulation: the oracle, slow (CPU) */
  VC_ALGO_EXPLICIT = 2,  /* per offset: gather -> GEMM -> scatter-add */
  VC_ALGO_IMPLICIT = 3,  /* fused gather-GEMM-scatter: mma.sync for 16-bit storage, FFMA for
                            f32 (CUDA, any SM >= 8.0) */
  VC_ALGO_MASKED = 4,    /* masked implicit GEMM on Hopper wgmma (CUDA, sm_90 only) */
  VC_ALGO_GROUPED = 5    /* grouped GEMM over offsets (not built: no backend offers it) */
} vc_algo;

typedef struct vc_context vc_context;
typedef struct vc_plan vc_plan;

/* Convolution geometry. Per axis: kernel_size in [1,7], stride in [1,4],
 * dilation in [1,4], padding in [0, (kernel_size-1)*dilation].
 * Submanifold: odd kernel, stride 1, padding exactly (kernel_size/2)*dilation.
 * Inverse: must equal the paired plan's descriptor apart from `kind`. */
typedef struct vc_conv_desc {
  size_t struct_size; /* sizeof(vc_conv_desc); 0.1 callers' shorter struct still works */
  vc_conv_kind kind;
  int32_t kernel_size[3];
  int32_t stride[3];
  int32_t padding[3];
  int32_t dilation[3];
  /* Since 0.2 (read as 0 from a shorter struct). Sparse and transposed kinds: when
   * output_bound[a] > 0, only sites with 0 <= coordinate < output_bound[a] on axis a are
   * outputs, and pairs that reach other sites are dropped (spconv's output spatial shape).
   * 0: unbounded. Must be 0 for submanifold plans; inverse plans take 0 or their paired
   * plan's (so a copied descriptor works), and it has no effect there. */
  int32_t output_bound[3];
} vc_conv_desc;

/* Size of the 0.1 descriptor, the oldest vc_plan_create accepts. */
#define VC_CONV_DESC_SIZE_0_1 offsetof(vc_conv_desc, output_bound)

/* Per-call arguments of the execute functions. */
typedef struct vc_conv_args {
  size_t struct_size;   /* sizeof(vc_conv_args) */
  int64_t in_channels;  /* Ci, in [1, VC_CHANNELS_MAX] */
  int64_t out_channels; /* Co, in [1, VC_CHANNELS_MAX] */
  vc_dtype dtype;       /* of x, w, bias, y and their gradients */
  vc_math math;
  vc_algo algo;         /* VC_ALGO_AUTO unless forcing one */
} vc_conv_args;

/* ---- status and errors -------------------------------------------------------------- */

/* Static text for a status ("VC_ERR_OUT_OF_RANGE: ..."); never NULL. */
VC_API const char *vc_status_string(vc_status s);

/* The last error recorded on `ctx` (empty string if none). With ctx == NULL: the calling
 * thread's last error from a function that had no context (vc_context_create).
 * The string lives until the next failing call on the same context or thread. */
VC_API const char *vc_last_error(const vc_context *ctx);

/* "MAJOR.MINOR.PATCH" of the VC_VERSION_* macros the library was built with (static text). */
VC_API const char *vc_version(void);

/* ---- context ------------------------------------------------------------------------ */

/* Creates a context for one device. kind VC_DEVICE_CPU takes device 0.
 * Owns: the returned context (free with vc_context_destroy).
 * Errors: VC_ERR_INVALID_ARGUMENT (NULL out, bad kind or device, a bad VOXCONV_MASKED_BN,
 * VOXCONV_MASKED_SPLIT, VOXCONV_MASKED_PIPES or VOXCONV_MASKED_WGRAD on a CUDA device),
 * VC_ERR_UNSUPPORTED (backend not in this build, a GPU below compute capability 8.0),
 * VC_ERR_DEVICE, VC_ERR_OUT_OF_MEMORY. */
VC_API vc_status vc_context_create(vc_device_kind kind, int device, vc_context **out);

/* Frees the context. Plans made from it must be destroyed first. NULL is fine.
 * A CUDA context keeps the device memory of destroyed plans cached for its next plans (a
 * stream-ordered memory pool of its own, like a framework's caching allocator); it goes
 * back to the driver here. */
VC_API void vc_context_destroy(vc_context *ctx);

/* The context's device kind (VC_DEVICE_CPU for NULL). */
VC_API vc_device_kind vc_context_device_kind(const vc_context *ctx);

/* ---- descriptors -------------------------------------------------------------------- */

/* Fills `d` for the same kernel/stride/padding/dilation on all three axes, output_bound 0
 * (unbounded).
 * padding < 0 picks the default: (kernel/2)*dilation for submanifold, 0 otherwise.
 * Validation happens in vc_plan_create. */
VC_API void vc_conv_desc_init(vc_conv_desc *d, vc_conv_kind kind, int32_t kernel_size,
                       int32_t stride, int32_t padding, int32_t dilation);

/* Fills `a` with the given channels and dtype, VC_MATH_F32, VC_ALGO_AUTO. */
VC_API void vc_conv_args_init(vc_conv_args *a, int64_t in_channels, int64_t out_channels,
                       vc_dtype dtype);

/* Bytes of one element of `dtype` (4 or 2); 0 for an unknown dtype. */
VC_API size_t vc_dtype_size(vc_dtype dtype);

/* ---- plans -------------------------------------------------------------------------- */

/* Builds the kernel map of `desc` over the n input sites `coords` (int32 [n,4]).
 * n == 0 is valid and gives an empty plan. `coords` is copied; the caller may free it.
 * Inverse plans: `paired` is the VC_CONV_SPARSE plan to invert (same context); `coords`
 * may be NULL, otherwise it must equal the paired plan's output coordinates (n too).
 * For other kinds `paired` must be NULL.
 * Sync: on CUDA, the call may synchronise `stream` (output counts are needed on the host).
 * Owns: the returned plan (vc_plan_destroy), which must not outlive `ctx` or `paired`.
 * Errors: VC_ERR_INVALID_ARGUMENT (NULL ctx/out/coords, bad desc, paired missing or of the
 * wrong kind/context/geometry, coords differing from paired), VC_ERR_OUT_OF_RANGE (n < 0 or
 * too large, a coordinate or a produced output coordinate outside the supported range, a
 * CUDA plan of 2^32 or more neighbour pairs),
 * VC_ERR_DUPLICATE_COORDS, VC_ERR_OUT_OF_MEMORY, VC_ERR_DEVICE. */
VC_API vc_status vc_plan_create(vc_context *ctx, const vc_conv_desc *desc, const int32_t *coords,
                         int64_t n, const vc_plan *paired, void *stream, vc_plan **out);

/* Frees the plan and its kernel map. NULL is fine. */
VC_API void vc_plan_destroy(vc_plan *p);

VC_API int64_t vc_plan_in_count(const vc_plan *p);     /* -1 for NULL */
VC_API int64_t vc_plan_out_count(const vc_plan *p);    /* -1 for NULL */
VC_API int32_t vc_plan_kernel_volume(const vc_plan *p); /* K0*K1*K2; -1 for NULL */
VC_API int64_t vc_plan_pair_count(const vc_plan *p);   /* total (input, output) pairs; -1 for NULL */
VC_API const vc_conv_desc *vc_plan_desc(const vc_plan *p); /* the validated descriptor */

/* Bytes the plan owns on its device (device memory for CUDA, host memory for the CPU):
 * sites (8 bytes each), pairs and their offsets, the backend's neighbour maps and row
 * orders; not the build's scratch, which is freed before vc_plan_create returns. 0 for NULL. */
VC_API size_t vc_plan_memory_bytes(const vc_plan *p);

/* Writes the output coordinates (int32 [out_count, 4]) into caller memory on the plan's
 * device. Sync: CUDA copies are ordered on `stream`. Errors: VC_ERR_INVALID_ARGUMENT. */
VC_API vc_status vc_plan_out_coords(const vc_plan *p, int32_t *coords_out, void *stream);

/* Copies the kernel map: offsets[K+1] (int64, host memory; pairs of offset r are entries
 * offsets[r] .. offsets[r+1]-1), in_index[pairs] and out_index[pairs] (int32 row indices,
 * caller memory on the plan's device). Within an offset, pairs ascend by output row.
 * Any of the three pointers may be NULL to skip it. A CUDA submanifold plan keeps half the
 * lists (the rest mirror them) and writes the indices through device scratch of about 4 K
 * bytes an output row, on `stream`. Errors: VC_ERR_INVALID_ARGUMENT, VC_ERR_OUT_OF_MEMORY
 * (that scratch), VC_ERR_DEVICE. */
VC_API vc_status vc_plan_kernel_map(const vc_plan *p, int64_t *offsets, int32_t *in_index,
                             int32_t *out_index, void *stream);

/* ---- execution ---------------------------------------------------------------------- */

/* Workspace bytes that `pass` needs with these arguments (0 is possible).
 * With VC_ALGO_AUTO the size is that of the algorithm AUTO picks now (vc_conv_algo_for), so
 * query it again after vc_conv_tune, and in a context created under other VOXCONV_ALGO_* or
 * VOXCONV_DETERMINISTIC settings: on CUDA, explicit needs gather and GEMM buffers (plus an
 * f32 accumulator for 16-bit storage) where implicit forward needs none, and an execute call
 * given less than its algorithm needs fails with VC_ERR_OUT_OF_MEMORY.
 * Errors: VC_ERR_INVALID_ARGUMENT (NULL, bad args), VC_ERR_UNSUPPORTED (algo/dtype/math
 * this backend does not have). Errors are recorded on the plan's context. */
VC_API vc_status vc_conv_workspace_size(const vc_plan *p, const vc_conv_args *a, vc_pass pass,
                                 size_t *bytes);

/* y[out_count, Co] = conv(x[in_count, Ci], w[Co, K0, K1, K2, Ci]) + bias[Co].
 * bias may be NULL. y is overwritten (no accumulation); it must not alias x or w.
 * Sync: asynchronous on `stream` for CUDA; the CPU returns when done.
 * Errors: VC_ERR_INVALID_ARGUMENT (NULL pointers with n > 0, plan from another context,
 * bad args), VC_ERR_OUT_OF_MEMORY (workspace smaller than vc_conv_workspace_size),
 * VC_ERR_UNSUPPORTED, VC_ERR_DEVICE. */
VC_API vc_status vc_conv_forward(vc_context *ctx, const vc_plan *p, const vc_conv_args *a,
                          const void *x, const void *w, const void *bias, void *y,
                          void *workspace, size_t workspace_bytes, void *stream);

/* dx[in_count, Ci] = gradient of the forward output w.r.t. x, given dy[out_count, Co].
 * dx is overwritten. Sync and errors as vc_conv_forward. */
VC_API vc_status vc_conv_backward_data(vc_context *ctx, const vc_plan *p, const vc_conv_args *a,
                                const void *dy, const void *w, void *dx,
                                void *workspace, size_t workspace_bytes, void *stream);

/* dw[Co, K0, K1, K2, Ci] = sum over pairs of dy[out] x[in]^T; db[Co] = sum of dy rows
 * (db may be NULL). Both are overwritten. Sync and errors as vc_conv_forward. */
VC_API vc_status vc_conv_backward_weight(vc_context *ctx, const vc_plan *p, const vc_conv_args *a,
                                  const void *x, const void *dy, void *dw, void *db,
                                  void *workspace, size_t workspace_bytes, void *stream);

/* ---- algorithm choice --------------------------------------------------------------- */

/* VC_ALGO_AUTO resolves, per pass, in this order (the environment variables are read by
 * vc_context_create, like the cache file):
 *  1. the environment: VOXCONV_ALGO_FORWARD, VOXCONV_ALGO_BACKWARD_DATA,
 *     VOXCONV_ALGO_BACKWARD_WEIGHT = reference | explicit | implicit | masked | grouped
 *     (grouped: VC_ERR_UNSUPPORTED on every backend);
 *  2. VOXCONV_DETERMINISTIC (any value but "" and "0") restricts steps 3 and 4 to
 *     algorithms without atomics (a forced algorithm of step 1 runs as forced);
 *  3. the tune cache: winners recorded by vc_conv_tune, kept in memory per context and in
 *     the text file $VOXCONV_CACHE_DIR/tune-v2.txt (default ~/.cache/voxconv/; read by
 *     vc_context_create), keyed by
 *     (backend, device name, pass, ceil(log2 pairs), Ci, Co, kernel volume, dtype, math);
 *     the device name carries VOXCONV_WGMMA=0, VOXCONV_MASKED_BN, VOXCONV_MASKED_SPLIT,
 *     VOXCONV_MASKED_PIPES, VOXCONV_MASKED_WGRAD, VOXCONV_MASKED_FORM and
 *     VOXCONV_MASKED_PAIR_ROWS when set, so such contexts keep entries apart from normal ones.
 *     A line is "key algo[/variant]": the variant is the algorithm's shape the tuner picked
 *     (masked forward and dgrad: "bn128.split2", tile width and reduction splits, or
 *     "pairs.bn256", the pairs form below; masked backward-weight: "pairs" or "rows", the
 *     form); lines that do not parse, a variant
 *     the key's pass does not have among them, are skipped;
 *  4. the shipped table: the same entries, measured for the suites of bench/ on the GPUs
 *     it names (an H100 SXM), so a first run there does not pay the tuning; the cache
 *     file overrides them;
 *  5. otherwise a fixed heuristic.
 * Execute calls never tune (tuning synchronises); call vc_conv_tune once per layer shape.
 * VC_ALGO_MASKED (offered on sm_90 devices, and AUTO's heuristic there for 16-bit storage
 * and for tf32) runs all three passes on warp-specialised wgmma
 * kernels when the storage is f16 or bf16, the channel counts are multiples of 8, the
 * operands and output (and wgrad's workspace) are 16-byte aligned and row x channel chunk
 * indices fit 32 bits; otherwise it runs VC_ALGO_IMPLICIT's kernels. With f32 storage and
 * VC_MATH_TF32 it runs forward and backward-data on tf32 wgmma under the same conditions
 * (backward-data in row tiles also needs an aligned workspace: it holds the weight
 * transposed, K x Ci x Co x 4 bytes; the pairs form below reads it as stored); the
 * tensor cores truncate the features (and the forward's weight) to tf32, about 7e-4 relative
 * error where cuBLAS's rounding gives about 3e-4. Its tf32 backward-weight (same conditions,
 * aligned workspace) splits every x and dy value into a bf16 pair, hi + lo (dy as the kernel
 * loads it; x into the workspace a slice of its columns at a time, one launch a slice, N_in
 * x slice x 4 bytes, a slice as many whole tiles as keep that within half of dy's bytes, at
 * least one), and adds three bf16 wgmma products, hi x hi + hi x lo + lo x hi: more accurate
 * than tf32 (the dropped term is below 2^-14 of a product). With VC_MATH_F32 and elsewhere,
 * f32 runs VC_ALGO_IMPLICIT's exact FFMA kernel. Where a forward or backward-data call has
 * too few output tiles to fill the device, it splits the reduction and its workspace holds
 * the fp32 partials (vc_conv_workspace_size says how much; a workspace that is not 16-byte
 * aligned runs the call unsplit). Its forward and backward-data also have a pairs form
 * (variant "pairs.bn256"): each offset's pair list multiplied in tiles of 128 pairs, 256
 * columns wide, each tile's products added into the output by L2 reductions (f16 and tf32;
 * bf16 into fp32 values, about a quarter of the columns in the workspace (about rows x
 * columns bytes), the rest in the output's own memory, in two launches, the second
 * converting the first's columns before it adds its own, then a conversion: bf16 rounded at
 * each addition would triple its error; f16 so rounded measured 6e-4, and a partial sum past
 * f16's range is inf even where the whole sum would not be), the bias first. Where few rows
 * share their offsets (suite S RES 16-64) it multiplies far fewer zeros than the row tiles;
 * it needs more than 128 output columns, at most 32 kernel offsets and reductions of more
 * than 64 bytes a row, and the tuner offers it in f16 and tf32 at any size, in bf16 where
 * the output as fp32 fits in half of L2. Its additions come in a varying order, so a
 * VOXCONV_DETERMINISTIC context runs the row tiles instead (also where a cache line names
 * the pairs form), as does a bf16 call without an aligned workspace. Its backward-weight
 * cuts every offset's pairs into chunks and, in the wgmma kernels, adds the chunks' fp32
 * partials with reductions in L2 into an fp32 dW (in the workspace, or dW itself in tf32;
 * the order of those additions varies from run to run); in a VOXCONV_DETERMINISTIC context
 * it stores one partial slice per chunk and adds them in a fixed order instead (fewer
 * chunks, a larger workspace, somewhat slower); with one chunk it stores dW directly,
 * repeatable in any context. Forward and backward-data results are repeatable bit for bit
 * (split partials are added in a fixed order), except in the pairs form; backward-weight's
 * only in a VOXCONV_DETERMINISTIC context (there its implicit fallback also runs with one
 * split; it does so too, and is repeatable, where the layer's tiles fill the GPU alone).
 * Read by vc_context_create: VOXCONV_WGMMA=0 removes VC_ALGO_MASKED (for comparisons);
 * VOXCONV_MASKED_BN=64|96|128|256 fixes its tile width (else chosen per call from the
 * channels and the grid; backward-weight has no 96 and runs 128 for it, and in tf32 runs 128
 * for 256 too), VOXCONV_MASKED_SPLIT=1..16 its reduction splits (forward/backward-data) and
 * chunks per offset (backward-weight; else chosen per call), VOXCONV_MASKED_PIPES=1|2 the
 * pipelines a CTA runs for 64-column tiles of 128-byte stages (forward/backward-data; else
 * chosen per call), and VOXCONV_MASKED_WGRAD=pairs|rows its backward-weight's form (each
 * offset's pair list, or the Gray-ordered output rows; else the tuner's pick, pairs without
 * one), and VOXCONV_MASKED_FORM=rows|pairs its forward and backward-data's form (the row
 * tiles, or the pairs form where it applies, whose tiles VOXCONV_MASKED_BN and _SPLIT do not
 * change; else the tuner's pick, the row tiles without one), and VOXCONV_MASKED_PAIR_ROWS=N
 * (1 to 2^30) the output rows of the pairs form's chunks, rounded up to 256 and widened
 * where a layer would have too many chunks for the kernel's table (its tiles run chunk by
 * chunk, so their additions stay in L2; else one chunk where the rows it adds into fit in
 * half of L2 in fp32, and chunks of a quarter of L2's worth beyond). Any of
 * VOXCONV_MASKED_BN, _SPLIT and _FORM leaves the forward and backward-data with no tile
 * shapes to tune. Another value of any of them fails with VC_ERR_INVALID_ARGUMENT. */

/* The algorithm VC_ALGO_AUTO (or the forced a->algo) runs for this pass now.
 * Errors: VC_ERR_INVALID_ARGUMENT, VC_ERR_UNSUPPORTED (forced algo not in this backend). */
VC_API vc_status vc_conv_algo_for(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo *algo);

/* Times the backend's tuning candidates for `pass` (CUDA: masked on sm_90, each of its tile
 * shapes for forward and backward-data, implicit and explicit; the reference is never one)
 * on random data of the plan's shape, records the fastest (with its shape) in the tune
 * cache (memory and file) and returns its algorithm in *best (may be NULL). Unlike execute calls
 * it allocates temporary buffers and synchronises `stream`.
 * With VOXCONV_DETERMINISTIC=1 only atomic-free candidates run; if that left any out, the
 * winner is kept in this context's memory only, not written to the file that every
 * context shares (a normal context would read back a slower algorithm). A single
 * remaining candidate (the CPU backend has one: explicit) is returned untimed and also
 * kept in memory only.
 * Errors: VC_ERR_INVALID_ARGUMENT, VC_ERR_OUT_OF_MEMORY, VC_ERR_DEVICE, VC_ERR_IO (cache file
 * not writable: the winner is still kept in memory). */
VC_API vc_status vc_conv_tune(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass, void *stream,
                       vc_algo *best);

/* ---- helpers ------------------------------------------------------------------------ */

/* Converts n values between f32 and f16/bf16 storage (round to nearest even; NaN stays
 * NaN). Host memory. Errors: VC_ERR_INVALID_ARGUMENT (NULL with n > 0, bad dtype),
 * recorded in the thread's context-less slot: vc_last_error(NULL). */
VC_API vc_status vc_convert_from_f32(vc_dtype to, const float *src, void *dst, int64_t n);
VC_API vc_status vc_convert_to_f32(vc_dtype from, const void *src, float *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* VOXCONV_H */
