"""Every way of calling a jitted function: the generated call path each kind of call takes
on a GPU (CuPy, torch, __cuda_array_interface__ objects, numba device arrays; out=, stream=,
keywords, several outputs), arrays on a second GPU, and jitted functions pickled by
reference."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import numbamr as nm
from helpers import ref_layernorm, ref_softmax


@nm.jit
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def plain_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * w


def stats(x):
    return x.max(axis=-1), x.sum(axis=-1)


def named_stats(x):
    return {"max": x.max(axis=-1), "sum": x.sum(axis=-1)}


def centered(x):
    return x - x.mean()


# ---- pickling -------------------------------------------------------------------------------

def test_a_decorated_module_function_pickles_as_itself():
    assert pickle.loads(pickle.dumps(softmax)) is softmax


def test_a_jitted_module_function_pickles_with_its_options():
    fn = nm.jit(threads_per_row=32)(plain_softmax)
    x = np.random.default_rng(0).standard_normal((2, 40)).astype(np.float32)
    fn(x)                               # caches, locks: not what is pickled
    data = pickle.dumps(fn)
    back = pickle.loads(data)
    assert isinstance(back, type(fn)) and back is not fn and back.fn is plain_softmax
    assert back.options == fn.options and back.options.threads_per_row == 32
    assert not back._cache and len(data) < 1000
    np.testing.assert_allclose(back(x), ref_softmax(x), rtol=1e-5, atol=1e-7)


def test_a_jitted_ufunc_pickles():
    back = pickle.loads(pickle.dumps(nm.jit(np.exp)))
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    np.testing.assert_allclose(back(x), np.exp(x.astype(np.float64)), rtol=1e-6)


def test_a_function_with_the_decorated_ones_code_pickles_by_the_decorated_one():
    """nm.jit(other options) of a decorated function's own code: the module name refers to
    the decorated JitFunction, which is pickled by reference, and the options go along."""
    fn = nm.jit(vector=1)(softmax.fn)
    back = pickle.loads(pickle.dumps(fn))
    assert back.fn is softmax.fn and back.options.vector == 1


def test_local_functions_and_lambdas_are_refused_with_the_reason():
    def local(x):
        return x.sum()
    for fn in (nm.jit(local), nm.jit(lambda x: x + 1)):
        with pytest.raises(pickle.PicklingError, match="module's top level"):
            pickle.dumps(fn)


def test_a_pickle_loads_in_another_process():
    """By reference: a fresh process imports the module and finds the function there."""
    here = os.path.dirname(os.path.abspath(__file__))
    data = pickle.dumps([softmax, nm.jit(threads_per_row=32)(plain_softmax)])
    code = ("import pickle, sys, numpy as np\n"
            "a, b = pickle.loads(sys.stdin.buffer.read())\n"
            "x = np.random.default_rng(0).standard_normal((2, 40)).astype(np.float32)\n"
            "e = np.exp(x - x.max(-1, keepdims=True)); r = e / e.sum(-1, keepdims=True)\n"
            "print(type(a).__name__, b.options.threads_per_row,\n"
            "      max(float(abs(a(x) - r).max()), float(abs(b(x) - r).max())))")
    path = [here, os.path.dirname(here)] + [p for p in os.environ.get("PYTHONPATH", "")
                                            .split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path),
               NUMBA_ENABLE_CUDASIM=os.environ.get("NUMBA_ENABLE_CUDASIM", ""))
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr.decode()
    name, tpr, diff = out.stdout.decode().split()
    assert (name, tpr) == ("JitFunction", "32") and float(diff) < 1e-6


# ---- which argument becomes which leaf --------------------------------------------------------

def test_leaf_sources_follow_the_binding():
    def f(x, w, eps=1e-5, *rest, scale=2.0, **named):
        return x
    from numbamr.callpaths import leaf_sources
    fn = nm.jit(f)
    got = leaf_sources(fn, (1, 2, 3, 4, 5), {"scale": 6, "z": 7})
    assert got == ["args[0]", "args[1]", "args[2]", "args[3]", "args[4]", "kw['scale']",
                   "kw['z']"]
    assert leaf_sources(fn, (1,), {"w": 2}) == ["args[0]", "kw['w']", None, None]


def test_torch_tensors_that_require_grad_are_refused():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(nm.ArgumentError, match="'x' is a tensor that requires grad"):
        softmax(x)
    with torch.no_grad():                               # no graph would be recorded
        np.testing.assert_allclose(_host(softmax(x)), ref_softmax(x.detach().numpy()),
                                   rtol=1e-5, atol=1e-7)


# ---- on a GPU: every kind of call takes its generated path ------------------------------------

X = np.random.default_rng(1).standard_normal((300, 1000)).astype(np.float32)
W = np.random.default_rng(2).standard_normal(1000).astype(np.float32)


class CAI:
    """An array known only by its __cuda_array_interface__."""

    def __init__(self, a):
        self._a = a

    @property
    def __cuda_array_interface__(self):
        return self._a.__cuda_array_interface__


def _host(a):
    if hasattr(a, "get"):
        return a.get()
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    if hasattr(a, "cpu"):
        return a.cpu().numpy()
    return np.asarray(a)


def _calls(kind):
    """(function, call(fn, x) -> result, reference) for one kind of call."""
    import cupy as cp
    x = cp.asarray(X)
    w = cp.asarray(W)
    if kind == "cupy":
        return softmax.fn, lambda fn: fn(x), ref_softmax(X)
    if kind == "cupy out=":
        out = cp.empty_like(x)
        return softmax.fn, lambda fn: fn(x, out=out), ref_softmax(X)
    if kind == "cupy stream=":
        s = cp.cuda.Stream(non_blocking=True)
        return softmax.fn, lambda fn: _synced(fn(x, stream=s), s), ref_softmax(X)
    if kind == "cupy raw stream":
        s = cp.cuda.Stream(non_blocking=True)
        return softmax.fn, lambda fn: _synced(fn(x, stream=s.ptr), s), ref_softmax(X)
    if kind == "reversed view":
        v = x[:, ::-1]
        return softmax.fn, lambda fn: fn(v), ref_softmax(X[:, ::-1])
    if kind == "keywords":
        return layernorm, lambda fn: fn(x, w=w, eps=1e-3), ref_layernorm(X, W, 1e-3)
    if kind == "several outputs":
        return stats, lambda fn: fn(x), (X.astype(np.float64).max(-1), X.astype(np.float64).sum(-1))
    if kind == "dict, out=":
        outs = {"max": cp.empty(300, cp.float32), "sum": cp.empty(300, cp.float32)}
        return named_stats, lambda fn: fn(x, out=outs), \
            {"max": X.astype(np.float64).max(-1), "sum": X.astype(np.float64).sum(-1)}
    if kind == "CAI object":
        return softmax.fn, lambda fn: fn(CAI(x)), ref_softmax(X)
    if kind == "numba device array":
        from numba import cuda
        d = cuda.to_device(X)
        return softmax.fn, lambda fn: fn(d), ref_softmax(X)
    if kind == "temporaries, stream=":
        s = cp.cuda.Stream(non_blocking=True)
        big = cp.asarray(np.random.default_rng(3).standard_normal(1 << 20).astype(np.float32))
        ref = big.get().astype(np.float64)
        return centered, lambda fn: _synced(fn(big, stream=s), s), ref - ref.mean()
    torch = pytest.importorskip("torch")
    xt = torch.as_tensor(X, device="cuda")
    if kind == "torch":
        return softmax.fn, lambda fn: fn(xt), ref_softmax(X)
    if kind == "torch out=":
        out = torch.empty_like(xt)
        return softmax.fn, lambda fn: fn(xt, out=out), ref_softmax(X)
    if kind == "torch keywords":
        wt = torch.as_tensor(W, device="cuda")
        return layernorm, lambda fn: fn(xt, wt, eps=1e-3), ref_layernorm(X, W, 1e-3)
    raise AssertionError(kind)


def _synced(result, stream):
    stream.synchronize()
    return result


def _check(result, ref):
    if isinstance(ref, dict):
        assert list(result) == list(ref)
        result, ref = tuple(result.values()), tuple(ref.values())
    if isinstance(ref, tuple):
        assert isinstance(result, tuple) and len(result) == len(ref)
        for r, e in zip(result, ref):
            _check(r, e)
        return
    # float32 work against float64: errors relative to the values' scale (sums of 1000)
    np.testing.assert_allclose(_host(result), ref, rtol=2e-5, atol=1e-5 * np.abs(ref).max())


KINDS = ["cupy", "cupy out=", "cupy stream=", "cupy raw stream", "reversed view", "keywords",
         "several outputs", "dict, out=", "CAI object", "numba device array",
         "temporaries, stream=", "torch", "torch out=", "torch keywords"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_call_takes_its_generated_path(kind):
    """The first call registers a path; the calls after it are served by that path alone
    (the full path is not reached) and give float64 NumPy's results."""
    f, call, ref = _calls(kind)
    fn = nm.jit(f)
    _check(call(fn), ref)
    assert len(fn._fast) == 1

    def full_path(*a):
        raise AssertionError("the full path was taken")
    fn._call = full_path
    for _ in range(3):
        _check(call(fn), ref)


@pytest.mark.gpu
def test_temporaries_are_what_the_temporaries_case_runs_through():
    import cupy as cp
    big = cp.zeros(1 << 20, cp.float32)
    low = nm.jit(centered).lower(big)
    assert len(low.kernels) > 1 and low.temps


@pytest.mark.gpu
def test_the_path_with_out_refuses_an_overlapping_out():
    import cupy as cp
    x, y = cp.asarray(X), cp.asarray(X)
    fn = nm.jit(plain_softmax)
    fn(x, out=cp.empty_like(x))
    assert len(fn._fast) == 1
    with pytest.raises(nm.ArgumentError, match="overlaps the memory of input 'x'"):
        fn(x, out=x)
    fn(y, out=x)                        # same key, no overlap: written
    _check(x, ref_softmax(X))


@pytest.mark.gpu
def test_a_tensor_that_requires_grad_never_takes_a_path():
    torch = pytest.importorskip("torch")
    fn = nm.jit(plain_softmax)
    xt = torch.as_tensor(X, device="cuda").requires_grad_()
    with torch.no_grad():
        _check(fn(xt), ref_softmax(X))
    assert not fn._fast
    with pytest.raises(nm.ArgumentError, match="requires grad"):
        fn(xt)


# ---- two GPUs ----------------------------------------------------------------------------------

def _two_gpus():
    cp = pytest.importorskip("cupy")
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return cp


@pytest.mark.gpu
def test_arrays_on_a_second_gpu_run_there():
    """Kernels are compiled and loaded per device and launched in the arrays' device's
    context, whichever device is current; the current device stays as it was."""
    cp = _two_gpus()
    fn = nm.jit(plain_softmax)
    with cp.cuda.Device(1):
        x1 = cp.asarray(X)
    x0 = cp.asarray(X[::-1].copy())
    for _ in range(3):                  # the full path, then the generated ones
        y1 = fn(x1)
        assert y1.device.id == 1 and cp.cuda.Device().id == 0
        _check(y1, ref_softmax(X))
        y0 = fn(x0)
        assert y0.device.id == 0
        _check(y0, ref_softmax(X[::-1]))
        with cp.cuda.Device(1):
            z0 = fn(x0)
            assert z0.device.id == 0 and cp.cuda.Device().id == 1
        _check(z0, ref_softmax(X[::-1]))
    assert len(fn._cache) == 2 and {k[-1][1] for k in fn._cache} == {0, 1}
    with cp.cuda.Device(1):
        out = cp.empty_like(x1)
    fn(x1, out=out)
    _check(out, ref_softmax(X))
    with pytest.raises(nm.ArgumentError, match="on device 1"):
        fn(x0, out=out)


@pytest.mark.gpu
def test_torch_tensors_on_a_second_gpu_run_there():
    _two_gpus()
    torch = pytest.importorskip("torch")
    fn = nm.jit(plain_softmax)
    x1 = torch.as_tensor(X, device="cuda:1")
    for _ in range(3):
        y = fn(x1)
        assert y.device == x1.device and torch.cuda.current_device() == 0
        torch.cuda.synchronize(1)
        _check(y, ref_softmax(X))
