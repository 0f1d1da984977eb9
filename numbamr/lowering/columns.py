"""The column layout's shape: columns a block, threads down each column, chunks a loop
iteration, and the occupancy its grid is sized for (docs/heuristics.md#column-blocks and
the sections after it)."""
import numpy as np

from ..ops import ReduceKind
from .accesses import address_step, group_accesses, pow2_ceil, writes_rows
from .online import find_fusions
from .profile import H200

PROFILE = H200          # the GPU the thresholds below were measured on
THREADS_PER_SM = PROFILE.threads_per_sm

COL_BLOCKS = 256     # blocks a column layout keeps (about two per multiprocessor)


def col_rows_per_block(nrows):
    """Columns per block of a column layout: the widest of 128, 64, 32 that still leaves
    COL_BLOCKS blocks (docs/heuristics.md#column-blocks)."""
    for rb in (128, 64):
        if -(-nrows // rb) >= COL_BLOCKS:
            return rb
    return 32


# chunks a column layout's loop loads at once: 8, or 32 where every row starts 16-byte
# aligned and the kernel only reduces, 16 of those where two blocks a multiprocessor leave
# 32 registers a thread and the partials take more than 4 (docs/heuristics.md#column-unroll)
COL_UNROLL = 8
COL_UNROLL_ALIGNED = 32
COL_UNROLL_FLOOR = 16
COL_FLOOR_PARTIALS = 4
COL_FLOOR_MOST_PARTIALS = 8     # floor_registers past which a thread needs more than 32


def col_unroll(kernel, g, floor=False):
    """Chunks an iteration of a column layout's loop over ``g`` (``floor``: its blocks are
    kept at two a multiprocessor, ``col_floor``)."""
    if not aligned_columns(kernel, g):
        return COL_UNROLL
    # a thread of a packed row (``pack.pack_columns``) loads that many columns a chunk:
    # as many bytes in flight in a w-th of the chunks
    chunks = COL_UNROLL_FLOOR if floor and column_partials(kernel) > COL_FLOOR_PARTIALS \
        else COL_UNROLL_ALIGNED
    return max(1, chunks // kernel.columns)


def aligned_columns(kernel, g):
    """Does ``kernel`` only reduce, with every row of ``g``'s accesses starting 16-byte
    aligned (vector loads down the columns)?"""
    strides = [(address_step(addr, g.var, kernel.row), np.dtype(dt).itemsize)
               for dt, addr in group_accesses(kernel, g)]
    return not writes_rows(kernel) and \
        all(step is not None and step * size % 16 == 0 for step, size in strides)


ARG_KINDS = (ReduceKind.ARGMAX, ReduceKind.ARGMIN)


def _partial_bytes(r):
    """Bytes of reduce ``r``'s partial value (an arg reduce: of its value, beside which it
    keeps an int64 index)."""
    return np.dtype(r.value_dtype if r.kind in ARG_KINDS else r.dtype).itemsize


def partial_registers(kernel):
    """32-bit registers a thread's partials of ``kernel``'s reduces take (an arg reduce: its
    value and its int64 index)."""
    return sum(-(-_partial_bytes(r) // 4) + 2 * (r.kind in ARG_KINDS) for r in kernel.reduces)


def column_partials(kernel):
    """``partial_registers`` of one column of ``kernel``'s rows (a packed row holds
    ``kernel.columns``, ``pack.pack_columns``)."""
    return partial_registers(kernel) // kernel.columns


def floor_registers(kernel, layout):
    """``column_partials`` and what their updates hold beside them, as the sm_90 compile
    showed under the two-block floor: a variance computed in one pass (``online``) keeps a
    count beside its two sums, and each 8-byte partial (a float64 sum of float32 values)
    or int64 index (an arg reduce) one more register for its widened operands (four
    float64 sums spilled 448 bytes)."""
    counts = sum(f.kind == "welford" for f in find_fusions(kernel, layout))
    wide = sum(_partial_bytes(r) == 8 or r.kind in ARG_KINDS for r in kernel.reduces)
    return column_partials(kernel) + (counts + wide) // kernel.columns


COL_THREADS = PROFILE.sms * THREADS_PER_SM     # threads of a column layout's grid: one wave


def few_columns_threads(t, extent, nrows):
    """Columns too few for a quarter of a wave at ``t`` threads each (the combine of a
    split column reduction: 256 columns of 128 partials) take up to 32 threads down each
    column, at least 4 positions a thread: such a kernel is all latency
    (docs/heuristics.md#few-columns)."""
    if nrows * t * 4 > COL_THREADS:
        return t
    return max(t, min(32, pow2_ceil(-(-extent // 4))))


def col_threads(t, nrows):
    """Threads down each column: at most ``t``, at most 1024 a block, and few enough that
    the whole grid is one wave of two 1024-thread blocks a multiprocessor
    (docs/heuristics.md#column-threads)."""
    rb = col_rows_per_block(nrows)
    t = min(t, 1024 // rb)
    while t > 1 and -(-nrows // rb) * rb * t > COL_THREADS:
        t //= 2
    return t


def col_floor(kernel, layout):
    """The occupancy floor of a column layout: two blocks a multiprocessor for blocks of
    1024 threads in a grid of more blocks than multiprocessors, every group streamed down
    aligned rows; else none (0). ``col_threads`` sized that grid as one wave of two such
    blocks; a thread of 33 registers or more (float64 partials: batch-norm statistics)
    would fit only one, and the grid would run as two waves of one. Scalar loads (rows not
    aligned), values held in registers (a resident group) and more than 8 of
    ``floor_registers`` need more than 32 registers a thread: those spill under the floor and
    go without it (docs/heuristics.md#column-occupancy)."""
    blocks = -(-kernel.layout_rows // layout.rows_per_block) * layout.split
    if layout.block_threads != 1024 or blocks <= PROFILE.sms:
        return 0
    streamed = all(not plan.resident for plan in layout.groups)
    fits = floor_registers(kernel, layout) <= COL_FLOOR_MOST_PARTIALS
    return 2 if streamed and fits and all(aligned_columns(kernel, g) for g in kernel.groups) \
        else 0
