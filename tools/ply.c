/* ply.c — the PLY reader and the voxel writer of ply.h.
 *
 * The header is read line by line into a table of elements and properties. Before the body
 * is touched, each element's count is checked against the bytes after the header (a binary
 * entry needs at least the sizes of its scalars and list counts, an ascii one two bytes per
 * property: a digit and a separator), so every allocation below is bounded by the file's
 * size, and so is every loop. Values are then read with one cursor for both encodings.
 */
#include "ply.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vc_ply_error(char *err, size_t err_len, const char *fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- scalar types ------------------------------------------------------------------------ */

typedef enum { T_I8, T_U8, T_I16, T_U16, T_I32, T_U32, T_F32, T_F64, T_COUNT } ply_type;

static const struct {
  const char *name, *alias;
  int size;
} types[T_COUNT] = {
    {"char", "int8", 1},   {"uchar", "uint8", 1},   {"short", "int16", 2}, {"ushort", "uint16", 2},
    {"int", "int32", 4},   {"uint", "uint32", 4},   {"float", "float32", 4}, {"double", "float64", 8},
};

static int type_of(const char *s) {
  for (int t = 0; t < T_COUNT; t++)
    if (!strcmp(s, types[t].name) || !strcmp(s, types[t].alias)) return t;
  return -1;
}

static bool type_is_int(int t) { return t < T_F32; }
static bool type_is_signed(int t) { return t == T_I8 || t == T_I16 || t == T_I32; }

/* ---- the header -------------------------------------------------------------------------- */

enum { FMT_NONE, FMT_ASCII, FMT_LE, FMT_BE };
enum { ROLE_SKIP, ROLE_X, ROLE_Y, ROLE_Z, ROLE_INDICES };

typedef struct ply_prop {
  int type;       /* of the value, or of a list's items */
  int count_type; /* of a list's count; -1 for a scalar */
  int role;
} ply_prop;

typedef struct ply_elem {
  char name[40]; /* printable, for messages */
  int64_t count;
  size_t first_prop, n_props;
  bool is_vertex, is_face;
} ply_elem;

typedef struct ply_header {
  int format;
  ply_elem *elems;
  size_t n_elems, cap_elems;
  ply_prop *props;
  size_t n_props, cap_props;
  size_t body;                     /* offset of the first body byte */
  ply_elem *vertex;                /* set once the header is complete (elems grows until then) */
  bool has_vertex, has_face;       /* declared (flags: a header may hold millions of elements) */
  bool has_role[ROLE_INDICES + 1]; /* declared: x, y, z on the vertex element, the face list */
} ply_header;

static void header_free(ply_header *h) {
  free(h->elems);
  free(h->props);
}

/* Copies at most 32 characters of s[0..n) for a message, non-printable bytes as '?'. */
static void printable(char *dst, size_t cap, const char *s, size_t n) {
  size_t k = 0, keep = n > 32 ? 29 : n;
  for (; k < keep && k + 1 < cap; k++) dst[k] = s[k] >= 0x20 && s[k] < 0x7f ? s[k] : '?';
  if (keep < n)
    for (int d = 0; d < 3 && k + 1 < cap; d++) dst[k++] = '.';
  dst[k] = '\0';
}

bool vc_ply_grow(void **p, size_t *cap, size_t n, size_t size, size_t first) {
  if (n < *cap) return true;
  size_t c = *cap ? 2 * *cap : first;
  void *q = realloc(*p, c * size);
  if (!q) return false;
  *p = q, *cap = c;
  return true;
}

#define MAX_TOKENS 8

static bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* Splits the NUL-terminated line in place at blanks (CR too: CRLF files); returns the token
 * count, which may exceed MAX_TOKENS (only the first MAX_TOKENS are stored). */
static int tokenize(char *line, char **tok) {
  int n = 0;
  for (char *s = line;;) {
    while (is_blank(*s)) s++;
    if (!*s) return n;
    if (n < MAX_TOKENS) tok[n] = s;
    n++;
    while (*s && !is_blank(*s)) s++;
    if (*s) *s++ = '\0';
  }
}

/* One header line (tokens tok[0..nt)); `line` is its number from 1, for messages. */
static int header_line(ply_header *h, char **tok, int nt, long long line, char *err, size_t el) {
  const char *kw = tok[0];
  if (!strcmp(kw, "comment") || !strcmp(kw, "obj_info")) return 0;
  if (!strcmp(kw, "format")) {
    if (nt != 3) return vc_ply_error(err, el, "header line %lld: malformed 'format' line", line);
    if (h->format != FMT_NONE) return vc_ply_error(err, el, "header line %lld: second 'format' line", line);
    h->format = !strcmp(tok[1], "ascii")                  ? FMT_ASCII
                : !strcmp(tok[1], "binary_little_endian") ? FMT_LE
                : !strcmp(tok[1], "binary_big_endian")    ? FMT_BE
                                                          : FMT_NONE;
    char shown[40];
    if (h->format == FMT_NONE) {
      printable(shown, sizeof shown, tok[1], strlen(tok[1]));
      return vc_ply_error(err, el, "header line %lld: unknown format '%s'", line, shown);
    }
    if (strcmp(tok[2], "1.0")) {
      printable(shown, sizeof shown, tok[2], strlen(tok[2]));
      return vc_ply_error(err, el, "header line %lld: unsupported version '%s' (only 1.0)", line, shown);
    }
    return 0;
  }
  if (!strcmp(kw, "element")) {
    if (nt != 3) return vc_ply_error(err, el, "header line %lld: malformed 'element' line", line);
    char *end;
    errno = 0;
    long long count = strtoll(tok[2], &end, 10);
    if (*end || end == tok[2] || errno || count < 0) {
      char shown[40];
      printable(shown, sizeof shown, tok[2], strlen(tok[2]));
      return vc_ply_error(err, el, "header line %lld: bad element count '%s'", line, shown);
    }
    bool vertex = !strcmp(tok[1], "vertex"), face = !strcmp(tok[1], "face");
    if ((vertex && h->has_vertex) || (face && h->has_face))
      return vc_ply_error(err, el, "header line %lld: second '%s' element", line, tok[1]);
    h->has_vertex = h->has_vertex || vertex, h->has_face = h->has_face || face;
    if (!vc_ply_grow((void **)&h->elems, &h->cap_elems, h->n_elems, sizeof *h->elems, 8))
      return vc_ply_error(err, el, "out of memory");
    ply_elem *e = &h->elems[h->n_elems++];
    memset(e, 0, sizeof *e);
    printable(e->name, sizeof e->name, tok[1], strlen(tok[1]));
    e->count = count;
    e->first_prop = h->n_props;
    e->is_vertex = vertex, e->is_face = face;
    return 0;
  }
  if (!strcmp(kw, "property")) {
    bool list = nt >= 2 && !strcmp(tok[1], "list");
    if (nt != (list ? 5 : 3)) return vc_ply_error(err, el, "header line %lld: malformed 'property' line", line);
    if (!h->n_elems) return vc_ply_error(err, el, "header line %lld: property before any element", line);
    ply_elem *e = &h->elems[h->n_elems - 1];
    const char *name = tok[list ? 4 : 2];
    ply_prop pr = {type_of(tok[list ? 3 : 1]), list ? type_of(tok[2]) : -1, ROLE_SKIP};
    for (int k = list ? 2 : 1; k <= (list ? 3 : 1); k++)
      if (type_of(tok[k]) < 0) {
        char shown[40];
        printable(shown, sizeof shown, tok[k], strlen(tok[k]));
        return vc_ply_error(err, el, "header line %lld: unknown type '%s'", line, shown);
      }
    if (list && !type_is_int(pr.count_type))
      return vc_ply_error(err, el, "header line %lld: list count type '%s' is not an integer type", line, tok[2]);
    if (e->is_vertex && name[0] >= 'x' && name[0] <= 'z' && !name[1]) {
      pr.role = ROLE_X + (name[0] - 'x');
      if (list) return vc_ply_error(err, el, "header line %lld: vertex property '%s' is a list", line, name);
      if (h->has_role[pr.role])
        return vc_ply_error(err, el, "header line %lld: second '%s' property in 'vertex'", line, name);
      h->has_role[pr.role] = true;
    }
    if (e->is_face && (!strcmp(name, "vertex_indices") || !strcmp(name, "vertex_index"))) {
      pr.role = ROLE_INDICES;
      if (!list) return vc_ply_error(err, el, "header line %lld: face property '%s' is not a list", line, name);
      if (!type_is_int(pr.type))
        return vc_ply_error(err, el, "header line %lld: face vertex indices of type '%s' are not integers", line,
                            tok[3]);
      if (h->has_role[ROLE_INDICES])
        return vc_ply_error(err, el, "header line %lld: second vertex index list in 'face'", line);
      h->has_role[ROLE_INDICES] = true;
    }
    if (!vc_ply_grow((void **)&h->props, &h->cap_props, h->n_props, sizeof *h->props, 8))
      return vc_ply_error(err, el, "out of memory");
    h->props[h->n_props++] = pr;
    e->n_props++;
    return 0;
  }
  char shown[40];
  printable(shown, sizeof shown, kw, strlen(kw));
  return vc_ply_error(err, el, "header line %lld: unknown keyword '%s'", line, shown);
}

static int parse_header(const unsigned char *d, size_t len, ply_header *h, char *err, size_t el) {
  memset(h, 0, sizeof *h);
  if (len == 0) return vc_ply_error(err, el, "empty file");
  /* Checked before any line is copied: a large non-PLY file costs nothing. */
  if (len < 3 || memcmp(d, "ply", 3)) return vc_ply_error(err, el, "not a PLY file (it does not start with 'ply')");
  char *buf = NULL, *tok[MAX_TOKENS];
  size_t cap = 0, pos = 0;
  int rc = -1;
  bool ended = false;
  for (long long line = 1; pos < len && !ended; line++) {
    const unsigned char *nl = memchr(d + pos, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - (d + pos)) : len - pos;
    if (n + 1 > cap) {
      free(buf);
      cap = n + 1 > 256 ? n + 1 : 256;
      if (!(buf = malloc(cap))) {
        rc = vc_ply_error(err, el, "out of memory");
        goto done;
      }
    }
    memcpy(buf, d + pos, n);
    buf[n] = '\0';
    pos += nl ? n + 1 : n;
    bool nul = memchr(buf, '\0', n) != NULL;
    int nt = tokenize(buf, tok);
    if (line == 1) {
      if (nul || nt != 1 || strcmp(tok[0], "ply")) {
        rc = vc_ply_error(err, el, "not a PLY file (it does not start with 'ply')");
        goto done;
      }
      continue;
    }
    if (nul) {
      rc = vc_ply_error(err, el, "header line %lld: NUL byte", line);
      goto done;
    }
    if (nt == 0) continue;
    if (!strcmp(tok[0], "end_header")) ended = true;
    else if (header_line(h, tok, nt, line, err, el)) goto done;
  }
  if (!ended) {
    rc = vc_ply_error(err, el, "header has no 'end_header' line");
    goto done;
  }
  h->body = pos;
  for (size_t i = 0; i < h->n_elems; i++)
    if (h->elems[i].is_vertex) h->vertex = &h->elems[i];
  if (h->format == FMT_NONE) rc = vc_ply_error(err, el, "header has no 'format' line");
  else if (!h->vertex) rc = vc_ply_error(err, el, "header has no 'vertex' element");
  else if (!h->has_role[ROLE_X]) rc = vc_ply_error(err, el, "vertex element has no 'x' property");
  else if (!h->has_role[ROLE_Y]) rc = vc_ply_error(err, el, "vertex element has no 'y' property");
  else if (!h->has_role[ROLE_Z]) rc = vc_ply_error(err, el, "vertex element has no 'z' property");
  else if (h->vertex->count == 0) rc = vc_ply_error(err, el, "the file has 0 vertices");
  else rc = 0;
done:
  free(buf);
  return rc;
}

/* Each element's entries need at least this many body bytes (0: it has no properties). */
static uint64_t entry_min_bytes(const ply_header *h, const ply_elem *e) {
  uint64_t m = 0;
  for (size_t k = 0; k < e->n_props; k++) {
    const ply_prop *pr = &h->props[e->first_prop + k];
    m += h->format == FMT_ASCII ? 2 : (uint64_t)types[pr->count_type >= 0 ? pr->count_type : pr->type].size;
  }
  return m;
}

/* Refuses counts the body cannot hold, before anything is allocated for them. */
static int check_counts(const ply_header *h, size_t len, char *err, size_t el) {
  uint64_t avail = len - h->body, budget = avail + (h->format == FMT_ASCII), need = 0;
  for (size_t i = 0; i < h->n_elems; i++) {
    const ply_elem *e = &h->elems[i];
    uint64_t m = entry_min_bytes(h, e);
    if (m == 0) continue;
    if ((uint64_t)e->count > (budget - need) / m)
      return vc_ply_error(err, el, "element '%s' declares %lld entries, more than the %llu bytes after the header can hold",
                          e->name, (long long)e->count, (unsigned long long)avail);
    need += (uint64_t)e->count * m;
  }
  return 0;
}

/* ---- the body ---------------------------------------------------------------------------- */

typedef struct cursor {
  const unsigned char *d;
  size_t pos, len;
  int format;
  const ply_elem *e; /* the entry being read, for messages */
  int64_t index;
  char *err;
  size_t err_len;
} cursor;

static int at_entry(cursor *c, const char *what) {
  return vc_ply_error(c->err, c->err_len, "%s %lld: %s", c->e->name, (long long)c->index, what);
}

static bool is_space(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* Reads one value of `type` into *v (integers exactly: every PLY integer fits a double). */
static int read_value(cursor *c, int type, double *v) {
  if (c->format != FMT_ASCII) {
    int sz = types[type].size;
    if (c->len - c->pos < (size_t)sz) return at_entry(c, "unexpected end of file");
    uint64_t u = 0;
    for (int b = 0; b < sz; b++) {
      unsigned char byte = c->d[c->pos + (c->format == FMT_LE ? b : sz - 1 - b)];
      u |= (uint64_t)byte << (8 * b);
    }
    c->pos += (size_t)sz;
    if (type == T_F32) {
      uint32_t u32 = (uint32_t)u;
      float f;
      memcpy(&f, &u32, 4);
      *v = f;
    } else if (type == T_F64) {
      memcpy(v, &u, 8);
    } else {
      int bits = 8 * sz;
      bool neg = type_is_signed(type) && (u >> (bits - 1));
      *v = neg ? (double)u - ldexp(1.0, bits) : (double)u;
    }
    return 0;
  }
  while (c->pos < c->len && is_space(c->d[c->pos])) c->pos++;
  if (c->pos == c->len) return at_entry(c, "unexpected end of file");
  size_t start = c->pos;
  while (c->pos < c->len && !is_space(c->d[c->pos])) c->pos++;
  size_t n = c->pos - start;
  char tok[128], *end = tok;
  bool ok = n < sizeof tok;
  if (ok) {
    memcpy(tok, c->d + start, n);
    tok[n] = '\0';
    errno = 0;
    if (type_is_int(type)) {
      long long x = strtoll(tok, &end, 10);
      int bits = 8 * types[type].size;
      double lo = type_is_signed(type) ? -ldexp(1.0, bits - 1) : 0, hi = ldexp(1.0, bits - type_is_signed(type)) - 1;
      ok = !errno && (double)x >= lo && (double)x <= hi;
      *v = (double)x;
    } else {
      *v = strtod(tok, &end);
      if (type == T_F32) *v = (float)*v; /* as a binary file would hold it */
    }
    ok = ok && end == tok + n && n > 0;
  }
  if (!ok) {
    char shown[40], what[96];
    printable(shown, sizeof shown, (const char *)c->d + start, n);
    snprintf(what, sizeof what, "bad %s value '%s'", types[type].name, shown);
    return at_entry(c, what);
  }
  return 0;
}

/* Reads a list's count and checks that its items can still be present. */
static int read_count(cursor *c, const ply_prop *pr, int64_t *count) {
  double v;
  if (read_value(c, pr->count_type, &v)) return -1;
  if (v < 0) {
    char what[64];
    snprintf(what, sizeof what, "negative list count %.0f", v);
    return at_entry(c, what);
  }
  uint64_t left = c->len - c->pos, per = c->format == FMT_ASCII ? 2 : (uint64_t)types[pr->type].size;
  if ((uint64_t)v > (left + (c->format == FMT_ASCII)) / per) return at_entry(c, "unexpected end of file");
  *count = (int64_t)v;
  return 0;
}

typedef struct tri_list {
  int64_t *v; /* [n, 3] */
  size_t n, cap;
} tri_list;

/* One face's index list, fanned into triangles (v0, v[k-1], v[k]). */
static int read_face(cursor *c, const ply_prop *pr, int64_t n_vertices, tri_list *t) {
  int64_t count;
  if (read_count(c, pr, &count)) return -1;
  if (count < 3) {
    char what[64];
    snprintf(what, sizeof what, "%lld vertex indices, a face needs at least 3", (long long)count);
    return at_entry(c, what);
  }
  int64_t first = 0, prev = 0;
  for (int64_t k = 0; k < count; k++) {
    double v;
    if (read_value(c, pr->type, &v)) return -1;
    if (v < 0 || v >= (double)n_vertices) {
      char what[96];
      snprintf(what, sizeof what, "vertex index %.0f is outside [0, %lld)", v, (long long)n_vertices);
      return at_entry(c, what);
    }
    int64_t idx = (int64_t)v;
    if (k >= 2) {
      if (!vc_ply_grow((void **)&t->v, &t->cap, t->n, 3 * sizeof *t->v, 8))
        return vc_ply_error(c->err, c->err_len, "out of memory");
      int64_t *r = t->v + 3 * t->n++;
      r[0] = first, r[1] = prev, r[2] = idx;
    }
    if (k == 0) first = idx;
    prev = idx;
  }
  return 0;
}

static int read_element(cursor *c, const ply_header *h, const ply_elem *e, double *xyz, tri_list *t) {
  c->e = e;
  const ply_prop *props = h->props + e->first_prop;
  if (e->n_props == 0) return 0; /* nothing to read, whatever the count */
  if (c->format != FMT_ASCII && !e->is_vertex && !e->is_face) {
    bool scalars = true;
    for (size_t k = 0; k < e->n_props; k++) scalars = scalars && props[k].count_type < 0;
    if (scalars) { /* skipped in one step */
      uint64_t stride = entry_min_bytes(h, e), fit = (c->len - c->pos) / stride;
      if ((uint64_t)e->count > fit) {
        c->index = (int64_t)fit;
        return at_entry(c, "unexpected end of file");
      }
      c->pos += (size_t)((uint64_t)e->count * stride);
      return 0;
    }
  }
  for (c->index = 0; c->index < e->count; c->index++)
    for (size_t k = 0; k < e->n_props; k++) {
      const ply_prop *pr = &props[k];
      double v;
      if (pr->role == ROLE_INDICES) {
        if (read_face(c, pr, h->vertex->count, t)) return -1;
      } else if (pr->count_type >= 0) {
        int64_t count;
        if (read_count(c, pr, &count)) return -1;
        if (c->format != FMT_ASCII) c->pos += (size_t)count * (size_t)types[pr->type].size;
        else
          for (int64_t j = 0; j < count; j++)
            if (read_value(c, pr->type, &v)) return -1;
      } else {
        if (read_value(c, pr->type, &v)) return -1;
        if (pr->role >= ROLE_X && pr->role <= ROLE_Z) {
          if (!isfinite(v)) return at_entry(c, "coordinate is not finite");
          xyz[3 * c->index + (pr->role - ROLE_X)] = v;
        }
      }
    }
  return 0;
}

int vc_ply_parse(const unsigned char *data, size_t len, vc_ply *out, char *err, size_t err_len) {
  if (!out) return vc_ply_error(err, err_len, "NULL argument");
  memset(out, 0, sizeof *out);
  if (!data && len) return vc_ply_error(err, err_len, "NULL argument");
  ply_header h;
  int rc = parse_header(data, len, &h, err, err_len);
  if (!rc) rc = check_counts(&h, len, err, err_len);
  double *xyz = NULL;
  tri_list t = {NULL, 0, 0};
  if (!rc && !(xyz = malloc((size_t)h.vertex->count * 3 * sizeof *xyz)))
    rc = vc_ply_error(err, err_len, "out of memory");
  cursor c = {data, h.body, len, h.format, NULL, 0, err, err_len};
  for (size_t i = 0; !rc && i < h.n_elems; i++) rc = read_element(&c, &h, &h.elems[i], xyz, &t);
  if (!rc) {
    out->xyz = xyz, out->n_vertices = h.vertex->count;
    out->tris = t.v, out->n_tris = (int64_t)t.n;
  } else {
    free(xyz);
    free(t.v);
  }
  header_free(&h);
  return rc;
}

int vc_ply_read(const char *path, vc_ply *out, char *err, size_t err_len) {
  if (out) memset(out, 0, sizeof *out);
  if (!path || !out) return vc_ply_error(err, err_len, "NULL argument");
  FILE *f = fopen(path, "rb");
  if (!f) return vc_ply_error(err, err_len, "cannot open: %s", strerror(errno));
  unsigned char *buf = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (!vc_ply_grow((void **)&buf, &cap, len, 1, (size_t)1 << 16)) {
      rc = vc_ply_error(err, err_len, "out of memory");
      break;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  if (!rc && ferror(f)) rc = vc_ply_error(err, err_len, "cannot read: %s", strerror(errno));
  fclose(f);
  if (!rc) rc = vc_ply_parse(buf, len, out, err, err_len);
  free(buf);
  return rc;
}

void vc_ply_free(vc_ply *p) {
  if (!p) return;
  free(p->xyz);
  free(p->tris);
  memset(p, 0, sizeof *p);
}

/* ---- writing voxel centres --------------------------------------------------------------- */

static void put_le32(unsigned char *b, uint32_t v) {
  for (int k = 0; k < 4; k++) b[k] = (unsigned char)(v >> (8 * k));
}

int vc_ply_write_voxels(const char *path, const int32_t *coords, int64_t n, double size, char *err,
                        size_t err_len) {
  if (!path || n < 0 || (n > 0 && !coords))
    return vc_ply_error(err, err_len, "bad arguments (path %s, %lld voxels, coords %s)", path ? "set" : "NULL",
                        (long long)n, coords ? "set" : "NULL");
  if (vc_voxel_size_check(size, err, err_len)) return -1;
  FILE *f = fopen(path, "wb");
  if (!f) return vc_ply_error(err, err_len, "cannot open for writing: %s", strerror(errno));
  fprintf(f,
          "ply\nformat binary_little_endian 1.0\ncomment voxel centres, voxel size %.17g\n"
          "element vertex %lld\nproperty float x\nproperty float y\nproperty float z\nproperty int batch\n"
          "end_header\n",
          size, (long long)n);
  for (int64_t i = 0; i < n; i++) {
    unsigned char row[16];
    for (int a = 0; a < 3; a++) {
      float c = (float)(((double)coords[4 * i + 1 + a] + 0.5) * size);
      uint32_t u;
      memcpy(&u, &c, 4);
      put_le32(row + 4 * a, u);
    }
    put_le32(row + 12, (uint32_t)coords[4 * i]);
    fwrite(row, 1, sizeof row, f);
  }
  bool failed = ferror(f) != 0;
  int saved = errno;
  if (fclose(f) != 0 && !failed) failed = true, saved = errno;
  if (failed) return vc_ply_error(err, err_len, "write failed: %s", strerror(saved));
  return 0;
}
