"""ctypes declarations of include/voxconv.h and small owning wrappers around its objects.

Every exported C function is declared here with its argtypes and restype (the test suite
checks the list against the header). A failing status raises VoxconvError carrying
vc_last_error. The library is found, in order, at $VOXCONV_LIBRARY, next to this package
(what `pip install ./python` bundles), or in the source tree's build/ directory.
"""
import ctypes
import os
import threading
import weakref
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_size_t, c_void_p

# ---- enums (values of voxconv.h) -------------------------------------------------------

DEVICE_CPU, DEVICE_CUDA = 0, 1
DTYPE_F32, DTYPE_F16, DTYPE_BF16 = 0, 1, 2
MATH_F32, MATH_TF32 = 0, 1
KINDS = {"submanifold": 0, "sparse": 1, "inverse": 2, "transposed": 3}
PASS_FORWARD, PASS_BACKWARD_DATA, PASS_BACKWARD_WEIGHT = 0, 1, 2
ALGOS = {"auto": 0, "reference": 1, "explicit": 2, "implicit": 3, "masked": 4, "grouped": 5}


class VoxconvError(RuntimeError):
    """A voxconv call failed: .status is the vc_status name, the text is vc_last_error."""

    def __init__(self, status, message):
        name = lib.vc_status_string(status).decode().split(":")[0]  # "VC_ERR_IO: ..." names it
        self.status = name if name.startswith("VC_") else str(status)
        super().__init__(message)


class ConvDesc(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("kind", c_int), ("kernel_size", c_int32 * 3), ("stride", c_int32 * 3),
                ("padding", c_int32 * 3), ("dilation", c_int32 * 3), ("output_bound", c_int32 * 3)]


class ConvArgs(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("in_channels", c_int64), ("out_channels", c_int64), ("dtype", c_int),
                ("math", c_int), ("algo", c_int)]


# ---- loading -------------------------------------------------------------------------

def _candidates():
    env = os.environ.get("VOXCONV_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "libvoxconv.so"), os.path.join(here, "..", "..", "build", "libvoxconv.so")]


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(os.path.abspath(path)), os.path.abspath(path)
        tried.append(path)
    raise ImportError("voxconv: libvoxconv.so not found (tried %s); build it with `make` or set VOXCONV_LIBRARY"
                      % ", ".join(tried))


lib, library_path = _load()

_P = c_void_p  # opaque handles and device/host data pointers
# name: (restype, argtypes)
SIGNATURES = {
    "vc_status_string": (c_char_p, [c_int]),
    "vc_last_error": (c_char_p, [_P]),
    "vc_version": (c_char_p, []),
    "vc_context_create": (c_int, [c_int, c_int, POINTER(_P)]),
    "vc_context_destroy": (None, [_P]),
    "vc_context_device_kind": (c_int, [_P]),
    "vc_conv_desc_init": (None, [POINTER(ConvDesc), c_int, c_int32, c_int32, c_int32, c_int32]),
    "vc_conv_args_init": (None, [POINTER(ConvArgs), c_int64, c_int64, c_int]),
    "vc_dtype_size": (c_size_t, [c_int]),
    "vc_plan_create": (c_int, [_P, POINTER(ConvDesc), _P, c_int64, _P, _P, POINTER(_P)]),
    "vc_plan_destroy": (None, [_P]),
    "vc_plan_in_count": (c_int64, [_P]),
    "vc_plan_out_count": (c_int64, [_P]),
    "vc_plan_kernel_volume": (c_int32, [_P]),
    "vc_plan_pair_count": (c_int64, [_P]),
    "vc_plan_desc": (POINTER(ConvDesc), [_P]),
    "vc_plan_memory_bytes": (c_size_t, [_P]),
    "vc_plan_out_coords": (c_int, [_P, _P, _P]),
    "vc_plan_kernel_map": (c_int, [_P, _P, _P, _P, _P]),
    "vc_conv_workspace_size": (c_int, [_P, POINTER(ConvArgs), c_int, POINTER(c_size_t)]),
    "vc_conv_forward": (c_int, [_P, _P, POINTER(ConvArgs), _P, _P, _P, _P, _P, c_size_t, _P]),
    "vc_conv_backward_data": (c_int, [_P, _P, POINTER(ConvArgs), _P, _P, _P, _P, c_size_t, _P]),
    "vc_conv_backward_weight": (c_int, [_P, _P, POINTER(ConvArgs), _P, _P, _P, _P, _P, c_size_t, _P]),
    "vc_conv_algo_for": (c_int, [_P, POINTER(ConvArgs), c_int, POINTER(c_int)]),
    "vc_conv_tune": (c_int, [_P, _P, POINTER(ConvArgs), c_int, _P, POINTER(c_int)]),
    "vc_convert_from_f32": (c_int, [c_int, _P, _P, c_int64]),
    "vc_convert_to_f32": (c_int, [c_int, _P, _P, c_int64]),
}
for _name, (_res, _args) in SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args

# The structs must match the library's: its init functions write their own sizeof.
_d, _a = ConvDesc(), ConvArgs()
lib.vc_conv_desc_init(ctypes.byref(_d), 0, 3, 1, -1, 1)
lib.vc_conv_args_init(ctypes.byref(_a), 1, 1, 0)
if _d.struct_size != ctypes.sizeof(ConvDesc) or _a.struct_size != ctypes.sizeof(ConvArgs):
    raise ImportError("voxconv: %s was built from another header (vc_conv_desc %d bytes, here %d; vc_conv_args %d, "
                      "here %d)" % (library_path, _d.struct_size, ctypes.sizeof(ConvDesc), _a.struct_size,
                                    ctypes.sizeof(ConvArgs)))

version = lib.vc_version().decode()


def check(status, ctx_handle=None):
    """Raises VoxconvError for a failing status, with the context's last error."""
    if status != 0:
        text = lib.vc_last_error(ctx_handle)
        raise VoxconvError(status, text.decode() if text else lib.vc_status_string(status).decode())


# ---- owning wrappers -----------------------------------------------------------------

def triple(v, name):
    """One value or three, as a 3-tuple of ints."""
    t = tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * 3
    if len(t) != 3:
        raise ValueError("voxconv: %s needs 1 or 3 values, got %r" % (name, v))
    return t


def make_desc(kind, kernel_size, stride=1, padding=None, dilation=1, output_bound=None):
    """A vc_conv_desc. padding None: (k//2)*d for submanifold, 0 otherwise. output_bound
    None or 0 per axis: unbounded (the library validates everything else)."""
    if kind not in KINDS:
        raise ValueError("voxconv: kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    k, s, d = triple(kernel_size, "kernel_size"), triple(stride, "stride"), triple(dilation, "dilation")
    if padding is None:
        p = tuple((k[a] // 2) * d[a] if kind == "submanifold" else 0 for a in range(3))
    else:
        p = triple(padding, "padding")
    desc = ConvDesc()
    lib.vc_conv_desc_init(ctypes.byref(desc), KINDS[kind], 1, 1, 0, 1)
    for a in range(3):
        desc.kernel_size[a], desc.stride[a], desc.padding[a], desc.dilation[a] = k[a], s[a], p[a], d[a]
    if output_bound is not None:
        b = triple(output_bound, "output_bound")
        for a in range(3):
            desc.output_bound[a] = b[a]
    return desc


class _Handle:
    """An owned C object: close() (or garbage collection) destroys it once."""
    _destroy = None

    def close(self):
        if getattr(self, "handle", None):
            type(self)._destroy(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


class Context(_Handle):
    """A vc_context for one device ('cpu', or 'cuda' with an index). The C context may be
    used by one thread at a time, and ctypes releases the GIL, so every call takes .lock.
    Closing it closes its plans first (a plan must not outlive its context)."""
    _destroy = staticmethod(lib.vc_context_destroy)

    def __init__(self, kind="cpu", index=0):
        self.kind, self.index = kind, index
        self.lock = threading.RLock()
        self.plans = weakref.WeakSet()
        h = _P()
        check(lib.vc_context_create(DEVICE_CUDA if kind == "cuda" else DEVICE_CPU, int(index), ctypes.byref(h)))
        self.handle = h

    def close(self):
        for plan in list(self.plans):
            plan.close()
        super().close()


_contexts = {}
_contexts_lock = threading.Lock()


def context(kind="cpu", index=0):
    """The process's context for one device, created on first use and kept."""
    with _contexts_lock:
        ctx = _contexts.get((kind, index))
        if ctx is None:
            ctx = _contexts[(kind, index)] = Context(kind, index)
        return ctx


class Plan(_Handle):
    """A vc_plan over `n` sites at `coords_ptr` (host memory for CPU contexts, device memory
    for CUDA). Keeps its context and paired plan alive: a plan must not outlive either."""
    _destroy = staticmethod(lib.vc_plan_destroy)

    def __init__(self, ctx, desc, coords_ptr, n, paired=None, stream=None):
        self.ctx, self.paired, self.desc = ctx, paired, desc
        h = _P()
        self._call(lib.vc_plan_create, ctx.handle, ctypes.byref(desc), coords_ptr, int(n),
                   paired.handle if paired is not None else None, stream, ctypes.byref(h))
        self.handle = h
        ctx.plans.add(self)
        self.in_count = lib.vc_plan_in_count(h)
        self.out_count = lib.vc_plan_out_count(h)
        self.kernel_volume = lib.vc_plan_kernel_volume(h)
        self.pair_count = lib.vc_plan_pair_count(h)

    def _call(self, fn, *args):
        if not self.ctx.handle:
            raise VoxconvError(1, "voxconv: the context of this plan is closed")
        with self.ctx.lock:
            check(fn(*args), self.ctx.handle)

    def _live(self):
        if not getattr(self, "handle", None):
            raise VoxconvError(1, "voxconv: the plan is closed")
        return self.handle

    def out_coords_into(self, ptr, stream=None):
        self._call(lib.vc_plan_out_coords, self._live(), ptr, stream)

    def kernel_map_into(self, offsets_ptr, in_ptr, out_ptr, stream=None):
        self._call(lib.vc_plan_kernel_map, self._live(), offsets_ptr, in_ptr, out_ptr, stream)

    def workspace_size(self, args, pass_):
        n = c_size_t()
        self._call(lib.vc_conv_workspace_size, self._live(), ctypes.byref(args), pass_, ctypes.byref(n))
        return n.value

    def forward(self, args, x, w, bias, y, ws, ws_bytes, stream=None):
        self._call(lib.vc_conv_forward, self.ctx.handle, self._live(), ctypes.byref(args), x, w, bias, y, ws,
                   ws_bytes, stream)

    def backward_data(self, args, dy, w, dx, ws, ws_bytes, stream=None):
        self._call(lib.vc_conv_backward_data, self.ctx.handle, self._live(), ctypes.byref(args), dy, w, dx, ws,
                   ws_bytes, stream)

    def backward_weight(self, args, x, dy, dw, db, ws, ws_bytes, stream=None):
        self._call(lib.vc_conv_backward_weight, self.ctx.handle, self._live(), ctypes.byref(args), x, dy, dw, db,
                   ws, ws_bytes, stream)


def conv_args(desc, weight_shape, dtype, math=MATH_F32, algo="auto"):
    """(vc_conv_args, Ci, Co) for a [Co, K0, K1, K2, Ci] weight of the descriptor's kernel."""
    if algo not in ALGOS:
        raise ValueError("voxconv: algo %r is not one of %s" % (algo, ", ".join(ALGOS)))
    ci, co = conv_channels(desc, weight_shape)
    a = ConvArgs()
    lib.vc_conv_args_init(ctypes.byref(a), int(ci), int(co), dtype)
    a.math, a.algo = math, ALGOS[algo]
    return a, ci, co


def conv_channels(desc, weight_shape):
    """(Ci, Co) of a [Co, K0, K1, K2, Ci] weight, checked against the descriptor's kernel."""
    shape = tuple(weight_shape)
    k = tuple(desc.kernel_size)
    if len(shape) != 5 or shape[1:4] != k:
        raise ValueError("voxconv: weight has shape %s, expected [Co, %d, %d, %d, Ci] (spconv's layout)"
                         % (list(shape), k[0], k[1], k[2]))
    return shape[4], shape[0]


def check_rows(shape, rows, cols, what):
    """A feature matrix must be exactly [rows, cols]: the C API trusts the sizes it is given."""
    if len(shape) != 2 or shape[0] != rows or shape[1] != cols:
        raise ValueError("voxconv: %s has shape %s, expected [%d, %d]" % (what, list(shape), rows, cols))


def check_bias(bias_shape, co):
    if bias_shape is not None and tuple(bias_shape) != (co,):
        raise ValueError("voxconv: bias has shape %s, expected [%d]" % (list(bias_shape), co))
