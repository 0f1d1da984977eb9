"""LayerNorm with weight and bias, returning the normalized rows and the per-row mean and
1/std: two dependent reductions and three outputs of two shapes, in ONE kernel.

    python examples/layernorm.py            # GPU at 4096 x 4096, or the simulator at 8 x 100
    python examples/layernorm.py --source   # also print the generated numba.cuda kernel
"""
import sys

from _common import SIMULATOR, np, report, to_device

import numbamr as nm


@nm.jit
def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    return d * rstd * w + b, mu[:, 0], rstd[:, 0]


def main():
    rows, cols = (8, 100) if SIMULATOR else (4096, 4096)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    y, mu, rstd = layernorm(*to_device(x, w, b))
    x64 = x.astype(np.float64)
    mu_ref = x64.mean(-1)
    rstd_ref = 1 / np.sqrt(x64.var(-1) + 1e-5)
    y_ref = (x64 - mu_ref[:, None]) * rstd_ref[:, None] * w + b
    lowered = layernorm.lower(*to_device(x, w, b))
    if "--source" in sys.argv:
        print(lowered.as_text())
    n = len(lowered.kernels)
    return all([report(f"layernorm y {rows}x{cols}", y, y_ref, n),
                report("layernorm mean", mu, mu_ref, n),
                report("layernorm rstd", rstd, rstd_ref, n)])


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
