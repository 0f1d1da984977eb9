"""GPU time of column layouts with two-byte loads: the default (one column a thread,
docs/heuristics.md#column-pairs) beside ``columns=2`` (4-byte loads) and ``columns=4``
(8-byte), for batch-norm statistics at the model suite's shapes and plain column reductions,
bfloat16 and float16 torch tensors.
GPU time per call is bench/models.py's ``gpu_time`` (CUDA events around a CUDA graph), so
the host's cost per call is not in it; a time marked * could not be captured in a graph
and is of the calls as they come (the host's gaps between launches included).
    python bench/column_pairs.py
"""
import os
import sys

import numpy as np
import torch

import numbamr as nm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import gpu_time, np_ops  # noqa: E402


def colsum(x):
    return x.astype(np.float32).sum(axis=0)


def colvar(x):
    return x.astype(np.float32).var(axis=0)


def colmax(x):
    return x.max(axis=0)


BNSTATS = np_ops()["bnstats"]
CASES = [(BNSTATS, (262144, 128)), (BNSTATS, (32, 2048, 256)), (BNSTATS, (16384, 1024)),
         (BNSTATS, (65536, 64)), (BNSTATS, (1024, 512)), (BNSTATS, (262144, 256)),
         (colsum, (4096, 4096)), (colvar, (100000, 1000)), (colmax, (8192, 1024)),
         (colvar, (1000, 3001))]


def timed(fn, x, options):
    jf = nm.jit(fn, **options)
    try:
        columns = jf.lower(x).kernels[0].kernel.columns
        t, how = gpu_time(lambda: jf(x))
        mark = "" if how == "graph" else "*"      # * CUDA events around the calls themselves
        return f"{t * 1e6:7.1f}{mark} us ({columns} a thread)"
    except Exception as e:          # printed in the table, never hidden
        return f"{type(e).__name__}: {str(e)[:100]}"


def main():
    print(f"{torch.cuda.get_device_name()}; GPU time a call")
    for dt in (torch.bfloat16, torch.float16):
        for fn, shape in CASES:
            x = torch.randn(shape, device="cuda").to(dt)
            mb = x.numel() * x.element_size() / 1e6
            print(f"{str(dt)[6:]:9s} {fn.__name__:8s} {str(shape):18s} {mb:6.1f} MB  "
                  f"default {timed(fn, x, {})}  columns=2 {timed(fn, x, dict(columns=2))}  "
                  f"columns=4 {timed(fn, x, dict(columns=4))}", flush=True)


if __name__ == "__main__":
    main()
