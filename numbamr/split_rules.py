"""One-pass forms of reductions the scheduler splits across blocks, as ``(pattern, rule)``
pairs (``rewrite.py``).

A split reduction over a value that itself needs a reduction of the same input (the second
pass of a variance, the max of ``x - x.mean()``) would read that input twice, in two kernels.
These rules give forms that read it once. Each is matched on the reduction as traced
(``context.rebuilt`` maps a node of that graph to what it became; a node made by a rule is
its own), and a rule splits the reductions it makes itself (``context.split``).
"""
from dataclasses import dataclass

import numpy as np

from .ops import Op, ReduceKind
from .rewrite import P, Same, OneOf, Rewrite, match, rewrite


@dataclass(frozen=True)
class SplitContext:
    graph: object
    rebuilt: object         # node as traced -> the node it became
    split: object           # a REDUCE made by a rule -> its split form (or itself)
    beside_variances: frozenset = frozenset()   # sums (as traced) of a split variance's mean


def one_pass(n, context):
    """A one-pass form of split reduction ``n``, or None."""
    return rewrite(ONE_PASS, n, context)


def _count(a, axes):
    return int(np.prod([a.shape[ax] for ax in axes], dtype=np.int64))


# ---- shifted variance -------------------------------------------------------------------------
# sum((a - e)**2) over n's axes, with e = sum(a)/N broadcast back: the second pass of a
# variance of float32 ``a``
_MEAN = P(Op.DIV, P(Op.REDUCE, Same("a"), name="r1"), P(Op.CONST, name="count"), name="m")
VARIANCE = P(Op.REDUCE,
             P(Op.MUL, P(Op.SUB, P(name="a"), P(Op.EXPAND, _MEAN), name="d"), Same("d")),
             name="n", where=lambda n, b: _variance_holds(n, b))


def _variance_holds(n, b):
    kind, axes = n.arg
    a = b["a"]
    return kind is ReduceKind.SUM and b["r1"].arg == (ReduceKind.SUM, axes) and \
        b["count"].arg == _count(a, axes) and b["m"].shape == n.shape and a.dtype == np.float32


def shifted_variance(b, context):
    """sum((a - sum(a)/N)**2), split across blocks, in one pass over ``a``.

    Two passes would read ``a`` twice. With K = a's first element along the reduced
    axes (0 where that is infinite or NaN), sum((a-K)**2) - sum(a-K)**2/N is the same
    quantity; summed in float64 its rounding error is about 1e-16 * ((K - mean)/std)**2
    of the result, negligible unless K sits 10**5 standard deviations from the mean.
    float64 inputs keep two passes.
    """
    n = b["n"]
    axes = n.arg[1]
    g, f64 = context.graph, np.dtype(np.float64)
    _, y, s1 = _shifted_sum(context, context.rebuilt(b["a"]), axes, n.loc)
    kshape = s1.shape
    yy = g.node(Op.MUL, f64, y.shape, (y, y), None, n.loc)
    s2 = context.split(g.node(Op.REDUCE, f64, kshape, (yy,), (ReduceKind.SUM, axes), n.loc))
    sq = g.node(Op.MUL, f64, kshape, (s1, s1), None, n.loc)
    c = g.node(Op.CONST, f64, kshape, (), float(_count(y, axes)), n.loc)
    num = g.node(Op.SUB, f64, kshape, (s2, g.node(Op.DIV, f64, kshape, (sq, c), None,
                                                  n.loc)), None, n.loc)
    zero = g.node(Op.CONST, f64, kshape, (), 0.0, n.loc)
    num = g.node(Op.MAX, f64, kshape, (num, zero), None, n.loc)    # never below 0
    return g.node(Op.CAST, n.dtype, n.shape, (num,), n.dtype, n.loc)


def shifted_sum(b, context):
    """sum(a) where a split variance of ``a`` needs sum(a - K) (``beside_variances``): as
    N*K + sum(a - K), the variance's own float64 sum, so that the kernel sums ``a`` once
    and not twice (one float32 sum fewer a value, and one partial fewer to combine)."""
    n = b["n"]
    if n not in context.beside_variances:
        return None
    g, f64 = context.graph, np.dtype(np.float64)
    k, _, s1 = _shifted_sum(context, context.rebuilt(b["a"]), n.arg[1], n.loc)
    kshape = s1.shape
    c = g.node(Op.CONST, f64, kshape, (), float(_count(b["a"], n.arg[1])), n.loc)
    nk = g.node(Op.MUL, f64, kshape, (g.node(Op.CAST, f64, kshape, (k,), f64, n.loc), c),
                None, n.loc)
    total = g.node(Op.ADD, f64, kshape, (nk, s1), None, n.loc)
    return g.node(Op.CAST, n.dtype, n.shape, (total,), n.dtype, n.loc)


def _shifted_sum(context, a, axes, loc):
    """(K, y, sum(y)): K the first element of ``a`` along ``axes`` where it is finite (else 0:
    a shift by an infinity would turn an infinite sum into NaN), y = float64(a - K) and its
    sum, split. The nodes are the graph's own (hash-consed), so a variance and its mean
    that both ask for them share one sum."""
    g, f64 = context.graph, np.dtype(np.float64)
    kshape = tuple(1 if i in axes else s for i, s in enumerate(a.shape))
    k = g.node(Op.SHRINK, a.dtype, kshape, (a,),
               (tuple(0 for _ in a.shape), tuple(1 for _ in a.shape)), loc)
    inf = g.node(Op.CONST, a.dtype, kshape, (), float("inf"), loc)
    finite = g.node(Op.LT, np.dtype(bool), kshape,
                    (g.node(Op.ABS, a.dtype, kshape, (k,), None, loc), inf), None, loc)
    zero = g.node(Op.CONST, a.dtype, kshape, (), 0.0, loc)
    k = g.node(Op.WHERE, a.dtype, kshape, (finite, k, zero), None, loc)
    wide = g.node(Op.EXPAND, a.dtype, a.shape, (k,), a.shape, loc)
    diff = g.node(Op.SUB, a.dtype, a.shape, (a, wide), None, loc)
    y = g.node(Op.CAST, f64, a.shape, (diff,), f64, loc)
    s1 = g.node(Op.REDUCE, f64, kshape, (y,), (ReduceKind.SUM, axes), loc)
    return k, y, context.split(s1)


def beside_variances(nodes, split):
    """The sums (as traced) that are the means of variances whose reduce ``split`` says is
    split, of values widened from two-byte floats: ``shifted_sum`` gives them from the
    variance's own sum. There ``a - K`` is exact in float32 (unless K and a value lie
    2**13 or more apart), so N*K + sum(a - K) is the sum rounded about once; of float32
    values it is not, and its error (about an ulp of each ``a - K``, summed) is above a
    float32 sum's where the mean is small beside the values."""
    out = set()
    for n in nodes:
        b = match(VARIANCE, n) if n.op is Op.REDUCE else None
        if b is not None and split(n) and _widened_from_two_bytes(b["a"]):
            out.add(b["r1"])
    return frozenset(out)


def _widened_from_two_bytes(a):
    return a.op is Op.CAST and np.dtype(a.srcs[0].dtype).name in ("float16", "bfloat16")


# ---- monotone extremes ------------------------------------------------------------------------
# max/min of x + c, x - c, c - x or -x (float), c the same all along the reduced axes
def _uniform(v, b):
    return _uniform_along(v, b["n"].arg[1])


def _varying(v, b):
    return not _uniform_along(v, b["n"].arg[1])


MONOTONE = P(Op.REDUCE,
             OneOf(P(Op.NEG, P(name="x"), name="src"),
                   P({Op.ADD, Op.SUB}, P(name="x", where=_varying), P(where=_uniform),
                     name="src"),
                   P({Op.ADD, Op.SUB}, P(where=_uniform), P(name="x", where=_varying),
                     name="src")),
             name="n", where=lambda n, b: n.arg[0] in (ReduceKind.MAX, ReduceKind.MIN) and
             b["src"].dtype.kind == "f")


def monotone_extremes(b, context):
    """max/min of ``x + c``, ``x - c``, ``c - x`` or ``-x``, with ``c`` the same all along
    the reduced axes, from max(x) and min(x): one pass over ``x`` instead of two when
    ``c`` is itself a reduction of ``x`` (``(x - x.mean()).max()``).

    Exact: adding a fixed ``c`` and rounding is monotone in ``x``, so the extreme of
    f(x) is f at an extreme of x. Taking the NaN-propagating max/min of f(max x) and
    f(min x) also gives NaN exactly when some f(x_i) is NaN (x_i NaN, or x_i = -c
    infinite, which is then max x or min x). Integers are left alone (they wrap).
    """
    n, src = b["n"], b["src"]
    kind, axes = n.arg
    varying = 0 if src.srcs[0] is b["x"] else 1
    g = context.graph
    srcs = [context.rebuilt(s) for s in src.srcs]
    extremes = []
    for k in (ReduceKind.MAX, ReduceKind.MIN):
        r = g.node(Op.REDUCE, n.dtype, n.shape, (srcs[varying],), (k, axes), n.loc)
        r = context.split(r)
        operands = [r if i == varying else _at_shape(g, s, n.shape)
                    for i, s in enumerate(srcs)]
        extremes.append(g.node(src.op, n.dtype, n.shape, tuple(operands), src.arg, n.loc))
    pick = Op.MAX if kind is ReduceKind.MAX else Op.MIN
    return g.node(pick, n.dtype, n.shape, tuple(extremes), None, n.loc)


def _uniform_along(node, axes):
    """Whether ``node`` has one value all along ``axes`` (a constant, or broadcast there)."""
    if node.op is Op.CONST:
        return True
    return node.op is Op.EXPAND and node.srcs[0].ndim == node.ndim and \
        all(node.srcs[0].shape[a] == 1 for a in axes)


def _at_shape(g, node, shape):
    """A node uniform along some axes (see _uniform_along), at the reduced ``shape``."""
    if node.op is Op.CONST:
        return g.node(Op.CONST, node.dtype, shape, (), node.arg, node.loc)
    src = node.srcs[0]
    if src.shape == tuple(shape):
        return src
    return g.node(Op.EXPAND, src.dtype, shape, (src,), tuple(shape), node.loc)


SUM = P(Op.REDUCE, P(name="a"), name="n")
ONE_PASS = [Rewrite("shifted variance", VARIANCE, shifted_variance),
            Rewrite("sum beside a shifted variance", SUM, shifted_sum),
            Rewrite("monotone extremes", MONOTONE, monotone_extremes)]
