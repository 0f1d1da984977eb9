"""Kernel options (the thread layout of a kernel) and the heuristics that pick them per shape.

Every option can be forced through ``numbamr.jit(...)``; what is not forced is chosen here.
"""
from dataclasses import dataclass, fields, replace

import numpy as np

from .. import dtypes
from ..errors import ArgumentError
from ..ops import Op
from .kernel import walk
from . import symbolic as sym


# the blocks of a split row wait for each other, so all of them must fit on the GPU at once
MAX_SPLIT = 32
# a cluster holds at most 16 blocks on sm_90 (8 portably); where the GPU launches clusters,
# a split row is one unless forced otherwise (1024 x 65536 on the H200: 5-18% faster than
# arrival counts in memory, bench/RESULTS.md)
MAX_CLUSTER = 16
MAX_ROWS_AHEAD = 4
THREADS_PER_SM = 2048


@dataclass(frozen=True)
class KernelOptions:
    """Layout choices; ``None`` means "let the heuristics choose".

    threads_per_row: threads that cooperate on one row (power of two, 1..1024)
    rows_per_block:  rows handled by one thread block
    vector:          most elements per vector (16-byte) load/store; 1 disables vector access
    upcast:          most chunks per thread kept in registers for the whole kernel ("resident"
                     rows: each input read once); 0 never keeps rows resident
    unroll:          chunks per iteration of a loop over a row that is not resident
    layout:          'row' (a row's threads are adjacent: coalesced along rows) or 'col'
                     (adjacent threads take adjacent rows: coalesced across rows)
    stage:           most bytes of shared memory per block that may hold the part of a
                     row that does not fit in registers (so the row is still read once);
                     0 never stages
    zigzag:          1 walks every second streamed pass over a row backward, so that it
                     starts on the data the pass before it read last (likely still in L2)
    stagger:         1 starts each row's streamed passes at a different iteration (the row
                     number modulo the iterations, wrapping around), so that the rows in
                     flight at once read different offsets of their rows
    blocks_per_sm:   at most this many blocks on one multiprocessor (asks for enough
                     shared memory that no more fit), to keep fewer rows in flight
    min_blocks_per_sm: the compiler keeps registers few enough for this many blocks on
                     one multiprocessor (a launch bound; it may spill to fit)
    split:           blocks that share one row (1..32): each holds a segment of
                     the row and the blocks of a row exchange their partial reductions
                     through memory, so that rows too long for one block stay on chip;
                     forced, it also keeps long reductions over few rows (a whole-array sum,
                     the columns of a tall array) in one kernel, split this way, instead
                     of the two kernels they would take
    cluster:         1 makes the blocks of a split row one thread-block cluster (sm_90 and
                     newer, split <= 16): the hardware starts them together and they send
                     their partials into each other's shared memory; 0 exchanges through
                     global memory with arrival counts (rows that are not split are
                     unaffected)
    online:          1 fuses a reduce that depends on another (the variance after the mean,
                     the sum of exponentials after the max) into one pass (Welford, online
                     max-sum) over a row that is not in registers, or a split row's blocks
                     into one exchange; 0 never (a second read, a second exchange). By
                     default streamed rows fuse, and split rows unless they are clusters.
                     The variance of integers never fuses: its two-pass mean is exact
    reciprocal:      1 divides by a computed value broadcast across the row (a row's sum,
                     ``sqrt(var + eps)``) by multiplying with its reciprocal, computed once
                     per row where the divisor is the same for the whole row (within about
                     one ulp of the quotient, and the same in every kernel that computes
                     it); constants are divided as NumPy does. 0 divides every element
    evict_last:      1 loads inputs (vector loads of whole 4-byte words) under the L2
                     evict_last policy on sm_80 and newer: L2 gives up the kernel's
                     written lines before the lines it read. 0 loads them plainly. By
                     default kernels that write whole rows (not a value per row) take it,
                     unless their rows are split in a count that is not a power of two or
                     into segments that are not whole chunks of the block's threads
    persistent:      N >= 1 keeps a split row's cluster on the GPU for many rows (as many
                     clusters as fit at once, each looping over rows c, c + G, ...): the
                     values that do not change from row to row (weights indexed by column)
                     are loaded into registers once, and each input that does is brought
                     into shared memory by the bulk-copy engine N rows ahead of its use.
                     Needs a cluster (split rows on sm_90), one row a block, segments held
                     in registers that cover the row in whole chunks, and inputs read as
                     contiguous rows. 0 never. By default rows split across a cluster take
                     2 where they read such weights and one reduce depends on another (two
                     exchanges a row)
    """
    threads_per_row: int = None
    rows_per_block: int = None
    vector: int = None
    upcast: int = None
    unroll: int = None
    layout: str = None
    stage: int = None
    zigzag: int = None
    stagger: int = None
    blocks_per_sm: int = None
    min_blocks_per_sm: int = None
    split: int = None
    cluster: int = None
    online: int = None
    reciprocal: int = None
    evict_last: int = None
    persistent: int = None

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if f.name == "layout":
                if v not in ("row", "col"):
                    raise ArgumentError(f"option layout must be 'row' or 'col', got {v!r}")
                continue
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ArgumentError(f"option {f.name} must be an integer, got {v!r}")
        t, rb = self.threads_per_row, self.rows_per_block
        if t is not None and (t < 1 or t > 1024 or t & (t - 1)):
            raise ArgumentError(f"option threads_per_row must be a power of two in 1..1024, "
                                f"got {t}")
        if rb is not None and rb < 1:
            raise ArgumentError(f"option rows_per_block must be at least 1, got {rb}")
        if t is not None and rb is not None and t * rb > 1024:
            raise ArgumentError(f"threads_per_row * rows_per_block = {t * rb} exceeds 1024 "
                                "threads per block")
        if self.vector is not None and self.vector not in (1, 2, 4, 8, 16):
            raise ArgumentError(f"option vector must be 1, 2, 4, 8 or 16, got {self.vector}")
        if self.upcast is not None and self.upcast < 0:
            raise ArgumentError(f"option upcast must be >= 0, got {self.upcast}")
        if self.unroll is not None and self.unroll < 1:
            raise ArgumentError(f"option unroll must be >= 1, got {self.unroll}")
        if self.stage is not None and not 0 <= self.stage <= 227 * 1024:
            raise ArgumentError(f"option stage must be 0..232448 bytes, got {self.stage}")
        for name in ("zigzag", "stagger", "cluster", "online", "reciprocal", "evict_last"):
            if getattr(self, name) not in (None, 0, 1):
                raise ArgumentError(f"option {name} must be 0 or 1, got {getattr(self, name)}")
        for name in ("blocks_per_sm", "min_blocks_per_sm"):
            if getattr(self, name) is not None and not 1 <= getattr(self, name) <= 32:
                raise ArgumentError(f"option {name} must be 1..32, got {getattr(self, name)}")
        if self.persistent is not None and not 0 <= self.persistent <= MAX_ROWS_AHEAD:
            raise ArgumentError(f"option persistent must be 0..{MAX_ROWS_AHEAD}, "
                                f"got {self.persistent}")
        sp = self.split
        if sp is not None and (sp < 1 or sp > MAX_SPLIT):
            raise ArgumentError(f"option split must be in 1..{MAX_SPLIT}, "
                                f"got {sp}")


@dataclass(frozen=True)
class GroupPlan:
    vector: int        # elements per chunk (V)
    chunks: int        # resident: chunks per thread covering the extent; streaming: unroll
    resident: bool
    staged: int = 0    # resident: how many of the last chunks live in shared memory


@dataclass(frozen=True)
class Layout:
    threads_per_row: int
    rows_per_block: int
    layout: str
    groups: tuple      # GroupPlan per loop group id
    zigzag: bool = False       # every second streamed pass over a group walks backward
    stagger: bool = False      # a row's streamed passes start at an iteration set by the row
    blocks_per_sm: int = 0     # occupancy cap through shared memory (0: none)
    min_blocks_per_sm: int = 0  # occupancy floor through the registers (0: none)
    split: int = 1             # blocks per row, each over one segment of it
    cluster: bool = False      # a split row's blocks form one cluster (exchange at its barrier)
    online: bool = None        # one-pass forms of dependent reduces: forced, or None (heuristic)
    reciprocal: bool = True    # x / a broadcast value as x * (its reciprocal)
    evict_last: bool = False   # vector loads under the L2 evict_last policy (sm_80+)
    persistent: int = 0        # rows brought ahead into shared memory by a looping cluster

    def segment(self, group):
        """The extent one block covers of ``group`` (a split row's last segments may end
        sooner, with the row)."""
        return segment_length(group.extent, self.split, self.groups[group.id].vector)

    @property
    def block_threads(self):
        return self.threads_per_row * self.rows_per_block


def segment_length(extent, split, vector=1):
    """Elements a block covers of a row of ``extent`` split across ``split`` blocks: an
    equal share rounded up to whole vectors, so that every segment starts aligned; the last
    segments take what is left (shorter, where the share does not divide the row)."""
    share = -(-extent // split)
    return -(-share // vector) * vector


def segments_filled(extent, split, vector=1):
    """How many of the ``split`` segments of a row of ``extent`` hold elements."""
    seg = segment_length(extent, split, vector)
    return -(-extent // seg) if seg else 0


def _pow2_ceil(n):
    return 1 << max(0, int(n - 1).bit_length())


def _group_values(kernel, group):
    """The values computed inside ``group``'s loops: reduce bodies and stored values."""
    return [r.body for r in kernel.reduces if r.group is group] + \
        [s.value for s in kernel.stores if s.group is group]


def _accesses(kernel, group):
    """(dtype, address) of every load and store inside ``group``'s loops."""
    out = []
    for v in _group_values(kernel, group):
        for w in walk(v):
            if w.op is Op.LOAD and group.var in w.arg[1].vars():
                out.append((w.dtype, w.arg[1]))
    for s in kernel.stores:
        if s.group is group:
            out.append((s.dtype, s.addr))
    return out


def contiguous_in(addr, var):
    """Is ``addr`` = (terms without ``var``) + 1 * var?"""
    return addr.coef(var) == 1


def _vector_width(kernel, group, forced, split=1):
    acc = _accesses(kernel, group)
    vec = [dt for dt, a in acc if contiguous_in(a, group.var)]
    if not vec:
        return 1
    # at most 16 bytes of any data per access: float16 rows beside float32 weights move 8
    # bytes of the row and 16 of each weight, so that a warp's weight loads fill whole
    # sectors (8 halves a thread read the weights as two 16-byte halves of 32-byte sectors,
    # each sector touched twice: float16 layernorm 8192 x 8192 3862 -> 4012 GB/s on the
    # H200 at 4 wide, rmsnorm unchanged, bench/RESULTS.md)
    narrow = min((np.dtype(dt).itemsize for dt in vec if np.dtype(dt).kind != "b"), default=16)
    wide = max(np.dtype(dt).itemsize for dt, _ in acc)
    width = max(1, min(16 // narrow, 16 // wide))
    if forced is not None:
        width = min(width, forced)
    # whole vectors a row; a split row's segments of whole vectors leave no block empty
    while width > 1 and (group.extent % width or
                         segments_filled(group.extent, split, width) < split):
        width //= 2
    return max(1, width)


def _step(addr, var, other):
    """addr(var=1) - addr(var=0), with ``other`` at 0 (None where var is not in addr)."""
    if var not in addr.vars():
        return None
    at = lambda v: addr.substitute({var: sym.lift(v), other: sym.lift(0)})  # noqa: E731
    d = at(1) - at(0)
    return d.const if d.is_const() else None


def _prefers_col(kernel):
    """Column layout when loads walk rows contiguously but loops stride through memory."""
    row = kernel.row
    if kernel.layout_rows < 2:
        return False
    for g in kernel.groups:
        for _, addr in _accesses(kernel, g):
            if _step(addr, g.var, row) == 1:
                return False
            if _step(addr, row, g.var) == 1:
                return True
    return False


COL_BLOCKS = 256     # blocks a column layout keeps (about two per multiprocessor)


def _col_rows_per_block(nrows):
    """Columns per block of a column layout: the widest of 128, 64, 32 that still leaves
    COL_BLOCKS blocks (measured on the H200, bench/RESULTS.md: 128 columns of 4 bytes per
    block beat 32 by 12-19% on 65536-wide and split column reductions, but at 8192 columns
    the 64 blocks they leave are too few)."""
    for rb in (128, 64):
        if -(-nrows // rb) >= COL_BLOCKS:
            return rb
    return 32


# chunks a column layout's loop loads at once: 8 (1024 x 65536 column variance: 4079 ->
# 4213 GB/s on the H200 against 4; 8192 x 8192 unchanged), 32 where every row starts
# 16-byte aligned and the kernel only reduces (bench/RESULTS.md: column variance at 4096 x
# 4096 +30%, 3000 x 50000 +11%, the suite's three shapes -0.7% to +1.9%; rows of odd length
# lost 16% at 8191 x 8193; kernels that write columns were not measured so)
COL_UNROLL = 8
COL_UNROLL_ALIGNED = 32


def _col_unroll(kernel, g):
    """Chunks an iteration of a column layout's loop over ``g``."""
    strides = [(_step(addr, g.var, kernel.row), np.dtype(dt).itemsize)
               for dt, addr in _accesses(kernel, g)]
    aligned = not _writes_rows(kernel) and \
        all(step is not None and step * size % 16 == 0 for step, size in strides)
    return COL_UNROLL_ALIGNED if aligned else COL_UNROLL


COL_THREADS = 132 * THREADS_PER_SM     # threads of a column layout's grid: one wave (H200)


def _col_threads(t, nrows):
    """Threads down each column: at most ``t``, at most 1024 a block, and few enough that
    the whole grid is one wave of two 1024-thread blocks a multiprocessor (measured on the
    H200, bench/RESULTS.md: 65536 columns of 1024 at 4 threads a column, 512 blocks of 512
    threads, beat 8 threads, two waves of 1024-thread blocks, by 6-9%)."""
    rb = _col_rows_per_block(nrows)
    t = min(t, 1024 // rb)
    while t > 1 and -(-nrows // rb) * rb * t > COL_THREADS:
        t //= 2
    return t


def _narrowest_load(kernel):
    sizes = [np.dtype(dt).itemsize for g in kernel.groups for dt, _ in _accesses(kernel, g)]
    return min(sizes, default=4)


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
                     min_blocks_per_sm=forced.min_blocks_per_sm or 0,
                     split=split, cluster=cluster,
                     online=None if forced.online is None else bool(forced.online),
                     reciprocal=forced.reciprocal != 0,
                     evict_last=_evict_last_default(kernel, layout)
                     if forced.evict_last is None else bool(forced.evict_last))
    return _persistent(kernel, forced, layout, aligned)


def _persistent(kernel, forced, layout, aligned):
    """``layout`` with its persistent choice: forced (refused with the reason where the
    kernel cannot take it) or the default, PERSISTENT_ROWS_AHEAD rows ahead where the
    kernel reads weights (by column only) in rows split across a cluster and one reduce
    depends on another (two exchanges a row). With a single exchange a row the blocks wait
    little and a cluster a row is faster (rmsnorm 1024 x 65536 on the H200: 4222 GB/s, 3772
    looping over rows)."""
    # the weights' registers: the compiler is told to leave room for 512 threads a
    # multiprocessor, two blocks of 256 (measured so, bench/persistent_rows.py)
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


# rows brought ahead by a persistent cluster by default; measured on the H200 at 1024 x 65536
# (bench/RESULTS.md): layernorm 2 rows ahead 3808-3837 GB/s, 3 rows ahead 3750-3785
PERSISTENT_ROWS_AHEAD = 2
# bytes of shared memory the blocks of one multiprocessor may stage rows in (of its
# SHARED_PER_SM, room left for the blocks' reserved and static shared memory)
PERSISTENT_STAGE_BYTES = 192 * 1024


def row_loads(kernel, g):
    """The loads of ``g``'s loops whose address depends on the row."""
    return [w for w in _loads(kernel, g) if kernel.row in w.arg[1].vars()]


def column_loads(kernel):
    """The loads of the kernel's loops whose address does not depend on the row (weights
    indexed by column)."""
    return [w for g in kernel.groups for w in _loads(kernel, g)
            if kernel.row not in w.arg[1].vars()]


def _loads(kernel, g):
    """Distinct loads of ``g`` whose address moves along the group's axis."""
    seen, out = set(), []
    for v in _group_values(kernel, g):
        for w in walk(v):
            if w.op is Op.LOAD and g.var in w.arg[1].vars() and w.id not in seen:
                seen.add(w.id)
                out.append(w)
    return out


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
    if not plan.resident or plan.staged or not _whole_segments(layout, g):
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


def _evict_last_default(kernel, layout):
    """Inputs under the L2 evict_last policy by default: kernels that write whole rows
    (measured on the H200, bench/RESULTS.md: rows written whole 0-2.3% faster, a value per
    row 0.7-1.4% slower), unless their rows are split into a count that is not a power of
    two or into segments that are not whole chunks of the block's threads. Measured so:
    split 8 of 8192 (1024 and 4096 rows of 65536) gains 1-4% with the policy; rows of
    100000 in 14 (z-score 3345 -> 4106 GB/s without it, rmsnorm 3075 -> 3863), of 50000 in
    7 (rmsnorm 3351 -> 4136), of 100352 in 14 whole segments (z-score 2101 -> 2728) and
    float16 rows of 100000 in 13, 14 or 16 lose 1-46% with it."""
    if not _writes_rows(kernel):
        return False
    split = layout.split
    return split == 1 or (_pow2_ceil(split) == split and
                          all(_whole_segments(layout, g) for g in kernel.groups))


def _whole_segments(layout, g):
    """Do the ``layout.split`` segments of group ``g`` cover its rows exactly, each in
    whole chunks of the block's threads?"""
    seg = layout.segment(g)
    return seg * layout.split == g.extent and \
        seg % (layout.groups[g.id].vector * layout.threads_per_row) == 0


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


# a block of a split row: at most 8192 elements over 256 threads (measured on the H200 at 1024 x
# 65536, bench/RESULTS.md: 512 or 1024 threads, or 4096 / 16384 elements, were slower)
SPLIT_SEGMENT = 8192
SPLIT_THREADS = 256
STREAM_THREADS = 256    # threads on a streamed row (one pass), when there are rows enough
# chunks per iteration on such a row (measured on the H200 at 1024 x 65536, bench/RESULTS.md:
# variance and logsumexp 4% faster than 4 chunks, sum + max and whole-array sums level)
STREAM_UNROLL = 8
# threads of a block of short rows (several rows a block), measured on the H200 from 64 to
# 1024 columns (bench/RESULTS.md): a kernel that writes whole rows (softmax, layernorm,
# z-score) ran 1-2% faster in blocks of 64 threads than of 256; one that writes a value per
# row (variance, logsumexp, sum + max) ran 20-24% slower, and keeps 256
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
    v = layout.groups[g.id].vector
    used = segments_filled(g.extent, split, v)
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
    split = _pow2_ceil(least)
    wide = clusters and forced.cluster != 0 and split > MAX_CLUSTER and \
        _wide_cluster(kernel, forced)
    if wide:
        return wide
    if plan.resident and not plan.staged:
        return None
    if _streamed_passes(kernel, layout)[g.id] <= 1 and not plan.staged:
        return None
    if split < 2 or split > MAX_SPLIT:
        return None
    return _fullest_split(kernel, _split_threads(forced), least, split)


def _fullest_split(kernel, forced, least, most):
    """Of the resident splits into ``least`` (segments of at most SPLIT_SEGMENT) up to
    ``most`` (the next power of two) blocks a row, the one whose threads hold the fewest
    positions past the row's end (each holds whole chunks of its segment); a tie goes to
    more blocks.
    Measured on the H200 (bench/RESULTS.md): rows of 100000 in 14 segments of 7144 (7
    chunks of 1024, all but full) rather than 16 of 6250 (7 chunks, the last a tenth full),
    softmax +26%, z-score +3%, layernorm +2%; rows of 50000 in 7 rather than 8, softmax
    +7%, layernorm +4%."""
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
# all the same, 32 values a thread: measured on the H200 at 256 x 262144 (bench/RESULTS.md)
# against the kernels the scheduler splits such rows into (one reads the row, one uses it),
# 8 blocks of 1024 threads for a kernel that writes rows (softmax 1938 -> 3218 GB/s, z-score
# 2467 -> 3563, layernorm 2438 -> 2944, rmsnorm 2694 -> 2776; 16 of 512 was slower but for
# rmsnorm), 16 of 512 for one that writes a value per row from reduces that depend on one
# another (logsumexp 1917 -> 2870, variance 3448 -> 3686; 8 of 1024 lost 9% on variance).
# The latter only over rows too few to fill the GPU (which the scheduler would split into
# kernels): with more, such a row streams in one pass (not measured against a cluster).
WIDE_CLUSTER = {True: (8, 1024), False: (16, 512)}


def _wide_cluster(kernel, forced):
    from ..schedule import SPLIT_MIN_BLOCKS
    writes = _writes_rows(kernel)
    dependent = any(r.depth > 0 for r in kernel.reduces)
    if not writes and not (dependent and kernel.layout_rows < SPLIT_MIN_BLOCKS):
        return None
    split, threads = WIDE_CLUSTER[writes]
    if not _blocks_fit(forced, threads):
        return None             # blocks as many as asked for would not fit: not this layout
    return _resident_split(kernel, replace(forced, threads_per_row=threads), split)


def _writes_rows(kernel):
    """Does ``kernel`` write outputs over its rows' elements (not only a value per row)?"""
    return any(s.group is not None for s in kernel.stores)


def _many_combines_to_a_value(kernel):
    """Does ``kernel`` write a value per row from three reduces or more (a one-hot
    cross-entropy: max, picked logit, sum of exponentials)? Such rows hold twice the values
    a thread (float32: 32), so that each thread's share of the combines halves: measured on
    the H200 at 1024 to 8192 columns (bench/RESULTS.md, run 17), a cross-entropy ran 9-13%
    faster with 32 float32 a thread, sum + max + min level; variance, logsumexp and sum +
    max (two reduces) were level within 2% and keep 16."""
    return len(kernel.reduces) >= 3 and not _writes_rows(kernel)


def _choose_layout(kernel, forced, simulator, split=1):
    layout = forced.layout or ("col" if _prefers_col(kernel) else "row")
    extent = max((segment_length(g.extent, split) for g in kernel.groups), default=1)
    t = _threads_per_row(kernel, forced, layout, extent, simulator)
    rb = _rows_per_block(kernel, forced, layout, t, split, simulator)
    plans = tuple(_group_plan(kernel, g, forced, layout, t, split, simulator)
                  for g in kernel.groups)
    return _second_choice(kernel, forced, simulator, Layout(t, rb, layout, plans, split=split))


def _threads_per_row(kernel, forced, layout, extent, simulator):
    if forced.threads_per_row is not None:
        return forced.threads_per_row
    if layout == "col":         # enough warps in flight: up to 32 threads down each column
        t = 1 if extent <= 1 else min(4 if simulator else 32, _pow2_ceil(-(-extent // 64)))
        if not simulator and forced.rows_per_block is None:
            t = _col_threads(t, kernel.layout_rows)
        return t
    # about 64 bytes of each input per thread: 16 float32, 32 float16; 8 values where a
    # kernel writes rows of 512 or more and no access is a vector (rows of odd length),
    # measured on the H200 at 100000 x 999 (bench/RESULTS.md): 128 threads a row, not 64,
    # layernorm +13%, rmsnorm +19%, softmax +2% (variance, which writes a value per row,
    # -4%: it keeps 16; shorter odd rows were not measured and keep 16 too)
    unvectorized = not simulator and _unvectorized(kernel)
    per_thread = 2 if simulator else \
        8 if unvectorized and extent >= 512 and _writes_rows(kernel) else \
        max(8, 64 // _narrowest_load(kernel))
    t = min(32 if simulator else 1024, _pow2_ceil(max(1, -(-extent // per_thread))))
    if not simulator and t == 1024 and extent <= 512 * 32 and \
            (unvectorized or _writes_rows(kernel)):
        # 512 threads hold the row with at most 32 values each, two blocks a multiprocessor
        # where 1024 threads fit one: measured on the H200 (bench/RESULTS.md) at 4096 x
        # 16384 layernorm +18%, z-score +16%, softmax and rmsnorm level; at 8191 x 8193
        # softmax +22%, logsumexp +67%, layernorm +13%, variance +29% (kernels that write
        # a value per row of vectors were not measured so, and keep 1024)
        t = 512
    if not simulator and 32 < t <= 512 and -(-extent // (t // 2)) <= 32 and \
            _many_combines_to_a_value(kernel):
        t //= 2     # still held in registers: at most 32 values a thread
    return t


def _unvectorized(kernel):
    """Is every loop group of ``kernel`` read and written one element an access?"""
    return bool(kernel.groups) and all(_vector_width(kernel, g, None) == 1
                                       for g in kernel.groups)


def _rows_per_block(kernel, forced, layout, t, split, simulator):
    nrows = kernel.layout_rows
    if forced.rows_per_block is not None:
        rb = forced.rows_per_block
    elif split > 1 and layout == "row":
        rb = 1          # a split row layout: one row a block, its threads over the segment
    else:
        target = 64 if simulator else 1024 if layout == "col" else \
            ROW_OUTPUT_BLOCK_THREADS if _writes_rows(kernel) else ROW_BLOCK_THREADS
        widest = 32 if layout == "row" or simulator else _col_rows_per_block(nrows)
        rb = max(1, min(target // t, _pow2_ceil(nrows), widest if layout == "col" else 1024))
        if simulator:
            rb = min(rb, 2)
    return rb if t * rb <= 1024 else max(1, 1024 // t)


def _group_plan(kernel, g, forced, layout, t, split, simulator):
    """Resident (in registers) when few enough chunks a thread, else streamed."""
    v = _vector_width(kernel, g, 1 if layout == "col" else forced.vector, split)
    need = -(-segment_length(g.extent, split, v) // (t * v))
    if forced.upcast is not None:
        resident = need <= forced.upcast
    else:       # keep at most 32 values per thread and array in registers
        resident = need * v <= (16 if simulator else 32)
    if resident:
        return GroupPlan(v, need, True)
    unroll = forced.unroll if forced.unroll is not None else \
        2 if simulator else _col_unroll(kernel, g) if layout == "col" else 4
    return GroupPlan(v, max(1, min(unroll, need)), False)


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
            all(n <= 1 for n in _streamed_passes(kernel, result).values()):
        # rows streamed in one pass, plenty of them: fewer threads a row, so that each
        # block's combine is a smaller share of its time (measured 17-35% faster at
        # 1024 x 65536, bench/RESULTS.md), each loading more chunks at once
        unroll = forced.unroll if forced.unroll is not None else STREAM_UNROLL
        return _choose_layout(kernel, replace(forced, threads_per_row=STREAM_THREADS,
                                              unroll=unroll), simulator, split)
    if row and t == 1024 and not simulator and split == 1 and \
            kernel.layout_rows >= COL_BLOCKS and \
            all(p.resident and p.chunks * p.vector > 16 for p in plans) and \
            all(getattr(forced, f) is None for f in ("threads_per_row", "rows_per_block",
                                                     "upcast", "unroll", "stage")):
        return _instead_of_1024_threads(kernel, forced, result)
    return result


def _instead_of_1024_threads(kernel, forced, resident):
    """Rows held in registers by 1024 threads, more than 16 values each (16384 to 32768
    float32 elements): one block a multiprocessor. Measured on the H200 at 4096 x 32000 and
    4096 x 32768 (bench/RESULTS.md): a kernel that writes a value per row and reads the row
    in one pass ran faster streamed by 256 threads, 8 chunks an iteration (logsumexp
    +9-16%, a one-hot cross-entropy +79-88%); one that writes whole rows, with 512 threads
    where they hold the row on chip (softmax +1-23%) or where the row then splits across
    blocks (layernorm at 4096 x 32768 +10%), else with the 1024 threads (layernorm at 4096 x
    32000: 512 threads streaming each row twice were 19% slower)."""
    if _writes_rows(kernel):
        fewer = _choose_layout(kernel, replace(forced, threads_per_row=512), False)
        if all(p.resident for p in fewer.groups) or \
                (forced.split is None and _auto_split(kernel, forced, fewer) is not None):
            return fewer
        return resident
    streamed = _choose_layout(kernel, replace(forced, threads_per_row=STREAM_THREADS,
                                              unroll=STREAM_UNROLL, upcast=0), False)
    if all(n <= 1 for n in _streamed_passes(kernel, streamed).values()):
        return streamed
    return resident


STAGE_BUDGET = 160 * 1024      # bytes of shared memory a block may stage rows in


def _group_loads(kernel, group):
    """Distinct non-bool loads of ``group`` whose address moves along the group's axis."""
    return [w for w in _loads(kernel, group) if w.dtype.kind != "b"]


def staged_loads(kernel, group):
    """Loads of ``group`` whose address depends on the row: the per-row data that staging
    keeps on chip (row-independent data such as weights is re-read from L2)."""
    return [w for w in _group_loads(kernel, group) if kernel.row in w.arg[1].vars()]


def _has_row_independent_loads(kernel, group):
    return any(kernel.row not in w.arg[1].vars() for w in _group_loads(kernel, group))


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
    passes = _streamed_passes(kernel, layout)
    if all(passes[g.id] <= 1 for g, p in zip(kernel.groups, layout.groups) if not p.resident):
        return None             # streaming reads every row once already
    if forced.stage is None and any(_has_row_independent_loads(kernel, g)
                                    for g, p in zip(kernel.groups, layout.groups)
                                    if not p.resident):
        # measured on the H200 (bench/RESULTS.md, 1024 x 65536): with weights re-read
        # beside a staged row (layernorm, rmsnorm) staging was 10% slower than streaming
        return None
    for g, p in zip(kernel.groups, layout.groups):
        need = -(-layout.segment(g) // (t * p.vector))
        if need * p.vector <= in_regs:
            plans.append(GroupPlan(p.vector, need, True))
            continue
        reg_chunks = max(1, in_regs // p.vector)
        staged = need - reg_chunks
        loads = staged_loads(kernel, g)
        total += sum(_stage_bytes(staged, t, p.vector, w.dtype) for w in loads)
        plans.append(GroupPlan(p.vector, need, True, staged))
    if total > budget:
        return None
    return Layout(t, 1, "row", tuple(plans), split=layout.split)


def _streamed_passes(kernel, layout):
    """Passes over each loop group when its rows are streamed (one-pass fusions counted)."""
    from .online import find_fusions
    fused = {f.second.id for f in find_fusions(kernel, layout)}
    out = {}
    for g in kernel.groups:
        depths = {r.depth for r in kernel.reduces if r.group is g and r.id not in fused}
        out[g.id] = len(depths) + any(s.group is g for s in kernel.stores)
    return out


SHARED_PER_SM = 228 * 1024     # H100 / H200: shared memory of one multiprocessor
SHARED_RESERVED = 1024          # ... of which each resident block takes this much


def occupancy_shared(blocks_per_sm):
    """Dynamic shared memory per block that leaves room for ``blocks_per_sm`` blocks on
    one multiprocessor and not one more (0 for no cap)."""
    if not blocks_per_sm:
        return 0
    need = SHARED_PER_SM // (blocks_per_sm + 1) - SHARED_RESERVED + 16
    return -(-need // 16) * 16


def _stage_bytes(staged, t, v, dtype):
    """Bytes of one staged load, rounded up to 16 (regions start 16-byte aligned)."""
    return -(-staged * t * v * np.dtype(dtype).itemsize // 16) * 16


def with_defaults(options, **overrides):
    return replace(options or KernelOptions(), **overrides)
