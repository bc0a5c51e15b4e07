/* hash.c — the coordinate hash table: packed 64-bit keys to int32 row indices. */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

vc_status vc_hash_init(vc_context *ctx, vc_hash *h, int64_t n) {
  uint64_t cap = 16;
  while (cap < (uint64_t)n * 2) cap <<= 1;
  h->mask = cap - 1;
  h->keys = malloc(cap * sizeof *h->keys);
  h->vals = malloc(cap * sizeof *h->vals);
  if (!h->keys || !h->vals) {
    vc_hash_free(h);
    return vc_fail(ctx, VC_ERR_OUT_OF_MEMORY, "hash table for %lld sites: out of host memory", (long long)n);
  }
  memset(h->keys, 0xff, cap * sizeof *h->keys);
  return VC_OK;
}

void vc_hash_free(vc_hash *h) {
  free(h->keys);
  free(h->vals);
  h->keys = NULL;
  h->vals = NULL;
}

int32_t vc_hash_insert(vc_hash *h, uint64_t key, int32_t val) {
  for (uint64_t s = vc_hash_mix(key) & h->mask;; s = (s + 1) & h->mask) {
    if (h->keys[s] == VC_KEY_EMPTY) {
      h->keys[s] = key;
      h->vals[s] = val;
      return -1;
    }
    if (h->keys[s] == key) return h->vals[s];
  }
}

int32_t vc_hash_find(const vc_hash *h, uint64_t key) {
  for (uint64_t s = vc_hash_mix(key) & h->mask;; s = (s + 1) & h->mask) {
    if (h->keys[s] == key) return h->vals[s];
    if (h->keys[s] == VC_KEY_EMPTY) return -1;
  }
}
