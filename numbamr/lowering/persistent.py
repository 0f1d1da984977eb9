"""Whether a kernel's split rows loop over rows as a persistent cluster, and how far ahead.

See docs/heuristics.md#persistent-rows for what was measured.
"""
from dataclasses import replace

import numpy as np

from .. import dtypes
from ..errors import ArgumentError
from .accesses import column_loads, row_loads, whole_segments
from . import symbolic as sym


def choose_persistent(kernel, forced, layout, aligned):
    """``layout`` with its persistent choice: forced (refused with the reason where the
    kernel cannot take it) or the default, PERSISTENT_ROWS_AHEAD rows ahead where the
    kernel reads weights (by column only) in rows split across a cluster and one reduce
    depends on another (two exchanges a row). With a single exchange a row the blocks wait
    little and a cluster a row is faster (docs/heuristics.md#persistent-rows)."""
    # the weights' registers: the compiler is told to leave room for 512 threads a
    # multiprocessor, two blocks of 256 (docs/heuristics.md#persistent-rows)
    floor = layout.min_blocks_per_sm or max(1, 512 // layout.block_threads)
    why = persistent_refusal(kernel, layout, forced.persistent or PERSISTENT_ROWS_AHEAD,
                             aligned, floor)
    if forced.persistent:
        if why:
            raise ArgumentError(f"option persistent={forced.persistent}: kernel {kernel.name} "
                                f"cannot loop over rows: {why}")
        ahead = forced.persistent
    elif forced.persistent is None and not why and column_loads(kernel) and \
            any(r.depth > 0 for r in kernel.reduces):
        ahead = PERSISTENT_ROWS_AHEAD
    else:
        return layout
    return replace(layout, persistent=ahead, min_blocks_per_sm=floor,
                   evict_last=bool(forced.evict_last))     # (the rows come by bulk copy)


# rows brought ahead by a persistent cluster by default (docs/heuristics.md#persistent-rows)
PERSISTENT_ROWS_AHEAD = 2
# bytes of shared memory the blocks of one multiprocessor may stage rows in (of its
# SHARED_PER_SM, room left for the blocks' reserved and static shared memory)
PERSISTENT_STAGE_BYTES = 192 * 1024


def persistent_refusal(kernel, layout, ahead, aligned, blocks_per_sm):
    """Why ``kernel`` in ``layout`` cannot loop over rows as a persistent cluster that
    brings its inputs ``ahead`` rows ahead, ``blocks_per_sm`` of its blocks on one
    multiprocessor (``aligned``: as for ``choose``), or None if it can."""
    if layout.split < 2 or not layout.cluster:
        return "its rows are not split across a cluster of blocks (split >= 2, cluster=1)"
    if layout.rows_per_block != 1 or layout.layout != "row":
        return "its blocks hold more than one row"
    g = kernel.groups[0]
    plan = layout.groups[g.id]
    if not plan.resident or plan.staged or not whole_segments(layout, g):
        return "its segments are not held in registers in whole chunks"
    loads = row_loads(kernel, g)
    if not loads:
        return "no input of its rows changes from row to row"
    row = sym.lift(kernel.row) * g.extent + sym.lift(g.var)
    seg = layout.segment(g)
    for w in loads:
        size = np.dtype(w.dtype).itemsize
        if np.dtype(w.dtype).kind not in "fiu" or size < 2 or dtypes.is_bfloat16(w.dtype):
            return f"input {kernel.inputs[w.arg[0]][1]} is of dtype {np.dtype(w.dtype)}"
        unaligned = aligned is not None and ("in", w.arg[0]) not in aligned
        if w.arg[1] != row or plan.vector * size not in (8, 16) or (seg * size) % 16 or \
                unaligned:
            return f"input {kernel.inputs[w.arg[0]][1]} is not read as contiguous rows " \
                   "of 16-byte pieces"
    staged = sum(seg * np.dtype(w.dtype).itemsize for w in loads)
    if staged * ahead * blocks_per_sm > PERSISTENT_STAGE_BYTES:
        return f"{ahead} rows of its inputs' segments ({staged} bytes a row) for each of " \
               f"{blocks_per_sm} blocks do not fit in a multiprocessor's shared memory"
    return None
