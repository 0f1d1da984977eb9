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
from ..rewrite import P, Same, OneOf, Rewrite, rewrite


@dataclass(frozen=True)
class Fusion:
    kind: str          # 'welford' or 'lse'
    first: object      # ReduceInstance A (computed in the pass)
    second: object     # ReduceInstance B (its value comes out of A's accumulators)


def _reduced(kind):
    """A reduce result of ``kind``, bound as ``a`` (its ReduceInstance read in the body)."""
    return P(Op.REDUCED, name="a", where=lambda v, b: v.arg.kind is kind)


def _body_of_a(v, b):
    return v is b["a"].arg.body


# b.body == d * d with d == a.body - a / n (or a * (1 / n)), n the reduced extent
_MEAN_OF_A = OneOf(
    P(Op.DIV, _reduced(ReduceKind.SUM), P(Op.CONST, name="n"),
      where=lambda v, b: b["n"].arg == b["a"].arg.group.extent),
    P(Op.MUL, _reduced(ReduceKind.SUM), P(Op.CONST, name="inv"),
      where=lambda v, b: abs(b["inv"].arg * b["a"].arg.group.extent - 1) < 1e-12))
WELFORD = P(Op.MUL, P(Op.SUB, P(name="x"), _MEAN_OF_A, name="d"), Same("d"),
            where=lambda v, b: _body_of_a(b["x"], b))
# b.body == exp(a.body - a)
LSE = P(Op.EXP, P(Op.SUB, P(name="x"), _reduced(ReduceKind.MAX)),
        where=lambda v, b: _body_of_a(b["x"], b))

RULES = [Rewrite("welford", WELFORD, lambda b, second: Fusion("welford", b["a"].arg, second)),
         Rewrite("lse", LSE, lambda b, second: Fusion("lse", b["a"].arg, second))]


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
            fusion = rewrite(RULES, b.body, b)
            if fusion is None:
                continue
            out.append(fusion)
            used |= {a.id, b.id}
    return out
