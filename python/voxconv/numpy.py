"""The conv passes on NumPy arrays, through the CPU context: for scripts without torch.

    import numpy as np, voxconv.numpy as vnp
    conv = vnp.SparseConv(coords, "submanifold", kernel_size=3)      # coords: int32 [N, 4]
    y = conv.forward(x, w, bias)                                     # x [N, Ci], w [Co, 3, 3, 3, Ci]
    dx = conv.backward_data(dy, w)
    dw, db = conv.backward_weight(x, dy)

float32 and float16 arrays are supported (NumPy has no bfloat16). Inputs are made
C-contiguous; outputs are new arrays.
"""
import ctypes

import numpy as np

from . import _capi

_DTYPES = {np.dtype(np.float32): _capi.DTYPE_F32, np.dtype(np.float16): _capi.DTYPE_F16}
_MATHS = {"f32": _capi.MATH_F32, "tf32": _capi.MATH_TF32}


def context():
    """The process's CPU context (created on first use)."""
    return _capi.context("cpu")


def _ptr(a):
    return ctypes.c_void_p(a.ctypes.data) if a is not None and a.size else None


def _coords(coords, what="coords"):
    c = np.ascontiguousarray(coords, dtype=np.int32)
    if c.ndim != 2 or c.shape[1] != 4:
        raise ValueError("voxconv: %s has shape %s, expected [N, 4] rows (batch, x, y, z)" % (what, list(c.shape)))
    return c


def _dtype_of(*arrays):
    dt = np.result_type(*[a.dtype for a in arrays if a is not None])
    if dt not in _DTYPES:
        raise TypeError("voxconv: dtype %s is not supported (float32 or float16)" % dt)
    return dt


class SparseConv:
    """The kernel map of one conv geometry over `coords` (int32 [N, 4], rows (b, x, y, z)).

    kind: 'submanifold', 'sparse', 'transposed', or 'inverse' (then `paired` is the
    'sparse' SparseConv to invert and coords may be None). padding None: (k//2)*d for
    submanifold, 0 otherwise. output_bound: spconv's output spatial shape (sparse and
    transposed kinds), None for unbounded."""

    def __init__(self, coords, kind="submanifold", kernel_size=3, stride=1, padding=None, dilation=1,
                 output_bound=None, paired=None):
        self.desc = _capi.make_desc(kind, kernel_size, stride, padding, dilation, output_bound)
        self.kind = kind
        if kind == "inverse":
            if not isinstance(paired, SparseConv):
                raise ValueError("voxconv: an inverse conv needs paired=<the 'sparse' SparseConv it inverts>")
            c = _coords(coords) if coords is not None else None
            self.plan = _capi.Plan(context(), self.desc, _ptr(c), 0 if c is None else len(c), paired.plan)
        else:
            if paired is not None:
                raise ValueError("voxconv: paired is only for kind 'inverse'")
            c = _coords(coords)
            self.plan = _capi.Plan(context(), self.desc, _ptr(c), len(c))
        self.in_count, self.out_count = self.plan.in_count, self.plan.out_count
        self.out_coords = np.empty((self.out_count, 4), dtype=np.int32)
        if self.out_count:
            self.plan.out_coords_into(_ptr(self.out_coords))

    @property
    def kernel_volume(self):
        return self.plan.kernel_volume

    @property
    def pair_count(self):
        return self.plan.pair_count

    def kernel_map(self):
        """(offsets int64 [K+1], in_index int32 [pairs], out_index int32 [pairs]): the pairs of
        offset r are offsets[r]:offsets[r+1], ascending by output row."""
        off = np.empty(self.kernel_volume + 1, dtype=np.int64)
        pin = np.empty(self.pair_count, dtype=np.int32)
        pout = np.empty(self.pair_count, dtype=np.int32)
        self.plan.kernel_map_into(_ptr(off), _ptr(pin), _ptr(pout))
        return off, pin, pout

    def _args(self, w_shape, dt, algo, math):
        if math not in _MATHS:
            raise ValueError("voxconv: math %r is not 'f32' or 'tf32'" % (math,))
        return _capi.conv_args(self.desc, w_shape, _DTYPES[dt], _MATHS[math], algo)

    def _workspace(self, args, pass_):
        return np.empty(self.plan.workspace_size(args, pass_), dtype=np.uint8)

    def forward(self, x, weight, bias=None, algo="auto", math="f32"):
        """y [out_count, Co] = conv(x [in_count, Ci], weight [Co, K0, K1, K2, Ci]) + bias [Co]."""
        dt = _dtype_of(x, weight, bias)
        x, w = np.ascontiguousarray(x, dt), np.ascontiguousarray(weight, dt)
        b = None if bias is None else np.ascontiguousarray(bias, dt)
        args, ci, co = self._args(w.shape, dt, algo, math)
        _capi.check_rows(x.shape, self.in_count, ci, "x")
        _capi.check_bias(None if b is None else b.shape, co)
        y = np.empty((self.out_count, co), dtype=dt)
        ws = self._workspace(args, _capi.PASS_FORWARD)
        self.plan.forward(args, _ptr(x), _ptr(w), _ptr(b), _ptr(y), _ptr(ws), ws.size)
        return y

    def backward_data(self, dy, weight, algo="auto", math="f32"):
        """dx [in_count, Ci] from dy [out_count, Co]."""
        dt = _dtype_of(dy, weight)
        dy, w = np.ascontiguousarray(dy, dt), np.ascontiguousarray(weight, dt)
        args, ci, co = self._args(w.shape, dt, algo, math)
        _capi.check_rows(dy.shape, self.out_count, co, "dy")
        dx = np.empty((self.in_count, ci), dtype=dt)
        ws = self._workspace(args, _capi.PASS_BACKWARD_DATA)
        self.plan.backward_data(args, _ptr(dy), _ptr(w), _ptr(dx), _ptr(ws), ws.size)
        return dx

    def backward_weight(self, x, dy, bias=True, algo="auto", math="f32"):
        """(dw [Co, K0, K1, K2, Ci], db [Co] or None when bias is False)."""
        dt = _dtype_of(x, dy)
        x, dy = np.ascontiguousarray(x, dt), np.ascontiguousarray(dy, dt)
        if x.ndim != 2 or dy.ndim != 2:
            raise ValueError("voxconv: x and dy must be 2-D, got %s and %s" % (list(x.shape), list(dy.shape)))
        k = tuple(self.desc.kernel_size)
        dw = np.empty((dy.shape[1],) + k + (x.shape[1],), dtype=dt)
        args, ci, co = self._args(dw.shape, dt, algo, math)
        _capi.check_rows(x.shape, self.in_count, ci, "x")
        _capi.check_rows(dy.shape, self.out_count, co, "dy")
        db = np.empty(co, dtype=dt) if bias else None
        ws = self._workspace(args, _capi.PASS_BACKWARD_WEIGHT)
        self.plan.backward_weight(args, _ptr(x), _ptr(dy), _ptr(dw), _ptr(db), _ptr(ws), ws.size)
        return dw, db


def conv(x, coords, weight, bias=None, kind="submanifold", stride=1, padding=None, dilation=1, output_bound=None,
         algo="auto"):
    """One forward conv: returns (y, out_coords)."""
    c = SparseConv(coords, kind, tuple(np.shape(weight)[1:4]), stride, padding, dilation, output_bound)
    return c.forward(x, weight, bias, algo), c.out_coords
