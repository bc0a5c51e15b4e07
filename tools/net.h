/* net.h — the voxel networks of `voxconv demo` and `voxconv run`: a stack of submanifold
 * layers or a sparse U-Net over any set of sites, on either device (device.h).
 *
 * Every pass of every layer runs with VC_ALGO_AUTO on the device's stream and is timed on
 * its own (CUDA events or the host clock); per layer the medians over the timed runs are
 * kept. With checking on, every pass of the first run is run again with VC_ALGO_REFERENCE
 * on a CPU context, from host copies of the same inputs, and per layer the largest relative
 * error is kept; DESIGN.md section 6's tolerances judge it (net_verdict).
 *
 * ReLUs and skip additions sit between the convolutions. They are not voxconv's work and
 * are not timed; on CUDA the ReLU goes through host memory (dev_map). Outputs are poisoned
 * before every pass, so an element a pass forgets shows up as a non-finite error.
 * Like device.h, failures print one line and exit with status 1.
 */
#ifndef VC_TOOLS_NET_H
#define VC_TOOLS_NET_H

#include "common.h"
#include "device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum net_kind { NET_UNET, NET_STACK } net_kind;
extern const char *const net_kind_names[]; /* "unet", "stack", NULL */

enum { NET_MAX_LAYERS = 64, NET_UNET_MAX_DEPTH = 8, NET_UNET_IN_CHANNELS = 4 };

/* One layer; layer i reads layer i-1's activation (the input features for i = 0). */
typedef struct net_spec {
  char name[12];
  vc_conv_kind kind;
  int32_t kernel, stride;
  int64_t ci, co;
  int paired; /* inverse: the strided layer whose plan it inverts; else -1 */
  int share;  /* an earlier layer with the same sites and geometry whose plans it reuses; else -1 */
  int skip;   /* the layer whose activation is added after this layer's ReLU; else -1 */
  bool relu;
} net_spec;

/* The layers of a network into out[NET_MAX_LAYERS]; returns their count, or 0 with one
 * line in err when depth or width do not fit.
 *   stack: `depth` submanifold 3x3x3 width -> width layers with bias and no activation,
 *          sharing one kernel map (suite S of BENCHMARKS.md); the input has `width` channels.
 *   unet:  a submanifold 3x3x3 stem NET_UNET_IN_CHANNELS -> width; per level k = 1..depth a
 *          2x2x2 stride-2 sparse conv and a submanifold conv, width * 2^k channels; per level
 *          back up an inverse conv (paired with that level's down) to width * 2^(k-1) plus
 *          the activation of the same sites on the way down (a skip); a submanifold head
 *          width -> max(width / 2, 1) sharing the stem's map. A ReLU after every layer but
 *          the head. Depth 2 and width 16 is `voxconv demo`'s network. */
int net_specs(net_kind kind, int depth, int64_t width, net_spec *out, char *err, size_t err_len);

typedef struct net_layer {
  net_spec s;
  vc_conv_args args;
  vc_plan *plan;     /* on the device; borrowed from layer s.share when it has one */
  vc_plan *ref_plan; /* the same on the reference context (checks only) */
  int64_t n_in, n_out, pairs;
  double map_ms;     /* plan build incl. synchronisation; < 0: plans shared */
  dev_params prm;
  void *z, *a;       /* conv output and activation [n_out, co]; a is z when there is no ReLU or skip */
  void *ga;          /* d loss / d a (training) */
  double fwd_ms, bwd_ms; /* medians of the timed runs; bwd: backward-data + backward-weight */
  double err;        /* largest relative error against the reference; < 0: not checked */
  const char *worst; /* the pass it came from */
} net_layer;

typedef struct net {
  vc_dev *dev;
  vc_dtype dt;
  bool train, check;
  vc_context *ref_ctx; /* the reference CPU context (checks only) */
  int n_layers;
  net_layer L[NET_MAX_LAYERS];
  void *x, *dx, *dz;      /* input features, their gradient, scratch for d loss / d conv output */
  workspace ws, ref_ws;   /* device memory; host memory */
  double ref_ms;          /* spent in the reference checks */
  const char *what;       /* the progress line's prefix */
} net;

/* Builds the network over coords (host memory, int32 [n, 4], unique sites): plans layer
 * by layer, each build timed, on dev and (check) on a reference CPU context; parameters;
 * random input features in [-1, 1); activation buffers, and with `train` the gradients and
 * a random top gradient. `what` prefixes the progress line ("run", "demo"). */
void net_create(net *nt, vc_dev *dev, vc_dtype dt, const net_spec *specs, int n_layers, const int32_t *coords,
                int64_t n, bool train, bool check, const char *what);

/* `warmup` untimed runs, then `reps` timed ones: a forward, and with training a backward
 * from the top gradient. Per layer the median times; the first run is the checked one. */
void net_run(net *nt, int warmup, int reps);

/* sum(y * g) over the head's output and the top gradient, in f64: a one-number
 * fingerprint of a training run. */
double net_loss(const net *nt);

/* The network's sums: pairs, map builds, pass times, useful FLOPs (2 * pairs * Ci * Co
 * per pass: forward, and backward-data and backward-weight when training), worst error. */
typedef struct net_total {
  int64_t pairs;
  double map_ms, fwd_ms, bwd_ms, flops, err;
} net_total;

/* Prints one row per layer (sites in and out, pairs, map build, median pass times, useful
 * GFLOP/s, and the error when checked) and the total row; returns the totals. */
net_total net_table(const net *nt);

/* Prints "verdict: PASS", or "verdict: FAIL (...)" naming each layer over the tolerance;
 * true on PASS. */
bool net_verdict(const net *nt);

void net_free(net *nt);

#endif
