/* ply.h — PLY files in and out, and voxelising what they hold (`voxconv run`).
 *
 * The reader takes the three PLY encodings (ascii, binary_little_endian, binary_big_endian),
 * any scalar type for the vertex x, y, z properties (char ... double, and the int8 ... float64
 * aliases), other vertex properties skipped, and an optional face element whose
 * vertex_indices (or vertex_index) list is fanned into triangles. Other elements are skipped.
 *
 * Nothing in the file is trusted: every count is checked against the bytes actually present
 * before anything is allocated, so a lying header fails with a message instead of a huge
 * allocation, and memory and time stay proportional to the file's size. Coordinates must be
 * finite and face indices within the vertex count; a file with no vertices is an error.
 * ascii "float" values are rounded to float, as a binary file would hold them.
 *
 * Every function returns 0 on success. Failures return -1 and write one line, without a
 * trailing newline, into err (e.g. "vertex 12: coordinate is not finite"); the caller
 * prefixes the file name. The messages are fixed: tests/test_ply.c lists each one.
 *
 * Voxel grid: world-aligned, voxel (i, j, k) holds the points with floor(p / size) = (i, j, k)
 * per axis, so the centres written by vc_ply_write_voxels ((i + 0.5) * size) voxelise back to
 * the same sites at the same size.
 */
#ifndef VC_TOOLS_PLY_H
#define VC_TOOLS_PLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vc_ply {
  double *xyz;        /* [n_vertices, 3] */
  int64_t n_vertices;
  int64_t *tris;      /* [n_tris, 3] vertex indices, each < n_vertices */
  int64_t n_tris;
} vc_ply;

/* Parses a whole PLY file held in memory (the fuzzer's entry). *out is zeroed on failure;
 * on success it owns its arrays (vc_ply_free). */
int vc_ply_parse(const unsigned char *data, size_t len, vc_ply *out, char *err, size_t err_len);

/* Reads and parses a file; an empty or unreadable file is an error. */
int vc_ply_read(const char *path, vc_ply *out, char *err, size_t err_len);

/* Frees p's arrays and zeroes it; NULL is fine. */
void vc_ply_free(vc_ply *p);

/* Voxelises p at voxel edge `size` (> 0, finite) into batch `batch`: every vertex, and with
 * triangles every voxel the triangle surface passes through (not only its corners). Sites
 * are unique, rows (batch, i, j, k), ascending (i, j, k). A site outside
 * [VC_COORD_MIN, VC_COORD_MAX] is an error that names the vertex, not a silent clip.
 * *coords is malloc'd; the caller frees it.
 *
 * "Passes through" is exact up to rounding: voxel v is a site when the closed triangle
 * meets the half-open cell [v, v + 1) * size, the same rule as for points, so a closed mesh
 * gives a surface without holes at any size (found by clipping each triangle to the cells
 * of its bounding box, not by sampling it). The work is bounded before it starts: when the
 * vertices and triangles could cover more than VC_VOXELIZE_MAX_SITES voxels (a bound from
 * each triangle's area and perimeter) the call fails instead of running for hours. With no
 * vertices the result is 0 sites (*coords still malloc'd). */
int vc_voxelize(const vc_ply *p, double size, int32_t batch, int32_t **coords, int64_t *n, char *err,
                size_t err_len);

#define VC_VOXELIZE_MAX_SITES (INT64_C(1) << 28)

/* vc_voxelize with another bound on the covered voxels (the fuzzer keeps it small). */
int vc_voxelize_limited(const vc_ply *p, double size, int32_t batch, int64_t max_sites, int32_t **coords,
                        int64_t *n, char *err, size_t err_len);

/* The voxel size that fits p's largest bounding-box extent into `resolution` voxels:
 * extent / resolution. The grid is world-aligned, so that axis spans resolution or
 * resolution + 1 voxels (its ends rarely fall on cell boundaries). Fails for resolution < 1,
 * no vertices, or all vertices at one point (no extent to fit). */
int vc_voxel_size_for(const vc_ply *p, int resolution, double *size, char *err, size_t err_len);

/* 0 when size is a usable voxel edge (> 0 and finite), else -1 with the message. */
int vc_voxel_size_check(double size, char *err, size_t err_len);

/* Writes the voxel centres as a binary little-endian PLY (float x, y, z and int batch per
 * vertex) that any viewer opens and vc_ply_read reads back. */
int vc_ply_write_voxels(const char *path, const int32_t *coords, int64_t n, double size, char *err,
                        size_t err_len);

/* Site (b, x, y, z) as a 64-bit key: the batch from bit 51, each axis biased by -VC_COORD_MIN
 * in 17 bits, so ascending keys are ascending sites. The site must be in voxconv.h's range. */
uint64_t vc_site_key(int64_t b, int64_t x, int64_t y, int64_t z);

/* The unique sites of keys[0..count) (repeats allowed), ascending, as a malloc'd int32
 * [*n, 4] list (never NULL on success, even for no sites). Takes keys, a malloc'd array, and
 * frees it. NULL (and *n = 0) when out of memory. */
int32_t *vc_sites_from_keys(uint64_t *keys, int64_t count, int64_t *n);

/* Grows *p (of *cap elements of `size` bytes, `first` of them at the first growth) to hold
 * element n; false when out of memory (*p stays as it was). */
bool vc_ply_grow(void **p, size_t *cap, size_t n, size_t size, size_t first);

/* The failure convention of this header: formats one line into err (when err_len > 0) and
 * returns -1. */
int vc_ply_error(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
