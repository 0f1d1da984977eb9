"""Comparisons of 64-bit integers whose ranges are known, made in 32 bits.

A position compared with a threshold (``np.arange(n) == labels[:, None]``, a causal mask
``j <= i``) is an int64 comparison in NumPy. On the GPU a 64-bit compare is two
instructions and the index arithmetic feeding it is 64-bit too; in a kernel that reads a
row once and does a few operations an element, those instructions are what it waits on
(a one-hot cross-entropy ran at two thirds of the speed of its two halves alone). When
one side's range is known from the index algebra, the comparison is made in int32:

- both ranges known and inside int32: both sides are cast;
- one range ``[lo, hi]`` known, the other side a value of the row (the same for the whole
  loop, so this costs once a row): the other side is first clamped to ``[lo - 1, hi + 1]``,
  which keeps every comparison's outcome for a value in ``[lo, hi]``.
"""
import numpy as np

from .. import dtypes
from ..ops import Op

I32 = (-(1 << 31), (1 << 31) - 1)
WIDE = {np.dtype(np.int64), np.dtype(np.uint64)}
NARROWED = {Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE}
INT32 = np.dtype(np.int32)


def _inside(bounds, lo, hi):
    return bounds is not None and lo <= bounds[0] and bounds[1] <= hi


def _combine(op, a, b):
    if op is Op.ADD:
        return a[0] + b[0], a[1] + b[1]
    if op is Op.SUB:
        return a[0] - b[1], a[1] - b[0]
    if op is Op.MUL:
        ends = [x * y for x in a for y in b]
        return min(ends), max(ends)
    if op is Op.MAX:
        return max(a[0], b[0]), max(a[1], b[1])
    if op is Op.MIN:
        return min(a[0], b[0]), min(a[1], b[1])
    return None


def int_bounds(v, memo):
    """``(lo, hi)`` that every value of integer Val ``v`` lies in, or None if unknown
    (loads, reduce results, anything but index expressions, constants and affine
    arithmetic on them). Results that would leave ``v``'s dtype (wrap) are unknown."""
    if v.id in memo:
        return memo[v.id]
    out = None
    if dtypes.is_int(v.dtype):
        if v.op is Op.INDEX:
            out = v.arg.bounds()
        elif v.op is Op.CONST:
            out = (int(v.arg), int(v.arg))
        elif v.op is Op.CAST and dtypes.is_int(v.srcs[0].dtype):
            out = int_bounds(v.srcs[0], memo)
        elif v.op is Op.NEG:
            src = int_bounds(v.srcs[0], memo)
            out = src and (-src[1], -src[0])
        elif len(v.srcs) == 2:
            a, b = (int_bounds(s, memo) for s in v.srcs)
            out = a and b and _combine(v.op, a, b)
        info = np.iinfo(v.dtype)
        if not _inside(out, int(info.min), int(info.max)):
            out = None
    memo[v.id] = out
    return out


def narrow_compare(vb, srcs, row_level, memo):
    """The operands of a comparison, cast to int32 where the comparison keeps its outcome
    (see the module's docstring); ``srcs`` unchanged otherwise. ``row_level(v)``: is ``v``
    the same for every element of a row's loop?"""
    a, b = srcs
    if a.dtype != b.dtype or a.dtype not in WIDE:
        return srcs
    ba, bb = int_bounds(a, memo), int_bounds(b, memo)
    if _inside(ba, *I32) and _inside(bb, *I32):
        return _cast(vb, a), _cast(vb, b)
    if _inside(ba, I32[0] + 1, I32[1] - 1) and bb is None and row_level(b):
        return _cast(vb, a), _cast(vb, _clamp(vb, b, ba))
    if _inside(bb, I32[0] + 1, I32[1] - 1) and ba is None and row_level(a):
        return _cast(vb, _clamp(vb, a, bb)), _cast(vb, b)
    return srcs


def _cast(vb, v):
    return vb.make(Op.CAST, INT32, (v,), INT32)


def _clamp(vb, v, bounds):
    lo, hi = bounds[0] - 1, bounds[1] + 1
    if v.dtype.kind == "i" or lo >= 0:
        v = vb.make(Op.MAX, v.dtype, (v, vb.make(Op.CONST, v.dtype, (), lo)))
    return vb.make(Op.MIN, v.dtype, (v, vb.make(Op.CONST, v.dtype, (), hi)))
