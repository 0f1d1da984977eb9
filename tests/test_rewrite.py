"""The rewrite matcher (numbamr/rewrite.py) and the rules it runs: the one-pass forms of split
reductions on the graph (numbamr/split_rules.py) and the online forms on the kernel's values
(numbamr/lowering/online.py)."""
import numpy as np
import pytest

from numbamr.graph import toposort
from numbamr.lowering.evaluate import ValBuilder
from numbamr.lowering.fusion import probe_output
from numbamr.lowering.kernel import build_kernel
from numbamr.lowering.online import RULES
from numbamr.ops import Op, ReduceKind
from numbamr.rewrite import P, Same, OneOf, Rewrite, match, rewrite
from numbamr.schedule import c_strides
from numbamr.split_rules import MONOTONE, VARIANCE
from numbamr.trace import trace


def traced(fn, *arrays):
    _, outputs, _ = trace(lambda vals: fn(*vals), [("array", (a.shape, a.dtype))
                                                   for a in arrays])
    return outputs


def reduces(outputs, kind=None):
    return [n for n in toposort(outputs) if n.op is Op.REDUCE and
            (kind is None or n.arg[0] is kind)]


# ---- the matcher ---------------------------------------------------------------------------

def test_a_pattern_binds_its_names_and_checks_sources_one_for_one():
    vb = ValBuilder()
    x = vb.make(Op.LOAD, np.float32, (), ("x", 0))
    y = vb.make(Op.LOAD, np.float32, (), ("y", 0))
    d = vb.make(Op.SUB, np.float32, (x, y))
    square = vb.make(Op.MUL, np.float32, (d, d))
    other = vb.make(Op.MUL, np.float32, (d, x))
    pattern = P(Op.MUL, P(Op.SUB, P(name="a"), P(name="b"), name="d"), Same("d"))
    bound = match(pattern, square)
    assert bound["a"] is x and bound["b"] is y and bound["d"] is d
    assert match(pattern, other) is None                    # d * x is no square
    assert match(P(Op.MUL, P(name="a")), square) is None     # one source given, two there
    assert match(P({Op.ADD, Op.SUB}), d) is not None and match(P(Op.ADD), d) is None


def test_where_sees_the_names_bound_above_and_to_the_left():
    vb = ValBuilder()
    x = vb.make(Op.LOAD, np.float32, (), ("x", 0))
    c = vb.make(Op.CONST, np.float32, (), 2.0)
    s = vb.make(Op.ADD, np.float32, (x, c))
    seen = []
    pattern = P(Op.ADD, P(name="l"), P(where=lambda v, b: seen.append(dict(b)) or True),
                name="root")
    assert match(pattern, s) is not None
    assert seen[0]["root"] is s and seen[0]["l"] is x


def test_one_of_keeps_the_bindings_of_the_alternative_that_matched():
    vb = ValBuilder()
    x = vb.make(Op.LOAD, np.float32, (), ("x", 0))
    c = vb.make(Op.CONST, np.float32, (), 2.0)
    s = vb.make(Op.SUB, np.float32, (c, x))
    is_const = lambda v, b: v.op is Op.CONST                   # noqa: E731
    pattern = OneOf(P(Op.SUB, P(name="x", where=lambda v, b: not is_const(v, b)),
                      P(name="c", where=is_const)),
                    P(Op.SUB, P(name="c", where=is_const), P(name="x")))
    bound = match(pattern, s)
    assert bound["x"] is x and bound["c"] is c


def test_rewrite_gives_the_first_rule_that_returns_something():
    vb = ValBuilder()
    x = vb.make(Op.LOAD, np.float32, (), ("x", 0))
    neg = vb.make(Op.NEG, np.float32, (x,))
    rules = [Rewrite("declines", P(Op.NEG), lambda b, ctx: None),
             Rewrite("takes", P(Op.NEG, P(name="x")), lambda b, ctx: (ctx, b["x"])),
             Rewrite("too late", P(Op.NEG), lambda b, ctx: "late")]
    assert rewrite(rules, neg, "ctx") == ("ctx", x)
    assert rewrite(rules, x, "ctx") is None


# ---- the graph rules -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype,matches", [(np.float32, True), (np.float64, False)])
def test_the_shifted_variance_matches_a_variance_of_float32(dtype, matches):
    x = np.zeros((4, 300), dtype)
    (out,) = traced(lambda x: x.var(axis=1), x)
    second = [n for n in reduces([out], ReduceKind.SUM) if n.srcs[0].op is Op.MUL]
    assert len(second) == 1
    assert (match(VARIANCE, second[0]) is not None) == matches
    # the sum of squares of x itself is no variance's second pass
    (plain,) = traced(lambda x: (x * x).sum(axis=1), x)
    assert match(VARIANCE, reduces([plain])[0]) is None


def test_a_sum_of_squares_about_another_axis_mean_is_no_variance():
    x = np.zeros((40, 30), np.float32)
    (out,) = traced(lambda x: ((x - x.mean(axis=0, keepdims=True)) ** 2).sum(axis=1), x)
    outer = [n for n in reduces([out], ReduceKind.SUM) if n.srcs[0].op is Op.MUL]
    assert len(outer) == 1 and match(VARIANCE, outer[0]) is None


@pytest.mark.parametrize("fn,varying,matches", [
    (lambda x, y: (x - x.mean()).max(), 0, True),
    (lambda x, y: (x.mean() - x).min(), 1, True),
    (lambda x, y: (-x).max(), 0, True),
    (lambda x, y: (x + 2.0).min(), 0, True),
    (lambda x, y: (x - y).max(), None, False),          # the shift varies along the axes
    (lambda x, y: (x - x.mean()).sum(), None, False),   # a sum, not an extreme
])
def test_monotone_extremes_match_a_shift_uniform_along_the_reduced_axes(fn, varying, matches):
    x, y = np.zeros((40, 30), np.float32), np.zeros((40, 30), np.float32)
    (out,) = traced(fn, x, y)
    top = [n for n in toposort([out]) if n.op is Op.REDUCE][-1]
    bound = match(MONOTONE, top)
    assert (bound is not None) == matches
    if matches:
        assert bound["src"].srcs[varying] is bound["x"]


def test_monotone_extremes_leave_integers_alone():
    (out,) = traced(lambda x: (x - x.max()).max(), np.zeros((40, 30), np.int32))
    assert match(MONOTONE, reduces([out])[-1]) is None


# ---- the online rules, over the kernel's values ----------------------------------------------

def kernel_of(fn, x):
    outputs = traced(fn, x)
    layouts = {0: (c_strides(x.shape), 0)}
    facts = [probe_output(o, layouts) for o in outputs]
    return build_kernel(outputs, layouts, [(c_strides(o.shape), 0) for o in outputs],
                        facts=facts)


@pytest.mark.parametrize("fn,kind", [
    (lambda x: x.var(axis=1), "welford"),
    (lambda x: np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)), "lse"),
    (lambda x: (x - x.max(axis=1, keepdims=True)).sum(axis=1), None),
    (lambda x: ((x - x.sum(axis=1, keepdims=True) / 7.0) ** 2).sum(axis=1), None),
])
def test_the_online_rules_match_a_dependent_pair_of_one_pass(fn, kind):
    """The variance after its mean (over the row's true extent) and the sum of exponentials
    after the max match; a sum after a max of another form, or a mean over a wrong count,
    does not."""
    k = kernel_of(fn, np.zeros((4, 300), np.float32))
    second = [r for r in k.reduces if r.deps]
    assert len(second) == 1
    fusion = rewrite(RULES, second[0].body, second[0])
    if kind is None:
        assert fusion is None
    else:
        assert fusion.kind == kind and fusion.second is second[0]
        assert fusion.first.id == second[0].deps[0]
