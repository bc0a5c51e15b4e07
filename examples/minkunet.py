"""MinkUNet-style semantic segmentation on synthetic LiDAR-like scenes, trained for a few
steps with voxconv's spconv-compatible layers. One command (from the repository root):

    PYTHONPATH=python python3 examples/minkunet.py [--device cuda|cpu] [--steps N]

(or `pip install ./python` first). Each scene is a ground plane of rings plus boxes and
cylinders; the label of a voxel is 0 ground, 1 box, 2 cylinder. Prints the loss and the time
per training step; the loss falls as the network learns the shapes."""
import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

import voxconv.pytorch as spconv


def scene(rng, res=0.1, extent=12.0):
    """Voxel indices (x, y, z), labels: rings on the ground, some boxes and cylinders."""
    pts, lab = [], []
    for r in torch.arange(2.0, extent, 0.5):
        n = int(2 * math.pi * r / res)
        a = torch.rand(n, generator=rng) * 2 * math.pi
        pts.append(torch.stack([r * a.cos(), r * a.sin(), torch.zeros(n)], 1))
        lab.append(torch.zeros(n, dtype=torch.long))
    for i in range(10):
        cx, cy = (torch.rand(2, generator=rng) * 2 - 1) * (extent - 2)
        if i % 2 == 0:  # box surface
            p = torch.rand(3000, 3, generator=rng) * torch.tensor([1.6, 1.0, 1.5])
            p[torch.arange(3000), torch.randint(0, 3, (3000,), generator=rng)] = 0
            p += torch.tensor([cx - 0.8, cy - 0.5, 0.0])
        else:  # cylinder wall
            a, h = torch.rand(3000, generator=rng) * 2 * math.pi, torch.rand(3000, generator=rng) * 2.0
            p = torch.stack([cx + 0.4 * a.cos(), cy + 0.4 * a.sin(), h], 1)
        pts.append(p)
        lab.append(torch.full((3000,), 1 if i % 2 == 0 else 2, dtype=torch.long))
    p, lab = torch.cat(pts), torch.cat(lab)
    v = torch.floor((p - torch.tensor([-extent, -extent, -0.5])) / res).long()
    key = (v[:, 0] * 4096 + v[:, 1]) * 64 + v[:, 2]
    key, first = torch.unique(key, return_inverse=True)
    idx = torch.zeros(len(key), dtype=torch.long).scatter_(0, first, torch.arange(len(first)))
    return v[idx], lab[idx], [int(2 * extent / res) + 1, int(2 * extent / res) + 1, 64]


def block(cin, cout, key):
    return spconv.SparseSequential(spconv.SubMConv3d(cin, cout, 3, bias=False, indice_key=key), nn.BatchNorm1d(cout),
                                   nn.ReLU(), spconv.SubMConv3d(cout, cout, 3, bias=False, indice_key=key),
                                   nn.BatchNorm1d(cout), nn.ReLU())


class MinkUNet(nn.Module):
    def __init__(self, cin=4, classes=3, widths=(32, 64, 128, 256), dec=(128, 96, 96, 96)):
        super().__init__()
        self.stem = block(cin, widths[0], "s0")
        self.down, self.enc, self.up, self.dec = nn.ModuleList(), nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        c = widths[0]
        for i, w in enumerate(widths):
            self.down.append(spconv.SparseSequential(spconv.SparseConv3d(c, c, 2, 2, bias=False, indice_key="d%d" % i),
                                                     nn.BatchNorm1d(c), nn.ReLU()))
            self.enc.append(block(c, w, "s%d" % (i + 1)))
            c = w
        skips = [widths[0]] + list(widths[:-1])
        for i, w in enumerate(dec):
            lvl = len(widths) - 1 - i
            self.up.append(spconv.SparseInverseConv3d(c, w, 2, indice_key="d%d" % lvl, bias=False))
            self.dec.append(block(w + skips[lvl], w, "s%d" % lvl))
            c = w
        self.head = spconv.SubMConv3d(c, classes, 1)

    def forward(self, x):
        x = self.stem(x)
        skips = []
        for down, enc in zip(self.down, self.enc):
            skips.append(x)
            x = enc(down(x))
        for up, dec in zip(self.up, self.dec):
            s = skips.pop()
            x = up(x)
            x = dec(x.replace_feature(torch.cat([x.features, s.features], 1)))
        return self.head(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--amp", action="store_true", help="fp16 autocast on CUDA")
    a = ap.parse_args()
    rng = torch.Generator().manual_seed(0)
    idx, lab, shape = [], [], None
    for b in range(a.batch):
        v, l, shape = scene(rng, res=0.1 if a.device == "cuda" else 0.25)
        idx.append(torch.cat([torch.full((len(v), 1), b), v], 1))
        lab.append(l)
    idx, lab = torch.cat(idx).int().to(a.device), torch.cat(lab).to(a.device)
    feats = torch.cat([idx[:, 1:].float() / torch.tensor(shape, device=a.device), torch.ones(len(idx), 1,
                                                                                             device=a.device)], 1)
    x = spconv.SparseConvTensor(feats, idx, shape, a.batch)
    net = MinkUNet().to(a.device)
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3)
    print("voxels %d, batch %d, device %s, %d parameters" % (len(idx), a.batch, a.device,
                                                              sum(p.numel() for p in net.parameters())))
    for step in range(a.steps):
        t0 = time.time()
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16, enabled=a.amp and a.device == "cuda"):
            out = net(x)
        loss = F.cross_entropy(out.features.float(), lab)
        loss.backward()
        opt.step()
        if a.device == "cuda":
            torch.cuda.synchronize()
        acc = (out.features.argmax(1) == lab).float().mean().item()
        if step % 5 == 0 or step == a.steps - 1:
            print("step %3d  loss %.4f  acc %.3f  %.1f ms" % (step, loss.item(), acc, 1e3 * (time.time() - t0)))


if __name__ == "__main__":
    main()
