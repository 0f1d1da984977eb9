"""Attention-style scores: a masked softmax of each row (NumPy's where= and initial=), then
the rows weighted by a vector (a product with a vector). Each is one kernel. The causal
mask is passed as an argument, or built inside the function from np.arange: then the
kernel computes it from each element's position and reads no mask at all.

    python examples/masked_attention.py            # GPU at 4096 x 4096, or the simulator
    python examples/masked_attention.py --source   # also print the generated kernels
"""
import sys

from _common import SIMULATOR, np, report, to_device

import numbamr as nm


def softmax_where(scores, mask):
    top = scores.max(axis=-1, keepdims=True, where=mask, initial=-np.inf)
    e = np.exp(scores - top) * mask
    return e / e.sum(axis=-1, keepdims=True)


masked_softmax = nm.jit(softmax_where)


@nm.jit
def causal_softmax(scores):
    rows, cols = scores.shape
    return softmax_where(scores, np.arange(cols) <= np.arange(rows)[:, None] * (cols // rows))


@nm.jit
def weighted(p, v):
    return p @ v


def reference(scores, mask, v):
    s = np.where(mask, scores.astype(np.float64), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return p, p @ v.astype(np.float64)


def main():
    rows, cols = (8, 100) if SIMULATOR else (4096, 4096)
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((rows, cols)).astype(np.float32)
    causal = np.arange(cols)[None, :] <= np.arange(rows)[:, None] * (cols // rows)
    v = rng.standard_normal(cols).astype(np.float32)
    sd, md, vd = to_device(scores, causal, v)
    p = masked_softmax(sd, md)
    out = weighted(p, vd)
    p_ref, out_ref = reference(scores, causal, v)
    if "--source" in sys.argv:
        print(masked_softmax.lower(sd, md).as_text())
        print(weighted.lower(p, vd).as_text())
    ok = report(f"masked softmax {rows}x{cols}", p, p_ref,
                len(masked_softmax.lower(sd, md).kernels))
    ok = report(f"causal softmax, mask from np.arange, {rows}x{cols}", causal_softmax(sd),
                p_ref, len(causal_softmax.lower(sd).kernels)) and ok
    return report(f"scores @ v {rows}x{cols}", out, out_ref,
                  len(weighted.lower(p, vd).kernels)) and ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
