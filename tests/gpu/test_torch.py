"""Torch tests of voxconv.pytorch, run on a GPU machine by tests/gpu/run.sh (CPU-only parts
run anywhere torch is installed):

    PYTHONPATH=python VOXCONV_LIBRARY=build/libvoxconv.so python3 tests/gpu/test_torch.py [filter]

Every module against a dense f64 torch reference (F.conv3d / conv_transpose3d / pooling on
the densified tensor), the C reference algorithm, directional finite differences in f32,
CPU vs CUDA agreement, indice_key reuse, spconv state dicts, CUDA-graph capture of a
submanifold layer's forward and backward, and a two-level U-Net trained for 50 steps."""
import collections
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from runner import expect_raises  # noqa: E402

import voxconv.pytorch as spconv
from voxconv.pytorch import SparseConvTensor
from voxconv.pytorch import core as vcore

CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
GEN = torch.Generator().manual_seed(int(os.environ.get("VC_SEED", "1")))


def randn(*shape):
    return torch.randn(*shape, generator=GEN)


def rel_err(got, want):
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    return (torch.linalg.norm(got - want) / torch.linalg.norm(want).clamp_min(1e-30)).item()


def random_tensor(n, c, shape=(9, 10, 8), batch=2, device="cpu", dtype=torch.float32):
    """About n unique random sites in shape, rows in random order."""
    lin = torch.randperm(batch * shape[0] * shape[1] * shape[2], generator=GEN)[:n]
    idx = torch.stack([lin // (shape[0] * shape[1] * shape[2]), (lin // (shape[1] * shape[2])) % shape[0],
                       (lin // shape[2]) % shape[1], lin % shape[2]], 1).int()
    return SparseConvTensor(randn(len(idx), c).to(dtype).to(device), idx.to(device), list(shape), batch)


def sample(dense, idx):
    """Rows of a [B, C, D0, D1, D2] tensor at indices [N, 4] -> [N, C]."""
    i = idx.long().cpu()
    return dense[i[:, 0], :, i[:, 1], i[:, 2], i[:, 3]]


def sites_of(mask):
    return torch.nonzero(mask[:, 0]).int()  # [B, 1, ...] -> (b, x, y, z), ascending


def reference(layer, x, fwd_layer=None, fwd_in=None):
    """(out indices, f64 output features, dense grads helper) of a conv layer on x from torch's
    dense convolutions; x's features must require grad in f64 for the gradients."""
    xd = x.dense()
    w = layer.weight.double().cpu()
    b = layer.bias.double().cpu() if layer.bias is not None else None
    k, s, p, d = layer.kernel_size, layer.stride, layer.padding, layer.dilation
    occ = torch.zeros_like(xd[:, :1])
    i = x.indices.long().cpu()
    occ[i[:, 0], 0, i[:, 1], i[:, 2], i[:, 3]] = 1
    ones = torch.ones((1, 1) + tuple(k), dtype=xd.dtype)
    if layer.inverse:
        kf, sf, pf, df = fwd_layer.kernel_size, fwd_layer.stride, fwd_layer.padding, fwd_layer.dilation
        # the adjoint of the strided conv: output_padding restores the rows that the strided
        # conv's floor division left over (without it conv_transpose3d crops them)
        full = fwd_in.spatial_shape
        op = tuple(full[a] - ((xd.shape[2 + a] - 1) * sf[a] - 2 * pf[a] + df[a] * (kf[a] - 1) + 1) for a in range(3))
        yd = F.conv_transpose3d(xd, w.permute(4, 0, 1, 2, 3), b, sf, pf, op, dilation=df)
        out_idx = fwd_in.indices
    elif layer.subm:
        yd = F.conv3d(xd, w.permute(0, 4, 1, 2, 3), b, 1, tuple(k_ // 2 * d_ for k_, d_ in zip(k, d)), d)
        out_idx = x.indices
    elif layer.transposed:
        yd = F.conv_transpose3d(xd, w.permute(4, 0, 1, 2, 3), b, s, p, layer.output_padding, dilation=d)
        out_idx = sites_of(F.conv_transpose3d(occ, ones, None, s, p, layer.output_padding, dilation=d) > 0)
    else:
        yd = F.conv3d(xd, w.permute(0, 4, 1, 2, 3), b, s, p, d)
        out_idx = sites_of(F.conv3d(occ, ones, None, s, p, d) > 0)
    return out_idx, sample(yd, out_idx)


def to_ref_tensor(x):
    """A CPU f64 copy of x whose features are a leaf that requires grad."""
    f = x.features.detach().double().cpu().requires_grad_(True)
    return SparseConvTensor(f, x.indices.cpu(), x.spatial_shape, x.batch_size), f


def check_layer(layer, x, dtype, what, fwd_layer=None, fwd_in=None):
    """Forward and all gradients of `layer` on x against the dense f64 reference."""
    xr, fr = to_ref_tensor(x)
    wr = layer.weight.detach().double().cpu().requires_grad_(True)
    br = layer.bias.detach().double().cpu().requires_grad_(True) if layer.bias is not None else None
    saved = (layer.weight, layer.bias)
    try:  # the reference reads layer.weight / bias: point it at f64 leaves
        layer._parameters["weight"], layer._parameters["bias"] = wr, br
        out_idx, yr = reference(layer, xr, fwd_layer, fwd_in)
    finally:
        layer._parameters["weight"], layer._parameters["bias"] = saved
    layer.zero_grad(set_to_none=True)
    f = x.features.detach().clone().requires_grad_(True)
    y = layer(x.replace_feature(f))
    tol = TOL[dtype]
    assert y.features.dtype == dtype, "%s: output dtype %s" % (what, y.features.dtype)
    assert torch.equal(y.indices.cpu(), out_idx.cpu()), "%s: output sites differ (%d vs %d)" % (
        what, y.indices.shape[0], out_idx.shape[0])
    e = rel_err(y.features, yr)
    assert e < tol, "%s forward: rel err %.3g" % (what, e)
    g = randn(*yr.shape)
    (y.features.float() * g.to(y.features.device)).sum().backward()
    (yr * g.double()).sum().backward()
    for name, got, want in (("dx", f.grad, fr.grad), ("dw", layer.weight.grad, wr.grad),
                            ("db", None if br is None else layer.bias.grad, None if br is None else br.grad)):
        if want is None:
            continue
        e = rel_err(got, want)
        assert e < tol, "%s %s: rel err %.3g" % (what, name, e)


def conv_layers():
    """(name, layer factory, input channels) for each kind."""
    return [
        ("subm k3", lambda: spconv.SubMConv3d(5, 7, 3), 5),
        ("subm k(3,1,5) d2", lambda: spconv.SubMConv3d(4, 6, (3, 1, 5), dilation=(2, 1, 1)), 4),
        ("sparse k3 s2 p1", lambda: spconv.SparseConv3d(5, 8, 3, 2, 1), 5),
        ("sparse k2 s2 nobias", lambda: spconv.SparseConv3d(3, 4, 2, 2, bias=False), 3),
        ("transposed k3 s2 p1", lambda: spconv.SparseConvTranspose3d(6, 5, 3, 2, 1), 6),
        ("transposed k2 s2 op1", lambda: spconv.SparseConvTranspose3d(4, 4, 2, 2, 0, output_padding=1), 4),
    ]


def test_modules_vs_dense_reference():
    for dev in DEVICES:
        dtypes = [torch.float32] + ([torch.float16, torch.bfloat16] if dev == "cuda" else [torch.bfloat16])
        for dtype in dtypes:
            for name, make, ci in conv_layers():
                layer = make().to(dev)
                x = random_tensor(300, ci, device=dev, dtype=dtype)
                check_layer(layer, x, dtype, "%s %s %s" % (name, dev, dtype))
            # inverse of a strided conv, through indice_key
            down = spconv.SparseConv3d(4, 6, 3, 2, 1, indice_key="d1").to(dev).to(dtype)
            inv = spconv.SparseInverseConv3d(6, 5, 3, indice_key="d1").to(dev)
            x = random_tensor(300, 4, device=dev, dtype=dtype)
            mid = down(x)
            mid = mid.replace_feature(mid.features.detach())
            check_layer(inv, mid, dtype, "inverse %s %s" % (dev, dtype), fwd_layer=down, fwd_in=x)


def test_modules_vs_c_reference_algorithm():
    """Each module on each device against the C library's reference algorithm (plain loops,
    f64 accumulation; CPU only, so CUDA results are compared with a CPU copy)."""
    for dev in DEVICES:
        for name, make, ci in conv_layers():
            layer = make().to(dev)
            ref_layer = make()
            ref_layer.load_state_dict(layer.state_dict())
            ref_layer.algo = "reference"
            x = random_tensor(250, ci, device=dev)
            y = layer(x)
            y_ref = ref_layer(SparseConvTensor(x.features.cpu(), x.indices.cpu(), x.spatial_shape, x.batch_size))
            assert torch.equal(y.indices.cpu(), y_ref.indices)
            e = rel_err(y.features, y_ref.features)
            assert e < 1e-5, "%s %s: vs the reference algorithm rel err %.3g" % (name, dev, e)


def test_finite_differences_f32():
    """The conv is linear in features and weight, so central differences along a random
    direction are exact up to f32 rounding."""
    for dev in DEVICES:
        for name, make, ci in conv_layers():
            layer = make().to(dev)
            x = random_tensor(120, ci, device=dev)
            f = x.features.clone().requires_grad_(True)
            y = layer(x.replace_feature(f)).features
            g = randn(*y.shape).to(dev)
            (y * g).sum().backward()
            for which, tensor, grad in (("features", f, f.grad), ("weight", layer.weight, layer.weight.grad)):
                v = randn(*tensor.shape).to(dev)
                eps = 0.5
                with torch.no_grad():
                    base = tensor.detach().clone()
                    tensor.data.copy_(base + eps * v)
                    lp = (layer(x.replace_feature(f.detach())).features * g).sum().double()
                    tensor.data.copy_(base - eps * v)
                    lm = (layer(x.replace_feature(f.detach())).features * g).sum().double()
                    tensor.data.copy_(base)
                fd = ((lp - lm) / (2 * eps)).item()
                an = (grad.double() * v.double()).sum().item()
                assert abs(fd - an) <= 1e-3 * max(1.0, abs(an)), "%s %s d/d%s: fd %.6g, autograd %.6g" % (
                    name, dev, which, fd, an)


def test_cpu_and_cuda_agree():
    if not CUDA:
        print("  skipped: no CUDA device")
        return
    for name, make, ci in conv_layers():
        a = make()
        b = make().cuda()
        b.load_state_dict(a.state_dict())
        x = random_tensor(400, ci)
        xc = SparseConvTensor(x.features.cuda(), x.indices.cuda(), x.spatial_shape, x.batch_size)
        fa, fb = x.features.clone().requires_grad_(True), xc.features.clone().requires_grad_(True)
        ya, yb = a(x.replace_feature(fa)), b(xc.replace_feature(fb))
        assert torch.equal(ya.indices, yb.indices.cpu()), name
        assert rel_err(yb.features, ya.features) < 1e-5, name
        g = randn(*ya.features.shape)
        (ya.features * g).sum().backward()
        (yb.features * g.cuda()).sum().backward()
        for n1, p1, p2 in (("dx", fa.grad, fb.grad), ("dw", a.weight.grad, b.weight.grad)):
            assert rel_err(p2, p1) < 1e-5, "%s %s: cpu vs cuda %.3g" % (name, n1, rel_err(p2, p1))


def test_indice_key_reuse():
    built = collections.Counter()
    orig = vcore.KernelMap.__init__

    def counting(self, kind, *a, **k):
        built[kind] += 1
        orig(self, kind, *a, **k)

    vcore.KernelMap.__init__ = counting
    try:
        for dev in DEVICES:
            built.clear()
            net = spconv.SparseSequential(
                spconv.SubMConv3d(4, 8, 3, indice_key="s0"), torch.nn.ReLU(),
                spconv.SubMConv3d(8, 8, 3, indice_key="s0"),
                spconv.SparseConv3d(8, 16, 2, 2, indice_key="down"),
                spconv.SubMConv3d(16, 16, 3, indice_key="s1"), spconv.SubMConv3d(16, 16, 3, indice_key="s1"),
                spconv.SparseInverseConv3d(16, 8, 2, indice_key="down"),
                spconv.SubMConv3d(8, 8, 3, indice_key="s0"), spconv.SubMConv3d(8, 3, 3)).to(dev)
            x = random_tensor(500, 4, device=dev)
            y = net(x)
            assert torch.equal(y.indices, x.indices), "%s: the inverse conv must return the input sites" % dev
            # s0 once, down once, s1 once, the inverse once; the keyless last layer reuses s0's
            # sites through the automatic submanifold key (one more map: a different key)
            assert built == {"submanifold": 3, "sparse": 1, "inverse": 1}, "%s: maps built %s" % (dev, dict(built))
            assert y.indice_dict["s0"].in_indices is x.indices
            expect_raises(ValueError, "indice_key 's0' belongs to a submanifold map (kernel (3, 3, 3)",
                          spconv.SubMConv3d(8, 8, 5, indice_key="s0").to(dev),
                          y.replace_feature(y.features.new_ones(y.features.shape[0], 8)))
    finally:
        vcore.KernelMap.__init__ = orig


def test_spconv_state_dict_loads():
    """A state dict in spconv's layout (made here from the documented layout: weight
    [Co, K0, K1, K2, Ci], bias [Co]) loads unchanged and gives the reference outputs; the
    1.x layout [K0, K1, K2, Ci, Co] loads through convert_legacy_state_dict."""
    for dev in DEVICES:
        net = spconv.SparseSequential(spconv.SubMConv3d(4, 6, 3, indice_key="a"), spconv.SparseConv3d(6, 5, 2, 2),
                                      spconv.SubMConv3d(5, 3, 1)).to(dev)
        w0, b0 = randn(6, 3, 3, 3, 4), randn(6)
        w1 = randn(5, 2, 2, 2, 6)
        w2, b2 = randn(3, 1, 1, 1, 5), randn(3)
        sd = collections.OrderedDict([("0.weight", w0), ("0.bias", b0), ("1.weight", w1), ("1.bias", randn(5)),
                                      ("2.weight", w2), ("2.bias", b2)])
        assert list(net.state_dict().keys()) == list(sd.keys()), list(net.state_dict().keys())
        assert all(net.state_dict()[k].shape == v.shape for k, v in sd.items())
        net.load_state_dict(sd)
        x = random_tensor(300, 4, device=dev)
        y = net(x)
        # reference: layer by layer with the dense convs
        xr, _ = to_ref_tensor(x)
        _, h = reference(net[0], xr)
        h = SparseConvTensor(h, x.indices.cpu(), x.spatial_shape, x.batch_size)
        idx1, h1 = reference(net[1], h)
        want = h1 @ w2.double().view(3, 5).t() + b2.double()  # spconv's 1x1x1: a matmul, sites kept
        assert torch.equal(y.indices.cpu(), idx1.cpu())
        e = rel_err(y.features, want)
        assert e < 1e-5, "%s: state-dict network rel err %.3g" % (dev, e)
        legacy = collections.OrderedDict((k, v.permute(1, 2, 3, 4, 0) if v.dim() == 5 else v) for k, v in sd.items())
        net2 = spconv.SparseSequential(spconv.SubMConv3d(4, 6, 3, indice_key="a"), spconv.SparseConv3d(6, 5, 2, 2),
                                       spconv.SubMConv3d(5, 3, 1)).to(dev)
        net2.load_state_dict(spconv.convert_legacy_state_dict(legacy))
        assert rel_err(net2(x).features, y.features) == 0.0


def test_pooling_and_dense():
    for dev in DEVICES:
        x = random_tensor(400, 5, device=dev)
        xr, _ = to_ref_tensor(x)
        xd = xr.dense()
        occ = torch.zeros_like(xd[:, :1])
        i = x.indices.long().cpu()
        occ[i[:, 0], 0, i[:, 1], i[:, 2], i[:, 3]] = 1
        manual = torch.zeros_like(xd)
        manual[i[:, 0], :, i[:, 1], i[:, 2], i[:, 3]] = xr.features.detach()
        assert torch.equal(xd.detach(), manual), "dense() misplaces features"
        for k, s, p in ((2, 2, 0), (3, 2, 1)):
            mp = spconv.SparseMaxPool3d(k, s, p)(x)
            neg = torch.where(occ.bool(), xd.detach(), torch.full_like(xd, -float("inf")))
            want_sites = sites_of(F.max_pool3d(occ, k, s, p) > 0)
            assert torch.equal(mp.indices.cpu(), want_sites), "max pool sites k%d s%d" % (k, s)
            want = sample(F.max_pool3d(neg, k, s, p), want_sites)
            assert rel_err(mp.features, want) < 1e-6, "max pool k%d s%d %s" % (k, s, dev)
            ap = spconv.SparseAvgPool3d(k, s, p)(x)
            ones = torch.ones(1, 1, k, k, k, dtype=xd.dtype)
            tot = F.conv3d(xd.detach().reshape(-1, 1, *xd.shape[2:]), ones, None, s, p).reshape(
                xd.shape[0], xd.shape[1], *[(n + 2 * p - k) // s + 1 for n in xd.shape[2:]])
            cnt = F.conv3d(occ, ones, None, s, p)
            want = sample(tot / cnt.clamp_min(1), want_sites)
            assert rel_err(ap.features, want) < 1e-6, "avg pool k%d s%d %s" % (k, s, dev)
        gm, ga = spconv.SparseGlobalMaxPool()(x), spconv.SparseGlobalAvgPool()(x)
        for b in range(x.batch_size):
            rows = x.features[x.indices[:, 0] == b]
            assert torch.allclose(gm[b], rows.max(0).values) and torch.allclose(ga[b], rows.mean(0), atol=1e-6)
        # gradients flow through pooling
        f = x.features.clone().requires_grad_(True)
        spconv.SparseMaxPool3d(2, 2)(x.replace_feature(f)).features.sum().backward()
        assert f.grad is not None and f.grad.abs().sum() > 0


def test_autocast_and_dtypes():
    if not CUDA:
        print("  skipped: no CUDA device")
        return
    layer = spconv.SubMConv3d(8, 8, 3).cuda()
    x = random_tensor(300, 8, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        y = layer(x)
    assert y.features.dtype == torch.float16
    e = rel_err(y.features, layer(x).features)
    assert e < 1e-2, "autocast f16 vs f32: %.3g" % e
    y.features.float().sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32


def test_errors():
    x = random_tensor(50, 4)
    for fn, exc, needle in (
            (lambda: spconv.SubMConv3d(5, 4, 3)(x), ValueError, "SubMConv3d has in_channels 5, features are [50, 4]"),
            (lambda: spconv.SparseInverseConv3d(4, 4, 3, indice_key="nope")(x), ValueError,
             "needs indice_key='nope' of an earlier SparseConv3d"),
            (lambda: spconv.SubMConv3d(4, 4, 3)(x.features), TypeError, "expects a SparseConvTensor"),
            (lambda: spconv.SubMConv3d(4, 4, 3)(x.replace_feature(x.features.double())), TypeError,
             "feature dtype torch.float64 is not supported"),
            (lambda: spconv.SparseConvolution(2, 4, 4, 3), NotImplementedError, "2-D sparse convs are not supported"),
            (lambda: SparseConvTensor(x.features, x.indices[:, :3], [9, 10, 8], 2), ValueError, "must be [N, C]"),
    ):
        expect_raises(exc, needle, fn)
    from voxconv import VoxconvError
    dup = SparseConvTensor(torch.ones(3, 4), torch.tensor([[0, 1, 1, 1], [0, 2, 2, 2], [0, 1, 1, 1]]), [4, 4, 4], 1)
    e = expect_raises(VoxconvError, "coords rows 0 and 2 are the same site (0, 1, 1, 1)", spconv.SubMConv3d(4, 4, 3), dup)
    assert e.status == "VC_ERR_DUPLICATE_COORDS", e.status


def test_cuda_graph_capture_submanifold():
    """A submanifold layer's forward and backward captured in a CUDA graph and replayed give
    the eager results bit for bit (no host synchronisation inside)."""
    if not CUDA:
        print("  skipped: no CUDA device")
        return
    torch.manual_seed(0)
    layer = spconv.SubMConv3d(32, 32, 3).cuda().half()
    x = random_tensor(3000, 32, shape=(24, 24, 24), device="cuda", dtype=torch.float16)
    feats = x.features.clone().requires_grad_(True)
    inp = x.replace_feature(feats)

    def step():
        y = layer(inp)
        (y.features.float() ** 2).sum().backward()
        return y.features

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm up: builds the kernel map outside the capture
            layer.zero_grad(set_to_none=True)
            feats.grad = None
            step()
    torch.cuda.current_stream().wait_stream(s)
    layer.zero_grad(set_to_none=True)
    feats.grad = None
    eager_y = step().detach().clone()
    eager_dw, eager_dx = layer.weight.grad.clone(), feats.grad.clone()
    layer.zero_grad(set_to_none=True)
    feats.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y_static = step()
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y_static, eager_y), "graph forward differs from eager"
    assert torch.equal(feats.grad, eager_dx), "graph dgrad differs from eager"
    # wgrad's split-K adds in any order unless deterministic; the forward and dgrad are exact
    assert rel_err(layer.weight.grad, eager_dw) < 1e-3, "graph wgrad differs: %.3g" % rel_err(layer.weight.grad,
                                                                                               eager_dw)


class TinyUNet(torch.nn.Module):
    def __init__(self, cin, c, cout):
        super().__init__()
        self.enc = spconv.SparseSequential(spconv.SubMConv3d(cin, c, 3, indice_key="s0"), torch.nn.BatchNorm1d(c),
                                           torch.nn.ReLU())
        self.down = spconv.SparseSequential(spconv.SparseConv3d(c, 2 * c, 2, 2, indice_key="d1"),
                                            torch.nn.BatchNorm1d(2 * c), torch.nn.ReLU(),
                                            spconv.SubMConv3d(2 * c, 2 * c, 3, indice_key="s1"),
                                            torch.nn.BatchNorm1d(2 * c), torch.nn.ReLU())
        self.up = spconv.SparseInverseConv3d(2 * c, c, 2, indice_key="d1")
        self.dec = spconv.SparseSequential(spconv.SubMConv3d(2 * c, c, 3, indice_key="s0"), torch.nn.BatchNorm1d(c),
                                           torch.nn.ReLU(), spconv.SubMConv3d(c, cout, 1))

    def forward(self, x):
        e = self.enc(x)
        u = self.up(self.down(e))
        return self.dec(u.replace_feature(torch.cat([u.features, e.features], 1)))


def test_unet_trains():
    dev = "cuda" if CUDA else "cpu"
    torch.manual_seed(0)
    x = random_tensor(4000 if CUDA else 800, 4, shape=(20, 20, 20), device=dev)
    teacher = spconv.SparseSequential(spconv.SubMConv3d(4, 8, 3), torch.nn.Tanh(), spconv.SubMConv3d(8, 2, 3)).to(dev)
    with torch.no_grad():
        target = teacher(x).features
    net = TinyUNet(4, 16, 2).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(50):
        opt.zero_grad()
        loss = F.mse_loss(net(x).features, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print("  loss %.4f -> %.4f over 50 steps (%s)" % (losses[0], losses[-1], dev))
    assert losses[-1] < 0.5 * losses[0], "the loss did not fall: %s" % losses[::10]


def test_readme_quick_start_runs():
    """The README's PyTorch quick start, extracted and run as written."""
    if not CUDA:
        print("  skipped: the quick start uses CUDA")
        return
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")).read()
    blocks = [b.split("```")[0] for b in readme.split("```python\n")[1:]]
    assert blocks, "no python block in README.md"
    scope = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    y, idx = scope["y"], scope["indices"]
    assert torch.equal(y.indices, idx) and tuple(y.features.shape) == (3, 32)
    assert tuple(scope["dense"].shape) == (1, 32, 16, 16, 16)


if __name__ == "__main__":
    import runner
    sys.exit(runner.run(globals(), "torch %s, cuda %s" % (torch.__version__, CUDA)))
