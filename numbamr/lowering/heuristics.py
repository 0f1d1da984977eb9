"""The heuristics that choose a kernel's layout per shape, where the options leave it open.

``choose`` resolves every option: forced values win, the rest is chosen here from what the
kernel reads and writes (``accesses``) on the GPU ``PROFILE`` describes. Each threshold was
measured; docs/heuristics.md says what was measured, linked from the comment beside it.
"""
from dataclasses import replace

from ..errors import ArgumentError
from ..experimental import current_knobs
from .accesses import (edges_fit, has_row_independent_loads,
                       many_combines_to_a_value, narrowest_load, natural_width, pow2_ceil,
                       prefers_col, staged_loads, staged_region_bytes, streamed_passes,
                       unvectorized_kernel, vector_width, whole_segments, widest_access,
                       writes_rows)
from .columns import (COL_BLOCKS, COL_THREADS, COL_UNROLL, COL_UNROLL_ALIGNED,  # noqa: F401
                      col_floor, col_rows_per_block, col_threads, col_unroll,
                      few_columns_threads)
from .options import (MAX_SPLIT, GroupPlan, KernelOptions, Layout, edge_positions,
                      segment_length, segments_filled)
from .persistent import choose_persistent
from .profile import H200

PROFILE = H200          # the GPU the thresholds below were measured on
THREADS_PER_SM = PROFILE.threads_per_sm
SHARED_PER_SM = PROFILE.shared_per_sm
SHARED_RESERVED = PROFILE.shared_reserved
# a cluster holds at most 16 blocks on sm_90 (8 portably); where the GPU launches clusters,
# a split row is one unless forced otherwise (docs/heuristics.md#clusters)
MAX_CLUSTER = PROFILE.max_cluster


def choose(kernel, forced=None, simulator=False, clusters=False, aligned=None):
    """Resolve every option for ``kernel``: forced values win, heuristics fill the rest.
    ``clusters``: the GPU launches thread-block clusters (then a split row is one);
    ``aligned``: the input positions whose base is 16-byte aligned (None: all)."""
    forced = forced or KernelOptions()
    split = forced.split or 1
    if split > 1:
        _check_splittable(kernel, split)
    layout = _choose_layout(kernel, forced, simulator, split)
    if forced.split is None and not simulator:
        split_layout = _auto_split(kernel, forced, layout, clusters)
        if split_layout is not None:
            layout, split = split_layout, split_layout.split
    layout = _fit_min_blocks(kernel, forced, simulator, layout)
    if split > 1:
        _check_segments(kernel, layout, split)
    if not _blocks_fit(forced, layout.block_threads):
        raise ArgumentError(f"option min_blocks_per_sm={forced.min_blocks_per_sm}: blocks of "
                            f"{layout.block_threads} threads, at most {THREADS_PER_SM} threads "
                            "fit on a multiprocessor")
    if forced.cluster and split > MAX_CLUSTER:
        raise ArgumentError(f"option cluster=1: a cluster holds at most {MAX_CLUSTER} blocks, "
                            f"rows here are split across {split}")
    cluster = split > 1 and (bool(forced.cluster) if forced.cluster is not None else
                             clusters and split <= MAX_CLUSTER)
    layout = replace(layout, zigzag=bool(forced.zigzag), stagger=bool(forced.stagger),
                     blocks_per_sm=forced.blocks_per_sm or 0,
                     min_blocks_per_sm=forced.min_blocks_per_sm or layout.min_blocks_per_sm,
                     split=split, cluster=cluster,
                     online=None if forced.online is None else bool(forced.online),
                     reciprocal=forced.reciprocal != 0,
                     evict_last=_evict_last_default(kernel, layout)
                     if forced.evict_last is None else bool(forced.evict_last))
    return choose_persistent(kernel, forced, layout, aligned)


def _evict_last_default(kernel, layout):
    """Inputs under the L2 evict_last policy by default: kernels that write whole rows,
    unless their rows are split into a count that is not a power of two or into segments
    that are not whole chunks of the block's threads (docs/heuristics.md#evict-last)."""
    if not writes_rows(kernel):
        return False
    split = layout.split
    return split == 1 or (pow2_ceil(split) == split and
                          all(whole_segments(layout, g) for g in kernel.groups))


def _blocks_fit(forced, block_threads):
    """Do as many blocks of ``block_threads`` as a forced ``min_blocks_per_sm`` asks for fit
    on one multiprocessor?"""
    return (forced.min_blocks_per_sm or 1) * block_threads <= THREADS_PER_SM


def _fit_min_blocks(kernel, forced, simulator, layout):
    """``layout`` in blocks few enough threads for a forced ``min_blocks_per_sm`` to fit on
    a multiprocessor, where the block's shape was the heuristics' to choose (a forced shape
    that does not fit is refused by ``choose``)."""
    if _blocks_fit(forced, layout.block_threads) or forced.threads_per_row is not None or \
            forced.rows_per_block is not None:
        return layout
    most = THREADS_PER_SM // forced.min_blocks_per_sm
    most = 1 << (min(most, 1024).bit_length() - 1)     # a power of two of threads
    t = min(layout.threads_per_row, most)
    rb = max(1, min(layout.rows_per_block, most // t))
    return _choose_layout(kernel, replace(forced, threads_per_row=t, rows_per_block=rb),
                          simulator, layout.split)


def occupancy_shared(blocks_per_sm):
    """Dynamic shared memory per block that leaves room for ``blocks_per_sm`` blocks on
    one multiprocessor of PROFILE and not one more (0 for no cap)."""
    return PROFILE.occupancy_shared(blocks_per_sm)


# ---- split rows ----------------------------------------------------------------------------
# a block of a split row: at most 8192 elements over 256 threads (docs/heuristics.md#split-rows)
SPLIT_SEGMENT = 8192
SPLIT_THREADS = 256
STREAM_THREADS = 256    # threads on a streamed row (one pass), when there are rows enough
# chunks per iteration on such a row (docs/heuristics.md#streamed-rows)
STREAM_UNROLL = 8
# threads and chunks an iteration on a streamed row of at most STREAM_HALF_EXTENT elements
# of two bytes (docs/heuristics.md#streamed-rows)
STREAM_HALF, STREAM_HALF_EXTENT = (128, 4), 1 << 16
# threads of a block of short rows (several rows a block): 64 where the kernel writes
# whole rows, 256 where it writes a value per row (docs/heuristics.md#short-rows)
ROW_BLOCK_THREADS = 256
ROW_OUTPUT_BLOCK_THREADS = 64


def _split_threads(forced):
    return forced if forced.threads_per_row is not None else \
        replace(forced, threads_per_row=SPLIT_THREADS)


def _splittable(kernel):
    """Why the rows of ``kernel`` cannot be split across blocks, or None if they can."""
    if len(kernel.groups) != 1:
        return "its rows have more than one loop"
    return None


def _check_splittable(kernel, split):
    why = _splittable(kernel)
    if why:
        raise ArgumentError(f"option split={split}: kernel {kernel.name} cannot split its rows "
                            f"across blocks: {why}")


def _check_segments(kernel, layout, split):
    g = kernel.groups[0]
    plan = layout.groups[g.id]
    used = segments_filled(plan.body(g.extent), split, plan.vector)
    if g.extent and used < split:       # (rows of nothing: every block holds the identity)
        raise ArgumentError(f"option split={split}: rows of {g.extent} fill only {used} "
                            f"segments of {layout.segment(g)} elements; the other blocks "
                            "would have none")


def _auto_split(kernel, forced, layout, clusters=False):
    """The layout of a split row, for rows too long for one block's registers that
    ``layout`` would read twice (streamed or staged, two passes): segments of SPLIT_SEGMENT
    held in registers, or for rows longer than a cluster of such segments, one of
    WIDE_CLUSTER's. None where that does not apply."""
    if forced.threads_per_row is not None or forced.upcast is not None or \
            forced.stage is not None or not kernel.groups or _splittable(kernel) or \
            layout.layout == "col" or forced.rows_per_block is not None:
        return None     # (column layouts split only when forced: not measured yet)
    g, plan = kernel.groups[0], layout.groups[0]
    least = -(-g.extent // SPLIT_SEGMENT)
    split = pow2_ceil(least)
    wide = clusters and forced.cluster != 0 and split > MAX_CLUSTER and \
        _wide_cluster(kernel, forced)
    if wide:
        return wide
    if plan.resident and not plan.staged:
        return _half_row_split(kernel, forced, layout, clusters)
    few = clusters and forced.cluster != 0 and split <= MAX_CLUSTER and \
        kernel.layout_rows < current_knobs().split_min_blocks
    if streamed_passes(kernel, layout)[g.id] <= 1 and not plan.staged and not few:
        # rows read once as they stream: split only where they are too few to fill the
        # GPU, across a cluster (one kernel where the scheduler would take several;
        # docs/heuristics.md#few-rows)
        return None
    if split < 2 or split > MAX_SPLIT:
        return None
    return _fullest_split(kernel, _split_threads(forced), least, split)


def _half_row_split(kernel, forced, layout, clusters):
    """Half-precision rows that a block holds more than 32 values a thread (16384 to 32768
    elements) halved across a cluster of two blocks, each holding at most 32: a block
    moves half the bytes of a float32 row of the same registers, so one block a
    multiprocessor leaves memory idle (docs/heuristics.md#half-rows). None otherwise."""
    plan = layout.groups[0]
    if not clusters or not writes_rows(kernel) or narrowest_load(kernel) > 2 or \
            plan.chunks * plan.vector <= 32 or layout.rows_per_block != 1:
        return None
    halved = _resident_split(kernel, forced, 2)
    if halved is None or halved.groups[0].chunks * halved.groups[0].vector > 32:
        return None
    return halved


def _fullest_split(kernel, forced, least, most):
    """Of the resident splits into ``least`` (segments of at most SPLIT_SEGMENT) up to
    ``most`` (the next power of two) blocks a row, the one whose threads hold the fewest
    positions past the row's end (each holds whole chunks of its segment); a tie goes to
    more blocks (docs/heuristics.md#split-count)."""
    best, best_padded = None, None
    for split in range(most, least - 1, -1):
        trial = _resident_split(kernel, forced, split)
        if trial is None:
            continue
        p = trial.groups[0]
        padded = split * p.chunks * p.vector * trial.threads_per_row
        if best is None or padded < best_padded:
            best, best_padded = trial, padded
    return best


def _resident_split(kernel, forced, split):
    """``kernel``'s layout with its rows split ``split`` ways, if that holds each segment in
    registers; None otherwise."""
    trial = _choose_layout(kernel, forced, False, split)
    p = trial.groups[0]
    return trial if p.resident and not p.staged else None


# rows longer than 16 segments of SPLIT_SEGMENT (up to 262144 float32) held in one cluster
# all the same, 32 values a thread: 8 blocks of 1024 threads for a kernel that writes rows,
# 16 of 512 for one that writes a value per row from reduces that depend on one another,
# and that only over rows too few to fill the GPU (docs/heuristics.md#wide-clusters)
WIDE_CLUSTER = {True: (8, 1024), False: (16, 512)}
# few rows a kernel writes, in 16 blocks of 256 where they hold at most 40 values a thread:
# two blocks a multiprocessor, not one of 1024 (docs/heuristics.md#wide-clusters)
WIDE_FEW_CLUSTER, WIDE_FEW_VALUES = (16, 256), 40


def _wide_cluster(kernel, forced):
    writes = writes_rows(kernel)
    dependent = any(r.depth > 0 for r in kernel.reduces)
    few = kernel.layout_rows < current_knobs().split_min_blocks     # the scheduler's "few"
    if not writes and not (dependent and few):
        return None
    if writes and few:
        narrow = _narrow_wide_cluster(kernel, forced)
        if narrow is not None:
            return narrow
    split, threads = WIDE_CLUSTER[writes]
    if not _blocks_fit(forced, threads):
        return None             # blocks as many as asked for would not fit: not this layout
    return _resident_split(kernel, replace(forced, threads_per_row=threads), split)


def _narrow_wide_cluster(kernel, forced):
    """WIDE_FEW_CLUSTER's layout where it holds the row in at most WIDE_FEW_VALUES a thread,
    else None."""
    split, threads = WIDE_FEW_CLUSTER
    if not _blocks_fit(forced, threads):
        return None
    trial = _resident_split(kernel, replace(forced, threads_per_row=threads), split)
    if trial is None or trial.groups[0].chunks * trial.groups[0].vector > WIDE_FEW_VALUES:
        return None
    return trial


# ---- the layout of rows and columns --------------------------------------------------------
def _choose_layout(kernel, forced, simulator, split=1):
    layout = forced.layout or ("col" if prefers_col(kernel) else "row")
    extent = max((segment_length(_vector_body(kernel, g, forced, layout, split), split)
                  for g in kernel.groups), default=1)
    t = _threads_per_row(kernel, forced, layout, extent, simulator)
    rb = _rows_per_block(kernel, forced, layout, t, split, simulator)
    plans = tuple(_group_plan(kernel, g, forced, layout, t, split, simulator)
                  for g in kernel.groups)
    chosen = Layout(t, rb, layout, plans, split=split)
    floor = col_floor(kernel, chosen) if layout == "col" else 0
    if floor:       # the same plans, unrolled for the registers two blocks leave a thread
        chosen = replace(chosen, min_blocks_per_sm=floor, groups=tuple(
            _group_plan(kernel, g, forced, layout, t, split, simulator, True)
            for g in kernel.groups))
    return _second_choice(kernel, forced, simulator, chosen)


def _threads_per_row(kernel, forced, layout, extent, simulator):
    if forced.threads_per_row is not None:
        return forced.threads_per_row
    if layout == "col":         # enough warps in flight: up to 32 threads down each column
        t = 1 if extent <= 1 else min(4 if simulator else 32, pow2_ceil(-(-extent // 64)))
        if not simulator and forced.rows_per_block is None:
            t = col_threads(few_columns_threads(t, extent, kernel.layout_rows),
                            kernel.layout_rows)
        return t
    # about 64 bytes of each input per thread: 16 float32, 32 float16; 8 values where a
    # kernel writes rows of 512 or more and no access is a vector (rows of odd length):
    # see docs/heuristics.md#values-per-thread
    unvectorized = not simulator and unvectorized_kernel(kernel)
    per_thread = 2 if simulator else \
        8 if unvectorized and extent >= 512 and writes_rows(kernel) else \
        max(8, 64 // narrowest_load(kernel))
    t = min(32 if simulator else 1024, pow2_ceil(max(1, -(-extent // per_thread))))
    if not simulator and t == 1024 and extent <= 512 * 32 and \
            (unvectorized or writes_rows(kernel)):
        # 512 threads hold the row with at most 32 values each, two blocks a multiprocessor
        # where 1024 threads fit one (docs/heuristics.md#rows-of-512-threads)
        t = 512
    if not simulator and 32 < t <= 512 and -(-extent // (t // 2)) <= 32 and \
            many_combines_to_a_value(kernel):
        t //= 2     # still held in registers: at most 32 values a thread
    return t


def _rows_per_block(kernel, forced, layout, t, split, simulator):
    nrows = kernel.layout_rows
    if forced.rows_per_block is not None:
        rb = forced.rows_per_block
    elif split > 1 and layout == "row":
        rb = 1          # a split row layout: one row a block, its threads over the segment
    else:
        target = 64 if simulator else 1024 if layout == "col" else \
            ROW_OUTPUT_BLOCK_THREADS if writes_rows(kernel) else ROW_BLOCK_THREADS
        widest = 32 if layout == "row" or simulator else col_rows_per_block(nrows)
        rb = max(1, min(target // t, pow2_ceil(nrows), widest if layout == "col" else 1024))
        if simulator:
            rb = min(rb, 2)
    return rb if t * rb <= 1024 else max(1, 1024 // t)


def _group_plan(kernel, g, forced, layout, t, split, simulator, floor=False):
    """Resident (in registers) when few enough chunks a thread, else streamed. ``floor``:
    a column layout kept at two blocks a multiprocessor (``columns.col_floor``)."""
    v, edges = _row_vectors(kernel, g, forced, layout, t, split)
    if layout == "row" and split == 1 and forced.vector is None and \
            forced.upcast is None and not edges and not simulator:
        v = _fewest_idle_width(g.extent, t, v)
    body = GroupPlan(v, 1, True, edges=edges).body(g.extent)
    need = -(-segment_length(body, split, v) // (t * v))
    if forced.upcast is not None:
        resident = need <= forced.upcast
    else:       # keep at most 32 values per thread and array in registers
        resident = need * v * kernel.columns <= (16 if simulator else 32)
    if resident:
        return GroupPlan(v, need, True, edges=edges)
    unroll = forced.unroll if forced.unroll is not None else \
        2 if simulator else col_unroll(kernel, g, floor) if layout == "col" else 4
    return GroupPlan(v, max(1, min(unroll, need)), False, edges=edges)


def _fewest_idle_width(extent, t, v):
    """Half the vector width where the row's threads then hold it in registers (at most 32
    values a thread) with fewer positions past its end: 5120 elements over 256 threads
    are 5 whole chunks of 4, not 3 of 8 with half the last one idle (layernorm 4096 x 5120
    bfloat16, docs/heuristics.md#idle-positions). Rows not split only: a split row's
    segment count is already the one that pads least."""
    def held(w):
        chunks = -(-extent // (t * w))
        return chunks * w, chunks * t * w - extent
    if v < 2 or extent % (v // 2) or held(v)[0] > 32:
        return v
    values, idle = held(v // 2)
    return v // 2 if values <= 32 and idle < held(v)[1] else v


def _vector_body(kernel, g, forced, layout, split):
    """The positions of ``g``'s rows that its vectors cover where they are walked with
    edges (the threads a row are chosen for those), else the row's length."""
    natural = natural_width(kernel, g, forced.vector)
    if layout == "row" and edges_fit(kernel, g, natural, split):
        return g.extent - g.extent % natural
    return g.extent


def _row_vectors(kernel, g, forced, layout, t, split):
    """(vector width, edges) of group ``g``: rows of a row layout whose length the natural
    width does not divide keep that width over an aligned body, with scalar edges, where
    the row's threads can take every edge position at once
    (docs/heuristics.md#row-edges); else the width is halved until it divides the row."""
    if layout == "row":
        natural = natural_width(kernel, g, forced.vector)
        if t >= edge_positions(g.extent, natural) and edges_fit(kernel, g, natural, split):
            return natural, True
    return vector_width(kernel, g, 1 if layout == "col" else forced.vector, split), False


def _second_choice(kernel, forced, simulator, result):
    """The layout the first choice leads to: rows staged in shared memory, streamed by
    fewer threads, or held other than by 1024 threads (each where measured faster)."""
    t, plans, split = result.threads_per_row, result.groups, result.split
    row = result.layout == "row"
    if row and forced.upcast is None and any(not p.resident for p in plans):
        staged = _staged_layout(kernel, result, forced, simulator)
        if staged is not None:
            return staged
    if row and forced.threads_per_row is None and forced.rows_per_block is None \
            and not simulator and split == 1 and t > STREAM_THREADS and \
            kernel.layout_rows >= COL_BLOCKS and not any(p.resident for p in plans) and \
            all(n <= 1 for n in streamed_passes(kernel, result).values()):
        # rows streamed in one pass, plenty of them: fewer threads a row, so that each
        # block's combine is a smaller share of its time, each loading more chunks at once
        # (docs/heuristics.md#streamed-rows)
        threads, unroll = _streamed_shape(kernel, forced)
        return _choose_layout(kernel, replace(forced, threads_per_row=threads,
                                              unroll=unroll), simulator, split)
    if row and t == 1024 and not simulator and split == 1 and \
            kernel.layout_rows >= COL_BLOCKS and \
            all(p.resident and p.chunks * p.vector > 16 for p in plans) and \
            all(getattr(forced, f) is None for f in ("threads_per_row", "rows_per_block",
                                                     "upcast", "unroll", "stage")):
        return _instead_of_1024_threads(kernel, forced, result)
    return result


def _streamed_shape(kernel, forced):
    """(threads, chunks an iteration) of rows streamed in one pass: STREAM_THREADS and
    STREAM_UNROLL; STREAM_HALF's for rows of at most STREAM_HALF_EXTENT elements of two
    bytes or fewer, which a block of 256 reads in too few iterations for its combine to be
    a small share (docs/heuristics.md#streamed-rows)."""
    g = kernel.groups[0]
    half = len(kernel.groups) == 1 and g.extent <= STREAM_HALF_EXTENT and \
        widest_access(kernel, g) <= 2
    threads, unroll = STREAM_HALF if half else (STREAM_THREADS, STREAM_UNROLL)
    return threads, forced.unroll if forced.unroll is not None else unroll


def _instead_of_1024_threads(kernel, forced, resident):
    """Rows held in registers by 1024 threads, more than 16 values each (16384 to 32768
    float32 elements): one block a multiprocessor. A kernel that writes a value per row and
    reads the row in one pass is streamed as ``_streamed_shape`` says; one that
    writes whole rows takes 512 threads where they hold the row on chip or where the row
    then splits across blocks, else keeps the 1024 threads
    (docs/heuristics.md#instead-of-1024-threads)."""
    if writes_rows(kernel):
        fewer = _choose_layout(kernel, replace(forced, threads_per_row=512), False)
        if all(p.resident for p in fewer.groups) or \
                (forced.split is None and _auto_split(kernel, forced, fewer) is not None):
            return fewer
        return resident
    threads, unroll = _streamed_shape(kernel, forced)
    streamed = _choose_layout(kernel, replace(forced, threads_per_row=threads,
                                              unroll=unroll, upcast=0), False)
    if all(n <= 1 for n in streamed_passes(kernel, streamed).values()):
        return streamed
    return resident


STAGE_BUDGET = 160 * 1024      # bytes of shared memory a block may stage rows in


def _words_a_value(kernel, g):
    """4-byte registers each value of ``g``'s rows takes where a thread holds it: 2 for
    8-byte loads (64 float64 values a thread of 512 are 128 registers, all there are, and
    spilled 504 bytes: a z-score of rows of 32768 with three statistics)."""
    return max(1, widest_access(kernel, g) // 4)


def _staged_layout(kernel, layout, forced, simulator):
    """Rows too long for registers held in registers + shared memory (read once), when the
    shared memory they need fits the budget; else None (the rows are streamed)."""
    budget = forced.stage if forced.stage is not None else (0 if simulator else STAGE_BUDGET)
    if budget <= 0 or (forced.rows_per_block or 1) != 1:
        return None
    t = layout.threads_per_row if forced.threads_per_row is not None else \
        min(layout.threads_per_row, 512)
    in_regs = (8 if simulator else 64) if t <= 512 else 32     # values per thread in registers
    plans, total = [], 0
    passes = streamed_passes(kernel, layout)
    if all(passes[g.id] <= 1 for g, p in zip(kernel.groups, layout.groups) if not p.resident):
        return None             # streaming reads every row once already
    if forced.stage is None and any(has_row_independent_loads(kernel, g)
                                    for g, p in zip(kernel.groups, layout.groups)
                                    if not p.resident):
        # weights re-read beside a staged row: slower than streaming
        # (docs/heuristics.md#staged-rows)
        return None
    for g, p in zip(kernel.groups, layout.groups):
        need = -(-layout.segment(g) // (t * p.vector))
        held = in_regs // _words_a_value(kernel, g)
        if need * p.vector <= held:
            plans.append(replace(p, chunks=need, resident=True))
            continue
        reg_chunks = max(1, held // p.vector)
        staged = need - reg_chunks
        loads = staged_loads(kernel, g)
        total += sum(staged_region_bytes(staged, t, p.vector, w.dtype) for w in loads)
        plans.append(replace(p, chunks=need, resident=True, staged=staged))
    if total > budget:
        return None
    return Layout(t, 1, "row", tuple(plans), split=layout.split)
