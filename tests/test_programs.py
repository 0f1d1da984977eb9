"""Every catalogue program is ONE kernel and matches float64 NumPy (simulator in CI)."""
import numpy as np
import pytest

import numbamr as nm
from programs import PROGRAMS, BY_NAME
from helpers import run_and_check

SHAPES = [(1, 1), (3, 7), (5, 33), (2, 100)]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_program_matches_numpy(program, rows, cols):
    rng = np.random.default_rng(rows * 1000 + cols)
    inputs = program.make(rng, rows, cols)
    run_and_check(program, inputs, expect_kernels=program.kernels)


# forced layouts: threads per row below/at/above the warp, several rows per block, vector
# width, resident rows vs. loops, column layout; sizes off the block and warp multiples
OPTION_SETS = [
    dict(threads_per_row=1, rows_per_block=1),
    dict(threads_per_row=4, rows_per_block=3, vector=1),
    dict(threads_per_row=8, rows_per_block=2, vector=4, upcast=8),
    dict(threads_per_row=32, rows_per_block=1, upcast=0, unroll=2),
    dict(threads_per_row=64, rows_per_block=1, upcast=0, unroll=1),
    dict(threads_per_row=16, rows_per_block=2, upcast=1, unroll=3, vector=2),
    dict(threads_per_row=4, rows_per_block=8, layout="col"),
    dict(threads_per_row=2, rows_per_block=4, layout="col", upcast=0, unroll=2),
    dict(threads_per_row=8, stage=4096),          # rows in registers + shared memory
    dict(threads_per_row=16, upcast=0, unroll=2, zigzag=1),   # second passes backward
    dict(threads_per_row=8, upcast=0, unroll=1, stagger=1),   # rows start at their own step
    dict(threads_per_row=8, blocks_per_sm=2),     # occupancy capped through shared memory
    dict(threads_per_row=32, upcast=0, unroll=2, online=0, reciprocal=0),  # two passes, divide
]

SWEPT = ["softmax", "layernorm_stats", "chain4", "sum_max_min", "vector_matrix", "two_axes",
         "column_var", "all_axes"]


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: "-".join(
    f"{k[0]}{v}" for k, v in o.items()))
@pytest.mark.parametrize("name", SWEPT)
@pytest.mark.parametrize("rows,cols", [(3, 37), (4, 64)])
def test_program_under_forced_options(name, options, rows, cols):
    program = BY_NAME[name]
    rng = np.random.default_rng(cols)
    inputs = program.make(rng, rows, cols)
    run_and_check(program, inputs, jitted=nm.jit(**options)(program.fn), expect_kernels=1)


def _special_rows(rng, rows, cols):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[0, cols // 2] = np.nan                  # NaN propagates through max and sums
    x[1, :] = -np.inf                         # a row of -inf
    x[2, 1] = np.inf
    x[3, :] = 7.0                             # constant row: variance exactly 0
    return (x,)


@pytest.mark.parametrize("options", [dict(), dict(upcast=0, threads_per_row=8, unroll=2),
                                     dict(layout="col", threads_per_row=4, rows_per_block=4)],
                         ids=["resident", "streamed", "col"])
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "variance", "sum_max_min", "zscore"])
def test_nan_and_inf_as_numpy(name, options):
    program = BY_NAME[name]
    inputs = _special_rows(np.random.default_rng(5), 5, 40)
    run_and_check(program, inputs, jitted=nm.jit(**options)(program.fn))


# rows that end inside an iteration after whole ones: the loop runs the whole iterations
# unmasked (one-pass reduces update once an iteration) and the partial one after it,
# masked, or before it when a pass walks backward (zigzag); columns likewise
PEELED_OPTIONS = [dict(threads_per_row=8, upcast=0, unroll=2),
                  dict(threads_per_row=8, upcast=0, unroll=2, zigzag=1),
                  dict(threads_per_row=4, upcast=0, unroll=2, stagger=1),
                  dict(threads_per_row=4, upcast=0, unroll=3, vector=1),
                  dict(threads_per_row=2, rows_per_block=4, layout="col", upcast=0, unroll=2)]


@pytest.mark.parametrize("options", PEELED_OPTIONS, ids=lambda o: "-".join(
    f"{k[0]}{v}" for k, v in o.items()))
@pytest.mark.parametrize("name", ["variance", "logsumexp", "softmax", "layernorm",
                                  "layernorm_stats", "zscore", "column_var"])
@pytest.mark.parametrize("rows,cols", [(3, 75), (5, 70), (75, 3)])
def test_rows_ending_inside_an_iteration(name, options, rows, cols):
    program = BY_NAME[name]
    inputs = program.make(np.random.default_rng(rows + cols), rows, cols)
    run_and_check(program, inputs, jitted=nm.jit(**options)(program.fn))
