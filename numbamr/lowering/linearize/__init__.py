"""Linearize: a Kernel plus a Layout becomes a linear program of ``Instr``s.

The program is what the emitter prints, one rule per op. Its shape:

    prologue      thread/row indices, one shared array per reduce
    for each reduce depth (deepest first):
      one pass per loop group: accumulate every reduce of that depth and group
      combine each reduce across threads (shuffles, its own shared array, a barrier)
    row-level outputs (one write per row)
    one pass per loop group for the full-shape outputs

A *pass* over a group is either resident (straight-line code over the thread's chunks; values
stay in registers, so later passes reuse them) or a loop over chunks (values reloaded).
Row-level values are rendered before a pass opens, so loop-invariant work sits outside loops.

The builders are mixins, one module each: ``prologue`` (parameters, indices, shared memory),
``chunks`` (the chunks of a pass), ``passes`` (reduce and store passes), ``combine`` (warp and
block combines, split rows' exchanges), ``persistent`` (a persistent cluster's row loop),
``values`` and ``loads`` (rendering values, loads and addresses); ``program`` holds the
instructions and the table of their ops.
"""
from ...ops import Op
from ..evaluate import walk
from ..heuristics import occupancy_shared
from ..ranges import reciprocal_in_range
from .chunks import ChunksMixin
from .combine import UNROLLED_PARTIALS, CombineMixin
from .literals import ARG_SENTINEL, const_literal, exchange_dtype, identity_literal, is_arg
from .loads import LoadsMixin
from .names import Names
from .passes import PassesMixin
from .persistent import PersistentRowsMixin
from .picks import PicksMixin
from .program import OPS, Instr, OpInfo, Program, format_program
from .prologue import PrologueMixin
from .values import RECIP_SCALE, ValuesMixin, products_added_to

__all__ = ["linearize", "Linearizer", "Instr", "Program", "OPS", "OpInfo", "format_program",
           "const_literal", "exchange_dtype", "identity_literal", "is_arg", "ARG_SENTINEL",
           "RECIP_SCALE", "UNROLLED_PARTIALS", "products_added_to",
           "reciprocal_in_range"]


class Linearizer(PrologueMixin, PersistentRowsMixin, ChunksMixin, PassesMixin, PicksMixin,
                 CombineMixin, ValuesMixin, LoadsMixin):
    """One kernel's linear program, built by the mixins: the prologue, passes over chunks,
    combines, values and loads."""

    def __init__(self, kernel, layout, aligned=None, simulator=False, fusions=()):
        self.k, self.L = kernel, layout
        self.fused_first = {f.first.id: f for f in fusions}     # A: computed with B
        self.fused_second = {f.second.id: f for f in fusions}   # B: comes out of A
        self.added_products = products_added_to(kernel)
        self.aligned = aligned            # buffer positions whose base is 16-byte aligned
        self.simulator = simulator
        self.instrs, self.names = [], Names()
        self.row_memo = {}                # Val id -> name or literal (row-level values)
        self.recip_memo = {}              # Val id -> (reciprocal, scale) of a row-level divisor
        self.elem_memo = {}               # (Val id, group id, u, v) -> name
        self.column_lanes = {}            # a packed row's column 0 load id -> [(id, j)]
        for lane, (head, j) in kernel.lanes.items():
            self.column_lanes.setdefault(head.id, []).append((lane, j))
        self.index_memo = {}              # rendered row-level index text -> name
        self.red = {}                     # reduce id -> (value name, index name or None)
        self.shared = []
        self.params = []
        self.var_cache = {}
        self.group_vars = {g.var: g for g in kernel.groups}
        self.accs = {}                    # reduce id -> accumulator names (value[, index])
        self.resident_q = {}              # (group id, chunk) -> (position name, mask name)
        self.stage_slot = {}              # Val id -> (array name, element offset): staged rows
        self.staged_done = set()          # Val ids whose staged chunks are in shared memory
        self.staging = set()              # ... being stored by the pass now open
        self.stage_bytes = 0
        self.streamed = {}                # group id -> streamed passes opened so far
        self.block_begin = None           # where the outermost open block starts (hoisting)
        self.depth = 0
        self.hoisting = False
        self.picks = {r.id: parts for r in kernel.reduces if r.id not in self.fused_first and
                      r.id not in self.fused_second and (parts := self.pick_parts(r))}

    # ---- small helpers -----------------------------------------------------------------
    def add(self, op, out=(), srcs=(), arg=None, dtype=None):
        ins = Instr(op, tuple(out), tuple(srcs), arg, dtype)
        if self.hoisting and self.block_begin is not None:
            self.instrs.insert(self.block_begin, ins)    # before the open block: top scope
            self.block_begin += 1
            return
        if op in ("IF", "LOOP"):
            if self.depth == 0:
                self.block_begin = len(self.instrs)
            self.depth += 1
        elif op in ("ENDIF", "ENDLOOP"):
            self.depth -= 1
            if self.depth == 0:
                self.block_begin = None
        self.instrs.append(ins)

    def hoisted(self, fn, *args):
        """Run ``fn`` with its instructions placed before the open block (row-level work)."""
        before, self.hoisting = self.hoisting, True
        try:
            return fn(*args)
        finally:
            self.hoisting = before

    def group_of(self, val):
        vs = self.var_cache.get(val.id)
        if vs is None:
            for w in walk(val):
                if w.id in self.var_cache:
                    continue
                if w.op is Op.LOAD:
                    s = {self.group_vars[x] for x in w.arg[1].vars() if x in self.group_vars}
                elif w.op is Op.INDEX:
                    s = {self.group_vars[x] for x in w.arg.vars() if x in self.group_vars}
                else:
                    s = set()
                    for src in w.srcs:
                        s |= self.var_cache[src.id]
                self.var_cache[w.id] = frozenset(s)
            vs = self.var_cache[val.id]
        assert len(vs) <= 1, "a value depends on two loops"
        return next(iter(vs)) if vs else None

    # ---- program -----------------------------------------------------------------------
    def run(self):
        k, L = self.k, self.L
        self.prologue()
        self.early_row_loads()
        depths = sorted({r.depth for r in k.reduces})
        for d in depths:
            level = [r for r in k.reduces if r.depth == d and r.id not in self.fused_second]
            for g in k.groups:
                insts = [r for r in level if r.group is g]
                if insts:
                    self.reduce_pass(g, insts)
            self.combine_level(level, last=d == depths[-1] and self.results_only_stored())
        self.row_stores()
        for g in k.groups:
            stores = [s for s in k.stores if s.group is g]
            if stores:
                self.store_pass(g, stores)
        if L.persistent:
            self.close_rows()
        return Program(k.name, self.instrs, self.params, L.block_threads, grid_of(k, L), L, k,
                       self.shared,
                       max(self.stage_bytes, occupancy_shared(L.blocks_per_sm)))

    def early_row_loads(self):
        """The loads that only row-level outputs read (the shift of a split variance, in the
        kernel that combines its segments), issued before the reduce passes: after the last
        combine, their latency would come on top of the kernel's."""
        if not self.k.reduces:
            return
        for s in self.k.stores:
            if s.group is not None:
                continue
            for w in walk(s.value):
                if w.op is Op.LOAD and self.group_of(w) is None and \
                        not any(u.op is Op.REDUCED for u in walk(w)):
                    self.row_value(w)

    def results_only_stored(self):
        """Whether the last reduces' results are needed by the first thread of each row
        alone: every output is stored once a row (none along a loop), and the row is not
        split across blocks (their exchange) or walked by a persistent loop."""
        from ...experimental import current_knobs
        L = self.L
        return all(s.group is None for s in self.k.stores) and L.split == 1 and \
            not L.persistent and current_knobs().first_thread_tail


def grid_of(kernel, layout):
    """Blocks of a launch of ``kernel`` laid out as ``layout`` (a persistent kernel's grid
    is sized again at launch, for the GPU)."""
    return -(-kernel.nrows // layout.rows_per_block) * layout.split


def linearize(kernel, layout, aligned=None, simulator=False, fusions=()):
    return Linearizer(kernel, layout, aligned, simulator, fusions).run()
