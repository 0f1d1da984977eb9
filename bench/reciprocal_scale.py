"""Time quotients by an in-range divisor with and without the reciprocal's scale.

    python bench/reciprocal_scale.py

``x / d`` by a row-level ``d`` is ``(x * r) * q``; where ``numbamr/lowering/ranges.py``
proves ``d`` in range it is ``x * r``. This times both forms of layernorm and rmsnorm in
one process, interleaved (the scaled form lowered with the proof switched off), each
checked against float64 NumPy first. Prints GB/s per round.
"""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import suite  # noqa: E402
from run import timeit, copy_ceiling, rel_err, to_host  # noqa: E402

CELLS = [("layernorm", (1024, 65536)), ("rmsnorm", (1024, 65536)), ("layernorm", (8192, 8192))]
ROUNDS = 4


def main():
    import cupy
    import numbamr as nm
    linearize = importlib.import_module("numbamr.lowering.linearize")
    proof = linearize.reciprocal_in_range
    print(f"copy ceiling {copy_ceiling():.0f} GB/s", flush=True)
    rng = np.random.default_rng(0)
    for op, shape in CELLS:
        x = rng.standard_normal(shape).astype(np.float32)
        params = suite.params_of(op, shape[1], rng)
        fn = suite.np_ops(np)[op]
        ref = fn(x.astype(np.float64), *[p.astype(np.float64) for p in params])
        nbytes = x.nbytes + sum(p.nbytes for p in params) + suite.out_bytes(op, shape, 4)
        dev = [cupy.asarray(x)] + [cupy.asarray(p) for p in params]
        forms = {}
        for name, in_range in [("scaled", lambda *a: False), ("unscaled", proof)]:
            linearize.reciprocal_in_range = in_range
            try:
                jf = nm.jit(fn)
                err = rel_err(to_host(jf(*dev)), ref)       # the first call lowers
                scaled = "rc_q" in jf.lower(*dev).as_text()
            finally:
                linearize.reciprocal_in_range = proof
            print(f"{op} {shape} {name}: error {err:.1e}, scale in the kernel: {scaled}")
            forms[name] = jf
        gbs = {k: [] for k in forms}
        for _ in range(ROUNDS):
            for k, jf in forms.items():
                gbs[k].append(nbytes / timeit(lambda: jf(*dev)) / 1e9)
        for k, v in gbs.items():
            print(op, shape, k, " ".join(f"{g:.0f}" for g in v), flush=True)


if __name__ == "__main__":
    main()
