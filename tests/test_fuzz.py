"""Differential fuzzing: random multireduce programs (tests/fuzzgen.py) run by numbamr in the
simulator and compared against the same program run by float64 NumPy.

A failing seed prints the program; ``python3 tests/fuzzgen.py SEED`` prints it again, and
``repro`` in fuzzgen turns it into a regression test (tests/test_regressions.py).
"""
import numpy as np
import pytest

import numbamr as nm
from fuzzgen import make_case, check_result
from test_ptx import lower_for_gpu, compile_report

SEEDS = list(range(60))
PTX_SEEDS = list(range(1000, 1040))


def check_case(source, fn, inputs, options):
    """Run one case with numbamr in the simulator and compare it with NumPy."""
    jitted = nm.jit(**options)(fn)
    try:
        got = jitted(*inputs)
    except nm.CompileError as e:
        raise AssertionError(f"numbamr emitted source numba cannot compile: {e}\n\n{source}")
    except nm.NumbamrError as e:
        pytest.skip(f"unsupported by numbamr: {type(e).__name__}: {e.plain_message}")
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\n\n{source}") from e
    check_result(source, fn, inputs, got)
    return got


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_simulator(seed):
    check_case(*make_case(seed))


@pytest.mark.ptx
def test_fuzz_ptx():
    """Generated programs, lowered with the GPU heuristics at GPU sizes, compile for sm_90."""
    kernels, names = [], []
    for seed in PTX_SEEDS:
        source, fn, inputs, options = make_case(seed, profile="gpu")
        try:
            low = lower_for_gpu(nm.jit(**options)(fn), inputs)
        except nm.CompileError:
            raise
        except nm.NumbamrError:
            continue
        for k in low.kernels:
            kernels.append(k)
            names.append((seed, source))
    report = compile_report(kernels)
    bad = [f"seed {seed}: {k.name}: {r['error']}\n{source}"
           for (seed, source), k, r in zip(names, kernels, report) if not r["ok"]]
    assert not bad, "\n\n".join(bad)
