"""Cross-entropy of logits against integer labels, one loss a row, written as NumPy code:
the logit at each row's label is picked by comparing positions (np.arange) with the label,
so the kernel computes the one-hot mask and reads no mask. Plain and label-smoothed: each
is one kernel that reads the logits once (max, picked logit, sum of exponentials and, for
label smoothing, the row's mean, all from registers).

    python examples/cross_entropy.py            # GPU at 32768 x 1024, or the simulator
    python examples/cross_entropy.py --source   # also print the generated kernels
"""
import sys

from _common import SIMULATOR, np, report, to_device

import numbamr as nm


def _lse_and_picked(logits, labels):
    top = logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(axis=-1)) + top[:, 0]
    one_hot = np.arange(logits.shape[-1]) == labels[:, None]
    return lse, np.where(one_hot, logits, 0).sum(axis=-1)


@nm.jit
def cross_entropy(logits, labels):
    lse, picked = _lse_and_picked(logits, labels)
    return lse - picked


@nm.jit
def smoothed_cross_entropy(logits, labels, smoothing=0.1):
    """(1 - s) * -log p[label] + s * mean over classes of -log p."""
    lse, picked = _lse_and_picked(logits, labels)
    return (1 - smoothing) * (lse - picked) + smoothing * (lse - logits.mean(axis=-1))


def reference(logits, labels, smoothing):
    x = logits.astype(np.float64)
    logp = x - x.max(axis=-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=-1, keepdims=True))
    nll = -logp[np.arange(len(labels)), labels]
    return nll, (1 - smoothing) * nll - smoothing * logp.mean(axis=-1)


def main():
    rows, cols = (16, 300) if SIMULATOR else (32768, 1024)
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    labels = rng.integers(0, cols, rows)
    ld, yd = to_device(logits, labels)
    plain_ref, smooth_ref = reference(logits, labels, 0.1)
    plain_low = cross_entropy.lower(ld, yd)
    smooth_low = smoothed_cross_entropy.lower(ld, yd, 0.1)
    if "--source" in sys.argv:
        print(plain_low.as_text())
        print(smooth_low.as_text())
    ok = report(f"cross-entropy {rows}x{cols}", cross_entropy(ld, yd), plain_ref,
                len(plain_low.kernels))
    return report(f"label-smoothed cross-entropy {rows}x{cols}",
                  smoothed_cross_entropy(ld, yd, 0.1), smooth_ref,
                  len(smooth_low.kernels)) and ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
