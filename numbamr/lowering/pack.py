"""Adjacent columns a thread: a column layout's kernel rewritten so that each of its rows
is ``w`` adjacent rows (columns of the user's array) of the kernel it was built as.

A column layout's warp reads 32 adjacent columns of one position at once: 64 bytes of a
two-byte dtype, where four-byte elements make 128 (docs/heuristics.md#column-pairs). The
packed kernel computes every value, reduce and store ``w`` times, once for each column of
its row ``r'`` (the original row ``w r' + j``), and each load that reads adjacent columns
becomes one vector load of ``w`` elements: ``lanes`` names, for the load of column ``j``,
the load of column 0 whose vector it is element ``j`` of.
"""
from dataclasses import replace

import numpy as np

from ..ops import Op
from . import symbolic as sym
from .evaluate import ReduceInstance, Val, walk
from .kernel import Store


def pack_columns(kernel, w):
    """``kernel`` with ``w`` adjacent rows a row, or None where that cannot be: a row
    count ``w`` does not divide, a generic kernel (any row count), or a load along a loop
    whose ``w`` columns are not ``w`` adjacent, aligned elements."""
    if w == 1 or kernel.generic or kernel.nrows % w:
        return None
    packer = _Packer(kernel, w)
    return packer.run()


class _Packer:
    def __init__(self, kernel, w):
        self.k, self.w = kernel, w
        self.row = sym.Var(kernel.row.name, kernel.nrows // w)
        self.subs = [{kernel.row: sym.lift(self.row) * w + j} for j in range(w)]
        vals = [v for r in kernel.reduces for v in walk(r.body)] + \
            [v for s in kernel.stores for v in walk(s.value)]
        self.next_val = 1 + max((v.id for v in vals), default=0)
        self.next_reduce = 1 + max((r.id for r in kernel.reduces), default=0)
        self.rowwise = {}           # Val id -> does it depend on the row
        self.memo = {}              # (column, Val id) -> its Val for that column
        self.reduces = {}           # (column, reduce id) -> ReduceInstance
        self.lanes = {}             # load Val id (column j > 0) -> (column 0's load, j)

    def run(self):
        k, w = self.k, self.w
        reduces = []
        for r in k.reduces:
            for j in range(w) if self.depends(r) else (0,):
                reduces.append(self.reduce(r, j))
        stores = [Store(s.output, self.val(s.value, j), s.addr.substitute(self.subs[j]),
                        s.dtype, s.group)
                  for s in k.stores for j in range(w)]
        if not self.pair_loads():
            return None
        reduces.sort(key=lambda r: r.depth)     # (stable: dependency order within a depth)
        return replace(k, row=self.row, pshape=(k.nrows // w,), reduces=reduces,
                       stores=stores, columns=w, lanes=self.lanes)

    # ---- which values change with the row ----------------------------------------------
    def depends(self, x):
        """Does Val or ReduceInstance ``x`` change from row to row?"""
        if isinstance(x, ReduceInstance):
            return any(self.k.row in e.vars() for e in x.key) or self.depends(x.body)
        if x.id not in self.rowwise:
            for v in walk(x):
                if v.id in self.rowwise:
                    continue
                if v.op is Op.LOAD:
                    own = self.k.row in v.arg[1].vars()
                elif v.op is Op.INDEX:
                    own = self.k.row in v.arg.vars()
                elif v.op is Op.REDUCED:
                    own = self.depends(v.arg)
                else:
                    own = False
                self.rowwise[v.id] = own or any(self.rowwise[s.id] for s in v.srcs)
        return self.rowwise[x.id]

    # ---- one column's copy ---------------------------------------------------------------
    def val(self, v, j):
        """``v`` for column ``j`` of a packed row (``v`` itself where it is the same for
        every row)."""
        if not self.depends(v):
            return v
        for u in walk(v):
            if (j, u.id) in self.memo or not self.depends(u):
                continue
            srcs = tuple(self.memo.get((j, s.id), s) for s in u.srcs)
            self.memo[(j, u.id)] = Val(u.op, u.dtype, srcs, self.arg(u, j), self.next_val)
            self.next_val += 1
        return self.memo[(j, v.id)]

    def arg(self, u, j):
        if u.op is Op.LOAD:
            return (u.arg[0], u.arg[1].substitute(self.subs[j]))
        if u.op is Op.INDEX:
            return u.arg.substitute(self.subs[j])
        if u.op is Op.REDUCED:
            return self.reduces[(j, u.arg.id)] if self.depends(u.arg) else u.arg
        return u.arg

    def reduce(self, r, j):
        if not self.depends(r):
            return r
        inst = ReduceInstance(self.next_reduce, r.kind, r.dtype, r.value_dtype, r.group,
                              self.val(r.body, j),
                              tuple(e.substitute(self.subs[j]) for e in r.key), r.node,
                              depth=r.depth)
        inst.deps = [self.reduces[(j, d)].id if (j, d) in self.reduces else d
                     for d in r.deps]
        self.next_reduce += 1
        self.reduces[(j, r.id)] = inst
        return inst

    # ---- the loads of a packed row's columns: one vector ---------------------------------
    def pair_loads(self):
        """Name each column's load as an element of column 0's vector load; False where a
        load along a loop reads columns that are not adjacent, aligned elements."""
        heads = {}
        for (j, vid), u in self.memo.items():
            if u.op is Op.LOAD:
                heads.setdefault(vid, [None] * self.w)[j] = u
        for vid, copies in heads.items():
            first = copies[0].arg[1]
            lined_up = all((c.arg[1] - first) == j for j, c in enumerate(copies)) and \
                first.const % self.w == 0 and all(c % self.w == 0 for _, c in first.terms)
            if not lined_up:
                if _along_a_loop(self.k, copies[0]):
                    return False
                continue
            for j, c in enumerate(copies[1:], 1):
                self.lanes[c.id] = (copies[0], j)
        return True


def _along_a_loop(kernel, load):
    loop_vars = {g.var for g in kernel.groups}
    return bool(load.arg[1].vars() & loop_vars)


def word_columns(kernel):
    """Adjacent columns whose narrowest row-dependent load makes one 4-byte word (2 of a
    two-byte dtype, 4 of a one-byte one); 1 where every such load is a word or more."""
    roots = [r.body for r in kernel.reduces] + [s.value for s in kernel.stores]
    sizes = [np.dtype(v.dtype).itemsize for root in roots for v in walk(root)
             if v.op is Op.LOAD and kernel.row in v.arg[1].vars()]
    return max(1, 4 // min(sizes, default=4))


# Columns a thread of a column layout takes unless forced. Pairs of two-byte columns cut
# batch-norm statistics of 262144 x 128 bfloat16 on the H100 (28.5 -> 26.2 us) but made the
# same statistics of 16384 x 1024 six times slower (13.4 -> 79.0 us), where its 64 threads a
# column combined their partials in order: columns=2 is an option and an autotuner candidate
# until the halving combine that replaced that is timed (docs/heuristics.md#column-pairs).
DEFAULT_COLUMNS = 1
