"""What the lowering can prove about the range of a value, from the ops that make it.

A division by a value broadcast along the row is lowered as a multiplication by its
reciprocal, with a power-of-two scale ``q`` for divisors whose reciprocal would overflow or
be subnormal (linearize ``Linearizer.reciprocal``). Most divisors in practice cannot be
that small or large: ``sqrt(var + eps)`` is at least ``sqrt(eps)`` and at most
``sqrt(max float)``. For those ``q`` is always 1 and its per-element multiply is dropped.

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
    return False
