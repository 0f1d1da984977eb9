"""Shared test helpers: run a program with numbamr and check it against float64 NumPy."""
import re
import warnings

import numpy as np

import numbamr as nm
from conftest import SIMULATOR  # noqa: F401  (re-exported for the tests)


def to_float64(a):
    return a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a


def flatten(out):
    if isinstance(out, dict):
        return [out[k] for k in sorted(out)]
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def to_host(a):
    if hasattr(a, "get"):
        return a.get()
    return np.asarray(a)


def check_outputs(got, expected_dtype_run, ref, rtol, scale=0.0):
    """Every output: same shape and dtype as NumPy, values within rtol of the float64 run."""
    got, typed, ref = flatten(got), flatten(expected_dtype_run), flatten(ref)
    assert len(got) == len(ref)
    for i, (g, t, r) in enumerate(zip(got, typed, ref)):
        g, t, r = to_host(g), np.asarray(t), np.asarray(r)
        assert g.shape == t.shape, f"output {i}: shape {g.shape} != numpy's {t.shape}"
        assert g.dtype == t.dtype, f"output {i}: dtype {g.dtype} != numpy's {t.dtype}"
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r, err_msg=f"output {i}")
            continue
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        assert np.array_equal(np.isnan(g64), np.isnan(r64)), f"output {i}: NaN mismatch"
        inf = np.isinf(r64)
        assert np.array_equal(g64[inf], r64[inf]), f"output {i}: infinities differ"
        ok = np.isfinite(r64)
        denom = max(float(np.abs(r64[ok]).max()) if ok.any() else 0.0, scale, 1e-30)
        err = float(np.abs(g64[ok] - r64[ok]).max()) / denom if ok.any() else 0.0
        assert err <= rtol, f"output {i}: relative error {err:.3g} > {rtol:g}"


def check(fn, *inputs, ref=None, rtol=1e-5, jitted=None, **static):
    """``fn`` jitted vs ``ref`` (default: ``fn``) run by NumPy: dtype/shape from a run on the
    same inputs, values from a run on float64 copies of the float inputs (NumPy's warnings
    there, such as a mean of nothing, silenced)."""
    ref = ref or fn
    got = (jitted or nm.jit(fn))(*inputs, **static)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        typed = ref(*inputs, **static)
        exact = ref(*[to_float64(a) for a in inputs], **static)
    check_outputs(got, typed, exact, rtol)
    return got


def run_and_check(program, inputs, rtol=1e-5, jitted=None, expect_kernels=None):
    fn = jitted or nm.jit(program.fn)
    got = fn(*inputs)
    with np.errstate(all="ignore"):
        typed = program.fn(*inputs)
        ref = program.fn(*[to_float64(a) for a in inputs])
    scale = program.scale(inputs) if program.scale else 0.0
    check_outputs(got, typed, ref, rtol, scale)
    if expect_kernels is not None:
        assert len(fn.lower(*inputs).kernels) == expect_kernels
    return got


def run_in_threads(work, args):
    """``work(a)`` for each of ``args``, each in its own thread, all at once; the results in
    order. An exception in any thread fails the caller with the first one."""
    import threading
    results, errors = [None] * len(args), []

    def target(i):
        try:
            results[i] = work(args[i])
        except Exception as e:      # re-raised in the caller below
            errors.append(e)
    threads = [threading.Thread(target=target, args=(i,)) for i in range(len(args))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def has_vector_load(source, array=None):
    """Whether generated kernel ``source`` has a vector load (plain ``vload`` or ``vload_keep``
    under an L2 policy), of ``array`` when one is named."""
    of = re.escape(array) + "," if array else ""
    return re.search(rf"\bvload(?:_keep)?\({of}", source) is not None


def ref_softmax(x):
    """Softmax over the last axis in float64."""
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_layernorm(x, w, eps=1e-5):
    """Layernorm over the last axis (no bias) in float64."""
    x = np.asarray(x, np.float64)
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + eps) * np.asarray(w, np.float64)
