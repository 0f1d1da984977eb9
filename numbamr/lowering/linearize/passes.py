"""Passes over a loop group: a depth's reduces accumulated, the outputs stored."""
import numpy as np

from ...ops import Op, ReduceKind
from ..evaluate import walk
from ..heuristics import PROFILE
from .literals import ARG_SENTINEL, const_literal, identity_literal, is_arg, memory_dtype

WIDE_PRODUCTS = {np.dtype(np.float16), np.dtype(np.float32)}   # multiplied out in float64


class PassesMixin:
    """The reduce pass and the store passes of a kernel, and the accumulators they use."""

    def prerender(self, vals):
        """Render the row-level parts of ``vals`` now, before a pass (hoisting)."""
        for v in vals:
            for w in walk(v):
                if self.group_of(w) is None:
                    self.row_value(w)

    def reduce_pass(self, g, insts):
        plan = self.L.groups[g.id]
        self.add("COMMENT", arg="reduce " + ", ".join(
            f"#{r.id} {r.kind.value}" for r in insts) + f" over {g.var.name} {g.dims}")
        accs = {}
        for r in insts:
            accs[r.id] = []
            for suffix, dt, init in self.acc_spec(r):
                acc = self.names.new(f"acc_{r.name}{suffix}")
                accs[r.id].append(acc)
                self.add("DEFINE_ACC", (acc,), arg=init, dtype=dt)
        if g.extent == 0:            # reducing nothing: the accumulators keep their identity
            self.accs.update(accs)
            return
        self.prerender([r.body for r in insts])
        # one-pass (fused) reduces take one update per loop iteration when no chunk of it is
        # masked by position (a split row's resident chunks too; not staged ones: they are
        # walked by a loop); a row mask alone wraps the one update
        batchable = not plan.resident or (self.L.split > 1 and not plan.staged)
        pending = {r.id: [] for r in insts}
        early, seen = self.prefetched_loads(g, insts), []
        # peeled where a one-pass reduce then updates once an iteration (Welford: one
        # division an iteration, not one an element; docs/heuristics.md#peeled-rows)
        peel = any(r.id in self.fused_first for r in insts)
        for ch in self.chunks(g, peel):
            batched = batchable and ch.whole
            updates = []
            for r in insts:
                if r.id in self.picks:
                    updates.append(("PICK", r, self.pick_test(r, ch), r.kind))
                    continue
                vals = [self.elem_value(r.body, ch, v) for v in range(ch.width)]
                if r.id in self.fused_first:
                    pending[r.id] += vals
                    if not batched or ch.u == plan.chunks - 1:
                        updates.append(("ONLINE", r, tuple(pending[r.id]),
                                        self.fused_first[r.id].kind))
                        pending[r.id] = []
                    continue
                for v, val in enumerate(vals):
                    pos = (self.position(ch, v),) if is_arg(r) else ()
                    updates.append(("ACC", r, (val,) + pos, r.kind))
            seen.append(ch)
            if early and len(seen) == plan.chunks:     # after the row's last chunk is loaded
                for c in seen:
                    for val in early:
                        for v in range(c.width):
                            self.elem_value(val, c, v)
            if ch.mask and updates:
                self.add("IF", srcs=(ch.mask,), arg=ch.mask)
            for op, r, srcs, kind in updates:
                if op == "PICK":
                    self.pick_update(r, tuple(accs[r.id]), srcs)
                    continue
                self.add(op, tuple(accs[r.id]), tuple(accs[r.id]) + srcs, arg=kind,
                         dtype=self._acc_dtype(r, 0) if kind is ReduceKind.PROD
                         else r.body.dtype)
            if ch.mask and updates:
                self.add("ENDIF", arg=ch.mask)
        assert not any(pending.values()), "values left out of a one-pass update"
        self.accs.update(accs)

    def acc_spec(self, r):
        """(name suffix, dtype, initial value) of each accumulator of reduce ``r``."""
        if r.id in self.fused_first:
            dt = r.body.dtype
            zero, ninf = const_literal(0.0, dt), const_literal(float("-inf"), dt)
            if self.fused_first[r.id].kind == "welford":
                return [("_n", dt, zero), ("_mean", dt, zero), ("_m2", dt, zero)]
            return [("_max", dt, ninf), ("_sum", dt, zero)]
        if is_arg(r):
            return [("", r.value_dtype, identity_literal(r)),
                    ("_idx", np.dtype(np.int64), const_literal(ARG_SENTINEL, np.int64))]
        if r.kind is ReduceKind.PROD and np.dtype(r.dtype) in WIDE_PRODUCTS:
            # a float32 product of values near 1 drifts: each rounding of a partial product
            # near 1 leans one way (the spacing of floats halves below 1), and strided
            # partials stay near 1 (511000 factors 1 +- 6e-6 in 800 strided float32 partials
            # came out 3.6e-3 low)
            f64 = np.dtype(np.float64)
            return [("", f64, const_literal(1.0, f64))]
        return [("", r.dtype, identity_literal(r))]

    def position(self, ch, v):
        name = self.names.new(f"pos_{ch.qvar}_{v}")
        self.add("INDEX", (name,), (ch.qvar,), arg=f"{ch.qvar} + {v}" if v else ch.qvar)
        return name

    def prefetched_loads(self, g, insts):
        """Loads of the outputs over ``g`` that are the same for every row (a weight), to be
        issued with the first pass over a split row's chunks rather than after its blocks
        exchange: their latency then hides behind the exchange, and the outputs find them in
        registers. Only where they hold no more values than the row's own chunks do, and
        not in blocks of 1024 threads, whose registers the row's values nearly fill
        (docs/heuristics.md#prefetched-weights). Rows not split, too, where their blocks are
        fewer than the GPU's multiprocessors: such a kernel waits on each load in turn, and
        the weights' latency hides behind the block's combine (up to two weights a row
        input; docs/heuristics.md#few-rows)."""
        plan = self.L.groups[g.id]
        few = self.L.split == 1 and -(-self.k.layout_rows // self.L.rows_per_block) < PROFILE.sms
        if (self.L.split == 1 and not few) or not plan.resident or plan.staged or \
                insts[0].depth != 0 or self.L.block_threads > 512:
            return []                   # (one pass over ``g`` is at depth 0: loaded once)
        stores = [s.value for s in self.k.stores if s.group is g]
        loads = {w.id: w for v in stores for w in walk(v) if w.op is Op.LOAD}
        own = {w.id for r in insts for w in walk(r.body) if w.op is Op.LOAD}
        shared = [w for i, w in loads.items() if i not in own and w.arg[1].vars() <= {g.var}]
        return shared if 0 < len(shared) <= len(own) * (2 if few else 1) else []

    def row_stores(self):
        stores = [s for s in self.k.stores if s.group is None]
        if not stores:
            return
        self.add("COMMENT", arg="row-level outputs")
        vals = []
        for s in stores:
            self.prerender([s.value])
            vals.append(self.cast(self.row_value(s.value), s.value.dtype, s.dtype))
        cond = "lane == 0" + (f" and {self.row_mask}" if self.row_mask else "") + \
            (" and seg == 0" if self.L.split > 1 else "")
        self.add("IF", srcs=("lane",) + ((self.row_mask,) if self.row_mask else ()) +
                 (("seg",) if self.L.split > 1 else ()), arg=cond)
        for s, val in zip(stores, vals):
            text, names = self.address(s.addr, None, 0)
            self.add("STORE", (), (self.buf[("out", s.output)], self._stored(val, s.dtype)) +
                     names, arg=text, dtype=memory_dtype(s.dtype))
        self.add("ENDIF", arg=cond)

    def store_pass(self, g, stores):
        self.add("COMMENT", arg=f"outputs over {g.var.name} {g.dims}")
        self.prerender([s.value for s in stores])
        for ch in self.chunks(g):
            writes = []
            for s in stores:
                vals = [self._stored(self.cast(self.elem_value(s.value, ch, v), s.value.dtype,
                                               s.dtype), s.dtype)
                        for v in range(ch.width)]
                writes.append((s, vals))
            if ch.mask:
                self.add("IF", srcs=(ch.mask,), arg=ch.mask)
            for s, vals in writes:
                buf, dt = self.buf[("out", s.output)], memory_dtype(s.dtype)
                if self.vectorizable(s.addr, ch, ("out", s.output), s.dtype):
                    text, names = self.address(s.addr, ch, 0)
                    self.add("VSTORE", (), (buf,) + tuple(vals) + names, arg=(text, len(vals)),
                             dtype=dt)
                    continue
                for v, val in enumerate(vals):
                    text, names = self.address(s.addr, ch, v)
                    self.add("STORE", (), (buf, val) + names, arg=text, dtype=dt)
            if ch.mask:
                self.add("ENDIF", arg=ch.mask)
