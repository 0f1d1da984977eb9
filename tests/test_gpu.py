"""Real-GPU tier: catalogue programs at realistic sizes with CuPy arrays (marked gpu)."""
import numpy as np
import pytest

import numbamr as nm
from programs import PROGRAMS, BY_NAME, Program, one
from helpers import check_outputs, to_float64

pytestmark = pytest.mark.gpu


def _run(program, inputs, jitted=None):
    import cupy as cp
    fn = jitted or nm.jit(program.fn)
    dev = [cp.asarray(a) for a in inputs]
    got = fn(*dev)
    for g in (got.values() if isinstance(got, dict) else
              (got if isinstance(got, (tuple, list)) else [got])):
        assert isinstance(g, cp.ndarray), "CuPy in must give CuPy out"
    with np.errstate(all="ignore"):
        typed = program.fn(*inputs)
        ref = program.fn(*[to_float64(a) for a in inputs])
    scale = program.scale(inputs) if program.scale else 0.0
    check_outputs(got, typed, ref, 1e-5, scale)
    low = fn.lower(*dev)
    if not low.temps:           # one kernel, unless long reductions over few rows were split
        assert len(low.kernels) == program.kernels
    else:                       # then the kernels before the last write only temporaries
        assert all(t[0] == "tmp" for k in low.kernels[:-1] for t in k.targets)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_at_4096_squared(program):
    rng = np.random.default_rng(7)
    _run(program, program.make(rng, 4096 if program.name != "vector_matrix" else 4094, 4096))


ROW_LENGTHS = [1, 31, 32, 33, 255, 1000, 1024, 4097, 8192, 65536]


@pytest.mark.parametrize("cols", ROW_LENGTHS)
@pytest.mark.parametrize("name", ["softmax", "layernorm_stats", "logsumexp", "sum_max_min",
                                  "variance", "chain4"])
def test_row_lengths(name, cols):
    rng = np.random.default_rng(cols)
    rows = max(1, min(4096, (1 << 22) // cols))
    _run(BY_NAME[name], BY_NAME[name].make(rng, rows + 3, cols))


@pytest.mark.parametrize("options", [
    dict(threads_per_row=1024, rows_per_block=1),
    dict(threads_per_row=128, rows_per_block=4, upcast=0, unroll=4),
    dict(threads_per_row=32, rows_per_block=8, vector=1),
    dict(threads_per_row=8, rows_per_block=32, layout="col"),
])
@pytest.mark.parametrize("name", ["softmax", "layernorm_stats", "chain4", "column_var",
                                  "vector_matrix", "two_axes", "all_axes"])
def test_forced_options_on_gpu(name, options):
    rng = np.random.default_rng(3)
    p = BY_NAME[name]
    _run(p, p.make(rng, 1000, 3000), jitted=nm.jit(**options)(p.fn))


def test_rows_staged_in_48_kb_beside_static_shared_memory():
    # 22 chunks of 2048 floats a row: 16 in registers, 6 (48 KB) staged in dynamic shared
    # memory, on top of the reduces' static arrays: past the 48 KB a kernel gets unasked
    rng = np.random.default_rng(11)
    p = BY_NAME["softmax"]
    inputs = p.make(rng, 64, 45056)
    jitted = nm.jit(split=1)(p.fn)
    program = jitted.lower(*inputs).kernels[0].program
    assert program.dynamic_shared == 48 * 1024
    _run(p, inputs, jitted=jitted)


# rows held in registers (16 chunks of 2048 floats at 512 threads) and shared memory (8 KB
# a further chunk of each staged array): one staged chunk and a partial one; 48 KB of
# staged rows (3 chunks of two arrays, 6 of one) and one float past it; the budget's last
# chunk count for two arrays and for one, each followed by a length streamed instead
STAGED_LENGTHS = [32769, 34816, 38912, 45056, 45057, 53248, 53249, 73728, 73729]


def _softmax_times(x, y):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True) * y


STAGED = {"softmax": BY_NAME["softmax"], "zscore": BY_NAME["zscore"],
          # two staged rows a block: x and y
          "softmax_times": Program("softmax_times", _softmax_times,
                                   lambda rng, r, c: (one(rng, r, c)[0], one(rng, r, c)[0]))}


@pytest.mark.parametrize("cols", STAGED_LENGTHS)
@pytest.mark.parametrize("name", list(STAGED))
def test_staged_row_lengths(name, cols):
    rng = np.random.default_rng(cols)
    p = STAGED[name]
    _run(p, p.make(rng, 37, cols), jitted=nm.jit(split=1)(p.fn))


def test_more_than_2_31_elements():
    """Arrays past 2**31 elements index with 64 bits: a count of bools set only at both ends,
    the first index of the maximum near the end, and a row reduction whose rows end past 2**31
    (float16, 4 GiB each)."""
    import cupy as cp
    n = 2**31 + 2048 + 37
    flags = cp.zeros(n, cp.bool_)
    flags[:3] = True
    flags[-5:] = True
    assert int(nm.jit(lambda a: a.sum())(flags)) == 8
    del flags
    x = cp.zeros(n, cp.float16)
    x[-2] = 1
    x[-1] = 1
    assert int(nm.jit(lambda a: np.argmax(a))(x)) == n - 2
    rows = x[:2**31 + 2048].reshape(-1, 1024)     # the last two rows lie past 2**31
    rows[-1, 7] = 3
    m = nm.jit(lambda a: a.max(axis=1))(rows)
    assert float(m[-1]) == 3 and float(m[0]) == 0 and int((m != 0).sum()) == 1


def _row_max_minus_mean(x):
    return x.max(axis=-1) - x.mean(axis=-1)


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.float64, np.int8, np.uint8,
                                np.int16, np.int32, np.int64])
def test_loads_under_the_l2_policy_read_what_plain_loads_read(dt):
    """Inputs loaded under the L2 evict_last policy (evict_last=1; on sm_80+): every dtype's
    vector (words split back into narrow elements, pairs of words into 8-byte ones) holds
    the input's values, as with evict_last=0, against float64 NumPy."""
    import cupy as cp
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((300, 4096)) * 40).astype(dt)
    want = _row_max_minus_mean(x.astype(np.float64))
    kept, plain = (nm.jit(evict_last=e)(_row_max_minus_mean) for e in (1, 0))
    assert "vload_keep(" in kept.lower(cp.asarray(x)).kernels[0].source
    for fn in (kept, plain):
        got = cp.asnumpy(fn(cp.asarray(x))).astype(np.float64)
        tol = 2e-3 if dt == np.float16 else 1e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
