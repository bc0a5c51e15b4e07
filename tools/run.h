/* run.h — `voxconv run FILE...`: a voxel network on the user's geometry (see run_about in
 * run.c). PLY files in (ply.h), voxelised with one voxel size, file i as batch item i; a
 * network of net.h over the sites with random features; neighbour statistics, per-layer
 * times and useful rates out, and optionally the voxel centres as a PLY file.
 */
#ifndef VC_TOOLS_RUN_H
#define VC_TOOLS_RUN_H

#include "cli.h"

enum { RUN_N_OPTS = 13 };
extern cli_option run_opts[RUN_N_OPTS];
extern cli_args run_files;
extern const char run_summary[], run_about[];
int run_main(void);

#endif
