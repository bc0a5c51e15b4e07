"""Independent pure-Python/NumPy reference of voxconv's kernel maps and conv passes, in f64:
dictionaries of sites, the geometry of DESIGN.md section 1 written out directly."""
import itertools

import numpy as np


def offsets(k, d):
    """(r, r*d per axis) in the flat order r = (r0*K1 + r1)*K2 + r2."""
    return [(r, tuple(o[a] * d[a] for a in range(3)))
            for r, o in enumerate(itertools.product(range(k[0]), range(k[1]), range(k[2])))]


def kernel_map(kind, coords, k, s=(1, 1, 1), p=None, d=(1, 1, 1), bound=None, paired=None):
    """(out_coords [M,4], pairs {r: [(in_row, out_row), ...] ascending by out_row})."""
    if p is None:
        p = tuple((k[a] // 2) * d[a] for a in range(3)) if kind == "submanifold" else (0, 0, 0)
    if kind == "inverse":
        _, ppairs = paired
        out = [tuple(c) for c in coords]  # the paired conv's inputs
        pairs = {r: sorted(((o, i) for i, o in lst), key=lambda t: t[1]) for r, lst in ppairs.items()}
        return np.array(out, dtype=np.int32).reshape(-1, 4), pairs
    rows = {tuple(int(v) for v in c): i for i, c in enumerate(coords)}
    offs = offsets(k, d)

    def ok(t):
        return bound is None or all(bound[a] <= 0 or 0 <= t[a] < bound[a] for a in range(3))

    if kind == "submanifold":
        out = [tuple(int(v) for v in c) for c in coords]
    else:
        reach = set()
        for c in rows:
            for r, o in offs:
                if kind == "sparse":
                    v = [c[a + 1] + p[a] - o[a] for a in range(3)]
                    if any(v[a] % s[a] for a in range(3)):
                        continue
                    t = tuple(v[a] // s[a] for a in range(3))
                else:
                    t = tuple(c[a + 1] * s[a] - p[a] + o[a] for a in range(3))
                if ok(t):
                    reach.add((c[0],) + t)
        out = sorted(reach)
    pairs = {r: [] for r, _ in offs}
    for j, c in enumerate(out):
        for r, o in offs:
            if kind == "transposed":
                v = [c[a + 1] + p[a] - o[a] for a in range(3)]
                if any(v[a] % s[a] for a in range(3)):
                    continue
                q = (c[0],) + tuple(v[a] // s[a] for a in range(3))
            else:
                q = (c[0],) + tuple(c[a + 1] * s[a] - p[a] + o[a] for a in range(3))
            if q in rows:
                pairs[r].append((rows[q], j))
    return np.array(out, dtype=np.int32).reshape(-1, 4), pairs


def forward(pairs, n_out, x, w, b=None):
    x, w = x.astype(np.float64), w.astype(np.float64)
    co = w.shape[0]
    wf = w.reshape(co, -1, w.shape[-1])
    y = np.zeros((n_out, co)) + (b.astype(np.float64) if b is not None else 0)
    for r, lst in pairs.items():
        for i, o in lst:
            y[o] += wf[:, r] @ x[i]
    return y


def backward_data(pairs, n_in, dy, w):
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    wf = w.reshape(w.shape[0], -1, w.shape[-1])
    dx = np.zeros((n_in, w.shape[-1]))
    for r, lst in pairs.items():
        for i, o in lst:
            dx[i] += dy[o] @ wf[:, r]
    return dx


def backward_weight(pairs, x, dy, kshape):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    co, ci = dy.shape[1], x.shape[1]
    dw = np.zeros((co, len(pairs), ci))
    for r, lst in pairs.items():
        for i, o in lst:
            dw[:, r] += np.outer(dy[o], x[i])
    return dw.reshape((co,) + tuple(kshape) + (ci,)), dy.sum(0)
