"""Arrays in and out on a GPU: CuPy, torch, numba device arrays, views, out=, stream=."""
import numpy as np
import pytest

import numbamr as nm

pytestmark = pytest.mark.gpu


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


X = np.random.default_rng(0).standard_normal((300, 1000)).astype(np.float32)


def test_numpy_in_numpy_out():
    y = nm.jit(softmax)(X)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, ref(X), rtol=1e-5, atol=1e-7)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    xt = torch.as_tensor(X, device="cuda")
    y = nm.jit(softmax)(xt)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    np.testing.assert_allclose(y.cpu().numpy(), ref(X), rtol=1e-5, atol=1e-7)


def test_numba_device_array_in():
    from numba import cuda
    y = nm.jit(softmax)(cuda.to_device(X))
    np.testing.assert_allclose(y.get(), ref(X), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("view", ["T", "rows", "cols", "reversed"])
def test_views_are_read_in_place(view):
    import cupy as cp
    big = cp.asarray(np.random.default_rng(1).standard_normal((600, 2000)).astype(np.float32))
    x = {"T": big[:1000, :300].T, "rows": big[::2, :1000], "cols": big[:300, ::2],
         "reversed": big[:300, 999::-1]}[view]
    y = nm.jit(softmax)(x)
    np.testing.assert_allclose(y.get(), ref(x.get()), rtol=1e-5, atol=1e-7)


def test_out_and_stream():
    import cupy as cp
    x = cp.asarray(X)
    out = cp.full_like(x, cp.nan)
    s = cp.cuda.Stream(non_blocking=True)
    fn = nm.jit(softmax)
    got = fn(x, out=out, stream=s)
    s.synchronize()
    assert got is out
    np.testing.assert_allclose(out.get(), ref(X), rtol=1e-5, atol=1e-7)
    with s:                                   # default: the current CuPy stream
        y = fn(x)
    s.synchronize()
    np.testing.assert_allclose(y.get(), ref(X), rtol=1e-5, atol=1e-7)
    with pytest.raises(nm.ArgumentError, match="overlaps"):
        fn(x, out=x)


def test_many_shapes_and_threads():
    import cupy as cp
    from helpers import run_in_threads
    fn = nm.jit(softmax)
    xs = [cp.asarray(np.random.default_rng(n).standard_normal((7, n)).astype(np.float32))
          for n in (31, 32, 33, 1000)]

    def work(x):
        for _ in range(20):
            np.testing.assert_allclose(fn(x).get(), ref(x.get()), rtol=1e-5, atol=1e-7)
    run_in_threads(work, xs * 2)
    assert len(fn._cache) == 4


CUBIN_CHILD = r"""
import sys
sys.path[:0] = {path!r}
import numpy as np, cupy as cp, numbamr as nm
from test_gpu_interop import softmax, ref, X
fn = nm.jit(softmax)
y = fn(cp.asarray(X))
np.testing.assert_allclose(y.get(), ref(X), rtol=1e-5, atol=1e-7)
(compiled,) = fn._cache.values()
print("numba" if compiled.launchers[0].kernel is not None else "cubin")
"""


def test_new_process_loads_the_cubin_cache(tmp_path):
    """The first process compiles with numba and stores a cubin; the next loads the cubin
    (no numba compile) and gets the same right answer; a corrupted cubin is compiled anew
    and rewritten."""
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    code = CUBIN_CHILD.format(path=[here, os.path.dirname(here)])
    env = dict(os.environ, NUMBAMR_CACHE_DIR=str(tmp_path))

    def child():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()[-1]

    assert child() == "numba"
    assert child() == "cubin"
    (entry,) = (tmp_path / "bin").glob("*.cubin")
    data = entry.read_bytes()
    entry.write_bytes(data[:len(data) // 2])           # truncated
    assert child() == "numba"
    assert child() == "cubin"                           # rewritten whole
