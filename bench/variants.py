"""Time numbamr under several forced layouts per cell, to choose heuristics from data.

    python bench/variants.py                          # the default long-row study
    python bench/variants.py --ops softmax --shapes 1024x65536 \
        --variants "threads_per_row=256,unroll=8;threads_per_row=1024"

A variant may also set the scheduler's thresholds for splitting a long reduction over few
rows into two kernels (``sched_min_extent=8192``, ``sched_min_blocks=...``),
``sched_col_line=1`` for column segments that are runs of rows, never interleaved,
``max_clusters=N`` to cap a persistent kernel's grid at N clusters, ``hold_rows=1`` for a
persistent cluster that keeps its row in registers after the first pass, or ``pdl=N`` for
how a persistent kernel is launched (numbamr.lowering.emit.PERSISTENT_DEPENDENT), and
``bulk_piece=BYTES`` for the size of each bulk copy that brings a persistent row's segment.

Each variant is checked against float64 NumPy before it is timed; the copy ceiling is
measured in the same run. Prints one table: GB/s per (cell, variant).
"""
import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import suite  # noqa: E402
from run import timeit, copy_ceiling, rel_err, to_host, flat_outputs  # noqa: E402

DEFAULT_VARIANTS = [
    "", "threads_per_row=1024,unroll=4", "threads_per_row=512,unroll=4",
    "threads_per_row=256,unroll=8", "threads_per_row=256,unroll=16",
    "threads_per_row=128,unroll=16",
]


# study knobs that are not kernel options, set for one variant only: the scheduler's
# thresholds for splitting a long reduction over few rows into two kernels (numbamr.schedule)
# and, for persistent kernels, the cap on their clusters (numbamr.runtime.launch), rows held
# in registers (numbamr.lowering.linearize), how they are launched and the size of their
# bulk copies (numbamr.lowering.emit)
STUDY_KNOBS = {"sched_min_extent": "schedule.SPLIT_MIN_EXTENT",
               "sched_min_blocks": "lowering.heuristics.SPLIT_MIN_BLOCKS",
               "sched_min_extent_col": "schedule.SPLIT_MIN_EXTENT_COL",
               "sched_target_blocks": "schedule.SPLIT_TARGET_BLOCKS",
               "sched_col_line": "schedule.COL_LINE",
               "max_clusters": "runtime.launch.PERSISTENT_MAX_CLUSTERS",
               "hold_rows": "lowering.linearize.PERSISTENT_HOLD_ROWS",
               "pdl": "lowering.emit.PERSISTENT_DEPENDENT",
               "bulk_piece": "lowering.emit.BULK_PIECE"}


def parse(variant):
    """(kernel options, study knobs) of one variant's text."""
    opts, knobs = {}, {}
    for item in filter(None, variant.split(",")):
        k, v = (t.strip() for t in item.split("="))
        if k in STUDY_KNOBS:
            knobs[STUDY_KNOBS[k]] = int(v)
        else:
            opts[k] = v if k == "layout" else int(v)
    return opts, knobs


@contextlib.contextmanager
def study_knobs_set(values):
    """``values`` (``"module.NAME"`` under numbamr: value) set while the block runs."""
    import importlib

    def place(path):
        module, name = path.rsplit(".", 1)
        return importlib.import_module("numbamr." + module), name
    saved = {path: getattr(*place(path)) for path in values}
    for path, v in values.items():
        setattr(*place(path), v)
    try:
        yield
    finally:
        for path, v in saved.items():
            setattr(*place(path), v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="softmax,layernorm,var,logsumexp,zscore,rmsnorm")
    ap.add_argument("--shapes", default="1024x65536")
    ap.add_argument("--variants", default=";".join(DEFAULT_VARIANTS))
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every variant this many times, interleaved (one cell shows "
                         "each round's GB/s)")
    ap.add_argument("--warm", action="store_true",
                    help="compile and check every variant (filling the disk cache), time none")
    args = ap.parse_args()
    import cupy
    import numbamr as nm
    ceiling = copy_ceiling()
    variants = args.variants.split(";")
    print(f"copy ceiling {ceiling:.0f} GB/s")
    rows = []
    rng = np.random.default_rng(0)
    for op in args.ops.split(","):
        for shape_text in args.shapes.split(","):
            shape = tuple(int(s) for s in shape_text.split("x"))
            x = rng.standard_normal(shape).astype(args.dtype)
            params = suite.params_of(op, shape[1], rng)
            fn = suite.np_ops(np)[op]
            if args.dtype == "float16":
                fn = suite.half_wrap(fn)
            ref = [np.asarray(r) for r in flat_outputs(
                fn(x.astype(np.float64), *[p.astype(np.float64) for p in params]))]
            nbytes = x.nbytes + sum(p.nbytes for p in params) + \
                suite.out_bytes(op, shape, x.dtype.itemsize)
            dev = [cupy.asarray(x)] + [cupy.asarray(p) for p in params]
            cells, timed = [], {}
            for v in variants:
                try:
                    opts, knobs = parse(v)
                    jf = nm.jit(**opts)(fn)
                    with study_knobs_set(knobs):      # the first call lowers
                        got = [to_host(g) for g in flat_outputs(jf(*dev))]
                    err = max(rel_err(g, r) for g, r in zip(got, ref))
                    if err > (2e-3 if args.dtype == "float16" else 1e-4):
                        cells.append(f"wrong {err:.1e}")
                        continue
                    if args.warm:
                        cells.append(f"ok {err:.1e}")
                        continue
                    timed[len(cells)] = jf
                    cells.append("")
                    grids = [ln.grid for c in jf._cache.values() for ln in c.launchers]
                    print(f"  {op} {shape_text} {v or 'heuristic'}: grids {grids}", flush=True)
                except Exception as e:          # shown in the table
                    cells.append(f"error {type(e).__name__}")
            for _ in range(args.rounds):        # interleaved: drift falls on every variant
                for i, jf in timed.items():
                    t = timeit(lambda: jf(*dev))
                    cells[i] = f"{cells[i]} {nbytes / t / 1e9:.0f}".strip()
            rows.append((op, shape_text, cells))
            print(op, shape_text, cells, flush=True)
    print("\n| op | shape | " + " | ".join(v or "heuristic" for v in variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for op, shape, cells in rows:
        print(f"| {op} | {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
