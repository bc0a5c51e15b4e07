"""SparseModule and SparseSequential with spconv's behaviour: sparse modules take and give
SparseConvTensor; any other module (BatchNorm1d, ReLU, Linear, ...) runs on the features."""
from collections import OrderedDict

from torch import nn

from .core import SparseConvTensor


class SparseModule(nn.Module):
    """Base of the modules that take a SparseConvTensor."""

    def __init__(self, name=None):
        super().__init__()
        self.name = name


class SparseSequential(SparseModule):
    def __init__(self, *args, **kwargs):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)
        for name, module in kwargs.items():
            self.add_module(name, module)

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        return SparseSequential(*mods[idx]) if isinstance(idx, slice) else mods[idx]

    def __len__(self):
        return len(self._modules)

    def add(self, module, name=None):
        self.add_module(str(len(self._modules)) if name is None else name, module)

    def forward(self, input):
        for module in self._modules.values():
            if isinstance(module, SparseModule):
                input = module(input)
            elif isinstance(input, SparseConvTensor):
                if input.indices.shape[0] != 0:
                    input = input.replace_feature(module(input.features))
            else:
                input = module(input)
        return input


class ToDense(SparseModule):
    """SparseConvTensor -> dense [B, C, D0, D1, D2]."""

    def forward(self, x):
        return x.dense()
