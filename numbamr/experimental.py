"""Study knobs: thresholds of the scheduler and choices of persistent kernels that exist to be
measured (``bench/variants.py``), not set per function.

All of them are fields of one frozen ``Knobs``; the one in force is ``current_knobs()``, and
a block of code runs under another with ``with knobs(Knobs(split_min_blocks=128)):``. The
Knobs in force is a context variable (each thread and each asyncio task has its own; a
thread started inside the block, such as a dask worker's, starts with the default) and is
read when a call compiles: it is part of the signature's key, so a call under other Knobs
never reuses kernels compiled under these (the disk cache is keyed by a kernel's code,
which a knob of the code changes). The default Knobs holds numbamr's own
choices: outside every ``knobs`` block the kernels are the ones the heuristics choose.
"""
import contextlib
import contextvars
from dataclasses import dataclass, fields

import numpy as np

from .errors import ArgumentError


BOOLEAN_KNOBS = {"persistent_hold_rows", "reciprocal_proofs", "split_mean_shared",
                 "first_thread_tail"}


@dataclass(frozen=True)
class Knobs:
    """The study knobs (the defaults are numbamr's own choices; the runs behind the numbers
    below, all on one H200, are in bench/RESULTS.md).

    Splitting a long reduction over few rows into two kernels (``numbamr.schedule``): a
    reduction is split when it would fill fewer than ``split_min_blocks`` blocks (264: two
    a multiprocessor of the H200) and reduces at least ``split_min_extent`` elements a row
    (16384), or ``split_min_extent_col`` down a column (8192: 8192 x 8192 column variance
    11% faster split in four on the H200), into segments of at least
    ``split_min_segment`` elements (2048), until about ``split_target_blocks`` blocks
    (4096: whole-array sums 1024 -> 4096 blocks +2-3%). Down columns whose rows are not a
    whole number of ``col_line`` columns (32: a warp's 128-byte line of float32), segment k
    takes steps k, k + S, ... so that a warp's columns lie in one line (100000 x 999
    +29%); ``col_line=1`` keeps every segment a run of steps. ``split_min_blocks`` also
    decides where a row split across a wide cluster pays for a kernel that writes a value
    per row (``lowering.heuristics``).

    Persistent clusters (``persistent=N``): ``persistent_max_clusters`` caps the grid at that
    many clusters (None: as many as the GPU holds at once; ``runtime.launch``);
    ``persistent_hold_rows`` keeps a row's input values in registers from the first pass on,
    so that its stage is refilled after that pass's barrier (slower,
    docs/heuristics.md#persistent-registers); ``persistent_dependent`` says how such a
    kernel is launched: 3 as a programmatic dependent of the stream's previous kernel that
    lets the next one start only as its blocks end, 0 plainly, 1 and 2 as a dependent that
    lets the next kernel start at once, or once each block has begun its cluster's last row
    (layernorm 1024 x 65536 on the H200: 3880-3898 GB/s, 3835-3851, 3665-3701, 3864-3875);
    ``bulk_piece`` is the bytes of one bulk copy of a row's segment into its stage.

    Forms of the lowering kept switchable to time them against what they replaced, in one
    process (False: the old form): ``reciprocal_proofs`` drops the power-of-two scale of a
    reciprocal whose divisor ``lowering.ranges`` proves in range; ``split_mean_shared``
    takes the mean beside a split variance of two-byte floats from the variance's own
    shifted sum (``split_rules.shifted_sum``); ``first_thread_tail`` lets the threads
    other than each row's first leave once a store-only kernel's last partials are
    published (docs/heuristics.md#first-thread-tail).
    """
    split_min_blocks: int = 264
    split_min_extent: int = 1 << 14
    split_min_extent_col: int = 1 << 13
    split_min_segment: int = 2048
    split_target_blocks: int = 4096
    col_line: int = 32
    persistent_max_clusters: int = None
    persistent_hold_rows: bool = False
    persistent_dependent: int = 3
    bulk_piece: int = 8192
    reciprocal_proofs: bool = True
    split_mean_shared: bool = True
    first_thread_tail: bool = True

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in BOOLEAN_KNOBS:
                if not isinstance(value, (bool, np.bool_)):
                    raise ArgumentError(f"Knobs.{f.name} must be True or False, got {value!r}")
                object.__setattr__(self, f.name, bool(value))
                continue
            if value is None and f.name == "persistent_max_clusters":
                continue
            if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
                raise ArgumentError(f"Knobs.{f.name} must be an integer, got {value!r}")
            object.__setattr__(self, f.name, int(value))   # np.int64(5) keys as 5 does
        self._check_ranges()

    def _check_ranges(self):
        least = {"split_min_blocks": 0, "split_min_extent": 1, "split_min_extent_col": 1,
                 "split_min_segment": 1, "split_target_blocks": 1, "col_line": 1,
                 "persistent_max_clusters": 1}
        for name, lo in least.items():
            value = getattr(self, name)
            if value is not None and value < lo:
                raise ArgumentError(f"Knobs.{name} must be at least {lo}, got {value}")
        if self.persistent_dependent not in (0, 1, 2, 3):
            raise ArgumentError(f"Knobs.persistent_dependent must be 0, 1, 2 or 3, got "
                                f"{self.persistent_dependent}")
        if self.bulk_piece < 16 or self.bulk_piece % 16:
            raise ArgumentError(f"Knobs.bulk_piece must be a positive multiple of 16 (the "
                                f"bytes of one bulk copy), got {self.bulk_piece}")


DEFAULT = Knobs()
_CURRENT = contextvars.ContextVar("numbamr_knobs", default=DEFAULT)


def current_knobs():
    """The Knobs in force in this context (``DEFAULT`` outside every ``knobs`` block)."""
    return _CURRENT.get()


@contextlib.contextmanager
def knobs(value):
    """Run the block under the Knobs ``value`` (the previous ones again after it)."""
    if not isinstance(value, Knobs):
        raise ArgumentError(f"numbamr.experimental.knobs takes a Knobs, got "
                            f"{type(value).__name__}")
    token = _CURRENT.set(DEFAULT if value == DEFAULT else value)
    try:
        yield value
    finally:
        _CURRENT.reset(token)


__all__ = ["Knobs", "DEFAULT", "BOOLEAN_KNOBS", "current_knobs", "knobs"]
