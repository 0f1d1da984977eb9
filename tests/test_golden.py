"""The emitted kernel sources of a few programs, compared byte for byte with stored copies.

A change to the compiler that is meant to leave the kernels as they are (a refactor) must keep
these files identical. A change meant to alter the kernels rewrites them, and the diff under
``tests/golden/`` shows what changed in the generated code:

    python tests/test_golden.py --update

Each case is lowered for an H200 (``target="sm_90"``) and for numba's CPU simulator
(``target="sim"``); lowering runs nothing, so no GPU is needed and the arrays are never filled.
"""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numbamr as nm  # noqa: E402
import programs  # noqa: E402


def zscore(x):
    return (x - x.mean(axis=-1, keepdims=True)) / x.std(axis=-1, keepdims=True)


def _rows(r, c):
    return (np.empty((r, c), np.float32),)


def _affine(r, c):
    return (np.empty((r, c), np.float32), np.empty(c, np.float32), np.empty(c, np.float32))


# name -> (function, inputs); the shapes pick the layouts the heuristics are known for:
# rows in registers, streamed rows, rows split across a cluster (persistent for layernorm at
# 1024 x 65536), a column layout.
CASES = {
    "softmax_4096x1024": (programs.softmax, lambda: _rows(4096, 1024)),
    "softmax_8192x8192": (programs.softmax, lambda: _rows(8192, 8192)),
    "layernorm_8192x8192": (programs.layernorm, lambda: _affine(8192, 8192)),
    "layernorm_1024x65536": (programs.layernorm, lambda: _affine(1024, 65536)),
    "sum_max_4096x4096": (programs.sum_and_max, lambda: _rows(4096, 4096)),
    "variance_65536x1024": (programs.variance, lambda: _rows(65536, 1024)),
    "column_var_8192x8192": (programs.column_var, lambda: _rows(8192, 8192)),
    "zscore_1024x65536": (zscore, lambda: _rows(1024, 65536)),
}
TARGETS = ("sm_90", "sim")


def emitted(name, target):
    """The source of every kernel of case ``name`` lowered for ``target``, in launch order."""
    fn, make = CASES[name]
    low = nm.jit(fn).lower(*make(), target=target)
    header = f"# {name}, target={target}: {len(low.kernels)} kernel(s)\n"
    parts = [k.sim_source if target == "sim" else k.source for k in low.kernels]
    return header + "\n\n# ---- next kernel ----\n\n".join(parts)


def golden_path(name, target):
    return os.path.join(GOLDEN, f"{name}.{target}.py")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_emitted_source_is_unchanged(name, target):
    with open(golden_path(name, target), encoding="utf-8", newline="") as f:
        expected = f.read()
    got = emitted(name, target)
    assert got == expected, (f"the kernels of {name} for {target} changed; if that is meant, "
                             f"run `python tests/test_golden.py --update` and review the diff")


def update():
    os.makedirs(GOLDEN, exist_ok=True)
    for name in sorted(CASES):
        for target in TARGETS:
            with open(golden_path(name, target), "w", encoding="utf-8", newline="") as f:
                f.write(emitted(name, target))
            print("wrote", os.path.relpath(golden_path(name, target)))


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_golden.py --update  (rewrites tests/golden/)")
    update()
