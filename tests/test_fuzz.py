"""Differential fuzzing: random multireduce programs (tests/fuzzgen.py) run by numbamr and
compared with the same program run by NumPy.

- ``test_fuzz_simulator``: a fixed set of seeds, run in numba's simulator; every output must
  have NumPy's shape and dtype and match float64 NumPy within a relative 1e-4. Programs numbamr
  declines (TraceError, ShapeError, DTypeError, ArgumentError, FusionError) are skipped; any
  other exception (VerifyError, CompileError, numba or Python errors) fails the test.
- ``test_fuzz_more_steps``: the same, with argmax / argmin steps (compared exactly), or
  with the ufuncs, casts and axis moves the other steps leave out.
- ``test_fuzz_ptx``: generated programs lowered with the GPU heuristics at GPU sizes compile
  for sm_90 (no GPU needed).

A failure prints the program. ``python3 tests/fuzzgen.py SEED --minimize`` prints it again,
shrinks it and writes it as a regression test for tests/test_regressions.py.
Many more seeds, at GPU sizes on a GPU: tests/fuzz_gpu.py.
"""
import numpy as np
import pytest

import numbamr as nm
from conftest import SIMULATOR
from fuzzgen import SIM, make_case, check_result, unsupported_errors
from test_ptx import lower_for_gpu, compile_report

SEEDS = list(range(60))
PTX_SEEDS = list(range(1000, 1030))


def check_case(source, fn, inputs, options):
    """Run one case with numbamr in the simulator and compare it with NumPy."""
    jitted = nm.jit(**options)(fn)
    try:
        got = jitted(*inputs)
    except unsupported_errors() as e:
        pytest.skip(f"unsupported by numbamr: {type(e).__name__}: {e.plain_message}")
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\n\n{source}") from e
    check_result(source, fn, inputs, got)
    return got


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_simulator(seed):
    check_case(*make_case(seed))


# programs with argmax / argmin steps, with the ufuncs, casts and axis moves the other steps
# leave out, with integer inputs, with the composed NumPy functions (masked reductions,
# norms, products with a vector...) and with bool mask arguments: profiles of their own, so
# SEEDS keep their programs
STEP_SEEDS = [(s, "arg_reductions") for s in range(3000, 3030)] + \
    [(s, "extras") for s in range(4000, 4030)] + [(s, "ints") for s in range(5000, 5030)] + \
    [(s, "composites") for s in range(6000, 6030)] + [(s, "bools") for s in range(8000, 8030)]

# seeds whose programs (with their drawn options) accept split=2 in the simulator
SPLIT_SEEDS = [2024, 2025, 2027, 2038, 2064, 2071, 2073, 2086, 2097, 2102, 2117, 2119, 2141]


@pytest.mark.slow
@pytest.mark.parametrize("seed,steps", STEP_SEEDS)
def test_fuzz_more_steps(seed, steps):
    """Random programs run in the simulator with one step (or input) in three drawn from
    ``steps``: positions of extremes (int64, compared exactly with NumPy's: the first of a
    tie), logs, trigonometry, casts, floor/ceil, axis moves, small-integer inputs, masked
    reductions, norms, products with a vector, averages, nanvar/nanstd and rounding, or bool
    mask arguments."""
    check_case(*make_case(seed, dict(SIM, **{steps: 0.3})))


# seeds of the arg_reductions and ints profiles (one step in two) whose split programs
# exchange integer, bool or (value, index) partials
SPLIT_STEP_SEEDS = [(s, "arg_reductions") for s in (7014, 7031, 7038, 7075, 7088, 7131,
                                                    7137, 7147, 7204, 7260)] + \
    [(s, "ints") for s in (7527, 7559, 7674, 7722, 7748, 7758)]


@pytest.mark.parametrize("seed,steps", [(s, None) for s in SPLIT_SEEDS] + SPLIT_STEP_SEEDS)
def test_fuzz_split_rows(seed, steps):
    """Random programs with their rows split across two blocks, the blocks a cluster or not,
    exchanging once (online forms) or exactly."""
    source, fn, inputs, options = make_case(seed, dict(SIM, **{steps: 0.5}) if steps else SIM)
    options = {**options, "split": 2, "cluster": seed % 2, "online": int(seed % 3 != 0)}
    try:
        got = nm.jit(**options)(fn)(*inputs)
    except unsupported_errors() as e:
        if not SIMULATOR:       # the GPU heuristics choose other steps than the simulator's
            pytest.skip(f"seed {seed} does not split with the GPU's layout: {e.plain_message}")
        raise AssertionError(f"seed {seed} no longer splits ({e.plain_message}): pick "
                             f"SPLIT_SEEDS anew\n\n{source}") from e
    check_result(source, fn, inputs, got)


@pytest.mark.slow
@pytest.mark.ptx
def test_fuzz_ptx():
    """Generated programs, lowered with the GPU heuristics at GPU sizes (forced options
    included), compile for sm_90."""
    kernels, owners, lowering_errors = [], [], []
    for seed in PTX_SEEDS:
        source, fn, inputs, options = make_case(seed, profile="ptx")
        try:
            low = lower_for_gpu(nm.jit(**options)(fn), inputs)
        except unsupported_errors():
            continue
        except Exception as e:
            lowering_errors.append(f"seed {seed}: lowering: {type(e).__name__}: {e}\n{source}")
            continue
        for k in low.kernels:
            kernels.append(k)
            owners.append((seed, source))
    report = compile_report(kernels)
    bad = [f"seed {seed}: {k.name}: {r['error']}\n{source}"
           for (seed, source), k, r in zip(owners, kernels, report) if not r["ok"]]
    assert not lowering_errors + bad, "\n\n".join(lowering_errors + bad)


def test_reference_widens_float16_made_from_bools():
    """NumPy computes ``np.tanh(x > 0)`` in float16; numbamr computes float16 values in
    float32, so the float64 reference must not round that intermediate to float16 (GPU fuzz
    seed 6641 was a false mismatch of 1.6e-4)."""
    from fuzzgen import compile_source, expected
    fn = compile_source("def f(x):\n    t1 = x > 0\n    t2 = np.tanh(t1) * x\n    return t2\n")
    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
    _, ref, _ = expected(fn, [x])
    want = np.tanh((x > 0).astype(np.float64)) * x.astype(np.float64)
    np.testing.assert_allclose(ref, want, rtol=1e-12)
    assert np.abs(fn(x.astype(np.float64)) - want).max() > 1e-5   # what NumPy itself gives


def test_reference_covers_float16_roundings_an_output_amplifies():
    """A float16 intermediate that NumPy and numbamr round differently (one computes it in
    float16, the other in float32) moves every output built from it; the standard deviation
    of two nearby float16 values of about 51 moves by 1/64 when one of them is one float16
    ulp off (simulator fuzz seed 912861: numbamr 0.9355, float64 0.9437). The reference
    allows that much, and such a program is not well conditioned, so the fuzzer draws
    another."""
    from fuzzgen import compile_source, conditioned, expected
    fn = compile_source("def f(y):\n    t1 = y + 50.0\n    t2 = np.std(t1, 1)\n    return t2\n")
    y = (np.arange(16, dtype=np.float16).reshape(8, 2) * np.float16(1.25)) % 4
    t1 = y + np.float16(50.0)
    assert t1.dtype == np.float16 and np.array_equal(t1, y.astype(np.float64) + 50)
    one_ulp_off = t1.astype(np.float64)
    one_ulp_off[0, 0] = np.nextafter(t1[0, 0], np.float16(np.inf))
    moved = float(np.abs(np.std(one_ulp_off, 1) - np.std(t1.astype(np.float64), 1)).max())
    _, ref, scales = expected(fn, [y], rtol=1e-4)
    allowed = 1e-4 * max(float(np.abs(ref).max()), scales[0])
    assert allowed >= moved > 0.01
    assert not conditioned([ref], scales)


def test_products_whose_factors_all_round_one_way_are_not_generated():
    """Factors 1 + c tanh(v) with c ~ 3 / count are within a few float32 ulps of 1: rounded
    to float32 (as NumPy and numbamr round them) each is off by a fixed part of itself, and
    where the tanh is saturated those parts add up with the count (GPU fuzz seed 162920:
    3.8 million factors, a product 12% off the float64 one, a comparison after it flipped).
    The generator measures that drift, and rejects what a float32 sum of random roundings
    could not reach (2 sqrt(count) ulps), which the reference does not model."""
    from fuzzgen import _factor_rounding_drift
    count = 200_000
    c = 3.0 / count
    eps = float(np.finfo(np.float32).eps)
    saturated = np.full((2, count), 20.0)
    factors = 1.0 + c * np.tanh(saturated[0])
    rounded = factors.astype(np.float32).astype(np.float64)
    want = abs(float(np.sum(np.log(rounded)) - np.sum(np.log(factors))))
    drift = _factor_rounding_drift(saturated, c, (1,), np.dtype(np.float32))
    assert drift == pytest.approx(want, rel=1e-6) and drift > 2 * np.sqrt(count) * eps
    spread = np.random.default_rng(0).standard_normal((2, count))
    assert _factor_rounding_drift(spread, c, (1,), np.dtype(np.float32)) < \
        2 * np.sqrt(count) * eps


def test_a_float16_output_is_checked_to_float16_rounding():
    """A float16 output computed in float32 may round to either float16 neighbour of a value
    near a rounding boundary (simulator fuzz seed 100435: 1.0009765625 where NumPy's own
    float16 run gives 1.0), so its allowed error is at least one float16 ulp of its largest
    value."""
    from fuzzgen import make_case
    _, fn, _, _ = make_case(100435, "sim")
    typed, ref, scales = fn.expected
    assert np.asarray(typed[1]).dtype == np.float16
    mag = float(np.abs(ref[1]).max())
    assert fn.rtol * max(mag, scales[1]) >= float(np.finfo(np.float16).eps) * mag


def test_reference_perturbs_function_results_inside_a_statement():
    """``np.dot(y, np.cos(y[0, 0]))`` over int32 y = 0, -3, 3 sums products that cancel:
    the sum of the rounded products is exactly 0 (what numbamr returns), NumPy's BLAS dot
    gave 5.6e-17 on one machine (simulator fuzz seed 1050418) and 0 on another. The
    cosines are values rounded in the kernel even though the statement does not name them,
    so the reference perturbs them too, and the allowed error covers every such sum."""
    from fuzzgen import check_result, compile_source, expected
    source = "def f(y):\n    t1 = np.dot(y, np.cos(y[0, 0]))\n    return t1\n"
    fn = compile_source(source)
    y = np.array([[[0, -3, 3]]], dtype=np.int32)
    _, ref, scales = expected(fn, [y], rtol=1e-4, source=source)
    rounded = y[0, 0].astype(np.float64) * np.cos(y[0, 0].astype(np.float64))
    assert float(np.sum(rounded)) == 0.0
    # a dot that fuses its last multiply into the add, fma(3, cos(3), -3 * cos(3) rounded),
    # is off by the rounding error of 3 * cos(3), exactly; NumPy's own dot may give 0
    from fractions import Fraction
    c3 = float(np.cos(np.float64(3.0)))
    fused = abs(float(Fraction(3) * Fraction(c3) - Fraction(3.0 * c3)))
    assert fused > 0
    assert 1e-4 * scales[0] >= max(fused, abs(float(np.asarray(ref).ravel()[0])))
    check_result(source, fn, [y], np.zeros((1, 1)))
    with pytest.raises(AssertionError):
        check_result(source, fn, [y], np.full((1, 1), 1e-3))
