"""Programs the fuzzer (tests/fuzzgen.py, tests/test_fuzz.py, tests/fuzz_gpu.py) found numbamr
getting wrong, each minimized, run in the simulator and compared with float64 NumPy.

Each test names the commit the failure was seen at and what it was. Inputs are standard
normal (seeded), as in the fuzzer.
"""
import inspect

import numpy as np
import pytest

import numbamr as nm
from fuzzgen import GPU, SIM, check_result, make_case, standard_inputs
from helpers import run_and_check
from programs import BY_NAME


def check(fn, shapes, options=None, dtypes=None, seed=0):
    """Run ``fn`` with numbamr on standard-normal inputs of ``shapes`` and compare every
    output with NumPy: shape and dtype as NumPy on the original dtypes, values as float64
    NumPy (relative 1e-4, widened only where float32 rounding is seen to move an output)."""
    inputs = standard_inputs(shapes, dtypes, seed)
    source = inspect.getsource(fn)
    got = nm.jit(**(options or {}))(fn)(*inputs)
    check_result(source, fn, inputs, got, rtol=1e-4)


def check_fuzz_case(seed, profile):
    """Fuzz case ``seed`` of ``profile`` (tests/fuzzgen.py) run with the options drawn for it
    and compared with NumPy as the fuzzer compares; returns those options."""
    source, fn, inputs, options = make_case(seed, profile)
    got = nm.jit(**options)(fn)(*inputs)
    check_result(source, fn, inputs, got)
    return options


# ---- VerifyError "reads 'base_1' outside the scope that defines it" (seen at b1656cf) --------
# Row-level address work was hoisted before the open loop but into an open `if` (or the
# other way round), so a STORE/LOAD used a base address defined in a scope it was not in.
# numbamr raised VerifyError (a NumbamrError) on programs it documents as supported.

def transpose_square(x):
    return x.T


def test_transpose_of_a_square_input():
    """VerifyError: STORE 'base_1 + 3 * q0_1' <- out0 ... reads 'base_1' outside its scope."""
    check(transpose_square, [(3, 3)])


def transpose_wide(x):
    return x.T


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (2, 2), (1, 7)])
def test_transpose_of_an_input(shape):
    """(3, 5) and (5, 3) raised the same VerifyError; (2, 2) did not."""
    check(transpose_wide, [shape])


def transpose_and_row_sum(x):
    return x.T, x.sum(1)


def test_transpose_with_a_row_sum():
    """VerifyError: STORE 'base_1 + 2 * q0_0' <- out0 (the transposed output)."""
    check(transpose_and_row_sum, [(2, 3)])


def outer_minus_min(y, z):
    t1 = y + z
    return t1 - t1.min((0, 1, 3), keepdims=True)


def test_outer_broadcast_minus_its_min_over_three_axes():
    """VerifyError: STORE 'base_1 + 6 * ((q0_1) // 2) + (q0_1) % 2' <- out0."""
    check(outer_minus_min, [(1, 1, 1, 2), (2, 1, 3, 1)])


def scaled_by_row_min(x):
    t13 = x * x.min(-1, keepdims=True)
    return t13, t13.min(0), x.mean(-1)


def test_materialized_row_min_then_column_min():
    """VerifyError in the second kernel: t0_row = LOAD ('base_1', 'row_ok') reads 'base_1'
    outside its scope (the row minimum materialized by the first kernel)."""
    check(scaled_by_row_min, [(3, 2)])


# ---- tolerance: "relative error 0.000794 > 0.000200024" on a variance numpy gives as 0 ------
# (GPU fuzz seed 973, at 8a46805.) max(x + sum(x), std) is the same value c everywhere, so the
# variance is 0 in float64 and in NumPy's pairwise float32; a float32 sequential mean of 4096
# copies of c is off by a few ulps and the two-pass variance is that error squared (~1e-11).
# numbamr was right; the fuzzer's tolerance now also perturbs values by 64 ulps to see such
# squared rounding errors.

def variance_of_a_clamped_constant(x):
    t2 = x[1:]
    t4 = t2 + t2.sum(axis=0, keepdims=True) - 100.0
    t6 = np.maximum(t4, t4.std(0))
    return t6.var(keepdims=True), t6.mean()


def test_variance_of_a_value_constant_after_clamping():
    check(variance_of_a_clamped_constant, [(4097,)],
          options={"threads_per_row": 8, "rows_per_block": 3, "upcast": 0, "layout": "row"})


# ---- GPU fuzz seed 664 (seen at 9816926): the variance of nearly constant values ----------
# t8 = (t5 - t6) / t6 is about -1 everywhere (spread 2e-4); t8.var() with threads_per_row=1
# sums 5120 values in one thread, and that float32 mean drifts by ~85 ulps, which the variance
# sees squared (0.4% of a 1.7e-8 variance). numbamr was computing what float32 gives; the
# fuzzer's tolerance model missed drift of a mean inside var and now models it
# (fuzzgen._PerturbedNumpy). Checked here with the fuzzer's own inputs and options.

def test_variance_of_nearly_constant_values_summed_by_one_thread():
    source, fn, inputs, _ = make_case(664, GPU)
    options = {"threads_per_row": 1, "rows_per_block": 2}     # as drawn when it was seen
    got = nm.jit(**options)(fn)(*inputs)
    check_result(source, fn, inputs, got)


# ---- mismatch, GPU fuzz seed 141591 on the H200 (seen at 561b1c3) ---------------------------
# A split row partly staged in shared memory and exchanged through a cluster: each thread's
# last chunk held in registers came out wrong (z-score, 32 threads, split 2: every element of
# columns 1920..2047 of each segment). In the PTX, that chunk's output took the deviations of
# the staged loop's last iteration; it did so only with the mbarrier wait written as a loop of
# LLVM blocks around a one-shot try_wait. The wait now spins inside its own PTX. The fuzz
# program (threads_per_row=1, split=16) and the same programs staged and exchanged through a
# cluster, as the GPU heuristics choose them:

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["zscore", "softmax", "chain4"])
def test_split_rows_staged_in_shared_memory(name):
    rng = np.random.default_rng(5)
    p = BY_NAME[name]
    inputs = p.make(rng, 64, 8192)
    jitted = nm.jit(threads_per_row=32, split=2)(p.fn)
    (k,) = jitted.lower(*inputs).kernels
    assert k.program.dynamic_shared and k.layout.cluster
    run_and_check(p, inputs, jitted=jitted)


@pytest.mark.gpu
def test_fuzz_seed_141591():
    options = check_fuzz_case(141591, GPU)
    assert options == {"threads_per_row": 1, "vector": 2, "split": 16}


# ---- NaN mismatch, GPU fuzz seed 144479 on the H200 (seen at 5e6f659) ------------------------
# p = y * z was rounded where its row minimum was taken, but in the kernel that computed
# sqrt(p - min) the assembler fused the product with the subtraction into an FMA: at each
# row's minimum the difference was the rounding error of p instead of 0, below 0 about half
# the time, and its square root NaN. A product that is added to is now its own rounded
# multiply (mul.rn; tests/test_ptx.py checks the PTX). The fuzz program and its core:

def root_of_distance_to_row_min(y, z):
    p = y * z
    return np.sqrt(p - p.min(axis=-1, keepdims=True)).max()


@pytest.mark.gpu
def test_a_product_subtracted_from_rounds_as_where_it_is_reduced():
    check(root_of_distance_to_row_min, [(64, 4096), (4096,)])


@pytest.mark.gpu
def test_fuzz_seed_144479():
    check_fuzz_case(144479, GPU)


# ---- NaN mismatch, GPU fuzz seed 149622 on the H200 (seen with the fix above) ----------------
# A product over the whole array was reduced by two kernels, each in the order of its own
# layout (the column-minimum kernel and the one taking the root's maximum): their results
# differed in the last bits, t - t.min() went below 0 and its root was NaN. A reduction two
# kernels need is now computed once, into a temporary both read (tests/test_schedule.py
# checks that no reduction is in two kernels).

@pytest.mark.gpu
def test_fuzz_seed_149622():
    check_fuzz_case(149622, GPU)


# ---- CompileError "internal error (KeyError: 't1')", simulator fuzz seed 912951 (seen at
# 039aee4) -----------------------------------------------------------------------------------------
# A reduction shared by two kernels was recorded as the node it was rebuilt from, which was
# itself rebuilt (with the buffers of that scheduling round) when a FusionError had
# materialized it; scheduled again, its buffer named a temporary the new round did not have.
# The scheduler now records the node first built from.

@pytest.mark.slow
def test_fuzz_seed_912951():
    check_fuzz_case(912951, "sim")


# ---- mismatch 1.04e-4, simulator fuzz seed 950393 with every stream (seen at d6f2dc1) ------
# The reference's: the std of five float16 products of float16 factors. NumPy rounds each
# operation of a statement and each step of a float16 product; numbamr computes the factors
# so and the product in float32, and its std (0.06830) was 2 float16 ulps from float64's
# (NumPy's own, 0.06818, one the other way). The reference perturbed each float16 statement
# by one epsilon; it now allows one rounding per operation and sqrt(n) per n-step product.

def test_fuzz_seed_950393():
    check_fuzz_case(950393, dict(SIM, ints=0.3, arg_reductions=0.15, extras=0.25))


# ---- mismatch 1.0e-4, GPU fuzz seed 171229 with extra steps (seen at b5da12f) ----------------
# np.expm1 was traced as exp(x) - 1 and np.log1p as log(1 + x): a small x loses the digits
# that 1 + x rounds away (relative eps / x), and the square of expm1(tanh(z)) near 2e-6 was
# off by 1e-4 on the GPU (the simulator's exp is closer: 8.5e-5 there, under the bar). Both
# are ops of their own now (tests/test_trace.py checks them per element, in the simulator too).

@pytest.mark.gpu
def test_fuzz_seed_171229():
    check_fuzz_case(171229, dict(GPU, arg_reductions=0.15, extras=0.2))


# ---- ArgumentError "threads_per_row * rows_per_block = 8192 exceeds 1024" (GPU fuzz seed
# 3133, seen at 0e9e8cc) ------------------------------------------------------------------------
# With rows_per_block=32 forced, the GPU heuristic that gives rows streamed in one pass 256
# threads a row forced threads_per_row=256 beside it: an invalid pair of options, raised on
# a valid call. A forced rows_per_block now keeps the heuristic out. Lowered with the GPU
# heuristics (where the failure was) and run here.

def test_forced_rows_per_block_with_a_long_streamed_row():
    from test_ptx import lower_for_gpu

    def f(x):
        return x.sum(axis=-1), x.max(axis=-1)

    x = np.random.default_rng(0).standard_normal((300, 40000)).astype(np.float32)
    lowered = lower_for_gpu(nm.jit(rows_per_block=32)(f), (x,))
    assert lowered.kernels[0].layout.rows_per_block <= 32
    check(f, [(40, 300)], options={"rows_per_block": 32})


@pytest.mark.parametrize("options", [dict(), dict(layout="col", threads_per_row=4, unroll=3)])
def test_float32_products_of_values_near_one_do_not_drift(options):
    """Products of many float32 factors near 1 (1 +- 6e-6), whole-array and per row: the
    partials are multiplied out in float64, so the result is the float32 rounding of the
    exact product of the factors. In float32, strided partials that stay near 1 drift one
    way (their roundings lean down: float spacing halves below 1)."""
    rng = np.random.default_rng(8888)
    x = (np.float32(1) + np.float32(5.871e-6) * np.tanh(rng.standard_normal((16, 4096)))
         ).astype(np.float32)
    exact = x.astype(np.float64)
    got_all, got_rows = nm.jit(lambda x: (np.prod(x), x.prod(axis=1)), **options)(x)
    assert abs(float(np.asarray(got_all)) / np.prod(exact) - 1) < 2e-7
    rows = np.asarray(got_rows, np.float64) / np.prod(exact, axis=1) - 1
    assert np.abs(rows).max() < 2e-7


# ---- NaN mismatch, fuzz seed 16718 on the H200 (seen at 5ee3f20, found again at 4363d8c) --
# The variance m2 / 127 was divided per row in the kernel that took min(|x - var|) and
# multiplied by 1/127 per element in the column kernel that took the mean over rows of
# sqrt(|x - var| - min): rounded two ways, the difference went below 0 and the square root
# was NaN. Divisions now lower the same in every kernel (constants are divided).

def sqrt_of_distance_to_row_min_mean_over_rows(x):
    t1 = np.var(x, axis=2, keepdims=True)
    t2 = np.abs(x - t1)
    t4 = np.sqrt(t2 - np.min(t2, -1, keepdims=True))
    return t4, t4.mean((-3, 1), keepdims=True)


@pytest.mark.slow
def test_a_variance_recomputed_in_a_column_kernel_rounds_as_in_the_row_kernel():
    check(sqrt_of_distance_to_row_min_mean_over_rows, [(64, 1, 127)], options={"vector": 1},
          dtypes=[np.float64])


# ---- NaN from sqrt(t - t.min()) with t float16 (simulator fuzz seed 100923, at 1f93c13) -----
# float16 operations were computed in float32 and not rounded, but a float16 reduction's
# result was: t.min() rounded to float16 could exceed the unrounded t it came from, so
# t - t.min() went below 0 and its square root was NaN. Seeds 50516, 50692, 51650 and 51924
# (a float16 output NumPy computes as exactly 0 came out at 3e-5..4e-4) were the same
# thing. Every float16 (bfloat16) result is now rounded to its dtype, as NumPy does.

def sqrt_of_tanh_above_its_row_min(x, y):
    t1 = y.mean(axis=-1, keepdims=True)
    t2 = (y - t1) / (1.0 + t1 * t1)
    t4 = np.tanh(t2 * np.sum(t2))
    t6 = np.sqrt(t4 - np.min(t4, 1, keepdims=True))
    return np.tanh(t6) * x, np.max(t6, axis=1)


@pytest.mark.parametrize("options", [{}, {"layout": "col", "rows_per_block": 3, "vector": 4}])
def test_a_float16_value_is_not_below_its_own_minimum(options):
    check(sqrt_of_tanh_above_its_row_min, [(5, 2), (5, 2)], options=options,
          dtypes=[np.float32, np.float16], seed=3)


def float16_arithmetic(x, y):
    return (x + y) * x - y / (x * x + 0.1), np.sqrt(np.abs(x * y)) + 0.1


def test_float16_arithmetic_rounds_each_operation_as_numpy_does():
    """Each float16 result is NumPy's to the bit (+, -, *, /, sqrt and a weak 0.1 are
    correctly rounded in float32 and again in float16, as NumPy computes them)."""
    x, y = standard_inputs([(64, 33), (64, 33)], [np.float16, np.float16], seed=5)
    got = nm.jit(float16_arithmetic)(x, y)
    for g, want in zip(got, float16_arithmetic(x, y)):
        assert g.dtype == want.dtype == np.float16
        np.testing.assert_array_equal(g, want)
