/* tune.c — which algorithm (and variant of it) VC_ALGO_AUTO runs: the environment, the
 * deterministic switch, the tune cache (memory + a text file written atomically), the
 * shipped table (tune_table.c), else the backend's heuristic. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *algo_names[] = {"auto", "reference", "explicit", "implicit", "masked", "grouped"};
static const char *pass_names[] = {"forward", "backward_data", "backward_weight"};
static const char *pass_env[] = {"VOXCONV_ALGO_FORWARD", "VOXCONV_ALGO_BACKWARD_DATA",
                                 "VOXCONV_ALGO_BACKWARD_WEIGHT"};

static bool parse_algo(const char *s, vc_algo *out) {
  for (int i = 1; i <= VC_ALGO_GROUPED; i++)
    if (!strcmp(s, algo_names[i])) {
      *out = (vc_algo)i;
      return true;
    }
  return false;
}

/* The enum's name ("VC_ALGO_EXPLICIT"), as messages spell it: algo_names upper-cased. */
static const char *enum_name(vc_algo algo, char buf[32]) {
  snprintf(buf, 32, "VC_ALGO_%s", algo_names[algo]);
  for (char *c = buf; *c; c++) *c = (char)toupper((unsigned char)*c);
  return buf;
}

static bool backend_has(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_algo algo) {
  vc_algo list[8];
  int n_tunable, n = p->ctx->backend->algos(p, a, pass, list, &n_tunable);
  for (int i = 0; i < n; i++)
    if (list[i] == algo) return true;
  return false;
}

/* "algo" or "algo/variant" (the file's spelling of a choice) */
static void choice_name(const vc_backend *be, vc_choice c, char buf[64]) {
  char v[32] = "";
  if (c.variant && be->variant_name) be->variant_name(c.variant, v);
  snprintf(buf, 64, "%s%s%s", algo_names[c.algo], v[0] ? "/" : "", v);
}

/* The choice s of a line whose key is `key`: a variant must be one of the key's pass. */
static bool parse_choice(const vc_backend *be, const char *key, char *s, vc_choice *out) {
  char *slash = strchr(s, '/');
  if (slash) *slash = 0;
  out->variant = 0;
  if (!parse_algo(s, &out->algo)) return false;
  if (!slash) return true;
  int pass = -1;
  char field[32];
  for (int i = 0; i < 3 && pass < 0; i++) {
    snprintf(field, sizeof field, "|%s|", pass_names[i]);
    if (strstr(key, field)) pass = i;
  }
  out->variant = be->variant_parse && pass >= 0 ? be->variant_parse((vc_pass)pass, slash + 1) : -1;
  return out->variant > 0;
}

static void tune_key(const vc_plan *p, const vc_conv_args *a, vc_pass pass, char *key, size_t len) {
  vc_context *ctx = p->ctx;
  int lg = p->n_pairs > 1 ? (int)ceil(log2((double)p->n_pairs)) : 0;
  static const char *dt[] = {"f32", "f16", "bf16"};
  snprintf(key, len, "%s|%s|%s|%d|%lld|%lld|%d|%s|%s", ctx->backend->name, ctx->backend->device_name(ctx),
           pass_names[pass], lg, (long long)a->in_channels, (long long)a->out_channels, p->kvol, dt[a->dtype],
           a->math == VC_MATH_TF32 ? "tf32" : "f32");
}

/* The cache file's path: $VOXCONV_CACHE_DIR/tune-v2.txt, else ~/.cache/voxconv/tune-v2.txt;
 * "" when neither variable is set. (v1 files named an algorithm without variants.) */
static void cache_path(char path[1024]) {
  const char *d = getenv("VOXCONV_CACHE_DIR"), *home = getenv("HOME");
  char dir[900];
  path[0] = 0;
  if (d && *d) snprintf(dir, sizeof dir, "%s", d);
  else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/voxconv", home);
  else return;
  snprintf(path, 1024, "%s/tune-v2.txt", dir);
}

/* FNV-1a: the keys of one device share a long prefix, so lookups compare hashes first. */
static uint64_t key_hash(const char *key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *c = (const unsigned char *)key; *c; c++) h = (h ^ *c) * 0x100000001b3ull;
  return h;
}

static vc_tune_entry *cache_get(const vc_context *ctx, const char *key) {
  const uint64_t h = key_hash(key);
  for (int i = 0; i < ctx->tune_count; i++)
    if (ctx->tune[i].hash == h && !strcmp(ctx->tune[i].key, key)) return &ctx->tune[i];
  return NULL;
}

/* `to_file`: the choice is also the file's for this key; otherwise the file keeps what it had. */
static void cache_put(vc_context *ctx, const char *key, vc_choice c, bool to_file) {
  vc_tune_entry *hit = cache_get(ctx, key);
  if (hit) {
    hit->pick = c;
    if (to_file) hit->file_pick = c;
    return;
  }
  if (ctx->tune_count == ctx->tune_cap) {
    int cap = ctx->tune_cap ? 2 * ctx->tune_cap : 32;
    vc_tune_entry *t = realloc(ctx->tune, (size_t)cap * sizeof *t);
    if (!t) return; /* the cache is an optimisation: forgetting is safe */
    ctx->tune = t, ctx->tune_cap = cap;
  }
  vc_tune_entry *e = &ctx->tune[ctx->tune_count++];
  snprintf(e->key, sizeof e->key, "%s", key);
  e->hash = key_hash(e->key);
  e->pick = c;
  e->file_pick = to_file ? c : (vc_choice){VC_ALGO_AUTO, 0};
}

/* One "key choice" line (the file's or the shipped table's) into the cache; malformed lines
 * are skipped. */
static void cache_line(vc_context *ctx, char *line, bool to_file) {
  char *sp = strrchr(line, ' ');
  vc_choice c;
  if (!sp) return;
  *sp = 0;
  sp[1 + strcspn(sp + 1, "\r\n")] = 0;
  if (strlen(line) < sizeof ctx->tune[0].key && parse_choice(ctx->backend, line, sp + 1, &c)) cache_put(ctx, line, c, to_file);
}

/* The environment, the shipped table's entries for this device and the cache file (which
 * overrides them), once per context: execute calls read none of them, and never allocate
 * for them. Lines are "key choice". */
void vc_tune_load(vc_context *ctx) {
  for (int pass = 0; pass < 3; pass++) {
    const char *e = getenv(pass_env[pass]);
    ctx->forced_algo[pass] = VC_ALGO_AUTO;
    ctx->forced_invalid[pass][0] = 0;
    if (e && *e && !parse_algo(e, &ctx->forced_algo[pass]))
      snprintf(ctx->forced_invalid[pass], sizeof ctx->forced_invalid[pass], "%s", e);
  }
  const char *det = getenv("VOXCONV_DETERMINISTIC");
  ctx->deterministic = det && *det && strcmp(det, "0") != 0;
  char line[512], prefix[256];
  snprintf(prefix, sizeof prefix, "%s|%s|", ctx->backend->name, ctx->backend->device_name(ctx));
  for (int i = 0; vc_tune_shipped[i]; i++)
    if (!strncmp(vc_tune_shipped[i], prefix, strlen(prefix))) {
      snprintf(line, sizeof line, "%s", vc_tune_shipped[i]);
      cache_line(ctx, line, false);
    }
  cache_path(ctx->cache_file);
  if (!ctx->cache_file[0]) return;
  FILE *f = fopen(ctx->cache_file, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) cache_line(ctx, line, true);
  fclose(f);
}

static vc_status cache_save(vc_context *ctx) {
  const char *path = ctx->cache_file;
  char dir[1024], tmp[1100];
  if (!path[0]) return vc_fail(ctx, VC_ERR_IO, "vc_conv_tune: no cache directory (set VOXCONV_CACHE_DIR or HOME)");
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0; /* path is dir + "/tune-v2.txt" */
  for (char *s = dir + 1; *s; s++) /* mkdir -p */
    if (*s == '/') {
      *s = 0;
      mkdir(dir, 0755);
      *s = '/';
    }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return vc_fail(ctx, VC_ERR_IO, "vc_conv_tune: cannot create the cache directory %s: %s", dir, strerror(errno));
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return vc_fail(ctx, VC_ERR_IO, "vc_conv_tune: cannot write %s: %s", tmp, strerror(errno));
  for (int i = 0; i < ctx->tune_count; i++)
    if (ctx->tune[i].file_pick.algo != VC_ALGO_AUTO) {
      char name[64];
      choice_name(ctx->backend, ctx->tune[i].file_pick, name);
      fprintf(f, "%s %s\n", ctx->tune[i].key, name);
    }
  bool ok = fclose(f) == 0;
  if (!ok || rename(tmp, path) != 0) { /* rename makes the update atomic for readers */
    remove(tmp);
    return vc_fail(ctx, VC_ERR_IO, "vc_conv_tune: cannot replace %s: %s", path, strerror(errno));
  }
  return VC_OK;
}


void vc_tune_release(vc_context *ctx) {
  free(ctx->tune);
  ctx->tune = NULL;
  ctx->tune_count = ctx->tune_cap = 0;
}

static vc_status unsupported(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_algo algo, vc_pass pass,
                             const char *why) {
  char have[128] = "", name[32];
  vc_algo list[8];
  int n_tunable, n = ctx->backend->algos(p, a, pass, list, &n_tunable);
  for (int i = 0; i < n; i++)
    snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", enum_name(list[i], name));
  return vc_fail(ctx, VC_ERR_UNSUPPORTED, "%s = %s is not available on the %s backend for %s (it has %s)", why,
                 enum_name(algo, name), ctx->backend->name, pass_names[pass], have);
}

vc_status vc_resolve_algo(vc_context *ctx, const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_choice *out) {
  const vc_backend *be = ctx->backend;
  out->variant = 0;
  if (a->algo != VC_ALGO_AUTO) {
    if (!backend_has(p, a, pass, a->algo)) return unsupported(ctx, p, a, a->algo, pass, "args->algo");
    out->algo = a->algo;
    return VC_OK;
  }
  if (ctx->forced_invalid[pass][0])
    return vc_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s = '%s' is not reference, explicit, implicit, masked or grouped",
                   pass_env[pass], ctx->forced_invalid[pass]);
  const vc_algo forced = ctx->forced_algo[pass];
  if (forced != VC_ALGO_AUTO) {
    if (!backend_has(p, a, pass, forced)) return unsupported(ctx, p, a, forced, pass, pass_env[pass]);
    out->algo = forced;
    return VC_OK;
  }
  const vc_tune_entry *hit = NULL;
  if (ctx->tune_count > 0) {
    char key[320];
    tune_key(p, a, pass, key, sizeof key);
    hit = cache_get(ctx, key);
  }
  vc_choice pick = hit && backend_has(p, a, pass, hit->pick.algo) ? hit->pick : (vc_choice){be->heuristic(p, a, pass), 0};
  if (ctx->deterministic && !be->deterministic(pick.algo, pass)) {
    vc_algo list[8];
    int n_tunable, n = be->algos(p, a, pass, list, &n_tunable);
    for (int i = 0; i < n; i++)
      if (be->deterministic(list[i], pass)) {
        pick = (vc_choice){list[i], 0};
        break;
      }
  }
  *out = pick;
  return VC_OK;
}

vc_status vc_conv_algo_for(const vc_plan *p, const vc_conv_args *args, vc_pass pass, vc_algo *algo) {
  if (!p) return vc_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_conv_algo_for: plan is NULL");
  if (!algo) return vc_fail(p->ctx, VC_ERR_INVALID_ARGUMENT, "vc_conv_algo_for: algo is NULL");
  vc_conv_args a;
  vc_status s = vc_check_pass(p->ctx, "vc_conv_algo_for", pass);
  if (s == VC_OK) s = vc_args_check(p->ctx, "vc_conv_algo_for", args, &a);
  vc_choice c;
  if (s == VC_OK) s = vc_resolve_algo(p->ctx, p, &a, pass, &c);
  if (s == VC_OK) *algo = c.algo;
  return s;
}

vc_status vc_conv_tune(vc_context *ctx, const vc_plan *p, const vc_conv_args *args, vc_pass pass, void *stream,
                       vc_algo *best) {
  vc_conv_args a;
  vc_status s = vc_check_ctx_plan(ctx, "vc_conv_tune", p);
  if (s == VC_OK) s = vc_check_pass(ctx, "vc_conv_tune", pass);
  if (s == VC_OK) s = vc_args_check(ctx, "vc_conv_tune", args, &a);
  if (s != VC_OK) return s;
  vc_algo list[8];
  vc_choice cand[8 * VC_VARIANTS_MAX];
  int n_tunable, n = 0;
  ctx->backend->algos(p, &a, pass, list, &n_tunable);
  bool filtered = false; /* the determinism switch left a candidate (or a variant) out */
  for (int i = 0; i < n_tunable; i++) {
    if (ctx->deterministic && !ctx->backend->deterministic(list[i], pass)) {
      filtered = true;
      continue;
    }
    int var[VC_VARIANTS_MAX], nv = 0;
    a.algo = list[i];
    if (ctx->backend->variants) nv = ctx->backend->variants(p, &a, pass, var, &filtered);
    if (nv == 0) cand[n++] = (vc_choice){list[i], 0};
    for (int v = 0; v < nv; v++) cand[n++] = (vc_choice){list[i], var[v]};
  }
  if (n == 0) return vc_fail(ctx, VC_ERR_INTERNAL, "vc_conv_tune: no candidate algorithm");
  vc_choice win = cand[0];
  if (n > 1) { /* one candidate needs no timing */
    double ms[8 * VC_VARIANTS_MAX];
    s = ctx->backend->time_choices(ctx, p, &a, pass, cand, n, stream, ms);
    if (s != VC_OK) return s;
    for (int i = 1; i < n; i++)
      if (ms[i] < ms[0]) ms[0] = ms[i], win = cand[i];
  }
  if (best) *best = win.algo;
  /* The file is shared by every context under this key: only a race among all candidates
   * may go there, or normal contexts would read back a deterministic context's choice. */
  const bool to_file = n > 1 && !filtered;
  char key[320];
  tune_key(p, &a, pass, key, sizeof key);
  cache_put(ctx, key, win, to_file);
  return to_file ? cache_save(ctx) : VC_OK;
}
