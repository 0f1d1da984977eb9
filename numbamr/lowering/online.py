"""One-pass forms of two dependent-reduce patterns, for rows that do not stay in registers
(and for rows split across blocks that count their arrivals in memory: they then exchange
partials once, not twice; a cluster's blocks exchange twice, exactly, see _worth_fusing).

When a row is resident, a reduce that depends on another (the variance after the mean, the
sum of exponentials after the max) is a second pass over registers: free and exact. When the
row is streamed, that second pass re-reads memory. Two patterns are then fused into one pass
with a multi-value accumulator:

- variance: ``A = sum(x)``, ``B = sum((x - A / n) ** 2)`` becomes Welford/Chan
  ``(count, mean, M2)`` per chunk (``A = mean * n``, ``B = M2``), but for integers cast to
  float, whose two-pass sum is exact;
- softmax denominator: ``A = max(x)``, ``B = sum(exp(x - A))`` becomes the online
  ``(max, scaled sum)`` (``A = max``, ``B = sum``).
"""
from dataclasses import dataclass

from ..ops import Op, ReduceKind


@dataclass(frozen=True)
class Fusion:
    kind: str          # 'welford' or 'lse'
    first: object      # ReduceInstance A (computed in the pass)
    second: object     # ReduceInstance B (its value comes out of A's accumulators)


def _is_red(val, inst):
    return val.op is Op.REDUCED and val.arg is inst


def _match_var(a, b, n):
    """b.body == d * d with d == a.body - a / n ?"""
    body = b.body
    if body.op is not Op.MUL or body.srcs[0] is not body.srcs[1]:
        return False
    d = body.srcs[0]
    if d.op is not Op.SUB or d.srcs[0] is not a.body:
        return False
    m = d.srcs[1]
    if m.op is Op.DIV and _is_red(m.srcs[0], a) and m.srcs[1].op is Op.CONST:
        return m.srcs[1].arg == n
    if m.op is Op.MUL and _is_red(m.srcs[0], a) and m.srcs[1].op is Op.CONST:
        return abs(m.srcs[1].arg * n - 1) < 1e-12
    return False


def _match_lse(a, b):
    """b.body == exp(a.body - a) ?"""
    body = b.body
    if body.op is not Op.EXP:
        return False
    d = body.srcs[0]
    return d.op is Op.SUB and d.srcs[0] is a.body and _is_red(d.srcs[1], a)


def _cast_from_integers(val):
    """Integers (or bools) cast to float: their sum is exact in two passes, while a running
    mean rounds (a mean of 0 came out as -2.8e-17), so they are not fused."""
    return val.op is Op.CAST and val.srcs[0].dtype.kind in "biu"


def _worth_fusing(layout, group_id):
    """A resident row's second pass is over registers: free and exact, never fused. A split
    row fuses to exchange once, not twice, when its blocks count arrivals in memory; a
    cluster's exchanges are cheap enough that two exact ones win (unless forced)."""
    if not layout.groups[group_id].resident:
        return True
    if layout.split == 1:
        return False
    return layout.online if layout.online is not None else not layout.cluster


def find_fusions(kernel, layout):
    """Pairs (A, B) in streamed loop groups (or split rows) that one pass can compute
    together."""
    out, used = [], set()
    if layout.online is False:
        return out
    by_id = {r.id: r for r in kernel.reduces}
    for b in kernel.reduces:
        if b.deps and len(b.deps) == 1 and b.kind is ReduceKind.SUM:
            a = by_id[b.deps[0]]
            if a.group is not b.group or a.id in used or b.id in used:
                continue
            if a.body.dtype.kind != "f" or _cast_from_integers(a.body) or \
                    not _worth_fusing(layout, a.group.id):
                continue
            if a.kind is ReduceKind.SUM and _match_var(a, b, a.group.extent):
                out.append(Fusion("welford", a, b))
            elif a.kind is ReduceKind.MAX and _match_lse(a, b):
                out.append(Fusion("lse", a, b))
            else:
                continue
            used |= {a.id, b.id}
    return out
