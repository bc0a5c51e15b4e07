/* test_kmap.c — kernel maps and output sites of every kind against the dense oracle:
 * kernel sizes 1-5 (odd and even where allowed, anisotropic too), strides 1-3, dilations
 * 1-2, several batches, negative coordinates. */
#include "dense.h"

#include <stdlib.h>
#include <string.h>

/* Compares plan p with oracle o exactly: output sites in order, then each offset's pairs
 * in ascending output order. Returns false on the first difference. */
static bool same_map(const vc_plan *p, const vc_oracle *o, const char *what) {
  bool ok = true;
  CHECK(vc_plan_out_count(p) == o->n_out, "%s: %lld output sites, oracle %lld", what,
        (long long)vc_plan_out_count(p), (long long)o->n_out);
  if (vc_plan_out_count(p) != o->n_out) return false;
  int32_t *oc = malloc((size_t)(o->n_out + 1) * 4 * sizeof *oc);
  vc_plan_out_coords(p, oc, NULL);
  for (int64_t i = 0; i < o->n_out && ok; i++)
    if (memcmp(oc + 4 * i, o->out_coords + 4 * i, 4 * sizeof *oc)) {
      CHECK(false, "%s: output row %lld is (%d,%d,%d,%d), oracle (%d,%d,%d,%d)", what, (long long)i, oc[4 * i],
            oc[4 * i + 1], oc[4 * i + 2], oc[4 * i + 3], o->out_coords[4 * i], o->out_coords[4 * i + 1],
            o->out_coords[4 * i + 2], o->out_coords[4 * i + 3]);
      ok = false;
    }
  free(oc);
  int K = vc_plan_kernel_volume(p);
  CHECK(K == o->K, "%s: kernel volume %d, oracle %d", what, K, o->K);
  int64_t np = vc_plan_pair_count(p), *off = malloc((size_t)(K + 1) * sizeof *off);
  int32_t *pin = malloc((size_t)(np + 1) * sizeof *pin), *pout = malloc((size_t)(np + 1) * sizeof *pout);
  vc_plan_kernel_map(p, off, pin, pout, NULL);
  int64_t expect_total = 0;
  for (int r = 0; r < K && ok; r++) {
    int64_t j = off[r];
    for (int64_t i = 0; i < o->n_out && ok; i++) {
      int32_t q = o->nbr[i * K + r];
      if (q < 0) continue;
      expect_total++;
      if (j >= off[r + 1] || pin[j] != q || pout[j] != i) {
        CHECK(false, "%s: offset %d, output %lld: expected input %d at pair %lld, plan has (%d -> %d)", what, r,
              (long long)i, q, (long long)j, j < np ? pin[j] : -1, j < np ? pout[j] : -1);
        ok = false;
      }
      j++;
    }
    if (ok && j != off[r + 1]) {
      CHECK(false, "%s: offset %d has %lld pairs, oracle %lld", what, r, (long long)(off[r + 1] - off[r]),
            (long long)(j - off[r]));
      ok = false;
    }
  }
  if (ok) CHECK(np == expect_total, "%s: %lld pairs, oracle %lld", what, (long long)np, (long long)expect_total);
  free(off), free(pin), free(pout);
  return ok;
}

/* One plan (and, for kind sparse, its inverse) against the oracle. */
static void check_case(vc_conv_kind kind, int k, int s, int dil, bool aniso, int64_t n, int32_t nb) {
  vc_context *ctx;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &ctx));
  int32_t *coords = vc_rand_coords(n, nb, -6, 5);
  vc_conv_desc d;
  vc_rand_desc(&d, kind == VC_CONV_INVERSE ? VC_CONV_SPARSE : kind, k, s, dil, aniso, 6);
  char what[160];
  vc_desc_describe(what, sizeof what, &d, n);
  vc_plan *p = NULL;
  CHECK_OK(ctx, vc_plan_create(ctx, &d, coords, n, NULL, NULL, &p));
  if (p) {
    vc_oracle *o = vc_oracle_build(&d, coords, n, NULL, 0);
    bool ok = same_map(p, o, what);
    if (ok && kind == VC_CONV_INVERSE) {
      vc_conv_desc di = d;
      di.kind = VC_CONV_INVERSE;
      vc_desc_describe(what, sizeof what, &di, n);
      vc_plan *ip = NULL;
      CHECK_OK(ctx, vc_plan_create(ctx, &di, NULL, 0, p, NULL, &ip));
      if (ip) {
        vc_oracle *io = vc_oracle_build(&di, o->out_coords, o->n_out, coords, n);
        same_map(ip, io, what);
        CHECK(vc_plan_in_count(ip) == o->n_out, "%s: inverse has %lld inputs", what, (long long)vc_plan_in_count(ip));
        vc_oracle_free(io);
      }
      vc_plan_destroy(ip);
    }
    vc_oracle_free(o);
  }
  vc_plan_destroy(p);
  free(coords);
  vc_context_destroy(ctx);
}

static void test_kmap_submanifold(void) {
  for (int k = 1; k <= 5; k += 2)
    for (int dil = 1; dil <= 2; dil++) {
      check_case(VC_CONV_SUBMANIFOLD, k, 1, dil, false, 300, 2);
      check_case(VC_CONV_SUBMANIFOLD, k, 1, dil, true, 200, 3);
    }
}

static void test_kmap_sparse(void) {
  for (int k = 1; k <= 5; k++)
    for (int s = 1; s <= 3; s++)
      for (int dil = 1; dil <= 2; dil++) check_case(VC_CONV_SPARSE, k, s, dil, k > 2, 150, 2);
}

static void test_kmap_inverse(void) {
  for (int k = 1; k <= 4; k++)
    for (int s = 1; s <= 3; s++) check_case(VC_CONV_INVERSE, k, s, vc_rand_int(1, 2), k > 2, 150, 3);
}

static void test_kmap_transposed(void) {
  for (int k = 1; k <= 5; k++)
    for (int s = 1; s <= 3; s++)
      for (int dil = 1; dil <= 2; dil++) check_case(VC_CONV_TRANSPOSED, k, s, dil, k > 2, 60, 2);
}

/* Dense blocks exercise full neighbourhoods; and the extreme corners of the range. */
static void test_kmap_dense_block_and_range_edges(void) {
  vc_context *ctx;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &ctx));
  int32_t c[4 * 64];
  int64_t n = 0;
  for (int x = 0; x < 4; x++)
    for (int y = 0; y < 4; y++)
      for (int z = 0; z < 4; z++, n++) {
        c[4 * n] = VC_BATCH_MAX - 1;
        c[4 * n + 1] = VC_COORD_MAX - x, c[4 * n + 2] = VC_COORD_MIN + y, c[4 * n + 3] = z - 2;
      }
  vc_conv_desc d;
  vc_conv_desc_init(&d, VC_CONV_SUBMANIFOLD, 3, 1, -1, 1);
  vc_plan *p = NULL;
  CHECK_OK(ctx, vc_plan_create(ctx, &d, c, n, NULL, NULL, &p));
  /* a 4x4x4 block has sum over axes of (3 + 2*... ) pairs: count directly */
  int64_t expect = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      int ok = 1;
      for (int a = 1; a < 4; a++) ok &= abs(c[4 * i + a] - c[4 * j + a]) <= 1;
      expect += ok;
    }
  CHECK(vc_plan_pair_count(p) == expect, "block pairs %lld, expected %lld", (long long)vc_plan_pair_count(p),
        (long long)expect);
  vc_plan_destroy(p);
  /* a strided conv at the low corner produces in-range outputs */
  vc_conv_desc_init(&d, VC_CONV_SPARSE, 2, 2, 0, 1);
  CHECK_OK(ctx, vc_plan_create(ctx, &d, c, n, NULL, NULL, &p));
  CHECK(vc_plan_out_count(p) == 8, "4^3 block, k2 s2 gives %lld sites", (long long)vc_plan_out_count(p));
  vc_plan_destroy(p);
  vc_context_destroy(ctx);
}

/* vc_plan_memory_bytes on the CPU: the sites' 8-byte keys (an inverse or strided plan keeps
 * two sets), both pair lists and the K+1 offsets; the build's neighbour table is not kept. */
static void test_kmap_memory_bytes(void) {
  vc_context *ctx;
  CHECK_OK(NULL, vc_context_create(VC_DEVICE_CPU, 0, &ctx));
  const int64_t n = 300;
  int32_t *coords = vc_rand_coords(n, 2, -6, 5);
  const vc_conv_kind kinds[2] = {VC_CONV_SUBMANIFOLD, VC_CONV_SPARSE};
  for (int k = 0; k < 2; k++) {
    vc_conv_desc d;
    vc_conv_desc_init(&d, kinds[k], 3, kinds[k] == VC_CONV_SPARSE ? 2 : 1, -1, 1);
    vc_plan *p = NULL;
    CHECK_OK(ctx, vc_plan_create(ctx, &d, coords, n, NULL, NULL, &p));
    const int64_t sites = n + (kinds[k] == VC_CONV_SPARSE ? vc_plan_out_count(p) : 0);
    const size_t want = (size_t)sites * 8 + (size_t)vc_plan_pair_count(p) * 8 + 28 * 8;
    CHECK(vc_plan_memory_bytes(p) == want, "kind %d: %zu bytes, expected %zu", (int)kinds[k],
          vc_plan_memory_bytes(p), want);
    vc_plan_destroy(p);
  }
  CHECK(vc_plan_memory_bytes(NULL) == 0, "NULL plan: %zu bytes", vc_plan_memory_bytes(NULL));
  free(coords);
  vc_context_destroy(ctx);
}

const vc_test_case vc_tests_kmap[] = {
    {"kmap_submanifold", test_kmap_submanifold},
    {"kmap_sparse", test_kmap_sparse},
    {"kmap_inverse", test_kmap_inverse},
    {"kmap_transposed", test_kmap_transposed},
    {"kmap_dense_block_and_range_edges", test_kmap_dense_block_and_range_edges},
    {"kmap_memory_bytes", test_kmap_memory_bytes},
    {NULL, NULL},
};
