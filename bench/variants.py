"""Time numbamr under several forced layouts per cell, to choose heuristics from data.

    python bench/variants.py                          # the default long-row study
    python bench/variants.py --ops softmax --shapes 1024x65536 \
        --variants "threads_per_row=256,unroll=8;threads_per_row=1024"

A variant may also set study knobs (``numbamr.experimental.Knobs``): the scheduler's
thresholds for splitting a long reduction over few rows into two kernels
(``sched_min_extent=8192``, ``sched_min_blocks=...``), ``sched_col_line=1`` for column
segments that are runs of rows, never interleaved, ``max_clusters=N`` to cap a persistent
kernel's grid at N clusters, ``hold_rows=1`` for a persistent cluster that keeps its row in
registers after the first pass, ``pdl=N`` for how a persistent kernel is launched
(``Knobs.persistent_dependent``), and ``bulk_piece=BYTES`` for the size of each bulk copy
that brings a persistent row's segment; ``proofs=0`` keeps the reciprocal's scale on every
divisor, ``shared_mean=0`` gives the mean beside a split variance its own float32 sum, and
``tail=0`` keeps every thread to the end of a store-only kernel (the forms before these
choices, ``numbamr.experimental.Knobs``). A variant's calls, the timed ones too, run under
its Knobs (they are part of a signature's key).

Each variant is checked against float64 NumPy before it is timed; the copy ceiling is
measured in the same run. Prints one table: GB/s per (cell, variant).
"""
import argparse
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


# study knobs that are not kernel options, set for one variant only: this script's names
# for the fields of numbamr.experimental.Knobs
STUDY_KNOBS = {"sched_min_extent": "split_min_extent",
               "sched_min_blocks": "split_min_blocks",
               "sched_min_extent_col": "split_min_extent_col",
               "sched_target_blocks": "split_target_blocks",
               "sched_col_line": "col_line",
               "max_clusters": "persistent_max_clusters",
               "hold_rows": "persistent_hold_rows",
               "pdl": "persistent_dependent",
               "bulk_piece": "bulk_piece",
               "proofs": "reciprocal_proofs",
               "shared_mean": "split_mean_shared",
               "tail": "first_thread_tail"}


def parse(variant):
    """(kernel options, study Knobs) of one variant's text."""
    from numbamr.experimental import BOOLEAN_KNOBS, Knobs
    opts, knobs = {}, {}
    for item in filter(None, variant.split(",")):
        k, v = (t.strip() for t in item.split("="))
        if k in STUDY_KNOBS:
            field = STUDY_KNOBS[k]
            knobs[field] = bool(int(v)) if field in BOOLEAN_KNOBS else int(v)
        else:
            opts[k] = v if k == "layout" else int(v)
    return opts, Knobs(**knobs)


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
                    with nm.experimental.knobs(knobs):
                        got = [to_host(g) for g in flat_outputs(jf(*dev))]
                    err = max(rel_err(g, r) for g, r in zip(got, ref))
                    if err > (2e-3 if args.dtype == "float16" else 1e-4):
                        cells.append(f"wrong {err:.1e}")
                        continue
                    if args.warm:
                        cells.append(f"ok {err:.1e}")
                        continue
                    timed[len(cells)] = jf, knobs
                    cells.append("")
                    grids = [ln.grid for c in jf._cache.values() for ln in c.launchers]
                    print(f"  {op} {shape_text} {v or 'heuristic'}: grids {grids}", flush=True)
                except Exception as e:          # shown in the table
                    cells.append(f"error {type(e).__name__}")
            for _ in range(args.rounds):        # interleaved: drift falls on every variant
                for i, (jf, knobs) in timed.items():
                    with nm.experimental.knobs(knobs):
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
