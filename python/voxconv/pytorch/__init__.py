"""spconv-compatible PyTorch layer of voxconv: `import voxconv.pytorch as spconv`.

Modules: SubMConv3d, SparseConv3d, SparseInverseConv3d, SparseConvTranspose3d,
SparseMaxPool3d, SparseAvgPool3d, SparseGlobalMaxPool, SparseGlobalAvgPool,
SparseSequential, ToDense; SparseConvTensor with .dense(), .replace_feature() and
indice_key sharing of kernel maps. Weights are [Co, K0, K1, K2, Ci] as in spconv 2, so its
state dicts load unchanged (convert_legacy_state_dict for spconv 1.x checkpoints).
CUDA tensors run on the current stream; CPU tensors run on voxconv's CPU engine."""
from .conv import (SparseConv3d, SparseConvFunction, SparseConvolution, SparseConvTranspose3d, SparseInverseConv3d,
                   SubMConv3d, convert_legacy_state_dict)
from .core import KernelMap, SparseConvTensor, context_for
from .modules import SparseModule, SparseSequential, ToDense
from .pool import SparseAvgPool3d, SparseGlobalAvgPool, SparseGlobalMaxPool, SparseMaxPool3d

__all__ = ["SparseConvTensor", "SubMConv3d", "SparseConv3d", "SparseInverseConv3d", "SparseConvTranspose3d",
           "SparseConvolution", "SparseConvFunction", "SparseMaxPool3d", "SparseAvgPool3d", "SparseGlobalMaxPool",
           "SparseGlobalAvgPool", "SparseModule", "SparseSequential", "ToDense", "KernelMap", "context_for",
           "convert_legacy_state_dict"]
