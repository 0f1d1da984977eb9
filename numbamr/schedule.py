"""Schedule: which outputs are computed by which kernel, and what goes through memory.

Start from one kernel for all outputs. Where the kernel analysis finds a reduction nested in
another loop (``lowering.fusion``: the facts of each output, found without building a
kernel), that reduction is *materialized*: computed by an earlier kernel into a temporary
buffer, and read back as a ``BUFFER`` leaf. Outputs whose reductions leave different row
shapes go to separate kernels, as few as possible. Each kernel decided on is built once.

Before that, long reductions over few rows (a whole-array ``x.sum()``) are split: the reduced
axes become (segments, segment length), each segment is reduced by its own block into a
temporary, and the segments are combined by the consumer (cheaply, by every block that needs
the result). So every reduction spreads over the whole GPU.
"""
from dataclasses import dataclass

import numpy as np

from .errors import FusionError, VerifyError
from .experimental import current_knobs
from .graph import format_graph, toposort
from .lowering.fusion import FactsCache
from .lowering.kernel import build_kernel
from .ops import Op, ReduceKind
from .split_rules import SplitContext, beside_variances, one_pass

SPLIT_KINDS = {ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN, ReduceKind.PROD}
# the thresholds of the split (blocks, extents, segments, column lines) are study knobs:
# numbamr.experimental.Knobs says what each was measured against
COL_ROWS_PER_BLOCK = 32         # rows a block takes when reduced axes are not contiguous


@dataclass
class KernelGroup:
    name: str
    outputs: list          # graph nodes computed by this kernel
    targets: list          # per output: ('out', user output index) or ('tmp', temp name)
    kernel: object = None  # lowering.kernel.Kernel, built once the schedule is final


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
    def __init__(self, graph, layouts, name, arg_names, out_layouts=None, generic=False,
                 facts=None):
        self.graph, self.name, self.arg_names = graph, name, dict(arg_names)
        self.generic = generic          # kernels generic in their row count
        self.facts = facts or FactsCache(generic)     # per output node, shared by rounds
        self.layouts = dict(layouts)
        self.out_layouts = out_layouts or {}      # user output index -> (strides, offset)
        self.groups, self.temps = [], []
        self.buffers = {}               # id(node) -> BUFFER node replacing it
        self.origin = {}                # id(node with buffers) -> the node first built from
        self.beside_variances = frozenset()     # split_rules.beside_variances, once split

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
        if current_knobs().split_mean_shared:
            self.beside_variances = beside_variances(
                toposort(roots), lambda n: self._segments_for(n, n.srcs[0])[0] > 1)
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

    def _split(self, n, srcs, rebuilt=None):
        """Rule of the rebuild that splits long reductions: ``n`` as traced, ``srcs`` its
        sources as rebuilt. ``rebuilt`` maps a traced node to what it became (a reduction a
        one-pass rule makes is its own: ``_split_made``)."""
        if n.op is not Op.REDUCE:
            return None
        src = srcs[0]
        segments, interleaved = self._segments_for(n, src)
        if segments < 2:
            return None
        rewritten = one_pass(n, SplitContext(self.graph, rebuilt or self.rebuilt,
                                             self._split_made, self.beside_variances))
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

    def _split_made(self, r):
        """A reduction made by a one-pass rule, split in its turn."""
        return self._split(r, r.srcs, lambda node: node) or r

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

    def build(self, group):
        """``group``'s kernel, which the facts say one kernel can compute."""
        facts = [self.facts.of(n, self.layouts) for n in group.outputs]
        try:
            group.kernel = build_kernel(group.outputs, self.layouts,
                                        self.store_layouts(group.outputs, group.targets),
                                        group.name, self.arg_names, self.generic, facts)
        except FusionError as e:
            raise VerifyError(f"kernel {group.name}: the fusion facts said its outputs fit one "
                              f"kernel, but building it failed: {e.plain_message}") from e
        return group.kernel

    def fits(self, nodes):
        return self.facts.fit_one_kernel(nodes, self.layouts)

    def materialize(self, node):
        name = f"t{len(self.temps)}"
        self.temps.append(Temp(name, node.dtype, node.shape))
        self.schedule([node], [("tmp", name)])
        self.layouts[name] = (c_strides(node.shape), 0)
        self.arg_names[name] = name
        self.buffers[id(node)] = self.graph.node(Op.BUFFER, node.dtype, node.shape, (), name,
                                                 node.loc)

    def materialize_each(self, nested, nodes):
        """Materialize ``nested``, the reductions of the last of ``nodes`` met nested (the
        outputs before it have none), in the order the analysis met them. The facts foresaw
        what each one does to ``nodes``: it becomes a buffer wherever it is read. Where a
        materialization changes them otherwise (its kernel materialized another reduction they
        read; a buffer stands for a node it was under, which is then built anew), the list
        ends there and the caller asks for the facts again."""
        for node in nested:
            before = self.with_buffers(nodes)
            node = self.with_buffers([node])[0]     # as read once the ones before are buffers
            self.materialize(node)
            buffer = self.buffers[id(node)]
            foreseen = self.rebuild(before, lambda n, srcs: buffer if n is node else None)
            if self.with_buffers(nodes) != foreseen:
                return

    def schedule(self, nodes, targets):
        """Kernels computing ``nodes`` (already split), earlier kernels first.

        The facts of each output say what to materialize: first the reductions nested in
        another reduction (all of the first output's with any), then, where the outputs'
        rows agree, one that is nested once laid over the rows (materializing it may change
        the rows of the output it was an instance of). A materialization changes the outputs
        that read it, whose facts are then found again; the others keep theirs."""
        while True:
            current = self.with_buffers(nodes)
            facts = [self.facts.of(n, self.layouts) for n in current]
            first = next((i for i, f in enumerate(facts) if f.nested), None)
            if first is not None:
                self.materialize_each(facts[first].nested, nodes[:first + 1])
                continue
            plan = self.facts.plan_rows(current, self.layouts)
            if plan.problem:
                if len(nodes) > 1:
                    self.schedule_apart(nodes, targets, current)
                    return
                raise plan.error()
            in_rows = [self.facts.in_rows(n, self.layouts) for n in current]
            first = next((i for i, r in enumerate(in_rows) if r), None)
            if first is not None:
                self.materialize_each(in_rows[first][:1], nodes[:first + 1])
                continue
            self.groups.append(KernelGroup(self.kernel_name(), current, list(targets)))
            return

    def schedule_apart(self, nodes, targets, current):
        """Outputs that cannot share a kernel: as few groups as first-fit finds."""
        buckets = []
        for n, c, t in zip(nodes, current, targets):
            for b in buckets:
                if self.fits(b[2] + [c]):
                    b[0].append(n)
                    b[1].append(t)
                    b[2].append(c)
                    break
            else:
                buckets.append(([n], [t], [c]))
        if len(buckets) == 1:
            raise FusionError("these outputs cannot be computed by one kernel",
                              nodes[0].loc)
        for b_nodes, b_targets, _ in buckets:
            self.schedule(b_nodes, b_targets)


def merge_groups(s):
    """Fewer kernels: move each kernel into the earliest one it can share a launch with (it
    reads nothing that kernel or a later one writes, and one kernel can compute both)."""
    merged = []
    for g in s.groups:
        reads = {n.arg for n in toposort(g.outputs) if n.op is Op.BUFFER}
        written_by = {t[1]: i for i, m in enumerate(merged) for t in m.targets if t[0] == "tmp"}
        first = max((written_by[r] + 1 for r in reads if r in written_by), default=0)
        for m in merged[first:]:
            if s.fits(m.outputs + g.outputs):
                m.outputs, m.targets = m.outputs + g.outputs, m.targets + g.targets
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
    ``generic``: kernels generic in their row count (see ``lowering.fusion.GENERIC_ROWS``);
    their reductions are never split by row count, which such a kernel does not know.

    ``on_chip(kernel)``: whether the lowering keeps ``kernel``'s rows on chip by splitting
    each across a cluster of blocks. Where the long reductions over few rows would be split
    into several kernels, but one kernel holding the rows that way computes everything,
    the one kernel is taken: the kernels would read the rows again for every reduction
    that depends on another (softmax, layernorm at 128 x 65536 on the H200: 1369 and
    1940 GB/s as kernels, 3211 and 2883 as one, bench/RESULTS.md)."""
    targets = [("out", i) for i in range(len(outputs))]
    setup = (layouts, name, arg_names, out_layouts, generic, FactsCache(generic))
    s = Scheduler(graph, *setup)
    split = s.split_long_reductions(outputs) if split_long and not generic else outputs
    if on_chip is not None and any(a is not b for a, b in zip(split, outputs)):
        whole = Scheduler(graph, *setup)
        try:
            whole.schedule(outputs, targets)
        except FusionError:         # the split graph may still go: try that below
            whole.groups = []
        groups = merge_groups(whole)
        if len(groups) == 1 and on_chip(whole.build(groups[0])):
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
            for g in groups:
                s.build(g)
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
        if not s.fits(outputs):
            return groups
        folded = KernelGroup(reader.name, outputs, targets)
        return groups[:own] + groups[own + 1:i] + [folded] + groups[i + 1:]
    return groups


def format_schedule(groups):
    return "\n\n".join(f"kernel {g.name} -> {g.targets}:\n{format_graph(g.outputs)}"
                       for g in groups)
