/* shapes.h — procedural voxel shapes for the demo and the benchmarks.
 *
 * Every generator returns a malloc'd int32 [n, 4] coordinate list, rows (batch, x, y, z),
 * with unique sites inside the res^3 grid [0, res)^3, in ascending (x, y, z) order. The
 * caller frees it with free(). NULL means out of memory or a bad argument (res < 1, or a
 * batch outside [0, VC_BATCH_MAX)); *n is 0 then.
 */
#ifndef VC_TOOLS_SHAPES_H
#define VC_TOOLS_SHAPES_H

#include <stdint.h>

/* Suite S of BENCHMARKS.md: the sites whose centre (i + 0.5 per axis) lies at distance d
 * from the grid centre (res/2 per axis) with res/2 - 1.25 <= d <= res/2. This convention
 * reproduces the table's voxel counts (848 at res 16, ..., 4 113 056 at res 1024). */
int32_t *vc_shape_shell(int res, int32_t batch, int64_t *n);

/* A torus around the z axis through the grid centre, major radius 0.3*res, tube radius
 * 0.15*res: the sites whose distance t from the tube's centre circle satisfies
 * tube - 1.25 <= t <= tube, so the shell is as thick as vc_shape_shell's. */
int32_t *vc_shape_torus(int res, int32_t batch, int64_t *n);

/* One generator: res and batch in, coordinates and count out (as the two above). */
typedef int32_t *(*vc_shape_fn)(int res, int32_t batch, int64_t *n);

/* Concatenates count shapes, shape i generated with batch index i, into one list (batch 0
 * rows first). Returns NULL (and *n = 0) if any generator fails. Caller frees. */
int32_t *vc_shapes_batch(const vc_shape_fn *shapes, int count, int res, int64_t *n);

#endif
