"""Sparse max / average pooling over a kernel map, and global pooling per batch entry.

Windows reduce over the active sites only (as spconv): an output site exists where any
input falls in its window. Gradients come from torch's scatter_reduce (amax shares the
gradient between tied maxima)."""

from .. import _capi
from .conv import _out_size
from .core import SparseConvTensor, build_map, find_map
from .modules import SparseModule


class _SparsePool(SparseModule):
    reduce = None

    def __init__(self, ndim, kernel_size=3, stride=None, padding=0, dilation=1, indice_key=None, subm=False,
                 algo=None, record_voxel_count=False, name=None, **unused):
        super().__init__(name=name)
        if ndim != 3:
            raise NotImplementedError("voxconv: %d-D pooling is not supported (3-D only)" % ndim)
        t = _capi.triple
        self.kernel_size = t(kernel_size, "kernel_size")
        self.stride = t(stride, "stride") if stride is not None else self.kernel_size
        self.padding, self.dilation = t(padding, "padding"), t(dilation, "dilation")
        self.subm, self.indice_key = subm, indice_key
        if subm:
            self.stride = (1, 1, 1)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s, dilation=%s" % (self.kernel_size, self.stride, self.padding,
                                                                      self.dilation)

    def forward(self, x):
        if self.subm:
            kind, pad, shape = "submanifold", None, x.spatial_shape
        else:
            kind, pad = "sparse", self.padding
            shape = [_out_size(x.spatial_shape[a], self.kernel_size[a], self.stride[a], self.padding[a],
                               self.dilation[a], False) for a in range(3)]
        geometry = (kind, self.kernel_size, self.stride, pad, self.dilation, shape)
        km = find_map(x, self.indice_key, *geometry) or build_map(x, self.indice_key, *geometry)
        pin, pout = km.pairs()
        f = x.features
        idx = pout[:, None].expand(-1, f.shape[1])
        out = f.new_zeros((km.plan.out_count, f.shape[1]))
        out = out.scatter_reduce(0, idx, f.index_select(0, pin), self.reduce, include_self=False)
        return SparseConvTensor(out, km.out_indices, km.out_shape, x.batch_size, indice_dict=x.indice_dict,
                                benchmark=x.benchmark)


class SparseMaxPool3d(_SparsePool):
    reduce = "amax"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, indice_key=None, subm=False, algo=None,
                 name=None, **kw):
        super().__init__(3, kernel_size, stride, padding, dilation, indice_key, subm, algo, name=name, **kw)


class SparseAvgPool3d(_SparsePool):
    reduce = "mean"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, indice_key=None, subm=False, algo=None,
                 name=None, **kw):
        super().__init__(3, kernel_size, stride, padding, dilation, indice_key, subm, algo, name=name, **kw)


class _GlobalPool(SparseModule):
    reduce = None

    def forward(self, x):
        f = x.features
        b = x.indices[:, 0].long()
        out = f.new_zeros((x.batch_size, f.shape[1]))  # a batch entry with no site pools to 0
        return out.scatter_reduce(0, b[:, None].expand(-1, f.shape[1]), f, self.reduce, include_self=False)


class SparseGlobalMaxPool(_GlobalPool):
    """[B, C]: the per-channel maximum over each batch entry's sites."""
    reduce = "amax"


class SparseGlobalAvgPool(_GlobalPool):
    """[B, C]: the per-channel mean over each batch entry's sites."""
    reduce = "mean"
