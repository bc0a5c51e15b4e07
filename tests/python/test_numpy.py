"""Tests of the Python binding that need no torch: the ctypes declarations, voxconv.numpy
against an independent f64 reference (tests/python/reference.py) for every kind, pass and
dtype, the error paths, VOXCONV_LIBRARY and `pip install ./python`.

    PYTHONPATH=python VOXCONV_LIBRARY=build/libvoxconv.so python3 tests/python/test_numpy.py [filter]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402
from runner import expect_raises  # noqa: E402
import voxconv  # noqa: E402
import voxconv.numpy as vnp  # noqa: E402
from voxconv import _capi  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RNG = np.random.default_rng(int(os.environ.get("VC_SEED", "1")))
TOL = {np.float32: 1e-5, np.float16: 1e-2}


def rel_err(got, want):
    want = np.asarray(want, np.float64)
    return np.linalg.norm(np.asarray(got, np.float64) - want) / max(np.linalg.norm(want), 1e-30)


def random_coords(n, batches=2, lo=-4, hi=5):
    c = np.c_[RNG.integers(0, batches, (n, 1)), RNG.integers(lo, hi, (n, 3))]
    c = np.unique(c, axis=0)
    return c[RNG.permutation(len(c))].astype(np.int32)  # not sorted: row order must be kept


def same_map(conv, want_out, want_pairs, what):
    assert np.array_equal(conv.out_coords, want_out), "%s: output sites differ" % what
    off, pin, pout = conv.kernel_map()
    for r, lst in want_pairs.items():
        got = list(zip(pin[off[r]:off[r + 1]].tolist(), pout[off[r]:off[r + 1]].tolist()))
        assert got == lst, "%s: offset %d pairs %s, reference %s" % (what, r, got[:6], lst[:6])


def test_every_c_function_is_declared():
    header = open(os.path.join(ROOT, "include", "voxconv.h")).read()
    names = set(re.findall(r"^VC_API\s[^(]*?\b(vc_\w+)\s*\(", header, re.M))
    assert len(names) >= 20, names
    assert names == set(_capi.SIGNATURES), "header vs binding: %s" % sorted(names ^ set(_capi.SIGNATURES))
    assert voxconv.__version__ == "%d.%d.%d" % tuple(
        int(re.search(r"#define VC_VERSION_%s (\d+)" % p, header).group(1)) for p in ("MAJOR", "MINOR", "PATCH"))


GEOMETRIES = [  # kind, kernel, stride, padding, dilation, bound
    ("submanifold", (3, 3, 3), 1, None, (1, 1, 1), None),
    ("submanifold", (1, 3, 5), 1, None, (2, 1, 1), None),
    ("sparse", (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), None),
    ("sparse", (3, 2, 3), (2, 1, 2), (1, 0, 2), (1, 1, 1), (3, 5, 2)),
    ("transposed", (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), None),
    ("transposed", (3, 3, 2), (2, 2, 1), (1, 2, 0), (1, 1, 1), (6, 4, 7)),
]


def _conv_case(kind, k, s, p, d, bound, dtype, ci=5, co=7):
    s3 = _capi.triple(s, "stride")
    coords = random_coords(120)
    if kind == "inverse":
        fwd = vnp.SparseConv(coords, "sparse", k, s, p, d)
        conv = vnp.SparseConv(None, "inverse", k, s, p, d, paired=fwd)
        pout, ppairs = ref.kernel_map("sparse", coords, k, s3, p, d)
        want_out, pairs = ref.kernel_map("inverse", coords, k, paired=(pout, ppairs))
    else:
        conv = vnp.SparseConv(coords, kind, k, s, p, d, output_bound=bound)
        want_out, pairs = ref.kernel_map(kind, coords, k, s3, p, d, bound)
    what = "%s k=%s s=%s bound=%s %s" % (kind, k, s, bound, np.dtype(dtype).name)
    same_map(conv, want_out, pairs, what)
    n_in, n_out = conv.in_count, conv.out_count
    x = RNG.standard_normal((n_in, ci)).astype(dtype)
    w = (RNG.standard_normal((co,) + tuple(k) + (ci,)) * 0.3).astype(dtype)
    b = RNG.standard_normal(co).astype(dtype)
    dy = RNG.standard_normal((n_out, co)).astype(dtype)
    tol = TOL[dtype]
    for algo in ("auto", "reference", "explicit"):
        y = conv.forward(x, w, b, algo=algo)
        assert y.dtype == dtype and y.shape == (n_out, co)
        e = rel_err(y, ref.forward(pairs, n_out, x, w, b))
        assert e < tol, "%s %s forward: rel err %.3g" % (what, algo, e)
        dx = conv.backward_data(dy, w, algo=algo)
        e = rel_err(dx, ref.backward_data(pairs, n_in, dy, w))
        assert e < tol, "%s %s backward_data: rel err %.3g" % (what, algo, e)
        dw, db = conv.backward_weight(x, dy, algo=algo)
        rdw, rdb = ref.backward_weight(pairs, x, dy, k)
        e = max(rel_err(dw, rdw), rel_err(db, rdb))
        assert e < tol, "%s %s backward_weight: rel err %.3g" % (what, algo, e)


def test_kinds_passes_dtypes_vs_reference():
    for dtype in (np.float32, np.float16):
        for g in GEOMETRIES:
            _conv_case(*g, dtype=dtype)
        _conv_case("inverse", (3, 2, 2), (2, 2, 2), (1, 0, 0), (1, 1, 1), None, dtype)


def test_odd_channels_and_no_bias():
    coords = random_coords(80)
    conv = vnp.SparseConv(coords, "submanifold", 3)
    _, pairs = ref.kernel_map("submanifold", coords, (3, 3, 3))
    x = RNG.standard_normal((len(coords), 3)).astype(np.float32)
    w = RNG.standard_normal((1, 3, 3, 3, 3)).astype(np.float32)
    e = rel_err(conv.forward(x, w), ref.forward(pairs, len(coords), x, w))
    assert e < 1e-5, e
    dw, db = conv.backward_weight(x, np.ones((len(coords), 1), np.float32), bias=False)
    assert db is None and dw.shape == (1, 3, 3, 3, 3)


def test_empty_input_gives_empty_outputs():
    conv = vnp.SparseConv(np.zeros((0, 4), np.int32), "sparse", 2, 2)
    assert conv.out_count == 0 and conv.out_coords.shape == (0, 4)
    y = conv.forward(np.zeros((0, 4), np.float32), np.ones((6, 2, 2, 2, 4), np.float32))
    assert y.shape == (0, 6)


def test_functional_conv():
    coords = random_coords(60)
    x = RNG.standard_normal((len(coords), 4)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 2, 2, 4)).astype(np.float32)
    y, oc = vnp.conv(x, coords, w, kind="sparse", stride=2)
    want_out, pairs = ref.kernel_map("sparse", coords, (2, 2, 2), (2, 2, 2), (0, 0, 0))
    assert np.array_equal(oc, want_out)
    assert rel_err(y, ref.forward(pairs, len(oc), x, w)) < 1e-5


def test_errors_bad_input():
    c = random_coords(30)
    x = np.ones((len(c), 4), np.float32)
    w = np.ones((2, 3, 3, 3, 4), np.float32)
    conv = vnp.SparseConv(c, "submanifold", 3)
    expect_raises(ValueError, "coords has shape [30, 3], expected [N, 4]", vnp.SparseConv, c[:, :3])
    expect_raises(ValueError, "kind 'dense' is not one of", vnp.SparseConv, c, "dense")
    expect_raises(ValueError, "weight has shape [2, 3, 3, 4], expected [Co, 3, 3, 3, Ci]", conv.forward, x,
                  w.reshape(2, 3, 3, 12)[..., :4])
    expect_raises(ValueError, "x has shape [29, 4], expected [%d, 4]" % len(c), conv.forward, x[1:], w)
    expect_raises(ValueError, "bias has shape [3], expected [2]", conv.forward, x, w, np.ones(3, np.float32))
    expect_raises(ValueError, "dy has shape", conv.backward_data, np.ones((len(c), 3), np.float32), w)
    expect_raises(TypeError, "dtype float64 is not supported", conv.forward, x.astype(np.float64), w)
    expect_raises(ValueError, "algo 'fastest' is not one of", conv.forward, x, w, algo="fastest")
    expect_raises(ValueError, "needs paired=", vnp.SparseConv, None, "inverse", 2, 2)
    dup = np.vstack([c, c[3:4]])
    e = expect_raises(voxconv.VoxconvError, "coords rows 3 and 30 are the same site", vnp.SparseConv, dup)
    assert e.status == "VC_ERR_DUPLICATE_COORDS", e.status
    far = c.copy()
    far[5, 2] = 70000
    e = expect_raises(voxconv.VoxconvError, "70000", vnp.SparseConv, far)
    assert e.status == "VC_ERR_OUT_OF_RANGE", e.status
    e = expect_raises(voxconv.VoxconvError, "desc->kernel_size[0] = 8 is outside [1, 7]", vnp.SparseConv, c,
                      "sparse", 8)
    assert e.status == "VC_ERR_INVALID_ARGUMENT"
    expect_raises(voxconv.VoxconvError, "desc->output_bound[1] = -2 is negative", vnp.SparseConv, c, "sparse",
                      2, 2, output_bound=(4, -2, 4))
    e = expect_raises(voxconv.VoxconvError, "args->algo = VC_ALGO_IMPLICIT is not available on the cpu backend",
                      conv.forward, x, w, algo="implicit")
    assert e.status == "VC_ERR_UNSUPPORTED", e.status
    # nothing was lost: the plan still works after every failure
    assert conv.forward(x, w).shape == (len(c), 2)


PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(voxconv.__file__)))


def _run_python(code, env_extra, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_PARENT
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)


def test_voxconv_library_env_selects_the_build():
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "libvoxconv-copy.so")
        shutil.copy2(_capi.library_path, copy)
        r = _run_python("import voxconv; print(voxconv.library_path)", {"VOXCONV_LIBRARY": copy}, tmp)
        assert r.returncode == 0 and r.stdout.strip() == copy, (r.stdout, r.stderr)
        r = _run_python("import voxconv", {"VOXCONV_LIBRARY": os.path.join(tmp, "missing.so")}, tmp)
        assert r.returncode != 0 and "libvoxconv.so not found (tried " in r.stderr, r.stderr


def test_pip_install_bundles_the_library():
    if os.environ.get("VC_SKIP_PIP"):
        print("  skipped: VC_SKIP_PIP is set")
        return
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "site")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target,
                            os.path.join(ROOT, "python")], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        env = {"PYTHONPATH": target, "VOXCONV_LIBRARY": ""}
        r = _run_python("import voxconv, voxconv.numpy as v, numpy as np; print(voxconv.library_path); "
                        "print(v.SparseConv(np.zeros((1, 4), np.int32)).out_count)", env, tmp)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.split()
        assert lines[0] == os.path.join(target, "voxconv", "libvoxconv.so") and lines[1] == "1", r.stdout


if __name__ == "__main__":
    import runner
    sys.exit(runner.run(globals(), "python %s, numpy %s, %s" % (sys.version.split()[0], np.__version__,
                                                                _capi.library_path)))
