"""Where the host time of one numbamr call goes (cProfile over many back-to-back calls).

    python bench/profile_call.py    # on a GPU machine, with CuPy
"""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import numbamr as nm  # noqa: E402


@nm.jit
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    x = cupy.random.standard_normal((4, 1024), dtype=cupy.float32)
    for _ in range(1000):
        softmax(x)
    cupy.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(20000):
        softmax(x)
    t = (time.perf_counter() - t0) / 20000
    cupy.cuda.runtime.deviceSynchronize()
    print(f"host time per call: {t * 1e6:.2f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        softmax(x)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
