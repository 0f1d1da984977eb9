"""Softmax over the last axis: a max, a sum that depends on it, and the output, in ONE kernel.

    python examples/softmax.py            # GPU at 4096 x 4096, or the simulator at 8 x 100
    python examples/softmax.py --source   # also print the generated numba.cuda kernel
"""
import sys

from _common import SIMULATOR, np, report, to_device

import numbamr as nm


@nm.jit
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    rows, cols = (8, 100) if SIMULATOR else (4096, 4096)
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    (xd,) = to_device(x)
    y = softmax(xd)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    lowered = softmax.lower(xd)
    if "--source" in sys.argv:
        print(lowered.as_text())
    return report(f"softmax {rows}x{cols}", y, ref, len(lowered.kernels))


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
