/* kmap.c — kernel maps on the CPU for the four conv kinds.
 *
 * Every kind first fills a dense neighbour table nb[n_out, K] (input row or -1), which is
 * embarrassingly parallel, then compacts it into pairs grouped by offset and ascending by
 * output row: the order the GPU backend reproduces. */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

static vc_status hash_coords(vc_context *ctx, vc_hash *h, const int32_t *c, int64_t n) {
  vc_status s = vc_hash_init(ctx, h, n);
  if (s != VC_OK) return s;
  for (int64_t i = 0; i < n; i++) {
    const int32_t *r = c + 4 * i;
    int32_t prev = vc_hash_insert(h, vc_key_pack(r[0], r[1], r[2], r[3]), (int32_t)i);
    if (prev >= 0) {
      vc_hash_free(h);
      return vc_fail_duplicate(ctx, prev, i, r);
    }
  }
  return VC_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The displacement r*d of every offset, so that lookups do no divisions. */
typedef int32_t vc_displacements[VC_KERNEL_MAX * VC_KERNEL_MAX * VC_KERNEL_MAX][3];
static void displacements(const vc_geom *g, vc_displacements off) {
  for (int r = 0; r < g->K; r++) vc_geom_offset(g, r, off[r]);
}

/* Output sites of a sparse (transposed == false) or transposed conv: the key of every site
 * reached, ascending. */
static vc_status output_sites(vc_context *ctx, const vc_geom *g, const int32_t *in, int64_t n,
                              bool transposed, uint64_t **out, int64_t *n_out) {
  vc_hash seen;
  int64_t cap = 2 * n + 16, cnt = 0; /* grows when a conv reaches more sites */
  vc_status s = vc_hash_init(ctx, &seen, cap);
  if (s != VC_OK) return s;
  uint64_t *keys = malloc((size_t)cap * sizeof *keys);
  if (!keys) {
    vc_hash_free(&seen);
    return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "output sites: out of host memory");
  }
  vc_displacements off;
  displacements(g, off);
  for (int64_t i = 0; i < n; i++) {
    const int32_t *c = in + 4 * i;
    for (int r = 0; r < g->K; r++) {
      int64_t t[3];
      if (!vc_geom_pair_at(g, transposed, c, off[r], t) || !vc_geom_in_bound(g, t)) continue;
      if (!vc_site_in_range(c[0], t[0], t[1], t[2])) {
        free(keys);
        vc_hash_free(&seen);
        return vc_fail_output_range(ctx, c, t, i, r);
      }
      uint64_t k = vc_key_pack(c[0], (int32_t)t[0], (int32_t)t[1], (int32_t)t[2]);
      if (cnt == cap) { /* sparse convs reach at most K sites per input; grow rarely */
        uint64_t *grown = realloc(keys, (size_t)cap * 2 * sizeof *keys);
        vc_hash bigger;
        if (!grown || vc_hash_init(ctx, &bigger, cap * 2) != VC_OK) {
          free(grown ? grown : keys);
          vc_hash_free(&seen);
          return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "output sites: out of host memory");
        }
        keys = grown;
        cap *= 2;
        for (int64_t j = 0; j < cnt; j++) vc_hash_insert(&bigger, keys[j], 0);
        vc_hash_free(&seen);
        seen = bigger;
      }
      if (vc_hash_insert(&seen, k, 0) < 0) keys[cnt++] = k;
    }
  }
  vc_hash_free(&seen);
  if (cnt > INT32_MAX - 1) {
    free(keys);
    return vc_fail(ctx, VC_ERR_OUT_OF_RANGE, "output sites: %lld exceed the limit of %d", (long long)cnt,
                   INT32_MAX - 1);
  }
  qsort(keys, (size_t)cnt, sizeof *keys, cmp_u64);
  uint64_t *fit = realloc(keys, (size_t)(cnt ? cnt : 1) * sizeof *keys); /* the plan keeps them */
  *out = fit ? fit : keys;
  *n_out = cnt;
  return VC_OK;
}

/* nb[o, r] = input row of output o through offset r, from hashed input sites. */
static void fill_neighbors(const vc_geom *g, vc_conv_kind kind, const vc_hash *h, const uint64_t *out_keys,
                           int64_t n_out, int32_t *nb) {
  const int K = g->K;
  vc_displacements off;
  displacements(g, off);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < n_out; o++) {
    int32_t c[4];
    vc_key_unpack(out_keys[o], c);
    for (int r = 0; r < K; r++) {
      int64_t q[3];
      const bool ok =
          vc_geom_pair_at(g, kind != VC_CONV_TRANSPOSED, c, off[r], q) && vc_site_in_range(c[0], q[0], q[1], q[2]);
      nb[o * K + r] = ok ? vc_hash_find(h, vc_key_pack(c[0], (int32_t)q[0], (int32_t)q[1], (int32_t)q[2])) : -1;
    }
  }
}

/* Compacts nb[n_out, K] into p->offsets / pair_in / pair_out. */
static vc_status compact_pairs(vc_context *ctx, vc_plan *p, const int32_t *nb) {
  const int K = p->kvol;
  const int64_t n_out = p->n_out;
  p->offsets = calloc((size_t)K + 1, sizeof *p->offsets);
  if (!p->offsets) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "kernel map: out of host memory");
#pragma omp parallel for schedule(dynamic, 1)
  for (int r = 0; r < K; r++) {
    int64_t c = 0;
    for (int64_t o = 0; o < n_out; o++) c += nb[o * K + r] >= 0;
    p->offsets[r + 1] = c;
  }
  p->max_pairs = 0;
  for (int r = 0; r < K; r++) {
    if (p->offsets[r + 1] > p->max_pairs) p->max_pairs = p->offsets[r + 1];
    p->offsets[r + 1] += p->offsets[r];
  }
  p->n_pairs = p->offsets[K];
  size_t bytes = (size_t)(p->n_pairs ? p->n_pairs : 1) * sizeof(int32_t);
  p->pair_in = malloc(bytes);
  p->pair_out = malloc(bytes);
  if (!p->pair_in || !p->pair_out)
    return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "kernel map of %lld pairs: out of host memory",
                   (long long)p->n_pairs);
#pragma omp parallel for schedule(dynamic, 1)
  for (int r = 0; r < K; r++) {
    int64_t j = p->offsets[r];
    for (int64_t o = 0; o < n_out; o++) {
      int32_t i = nb[o * K + r];
      if (i < 0) continue;
      p->pair_in[j] = i;
      p->pair_out[j] = (int32_t)o;
      j++;
    }
  }
  return VC_OK;
}

static uint64_t *pack_keys(const int32_t *c, int64_t n) {
  uint64_t *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  if (d)
    for (int64_t i = 0; i < n; i++) d[i] = vc_key_pack(c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]);
  return d;
}

static uint64_t *copy_keys(const uint64_t *k, int64_t n) {
  uint64_t *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  if (d && n) memcpy(d, k, (size_t)n * sizeof *d);
  return d;
}

/* Inverse: the paired sparse plan's pairs with input and output swapped. */
static vc_status build_inverse(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_plan *q, int32_t *nb) {
  const int K = p->kvol;
  if (coords) {
    vc_status s = vc_check_paired_coords(ctx, coords, q->out_keys, q->n_out);
    if (s != VC_OK) return s;
  }
  for (int64_t j = 0; j < p->n_out * K; j++) nb[j] = -1;
  for (int r = 0; r < K; r++)
    for (int64_t j = q->offsets[r]; j < q->offsets[r + 1]; j++) nb[(int64_t)q->pair_in[j] * K + r] = q->pair_out[j];
  return VC_OK;
}

vc_status vc_cpu_plan_build(vc_context *ctx, vc_plan *p, const int32_t *coords, const vc_plan *paired,
                            void *stream) {
  (void)stream;
  const vc_conv_kind kind = p->desc.kind;
  const vc_geom g = vc_geom_of(&p->desc);
  vc_hash h = {0};
  vc_status s;

  if (kind == VC_CONV_INVERSE) {
    p->n_in = paired->n_out;
    p->n_out = paired->n_in;
    p->in_keys = copy_keys(paired->out_keys, p->n_in);
    p->out_keys = copy_keys(paired->in_keys, p->n_out);
    if (!p->in_keys || !p->out_keys) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
  } else {
    s = vc_check_coords(ctx, coords, p->n_in);
    if (s != VC_OK) return s;
    p->in_keys = pack_keys(coords, p->n_in);
    if (!p->in_keys) return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_plan_create: out of host memory");
    s = hash_coords(ctx, &h, coords, p->n_in);
    if (s != VC_OK) return s;
    if (kind == VC_CONV_SUBMANIFOLD) {
      p->n_out = p->n_in;
      p->out_keys = p->in_keys;
    } else {
      s = output_sites(ctx, &g, coords, p->n_in, kind == VC_CONV_TRANSPOSED, &p->out_keys, &p->n_out);
      if (s != VC_OK) {
        vc_hash_free(&h);
        return s;
      }
    }
  }

  int32_t *nb = malloc((size_t)(p->n_out ? p->n_out : 1) * (size_t)p->kvol * sizeof *nb);
  if (!nb) {
    vc_hash_free(&h);
    return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "kernel map: neighbour table of %lld x %d: out of host memory",
                   (long long)p->n_out, p->kvol);
  }
  if (kind == VC_CONV_INVERSE) {
    s = build_inverse(ctx, p, coords, paired, nb);
  } else {
    fill_neighbors(&g, kind, &h, p->out_keys, p->n_out, nb);
    s = VC_OK;
  }
  vc_hash_free(&h);
  if (s == VC_OK) s = compact_pairs(ctx, p, nb);
  free(nb);
  if (s != VC_OK) return s;
  /* vc_plan_memory_bytes: what vc_cpu_plan_release and vc_plan_destroy free (nb was scratch),
   * counted from the sizes pack_keys, copy_keys, output_sites and compact_pairs allocated */
  const int64_t key_rows = p->n_in + (p->out_keys != p->in_keys ? p->n_out : 0);
  p->mem_bytes = (size_t)key_rows * sizeof(uint64_t) + (size_t)p->n_pairs * 2 * sizeof(int32_t) +
                 (size_t)(p->kvol + 1) * sizeof(int64_t);
  return VC_OK;
}

void vc_cpu_plan_release(vc_plan *p) {
  if (p->out_keys != p->in_keys) free(p->out_keys);
  free(p->in_keys);
  free(p->pair_in);
  free(p->pair_out);
}
