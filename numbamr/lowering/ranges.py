"""What the lowering can prove about the range of a value, from the ops that make it.

A division by a value broadcast along the row is lowered as a multiplication by its
reciprocal, with a power-of-two scale ``q`` for divisors whose reciprocal would overflow or
be subnormal (linearize ``Linearizer.reciprocal``). Most divisors in practice cannot be
that small or large: ``sqrt(var + eps)`` is at least ``sqrt(eps)`` and at most
``sqrt(max float)``; a softmax's ``sum(exp(x - max(x)))`` is at least 1 (the term at the
maximum is exp(0), exactly 1) and at most the row's length (no term is above 1). For those
``q`` is always 1 and its per-element multiply is dropped.

The facts are kept as small tables keyed by op; every rule must hold for every input,
NaN and infinities included ("at least t" reads "at least t, or NaN").
"""
import math

import numpy as np

from ..ops import Op, ReduceKind


def _number(v):
    """The value of a numeric constant ``v``, else None."""
    x = v.arg
    real = v.op is Op.CONST and isinstance(x, (int, float, np.number)) and \
        not isinstance(x, bool)
    return x if real else None


def _const_at_least(v, bound):
    x = _number(v)
    return x is not None and x >= bound


def nonneg(v):
    """Every value of ``v`` is >= 0 (or NaN)."""
    rule = NONNEG.get(v.op)
    return rule is not None and rule(v)


def at_least(v, bound):
    """Every value of ``v`` is >= ``bound`` > 0 (or NaN)."""
    if v.op is Op.CONST:
        return _const_at_least(v, bound)
    if v.op is Op.ADD:          # rounding is monotonic: a >= 0 and b >= t give a + b >= t
        a, b = v.srcs
        return (nonneg(a) and at_least(b, bound)) or (nonneg(b) and at_least(a, bound))
    if v.op is Op.MAX:
        return any(at_least(s, bound) for s in v.srcs)
    if v.op is Op.SQRT:         # sqrt(y) >= sqrt(t) >= t for t <= 1
        return bound <= 1 and at_least(v.srcs[0], bound)
    return False


def _divided_nonneg(v):
    # a nonnegative divisor may be -0.0 (as sqrt(-0.0) is): only positive constants divide
    a, b = v.srcs
    divisor = _number(b)
    return nonneg(a) and divisor is not None and divisor > 0


def _reduced_nonneg(v):
    red = v.arg
    return red.kind in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN) and nonneg(red.body)


NONNEG = {
    Op.CONST: lambda v: _const_at_least(v, 0),
    Op.ABS: lambda v: True, Op.EXP: lambda v: True, Op.EXP2: lambda v: True,
    Op.SQRT: lambda v: True, Op.SIGMOID: lambda v: True,
    Op.MUL: lambda v: v.srcs[0] is v.srcs[1] or all(map(nonneg, v.srcs)),
    Op.ADD: lambda v: all(map(nonneg, v.srcs)),
    Op.DIV: _divided_nonneg,
    Op.MIN: lambda v: all(map(nonneg, v.srcs)),
    Op.MAX: lambda v: any(map(nonneg, v.srcs)),
    Op.CAST: lambda v: np.dtype(v.dtype).kind == "f" and nonneg(v.srcs[0]),
    Op.REDUCED: _reduced_nonneg,
}


def reciprocal_in_range(d, tiny, big):
    """No finite value of ``d`` lies in (0, tiny) or above ``big`` in magnitude, so that
    ``1 / d`` neither overflows nor is subnormal (zero, inf and NaN divide alike either
    way)."""
    if d.op is Op.CONST:
        x = _number(d)
        return x is not None and (x == 0 or not math.isfinite(x) or tiny <= abs(x) <= big)
    if d.op is Op.SQRT:         # a finite square root is below sqrt(max) < big
        return at_least(d.srcs[0], tiny)
    terms = _exps_below_their_max(d)
    return terms is not None and tiny <= 1 and 2 * terms <= big


def _exps_below_their_max(d):
    """How many terms ``d`` sums where it is ``sum(exp(x - max(x)))`` over one loop (a
    softmax's denominator), else None. The term at the maximum is exp(0), exactly 1, and no
    term is above 1, so ``d`` is between 1 and the term count (the factor of 2 above leaves
    room for the sum's rounding), or NaN (a NaN or +inf in the row), or 0 (a row of -inf
    summed in one pass skips every term). Float casts between the steps (a float16
    program rounds each one) keep that: they are monotonic and keep 0 and 1; the maximum
    may pass only through casts that hold its values exactly, so that it still equals
    the term it came from. The one-pass forms keep the bound too: the running sum that
    has met the maximum is scaled by exp(0) from then on."""
    d = _uncast(d)
    if d.op is not Op.REDUCED or d.arg.kind is not ReduceKind.SUM:
        return None
    e = _uncast(d.arg.body)
    if e.op is not Op.EXP:
        return None
    sub = _uncast(e.srcs[0])
    if sub.op is not Op.SUB:
        return None
    x, m = sub.srcs
    m = _exact(m)
    if m.op is not Op.REDUCED or m.arg.kind is not ReduceKind.MAX or \
            m.arg.group is not d.arg.group or _exact(m.arg.body) is not _exact(x):
        return None
    return d.arg.group.extent


# the float dtypes that hold every value of a float dtype
_HOLDERS = {"float16": ("float16", "float32", "float64"),
            "bfloat16": ("bfloat16", "float32", "float64"),
            "float32": ("float32", "float64"), "float64": ("float64",)}


def _float_cast(v):
    return v.op is Op.CAST and np.dtype(v.dtype).name in _HOLDERS and \
        np.dtype(v.srcs[0].dtype).name in _HOLDERS


def _uncast(v):
    """``v`` without the float-to-float casts around it."""
    while _float_cast(v):
        v = v.srcs[0]
    return v


def _exact_cast(v):
    """``v`` is a float cast that changes none of its source's values."""
    return _float_cast(v) and np.dtype(v.dtype).name in _HOLDERS[_held_in(v.srcs[0])]


def _held_in(v):
    """The narrowest float dtype known to hold every value of ``v`` (its own, or that of
    what a widening cast or a maximum or minimum took its values from)."""
    if _exact_cast(v):
        return _held_in(v.srcs[0])
    if v.op is Op.REDUCED and v.arg.kind in (ReduceKind.MAX, ReduceKind.MIN) and \
            np.dtype(v.arg.body.dtype).name in _HOLDERS:
        return _held_in(v.arg.body)
    return np.dtype(v.dtype).name


def _exact(v):
    """``v`` without the casts around it that change none of its values."""
    while _exact_cast(v):
        v = v.srcs[0]
    return v
