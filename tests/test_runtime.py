"""Calls: out=, recompilation log, threads, the signature cache."""

import numpy as np
import pytest

import numbamr as nm
from helpers import run_in_threads


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


X = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)


def test_out_writes_into_given_arrays():
    fn = nm.jit(softmax)
    out = np.full((3, 40), np.nan, np.float32)
    got = fn(X, out=out)
    assert got is out
    np.testing.assert_allclose(out, ref_softmax(X), rtol=1e-5)


def test_out_into_a_strided_view_leaves_the_rest_alone():
    fn = nm.jit(lambda x: (x.sum(1), x.max(1)))
    big = np.full((3, 4), -7.0, np.float32)
    s, m = big[:, 0], big[:, 2]               # strided views
    fn(X, out=(s, m))
    np.testing.assert_allclose(big[:, 0], X.astype(np.float64).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(big[:, 2], X.max(1))
    assert (big[:, [1, 3]] == -7.0).all()


@pytest.mark.parametrize("out,match", [
    (np.empty((3, 41), np.float32), "shape"),
    (np.empty((3, 40), np.float64), "dtype"),
    ((np.empty((3, 40), np.float32), np.empty((3, 40), np.float32)), "returns 1"),
    ("not an array", "not an array"),
    (np.broadcast_to(np.empty(40, np.float32), (3, 40)), "overlap"),
])
def test_bad_out_is_a_clear_error(out, match):
    with pytest.raises(nm.ArgumentError, match=match):
        nm.jit(softmax)(X, out=out)


def test_out_overlapping_an_input_is_refused():
    x = X.copy()
    with pytest.raises(nm.ArgumentError, match="overlaps the memory of input 'x'"):
        nm.jit(softmax)(x, out=x)
    with pytest.raises(nm.ArgumentError, match="overlaps"):
        nm.jit(lambda x: x.sum(1))(x, out=x[:, 0])


def test_recompile_log_says_why(monkeypatch, capsys):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    fn = nm.jit(lambda x, k: x.sum(1) * k)
    fn(X, 2)
    fn(X, 2)                                  # cached: no line
    fn(X, 3)                                  # static value changed
    fn(X.astype(np.float64), 3)               # dtype changed
    lines = [leaf for leaf in capsys.readouterr().err.splitlines() if leaf.startswith("numbamr:")]
    assert len(lines) == 3
    assert "first call" in lines[0]
    assert "argument 'k': int 2 -> int 3" in lines[1]
    assert "argument 'x': dtype float32 -> float64" in lines[2]
    assert all("compiling" in line for line in lines)


def test_concurrent_calls_from_threads_compile_once_and_agree():
    fn = nm.jit(softmax)
    results = run_in_threads(lambda _: fn(X), range(4))
    assert len(fn._cache) == 1
    for r in results:
        np.testing.assert_allclose(r, ref_softmax(X), rtol=1e-5)


def test_memory_of_signatures_is_bounded(monkeypatch):
    monkeypatch.setenv("NUMBAMR_MAX_SIGNATURES", "2")
    fn = nm.jit(lambda x: x.sum(0))
    for n in (1, 2, 3, 4):
        fn(np.ones(n, np.float32))
    assert len(fn._cache) == 2


def test_the_least_recently_used_signature_is_dropped(monkeypatch):
    monkeypatch.setenv("NUMBAMR_MAX_SIGNATURES", "2")
    fn = nm.jit(lambda x: x.sum(0))
    for n in (1, 2, 1, 3):
        fn(np.ones(n, np.float32))
    kept = sorted(k[0][1][1] for k in fn._cache)
    assert kept == [(1,), (3,)], kept


def test_a_failing_compile_names_the_saved_source_and_the_function(monkeypatch):
    import importlib
    emit = importlib.import_module("numbamr.lowering.emit")
    monkeypatch.setattr(emit, "alu_text", lambda op, dt, a, native=False: "(((")  # broken
    fn = nm.jit(softmax)
    with pytest.raises(nm.CompileError) as err:
        fn(X)
    msg = str(err.value)
    assert "saved at" in msg and "softmax" in msg
    path = msg.split("saved at ")[1].split()[0].rstrip(";)")
    with open(path) as f:
        assert "(((" in f.read()
    assert err.value.loc.lineno == softmax.__code__.co_firstlineno


def test_a_corrupted_cache_entry_is_rewritten(tmp_path, monkeypatch):
    from numbamr.runtime import compile as rc
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rc, "_modules", {})      # nothing loaded yet in this process
    fn = nm.jit(softmax)
    first = fn(X)
    files = list((tmp_path / "src").glob("gen_*.py"))
    assert files
    for f in files:
        f.write_text(f.read_text()[:50])          # truncated entry
    monkeypatch.setattr(rc, "_modules", {})      # as a new process would see the disk
    again = nm.jit(softmax)(X)
    np.testing.assert_array_equal(first, again)
    assert all(len(f.read_text()) > 50 for f in files)


CONCURRENT_CHILD = """
import os, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
sys.path.insert(0, {tests!r})
import numpy as np, numbamr as nm
from test_runtime import softmax, X, ref_softmax
for _ in range(3):
    np.testing.assert_allclose(nm.jit(softmax)(X), ref_softmax(X), rtol=1e-5)
print("ok")
"""


def test_processes_writing_the_same_cache_entry(tmp_path):
    import os
    import subprocess
    import sys
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, NUMBAMR_CACHE_DIR=str(tmp_path))
    code = CONCURRENT_CHILD.format(tests=tests)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 and o.strip() == "ok" for p, (o, _) in zip(procs, outs)), \
        [e[-2000:] for _, e in outs]
    assert len(list((tmp_path / "src").glob("gen_*.py"))) == 1
    assert not list((tmp_path / "src").glob(".tmp_*"))
