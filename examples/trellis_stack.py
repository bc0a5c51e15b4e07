"""A TRELLIS-style stack of submanifold residual blocks over the surface voxels of a shape
(the 3D generative workload): forward and backward timing, fp16 on CUDA. One command:

    PYTHONPATH=python python3 examples/trellis_stack.py [--res 64] [--channels 256] [--blocks 4]

Every layer shares one kernel map (submanifold maps depend on the sites only)."""
import argparse
import time

import torch
from torch import nn

import voxconv.pytorch as spconv


def shell(res):
    """Surface voxels of a sphere of radius res/2 - 2 in a res^3 grid."""
    g = torch.arange(res, dtype=torch.float32) - res / 2 + 0.5
    x, y, z = torch.meshgrid(g, g, g, indexing="ij")
    r = (x * x + y * y + z * z).sqrt()
    v = torch.nonzero((r - (res / 2 - 2)).abs() < 0.5)
    return torch.cat([torch.zeros(len(v), 1, dtype=torch.long), v], 1).int()


class ResBlock(spconv.SparseModule):
    def __init__(self, c):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.conv1, self.conv2 = spconv.SubMConv3d(c, c, 3, indice_key="surf"), spconv.SubMConv3d(c, c, 3,
                                                                                                 indice_key="surf")

    def forward(self, x):
        h = self.conv1(x.replace_feature(nn.functional.silu(self.norm1(x.features))))
        h = self.conv2(h.replace_feature(nn.functional.silu(self.norm2(h.features))))
        return h.replace_feature(h.features + x.features)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--res", type=int, default=64)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--blocks", type=int, default=4)
    a = ap.parse_args()
    if a.device == "cpu":
        a.res, a.channels = min(a.res, 32), min(a.channels, 32)
    dt = torch.float16 if a.device == "cuda" else torch.float32
    idx = shell(a.res).to(a.device)
    x = spconv.SparseConvTensor(torch.randn(len(idx), a.channels, device=a.device, dtype=dt), idx, [a.res] * 3, 1)
    net = spconv.SparseSequential(*[ResBlock(a.channels) for _ in range(a.blocks)]).to(a.device).to(dt)
    for i in range(6):
        t0 = time.time()
        y = net(x)
        y.features.float().square().mean().backward()
        if a.device == "cuda":
            torch.cuda.synchronize()
        ms = 1e3 * (time.time() - t0)
        km = x.indice_dict["surf"]
        flops = 3 * 2 * km.plan.pair_count * a.channels * a.channels * 2 * a.blocks  # fwd + 2 backward passes
        print("iter %d: %d voxels, %d pairs, fwd+bwd %.2f ms, %.1f TFLOP/s useful" % (
            i, len(idx), km.plan.pair_count, ms, flops / ms / 1e9))


if __name__ == "__main__":
    main()
