"""Picks: a sum of ``where(position == k, y, 0)`` along a row, one range test a chunk.

Cross-entropy's ``np.where(np.arange(n) == labels[..., None], y, 0).sum(-1)`` keeps one
element of each row. Element by element it is a compare, a select and an add at every
position of the row, more work than the rest of the loss. Instead the chunk holding position
``k`` is found with one subtraction and one range test, and only the thread holding it adds
the element. The sum is the same: the other positions add exact zeros, which change nothing
but the sign of a zero picked (0.0 + -0.0 is 0.0), and the pick's accumulator starts at
0.0 as the sum's does.
"""
import numpy as np

from .. import symbolic as sym
from ...ops import Op, ReduceKind
from .literals import const_literal

# positions below this keep the offset of a key cast to 32 bits from wrapping into a chunk
INT32_ROWS = 2 ** 30
BOOL = np.dtype(bool)


class PicksMixin:
    """Which reduces are picks, and the update of one for a chunk."""

    def pick_parts(self, r):
        """``(position, key, picked)`` of reduce ``r`` where it sums ``where(position == key,
        picked, 0)``: ``position`` the row's own position (an arange along the reduced
        axis), ``key`` one value for the whole row. Else None. Row layouts only, whose
        chunks hold consecutive positions."""
        body = r.body
        if r.kind is not ReduceKind.SUM or self.L.layout != "row" or body.op is not Op.WHERE:
            return None
        cond, picked, zero = body.srcs
        if zero.op is not Op.CONST or zero.arg != 0 or cond.op is not Op.EQ:
            return None
        for position, key in (cond.srcs, cond.srcs[::-1]):
            if self._is_position(position, r.group) and self.group_of(key) is None:
                return position, key, picked
        return None

    @staticmethod
    def _is_position(val, g):
        """Whether ``val`` is the row's position plus a value the same for the whole row
        (a segment's start, where the scheduler splits rows), perhaps cast to an integer of
        32 bits or more that holds every position."""
        while val.op is Op.CAST and np.dtype(val.dtype).kind in "iu" and \
                np.dtype(val.dtype).itemsize >= 4:
            val = val.srcs[0]
        if val.op is not Op.INDEX:
            return False
        at = val.arg
        return at.coef(g.var) == 1 and g.var not in (at - sym.lift(g.var)).vars() and \
            at.bounds()[1] <= INT32_ROWS

    def pick_test(self, r, ch):
        """Render, before the chunk's updates, the key's offset from the chunk's first
        position and whether it falls inside the chunk; the picked values too."""
        position, key, picked = self.picks[r.id]
        dt = np.dtype(position.dtype)
        values = tuple(self.elem_value(picked, ch, v) for v in range(ch.width))
        offset, low, high, inside = (self.names.new(n) for n in
                                     ("pick_off", "pick_lo", "pick_hi", "pick_in"))
        self.add("ALU", (offset,), (self.row_value(key), self.elem_value(position, ch, 0)),
                 arg=Op.SUB, dtype=dt)
        self.add("ALU", (low,), (offset, const_literal(0, dt)), arg=Op.GE, dtype=BOOL)
        self.add("ALU", (high,), (offset, const_literal(ch.width, dt)), arg=Op.LT, dtype=BOOL)
        self.add("ALU", (inside,), (low, high), arg=Op.AND, dtype=BOOL)
        return (inside, offset) + values

    def pick_update(self, r, acc, srcs):
        """Inside the chunk only: the element at the offset added to the accumulator."""
        inside, offset, *values = srcs
        dt = np.dtype(self.picks[r.id][0].dtype)
        self.add("IF", srcs=(inside,), arg=inside)
        chosen = values[-1]
        for v in range(len(values) - 2, -1, -1):
            same, pick = self.names.new("pick_eq"), self.names.new("pick")
            self.add("ALU", (same,), (offset, const_literal(v, dt)), arg=Op.EQ, dtype=BOOL)
            self.add("ALU", (pick,), (same, values[v], chosen), arg=Op.WHERE,
                     dtype=r.body.dtype)
            chosen = pick
        self.add("ACC", acc, acc + (chosen,), arg=ReduceKind.SUM, dtype=r.body.dtype)
        self.add("ENDIF", arg=inside)
