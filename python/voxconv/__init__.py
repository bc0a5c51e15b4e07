"""voxconv: sparse 3D convolution for voxel networks.

    voxconv.numpy    the conv passes on NumPy arrays (CPU)
    voxconv.pytorch  spconv-compatible modules and SparseConvTensor (CPU and CUDA tensors)

The C library is loaded with ctypes (no compilation against torch); see voxconv._capi.
"""
from ._capi import VoxconvError, library_path, version

__version__ = version
__all__ = ["VoxconvError", "library_path", "version", "__version__"]
