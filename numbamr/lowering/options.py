"""Kernel options (the thread layout of a kernel), checked when made, and the layouts they
resolve to.

Every option can be forced through ``numbamr.jit(...)``; what is not forced is chosen by the
heuristics (``heuristics.choose``), from the kernel and its shape.
"""
from dataclasses import dataclass, fields, replace
import importlib

import numpy as np

from ..errors import ArgumentError
from .profile import H200


# the blocks of a split row wait for each other, so all of them must fit on the GPU at once
MAX_SPLIT = 32
MAX_ROWS_AHEAD = 4
COLUMNS = (1, 2, 4)        # adjacent columns a thread of a column layout may take


@dataclass(frozen=True)
class KernelOptions:
    """Layout choices; ``None`` means "let the heuristics choose".

    What a user may want to force (beside ``jit``'s own ``autotune`` and ``dynamic``):

    threads_per_row: threads that cooperate on one row (power of two, 1..1024)
    rows_per_block:  rows handled by one thread block
    layout:          'row' (a row's threads are adjacent: coalesced along rows) or 'col'
                     (adjacent threads take adjacent rows: coalesced across rows)
    split:           blocks that share one row (1..32): each holds a segment of
                     the row and the blocks of a row exchange their partial reductions
                     through memory, so that rows too long for one block stay on chip;
                     forced, it also keeps long reductions over few rows (a whole-array sum,
                     the columns of a tall array) in one kernel, split this way, instead
                     of the two kernels they would take

    Advanced: options that exist for studies and tests (the fuzzer forces each of them;
    the autotuner's candidates change ``blocks_per_sm``, ``upcast``, ``unroll`` and
    ``evict_last`` beside the four above). They are checked and kept working like those,
    but the heuristics set each from measurements (docs/heuristics.md), per shape, where a
    forced value holds for every shape the function is called with. Thresholds that are
    not a kernel's layout are study knobs (``numbamr.experimental.Knobs``).

    vector:          most elements per vector (16-byte) load/store; 1 disables vector access
    upcast:          most chunks per thread kept in registers for the whole kernel ("resident"
                     rows: each input read once); 0 never keeps rows resident
    unroll:          chunks per iteration of a loop over a row that is not resident
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
    columns:         1, 2 or 4 adjacent columns each thread of a column layout takes, every
                     value computed for each and the adjacent elements of a load read as
                     one vector (a two-byte dtype: 2 columns make the 4-byte loads of
                     float32). Applies to column layouts whose row count it divides and
                     whose loads along the reduced axis read the columns as adjacent
                     elements, aligned; other kernels are unaffected. By default 1
                     (docs/heuristics.md#column-pairs)
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
    columns: int = None

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
        if self.stage is not None and not 0 <= self.stage <= H200.shared_per_block:
            raise ArgumentError(f"option stage must be 0..{H200.shared_per_block} "
                                f"bytes, got {self.stage}")
        for name in ("zigzag", "stagger", "cluster", "online", "reciprocal", "evict_last"):
            if getattr(self, name) not in (None, 0, 1):
                raise ArgumentError(f"option {name} must be 0 or 1, got {getattr(self, name)}")
        for name in ("blocks_per_sm", "min_blocks_per_sm"):
            if getattr(self, name) is not None and not 1 <= getattr(self, name) <= 32:
                raise ArgumentError(f"option {name} must be 1..32, got {getattr(self, name)}")
        if self.persistent is not None and not 0 <= self.persistent <= MAX_ROWS_AHEAD:
            raise ArgumentError(f"option persistent must be 0..{MAX_ROWS_AHEAD}, "
                                f"got {self.persistent}")
        if self.columns is not None and self.columns not in COLUMNS:
            raise ArgumentError(f"option columns must be 1, 2 or 4, got {self.columns}")
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
    # rows whose length V does not divide: the vectors cover an aligned body (its start
    # shifted per row to the 16-byte boundary), scalar chunks the head and tail beside it
    edges: bool = False

    def body(self, extent):
        """The most positions of a row of ``extent`` that this plan's vectors cover."""
        return extent - extent % self.vector if self.edges else extent

    def least_body(self, extent):
        """The fewest: what every row's body holds, whatever its head."""
        return extent - edge_positions(extent, self.vector) if self.edges else extent


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
        plan = self.groups[group.id]
        return segment_length(plan.body(group.extent), self.split, plan.vector)

    @property
    def block_threads(self):
        return self.threads_per_row * self.rows_per_block


def segment_length(extent, split, vector=1):
    """Elements a block covers of a row of ``extent`` split across ``split`` blocks: an
    equal share rounded up to whole vectors, so that every segment starts aligned; the last
    segments take what is left (shorter, where the share does not divide the row)."""
    share = -(-extent // split)
    return -(-share // vector) * vector


def edge_positions(n, width):
    """The most positions of a row of ``n`` outside its aligned body: the head (at most
    width - 1) and the tail."""
    least_body = max(0, (n - (width - 1)) // width * width)
    return n - least_body


def segments_filled(extent, split, vector=1):
    """How many of the ``split`` segments of a row of ``extent`` hold elements."""
    seg = segment_length(extent, split, vector)
    return -(-extent // seg) if seg else 0


def with_defaults(options, **overrides):
    return replace(options or KernelOptions(), **overrides)


# names that moved to the modules of the heuristics, importable from here as before
_MOVED = {"heuristics": ("choose", "occupancy_shared", "MAX_CLUSTER", "THREADS_PER_SM",
                         "SHARED_PER_SM", "SHARED_RESERVED", "COL_BLOCKS", "COL_UNROLL",
                         "COL_UNROLL_ALIGNED", "COL_THREADS", "SPLIT_SEGMENT", "SPLIT_THREADS",
                         "STREAM_THREADS", "STREAM_UNROLL", "ROW_BLOCK_THREADS",
                         "ROW_OUTPUT_BLOCK_THREADS", "WIDE_CLUSTER", "STAGE_BUDGET"),
          "persistent": ("persistent_refusal", "PERSISTENT_ROWS_AHEAD",
                         "PERSISTENT_STAGE_BYTES"),
          "accesses": ("contiguous_in", "row_loads", "column_loads", "staged_loads")}
_WHERE = {name: module for module, names in _MOVED.items() for name in names}


def __getattr__(name):
    """``options.choose`` and the other names in _MOVED, from the module that holds them
    (read when asked for: those modules import this one)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__package__}.{_WHERE[name]}"), name)
