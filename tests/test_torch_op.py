"""numbamr functions as torch operators (fn.as_torch_op): eager calls and torch.compile on
CPU tensors (kernels in the simulator without a GPU), tensors requiring grad refused, and on a
GPU: CUDA graph capture and replay (torch's and CuPy's stream capture)."""
import shutil

import numpy as np
import pytest

import numbamr as nm
from helpers import ref_layernorm, ref_softmax
from numbamr.torch_op import schema_of

torch = pytest.importorskip("torch")


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * w


def stats(x):
    return {"max": x.max(axis=-1), "sum": x.sum(axis=-1)}


def centered(x):
    return x - x.mean()


def close(got, ref, rtol=2e-5):
    got = got.detach().cpu().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=1e-5 * np.abs(ref).max())


_names = iter(range(10 ** 6))


def op_of(f, **options):
    """A new operator (torch's operator names are global to the process)."""
    return nm.jit(f).as_torch_op(f"numbamr_test::{f.__name__}_{next(_names)}", **options)


rng = np.random.default_rng(0)
X = rng.standard_normal((3, 24)).astype(np.float32)
W = rng.standard_normal(24).astype(np.float32)


# ---- schema and eager calls -------------------------------------------------------------

def test_the_schema_follows_the_parameters():
    assert schema_of(nm.jit(layernorm)) == "(Tensor x, Tensor w, float eps=1e-05) -> Tensor"
    assert schema_of(nm.jit(stats), returns=2) == "(Tensor x) -> (Tensor, Tensor)"

    def f(x, axis=(0, 1), *, keep=True, mode="a", mask=None):
        return x
    assert schema_of(nm.jit(f)) == \
        "(Tensor x, int[] axis=[0, 1], *, bool keep=True, str mode='a', Tensor? mask=None)" \
        " -> Tensor"

    def g(x, *more):
        return x
    with pytest.raises(nm.ArgumentError, match=r"\*more.*schema="):
        schema_of(nm.jit(g))


def test_eager_calls_on_cpu_tensors_match_numpy():
    op = op_of(layernorm)
    x, w = torch.from_numpy(X), torch.from_numpy(W)
    y = op(x, w)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.device.type == "cpu"
    close(y, ref_layernorm(X, W))
    close(op(x, w, 1e-2), ref_layernorm(X, W, 1e-2))
    assert y.data_ptr() not in (x.data_ptr(), w.data_ptr())


def test_several_outputs_come_back_as_a_tuple():
    op = op_of(stats, returns=2)
    mx, sm = op(torch.from_numpy(X))
    close(mx, X.astype(np.float64).max(-1))
    close(sm, X.astype(np.float64).sum(-1))
    wrong = op_of(stats)
    with pytest.raises(nm.ArgumentError, match="returns=2"):
        wrong(torch.from_numpy(X))


def test_tensors_that_require_grad_are_refused():
    op = op_of(softmax)
    x = torch.from_numpy(X).requires_grad_()
    with pytest.raises(nm.ArgumentError, match="'x' requires grad"):
        op(x)
    with torch.no_grad():
        close(op(x), ref_softmax(X))


def test_one_name_is_one_function():
    fn = nm.jit(softmax)
    op = fn.as_torch_op("numbamr_test::softmax_once")
    assert fn.as_torch_op("numbamr_test::softmax_once") is op
    with pytest.raises(nm.ArgumentError, match="already"):
        nm.jit(layernorm).as_torch_op("numbamr_test::softmax_once")
    with pytest.raises(nm.ArgumentError, match="namespace::name"):
        fn.as_torch_op("no_namespace")


# ---- torch.compile ------------------------------------------------------------------------

def model(op_ln, op_sm):
    def run(x, w):
        h = torch.relu(op_ln(x, w, 1e-3)) * 2.0
        return op_sm(h + 1.0)
    return run


def ref_model(x, w):
    h = np.maximum(ref_layernorm(x, w, 1e-3), 0) * 2.0
    return ref_softmax(h + 1.0)


def test_compiled_with_fullgraph_the_operators_are_in_the_graph():
    """fullgraph=True raises at any graph break; the graph torch hands its backend holds
    both operators, and running it gives NumPy's results."""
    op_ln, op_sm = op_of(layernorm), op_of(softmax)
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward
    f = torch.compile(model(op_ln, op_sm), fullgraph=True, backend=backend)
    close(f(torch.from_numpy(X), torch.from_numpy(W)), ref_model(X, W))
    for op in (op_ln, op_sm):
        assert {str(op), str(op.default)} & set(seen)


def test_compiled_with_the_eager_backend_matches_numpy():
    f = torch.compile(model(op_of(layernorm), op_of(softmax)), fullgraph=True,
                      backend="eager")
    close(f(torch.from_numpy(X), torch.from_numpy(W)), ref_model(X, W))
    x2 = rng.standard_normal((5, 24)).astype(np.float32)        # another shape: retraced
    close(f(torch.from_numpy(x2), torch.from_numpy(W)), ref_model(x2, W))


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor's CPU code needs a C++ compiler")
def test_compiled_with_inductor_matches_numpy():
    f = torch.compile(model(op_of(layernorm), op_of(softmax)), fullgraph=True)
    close(f(torch.from_numpy(X), torch.from_numpy(W)), ref_model(X, W))


# ---- on a GPU: CUDA graphs --------------------------------------------------------------------

XG = np.random.default_rng(1).standard_normal((256, 1000)).astype(np.float32)
XG2 = np.random.default_rng(2).standard_normal((256, 1000)).astype(np.float32)
BIG = np.random.default_rng(3).standard_normal(1 << 20).astype(np.float32)


def _captured(fn, *args):
    """fn(*args) warmed up on a side stream, then captured in a torch CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    return graph, out


@pytest.mark.gpu
@pytest.mark.parametrize("through", ["operator", "call"])
def test_torch_cuda_graphs_capture_and_replay(through):
    fn = nm.jit(softmax)
    f = fn.as_torch_op(f"numbamr_test::graph_{through}") if through == "operator" else fn
    x = torch.as_tensor(XG, device="cuda")
    graph, y = _captured(f, x)
    graph.replay()
    torch.cuda.synchronize()
    close(y, ref_softmax(XG))
    x.copy_(torch.as_tensor(XG2, device="cuda"))            # new values, same memory
    graph.replay()
    torch.cuda.synchronize()
    close(y, ref_softmax(XG2))


@pytest.mark.gpu
def test_a_graph_of_several_kernels_with_temporaries_replays():
    fn = nm.jit(centered)
    x = torch.as_tensor(BIG, device="cuda")
    assert len(fn.lower(x).kernels) > 1
    graph, y = _captured(fn.as_torch_op("numbamr_test::centered_graph"), x)
    for values in (BIG, BIG[::-1].copy() * 3):
        x.copy_(torch.as_tensor(values, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        ref = values.astype(np.float64)
        close(y, ref - ref.mean())


@pytest.mark.gpu
def test_cupy_stream_capture_replays():
    cp = pytest.importorskip("cupy")
    fn = nm.jit(softmax)
    x = cp.asarray(XG)
    out = cp.empty_like(x)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(3):              # compiled, and its paths made, before the capture
            fn(x, out=out)
            fn(x)
        s.synchronize()
        s.begin_capture()
        fn(x, out=out)
        y = fn(x)
        graph = s.end_capture()
    for values in (XG, XG2):
        x.set(values, stream=s)
        graph.launch(s)
        s.synchronize()
        close(torch.as_tensor(out.get()), ref_softmax(values))
        close(torch.as_tensor(y.get()), ref_softmax(values))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compiled_with_inductor_on_the_gpu(mode):
    f = torch.compile(model(op_of(layernorm), op_of(softmax)), fullgraph=True, mode=mode)
    x = torch.as_tensor(XG, device="cuda")
    w = torch.as_tensor(np.random.default_rng(4).standard_normal(1000).astype(np.float32),
                        device="cuda")
    for _ in range(3):
        got = f(x, w)
    torch.cuda.synchronize()
    close(got, ref_model(XG, w.cpu().numpy()))
