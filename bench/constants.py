"""Kernels with array constants from np.arange, beside torch in one process on the GPU: a
causal softmax whose mask is an argument or is built from np.arange inside the function
(computed by the kernel), and a one-hot cross-entropy.

    python bench/constants.py

Prints GB/s per cell (the scores or logits read, the labels read, the outputs written: a
mask passed as an argument is traffic the cell pays but does not count) and the % of the
copy ceiling measured in the same run. Every result is checked against float64 NumPy first.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from run import timeit, copy_ceiling, rel_err, to_host  # noqa: E402


def softmax_where(scores, mask):
    top = scores.max(axis=-1, keepdims=True, where=mask, initial=-np.inf)
    e = np.exp(scores - top) * mask
    return e / e.sum(axis=-1, keepdims=True)


def causal_softmax(scores):
    rows, cols = scores.shape
    return softmax_where(scores, np.arange(cols) <= np.arange(rows)[:, None])


def cross_entropy(logits, labels):
    top = logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(axis=-1)) + top[:, 0]
    picked = np.where(np.arange(logits.shape[-1]) == labels[:, None], logits, 0).sum(axis=-1)
    return lse - picked


def torch_causal_softmax(scores):
    import torch
    rows, cols = scores.shape
    at = dict(device=scores.device)
    mask = torch.arange(cols, **at) <= torch.arange(rows, **at)[:, None]
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def torch_cross_entropy(logits, labels):
    import torch
    return torch.nn.functional.cross_entropy(logits, labels, reduction="none")


def cells(rng):
    """(name, numbamr callables by label, torch function, host inputs, reference, bytes)."""
    n = 4096
    scores = rng.standard_normal((n, n)).astype(np.float32)
    mask = np.arange(n) <= np.arange(n)[:, None]
    with np.errstate(all="ignore"):
        ref = softmax_where(scores.astype(np.float64), mask)
    yield ("causal softmax 4096 x 4096", {"mask argument": (softmax_where, (scores, mask)),
                                          "mask from np.arange": (causal_softmax, (scores,))},
           torch_causal_softmax, (scores,), ref, 2 * scores.nbytes)
    for rows, cols in ((4096, 32000), (32768, 1024)):
        logits = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
        labels = rng.integers(0, cols, rows)
        ref = cross_entropy(logits.astype(np.float64), labels)
        yield (f"cross-entropy {rows} x {cols}", {"": (cross_entropy, (logits, labels))},
               torch_cross_entropy, (logits, labels), ref,
               logits.nbytes + labels.nbytes + rows * 4)


def main():
    import cupy
    import torch
    import numbamr as nm
    ceiling = copy_ceiling()
    print(f"copy ceiling {ceiling:.0f} GB/s")
    for name, ours, theirs, inputs, ref, nbytes in cells(np.random.default_rng(0)):
        runs = {}
        for label, (fn, args) in ours.items():
            jf, dev = nm.jit(fn), [cupy.asarray(a) for a in args]
            runs[f"numbamr {label}".strip()] = (lambda jf=jf, dev=dev: jf(*dev))
        targs = [torch.as_tensor(a, device="cuda") for a in inputs]
        runs["torch eager"] = lambda: theirs(*targs)
        torch._dynamo.reset()
        compiled = torch.compile(theirs)
        runs["torch.compile"] = lambda: compiled(*targs)
        for label, call in runs.items():
            err = rel_err(to_host(call()), ref)
            gbs = nbytes / timeit(call) / 1e9 if err < 1e-5 else float("nan")
            print(f"{name} | {label} | {gbs:.0f} GB/s | {100 * gbs / ceiling:.0f}% | "
                  f"error {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
