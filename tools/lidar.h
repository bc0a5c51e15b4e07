/* lidar.h — synthetic LiDAR scans for suite L of BENCHMARKS.md.
 *
 * One scan is a street scene seen by a spinning 64-beam sensor 1.73 m above a flat ground
 * plane (vertical field +2 to -24.8 degrees, like an HDL-64E): buildings along both sides,
 * cars on the road, poles, tree trunks and pedestrians on the sidewalks (boxes and vertical
 * cylinders). Every beam is cast at `azimuths` angles per turn; the first hit within 60 m
 * (with +-1.5 cm range noise) is quantised to 5 cm voxels. At scale 1 (3072 azimuths,
 * 0.12 degrees) a scan holds about 100 000 unique voxels (88 k to 111 k for seeds 1 to 4;
 * fewer than rays, as near the sensor neighbouring rays share voxels). The voxel count
 * grows about linearly with the scale. Everything follows from the seed: the same
 * (batch, scale, seed) gives the same sites on every machine.
 */
#ifndef VC_TOOLS_LIDAR_H
#define VC_TOOLS_LIDAR_H

#include <stdint.h>

#define VC_LIDAR_VOXEL_M 0.05 /* voxel edge in metres */

/* `batch` scans, scan b with batch index b and scene seed + b, the azimuth count scaled
 * by `scale` (in (0, 4]). Returns a malloc'd int32 [n, 4] list of unique (b, x, y, z) sites
 * in ascending order, the sensor at the origin; NULL (and *n = 0) for a bad argument or
 * out of memory. The caller frees it. */
int32_t *vc_lidar_scans(int batch, double scale, uint64_t seed, int64_t *n);

#endif
