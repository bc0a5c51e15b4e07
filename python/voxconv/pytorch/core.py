"""SparseConvTensor, kernel maps (KernelMap) and the per-device voxconv contexts."""
import ctypes

import torch

from .. import _capi

_DTYPES = {torch.float32: _capi.DTYPE_F32, torch.float16: _capi.DTYPE_F16, torch.bfloat16: _capi.DTYPE_BF16}


def context_for(device):
    """The voxconv context of a torch device (one per device, shared with voxconv.numpy)."""
    if device.type == "cuda":
        return _capi.context("cuda", device.index if device.index is not None else torch.cuda.current_device())
    if device.type == "cpu":
        return _capi.context("cpu")
    raise ValueError("voxconv: tensors on %s are not supported (cpu or cuda)" % device)


def stream_for(device):
    """The current torch stream of a CUDA device as a cudaStream_t (None on the CPU)."""
    if device.type != "cuda":
        return None
    return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)


def ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None and t.numel() else None


def dtype_code(dtype):
    if dtype not in _DTYPES:
        raise TypeError("voxconv: feature dtype %s is not supported (float32, float16, bfloat16)" % dtype)
    return _DTYPES[dtype]


class KernelMap:
    """One plan and what the layers around it need: input and output indices (int32
    [N, 4]), spatial shapes, the geometry. Stored in SparseConvTensor.indice_dict."""

    def __init__(self, kind, indices, spatial_shape, kernel_size, stride=1, padding=None, dilation=1,
                 out_shape=None, paired=None):
        self.kind = kind
        self.device = indices.device if paired is None else paired.device
        ctx = context_for(self.device)
        stream = stream_for(self.device)
        if kind == "inverse":  # the paired map's geometry; it holds no reference back to this map's owner
            self.desc = _capi.make_desc("inverse", paired.kernel_size, paired.stride, paired.padding,
                                        paired.dilation)
            self.plan = _capi.Plan(ctx, self.desc, None, 0, paired.plan, stream)
            self.in_indices, self.out_indices = paired.out_indices, paired.in_indices
            self.in_shape, self.out_shape = paired.out_shape, paired.in_shape
        else:
            if indices.dtype != torch.int32 or indices.dim() != 2 or indices.shape[1] != 4:
                raise ValueError("voxconv: indices must be int32 [N, 4] (batch, x, y, z), got %s %s"
                                 % (indices.dtype, list(indices.shape)))
            indices = indices.contiguous()
            bound = None if kind == "submanifold" else out_shape
            self.desc = _capi.make_desc(kind, kernel_size, stride, padding, dilation, bound)
            self.plan = _capi.Plan(ctx, self.desc, ptr(indices), indices.shape[0], None, stream)
            self.in_indices, self.in_shape = indices, list(spatial_shape)
            self.out_shape = list(spatial_shape) if kind == "submanifold" else list(out_shape)
            if kind == "submanifold":
                self.out_indices = indices
            else:
                self.out_indices = torch.empty((self.plan.out_count, 4), dtype=torch.int32, device=self.device)
                if self.plan.out_count:
                    self.plan.out_coords_into(ptr(self.out_indices), stream)
        d = self.desc
        self.kernel_size, self.stride = tuple(d.kernel_size), tuple(d.stride)
        self.padding, self.dilation = tuple(d.padding), tuple(d.dilation)
        self._inverse = None
        self._pairs = None

    def inverse(self):
        """The inverse map (outputs -> inputs), built once from this 'sparse' map."""
        if self.kind != "sparse":
            raise ValueError("voxconv: only a strided (SparseConv3d / pooling) map has an inverse, this one is %s"
                             % self.kind)
        if self._inverse is None:
            self._inverse = KernelMap("inverse", None, None, self.kernel_size, paired=self)
        return self._inverse

    def pairs(self):
        """(in_index, out_index) int64 tensors of every pair on the map's device (pooling)."""
        if self._pairs is None:
            n = self.plan.pair_count
            pin = torch.empty(n, dtype=torch.int32, device=self.device)
            pout = torch.empty(n, dtype=torch.int32, device=self.device)
            self.plan.kernel_map_into(None, ptr(pin), ptr(pout), stream_for(self.device))
            self._pairs = (pin.long(), pout.long())
        return self._pairs

    def same_geometry(self, kind, kernel_size, stride, padding, dilation):
        t = _capi.triple
        return (self.kind == kind and self.kernel_size == t(kernel_size, "kernel_size")
                and self.stride == t(stride, "stride") and self.dilation == t(dilation, "dilation")
                and (padding is None or self.padding == t(padding, "padding")))


def find_map(x, key, kind, kernel_size, stride, padding, dilation, out_shape, same_sites=False):
    """x.indice_dict[key] when it is this geometry's map over x's sites (same geometry, as
    many sites, the same output shape; with same_sites, built over this very indices
    tensor), else None."""
    km = x.indice_dict.get(key) if key is not None else None
    if km is not None and (km.same_geometry(kind, kernel_size, stride, padding, dilation)
                           and km.plan.in_count == x.indices.shape[0] and (not same_sites or km.in_indices is x.indices)
                           and (kind == "submanifold" or km.out_shape == list(out_shape))):
        return km
    return None


def build_map(x, key, kind, kernel_size, stride, padding, dilation, out_shape):
    """A new map of this geometry over x's sites, stored in x.indice_dict under key (if any)."""
    km = KernelMap(kind, x.indices, x.spatial_shape, kernel_size, stride, padding, dilation, out_shape)
    if key is not None:
        x.indice_dict[key] = km
    return km


class SparseConvTensor:
    """spconv's sparse tensor: features [N, C], indices int32 [N, 4] rows (batch, x, y, z)
    matching spatial_shape's axes, batch_size. indice_dict holds the kernel maps layers
    share through indice_key; replace_feature keeps sharing it."""

    def __init__(self, features, indices, spatial_shape, batch_size, grid=None, voxel_num=None, indice_dict=None,
                 benchmark=False, **unused):
        indices = indices.int().contiguous()  # kernel maps keep (and compare) this very tensor
        if features.dim() != 2 or indices.dim() != 2 or indices.shape[1] != 4 or features.shape[0] != indices.shape[0]:
            raise ValueError("voxconv: features %s and indices %s must be [N, C] and [N, 4]"
                             % (list(features.shape), list(indices.shape)))
        if features.device != indices.device:
            raise ValueError("voxconv: features on %s, indices on %s" % (features.device, indices.device))
        self.features = features
        self.indices = indices
        self.spatial_shape = [int(s) for s in spatial_shape]
        if len(self.spatial_shape) != 3:
            raise ValueError("voxconv: spatial_shape needs 3 values, got %r" % (spatial_shape,))
        self.batch_size = int(batch_size)
        self.indice_dict = {} if indice_dict is None else indice_dict
        self.benchmark = benchmark

    def replace_feature(self, feature):
        """A tensor with the same indices and shared kernel maps, and new features."""
        return SparseConvTensor(feature, self.indices, self.spatial_shape, self.batch_size,
                                indice_dict=self.indice_dict, benchmark=self.benchmark)

    @property
    def spatial_size(self):
        return self.spatial_shape[0] * self.spatial_shape[1] * self.spatial_shape[2]

    def find_indice_pair(self, key):
        return self.indice_dict.get(key) if key is not None else None

    def dense(self, channels_first=True):
        """[B, C, D0, D1, D2] (or [B, D0, D1, D2, C]); zeros where no site is. Differentiable."""
        c = self.features.shape[1]
        out = self.features.new_zeros([self.batch_size] + self.spatial_shape + [c])
        idx = self.indices.long()
        out = out.index_put((idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]), self.features)
        return out.permute(0, 4, 1, 2, 3).contiguous() if channels_first else out

    @classmethod
    def from_dense(cls, x):
        """From a channels-last dense tensor [B, D0, D1, D2, C]: every site with a nonzero
        feature becomes a voxel."""
        idx = torch.nonzero((x != 0).any(-1)).int()
        feats = x[idx[:, 0].long(), idx[:, 1].long(), idx[:, 2].long(), idx[:, 3].long()]
        return cls(feats, idx, list(x.shape[1:4]), x.shape[0])

    def __repr__(self):
        return "SparseConvTensor(features=%s %s, spatial_shape=%s, batch_size=%d)" % (
            list(self.features.shape), self.features.dtype, self.spatial_shape, self.batch_size)
