"""numbamr functions on dask arrays: lazy dask arrays out, the values of the function on the
whole array (float64 NumPy as the reference), whether or not the reduced axes are cut into
chunks."""
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import numbamr as nm  # noqa: E402
from helpers import check_outputs, flatten  # noqa: E402

ROWS, COLS = 6, 40
SPLIT = (3, 16)             # the last axis in chunks of 16, 16 and 8
WHOLE_ROWS = (3, COLS)


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="sync"):
        yield


def data(shape=(ROWS, COLS), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def to64(a):
    return a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a


def run(fn, *args, ref=None, rtol=1e-5):
    """``nm.jit(fn)`` on the arguments (dask arrays among them) against ``ref`` (default
    ``fn``) run by NumPy on the whole arrays: dtypes from float32, values from float64."""
    jitted = nm.jit(fn)
    lazy = jitted(*args)
    for a in flatten(lazy):
        assert isinstance(a, da.Array), f"{type(a).__name__} is not a lazy dask array"
    got = dask.compute(lazy)[0]
    whole = [a.compute() if isinstance(a, da.Array) else a for a in args]
    ref = ref or fn
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        typed = ref(*whole)
        exact = ref(*[to64(a) for a in whole])
    check_outputs(got, typed, exact, rtol)
    return jitted, got


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b


def zscore(x):
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def logsumexp_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return (np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)


# ---- whole rows in every chunk: the jitted function itself, block by block ---------------
def test_softmax_with_whole_rows_runs_the_function_on_each_block():
    x = da.from_array(data(), chunks=WHOLE_ROWS)
    jitted, _ = run(softmax, x)
    assert len(jitted._cache) == 1, "the function was not compiled for the blocks' shape"


def test_layernorm_with_whole_rows_and_numpy_weights():
    x = da.from_array(data(), chunks=WHOLE_ROWS)
    w, b = data((COLS,), 1), data((COLS,), 2)
    jitted, _ = run(layernorm, x, w, b)
    assert len(jitted._cache) == 1


def test_a_function_written_for_the_whole_shape_still_runs_block_by_block():
    """Called on a block, this function's own reshape would fail: the blocks run the
    trace's nodes at the blocks' shapes instead."""
    x = da.from_array(data(), chunks=WHOLE_ROWS)
    jitted, _ = run(lambda a: a.reshape(ROWS, 4, 10).sum(axis=2), x)
    assert not jitted._cache


# ---- reductions over axes cut into chunks ------------------------------------------------
REDUCTIONS = {
    "sum": lambda x, axis: x.sum(axis=axis),
    "mean": lambda x, axis: x.mean(axis=axis),
    "var": lambda x, axis: x.var(axis=axis),
    "std": lambda x, axis: np.std(x, axis=axis),
    "max": lambda x, axis: x.max(axis=axis),
    "argmax": lambda x, axis: x.argmax(axis=axis),
}


@pytest.mark.parametrize("axis", [1, None], ids=["split-axis", "all-axes"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_over_chunked_axes(name, axis):
    x = da.from_array(data(), chunks=SPLIT)
    jitted, _ = run(lambda a: REDUCTIONS[name](a, axis), x)
    assert not jitted._cache, "the function itself ran on blocks that cut its reduction"


@pytest.mark.parametrize("axis", [1, (0, 1)])
def test_logsumexp_over_chunked_axes(axis):
    x = da.from_array(data() * 30, chunks=SPLIT)        # exp(x) alone would overflow
    run(lambda a: nm.logsumexp(a, axis=axis), x, ref=lambda a: logsumexp_ref(a, axis))


def test_zscore_and_softmax_along_a_chunked_axis():
    x = da.from_array(data(), chunks=SPLIT)
    run(zscore, x)
    run(softmax, x)


def test_layernorm_along_a_chunked_axis_with_numpy_weights():
    x = da.from_array(data(), chunks=SPLIT)
    run(layernorm, x, data((COLS,), 1), data((COLS,), 2))


def test_chunks_of_one_element_and_ties_across_chunks():
    """41 columns in chunks of 8 (the last holds one); argmax keeps the first of equal maxima
    (NumPy's rule) when they lie in different chunks, and the first NaN."""
    x = data((5, 41))
    x[1] = 0.0
    x[1, [3, 20, 40]] = 7.0
    x[2, [30, 9]] = np.nan
    xd = da.from_array(x, chunks=(2, 8))
    run(lambda a: (a.argmax(axis=1), a.argmin(axis=0), a.var(axis=1), softmax(a)), xd)


def test_flattened_argmax_picks_the_first_maximum_in_row_major_order():
    x = np.zeros((ROWS, COLS), np.float32)
    x[0, 30] = x[1, 2] = 1.0        # chunk (0, 1) holds the first in order, chunk (0, 0) not
    run(lambda a: a.argmax(), da.from_array(x, chunks=SPLIT))


def test_softmax_of_rows_with_chunks_of_minus_infinity():
    x = data()
    x[:, :16] = -np.inf
    x[4] = -np.inf                  # a whole row: NaN, as NumPy's
    run(softmax, da.from_array(x, chunks=SPLIT))


def test_a_mask_from_arange_along_a_chunked_axis():
    x = da.from_array(data(), chunks=SPLIT)
    run(lambda a: np.where(np.arange(COLS) < 30, a, -np.inf).max(axis=1), x)


def test_masked_variance_takes_two_passes_and_is_right():
    x = da.from_array(data(), chunks=SPLIT)
    run(lambda a: a.var(axis=1, where=a > 0), x)


# ---- arguments and outputs ----------------------------------------------------------------
def test_dask_and_numpy_arguments_mixed():
    x = da.from_array(data(), chunks=SPLIT)
    y = data(seed=3)                            # a whole array, cut to each block
    col = data((ROWS, 1), 4)                    # broadcast along the chunked axis
    run(lambda a, b, c: ((a * b).sum(axis=1), np.exp(a - c).mean(axis=1)), x, y, col)


def test_two_dask_arguments_chunked_differently():
    x = da.from_array(data(), chunks=SPLIT)
    y = da.from_array(data(seed=5), chunks=(2, 10))
    run(lambda a, b: (a - b).max(axis=1), x, y)


def test_a_tuple_of_outputs_of_different_shapes():
    x = da.from_array(data(), chunks=SPLIT)
    run(lambda a: (a.mean(axis=1), softmax(a), a.max(), a.T), x)


def test_a_dict_of_outputs():
    x = da.from_array(data(), chunks=SPLIT)
    jitted = nm.jit(lambda a: {"mean": a.mean(axis=1), "top": a.argmax(axis=1)})
    out = jitted(x)
    assert isinstance(out, dict) and sorted(out) == ["mean", "top"]
    got = dask.compute(out)[0]
    x64 = x.compute().astype(np.float64)
    np.testing.assert_allclose(got["mean"], x64.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["top"], x64.argmax(axis=1))


def test_the_same_chunking_gives_the_same_bits():
    x = da.from_array(data(), chunks=SPLIT)
    fn = nm.jit(lambda a: (zscore(a), a.var()))
    first = dask.compute(fn(x))[0]
    again = dask.compute(fn(x), scheduler="threads")[0]
    for a, b in zip(first, again):
        assert a.tobytes() == b.tobytes()


def test_a_slice_across_chunks_under_a_reduction_raises_naming_it():
    x = da.from_array(data(), chunks=SPLIT)
    with pytest.raises(nm.ShapeError, match=r"the sum over axes \[1\].*cannot be split.*slice"):
        nm.jit(lambda a: a[:, 1:].sum(axis=1))(x)


def test_a_reshape_across_chunks_raises_naming_it():
    x = da.from_array(data(), chunks=SPLIT)
    with pytest.raises(nm.ShapeError, match=r"reshape \[6, 40\] -> \[6, 4, 10\]"):
        nm.jit(lambda a: a.reshape(6, 4, 10) * 2)(x)


def test_out_is_refused():
    x = da.from_array(data(), chunks=SPLIT)
    with pytest.raises(nm.ArgumentError, match="out="):
        nm.jit(lambda a: a * 2)(x, out=np.empty((ROWS, COLS), np.float32))


def test_chunks_of_unknown_size_are_refused():
    x = da.from_array(np.arange(10.0), chunks=4)
    with pytest.raises(nm.ArgumentError, match="unknown size"):
        nm.jit(lambda a: a.sum())(x[x > 3])


def test_a_distributed_client_with_threads():
    distributed = pytest.importorskip("distributed")
    x = da.from_array(data(), chunks=SPLIT)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None) as client:
        got = client.compute(nm.jit(zscore)(x)).result()
    x64 = x.compute().astype(np.float64)
    check_outputs(got, zscore(x.compute()), zscore(x64), 1e-5)


# ---- GPUs ----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cupy_chunks_give_cupy_blocks():
    cupy = pytest.importorskip("cupy")
    x = data((4096, 3000))
    xd = da.from_array(cupy.asarray(x), chunks=(1024, 1024), asarray=False)
    y = nm.jit(zscore)(xd)
    assert type(y._meta).__module__.startswith("cupy")
    got = y.compute()
    assert isinstance(got, cupy.ndarray)
    check_outputs(got, zscore(x), zscore(x.astype(np.float64)), 1e-5)


@pytest.mark.gpu
def test_a_local_cuda_cluster():
    cupy = pytest.importorskip("cupy")
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    x = data((4096, 3000))
    with dask_cuda.LocalCUDACluster() as cluster, distributed.Client(cluster) as client:
        xd = da.from_array(x, chunks=(1024, 1024)).map_blocks(cupy.asarray)
        got = client.compute(nm.jit(softmax)(xd)).result()
    check_outputs(got, softmax(x), softmax(x.astype(np.float64)), 1e-5)
