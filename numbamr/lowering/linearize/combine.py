"""Combines across threads: warp shuffles, shared-memory partials, split rows' exchanges."""
import numpy as np

from ...ops import Op
from .literals import const_literal, is_arg

# shared-memory partials combined without a loop (see combine_partials): a row layout has at
# most 32 (1024 threads), where a loop costs (docs/heuristics.md#unrolled-partials); a column
# layout with more threads down each column (forced, or packed columns) halves them in steps
# (tree_combine, docs/heuristics.md#tree-partials)
UNROLLED_PARTIALS = 32


class CombineMixin:
    """A depth's reduces combined across a row's threads (and a split row's blocks), and
    their results named."""

    def combine_level(self, level, last=False):
        """The reduces of one depth combined across each row's threads: warp shuffles, then
        (rows wider than a warp, or column layouts) every reduce's partials written to its
        shared array behind one barrier for all of them, then split rows' exchanges.
        ``last``: nothing after this level needs a row's results but its first thread
        (they are only stored, once a row): the other threads leave once the partials
        are published, and only the first reads them back."""
        if not level:       # every reduce of this depth comes out of a fused one
            return
        L = self.L
        t = L.threads_per_row
        accs = {}
        for r in level:
            self.add("COMMENT", arg=f"combine #{r.id} {r.kind.value} across {t} threads")
            accs[r.id] = self.warp_combine(r) if t > 1 and L.layout == "row" else \
                list(self.accs[r.id])
        if t > 1 and (L.layout == "col" or t > 32):
            self.shared_combine(level, accs, last)
        for r in level:
            self.finish(r, self.exchange(r, self._kind(r), accs[r.id]) if L.split > 1
                        else accs[r.id])

    def _kind(self, r):
        return self.fused_first[r.id].kind if r.id in self.fused_first else r.kind

    def warp_combine(self, r):
        accs = list(self.accs[r.id])
        for off in _halvings(min(self.L.threads_per_row, 32)):
            others = [self.names.new(f"{a}_x{off}") for a in accs]
            for i, (a, o) in enumerate(zip(accs, others)):
                self.add("SHFL", (o,), (a,), arg=(off, r.id), dtype=self._acc_dtype(r, i))
            self.add("COMBINE", tuple(accs), tuple(accs) + tuple(others) + ("lane",),
                     arg=(self._kind(r), off), dtype=r.body.dtype if r.id in self.fused_first
                     else r.dtype)
        return accs

    def shared_combine(self, level, accs, last=False):
        """Each warp's (column layout: each thread's) partials of every reduce in ``level``
        to shared memory, one barrier, then each row's partials combined in order (by the
        row's first thread alone where the level is ``last``: every thread reading every
        partial kept the shared memory busy after the loads were done,
        docs/heuristics.md#first-thread-tail)."""
        t = self.L.threads_per_row
        if self.L.layout == "row":
            count, write_idx, cond = t // 32, "rib, lane // 32", "lane % 32 == 0"
        else:
            count, write_idx, cond = t, "lane, rib", None
        smem = {r.id: [s[0] for s in self.shared if s[3] == r.id] for r in level}
        if cond:
            self.add("IF", srcs=("lane",), arg=cond)
        for r in level:
            for i, (a, s) in enumerate(zip(accs[r.id], smem[r.id])):
                self.add("SHARED_STORE", (), (s, a), arg=(write_idx, r.id),
                         dtype=self._acc_dtype(r, i))
        if cond:
            self.add("ENDIF", arg=cond)
        self.add("BARRIER", arg=tuple(r.id for r in level))
        if self.L.layout == "col" and count > UNROLLED_PARTIALS and count & (count - 1) == 0:
            self.tree_combine(level, accs, smem, count, last)
            return
        if last:
            self.add("EXIT", srcs=("lane",), arg="lane == 0")
        for r in level:
            accs[r.id] = self.combine_partials(r, self._kind(r), smem[r.id], count)

    def tree_combine(self, level, accs, smem, count, last=False):
        """A column's ``count`` partials (a power of two past UNROLLED_PARTIALS) halved in
        log2(count) steps, each behind a barrier: the lower half of the column's threads
        take in the partial ``off`` threads above theirs and write the result back; then
        every thread reads the column's result from its first slot. Combined in order, every
        thread of the block would read all ``count`` partials of every reduce
        (docs/heuristics.md#tree-partials)."""
        ids = tuple(r.id for r in level)
        for off in _halvings(count):
            cond = f"lane < {off}"
            self.add("IF", srcs=("lane",), arg=cond)
            for r in level:
                self._take_in_partner(r, accs[r.id], smem[r.id], off)
            self.add("ENDIF", arg=cond)
            self.add("BARRIER", arg=ids)
        if last:
            self.add("EXIT", srcs=("lane",), arg="lane == 0")
        for r in level:
            res = [self.names.new(f"{r.name}_v") for _ in smem[r.id]]
            self._shared_loads(r, res, smem[r.id], "0, rib")
            accs[r.id] = res

    def _take_in_partner(self, r, mine, smem, off):
        """One step of tree_combine for reduce ``r``: this thread's partials ``mine``
        combined with those of the thread ``off`` lanes above it, and written back."""
        others = [self.names.new(f"{a}_t{off}") for a in mine]
        self._shared_loads(r, others, smem, f"lane + {off}, rib")
        self.add("COMBINE", tuple(mine), tuple(mine) + tuple(others),
                 arg=(self._kind(r), None), dtype=self._acc_dtype(r, 0))
        for i, (a, s) in enumerate(zip(mine, smem)):
            self.add("SHARED_STORE", (), (s, a), arg=("lane, rib", r.id),
                     dtype=self._acc_dtype(r, i))

    def _shared_loads(self, r, names, smem, index, srcs=()):
        """``names`` read from reduce ``r``'s shared arrays ``smem`` (one an accumulator) at
        ``index``; ``srcs``: a loop variable the index text reads."""
        for i, (n, s) in enumerate(zip(names, smem)):
            self.add("SHARED_LOAD", (n,), (s,) + srcs, arg=(index, r.id),
                     dtype=self._acc_dtype(r, i))

    def finish(self, r, accs):
        """The row's combined accumulators become the reduce's result."""
        if r.id in self.fused_first:
            self.fused_results(self.fused_first[r.id], accs)
            return
        name = self.names.new(r.name)
        src = accs[1] if is_arg(r) else self.cast(accs[0], self._acc_dtype(r, 0), r.dtype)
        self.add("ALU", (name,), (src,), arg="copy", dtype=r.dtype)
        self.red[r.id] = name

    def exchange(self, r, kind, accs):
        """A split row: each block publishes its partial, waits for the row's other blocks,
        then combines all the row's partials in segment order (every block the same bits)."""
        split = self.L.split
        slots = list(range(self.xslots, self.xslots + len(accs)))
        self.xslots += len(accs)
        dts = [self._acc_dtype(r, j) for j in range(len(accs))]

        def at(slot, block):        # xpart is [slot][row][block of the row]
            return f"{slot * self.xrows * split} + row * {split} + {block}"

        # the row's combined partial is in every thread of the row: its first one publishes
        self.add("COMMENT", arg=f"exchange #{r.id} across the {split} blocks of the row")
        self.add("XOPEN", arg=self.xsyncs)
        self.add("IF", srcs=("lane",), arg="lane == 0")
        for a, slot, dt in zip(accs, slots, dts):
            self.add("XSTORE", (), (a, "row", "seg") + self._xpart(),
                     arg=(at(slot, "seg"), slot, "seg", self.xsyncs), dtype=dt)
        self.add("ENDIF", arg="lane == 0")
        self.add("XSYNC", (), (self.xflag, "tile", "tid") if self.xflag else (),
                 arg=(self.xsyncs, split))
        self.xsyncs += 1

        def load(names, i):
            for nm, slot, dt in zip(names, slots, dts):
                self.add("XLOAD", (nm,), ("row",) + self._xpart(), arg=(at(slot, i), slot, i),
                         dtype=dt)
        return self.combine_in_order(r, kind, load, split, dts, "x")

    def _xpart(self):
        return (self.xpart,) if self.xpart else ()

    def combine_partials(self, r, kind, smem, count):
        """The ``count`` partials a row left in shared memory, combined in order. Past
        UNROLLED_PARTIALS (a forced column layout of more than 32 threads a column, in a
        count that tree_combine cannot halve) they go through a loop, in the same order
        (same bits): unrolled, numba's compile time grows faster than linearly with the
        number of basic blocks."""
        row = self.L.layout == "row"
        dts = [self._acc_dtype(r, j) for j in range(len(smem))]

        def load(names, i):
            self._shared_loads(r, names, smem, f"rib, {i}" if row else f"{i}, rib",
                               (i,) if isinstance(i, str) else ())
        return self.combine_in_order(r, kind, load, count, dts, "")

    def combine_in_order(self, r, kind, load, count, dts, tag0):
        """Partials 0..count-1, read by ``load(names, i)``, combined left to right."""
        res = [self.names.new(f"{r.name}{tag0}_{'v' if i == 0 else 'idx'}")
               for i in range(len(dts))]

        def step(i, tag):
            others = [self.names.new(f"{n}_{tag}") for n in res]
            load(others, i)
            self.add("COMBINE", tuple(res), tuple(res) + tuple(others), arg=(kind, None),
                     dtype=dts[0])

        load(res, 0)
        if count <= UNROLLED_PARTIALS:
            for i in range(1, count):
                step(i, i)
            return res
        it = self.names.new("part")
        self.add("LOOP", (it,), arg=(count - 1, None))
        index = self.names.new("p")
        self.add("INDEX", (index,), (it,), arg=f"{it} + 1")
        step(index, "p")
        self.add("ENDLOOP", arg=None)
        return res

    def fused_results(self, f, accs):
        """A's and B's results out of the fused accumulators."""
        a, b = f.first, f.second
        dt = a.body.dtype
        name_a, name_b = self.names.new(a.name), self.names.new(b.name)
        if f.kind == "welford":          # A = mean * n, B = M2
            self.add("ALU", (name_a,), (accs[1], const_literal(float(a.group.extent), dt)),
                     arg=Op.MUL, dtype=dt)
            self.add("ALU", (name_b,), (accs[2],), arg="copy", dtype=dt)
        else:       # A = max, B = sum of exp(x - max); NaN when max is -inf, as two passes give
            self.add("ALU", (name_a,), (accs[0],), arg="copy", dtype=dt)
            finite = self.names.new(f"{a.name}_gt_ninf")
            self.add("ALU", (finite,), (accs[0], const_literal(float("-inf"), dt)), arg=Op.NE,
                     dtype=np.dtype(bool))
            self.add("ALU", (name_b,), (finite, accs[1], const_literal(float("nan"), dt)),
                     arg=Op.WHERE, dtype=dt)
        self.red[a.id], self.red[b.id] = name_a, name_b

    def _acc_dtype(self, r, i):
        """dtype of accumulator ``i`` of ``r``."""
        return self.acc_spec(r)[i][1]


def _halvings(n):
    off = n // 2
    while off >= 1:
        yield off
        off //= 2
