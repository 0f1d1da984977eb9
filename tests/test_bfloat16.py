"""bfloat16: NumPy's (ml_dtypes) and torch's bfloat16 arrays in and out, computed in float32.

Without a GPU the programs run in numba's simulator and their kernels compile for sm_90 (PTX
tier); the gpu tests run them on torch tensors at real sizes.
"""
import numpy as np
import pytest

import numbamr as nm
from numbamr import dtypes
from helpers import check_outputs, has_vector_load
from programs import layernorm, rmsnorm, softmax

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
# one bfloat16 rounding is 2**-9 relative; a few in a row, and the float64 reference has none
RTOL = 2e-2


def stats(x):
    return x.sum(axis=-1), x.max(axis=0), x.mean(), x.var(axis=-1), x.argmax(axis=-1)


def mixed(x, y32):
    return x * 2.5 + 1, x * y32, (x > 0).sum(), x.astype(np.float32).min(), -x.prod(axis=0)


def _inputs(rng, rows, cols):
    return {
        softmax: (rng.standard_normal((rows, cols)).astype(BF16),),
        layernorm: (rng.standard_normal((rows, cols)).astype(BF16),
                    rng.standard_normal(cols).astype(BF16),
                    rng.standard_normal(cols).astype(BF16)),
        rmsnorm: (rng.standard_normal((rows, cols)).astype(BF16),
                  rng.standard_normal(cols).astype(BF16), rng.standard_normal(cols).astype(BF16)),
        stats: (rng.standard_normal((rows, cols)).astype(BF16),),
        mixed: (rng.standard_normal((rows, cols)).astype(BF16),
                rng.standard_normal(cols).astype(np.float32)),
    }


def _reference(fn, inputs):
    """float64 NumPy on the same (bfloat16-rounded) values."""
    return fn(*[a.astype(np.float64) for a in inputs])


def _expected_dtypes(fn, inputs):
    """numbamr's promotion: bfloat16 where float16 inputs would give float16 (the programs
    here have no float16 inputs; see dtypes.result_type)."""
    as16 = [a.astype(np.float16) if a.dtype == BF16 else a for a in inputs]
    with np.errstate(all="ignore"):
        out = fn(*as16)
    out = out if isinstance(out, tuple) else (out,)
    return tuple(np.asarray(o).astype(BF16) if np.asarray(o).dtype == np.float16
                 else np.asarray(o) for o in out)


@pytest.mark.parametrize("fn", [softmax, layernorm, rmsnorm, stats, mixed],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("rows,cols", [(3, 37), (2, 64)])
def test_bfloat16_programs_match_numpy(fn, rows, cols):
    inputs = _inputs(np.random.default_rng(rows * cols), rows, cols)[fn]
    got = nm.jit(fn)(*inputs)
    check_outputs(got, _expected_dtypes(fn, inputs), _reference(fn, inputs), RTOL)


@pytest.mark.parametrize("other,want", [
    (np.float32, np.float32), (np.float64, np.float64), (np.float16, np.float32),
    (np.int8, BF16), (np.uint8, BF16), (np.bool_, BF16), (np.int16, np.float32),
    (np.int32, np.float64), (BF16, BF16)])
def test_bfloat16_promotes_as_float16_does(other, want):
    assert dtypes.result_type(BF16, np.dtype(other)) == np.dtype(want)
    assert dtypes.result_type(np.dtype(other), BF16) == np.dtype(want)


def test_bfloat16_with_python_scalars_stays_bfloat16():
    assert dtypes.result_type(BF16, 2.5) == BF16
    assert dtypes.result_type(BF16, 3) == BF16


def test_rounding_to_bfloat16_is_ml_dtypes_rounding():
    """astype(bfloat16) in a kernel gives ml_dtypes' bits: ties to even, overflow to inf,
    NaN and inf kept, subnormals kept."""
    tie_even = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x3F80FFFF, 0x7F7FFFFF,
                         0x00010000, 0x80008000], np.uint32).view(np.float32)
    x = np.concatenate([tie_even, np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0,
                                            1e-40, 3.4e38, -3.4e38], np.float32),
                        np.random.default_rng(0).standard_normal(41).astype(np.float32)])
    got = nm.jit(lambda x: x.astype(ml_dtypes.bfloat16))(x)
    want = x.astype(BF16)
    assert got.dtype == BF16
    finite = ~np.isnan(x)
    assert np.array_equal(got.view(np.uint16)[finite], want.view(np.uint16)[finite])
    assert np.isnan(got.astype(np.float32)[~finite]).all()


def test_out_arrays_of_bfloat16():
    """out= takes bfloat16 arrays (written in place: NumPy's in the simulator, torch's on a
    GPU) and names a dtype that does not match."""
    from conftest import SIMULATOR
    fn = nm.jit(lambda x: (x * 2, x.sum(axis=-1)))
    x = np.random.default_rng(2).standard_normal((3, 40)).astype(BF16)
    if SIMULATOR:
        dev, empty, host = x, lambda shape, dt: np.empty(shape, dt), lambda a: a
    else:
        torch = pytest.importorskip("torch")
        dev = torch.from_numpy(x.view(np.int16)).to("cuda").view(torch.bfloat16)
        empty = lambda shape, dt: torch.empty(shape, device="cuda", dtype=(  # noqa: E731
            torch.bfloat16 if dt == BF16 else torch.float32))
        host = _torch_to_numpy
    y, s = empty((3, 40), BF16), empty(3, BF16)
    got = fn(dev, out=(y, s))
    assert got[0] is y and got[1] is s
    check_outputs((host(y), host(s)), (x * 2, x.astype(np.float32).sum(axis=-1).astype(BF16)),
                  (x.astype(np.float64) * 2, x.astype(np.float64).sum(axis=-1)), RTOL)
    with pytest.raises(nm.NumbamrError, match="out\\[0\\] has dtype float32.*bfloat16"):
        fn(dev, out=(empty((3, 40), np.float32), s))


def _nearest_bfloat16_bits(x):
    """The bits of the bfloat16 nearest float64 ``x`` (ties to even), by exact arithmetic:
    the nearest of three neighbouring candidates, measured as fractions."""
    from fractions import Fraction
    sign = 0x8000 if np.signbit(x) else 0
    if x != x:
        return None
    if abs(x) >= 2.0 ** 128 - 2.0 ** 119:       # at or past half an ulp above the largest
        return sign | 0x7F80
    guess = int(np.array(abs(x), np.float32).astype(BF16).view(np.uint16))
    values = {b: Fraction(float(np.array(b, np.uint16).view(BF16).astype(np.float64)))
              for b in range(max(guess - 1, 0), min(guess + 1, 0x7F7F) + 1)}
    best = min(values, key=lambda b: (abs(values[b] - Fraction(abs(x))), b & 1))
    return sign | best


def _as_bfloat16(x):
    return x.astype(ml_dtypes.bfloat16)


def test_float64_to_bfloat16_rounds_once():
    """float64 goes to the nearest bfloat16 in one rounding (through a float32 rounded to
    odd). Rounded to nearest float32 first, values just above a bfloat16 midpoint would land
    on it and then round to even. Checked against exact arithmetic, also at the midpoints,
    past the largest bfloat16, in the subnormals and at NaN; the kernel compiles for sm_90."""
    mid = 1 + 2.0**-8
    rng = np.random.default_rng(1)
    x = np.concatenate([[mid + 2.0**-40, mid - 2.0**-40, mid, -mid - 2.0**-40, 1e300,
                         -1e-300, 0.0, -0.0, 2.0**128 - 2.0**119, 2.0**128 - 2.0**118,
                         9.2e-41 * (1 + 2.0**-30), np.inf, np.nan],
                        rng.standard_normal(300) * 10.0 ** rng.integers(-44, 39, 300)])
    got = nm.jit(_as_bfloat16)(x)
    assert got.dtype == BF16
    for v, b in zip(x, got.view(np.uint16)):
        want = _nearest_bfloat16_bits(v)
        assert (b & 0x7FFF) > 0x7F80 if want is None else b == want, (v, hex(b))  # NaN
    from test_ptx import lower_for_gpu, compile_report
    (r,) = compile_report(lower_for_gpu(_as_bfloat16, (x,)).kernels)
    assert r["ok"], r["error"]


def test_int32_to_bfloat16_rounds_once():
    """Integers go to bfloat16 through float64 (exact for these), as ml_dtypes casts them:
    2**24 + 2**16 + 1 is just above a bfloat16 midpoint, and as float32 it is the midpoint."""
    x = np.concatenate([[2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**24 + 2**16, 2**31 - 1,
                         -2**31, 0, 1, -1],
                        np.random.default_rng(2).integers(-2**31, 2**31, 300)]).astype(np.int32)
    got = nm.jit(_as_bfloat16)(x).view(np.uint16)
    assert [int(b) for b in got] == [_nearest_bfloat16_bits(float(v)) for v in x]


def _through_bfloat16(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float64) * 2


def test_bfloat16_inside_a_kernel_without_bfloat16_arrays():
    """A bfloat16 value that only lives inside the kernel (float64 in and out): its
    conversions are imported and it rounds as ml_dtypes' cast does; the kernel compiles for
    sm_90 too."""
    x = np.random.default_rng(3).standard_normal(300)
    got = nm.jit(_through_bfloat16)(x)
    assert got.dtype == np.float64
    want = [float(np.array(_nearest_bfloat16_bits(v), np.uint16).view(BF16)) * 2 for v in x]
    assert np.array_equal(got, want)
    from test_ptx import lower_for_gpu, compile_report
    (r,) = compile_report(lower_for_gpu(_through_bfloat16, (x,)).kernels)
    assert r["ok"], r["error"]


@pytest.mark.slow
def test_bfloat16_kernels_compile_for_sm90_without_spills():
    from test_ptx import lower_for_gpu, compile_report
    rng = np.random.default_rng(0)
    kernels, rows_of = [], {}
    for fn, inputs in _inputs(rng, 64, 8192).items():
        low = lower_for_gpu(fn, inputs).kernels
        if fn in (softmax, layernorm, rmsnorm):
            rows_of[len(kernels)] = fn.__name__
        kernels += low
    report = compile_report(kernels)
    for k, r in zip(kernels, report):
        assert r["ok"], f"{k.name}: {r.get('error')}"
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)
    for i, name in rows_of.items():      # rows move 8 bfloat16 (16 bytes) at a time
        k, r = kernels[i], report[i]
        assert has_vector_load(k.source) and r["vector_loads"] > 0, name
        assert "vstore(" in k.source and r["vector_stores"] > 0, name


@pytest.mark.gpu
@pytest.mark.parametrize("fn", [softmax, layernorm, rmsnorm, stats],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("rows,cols", [(64, 8192), (1000, 1000), (3, 65536)])
def test_bfloat16_torch_tensors_on_gpu(fn, rows, cols):
    torch = pytest.importorskip("torch")
    inputs = _inputs(np.random.default_rng(rows + cols), rows, cols)[fn]
    tensors = [torch.from_numpy(a.view(np.int16)).to("cuda").view(torch.bfloat16)
               for a in inputs]
    got = nm.jit(fn)(*tensors)
    flat = got if isinstance(got, tuple) else (got,)
    assert all(isinstance(g, torch.Tensor) and g.is_cuda for g in flat), "torch in, torch out"
    host = tuple(_torch_to_numpy(g) for g in flat)
    check_outputs(host if isinstance(got, tuple) else host[0], _expected_dtypes(fn, inputs),
                  _reference(fn, inputs), RTOL)


@pytest.mark.gpu
def test_bfloat16_numpy_arrays_on_gpu_and_cupy_cannot_hold_it():
    inputs = _inputs(np.random.default_rng(5), 256, 1024)[layernorm]
    got = nm.jit(layernorm)(*inputs)
    assert isinstance(got, np.ndarray) and got.dtype == BF16
    check_outputs(got, _expected_dtypes(layernorm, inputs), _reference(layernorm, inputs), RTOL)
    cp = pytest.importorskip("cupy")
    x = cp.asarray(np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32))
    with pytest.raises(nm.NumbamrError, match="bfloat16.*CuPy"):
        nm.jit(lambda x: x.astype(ml_dtypes.bfloat16))(x)


def _torch_to_numpy(t):
    import torch
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(np.uint16).view(BF16)
    return t.cpu().numpy()
