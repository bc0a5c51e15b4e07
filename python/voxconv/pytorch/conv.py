"""Sparse convolution layers with spconv's names, parameters and weight layout."""
import math

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .. import _capi
from .core import SparseConvTensor, build_map, dtype_code, find_map, ptr, stream_for
from .modules import SparseModule


def _args(kmap, weight, dtype, algo):
    m = _capi.MATH_F32
    if dtype == torch.float32 and kmap.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        m = _capi.MATH_TF32  # the same opt-in as torch's own fp32 matmuls
    return _capi.conv_args(kmap.desc, weight.shape, dtype_code(dtype), m, algo or "auto")


def _workspace(kmap, args, pass_):
    return torch.empty(kmap.plan.workspace_size(args, pass_), dtype=torch.uint8, device=kmap.device)


def _same_device(kmap, **tensors):
    for name, t in tensors.items():
        if t is not None and t.device != kmap.device:
            raise ValueError("voxconv: %s is on %s, the kernel map on %s" % (name, t.device, kmap.device))


def conv_forward(kmap, x, w, bias=None, algo=None):
    """y [out_count, Co] on the current stream; x, w, bias contiguous, one dtype."""
    _same_device(kmap, features=x, weight=w, bias=bias)
    args, ci, co = _args(kmap, w, x.dtype, algo)
    _capi.check_rows(x.shape, kmap.plan.in_count, ci, "features")
    _capi.check_bias(None if bias is None else bias.shape, co)
    y = torch.empty((kmap.plan.out_count, co), dtype=x.dtype, device=x.device)
    ws = _workspace(kmap, args, _capi.PASS_FORWARD)
    kmap.plan.forward(args, ptr(x), ptr(w), ptr(bias), ptr(y), ptr(ws), ws.numel(), stream_for(x.device))
    return y


def conv_backward_data(kmap, dy, w, algo=None):
    args, ci, co = _args(kmap, w, dy.dtype, algo)
    _capi.check_rows(dy.shape, kmap.plan.out_count, co, "grad_output")
    dx = torch.empty((kmap.plan.in_count, ci), dtype=dy.dtype, device=dy.device)
    ws = _workspace(kmap, args, _capi.PASS_BACKWARD_DATA)
    kmap.plan.backward_data(args, ptr(dy), ptr(w), ptr(dx), ptr(ws), ws.numel(), stream_for(dy.device))
    return dx


def conv_backward_weight(kmap, x, dy, w_shape, want_db, algo=None):
    dw = torch.empty(w_shape, dtype=dy.dtype, device=dy.device)
    args, ci, co = _args(kmap, dw, dy.dtype, algo)
    db = torch.empty(co, dtype=dy.dtype, device=dy.device) if want_db else None
    ws = _workspace(kmap, args, _capi.PASS_BACKWARD_WEIGHT)
    kmap.plan.backward_weight(args, ptr(x), ptr(dy), ptr(dw), ptr(db), ptr(ws), ws.numel(), stream_for(dy.device))
    return dw, db


class SparseConvFunction(torch.autograd.Function):
    """y = conv(features, weight) + bias over a KernelMap; all three passes in voxconv."""

    @staticmethod
    def forward(ctx, features, weight, bias, kmap, algo):
        ctx.save_for_backward(features, weight)
        ctx.kmap, ctx.algo = kmap, algo
        return conv_forward(kmap, features, weight, bias, algo)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dy = dy.to(x.dtype).contiguous()
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = conv_backward_data(ctx.kmap, dy, w, ctx.algo)
        want_db = ctx.needs_input_grad[2]  # False when there is no bias
        if ctx.needs_input_grad[1] or want_db:
            dw, db = conv_backward_weight(ctx.kmap, x, dy, w.shape, want_db, ctx.algo)
            if not ctx.needs_input_grad[1]:
                dw = None
        return dx, dw, db, None, None


if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: functions taking the device type
    def _autocast_dtype(device_type):
        """The autocast dtype when autocast is on for this device type, else None."""
        return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
else:  # older torch: per-device functions
    def _autocast_dtype(device_type):
        """The autocast dtype when autocast is on for this device type, else None."""
        if device_type == "cuda" and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
        if device_type == "cpu" and torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
        return None


def _out_size(n, k, s, p, d, transposed, output_padding=0):
    if transposed:
        return (n - 1) * s - 2 * p + d * (k - 1) + 1 + output_padding
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


class SparseConvolution(SparseModule):
    """spconv's SparseConvolution: weight [Co, K0, K1, K2, Ci], bias [Co], the same
    initialisation, the same indice_key rules. ndim must be 3 and groups 1."""

    def __init__(self, ndim, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, subm=False, output_padding=0, transposed=False, inverse=False, indice_key=None,
                 algo=None, fp32_accum=None, record_voxel_count=False, name=None, device=None, dtype=None,
                 **unused):
        super().__init__(name=name)
        if ndim != 3:
            raise NotImplementedError("voxconv: %d-D sparse convs are not supported (3-D only)" % ndim)
        if groups != 1:
            raise NotImplementedError("voxconv: groups = %d is not supported (1 only)" % groups)
        if algo is not None and not isinstance(algo, str):
            algo = None  # spconv's ConvAlgo enum: voxconv picks its own algorithm
        self.ndim, self.in_channels, self.out_channels = ndim, in_channels, out_channels
        t = _capi.triple
        self.kernel_size, self.stride = t(kernel_size, "kernel_size"), t(stride, "stride")
        self.padding, self.dilation = t(padding, "padding"), t(dilation, "dilation")
        self.output_padding = t(output_padding, "output_padding")
        self.groups, self.subm, self.transposed, self.inverse = groups, subm, transposed, inverse
        self.indice_key, self.algo, self.fp32_accum = indice_key, algo, fp32_accum
        self.conv1x1 = math.prod(self.kernel_size) == 1
        self.weight = nn.Parameter(torch.empty((out_channels, *self.kernel_size, in_channels), device=device,
                                               dtype=dtype))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # spconv's: kaiming-uniform over the [Co, K0, K1, K2, Ci] tensor (torch's fan-in of it
        # is K0 * K1 * K2 * Ci), bias uniform in +-1/sqrt(Ci * K0 * K1 * K2)
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_channels * math.prod(self.kernel_size))
            nn.init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s, padding=%s, dilation=%s" % (
            self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding, self.dilation)
        if self.bias is None:
            s += ", bias=False"
        if self.indice_key is not None:
            s += ", indice_key=%r" % self.indice_key
        return s

    def _kernel_map(self, x):
        """The layer's kernel map: found in x.indice_dict or built (and stored there)."""
        d = x.indice_dict
        if self.inverse:
            fwd = d.get(self.indice_key) if self.indice_key is not None else None
            if fwd is None:
                raise ValueError("voxconv: SparseInverseConv3d needs indice_key=%r of an earlier SparseConv3d on this "
                                 "tensor's path, and it is not in indice_dict (keys: %s)"
                                 % (self.indice_key, sorted(map(str, d))))
            if fwd.kind != "sparse" or fwd.kernel_size != self.kernel_size:
                raise ValueError("voxconv: indice_key %r is a %s map with kernel %s; this inverse conv has kernel %s"
                                 % (self.indice_key, fwd.kind, fwd.kernel_size, self.kernel_size))
            if fwd.plan.out_count != x.indices.shape[0]:
                raise ValueError("voxconv: indice_key %r maps to %d sites, this tensor has %d"
                                 % (self.indice_key, fwd.plan.out_count, x.indices.shape[0]))
            return fwd.inverse()
        if self.subm:
            kind, pad, shape = "submanifold", None, x.spatial_shape
        else:
            kind, pad = ("transposed" if self.transposed else "sparse"), self.padding
            shape = [_out_size(x.spatial_shape[a], self.kernel_size[a], self.stride[a], self.padding[a],
                               self.dilation[a], self.transposed, self.output_padding[a]) for a in range(3)]
        if min(shape) < 1:
            raise ValueError("voxconv: %s maps spatial shape %s to %s, which is empty"
                             % (type(self).__name__, x.spatial_shape, shape))
        stride = 1 if self.subm else self.stride
        # submanifold maps depend on the sites alone: share them even without a key (the
        # map holds the indices tensor, so its id stays unique while the entry lives)
        auto = self.indice_key is None and self.subm
        key = ("voxconv.subm", self.kernel_size, self.dilation, id(x.indices)) if auto else self.indice_key
        km = find_map(x, key, kind, self.kernel_size, stride, pad, self.dilation, shape, same_sites=auto)
        if km is not None:
            return km
        old = x.indice_dict.get(key) if key is not None else None
        if old is not None and kind == "submanifold" and not auto:
            raise ValueError("voxconv: indice_key %r belongs to a %s map (kernel %s over %d sites); this layer is "
                             "submanifold with kernel %s over %d sites" % (
                                 key, old.kind, old.kernel_size, old.plan.in_count, self.kernel_size,
                                 x.indices.shape[0]))
        return build_map(x, key, kind, self.kernel_size, stride, pad, self.dilation, shape)

    def forward(self, x):
        if not isinstance(x, SparseConvTensor):
            raise TypeError("voxconv: %s expects a SparseConvTensor, got %s" % (type(self).__name__, type(x).__name__))
        feats = x.features
        if feats.dim() != 2 or feats.shape[1] != self.in_channels:
            raise ValueError("voxconv: %s has in_channels %d, features are %s"
                             % (type(self).__name__, self.in_channels, list(feats.shape)))
        dt = _autocast_dtype(feats.device.type) or feats.dtype
        feats = feats.to(dt).contiguous()
        w = self.weight.to(dt).contiguous()
        b = self.bias.to(dt).contiguous() if self.bias is not None else None
        identity = (self.conv1x1 and not self.inverse and self.stride == (1, 1, 1) and self.padding == (0, 0, 0)
                    and self.output_padding == (0, 0, 0))
        if identity:
            # spconv's 1x1x1 path: a plain matmul with the weight viewed as [Co, Ci]; the
            # sites and their order are the input's
            y = torch.nn.functional.linear(feats, w.view(self.out_channels, self.in_channels), b)
            return x.replace_feature(y)
        km = self._kernel_map(x)
        y = SparseConvFunction.apply(feats, w, b, km, self.algo)
        return SparseConvTensor(y, km.out_indices, km.out_shape, x.batch_size, indice_dict=x.indice_dict,
                                benchmark=x.benchmark)


class SubMConv3d(SparseConvolution):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 indice_key=None, algo=None, fp32_accum=None, name=None, **kw):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, True,
                         indice_key=indice_key, algo=algo, fp32_accum=fp32_accum, name=name, **kw)


class SparseConv3d(SparseConvolution):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 indice_key=None, algo=None, fp32_accum=None, name=None, **kw):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         indice_key=indice_key, algo=algo, fp32_accum=fp32_accum, name=name, **kw)


class SparseConvTranspose3d(SparseConvolution):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 output_padding=0, indice_key=None, algo=None, fp32_accum=None, name=None, **kw):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         output_padding=output_padding, transposed=True, indice_key=indice_key, algo=algo,
                         fp32_accum=fp32_accum, name=name, **kw)


class SparseInverseConv3d(SparseConvolution):
    def __init__(self, in_channels, out_channels, kernel_size, indice_key, bias=True, algo=None, fp32_accum=None,
                 name=None, **kw):
        super().__init__(3, in_channels, out_channels, kernel_size, bias=bias, inverse=True, indice_key=indice_key,
                         algo=algo, fp32_accum=fp32_accum, name=name, **kw)


def convert_legacy_state_dict(state_dict):
    """spconv 1.x stored conv weights as [K0, K1, K2, Ci, Co]; returns a copy of the state
    dict with every 5-D '...weight' permuted to [Co, K0, K1, K2, Ci] (the flag for legacy
    checkpoints: call it before load_state_dict)."""
    out = type(state_dict)()
    for k, v in state_dict.items():
        out[k] = v.permute(4, 0, 1, 2, 3).contiguous() if k.endswith("weight") and v.dim() == 5 else v
    return out
