"""Schedule: which outputs are computed by which kernel, and what goes through memory.

Start from one kernel for all outputs. When the kernel analysis finds a reduction nested in
another loop (``FusionError.node``), that reduction is *materialized*: computed by an earlier
kernel into a temporary buffer, and read back as a ``BUFFER`` leaf. Outputs whose reductions
leave different row shapes go to separate kernels, as few as possible.

Before that, long reductions over few rows (a whole-array ``x.sum()``) are split: the reduced
axes become (segments, segment length), each segment is reduced by its own block into a
temporary, and the segments are combined by the consumer (cheaply, by every block that needs
the result). So every reduction spreads over the whole GPU.
"""
from dataclasses import dataclass

import numpy as np

from .errors import FusionError
from .experimental import current_knobs
from .graph import format_graph, toposort
from .lowering.kernel import build_kernel
from .ops import Op, ReduceKind

SPLIT_KINDS = {ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN, ReduceKind.PROD}
# the thresholds of the split (blocks, extents, segments, column lines) are study knobs:
# numbamr.experimental.Knobs says what each was measured against
COL_ROWS_PER_BLOCK = 32         # rows a block takes when reduced axes are not contiguous


@dataclass
class KernelGroup:
    name: str
    outputs: list          # graph nodes computed by this kernel
    targets: list          # per output: ('out', user output index) or ('tmp', temp name)
    kernel: object         # lowering.kernel.Kernel


@dataclass
class Temp:
    name: str
    dtype: np.dtype
    shape: tuple


def c_strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(0 if n == 1 else acc)
        acc *= n
    return tuple(reversed(out))


class Scheduler:
    def __init__(self, graph, layouts, name, arg_names, out_layouts=None, generic=False):
        self.graph, self.name, self.arg_names = graph, name, dict(arg_names)
        self.generic = generic          # kernels generic in their row count
        self.layouts = dict(layouts)
        self.out_layouts = out_layouts or {}      # user output index -> (strides, offset)
        self.groups, self.temps = [], []
        self.buffers = {}               # id(node) -> BUFFER node replacing it
        self.origin = {}                # id(node with buffers) -> the node first built from

    # ---- graph rewriting ---------------------------------------------------------------
    def rebuild(self, roots, rule):
        """Rebuild the DAG under ``roots`` bottom-up; ``rule(node, new_srcs)`` may replace.
        While it runs, ``self.rebuilt(node)`` is what an already visited node became."""
        memo = {}
        self.rebuilt = lambda node: memo[id(node)]
        for n in toposort(roots):
            srcs = tuple(memo[id(s)] for s in n.srcs)
            new = rule(n, srcs)
            if new is None:
                new = n if all(a is b for a, b in zip(srcs, n.srcs)) else \
                    self.graph.node(n.op, n.dtype, n.shape, srcs, n.arg, n.loc)
            memo[id(n)] = new
        return [memo[id(r)] for r in roots]

    def with_buffers(self, roots):
        def rule(n, srcs):
            if id(n) in self.buffers:
                return self.buffers[id(n)]
            if all(a is b for a, b in zip(srcs, n.srcs)):
                return None
            rebuilt = self.graph.node(n.op, n.dtype, n.shape, srcs, n.arg, n.loc)
            # the node it was first built from, also when ``n`` was itself rebuilt (a node
            # materialized this round is scheduled with the buffers of the ones before it)
            self.origin.setdefault(id(rebuilt), self.origin.get(id(n), n))
            return self.buffers.get(id(rebuilt), rebuilt)
        return self.rebuild(roots, rule)

    def reduces_in_two_kernels(self, groups):
        """The reductions (as first built, before any buffer replaced their sources) that
        more than one of ``groups`` computes. Each kernel reduces in the order of its own
        layout, so two kernels may round the same reduction differently; ``p - p.min()``
        with ``p`` built on such a reduction then goes below 0 where the two differ."""
        seen, shared = set(), {}
        for g in groups:
            mine = {id(n): n for n in toposort(g.outputs) if n.op is Op.REDUCE}
            for key, n in mine.items():
                if key in seen:
                    n = self.origin.get(key, n)
                    shared[n.id] = n
            seen |= set(mine)
        return list(shared.values())

    def split_long_reductions(self, roots):
        return self.rebuild(roots, self._split)

    def _segments_for(self, n, src):
        """(segments, interleaved): how many segments to split reduce ``n`` (over ``src``)
        into (1: no split), and whether segment s takes every segments-th step of the
        reduced axes from s (columns whose rows are not whole lines: Knobs.col_line) rather than
        a run of them."""
        kind, axes = n.arg
        rows = int(np.prod(n.shape, dtype=np.int64))
        extent = int(np.prod([src.shape[a] for a in axes], dtype=np.int64))
        contiguous = src.ndim - 1 in axes
        blocks = rows if contiguous else -(-rows // COL_ROWS_PER_BLOCK)
        knobs = current_knobs()
        least = knobs.split_min_extent if contiguous else knobs.split_min_extent_col
        if kind not in SPLIT_KINDS or blocks >= knobs.split_min_blocks or extent < least:
            return 1, False
        most = -(-knobs.split_target_blocks // blocks)
        line = knobs.col_line
        if not contiguous and rows % line:
            lines = _segments(extent, most, lambda d: d * rows % line == 0)
            if lines > 1:
                return lines, True
        return _segments(extent, most), False

    def _split(self, n, srcs):
        if n.op is not Op.REDUCE:
            return None
        src = srcs[0]
        segments, interleaved = self._segments_for(n, src)
        if segments < 2:
            return None
        rewritten = self._shifted_variance(n, src)
        if rewritten is None:
            rewritten = self._monotone_extremes(n, src)
        if rewritten is not None:
            return rewritten
        kind, axes = n.arg
        extent = int(np.prod([src.shape[a] for a in axes], dtype=np.int64))
        kept = [a for a in range(src.ndim) if a not in axes]
        kept_shape = tuple(src.shape[a] for a in kept)
        piece = extent // segments
        if src.ndim - 1 in axes:    # rows contiguous: (kept..., segment, piece)
            x = self._view(src, kept + list(axes), kept_shape + (segments, piece))
            seg_axis = len(kept_shape)
        else:                       # columns contiguous: (segment, kept..., piece), kept fastest
            steps = (piece, segments) if interleaved else (segments, piece)
            x = self._view(src, list(axes) + kept, steps + kept_shape)
            first, second = (1, 0) if interleaved else (0, 1)
            x = self._permute(x, (first,) + tuple(range(2, 2 + len(kept_shape))) + (second,))
            seg_axis = 0
        last = x.ndim - 1
        g = self.graph
        inner_shape = x.shape[:-1] + (1,)
        inner = g.node(Op.REDUCE, n.dtype, inner_shape, (x,), (kind, (last,)), n.loc)
        outer_shape = tuple(1 if a == seg_axis else s for a, s in enumerate(inner_shape))
        outer = g.node(Op.REDUCE, n.dtype, outer_shape, (inner,), (kind, (seg_axis,)), n.loc)
        return g.node(Op.RESHAPE, n.dtype, n.shape, (outer,), n.shape, n.loc)

    def _shifted_variance(self, n, src):
        """sum((a - sum(a)/N)**2), split across blocks, in one pass over ``a``.

        Two passes would read ``a`` twice. With K = a's first element along the reduced
        axes, sum((a-K)**2) - sum(a-K)**2/N is the same quantity; summed in float64 its
        rounding error is about 1e-16 * ((K - mean)/std)**2 of the result, negligible unless
        K sits 10**5 standard deviations from the mean. float64 inputs keep two passes.
        """
        kind, axes = n.arg
        a = _variance_input(n, n.srcs[0])          # matched on the graph as traced
        if a is None or kind is not ReduceKind.SUM or a.dtype != np.float32:
            return None
        a = self.rebuilt(a)
        g, f64 = self.graph, np.dtype(np.float64)
        count = int(np.prod([a.shape[ax] for ax in axes], dtype=np.int64))
        kshape = tuple(1 if i in axes else s for i, s in enumerate(a.shape))
        k = g.node(Op.SHRINK, a.dtype, kshape, (a,),
                   (tuple(0 for _ in a.shape), tuple(1 for _ in a.shape)), n.loc)
        k = g.node(Op.EXPAND, a.dtype, a.shape, (k,), a.shape, n.loc)
        diff = g.node(Op.SUB, a.dtype, a.shape, (a, k), None, n.loc)
        y = g.node(Op.CAST, f64, a.shape, (diff,), f64, n.loc)
        s1 = g.node(Op.REDUCE, f64, kshape, (y,), (ReduceKind.SUM, axes), n.loc)
        yy = g.node(Op.MUL, f64, a.shape, (y, y), None, n.loc)
        s2 = g.node(Op.REDUCE, f64, kshape, (yy,), (ReduceKind.SUM, axes), n.loc)
        s1, s2 = (self._split(r, r.srcs) or r for r in (s1, s2))
        sq = g.node(Op.MUL, f64, kshape, (s1, s1), None, n.loc)
        c = g.node(Op.CONST, f64, kshape, (), float(count), n.loc)
        num = g.node(Op.SUB, f64, kshape, (s2, g.node(Op.DIV, f64, kshape, (sq, c), None,
                                                      n.loc)), None, n.loc)
        zero = g.node(Op.CONST, f64, kshape, (), 0.0, n.loc)
        num = g.node(Op.MAX, f64, kshape, (num, zero), None, n.loc)    # never below 0
        return g.node(Op.CAST, n.dtype, n.shape, (num,), n.dtype, n.loc)

    def _monotone_extremes(self, n, src):
        """max/min of ``x + c``, ``x - c``, ``c - x`` or ``-x``, with ``c`` the same all along
        the reduced axes, from max(x) and min(x): one pass over ``x`` instead of two when
        ``c`` is itself a reduction of ``x`` (``(x - x.mean()).max()``).

        Exact: adding a fixed ``c`` and rounding is monotone in ``x``, so the extreme of
        f(x) is f at an extreme of x. Taking the NaN-propagating max/min of f(max x) and
        f(min x) also gives NaN exactly when some f(x_i) is NaN (x_i NaN, or x_i = -c
        infinite, which is then max x or min x). Integers are left alone (they wrap).
        """
        kind, axes = n.arg
        if kind not in (ReduceKind.MAX, ReduceKind.MIN) or src.dtype.kind != "f" or \
                src.op not in (Op.ADD, Op.SUB, Op.NEG):
            return None
        uniform = [_uniform_along(s, axes) for s in src.srcs]
        if src.op is Op.NEG:
            varying = 0
        elif uniform[1] and not uniform[0]:
            varying = 0
        elif uniform[0] and not uniform[1]:
            varying = 1
        else:
            return None
        g, x = self.graph, src.srcs[varying]
        extremes = []
        for k in (ReduceKind.MAX, ReduceKind.MIN):
            r = g.node(Op.REDUCE, n.dtype, n.shape, (x,), (k, axes), n.loc)
            r = self._split(r, r.srcs) or r
            operands = [r if i == varying else _at_shape(g, s, n.shape)
                        for i, s in enumerate(src.srcs)]
            extremes.append(g.node(src.op, n.dtype, n.shape, tuple(operands), src.arg, n.loc))
        pick = Op.MAX if kind is ReduceKind.MAX else Op.MIN
        return g.node(pick, n.dtype, n.shape, tuple(extremes), None, n.loc)

    def _permute(self, x, perm):
        perm = tuple(perm)
        if perm == tuple(range(x.ndim)):
            return x
        return self.graph.node(Op.PERMUTE, x.dtype, tuple(x.shape[p] for p in perm), (x,), perm,
                               x.loc)

    def _view(self, src, perm, shape):
        x = self._permute(src, perm)
        return self.graph.node(Op.RESHAPE, x.dtype, shape, (x,), shape, src.loc)

    # ---- kernels -----------------------------------------------------------------------
    def kernel_name(self):
        return self.name if not self.groups else f"{self.name}_{len(self.groups)}"

    def store_layouts(self, nodes, targets):
        """Where each output of a kernel is written: given out= arrays keep their strides."""
        return [self.out_layouts.get(t[1], (c_strides(n.shape), 0)) if t[0] == "out"
                else (c_strides(n.shape), 0) for n, t in zip(nodes, targets)]

    def build(self, nodes, targets):
        return build_kernel(nodes, self.layouts, self.store_layouts(nodes, targets),
                            self.kernel_name(), self.arg_names, self.generic)

    def materialize(self, node):
        name = f"t{len(self.temps)}"
        self.temps.append(Temp(name, node.dtype, node.shape))
        self.schedule([node], [("tmp", name)])
        self.layouts[name] = (c_strides(node.shape), 0)
        self.arg_names[name] = name
        self.buffers[id(node)] = self.graph.node(Op.BUFFER, node.dtype, node.shape, (), name,
                                                 node.loc)

    def schedule(self, nodes, targets):
        """Kernels computing ``nodes`` (already split), earlier kernels first."""
        while True:
            current = self.with_buffers(nodes)
            try:
                kernel = self.build(current, targets)
            except FusionError as e:
                if e.node is not None and id(e.node) not in self.buffers:
                    self.materialize(e.node)
                    continue
                if len(nodes) > 1:
                    self.schedule_apart(nodes, targets)
                    return
                raise
            self.groups.append(KernelGroup(kernel.name, current, list(targets), kernel))
            return

    def schedule_apart(self, nodes, targets):
        """Outputs that cannot share a kernel: as few groups as first-fit finds."""
        buckets = []
        for n, t in zip(nodes, targets):
            for b in buckets:
                try:
                    self.build(self.with_buffers(b[0] + [n]), b[1] + [t])
                except FusionError:
                    continue
                b[0].append(n)
                b[1].append(t)
                break
            else:
                buckets.append(([n], [t]))
        if len(buckets) == 1:
            raise FusionError("these outputs cannot be computed by one kernel",
                              nodes[0].loc)
        for b_nodes, b_targets in buckets:
            self.schedule(b_nodes, b_targets)


def _variance_input(n, src):
    """``a`` when ``n`` is sum((a - e)**2) over its axes with e = sum(a)/N broadcast back
    (the second pass of a variance), else None."""
    if src.op is not Op.MUL or src.srcs[0] is not src.srcs[1]:
        return None
    d = src.srcs[0]
    if d.op is not Op.SUB or d.srcs[1].op is not Op.EXPAND:
        return None
    a, m = d.srcs[0], d.srcs[1].srcs[0]
    if m.op is not Op.DIV or m.srcs[1].op is not Op.CONST:
        return None
    r1 = m.srcs[0]
    axes = n.arg[1]
    count = int(np.prod([a.shape[ax] for ax in axes], dtype=np.int64))
    if r1.op is not Op.REDUCE or r1.arg != (ReduceKind.SUM, axes) or r1.srcs[0] is not a or \
            m.srcs[1].arg != count or m.shape != n.shape:
        return None
    return a


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


def merge_groups(s):
    """Fewer kernels: move each kernel into the earliest one it can share a launch with (it
    reads nothing that kernel or a later one writes, and one analysis covers both)."""
    merged = []
    for g in s.groups:
        reads = {n.arg for n in toposort(g.outputs) if n.op is Op.BUFFER}
        written_by = {t[1]: i for i, m in enumerate(merged) for t in m.targets if t[0] == "tmp"}
        first = max((written_by[r] + 1 for r in reads if r in written_by), default=0)
        for m in merged[first:]:
            try:
                kernel = build_kernel(m.outputs + g.outputs, s.layouts,
                                      s.store_layouts(m.outputs + g.outputs,
                                                      m.targets + g.targets),
                                      m.name, s.arg_names, s.generic)
            except FusionError:
                continue
            m.outputs, m.targets, m.kernel = m.outputs + g.outputs, m.targets + g.targets, kernel
            break
        else:
            merged.append(g)
    return merged


def _segments(extent, most, fits=lambda d: True):
    """The most segments (<= ``most``) that divide ``extent`` into pieces of at least
    Knobs.split_min_segment elements (and that ``fits``)."""
    best = 1
    for d in range(2, min(most, extent // current_knobs().split_min_segment) + 1):
        if extent % d == 0 and fits(d):
            best = d
    return best


def schedule(graph, outputs, layouts, name, arg_names, out_layouts=None, on_chip=None,
             split_long=True, generic=False):
    """Kernel groups (in launch order) and temporaries for ``outputs``.

    ``split_long``: split long reductions over few rows into kernels (off where the rows are
    to be split across blocks within a kernel, as a forced ``split`` asks).
    ``generic``: kernels generic in their row count (see ``lowering.kernel.GENERIC_ROWS``);
    their reductions are never split by row count, which such a kernel does not know.

    ``on_chip(kernel)``: whether the lowering keeps ``kernel``'s rows on chip by splitting
    each across a cluster of blocks. Where the long reductions over few rows would be split
    into several kernels, but one kernel holding the rows that way computes everything,
    the one kernel is taken: the kernels would read the rows again for every reduction
    that depends on another (softmax, layernorm at 128 x 65536 on the H200: 1369 and
    1940 GB/s as kernels, 3211 and 2883 as one, bench/RESULTS.md)."""
    targets = [("out", i) for i in range(len(outputs))]
    setup = (layouts, name, arg_names, out_layouts, generic)
    s = Scheduler(graph, *setup)
    split = s.split_long_reductions(outputs) if split_long and not generic else outputs
    if on_chip is not None and any(a is not b for a, b in zip(split, outputs)):
        whole = Scheduler(graph, *setup)
        try:
            whole.schedule(outputs, targets)
        except FusionError:         # the split graph may still go: try that below
            whole.groups = []
        groups = merge_groups(whole)
        if len(groups) == 1 and on_chip(groups[0].kernel):
            return groups, whole.temps
    return _schedule_once_each(graph, split, targets, setup)


def _schedule_once_each(graph, split, targets, setup):
    """Kernels for ``split`` in which every reduction is computed by one kernel: one that
    two kernels would compute is computed first into a temporary that both read (so both
    see the same bits), and the outputs are scheduled again."""
    first = []
    while True:
        s = Scheduler(graph, *setup)
        for n in first:
            if id(n) not in s.buffers:
                s.materialize(n)
        s.schedule(split, targets)
        groups = merge_groups(s)
        again = [n for n in s.reduces_in_two_kernels(groups) if n not in first]
        if not again:
            for n in first:
                groups = _fold_into_first_reader(s, groups, s.buffers[id(n)].arg)
            return groups, s.temps
        first = sorted(first + again, key=lambda n: n.id)    # sources before users


def _fold_into_first_reader(s, groups, name):
    """``groups`` with the kernel that computes temporary ``name`` alone folded into the
    first kernel that reads it, where one analysis covers both: that kernel computes the
    reduction, uses it and stores it, and the later readers still read the stored bits.
    A launch fewer (the first reader often reduced it anyway before it was materialized)."""
    own = next((i for i, g in enumerate(groups) if g.targets == [("tmp", name)]), None)
    if own is None:
        return groups
    value = groups[own].outputs[0]
    for i in range(own + 1, len(groups)):
        reader = groups[i]
        if not any(n.op is Op.BUFFER and n.arg == name for n in toposort(reader.outputs)):
            continue
        outputs = s.rebuild(reader.outputs, lambda n, srcs: value if n.op is Op.BUFFER and
                            n.arg == name else None) + [value]
        targets = reader.targets + [("tmp", name)]
        try:
            kernel = build_kernel(outputs, s.layouts, s.store_layouts(outputs, targets),
                                  reader.name, s.arg_names, s.generic)
        except FusionError:
            return groups
        folded = KernelGroup(reader.name, outputs, targets, kernel)
        return groups[:own] + groups[own + 1:i] + [folded] + groups[i + 1:]
    return groups


def format_schedule(groups):
    return "\n\n".join(f"kernel {g.name} -> {g.targets}:\n{format_graph(g.outputs)}"
                       for g in groups)
