/* internal.h — what the core and the backends share. Not installed. */
#ifndef VC_INTERNAL_H
#define VC_INTERNAL_H

#include "voxconv.h"

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VC_ERROR_LEN 512

/* The key helpers below are shared with device code. */
#ifdef __CUDACC__
#define VC_HD __host__ __device__
#else
#define VC_HD
#endif

/* Packed 64-bit site key: batch in bits 51..62, x/y/z biased by -VC_COORD_MIN in 17 bits
 * each. Ascending keys are ascending (batch, x, y, z); bit 63 is never set, so all-ones
 * marks an empty hash slot. */
#define VC_KEY_EMPTY UINT64_MAX
#define VC_AXIS_BITS 17
#define VC_AXIS_BIAS 65536

VC_HD static inline uint64_t vc_key_pack(int32_t b, int32_t x, int32_t y, int32_t z) {
  return ((uint64_t)(uint32_t)b << (3 * VC_AXIS_BITS)) |
         ((uint64_t)(uint32_t)(x + VC_AXIS_BIAS) << (2 * VC_AXIS_BITS)) |
         ((uint64_t)(uint32_t)(y + VC_AXIS_BIAS) << VC_AXIS_BITS) |
         (uint64_t)(uint32_t)(z + VC_AXIS_BIAS);
}

VC_HD static inline void vc_key_unpack(uint64_t k, int32_t out[4]) {
  const uint64_t m = (1u << VC_AXIS_BITS) - 1;
  out[0] = (int32_t)(k >> (3 * VC_AXIS_BITS));
  out[1] = (int32_t)((k >> (2 * VC_AXIS_BITS)) & m) - VC_AXIS_BIAS;
  out[2] = (int32_t)((k >> VC_AXIS_BITS) & m) - VC_AXIS_BIAS;
  out[3] = (int32_t)(k & m) - VC_AXIS_BIAS;
}

VC_HD static inline bool vc_site_in_range(int64_t b, int64_t x, int64_t y, int64_t z) {
  return b >= 0 && b < VC_BATCH_MAX && x >= VC_COORD_MIN && x <= VC_COORD_MAX &&
         y >= VC_COORD_MIN && y <= VC_COORD_MAX && z >= VC_COORD_MIN && z <= VC_COORD_MAX;
}

/* The hash finaliser both backends' coordinate tables use (splitmix64): neighbouring sites
 * differ in low key bits, so mix them well. */
VC_HD static inline uint64_t vc_hash_mix(uint64_t k) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

/* Conv geometry for the kernel-map builders of both backends. */
typedef struct vc_geom {
  int32_t k[3], s[3], pad[3], d[3];
  int32_t bound[3]; /* output_bound of the descriptor */
  int32_t K;        /* kernel volume */
} vc_geom;

static inline vc_geom vc_geom_of(const vc_conv_desc *d) {
  vc_geom g;
  for (int a = 0; a < 3; a++)
    g.k[a] = d->kernel_size[a], g.s[a] = d->stride[a], g.pad[a] = d->padding[a], g.d[a] = d->dilation[a],
    g.bound[a] = d->output_bound[a];
  g.K = g.k[0] * g.k[1] * g.k[2];
  return g;
}

/* Whether output site t lies inside the descriptor's output_bound (always, when 0). */
VC_HD static inline bool vc_geom_in_bound(const vc_geom *g, const int64_t t[3]) {
  for (int a = 0; a < 3; a++)
    if (g->bound[a] > 0 && (t[a] < 0 || t[a] >= g->bound[a])) return false;
  return true;
}

/* r*d per axis for the flat offset r = (r0*K1 + r1)*K2 + r2. */
VC_HD static inline void vc_geom_offset(const vc_geom *g, int r, int32_t off[3]) {
  off[2] = (r % g->k[2]) * g->d[2];
  off[1] = ((r / g->k[2]) % g->k[1]) * g->d[1];
  off[0] = (r / (g->k[2] * g->k[1])) * g->d[0];
}

/* The site t that c pairs with through the offset whose displacement is off (= r*d,
 * vc_geom_offset): with `scale`, t = c*s - pad + r*d (the output a transposed conv's input
 * writes, the input a strided or submanifold conv's output reads); otherwise t with
 * t*s = c + pad - r*d, false unless divisible on every axis (the output a strided conv's
 * input reaches, the input a transposed conv's output reads). Loops over many sites pass a
 * displacement table made once, instead of three divisions a lookup. */
VC_HD static inline bool vc_geom_pair_at(const vc_geom *g, bool scale, const int32_t *c, const int32_t off[3],
                                         int64_t t[3]) {
  for (int a = 0; a < 3; a++) {
    if (scale) {
      t[a] = (int64_t)c[a + 1] * g->s[a] - g->pad[a] + off[a];
      continue;
    }
    const int64_t v = (int64_t)c[a + 1] + g->pad[a] - off[a];
    if (v % g->s[a] != 0) return false;
    t[a] = v / g->s[a];
  }
  return true;
}

/* The same through offset r. */
VC_HD static inline bool vc_geom_pair(const vc_geom *g, bool scale, const int32_t *c, int r, int64_t t[3]) {
  int32_t off[3];
  vc_geom_offset(g, r, off);
  return vc_geom_pair_at(g, scale, c, off, t);
}

typedef struct vc_backend vc_backend;

/* A resolved algorithm: one the backend runs (never VC_ALGO_AUTO) and the backend's variant
 * of it, e.g. a tile shape of the CUDA masked kernels; variant 0 lets the backend choose per
 * call. */
typedef struct vc_choice {
  vc_algo algo;
  int variant;
} vc_choice;

typedef struct vc_tune_entry {
  char key[320];
  uint64_t hash;       /* of key: execute calls compare these, not ~190-byte strings */
  vc_choice pick;      /* what VC_ALGO_AUTO runs in this context */
  vc_choice file_pick; /* what the cache file gets (algo VC_ALGO_AUTO: nothing); differs for
                        * the shipped table's entries and after a choice a normal context
                        * must not read back (vc_conv_tune) */
} vc_tune_entry;

struct vc_context {
  vc_device_kind kind;
  int device;
  const vc_backend *backend;
  void *backend_state;
  char error[VC_ERROR_LEN];
  /* the algorithm environment (tune.c), read when the context is created: VOXCONV_ALGO_<PASS>
   * parsed (VC_ALGO_AUTO when unset or empty); a value naming no algorithm is kept in
   * forced_invalid (else "") and reported by the calls that resolve the algorithm */
  vc_algo forced_algo[3];
  char forced_invalid[3][64];
  bool deterministic; /* VOXCONV_DETERMINISTIC */
  /* tune cache (tune.c): the file's path ("" without VOXCONV_CACHE_DIR and HOME) and the
   * entries, loaded when the context is created */
  char cache_file[1024];
  vc_tune_entry *tune;
  int tune_count, tune_cap;
};

struct vc_plan {
  vc_context *ctx;
  vc_conv_desc desc;
  int32_t kvol;             /* kernel volume K */
  int64_t n_in, n_out;
  int64_t n_pairs;
  int64_t max_pairs;        /* largest pair count of one offset */
  /* Host-side copies, always present: offsets[K+1]. */
  int64_t *offsets;
  /* Backend memory (host for CPU): the sites as packed keys (vc_key_pack, 8 bytes a site
   * where coordinates would take 16; vc_plan_out_coords unpacks them), pairs grouped by
   * offset. */
  uint64_t *in_keys;
  uint64_t *out_keys;       /* == in_keys for submanifold; ascending for sparse and transposed */
  /* The pairs of offsets 0 .. lists-1, entries 0 .. offsets[lists]-1, ascending by output
   * row within an offset. lists is K, or K/2 in the CUDA backend's submanifold plans, whose
   * other pairs follow from these (vc_plan_list): the centre's are (o, o) for every row o,
   * in order (no list: the identity), and offset r past it, the opposite displacement of
   * offset K-1-r, has that offset's pairs with the two rows swapped (in that list's order:
   * ascending by input row). At suite S RES 1024 that keeps 5.9 of the 12.8 pairs a site. */
  int32_t *pair_in;
  int32_t *pair_out;
  int32_t lists;
  void *backend_data;
  size_t mem_bytes;         /* backend memory the plan owns (vc_plan_memory_bytes), set by the
                               backend's plan_build */
};

/* Offset r's pairs as stored: pair j (offsets[r] <= j < offsets[r+1]) has output row
 * out[j - shift] and input row in[j - shift]; out and in NULL (a mirrored plan's centre):
 * both rows are j - shift itself. */
typedef struct vc_pair_list {
  const int32_t *out, *in;
  int64_t shift;
} vc_pair_list;
static inline vc_pair_list vc_plan_list(const vc_plan *p, int r) {
  vc_pair_list l = {p->pair_out, p->pair_in, 0};
  if (r == p->lists) l.out = l.in = NULL, l.shift = p->offsets[r];
  else if (r > p->lists)
    l.out = p->pair_in, l.in = p->pair_out, l.shift = p->offsets[r] - p->offsets[p->kvol - 1 - r];
  return l;
}

/* One device's implementation. Arguments reaching it are already validated. */
struct vc_backend {
  const char *name;
  vc_status (*context_init)(vc_context *ctx);
  void (*context_release)(vc_context *ctx);
  /* Fills every plan field from coords (n = p->n_in) or from `paired` (inverse). */
  vc_status (*plan_build)(vc_context *ctx, vc_plan *p, const int32_t *coords,
                          const vc_plan *paired, void *stream);
  void (*plan_release)(vc_plan *p);
  /* The output sites (vc_plan_out_coords: int32 [n_out, 4], n_out > 0) into caller memory
   * of the same device, unpacked from out_keys. */
  vc_status (*out_coords)(const vc_plan *p, int32_t *dst, void *stream);
  /* The whole kernel map (vc_plan_kernel_map's in_index and out_index, either NULL to skip
   * it) into caller memory of the same device, from the lists the plan keeps. */
  vc_status (*kernel_map)(const vc_plan *p, int32_t *in_index, int32_t *out_index, void *stream);
  /* The execute functions and the workspace size receive a resolved a->algo, and those with
   * tunable variants (see vc_choice) the variant. */
  vc_status (*workspace_size)(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int variant,
                              size_t *bytes);
  vc_status (*forward)(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant,
                       const void *x, const void *w, const void *bias, void *y,
                       void *ws, size_t ws_bytes, void *stream);
  vc_status (*backward_data)(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant,
                             const void *dy, const void *w, void *dx, void *ws,
                             size_t ws_bytes, void *stream);
  vc_status (*backward_weight)(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, int variant,
                               const void *x, const void *dy, void *dw, void *db, void *ws,
                               size_t ws_bytes, void *stream);
  /* Algorithm choice (tune.c). Every function below receives a resolved a->algo where it
   * matters; `algos` lists what the backend can run for a pass, the tuner's candidates
   * first (at most 8), `n_tunable` of them. */
  int (*algos)(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo out[8], int *n_tunable);
  vc_algo (*heuristic)(const vc_plan *p, const vc_conv_args *a, vc_pass pass);
  bool (*deterministic)(vc_algo algo, vc_pass pass);
  /* The tuner's variants of a->algo for this pass (at most VC_VARIANTS_MAX, none 0); 0 when
   * the algorithm has none to choose among here (it then runs as variant 0). *restricted is
   * set where the context's deterministic switch left a variant out (CUDA: masked's pairs
   * form), so that race stays out of the shared cache file. NULL: none anywhere. */
  int (*variants)(const vc_plan *p, const vc_conv_args *a, vc_pass pass, int out[], bool *restricted);
  /* A variant's name in the cache file ("bn128.split2": letters, digits and dots), and back
   * (-1 for a name that is no variant of this pass). NULL when `variants` is. */
  void (*variant_name)(int variant, char buf[32]);
  int (*variant_parse)(vc_pass pass, const char *name);
  /* Milliseconds of one pass for each of the n candidate choices (ms[i] for cand[i]), on
   * one set of random data: the median of 5 runs after a warm-up (allocates, synchronises).
   * NULL when `algos` never lists two tunable candidates: vc_conv_tune times nothing then. */
  vc_status (*time_choices)(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass,
                            const vc_choice *cand, int n, void *stream, double *ms);
  const char *(*device_name)(vc_context *ctx); /* for the tune key: the device, and anything
                                                  that changes the candidates or their timing */
};

extern const vc_backend vc_cpu_backend;
#ifdef VC_HAVE_CUDA
extern const vc_backend vc_cuda_backend;
#endif

/* Records a formatted sentence on ctx (or the thread's context-less slot when ctx is
 * NULL) and returns `s`, so callers write `return vc_fail(ctx, VC_ERR_..., "...", ...)`. */
vc_status vc_fail(vc_context *ctx, vc_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* tune.c: resolves VC_ALGO_AUTO (environment, determinism, tune cache, shipped table,
 * heuristic) and checks a forced algorithm against the backend; out->algo is never
 * VC_ALGO_AUTO (a forced or heuristic algorithm has variant 0). */
#define VC_VARIANTS_MAX 20
vc_status vc_resolve_algo(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass,
                          vc_choice *out);
/* tune_table.c: the shipped tune table, "key choice" lines as in the cache file, NULL-ended. */
extern const char *const vc_tune_shipped[];
void vc_tune_load(vc_context *ctx);
void vc_tune_release(vc_context *ctx);
/* conv.c: the argument checks the public functions share, each naming `fn` in its message. */
vc_status vc_check_pass(vc_context *ctx, const char *fn, vc_pass pass);
vc_status vc_check_ctx_plan(vc_context *ctx, const char *fn, const vc_plan *p);
/* conv.c: copies caller args (possibly an older, shorter struct) and checks every field. */
vc_status vc_args_check(vc_context *ctx, const char *fn, const vc_conv_args *in, vc_conv_args *a);

/* Checks n host coordinate rows against the supported range; names the first bad row. */
vc_status vc_check_coords(vc_context *ctx, const int32_t *coords, int64_t n);

/* plan.c: the kernel-map builders' bad-input sentences, the same for every backend. */
vc_status vc_fail_duplicate(vc_context *ctx, int64_t row_a, int64_t row_b, const int32_t site[4]);
vc_status vc_fail_output_range(vc_context *ctx, const int32_t in_site[4], const int64_t t[3], int64_t row, int r);
/* An inverse plan's coords (host copies) must equal its paired plan's output sites (host
 * copies of its out_keys). */
vc_status vc_check_paired_coords(vc_context *ctx, const int32_t *given, const uint64_t *paired, int64_t n);

/* f16/bf16 <-> f32 scalar conversions, round to nearest even. */
float vc_half_to_float(uint16_t h);
uint16_t vc_float_to_half(float f);
float vc_bf16_to_float(uint16_t h);
uint16_t vc_float_to_bf16(float f);

VC_HD static inline int64_t vc_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

#ifdef __cplusplus
}
#endif
#endif
