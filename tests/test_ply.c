/* test_ply.c — the PLY reader, voxeliser and voxel writer of tools/ply.h: round trips through
 * every encoding and coordinate type, fan triangulation, surface voxelisation against an
 * independent triangle-box test, a flood fill that finds no hole in closed meshes, the
 * shipped sample, and every error with its exact message. */
#include "vc_test.h"

#include "../tools/ply.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- PLY files built in memory ---------------------------------------------------------- */

typedef struct buf {
  unsigned char *d;
  size_t n, cap;
} buf;

static void buf_put(buf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = 2 * (b->n + n) + 64;
    b->d = realloc(b->d, b->cap);
  }
  memcpy(b->d + b->n, p, n);
  b->n += n;
}

static void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf *b, const char *fmt, ...) {
  char s[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(s, sizeof s, fmt, ap);
  va_end(ap);
  buf_put(b, s, (size_t)n);
}

enum { ENC_ASCII, ENC_LE, ENC_BE };
static const char *const enc_name[3] = {"ascii", "binary_little_endian", "binary_big_endian"};

/* Every PLY type name, this file's own table (not the reader's); the 12 integer types first. */
typedef struct ttype {
  const char *name;
  int size;
  bool flt, sgn;
} ttype;
static const ttype ttypes[16] = {
    {"char", 1, false, true},    {"int8", 1, false, true},    {"uchar", 1, false, false},  {"uint8", 1, false, false},
    {"short", 2, false, true},   {"int16", 2, false, true},   {"ushort", 2, false, false}, {"uint16", 2, false, false},
    {"int", 4, false, true},     {"int32", 4, false, true},   {"uint", 4, false, false},   {"uint32", 4, false, false},
    {"float", 4, true, false},   {"float32", 4, true, false}, {"double", 8, true, false},  {"float64", 8, true, false},
};

static const ttype *tt(const char *name) {
  for (int i = 0; i < 16; i++)
    if (!strcmp(ttypes[i].name, name)) return &ttypes[i];
  return NULL;
}

/* One value of type t in encoding enc. */
static void put_value(buf *b, int enc, const ttype *t, double v) {
  if (enc == ENC_ASCII) {
    if (!t->flt) buf_printf(b, "%lld ", (long long)v);
    else if (t->size == 4) buf_printf(b, "%.9g ", v);
    else buf_printf(b, "%.17g ", v);
    return;
  }
  uint64_t u;
  if (t->flt && t->size == 4) {
    float f = (float)v;
    uint32_t w;
    memcpy(&w, &f, 4);
    u = w;
  } else if (t->flt) {
    memcpy(&u, &v, 8);
  } else {
    u = (uint64_t)(int64_t)v;
  }
  unsigned char bytes[8];
  for (int k = 0; k < t->size; k++) bytes[enc == ENC_LE ? k : t->size - 1 - k] = (unsigned char)(u >> (8 * k));
  buf_put(b, bytes, (size_t)t->size);
}

/* A random value that type t holds exactly. */
static double rand_value(const ttype *t) {
  if (t->flt) return t->size == 4 ? (double)(float)vc_rand_uniform(-1e3, 1e3) : vc_rand_uniform(-1e6, 1e6);
  double span = ldexp(1.0, 8 * t->size), lo = t->sgn ? -span / 2 : 0;
  return lo + (double)(vc_rand_u64() % (uint64_t)span);
}

static void ends_newline(buf *b, int enc) {
  if (enc == ENC_ASCII) buf_put(b, "\n", 1);
}

/* A model with everything the reader must skip around the parts it keeps: extra scalar and
 * list properties between x, y, z; between vertex and face an element with a list, one
 * without properties and one of scalars only; properties before and after the face's index
 * list, comments, and an element after the faces. Writes the expected vertices and
 * triangles. */
typedef struct model {
  int nv, nt;
  double xyz[3 * 24];
  int64_t tris[3 * 64];
} model;

static void build_model(buf *b, int enc, const ttype *coord, const ttype *count_t, const ttype *index_t,
                        const char *index_name, model *m) {
  m->nv = 20, m->nt = 0;
  const int nf = 7;
  buf_printf(b, "ply\nformat %s 1.0\ncomment made by test_ply.c\nobj_info anything goes\n", enc_name[enc]);
  buf_printf(b, "element vertex %d\nproperty float nx\nproperty %s x\nproperty uchar red\nproperty %s y\n", m->nv,
             coord->name, coord->name);
  buf_printf(b, "property list uchar float extra\nproperty %s z\n", coord->name);
  buf_printf(b, "element edge 2\nproperty int v1\nproperty list ushort double w\nelement nothing 1000000000\n"
                "element camera 2\nproperty float fx\nproperty short k\n");
  buf_printf(b, "element face %d\nproperty uchar flags\nproperty list %s %s %s\nproperty double quality\n", nf,
             count_t->name, index_t->name, index_name);
  buf_printf(b, "element material 1\nproperty list int uchar rgb\nend_header\n");
  const ttype *f = tt("float"), *u8 = tt("uchar"), *i32 = tt("int"), *u16 = tt("ushort"), *f64 = tt("double");
  for (int v = 0; v < m->nv; v++) {
    for (int a = 0; a < 3; a++) m->xyz[3 * v + a] = rand_value(coord);
    put_value(b, enc, f, 0.5);
    put_value(b, enc, coord, m->xyz[3 * v]);
    put_value(b, enc, u8, 200);
    put_value(b, enc, coord, m->xyz[3 * v + 1]);
    int extra = v % 3;
    put_value(b, enc, u8, extra);
    for (int k = 0; k < extra; k++) put_value(b, enc, f, -1.25);
    put_value(b, enc, coord, m->xyz[3 * v + 2]);
    ends_newline(b, enc);
  }
  for (int e = 0; e < 2; e++) {
    put_value(b, enc, i32, -7);
    put_value(b, enc, u16, 2);
    put_value(b, enc, f64, 1e300);
    put_value(b, enc, f64, -0.0);
    ends_newline(b, enc);
  }
  for (int cam = 0; cam < 2; cam++) {
    put_value(b, enc, f, 35.5);
    put_value(b, enc, tt("short"), -2);
    ends_newline(b, enc);
  }
  for (int fc = 0; fc < nf; fc++) {
    int k = 3 + fc % 4; /* triangles, quads, pentagons, hexagons */
    int64_t idx[6];
    for (int j = 0; j < k; j++) idx[j] = (int64_t)(vc_rand_u64() % (uint64_t)m->nv);
    put_value(b, enc, u8, 1);
    put_value(b, enc, count_t, k);
    for (int j = 0; j < k; j++) put_value(b, enc, index_t, (double)idx[j]);
    for (int j = 2; j < k; j++) {
      int64_t *t = m->tris + 3 * m->nt++;
      t[0] = idx[0], t[1] = idx[j - 1], t[2] = idx[j];
    }
    put_value(b, enc, f64, 0.75);
    ends_newline(b, enc);
  }
  put_value(b, enc, i32, 3);
  for (int j = 0; j < 3; j++) put_value(b, enc, u8, 255);
  ends_newline(b, enc);
}

static bool same_model(const vc_ply *p, const model *m) {
  if (p->n_vertices != m->nv || p->n_tris != m->nt) return false;
  return !memcmp(p->xyz, m->xyz, sizeof(double) * 3 * (size_t)m->nv) &&
         !memcmp(p->tris, m->tris, sizeof(int64_t) * 3 * (size_t)m->nt);
}

/* ---- round trips ---------------------------------------------------------------------------- */

/* vc_ply_parse of data that must parse; a failure is recorded with the reader's message. */
static bool parse_ok(const void *data, size_t len, vc_ply *p) {
  char err[256] = "";
  const bool ok = vc_ply_parse((const unsigned char *)data, len, p, err, sizeof err) == 0;
  CHECK(ok, "%s", err);
  return ok;
}

static void test_ply_round_trip_every_encoding_and_type(void) {
  int iter = 0;
  for (int enc = 0; enc < 3; enc++)
    for (int t = 0; t < 16; t++, iter++) {
      const ttype *count_t = &ttypes[iter % 12], *index_t = &ttypes[(iter * 5 + 3) % 12]; /* integer types */
      buf b = {0};
      model m;
      build_model(&b, enc, &ttypes[t], count_t, index_t, iter % 2 ? "vertex_index" : "vertex_indices", &m);
      vc_ply p;
      char err[256] = "";
      int rc = vc_ply_parse(b.d, b.n, &p, err, sizeof err);
      CHECK(rc == 0, "%s, coordinates %s: %s", enc_name[enc], ttypes[t].name, err);
      CHECK(rc != 0 || same_model(&p, &m), "%s, coordinates %s, lists %s/%s: vertices or triangles differ",
            enc_name[enc], ttypes[t].name, count_t->name, index_t->name);
      vc_ply_free(&p);
      CHECK(p.xyz == NULL && p.tris == NULL && p.n_vertices == 0, "vc_ply_free leaves the struct set");
      /* Every cut of a binary file is an error with a message (a binary model has no
       * optional trailing bytes); every cut of an ascii one at least ends cleanly. One
       * coordinate type in four is enough for that. */
      for (size_t cut = 0; t % 4 == 0 && cut < b.n; cut++) {
        err[0] = '\0';
        rc = vc_ply_parse(b.d, cut, &p, err, sizeof err);
        if (enc != ENC_ASCII) CHECK(rc == -1 && err[0], "%s cut at %zu of %zu parsed", enc_name[enc], cut, b.n);
        CHECK(rc == 0 || err[0], "cut at %zu: no message", cut);
        vc_ply_free(&p);
      }
      free(b.d);
    }
}

static void test_ply_crlf_comments_and_skipped_elements(void) {
  static const char text[] = "ply\r\nformat ascii 1.0\r\ncomment CRLF line ends, tabs, blank lines\r\n\r\n"
                             "element\tvertex 4\r\nproperty float x\r\nproperty float y\r\nproperty float z\r\n"
                             "element face 2\r\nproperty list uchar int vertex_indices\r\n"
                             "element empty 9223372036854775807\r\nend_header\r\n"
                             "0 0 0\r\n1 0 0\r\n0 1 0\r\n0 0 1\r\n3 0 1 2\r\n4 0 1 2 3\r\n";
  vc_ply p;
  parse_ok(text, sizeof text - 1, &p);
  static const int64_t want[9] = {0, 1, 2, 0, 1, 2, 0, 2, 3};
  CHECK(p.n_vertices == 4 && p.n_tris == 3 && !memcmp(p.tris, want, sizeof want) && p.xyz[9 + 2] == 1.0,
        "%lld vertices, %lld triangles", (long long)p.n_vertices, (long long)p.n_tris);
  vc_ply_free(&p);
  vc_ply_free(NULL);
}

/* A binary file with no face element: a point cloud; and doubles big-endian. */
static void test_ply_points_only(void) {
  buf b = {0};
  buf_printf(&b, "ply\nformat binary_big_endian 1.0\nelement vertex 3\nproperty double x\nproperty double y\n"
                 "property double z\nend_header\n");
  const double v[9] = {1.5, -2.25, 3, 1e-300, 0, -0.0, 65535, -65536, 0.125};
  for (int i = 0; i < 9; i++) put_value(&b, ENC_BE, tt("double"), v[i]);
  vc_ply p;
  parse_ok(b.d, b.n, &p);
  CHECK(p.n_vertices == 3 && p.n_tris == 0 && p.tris == NULL && !memcmp(p.xyz, v, sizeof v), "points differ");
  vc_ply_free(&p);
  free(b.d);
}

/* ---- parse errors, exact messages ------------------------------------------------------------ */

/* A call that must fail (rc -1) with exactly the message `want`. */
static void expect_msg(const char *what, int rc, const char *err, const char *want) {
  CHECK(rc == -1, "%s succeeded (expected '%s')", what, want);
  CHECK(!strcmp(err, want), "%s: message\n      '%s', expected\n      '%s'", what, err, want);
}

static void expect_parse_error(const char *what, const void *data, size_t len, const char *want) {
  vc_ply p;
  memset(&p, 0x5a, sizeof p);
  char err[256] = "(no message)";
  int rc = vc_ply_parse(data, len, &p, err, sizeof err);
  expect_msg(what, rc, err, want);
  CHECK(p.xyz == NULL && p.tris == NULL && p.n_vertices == 0 && p.n_tris == 0, "%s: *out not zeroed", what);
  if (rc == 0) vc_ply_free(&p);
}

#define H "ply\nformat ascii 1.0\n"
#define XYZ "property float x\nproperty float y\nproperty float z\n"
#define V1 "element vertex 1\n" XYZ
#define V3 "element vertex 3\n" XYZ
#define FACE "element face 1\nproperty list uchar int vertex_indices\n"
#define BODY3 "0 0 0\n1 0 0\n0 1 0\n"

typedef struct text_case {
  const char *data;
  size_t len;
  const char *want;
} text_case;
#define T(s, want) {s, sizeof(s) - 1, want}

static const text_case text_cases[] = {
    T("", "empty file"),
    T("PLY\n", "not a PLY file (it does not start with 'ply')"),
    T("pl", "not a PLY file (it does not start with 'ply')"),
    T("ply extra\n" V1 "end_header\n", "not a PLY file (it does not start with 'ply')"),
    T("ply\0\n", "not a PLY file (it does not start with 'ply')"),
    T("\x89PNG\r\n\x1a\n", "not a PLY file (it does not start with 'ply')"),
    T("ply", "header has no 'end_header' line"),
    T(H V1, "header has no 'end_header' line"),
    T(H "comment a\0b\nend_header\n", "header line 3: NUL byte"),
    T("ply\nformat ascii\n", "header line 2: malformed 'format' line"),
    T("ply\nformat binary_middle_endian 1.0\n", "header line 2: unknown format 'binary_middle_endian'"),
    T("ply\nformat ascii 2.0\n", "header line 2: unsupported version '2.0' (only 1.0)"),
    T(H "format ascii 1.0\n", "header line 3: second 'format' line"),
    T("ply\n" V1 "end_header\n1 2 3\n", "header has no 'format' line"),
    T(H "element vertex\n", "header line 3: malformed 'element' line"),
    T(H "element vertex 1 2\n", "header line 3: malformed 'element' line"),
    T(H "element vertex -1\n", "header line 3: bad element count '-1'"),
    T(H "element vertex 1x\n", "header line 3: bad element count '1x'"),
    T(H "element vertex 99999999999999999999\n", "header line 3: bad element count '99999999999999999999'"),
    T(H V1 "element vertex 1\n", "header line 7: second 'vertex' element"),
    T(H V1 FACE "element face 2\n", "header line 9: second 'face' element"),
    T(H "property float x\n", "header line 3: property before any element"),
    T(H "element vertex 1\nproperty float\n", "header line 4: malformed 'property' line"),
    T(H "element vertex 1\nproperty float x y\n", "header line 4: malformed 'property' line"),
    T(H "element vertex 1\nproperty list uchar int\n", "header line 4: malformed 'property' line"),
    T(H "element vertex 1\nproperty float3 x\n", "header line 4: unknown type 'float3'"),
    T(H "element vertex 1\nproperty list uchar quad q\n", "header line 4: unknown type 'quad'"),
    T(H "element vertex 1\nproperty list uint128 int q\n", "header line 4: unknown type 'uint128'"),
    T(H "element vertex 1\nproperty list float int q\n", "header line 4: list count type 'float' is not an integer type"),
    T(H "element vertex 1\nproperty list uchar float y\n", "header line 4: vertex property 'y' is a list"),
    T(H "element vertex 1\nproperty float x\nproperty double x\n", "header line 5: second 'x' property in 'vertex'"),
    T(H V1 "element face 1\nproperty int vertex_indices\n", "header line 8: face property 'vertex_indices' is not a list"),
    T(H V1 "element face 1\nproperty list uchar float vertex_index\n",
      "header line 8: face vertex indices of type 'float' are not integers"),
    T(H V1 FACE "property list uchar int vertex_index\n", "header line 9: second vertex index list in 'face'"),
    T(H "elephant 3\n", "header line 3: unknown keyword 'elephant'"),
    T(H "an_unknown_keyword_of_forty_characters__ 3\n", "header line 3: unknown keyword 'an_unknown_keyword_of_forty_c...'"),
    T(H "\x01\xff\n", "header line 3: unknown keyword '?" "?'"), /* no trigraph */
    T(H "element face 0\nend_header\n", "header has no 'vertex' element"),
    T(H "element vertex 1\nproperty float y\nproperty float z\nend_header\n", "vertex element has no 'x' property"),
    T(H "element vertex 1\nproperty float x\nproperty float z\nend_header\n", "vertex element has no 'y' property"),
    T(H "element vertex 1\nproperty float x\nproperty float y\nend_header\n", "vertex element has no 'z' property"),
    T(H "element vertex 0\n" XYZ "end_header\n", "the file has 0 vertices"),
    /* ascii: two bytes a value at least ("1 2 3\n" holds one vertex of three values) */
    T(H "element vertex 1000000\n" XYZ "end_header\n1 2 3\n",
      "element 'vertex' declares 1000000 entries, more than the 6 bytes after the header can hold"),
    T(H V3 "element junk 9223372036854775807\nproperty uchar a\nend_header\n" BODY3 "1 2 3\n",
      "element 'junk' declares 9223372036854775807 entries, more than the 24 bytes after the header can hold"),
    T(H V1 "end_header\n1 abc 3\n", "vertex 0: bad float value 'abc'"),
    T(H V1 "end_header\n1 2 3x\n", "vertex 0: bad float value '3x'"),
    T(H "element vertex 1\nproperty uchar x\nproperty float y\nproperty float z\nend_header\n300 2 3\n",
      "vertex 0: bad uchar value '300'"),
    T(H "element vertex 1\nproperty char x\nproperty float y\nproperty float z\nend_header\n-129 2 3\n",
      "vertex 0: bad char value '-129'"),
    T(H "element vertex 1\nproperty int x\nproperty float y\nproperty float z\nend_header\n1.5 2 3\n",
      "vertex 0: bad int value '1.5'"),
    T(H "element vertex 1\nproperty uint x\nproperty float y\nproperty float z\nend_header\n4294967296 2 3\n",
      "vertex 0: bad uint value '4294967296'"),
    T(H V1 "end_header\n1 2 1111111111111111111111111111111111111111111111111111111111111111111111111111111111111"
           "11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111\n",
      "vertex 0: bad float value '11111111111111111111111111111...'"),
    T(H V1 "end_header\n1 2 \x01\n", "vertex 0: bad float value '?'"),
    T(H V3 "end_header\n0 0 0\nnan 0 0\n0 0 0\n", "vertex 1: coordinate is not finite"),
    T(H V3 "end_header\n0 0 0\n0 0 0\n0 -inf 0\n", "vertex 2: coordinate is not finite"),
    T(H "element vertex 1\nproperty double x\nproperty double y\nproperty double z\nend_header\n1 2 1e999\n",
      "vertex 0: coordinate is not finite"),
    T(H "element vertex 2\n" XYZ "property list uchar float extra\nend_header\n1 2 3 0\n1 2 3 9 1\n",
      "vertex 1: unexpected end of file"),
    T(H "element vertex 2\n" XYZ "property list uchar float extra\nend_header\n1 2 3 0 1 2 3 1\n",
      "vertex 1: unexpected end of file"),
    T(H V3 FACE "end_header\n" BODY3 "2 0 1\n", "face 0: 2 vertex indices, a face needs at least 3"),
    T(H V3 FACE "end_header\n" BODY3 "0\n", "face 0: 0 vertex indices, a face needs at least 3"),
    T(H V3 FACE "end_header\n" BODY3 "3 0 1 3\n", "face 0: vertex index 3 is outside [0, 3)"),
    T(H V3 FACE "end_header\n" BODY3 "3 0 -1 2\n", "face 0: vertex index -1 is outside [0, 3)"),
    T(H V3 "element face 2\nproperty list char int vertex_indices\nend_header\n" BODY3 "3 0 1 2\n-1\n",
      "face 1: negative list count -1"),
    T(H V3 "element face 1\nproperty list uint int vertex_indices\nend_header\n" BODY3 "4000000000 0 1 2\n",
      "face 0: unexpected end of file"),
    T(H V3 FACE "end_header\n" BODY3 "4 0 1 2\n", "face 0: unexpected end of file"),
    T(H V3 FACE "end_header\n" BODY3 "3 0 1 2.0\n", "face 0: bad int value '2.0'"),
    T(H V3 FACE "end_header\n" BODY3 "x 0 1 2\n", "face 0: bad uchar value 'x'"),
};

static void test_ply_errors_ascii_and_header(void) {
  for (size_t i = 0; i < sizeof text_cases / sizeof *text_cases; i++) {
    char what[64];
    snprintf(what, sizeof what, "text case %zu", i);
    expect_parse_error(what, text_cases[i].data, text_cases[i].len, text_cases[i].want);
  }
  /* A message is cut to the caller's buffer, never overflows it. */
  char small[8];
  vc_ply p;
  CHECK(vc_ply_parse((const unsigned char *)"nope", 4, &p, small, sizeof small) == -1 && !strcmp(small, "not a P"),
        "short buffer holds '%s'", small);
  CHECK(vc_ply_parse((const unsigned char *)"nope", 4, &p, NULL, 0) == -1, "NULL err buffer");
  char err[64];
  CHECK(vc_ply_parse(NULL, 4, &p, err, sizeof err) == -1 && !strcmp(err, "NULL argument"), "'%s'", err);
  CHECK(vc_ply_parse((const unsigned char *)"ply", 3, NULL, err, sizeof err) == -1 && !strcmp(err, "NULL argument"),
        "'%s'", err);
}

/* Binary bodies: the header of three float coordinates and, optionally, a face list. */
static void binary_header(buf *b, int enc, int nv, const char *more) {
  buf_printf(b, "ply\nformat %s 1.0\nelement vertex %d\n" XYZ "%send_header\n", enc_name[enc], nv, more);
}

static void put_vertices(buf *b, int enc, int nv) {
  for (int i = 0; i < 3 * nv; i++) put_value(b, enc, tt("float"), i % 3 == 0 ? i : 0);
}

/* A binary body: nv vertices declared with `more` after their x, y, z; `put` vertices
 * written, then the values of `after` (type NULL ends them). */
typedef struct binary_case {
  const char *what;
  int nv;
  const char *more;
  int put;
  struct {
    const char *type;
    double v;
  } after[6];
  const char *want;
} binary_case;

static const binary_case binary_cases[] = {
    {"count", 2, "", 1, {{NULL, 0}},
     "element 'vertex' declares 2 entries, more than the 12 bytes after the header can hold"},
    {"short list", 1, FACE, 1, {{"uchar", 4}, {"int", 0}, {"int", 0}, {NULL, 0}}, "face 0: unexpected end of file"},
    {"huge list", 1, "element face 1\nproperty list uint int vertex_indices\n", 1, {{"uint", 4000000000.0}, {NULL, 0}},
     "face 0: unexpected end of file"},
    {"negative list", 1, "element face 1\nproperty list char int vertex_indices\n", 1, {{"char", -1}, {NULL, 0}},
     "face 0: negative list count -1"},
    {"index", 3, "element face 1\nproperty list uchar ushort vertex_indices\n", 3,
     {{"uchar", 3}, {"ushort", 0}, {"ushort", 2}, {"ushort", 65535}, {NULL, 0}},
     "face 0: vertex index 65535 is outside [0, 3)"},
    {"negative index", 3, FACE, 3, {{"uchar", 3}, {"int", 0}, {"int", -2147483648.0}, {"int", 1}, {NULL, 0}},
     "face 0: vertex index -2147483648 is outside [0, 3)"},
    /* Lists consume more than their minimum, so a scalar element after them runs short. */
    {"skipped element", 1, FACE "element junk 2\nproperty float a\n", 1,
     {{"uchar", 3}, {"int", 0}, {"int", 0}, {"int", 0}, {"float", 1}, {NULL, 0}}, "junk 1: unexpected end of file"},
    {"not finite", 2, "", 1, {{"float", 1}, {"float", 2}, {"float", NAN}, {NULL, 0}},
     "vertex 1: coordinate is not finite"},
    {"not finite", 2, "", 1, {{"float", 1}, {"float", 2}, {"float", INFINITY}, {NULL, 0}},
     "vertex 1: coordinate is not finite"},
    {"not finite", 2, "", 1, {{"float", 1}, {"float", 2}, {"float", -INFINITY}, {NULL, 0}},
     "vertex 1: coordinate is not finite"},
};

static void test_ply_errors_binary(void) {
  for (int enc = ENC_LE; enc <= ENC_BE; enc++) {
    buf b = {0};
    for (size_t i = 0; i < sizeof binary_cases / sizeof *binary_cases; i++) {
      const binary_case *bc = &binary_cases[i];
      b.n = 0;
      binary_header(&b, enc, bc->nv, bc->more);
      put_vertices(&b, enc, bc->put);
      for (int k = 0; bc->after[k].type; k++) put_value(&b, enc, tt(bc->after[k].type), bc->after[k].v);
      expect_parse_error(bc->what, b.d, b.n, bc->want);
    }
    /* Lists inside the vertices (values between them, so not a table row): the second one runs short. */
    b.n = 0;
    binary_header(&b, enc, 2, "property list uchar double extra\n");
    put_vertices(&b, enc, 1);
    put_value(&b, enc, tt("uchar"), 0);
    put_vertices(&b, enc, 1);
    put_value(&b, enc, tt("uchar"), 1);
    expect_parse_error("skipped list", b.d, b.n, "vertex 1: unexpected end of file");
    free(b.d);
  }
}

/* ---- reading and writing files ---------------------------------------------------------------- */

/* A fresh empty file; the caller unlinks it. */
static void tmp_file(char *path, size_t cap) {
  snprintf(path, cap, "%s/vc_test_ply_XXXXXX", vc_test_tmp_dir());
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp(%s): %s", path, strerror(errno));
  if (fd >= 0) close(fd);
}

static void test_ply_file_errors(void) {
  char path[512], want[256], err[256];
  vc_ply p;
  snprintf(path, sizeof path, "%s/vc_no_such_dir_for_tests/x.ply", vc_test_tmp_dir());
  snprintf(want, sizeof want, "cannot open: %s", strerror(ENOENT));
  expect_msg("missing file", vc_ply_read(path, &p, err, sizeof err), err, want);
  snprintf(want, sizeof want, "cannot read: %s", strerror(EISDIR));
  expect_msg("directory", vc_ply_read(vc_test_tmp_dir(), &p, err, sizeof err), err, want);
  tmp_file(path, sizeof path);
  expect_msg("empty file", vc_ply_read(path, &p, err, sizeof err), err, "empty file");
  CHECK(p.xyz == NULL && p.n_vertices == 0, "*out not zeroed");

  int32_t c[4] = {0, 1, 2, 3};
  expect_msg("bad size", vc_ply_write_voxels(path, c, 1, 0.0, err, sizeof err), err,
             "voxel size 0 is not a positive finite number");
  expect_msg("negative n", vc_ply_write_voxels(path, c, -1, 1.0, err, sizeof err), err,
             "bad arguments (path set, -1 voxels, coords set)");
  expect_msg("NULL coords", vc_ply_write_voxels(path, NULL, 2, 1.0, err, sizeof err), err,
             "bad arguments (path set, 2 voxels, coords NULL)");
  unlink(path);
  snprintf(path, sizeof path, "%s/vc_no_such_dir_for_tests/x.ply", vc_test_tmp_dir());
  snprintf(want, sizeof want, "cannot open for writing: %s", strerror(ENOENT));
  expect_msg("unwritable", vc_ply_write_voxels(path, c, 1, 1.0, err, sizeof err), err, want);
  if (access("/dev/full", W_OK) == 0) {
    snprintf(want, sizeof want, "write failed: %s", strerror(ENOSPC));
    expect_msg("full disk", vc_ply_write_voxels("/dev/full", c, 1, 1.0, err, sizeof err), err, want);
  }
}

/* ---- voxelisation ------------------------------------------------------------------------------ */

/* The lexicographic order of (i, j, k) cells. */
static int cmp_cell(const void *a, const void *b) {
  const int32_t *x = a, *y = b;
  for (int k = 0; k < 3; k++)
    if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
  return 0;
}

/* Voxelises and checks the shape of the result: batch column, strictly ascending (i, j, k). */
static int32_t *voxelize_ok(const vc_ply *p, double size, int32_t batch, int64_t *n) {
  int32_t *c = NULL;
  char err[256] = "";
  int rc = vc_voxelize(p, size, batch, &c, n, err, sizeof err);
  CHECK(rc == 0 && c, "vc_voxelize(size %g): %s", size, err);
  if (rc) {
    *n = 0;
    return NULL;
  }
  for (int64_t i = 0; i < *n; i++) {
    CHECK(c[4 * i] == batch, "row %lld batch %d", (long long)i, c[4 * i]);
    if (i) {
      bool asc = cmp_cell(c + 4 * (i - 1) + 1, c + 4 * i + 1) < 0;
      CHECK(asc, "rows %lld and %lld out of order or repeated", (long long)i - 1, (long long)i);
      if (!asc) break;
    }
  }
  return c;
}

/* Whether (i, j, k) is a site (binary search of the ascending rows). */
static bool has_site(const int32_t *c, int64_t n, int64_t i, int64_t j, int64_t k) {
  if (i != (int32_t)i || j != (int32_t)j || k != (int32_t)k) return false; /* past int32: no site */
  const int32_t key[3] = {(int32_t)i, (int32_t)j, (int32_t)k};
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (cmp_cell(c + 4 * mid + 1, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && cmp_cell(c + 4 * lo + 1, key) == 0;
}

/* Akenine-Moeller's separating-axis test of a triangle (voxel units) against the box
 * [lo, hi] per axis: an independent oracle for the clipping rasteriser. Any axis that
 * separates proves the two apart, so degenerate triangles need no special case. */
static bool tri_box(const double tv[3][3], const double lo[3], const double hi[3]) {
  double v[3][3], e[3][3], axes[13][3], h[3];
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 3; a++) v[i][a] = tv[i][a] - 0.5 * (lo[a] + hi[a]);
  for (int a = 0; a < 3; a++) h[a] = 0.5 * (hi[a] - lo[a]);
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 3; a++) e[i][a] = v[(i + 1) % 3][a] - v[i][a];
  int n = 0;
  for (int a = 0; a < 3; a++, n++)
    for (int b = 0; b < 3; b++) axes[n][b] = a == b;
  axes[n][0] = e[0][1] * e[1][2] - e[0][2] * e[1][1];
  axes[n][1] = e[0][2] * e[1][0] - e[0][0] * e[1][2];
  axes[n][2] = e[0][0] * e[1][1] - e[0][1] * e[1][0];
  n++;
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 3; a++, n++) { /* e_i x unit_a */
      double u[3] = {0, 0, 0};
      u[a] = 1;
      axes[n][0] = e[i][1] * u[2] - e[i][2] * u[1];
      axes[n][1] = e[i][2] * u[0] - e[i][0] * u[2];
      axes[n][2] = e[i][0] * u[1] - e[i][1] * u[0];
    }
  for (int k = 0; k < n; k++) {
    const double *L = axes[k];
    double pmin = INFINITY, pmax = -INFINITY;
    for (int i = 0; i < 3; i++) {
      double d = v[i][0] * L[0] + v[i][1] * L[1] + v[i][2] * L[2];
      pmin = fmin(pmin, d), pmax = fmax(pmax, d);
    }
    double r = h[0] * fabs(L[0]) + h[1] * fabs(L[1]) + h[2] * fabs(L[2]);
    if (pmin > r || pmax < -r) return false;
  }
  return true;
}

/* Whether triangle tv meets cell (i, j, k) grown by `margin` on every side (shrunk when it is
 * negative). The floor rule's half-open cells lie between the two: with a margin of -1e-7 a
 * hit surely enters the cell, with +1e-7 a miss surely does not; rounding decides in between,
 * and the exact tests (cube, upper corners, flat triangles) cover the faces themselves. */
static bool tri_cell(const double tv[3][3], double i, double j, double k, double margin) {
  const double lo[3] = {i - margin, j - margin, k - margin}, hi[3] = {i + 1 + margin, j + 1 + margin, k + 1 + margin};
  return tri_box(tv, lo, hi);
}

/* A mesh in memory: vertices and triangles as vc_ply holds them. */
static vc_ply mesh_of(const double *xyz, int nv, const int64_t *tris, int nt) {
  vc_ply p = {malloc(sizeof(double) * 3 * (size_t)nv), nv, nt ? malloc(sizeof(int64_t) * 3 * (size_t)nt) : NULL, nt};
  memcpy(p.xyz, xyz, sizeof(double) * 3 * (size_t)nv);
  if (nt) memcpy(p.tris, tris, sizeof(int64_t) * 3 * (size_t)nt);
  return p;
}

/* Voxel-unit corners of triangle t of p at this size. */
static void triangle_at(const vc_ply *p, int64_t t, double size, double tv[3][3]) {
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 3; a++) tv[i][a] = p->xyz[3 * p->tris[3 * t + i] + a] / size;
}

/* No cell the surface enters is missing, judged by the oracle triangle by triangle: every
 * cell a triangle surely meets is a site (no holes, no missed corners),
 * every point of a fine barycentric sampling lies in a site (the floor rule on cell faces),
 * and so does every vertex. */
static void check_no_missing_sites(const char *what, const vc_ply *p, double size, const int32_t *c, int64_t n) {
  int misses = 0, unsampled = 0;
  for (int64_t t = 0; t < p->n_tris; t++) {
    double tv[3][3], lo[3], hi[3];
    triangle_at(p, t, size, tv);
    for (int a = 0; a < 3; a++) {
      lo[a] = floor(fmin(tv[0][a], fmin(tv[1][a], tv[2][a]))) - 1;
      hi[a] = floor(fmax(tv[0][a], fmax(tv[1][a], tv[2][a]))) + 1;
    }
    for (double i = lo[0]; i <= hi[0]; i++)
      for (double j = lo[1]; j <= hi[1]; j++)
        for (double k = lo[2]; k <= hi[2]; k++) {
          if (!has_site(c, n, (int64_t)i, (int64_t)j, (int64_t)k) && tri_cell(tv, i, j, k, -1e-7)) misses++;
        }
    /* Samples within rounding of a cell face are left to the exact tests (cube, flat). */
    const int steps = 48;
    for (int a = 0; a <= steps; a++)
      for (int b = 0; a + b <= steps; b++) {
        double wa = (double)a / steps, wb = (double)b / steps, wc = 1 - wa - wb, q[3];
        bool clear = true;
        for (int x = 0; x < 3; x++) {
          q[x] = wa * tv[0][x] + wb * tv[1][x] + wc * tv[2][x];
          clear = clear && floor(q[x] - 1e-9) == floor(q[x] + 1e-9);
        }
        if (clear && !has_site(c, n, (int64_t)floor(q[0]), (int64_t)floor(q[1]), (int64_t)floor(q[2]))) unsampled++;
      }
  }
  for (int64_t v = 0; v < p->n_vertices; v++) {
    int64_t cell[3];
    for (int a = 0; a < 3; a++) cell[a] = (int64_t)floor(p->xyz[3 * v + a] / size);
    if (!has_site(c, n, cell[0], cell[1], cell[2])) misses++;
  }
  CHECK(misses == 0, "%s (size %g): %d cells the surface enters are not sites", what, size, misses);
  CHECK(unsampled == 0, "%s (size %g): %d surface samples outside every site", what, size, unsampled);
}

/* No site is off the surface: a triangle may meet each one (oracle), or it holds a vertex. */
static void check_no_far_sites(const char *what, const vc_ply *p, double size, const int32_t *c, int64_t n) {
  int far = 0;
  for (int64_t s = 0; s < n; s++) {
    const int32_t *cell = c + 4 * s + 1;
    bool near = false;
    for (int64_t t = 0; t < p->n_tris && !near; t++) {
      double tv[3][3];
      triangle_at(p, t, size, tv);
      near = tri_cell(tv, cell[0], cell[1], cell[2], 1e-7);
    }
    for (int64_t v = 0; v < p->n_vertices && !near; v++) {
      bool same = true;
      for (int a = 0; a < 3; a++) same = same && floor(p->xyz[3 * v + a] / size) == cell[a];
      near = same;
    }
    far += !near;
  }
  CHECK(far == 0, "%s (size %g): %d sites meet no triangle and hold no vertex", what, size, far);
}

static void test_ply_voxelize_triangles_vs_oracle(void) {
  for (int it = 0; it < 60; it++) {
    double size = vc_rand_uniform(0.1, 1.0), xyz[9];
    for (int i = 0; i < 9; i++) xyz[i] = vc_rand_uniform(-2, 2);
    int kind = it % 6;
    if (kind == 1) /* on grid planes: exact face and edge contacts */
      for (int i = 0; i < 9; i++) xyz[i] = size * (double)vc_rand_int(-4, 4);
    if (kind == 2) /* collinear */
      for (int a = 0; a < 3; a++) xyz[6 + a] = xyz[a] + 0.375 * (xyz[3 + a] - xyz[a]);
    if (kind == 3) /* one point */
      for (int a = 0; a < 3; a++) xyz[3 + a] = xyz[6 + a] = xyz[a];
    if (kind == 4) /* a sliver */
      for (int a = 0; a < 3; a++) xyz[6 + a] = xyz[a] + 1e-9 * (double)(a + 1);
    if (kind == 5) /* flat in z on a cell face: the face belongs to the cell above */
      for (int i = 0; i < 3; i++) xyz[3 * i + 2] = 2 * size;
    const int64_t tri[3] = {0, 1, 2};
    vc_ply p = mesh_of(xyz, 3, tri, 1);
    int64_t n;
    int32_t *c = voxelize_ok(&p, size, 7, &n);
    char what[64];
    snprintf(what, sizeof what, "triangle %d (kind %d)", it, kind);
    if (c) {
      check_no_missing_sites(what, &p, size, c, n);
      check_no_far_sites(what, &p, size, c, n);
      if (kind == 5)
        for (int64_t s = 0; s < n; s++) CHECK(c[4 * s + 3] == 2, "%s: site with k = %d", what, c[4 * s + 3]);
    }
    free(c);
    vc_ply_free(&p);
  }
}

/* An axis-aligned cube [0, 4]^3 (in units of the voxel size) as six quads fanned by the reader:
 * its sites are exactly the shell of {0..4}^3 (the faces at 4 belong to cells 4). */
static void test_ply_voxelize_cube_exact(void) {
  static const char text[] = "ply\nformat ascii 1.0\nelement vertex 8\n" XYZ
                             "element face 6\nproperty list uchar int vertex_indices\nend_header\n"
                             "0 0 0\n4 0 0\n4 4 0\n0 4 0\n0 0 4\n4 0 4\n4 4 4\n0 4 4\n"
                             "4 0 3 2 1\n4 4 5 6 7\n4 0 1 5 4\n4 1 2 6 5\n4 2 3 7 6\n4 3 0 4 7\n";
  vc_ply p;
  parse_ok(text, sizeof text - 1, &p);
  CHECK(p.n_tris == 12, "%lld triangles", (long long)p.n_tris);
  const double sizes[3] = {1.0, 0.5, 4.0 / 3.0};
  const int cells[3] = {5, 9, 4}; /* per axis: 0..4, 0..8, and 0..3 at size 4/3 */
  for (int s = 0; s < 3; s++) {
    int64_t n;
    int32_t *c = voxelize_ok(&p, sizes[s], 0, &n);
    int m = cells[s];
    int64_t want = (int64_t)m * m * m - (int64_t)(m - 2) * (m - 2) * (m - 2);
    CHECK(n == want, "size %g: %lld sites, expected the %lld of a %d^3 shell", sizes[s], (long long)n,
          (long long)want, m);
    for (int64_t i = 0; c && i < n; i++) {
      bool shell = false, inside = true;
      for (int a = 0; a < 3; a++) {
        int v = c[4 * i + 1 + a];
        inside = inside && v >= 0 && v < m;
        shell = shell || v == 0 || v == m - 1;
      }
      CHECK(inside && shell, "size %g: site (%d, %d, %d) off the shell", sizes[s], c[4 * i + 1], c[4 * i + 2],
            c[4 * i + 3]);
    }
    free(c);
  }
  vc_ply_free(&p);
}

/* The half-open rule inside the vertices' cell box: the triangle x - y >= 1, x <= 4, y >= 0
 * (in the plane of axes a, b, the third at 0.5; dyadic, so no rounding) enters cell (i, j)
 * exactly when 0 <= j < i <= 4. Cells (1, 1), (2, 2), (3, 3) touch it only at their corner
 * (i + 1, j): on their upper face in a and are not sites. 10 sites, for each axis a. */
static void test_ply_voxelize_upper_face_contacts(void) {
  const double corner[3][2] = {{1, 0}, {4, 0}, {4, 3}};
  for (int axis = 0; axis < 3; axis++)
    for (int s = 0; s < 2; s++) {
      double size = s ? 0.25 : 1, xyz[9];
      int a = axis, b = (axis + 1) % 3, third = (axis + 2) % 3;
      for (int v = 0; v < 3; v++) {
        xyz[3 * v + a] = corner[v][0] * size, xyz[3 * v + b] = corner[v][1] * size;
        xyz[3 * v + third] = 0.5 * size;
      }
      const int64_t tri[3] = {0, 1, 2};
      vc_ply p = mesh_of(xyz, 3, tri, 1);
      int64_t n;
      int32_t *c = voxelize_ok(&p, size, 0, &n);
      CHECK(n == 10, "axes %d, %d at size %g: %lld sites, expected 10", a, b, size, (long long)n);
      for (int64_t i = 0; c && i < n; i++) {
        const int32_t *r = c + 4 * i + 1;
        CHECK(0 <= r[b] && r[b] < r[a] && r[a] <= 4 && r[third] == 0, "axes %d, %d: site (%d, %d, %d)", a, b, r[0],
              r[1], r[2]);
      }
      free(c);
      vc_ply_free(&p);
    }
}

/* Flood fill from outside the sites' box through non-sites (6-connected): a closed surface
 * leaves every cell whose centre lies strictly inside it unreached. inside(x, arg) is the
 * solid's test on a world point. Returns how many inside cells were found (not sites). */
static int64_t flood_check(const char *what, const int32_t *c, int64_t n, double size,
                           bool (*inside)(const double *x, const void *arg), const void *arg) {
  if (!n) return 0;
  int64_t lo[3], hi[3], d[3];
  for (int a = 0; a < 3; a++) lo[a] = hi[a] = c[1 + a];
  for (int64_t s = 0; s < n; s++)
    for (int a = 0; a < 3; a++) {
      if (c[4 * s + 1 + a] < lo[a]) lo[a] = c[4 * s + 1 + a];
      if (c[4 * s + 1 + a] > hi[a]) hi[a] = c[4 * s + 1 + a];
    }
  for (int a = 0; a < 3; a++) lo[a]--, hi[a]++, d[a] = hi[a] - lo[a] + 1;
  int64_t cells = d[0] * d[1] * d[2];
  unsigned char *st = calloc((size_t)cells, 1); /* 1 site, 2 reached */
  int64_t *queue = malloc(sizeof(int64_t) * (size_t)cells), head = 0, tail = 0;
  for (int64_t s = 0; s < n; s++)
    st[((c[4 * s + 1] - lo[0]) * d[1] + (c[4 * s + 2] - lo[1])) * d[2] + (c[4 * s + 3] - lo[2])] = 1;
  st[0] = 2, queue[tail++] = 0;
  while (head < tail) {
    int64_t f = queue[head++], k = f % d[2], j = f / d[2] % d[1], i = f / (d[1] * d[2]);
    const int64_t nb[6][3] = {{i - 1, j, k}, {i + 1, j, k}, {i, j - 1, k}, {i, j + 1, k}, {i, j, k - 1}, {i, j, k + 1}};
    for (int q = 0; q < 6; q++) {
      if (nb[q][0] < 0 || nb[q][1] < 0 || nb[q][2] < 0 || nb[q][0] >= d[0] || nb[q][1] >= d[1] || nb[q][2] >= d[2])
        continue;
      int64_t g = (nb[q][0] * d[1] + nb[q][1]) * d[2] + nb[q][2];
      if (!st[g]) st[g] = 2, queue[tail++] = g;
    }
  }
  int64_t leaked = 0, interior = 0;
  for (int64_t f = 0; f < cells; f++) {
    double x[3] = {((double)(f / (d[1] * d[2]) + lo[0]) + 0.5) * size, ((double)(f / d[2] % d[1] + lo[1]) + 0.5) * size,
                   ((double)(f % d[2] + lo[2]) + 0.5) * size};
    if (st[f] == 1 || !inside(x, arg)) continue;
    interior++;
    leaked += st[f] == 2;
  }
  CHECK(leaked == 0, "%s (size %g): the outside reaches %lld of %lld inside cells: a hole", what, size,
        (long long)leaked, (long long)interior);
  free(st);
  free(queue);
  return interior;
}

typedef struct octa {
  double r, rot[9], centre[3];
} octa;

static bool octa_inside(const double *x, const void *arg) {
  const octa *o = arg;
  double u[3], d[3] = {x[0] - o->centre[0], x[1] - o->centre[1], x[2] - o->centre[2]};
  for (int a = 0; a < 3; a++) u[a] = o->rot[a] * d[0] + o->rot[3 + a] * d[1] + o->rot[6 + a] * d[2]; /* R^T d */
  return fabs(u[0]) + fabs(u[1]) + fabs(u[2]) < o->r * (1 - 1e-9);
}

/* A random rotation from a random unit quaternion. */
static void rand_rotation(double *m) {
  double q[4], s = 0;
  for (int i = 0; i < 4; i++) q[i] = vc_rand_uniform(-1, 1), s += q[i] * q[i];
  s = sqrt(s);
  for (int i = 0; i < 4; i++) q[i] /= s;
  double w = q[0], x = q[1], y = q[2], z = q[3];
  const double r[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
                       2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                       2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
  memcpy(m, r, sizeof r);
}

static void test_ply_voxelize_closed_octahedra_have_no_holes(void) {
  static const int64_t tris[24] = {0, 2, 4, 2, 1, 4, 1, 3, 4, 3, 0, 4, 2, 0, 5, 1, 2, 5, 3, 1, 5, 0, 3, 5};
  int64_t total_interior = 0;
  for (int it = 0; it < 12; it++) {
    octa o;
    o.r = vc_rand_uniform(0.2, 1.0);
    rand_rotation(o.rot);
    for (int a = 0; a < 3; a++) o.centre[a] = vc_rand_uniform(-1, 1);
    double xyz[18];
    for (int v = 0; v < 6; v++) {
      double u[3] = {0, 0, 0};
      u[v / 2] = v % 2 ? -o.r : o.r;
      for (int a = 0; a < 3; a++)
        xyz[3 * v + a] = o.centre[a] + o.rot[3 * a] * u[0] + o.rot[3 * a + 1] * u[1] + o.rot[3 * a + 2] * u[2];
    }
    vc_ply p = mesh_of(xyz, 6, tris, 8);
    double size = vc_rand_uniform(0.04, 0.3);
    int64_t n;
    int32_t *c = voxelize_ok(&p, size, 0, &n);
    if (c) {
      total_interior += flood_check("octahedron", c, n, size, octa_inside, &o);
      check_no_far_sites("octahedron", &p, size, c, n);
      if (it < 4) check_no_missing_sites("octahedron", &p, size, c, n);
    }
    free(c);
    vc_ply_free(&p);
  }
  CHECK(total_interior > 0, "no octahedron had an interior cell: the test checked nothing");
}

/* Points alone: the unique floor cells, sorted, compared with a direct computation. */
static void test_ply_voxelize_points(void) {
  enum { N = 3000 };
  double *xyz = malloc(sizeof(double) * 3 * N);
  int32_t *want = malloc(sizeof(int32_t) * 3 * N);
  double size = vc_rand_uniform(0.05, 0.5);
  for (int i = 0; i < N; i++)
    for (int a = 0; a < 3; a++) {
      /* half on cell faces (exact multiples of size), repeats included */
      double x = i % 2 ? size * (double)vc_rand_int(-30, 30) : vc_rand_uniform(-3, 3);
      xyz[3 * i + a] = x;
      want[3 * i + a] = (int32_t)floor(x / size);
    }
  qsort(want, N, 3 * sizeof(int32_t), cmp_cell);
  int64_t m = 0;
  for (int i = 0; i < N; i++)
    if (m == 0 || cmp_cell(want + 3 * (m - 1), want + 3 * i)) memmove(want + 3 * m++, want + 3 * i, 3 * sizeof(int32_t));
  vc_ply p = mesh_of(xyz, N, NULL, 0);
  int64_t n;
  int32_t *c = voxelize_ok(&p, size, 4095, &n);
  CHECK(n == m, "%lld sites, expected %lld", (long long)n, (long long)m);
  for (int64_t i = 0; c && n == m && i < n; i++)
    if (memcmp(c + 4 * i + 1, want + 3 * i, 3 * sizeof(int32_t))) {
      CHECK(false, "site %lld differs", (long long)i);
      break;
    }
  free(c);
  vc_ply_free(&p);
  free(xyz);
  free(want);

  vc_ply empty = {NULL, 0, NULL, 0};
  c = voxelize_ok(&empty, 1.0, 0, &n);
  CHECK(c && n == 0, "an empty model gives %lld sites", (long long)n);
  free(c);
}

/* vc_ply_write_voxels -> vc_ply_read -> vc_voxelize gives the sites back, the range ends too. */
static void test_ply_write_read_voxelize_round_trip(void) {
  const double sizes[3] = {0.37, 1.0, 1000.0};
  for (int s = 0; s < 3; s++) {
    enum { N = 500 };
    int32_t *c = vc_rand_coords(N, 1, -200, 200);
    const int32_t ends[2][4] = {{0, VC_COORD_MIN, VC_COORD_MAX, VC_COORD_MIN}, {0, VC_COORD_MAX, VC_COORD_MIN, -1}};
    memcpy(c, ends, sizeof ends);
    char path[512], err[256] = "";
    tmp_file(path, sizeof path);
    CHECK(vc_ply_write_voxels(path, c, N, sizes[s], err, sizeof err) == 0, "write: %s", err);
    vc_ply p;
    CHECK(vc_ply_read(path, &p, err, sizeof err) == 0, "read back: %s", err);
    unlink(path);
    int64_t n;
    int32_t *back = voxelize_ok(&p, sizes[s], 0, &n);
    CHECK(n == N, "size %g: %lld sites back of %d", sizes[s], (long long)n, N);
    bool same = back && n == N;
    for (int64_t i = 0; same && i < n; i++) same = has_site(back, n, c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]);
    CHECK(same, "size %g: the sites read back differ", sizes[s]);
    free(back);
    free(c);
    vc_ply_free(&p);
  }
}

static void test_ply_voxel_size_for(void) {
  const double xyz[6] = {-1, 0, 2, 3, 1, 2.5};
  vc_ply p = mesh_of(xyz, 2, NULL, 0);
  double size = 0;
  char err[256] = "";
  CHECK(vc_voxel_size_for(&p, 8, &size, err, sizeof err) == 0 && size == 0.5, "size %g: %s", size, err);
  int64_t n;
  int32_t *c = voxelize_ok(&p, size, 0, &n);
  CHECK(n == 2 && c && c[1] == -2 && c[5] == 6, "the box ends land in cells -2 and 6 of an 8-cell span");
  free(c);
  expect_msg("resolution", vc_voxel_size_for(&p, 0, &size, err, sizeof err), err, "resolution 0 is not positive");
  p.xyz[3] = -1, p.xyz[4] = 0, p.xyz[5] = 2;
  expect_msg("one point", vc_voxel_size_for(&p, 8, &size, err, sizeof err), err,
             "all vertices lie at one point: there is no extent to fit");
  p.xyz[0] = -1e308, p.xyz[3] = 1e308;
  expect_msg("huge extent", vc_voxel_size_for(&p, 8, &size, err, sizeof err), err,
             "the vertices' extent inf gives no usable voxel size at resolution 8");
  p.xyz[4] = NAN;
  expect_msg("NaN", vc_voxel_size_for(&p, 8, &size, err, sizeof err), err, "vertex 1: coordinate is not finite");
  vc_ply_free(&p);
  vc_ply empty = {NULL, 0, NULL, 0};
  expect_msg("empty", vc_voxel_size_for(&empty, 8, &size, err, sizeof err), err, "no vertices to fit");
  expect_msg("NULL", vc_voxel_size_for(NULL, 8, &size, err, sizeof err), err, "NULL or inconsistent argument");
}

static void test_ply_voxelize_errors(void) {
  const double xyz[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  const int64_t tri[3] = {0, 1, 2};
  vc_ply p = mesh_of(xyz, 3, tri, 1);
  int32_t *c = (int32_t *)&p;
  int64_t n = 77;
  char err[256];
  const double bad[4] = {0, -1, NAN, INFINITY};
  const char *const bad_msg[4] = {"voxel size 0 is not a positive finite number", "voxel size -1 is not a positive finite number",
                                  "voxel size nan is not a positive finite number",
                                  "voxel size inf is not a positive finite number"};
  for (int i = 0; i < 4; i++) {
    expect_msg("size", vc_voxelize(&p, bad[i], 0, &c, &n, err, sizeof err), err, bad_msg[i]);
    CHECK(c == NULL && n == 0, "outputs not cleared on failure");
  }
  expect_msg("batch", vc_voxelize(&p, 1, -1, &c, &n, err, sizeof err), err, "batch -1 is outside [0, 4096)");
  expect_msg("batch", vc_voxelize(&p, 1, 4096, &c, &n, err, sizeof err), err, "batch 4096 is outside [0, 4096)");
  expect_msg("NULL", vc_voxelize(NULL, 1, 0, &c, &n, err, sizeof err), err, "NULL or inconsistent argument");
  expect_msg("NULL", vc_voxelize(&p, 1, 0, NULL, &n, err, sizeof err), err, "NULL or inconsistent argument");

  /* The coordinate range: the last cells on either side are fine, one further is an error. */
  p.xyz[3] = 65535.99, p.xyz[4] = -65536;
  CHECK(vc_voxelize(&p, 1, 0, &c, &n, err, sizeof err) == 0, "range ends: %s", err);
  free(c);
  p.xyz[3] = 65536;
  expect_msg("x", vc_voxelize(&p, 1, 0, &c, &n, err, sizeof err), err,
             "vertex 1: voxel index 65536 on axis x is outside [-65536, 65535] at voxel size 1");
  p.xyz[3] = 1, p.xyz[7] = -65536.5;
  expect_msg("y", vc_voxelize(&p, 1, 0, &c, &n, err, sizeof err), err,
             "vertex 2: voxel index -65537 on axis y is outside [-65536, 65535] at voxel size 1");
  p.xyz[7] = 1, p.xyz[2] = 1e300;
  expect_msg("z", vc_voxelize(&p, 0.5, 0, &c, &n, err, sizeof err), err,
             "vertex 0: voxel index 2e+300 on axis z is outside [-65536, 65535] at voxel size 0.5");
  p.xyz[2] = 1e300;
  expect_msg("overflow", vc_voxelize(&p, 1e-300, 0, &c, &n, err, sizeof err), err,
             "vertex 0: voxel index inf on axis z is outside [-65536, 65535] at voxel size 1e-300");
  p.xyz[2] = NAN;
  expect_msg("NaN", vc_voxelize(&p, 1, 0, &c, &n, err, sizeof err), err, "vertex 0: coordinate is not finite");
  p.xyz[2] = 0;
  p.tris[1] = 3;
  expect_msg("index", vc_voxelize(&p, 1, 0, &c, &n, err, sizeof err), err,
             "triangle 0: vertex index 3 is outside [0, 3)");
  p.tris[1] = -1;
  expect_msg("index", vc_voxelize(&p, 1, 0, &c, &n, err, sizeof err), err,
             "triangle 0: vertex index -1 is outside [0, 3)");
  p.tris[1] = 1;

  /* The work bound: a triangle of 60 x 60 world units at 0.001 could cover ~6e9 cells. It
   * fails at once, before any work (this test would take hours otherwise). */
  p.xyz[3] = 60, p.xyz[4] = 0, p.xyz[7] = 60;
  expect_msg("limit", vc_voxelize(&p, 0.001, 0, &c, &n, err, sizeof err), err,
             "at voxel size 0.001 the surface could cover more than 268435456 voxels (the limit); use a larger voxel "
             "size");
  expect_msg("small limit", vc_voxelize_limited(&p, 1, 0, 100, &c, &n, err, sizeof err), err,
             "at voxel size 1 the surface could cover more than 100 voxels (the limit); use a larger voxel size");
  CHECK(vc_voxelize_limited(&p, 1, 0, 100000, &c, &n, err, sizeof err) == 0, "%s", err);
  free(c);
  vc_ply_free(&p);
}

/* ---- the shipped sample --------------------------------------------------------------------- */

/* The sample's torus knot (tools/gen/make_sample_ply.c): c(t) = ((2 + cos 3t) cos 2t,
 * (2 + cos 3t) sin 2t, -sin 3t), tube radius 0.4, sampled at N points. A point is inside when
 * its distance to the curve is below 0.9 of the tube radius, judged on the fine samples
 * near the nearest coarse one (every 16th), so that the whole box is cheap to test. */
enum { KNOT_N = 4096, KNOT_COARSE = 16 };
typedef struct knot {
  double c[KNOT_N][3];
} knot;

static double dist2(const double *a, const double *b) {
  return (a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]);
}

static bool knot_inside(const double *x, const void *arg) {
  const knot *k = arg;
  int best = 0;
  for (int i = 0; i < KNOT_N; i += KNOT_COARSE)
    if (dist2(x, k->c[i]) < dist2(x, k->c[best])) best = i;
  /* coarse samples lie ~0.08 apart: far from the nearest one is far from the curve */
  if (sqrt(dist2(x, k->c[best])) > 0.4 + 0.1) return false;
  double d = INFINITY;
  for (int i = best - KNOT_COARSE; i <= best + KNOT_COARSE; i++) d = fmin(d, dist2(x, k->c[(i + KNOT_N) % KNOT_N]));
  return sqrt(d) < 0.9 * 0.4;
}

static void test_ply_sample_shape(void) {
  vc_ply p;
  char err[256] = "";
  if (vc_ply_read("data/shape.ply", &p, err, sizeof err)) {
    CHECK(false, "data/shape.ply (run the tests from the repository root): %s", err);
    return;
  }
  CHECK(p.n_vertices == 4096 && p.n_tris == 8192, "%lld vertices, %lld triangles", (long long)p.n_vertices,
        (long long)p.n_tris);
  double size = 0;
  CHECK(vc_voxel_size_for(&p, 64, &size, err, sizeof err) == 0, "%s", err);
  int64_t n;
  int32_t *c = voxelize_ok(&p, size, 0, &n);
  CHECK(n == 11735, "data/shape.ply at resolution 64: %lld sites", (long long)n);
  free(c);
  /* At 80 the tube has an inside; the outside must not reach it. */
  CHECK(vc_voxel_size_for(&p, 80, &size, err, sizeof err) == 0, "%s", err);
  c = voxelize_ok(&p, size, 0, &n);
  knot *k = malloc(sizeof *k);
  for (int i = 0; i < KNOT_N; i++) {
    double t = 2 * 3.14159265358979323846 * i / KNOT_N, r = 2 + cos(3 * t);
    k->c[i][0] = r * cos(2 * t), k->c[i][1] = r * sin(2 * t), k->c[i][2] = -sin(3 * t);
  }
  if (c) CHECK(flood_check("data/shape.ply", c, n, size, knot_inside, k) > 0, "no inside cells found");
  free(k);
  free(c);
  vc_ply_free(&p);
}

const vc_test_case vc_tests_ply[] = {
    {"ply_round_trip_every_encoding_and_type", test_ply_round_trip_every_encoding_and_type},
    {"ply_crlf_comments_and_skipped_elements", test_ply_crlf_comments_and_skipped_elements},
    {"ply_points_only", test_ply_points_only},
    {"ply_errors_ascii_and_header", test_ply_errors_ascii_and_header},
    {"ply_errors_binary", test_ply_errors_binary},
    {"ply_file_errors", test_ply_file_errors},
    {"ply_voxelize_triangles_vs_oracle", test_ply_voxelize_triangles_vs_oracle},
    {"ply_voxelize_cube_exact", test_ply_voxelize_cube_exact},
    {"ply_voxelize_upper_face_contacts", test_ply_voxelize_upper_face_contacts},
    {"ply_voxelize_closed_octahedra_have_no_holes", test_ply_voxelize_closed_octahedra_have_no_holes},
    {"ply_voxelize_points", test_ply_voxelize_points},
    {"ply_write_read_voxelize_round_trip", test_ply_write_read_voxelize_round_trip},
    {"ply_voxel_size_for", test_ply_voxel_size_for},
    {"ply_voxelize_errors", test_ply_voxelize_errors},
    {"ply_sample_shape", test_ply_sample_shape},
    {NULL, NULL},
};
