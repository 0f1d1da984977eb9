"""Reductions across chunks: what each block computes (its partial), how partials merge, and
the reduction's value from the merged partial.

A reduction is one of four families:
    plain  sum, prod, max, min, any, all: the block's reduction; merged by the same one
           (float sums and products carried in float64)
    arg    argmax, argmin: the block's (max or min, global index); merged keeping the
           smallest index among the parts that hold the extreme (NaN first, as NumPy)
    chan   a sum of squares about a center that derives from the sum of the same values
           (variance, std, layernorm, z-score): the block's (count, mean, M2), merged with
           Chan's formula; the value is M2 + n (mean - center)^2, exact for any center
    lse    a sum of exp(x - center) with the center derived from the max of x (softmax,
           logsumexp): the block's (max, finite center c_k, sum of exp(x - c_k)); merged as
           sum_k S_k exp(c_k - C) about the center C of the merged max
so a variance or a softmax denominator takes one pass over the data, as the statistics
before a second, elementwise pass that uses them.
"""
from dataclasses import dataclass

import numpy as np

from ..ops import Op, ReduceKind, ALU
from ..nodes import cast_node
from .chunks import flattened
from .program import ARG_KINDS, wrap, replay

F64 = np.dtype(np.float64)
SUM, PROD, MAX, MIN = ReduceKind.SUM, ReduceKind.PROD, ReduceKind.MAX, ReduceKind.MIN


@dataclass(eq=False)
class Family:
    kind: str               # plain | arg | chan | lse
    node: object            # the REDUCE node
    src: object             # the node whose blocks the partials read
    axes: tuple             # the reduced axes of ``src``
    flat: bool = False      # a reduction of ``src`` flattened (x.argmax())
    chain: tuple = ()       # flat: the unary ops between the flattening and the reduction
    sibling: object = None  # chan/lse: the reduction the center derives from
    center: object = None   # chan/lse: the center node (kept shape)

    def kept(self, block):
        """The region of the reduction's value that a block of ``src`` contributes to."""
        if self.flat:
            return ((0, 1),)
        return tuple((0, 1) if i in self.axes else r for i, r in enumerate(block))


def family_of(node, how, stats):
    """The family of REDUCE ``node`` (``how``: "split" or "flat"; ``stats``: every split
    reduction's how, by node id)."""
    kind, axes = node.arg
    if how == "flat":
        src, chain = flattened(node.srcs[0])
        return Family("arg" if kind in ARG_KINDS else "plain", node, src,
                      tuple(range(src.ndim)), flat=True, chain=chain)
    if kind in ARG_KINDS:
        return Family("arg", node, node.srcs[0], axes)
    return _online(node, stats) or Family("plain", node, node.srcs[0], axes)


def _online(node, stats):
    kind, axes = node.arg
    h = node.srcs[0]
    if kind is not SUM or h.dtype.kind != "f":
        return None
    if h.op is Op.MUL and h.srcs[0] is h.srcs[1]:
        d, want, family = h.srcs[0], SUM, "chan"
    elif h.op is Op.EXP:
        d, want, family = h.srcs[0], MAX, "lse"
    else:
        return None
    if d.op is not Op.SUB or d.srcs[1].op is not Op.EXPAND:
        return None
    a, center = d.srcs[0], d.srcs[1].srcs[0]
    if center.shape != node.shape:
        return None
    s = _only_reduction(center)
    if s is None or s.arg != (want, axes) or s.srcs[0] is not a or \
            stats.get(id(s)) != "split" or _online(s, stats) is not None:
        return None         # the sibling must be a plain reduction merged beside this one
    return Family(family, node, a, axes, sibling=s, center=center)


def _only_reduction(center):
    """The one reduction ``center`` is computed from elementwise (else None)."""
    found, stack, seen = set(), [center], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op is Op.REDUCE:
            found.add(n)
        elif n.op in ALU or n.op in (Op.RESHAPE, Op.EXPAND):
            stack.extend(n.srcs)
        elif n.op is not Op.CONST:
            return None
    return found.pop() if len(found) == 1 else None


def reads(fam):
    """The node the partial's pass reads (its statistics' dependencies are this one's)."""
    return fam.src if fam.kind in ("chan", "lse") or fam.flat else fam.node.srcs[0]


def dependencies(start, is_stat):
    """The split reductions reachable from ``start`` without passing through another."""
    found, stack, seen = [], [start], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if is_stat(n):
            found.append(n)
            continue
        stack.extend(n.srcs)
    return found


def carry_dtype(node):
    kind = node.arg[0]
    return F64 if kind in (SUM, PROD) and node.dtype.kind == "f" else node.dtype


# ---- the partial stage: roots of a block's kernel and the task's results --------------
def partial(fam, b, block):
    """(roots, post entries relative to the kernel outputs so far, kernel outputs used) of
    ``fam`` for the block at ``block`` (a region of ``fam.src``) in Builder ``b``."""
    kept = fam.kept(block)
    kshape = tuple(e - s for s, e in kept)
    if fam.kind == "plain":
        return [("astype", b.value(fam.node, kept), carry_dtype(fam.node))], [("k", 0)], 1
    if fam.kind == "arg":
        kind = fam.node.arg[0]
        extreme = MAX if kind is ReduceKind.ARGMAX else MIN
        if fam.flat:
            v = b.reduce(extreme, (0,), b.flat_values(fam), (1,))
            shape = tuple(e - s for s, e in block)
            where = ("flat", 1, shape, tuple(r[0] for r in block), fam.src.shape)
        else:
            v = b.reduce(extreme, fam.axes, b.value(fam.src, block), kshape)
            where = ("offset", 1, block[fam.axes[0]][0])
        i = b.value(fam.node, kept)
        return [("value", v), ("value", i)], [("k", 0), where], 2
    a = b.value(fam.src, block)
    if fam.kind == "chan":
        n = int(np.prod([block[i][1] - block[i][0] for i in fam.axes], dtype=np.int64))
        s = b.value(fam.sibling, kept)
        return [("chan", a, s, fam.axes)], [("count", n, 0), ("k", 0), ("k", 1)], 2
    m = b.value(fam.sibling, kept)
    c = b.value(fam.center, kept)
    return [("value", m), ("lse", a, c, fam.axes)], [("k", 0), ("k", 1), ("k", 2)], 3


def root_outputs(g, root, vals, plan):
    """The outputs of one root of a block stage, as Tracers."""
    tag = root[0]
    if tag == "value":
        return [wrap(g, vals[root[1]])]
    if tag == "astype":
        return [wrap(g, cast_node(g, vals[root[1]], root[2]))]
    a, x, axes = wrap(g, vals[root[1]]), wrap(g, vals[root[2]]), root[3]
    if tag == "chan":                   # the block's mean and M2 about it
        n = int(np.prod([plan[root[1]][i] for i in axes], dtype=np.int64))
        mean = x / float(n)
        d = a - mean
        return [mean.astype(F64), (d * d).sum(axis=axes, keepdims=True).astype(F64)]
    # lse: about a finite center, so that a block of -inf adds 0 (not NaN) to the sum
    c = np.where(np.isfinite(x), x, 0.0)
    return [c.astype(F64), np.exp(a - c).sum(axis=axes, keepdims=True).astype(F64)]


# ---- merging: one generated numbamr function per group of reductions ------------------
def combine_spec(fam, position_of, center_program):
    """The static description of ``fam``'s merge (``position_of``: a family's position in
    the merged group, for a chan's sibling; ``center_program``: its center's instructions)."""
    kind = fam.node.arg[0]
    if fam.kind == "plain":
        return ("plain", kind, fam.node.dtype)
    if fam.kind == "arg":
        return ("arg", kind)
    if fam.kind == "chan":
        return ("chan", fam.node.dtype, position_of[id(fam.sibling)], center_program)
    return ("lse", fam.node.dtype, center_program)


def make_combine_fn(program, name):
    """``fn(plan, *stacked)``: the fields of each family's partials stacked along a new
    axis 0; plan = (final, the center's shapes per family). Returns the merged partials, or
    with ``final`` each family's reduction value."""
    def combine(plan, *stacked):
        final, center_shapes = plan
        it, outs, values = iter(stacked), [], {}
        for pos, spec in enumerate(program):
            fields = [next(it) for _ in range(_FIELDS[spec[0]])]
            merged, value = _MERGE[spec[0]](spec, fields, center_shapes[pos], values, final)
            values[pos] = value
            outs.extend([value] if final else merged)
        return tuple(outs)

    combine.__name__ = combine.__qualname__ = name
    return combine


def _merge_plain(spec, fields, _shapes, _values, final):
    _, kind, dtype = spec
    p, = fields
    m = {SUM: p.sum, PROD: p.prod, MAX: p.max, MIN: p.min}[kind](axis=0)
    return [m], (m.astype(dtype) if final else None)


def _merge_arg(spec, fields, _shapes, _values, _final):
    v, i = fields
    best = v.max(axis=0) if spec[1] is ReduceKind.ARGMAX else v.min(axis=0)
    hit = v == best
    if v.dtype.kind == "f":
        hit = hit | (np.isnan(v) & np.isnan(best))
    index = np.where(hit, i, np.iinfo(np.int64).max).min(axis=0)
    return [best, index], index


def _center(program, shapes, s):
    g = s.graph
    return wrap(g, replay(program, shapes, (), (s,))[-1]).astype(F64)


def _merge_chan(spec, fields, shapes, values, final):
    _, dtype, sibling, program = spec
    n, mean, m2 = fields
    total = n.sum(axis=0)
    mu = (n * mean).sum(axis=0) / total
    d = mean - mu
    m2 = m2.sum(axis=0) + (n * d * d).sum(axis=0)
    if not final:
        return [total, mu, m2], None
    e = mu - _center(program, shapes, values[sibling])
    return None, (m2 + total * (e * e)).astype(dtype)


def _merge_lse(spec, fields, shapes, _values, final):
    _, dtype, program = spec
    m, c, s = fields
    top = m.max(axis=0)
    center = _center(program, shapes, top)
    if not final:
        center = np.where(np.isfinite(center), center, 0.0)
    # a block that adds nothing (all -inf) adds 0 where the center is finite, whatever
    # exp(c - center) is; elsewhere the product says NaN as the whole array's sum would
    terms = np.where((s == 0) & np.isfinite(center), 0.0, s * np.exp(c - center))
    total = terms.sum(axis=0)
    return [top, center, total], (total.astype(dtype) if final else None)


_FIELDS = {"plain": 1, "arg": 2, "chan": 3, "lse": 3}
_MERGE = {"plain": _merge_plain, "arg": _merge_arg, "chan": _merge_chan, "lse": _merge_lse}


def center_instrs(fam, mats, region):
    """The center's instructions at ``region`` from the merged sibling (ext 0), or None."""
    if fam.kind not in ("chan", "lse"):
        return None, None
    from .program import Builder
    b = Builder(mats, ext={id(fam.sibling): 0})
    b.value(fam.center, region)
    return b.program(), b.plan()


def order(families):
    """Plain and arg families first: a chan's value needs its sibling's merged sum."""
    return sorted(families, key=lambda f: f.kind in ("chan", "lse"))


__all__ = ["Family", "family_of", "reads", "dependencies", "partial", "root_outputs",
           "combine_spec", "make_combine_fn", "center_instrs", "order"]
