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
"""
import builtins
import keyword
from dataclasses import dataclass, field

import numpy as np

from ..ops import Op, ReduceKind
from .kernel import BY_RECIPROCAL, walk
from .ranges import reciprocal_in_range
from . import symbolic as sym

ARG_SENTINEL = 1 << 62       # index of an arg-reduce that has seen no element yet
# (smallest normal, largest value with a normal reciprocal, rescaling power of two) per dtype
RECIP_SCALE = {np.dtype(np.float32): (2.0 ** -126, 2.0 ** 126, 2.0 ** 64),
               np.dtype(np.float64): (2.0 ** -1022, 2.0 ** 1022, 2.0 ** 512)}
WIDE_PRODUCTS = {np.dtype(np.float16), np.dtype(np.float32)}   # multiplied out in float64
ROUNDED_PRODUCTS = {np.dtype(np.float32), np.dtype(np.float64)}  # mul_rn takes these


@dataclass
class Instr:
    op: str                  # see Program docstring
    out: tuple = ()          # names defined
    srcs: tuple = ()         # names read
    arg: object = None
    dtype: object = None

    def __repr__(self):
        out = ", ".join(self.out)
        return f"{out + ' = ' if out else ''}{self.op} {self.arg!r} <- {', '.join(self.srcs)}"


@dataclass
class Program:
    """The linear program of one kernel.

    ops: SPECIAL (thread/block index), INDEX (integer expression), CONST, LOAD, VLOAD,
    ALU, CAST, DEFINE_ACC, ACC (accumulate), SHFL (warp exchange), SHARED (declare a
    shared array), SHARED_STORE, SHARED_LOAD, COMBINE, BARRIER, STORE, VSTORE, LOOP/ENDLOOP,
    IF/ENDIF, PASS/ENDPASS (markers around the chunks of a resident pass), COMMENT;
    split rows only: XOPEN (an exchange begins), XSTORE (publish a partial), XSYNC (wait
    for the row's blocks), XLOAD (read a partial). XSTORE's arg: (index into xpart, slot,
    block of the row, exchange); XLOAD's: (index into xpart, slot, block of the row); both
    read xpart (their last source) unless the blocks are a cluster on a GPU.
    """
    name: str
    instrs: list
    params: list             # (name, 'in'|'out', dtype, position)
    block: int
    grid: int
    layout: object
    kernel: object
    shared: list = field(default_factory=list)   # (name, shape, dtype, reduce id)
    dynamic_shared: int = 0  # bytes of dynamic shared memory (staged rows)


def format_program(p):
    lines, depth = [f"program {p.name} grid={p.grid} block={p.block}"], 1
    for ins in p.instrs:
        if ins.op in ("ENDLOOP", "ENDIF", "ENDPASS"):
            depth -= 1
        lines.append("  " * depth + repr(ins))
        if ins.op in ("LOOP", "IF", "PASS"):
            depth += 1
    return "\n".join(lines)


_RESERVED = set(dir(builtins)) | set(keyword.kwlist) | {
    "math", "cuda", "inf", "nan", "vload", "vload_keep", "vstore", "select", "bf16_to_f32",
    "f32_to_bf16", "f64_to_f32_odd", "boolean", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
    "_hi", "_nn", "_d", "_mn", "_cmu", "_cm2", "_take",       # the emitter's scratch names
    "xsm", "xbar", "xload", "xload_int", "xstore", "xsend", "xbar_arm", "xbar_wait",
    "cluster_arrive", "cluster_wait", "arrive_and_wait", "sim_phase", "fmax_nan", "fmin_nan",
    "griddep_wait", "griddep_launch"}


# shared-memory partials combined without a loop (see combine_partials): a row layout has at
# most 32 (1024 threads); measured on the H200, a loop over 32 there cost long rows 10-20%
UNROLLED_PARTIALS = 32
# a persistent cluster keeps its row's input values in registers from the first pass on,
# so the row's stage is refilled after that pass's barrier, not after the last pass's
# (layernorm 1024 x 65536 on the H200: 3831 GB/s against 3892-3895 reading the row again
# from its stage, bench/RESULTS.md); a study knob of bench/variants.py
PERSISTENT_HOLD_ROWS = False


class _Names:
    """Unique, readable names that never shadow a builtin or a name the emitted module uses."""

    def __init__(self):
        self.used = set(_RESERVED)

    def new(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name


class _Chunk:
    """One chunk of a pass: V consecutive positions of the loop variable. ``stage_it`` is
    set for the chunks of a resident row kept in shared memory: they are walked by a loop
    (its variable), so that the compiler does not hold them all in registers at once."""

    def __init__(self, group, u, qvar, mask, stage_it=None, whole=False):
        self.group, self.u, self.qvar, self.mask = group, u, qvar, mask
        self.stage_it = stage_it
        # every chunk of this chunk's iteration lies inside the row (no position mask), so
        # a one-pass reduce may take one update for the whole iteration
        self.whole = whole


def products_added_to(kernel):
    """Ids of the float products that an add or a subtraction of ``kernel`` takes. Each is
    rendered as its own rounded multiply (``mul_rn``): a plain one the PTX assembler may fuse
    with the add into an FMA, which adds the unrounded product. NumPy rounds every product,
    and so does this kernel or another wherever the product is reduced or stored: with
    ``p = y * z`` rounded for ``p.min()`` and fused in ``p - p.min()``, the difference went
    below zero and its square root was NaN. The sum a reduce accumulates is not an add
    here: a product it fuses only sharpens that sum."""
    roots = [r.body for r in kernel.reduces] + [s.value for s in kernel.stores]
    terms = [src.srcs[0] if src.op is Op.NEG else src      # -(a * b) + c fuses as well
             for root in roots for v in walk(root) if v.op in (Op.ADD, Op.SUB)
             for src in v.srcs]
    return {t.id for t in terms if t.op is Op.MUL and np.dtype(t.dtype) in ROUNDED_PRODUCTS}


class Linearizer:
    def __init__(self, kernel, layout, aligned=None, simulator=False, fusions=()):
        self.k, self.L = kernel, layout
        self.fused_first = {f.first.id: f for f in fusions}     # A: computed with B
        self.fused_second = {f.second.id: f for f in fusions}   # B: comes out of A
        self.added_products = products_added_to(kernel)
        self.aligned = aligned            # buffer positions whose base is 16-byte aligned
        self.simulator = simulator
        self.instrs, self.names = [], _Names()
        self.row_memo = {}                # Val id -> name or literal (row-level values)
        self.recip_memo = {}              # Val id -> (reciprocal, scale) of a row-level divisor
        self.elem_memo = {}               # (Val id, group id, u, v) -> name
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
        depths = sorted({r.depth for r in k.reduces})
        for d in depths:
            level = [r for r in k.reduces if r.depth == d and r.id not in self.fused_second]
            for g in k.groups:
                insts = [r for r in level if r.group is g]
                if insts:
                    self.reduce_pass(g, insts)
            self.combine_level(level)
        self.row_stores()
        for g in k.groups:
            stores = [s for s in k.stores if s.group is g]
            if stores:
                self.store_pass(g, stores)
        if L.persistent:
            self.close_rows()
        from .options import occupancy_shared
        grid = -(-k.nrows // L.rows_per_block) * L.split
        return Program(k.name, self.instrs, self.params, L.block_threads, grid, L, k, self.shared,
                       max(self.stage_bytes, occupancy_shared(L.blocks_per_sm)))

    def prologue(self):
        k, L = self.k, self.L
        for pos, (dt, name) in sorted(k.inputs.items(),
                                      key=lambda kv: (isinstance(kv[0], str), str(kv[0]))):
            self.params.append((self.names.new(name), "in", dt, pos))
        for pos, (dt, _) in enumerate(k.outputs):
            self.params.append((self.names.new(f"out{pos}"), "out", dt, pos))
        self.buf = {(kind, pos): name for name, kind, _, pos in self.params}
        t, rb = L.threads_per_row, L.rows_per_block
        nrows = self.row_count_param() if k.generic else k.nrows
        self.add("COMMENT", arg=f"{'any number of' if k.generic else k.nrows} rows, {rb} per "
                                f"block, {t} threads per row ({L.layout} layout)")
        self.add("SPECIAL", ("tid",), arg="threadIdx.x")
        self.add("SPECIAL", ("bid",), arg="blockIdx.x")
        if L.layout == "row":
            self.add("INDEX", ("lane",), ("tid",), arg=f"tid % {t}" if rb > 1 else "tid")
            self.add("INDEX", ("rib",), ("tid",), arg=f"tid // {t}" if rb > 1 else "0")
        else:
            self.add("INDEX", ("lane",), ("tid",), arg=f"tid // {rb}")
            self.add("INDEX", ("rib",), ("tid",), arg=f"tid % {rb}")
        if L.persistent:        # cluster c loops over rows c, c + clusters, ...
            self.add("SPECIAL", ("gdim",), arg="gridDim.x")
            self.add("INDEX", ("cid",), ("bid",), arg=f"bid // {L.split}")
            self.add("INDEX", ("ncl",), ("gdim",), arg=f"gdim // {L.split}")
            self.add("INDEX", ("mine",), ("cid", "ncl"),
                     arg=f"({k.nrows} - cid + ncl - 1) // ncl")
            self.names.used |= {"gdim", "cid", "ncl", "mine", "rit", "rstage", "rbar"}
        if L.split > 1:         # the blocks of a row are adjacent; each takes a segment
            seg_len = L.segment(k.groups[0])
            if not L.persistent:
                self.add("INDEX", ("tile",), ("bid",), arg=f"bid // {L.split}")
                self.add("INDEX", ("row",), ("tile", "rib"),
                         arg=f"tile * {rb} + rib" if rb > 1 else "tile")
            self.add("INDEX", ("seg",), ("bid",), arg=f"bid % {L.split}")
            self.add("INDEX", ("seg_base",), ("seg",), arg=f"seg * {seg_len}")
            self.names.used |= {"tile", "seg", "seg_base"}
            self.segment_end(k.groups[0], seg_len)
        elif nrows is not None and k.generic:
            # the last block's rows past the count redo the last row: they read memory
            # that is there, with no mask on any load, and store the very bits its own
            # threads store (a mask on every load cost a generic logsumexp 5% on the H200)
            self.add("INDEX", ("row",), ("bid", "rib", nrows),
                     arg=f"min(bid * {rb} + rib, {nrows} - 1)")
        else:
            self.add("INDEX", ("row",), ("bid", "rib"), arg=f"bid * {rb} + rib")
        self.names.used |= {"tid", "bid", "lane", "rib", "row"}
        self.row_mask = None
        if not k.generic and k.nrows % rb:
            self.add("INDEX", ("row_ok",), ("row",), arg=f"row < {k.nrows}")
            self.row_mask = "row_ok"
            self.names.used.add("row_ok")
        if L.split > 1:
            self.declare_exchange()
        for r in k.reduces:
            self.declare_shared(r)
        self.declare_stages()
        if L.persistent:
            self.open_rows()

    def row_count_param(self):
        """A generic kernel's row count: a parameter (int64) where rows share a block (the
        last block may hold rows past the count), else none (the grid is the rows)."""
        if self.L.rows_per_block == 1:
            return None
        name = self.names.new("nrows")
        self.params.append((name, "rows", np.dtype(np.int64), None))
        return name

    # ---- persistent clusters: a loop over rows, inputs brought ahead by bulk copy ------
    def open_rows(self):
        """Declare the shared memory the row inputs' next rows come into (``ahead`` stages
        of a segment each), load the weights of every chunk into registers, and open the
        loop over the cluster's rows (ROWS_OPEN starts the first stages' copies)."""
        from .options import column_loads, row_loads
        k, L = self.k, self.L
        self.weight_loads = column_loads(k)
        g = k.groups[0]
        plan, seg = L.groups[g.id], L.segment(g)
        arrays, fills, offset = {}, [], 0
        self.row_stage = {}
        for w in row_loads(k, g):
            dt = np.dtype(w.dtype)
            if dt.name not in arrays:
                arrays[dt.name] = self.names.new(f"rows_{dt.name}")
                self.add("STAGE_DECL", (arrays[dt.name],), arg=dt.name, dtype=dt)
            elem = offset // dt.itemsize
            self.row_stage[w.id] = (arrays[dt.name], elem)
            fills.append((arrays[dt.name], elem, self.buf[("in", w.arg[0])], dt.itemsize))
            offset += L.persistent * seg * dt.itemsize
        self.stage_bytes += offset
        self.add("ROWS_OPEN", srcs=tuple(arrays.values()) + ("cid", "ncl", "mine", "seg_base"),
                 arg=dict(ahead=L.persistent, seg=seg, extent=g.extent, fills=fills))
        self.add("COMMENT", arg="weights: the same for every row, loaded once")
        span = L.threads_per_row * plan.vector
        self.local_q = {}
        for u in range(plan.chunks):
            q, ql = self.names.new(f"{g.var.name}_{u}"), self.names.new(f"{g.var.name}_l{u}")
            self.add("INDEX", (ql,), ("lane",), arg=f"lane * {plan.vector} + {u * span}")
            self.add("INDEX", (q,), ("seg_base", ql), arg=f"seg_base + {ql}")
            self.resident_q[(g.id, u)] = (q, None)
            self.local_q[(g.id, u)] = ql
            ch = _Chunk(g, u, q, None, whole=True)
            for w in self.weight_loads:
                for v in range(plan.vector):
                    self.elem_value(w, ch, v)
        self.add("ROWLOOP", ("rit", "row", "rstage"), ("cid", "ncl", "mine"),
                 arg=L.persistent)

    def forget_row_values(self, g):
        """After a pass of a persistent cluster: its values that depend on the row are read
        again from the row's stage by the next pass, not kept in registers (which hold
        the weights)."""
        keep = {w.id for w in self.weight_loads}
        if PERSISTENT_HOLD_ROWS:
            keep |= set(self.row_stage)
        for key in [k for k in self.elem_memo if k[1] == g.id and k[0] not in keep]:
            del self.elem_memo[key]

    def rows_load(self, val, ch, v):
        """Element ``v`` of a row input's chunk, from the stage its row came into."""
        if v != 0:              # the vector load of this chunk made it already
            return self.elem_memo[(val.id, ch.group.id, ch.u, v)]
        name, offset = self.row_stage[val.id]
        width = self.L.groups[ch.group.id].vector
        ql = self.local_q[(ch.group.id, ch.u)]
        base = self.k.inputs[val.arg[0]][1]
        outs = [self.names.new(f"{base}_{ch.qvar}_{i}") for i in range(width)]
        self.add("SVLOAD", tuple(outs), (name, "rstage", ql),
                 arg=f"{offset} + rstage * {self.L.segment(ch.group)} + {ql}", dtype=val.dtype)
        for i, o in enumerate(outs[1:], 1):
            self.elem_memo[(val.id, ch.group.id, ch.u, i)] = o
        return outs[0]

    def close_rows(self):
        """Refill each stage once every thread has read it: after the first barrier that
        follows the loop's last read of a stage (a barrier of its own where none does), and
        close the loop."""
        reads = [i for i, ins in enumerate(self.instrs) if ins.op == "SVLOAD"]
        after = next((i for i, ins in enumerate(self.instrs)
                      if ins.op == "BARRIER" and i > reads[-1]), None)
        fill = Instr("ROWS_FILL", (), ("rit", "row", "rstage", "ncl", "mine"),
                     arg=self.L.persistent)
        if after is None:
            self.instrs.append(Instr("BARRIER", arg=()))
            self.instrs.append(fill)
        else:
            self.instrs.insert(after + 1, fill)
        # a reduce's shared array is written before a barrier and read after it: with one
        # barrier a row, the next row's writes need one more between them and the reads
        start = next(i for i, ins in enumerate(self.instrs) if ins.op == "ROWLOOP")
        if sum(ins.op == "BARRIER" for ins in self.instrs[start:]) < 2:
            self.instrs.append(Instr("BARRIER", arg=()))
        self.instrs.append(Instr("ENDROWLOOP", arg=self.L.persistent))

    def segment_end(self, g, seg_len):
        """A split row's segments are alike but the last, which ends with the row (sooner);
        ``self.inside`` is what every block holds. Where a block's chunks reach past that,
        positions are masked by ``seg_end``, where its own segment ends."""
        plan = self.L.groups[g.id]
        last = g.extent - (self.L.split - 1) * seg_len
        self.inside = min(seg_len, last)
        per_pass = self.L.threads_per_row * plan.vector * plan.chunks
        if not per_pass or -(-seg_len // per_pass) * per_pass <= self.inside:
            return      # (rows of nothing hold no chunks)
        end = f"seg_base + {seg_len}"
        self.add("INDEX", ("seg_end",), ("seg_base",),
                 arg=end if last == seg_len else f"min({end}, {g.extent})")
        self.names.used.add("seg_end")

    def limits(self, g):
        """(positions of ``g`` that every block holds, what a position is masked against)."""
        return (self.inside, "seg_end") if self.L.split > 1 else (g.extent, g.extent)

    def declare_exchange(self):
        """Parameters of a split row's exchange: ``xpart`` holds each block's partial of
        each reduce for each of its rows (as 64-bit patterns, rows padded to whole blocks),
        ``xflag`` counts the arrivals of each tile's blocks (a tile: the rows one block
        holds) at its exchanges (zeroed before the launch; none when a tile's blocks are a
        cluster)."""
        slots = sum(len(self.acc_spec(r)) for r in self.k.reduces
                    if r.id not in self.fused_second)
        rb = self.L.rows_per_block
        self.tiles = -(-self.k.nrows // rb)
        self.xrows = self.tiles * rb
        n = self.xrows * self.L.split
        self.xpart = self.xflag = None
        if not self.L.cluster or self.simulator:    # a cluster's blocks send to each other
            self.xpart = self.names.new("xpart")
            self.params.append((self.xpart, "scratch", np.dtype(np.int64), ("part", slots * n)))
        if not self.L.cluster:
            self.xflag = self.names.new("xflag")
            self.params.append((self.xflag, "scratch", np.dtype(np.int32),
                                ("flag", self.tiles)))
        self.xslots = 0                   # exchange slots used so far
        self.xsyncs = 0                   # exchanges so far

    def declare_stages(self):
        """Regions of dynamic shared memory for the staged chunks of each per-row load."""
        from .options import staged_loads, _stage_bytes
        arrays, offset = {}, 0
        for g, plan in zip(self.k.groups, self.L.groups):
            if not plan.staged:
                continue
            for w in staged_loads(self.k, g):
                dt = np.dtype(w.dtype)
                if dt.name not in arrays:
                    arrays[dt.name] = self.names.new(f"stage_{dt.name}")
                    self.add("STAGE_DECL", (arrays[dt.name],), arg=dt.name, dtype=dt)
                self.stage_slot[w.id] = (arrays[dt.name], offset // dt.itemsize)
                offset += _stage_bytes(plan.staged, self.L.threads_per_row, plan.vector, dt)
        self.stage_bytes = offset

    def declare_shared(self, r):
        L = self.L
        t = L.threads_per_row
        if t == 1:
            return
        if L.layout == "row":
            if t <= 32:
                return
            shape = (L.rows_per_block, t // 32)
        else:
            shape = (t, L.rows_per_block)
        if r.id in self.fused_second:
            return
        spec = self.acc_spec(r)
        names = [self.names.new(f"smem_{r.name}{suffix}") for suffix, _, _ in spec]
        dts = [dt for _, dt, _ in spec]
        for n, dt in zip(names, dts):
            self.shared.append((n, shape, exchange_dtype(dt), r.id))
            self.add("SHARED", (n,), arg=(shape, r.id), dtype=exchange_dtype(dt))

    # ---- passes ------------------------------------------------------------------------
    def chunks(self, g, peel=False):
        """Open a pass over ``g``; yields a _Chunk per chunk; closes the pass when done.
        ``peel``: a streamed row that ends inside an iteration gets a loop over its whole
        iterations, with no position masks, then its last iteration, masked."""
        L = self.L
        plan = L.groups[g.id]
        t, v = L.threads_per_row, plan.vector
        span = t * v
        extent = L.segment(g)       # positions a block walks
        inside, bound = self.limits(g)
        at = "seg_base + " if L.split > 1 else ""     # a split row: this block's segment
        if plan.resident:
            first = plan.chunks - plan.staged
            self.add("PASS", arg=(g.id, "resident"))
            for u in range(first):
                if (g.id, u) not in self.resident_q:     # positions stay valid across passes
                    q = self.names.new(f"{g.var.name}_{u}")
                    self.add("INDEX", (q,), ("lane",), arg=f"{at}lane * {v} + {u * span}"
                             if v > 1 else f"{at}lane + {u * span}")
                    self.resident_q[(g.id, u)] = (q, self.mask(q, bound, (u + 1) * span > inside))
                q, mask = self.resident_q[(g.id, u)]
                yield _Chunk(g, u, q, mask, whole=span * plan.chunks <= inside)
            if plan.staged:
                yield from self.staged_chunks(g, first, plan.staged, span, v, at)
            self.add("ENDPASS", arg=(g.id, "resident"))
            if L.persistent:
                # later passes read the row again from shared memory: the registers hold
                # the weights (layernorm 1024 x 65536 on the H200: 3815-3847 GB/s so,
                # 3795-3814 keeping the row in registers too)
                self.forget_row_values(g)
            return
        per_iter = span * plan.chunks
        n_iter = -(-extent // per_iter)
        self.streamed[g.id] = self.streamed.get(g.id, 0) + 1
        backward = L.zigzag and self.streamed[g.id] % 2 == 0 and n_iter > 1
        ragged = n_iter * per_iter > inside
        # (the blocks of a split row whose last segment is shorter end in different
        # iterations: there every chunk is masked, no iteration peeled)
        peel = peel and inside == extent
        if not peel or not ragged:
            parts = [("loop", n_iter)]
        else:       # the partial iteration comes first when the pass walks backward
            whole = extent // per_iter
            parts = [("loop", whole)] if whole else []
            parts = [("tail", whole)] + parts if backward else parts + [("tail", whole)]
        for kind, n in parts:
            if kind == "loop":
                masked = ragged and not peel
                yield from self.streamed_loop(g, n, per_iter, backward, at, bound, masked)
            else:
                yield from self.streamed_tail(g, n * per_iter, extent, backward, at, bound)
            for key in [k for k in self.elem_memo if k[1] == g.id]:
                del self.elem_memo[key]

    def _chunk_offset(self, g, u, backward):
        """Where chunk ``u`` of a streamed iteration starts within it (chunks run in
        reverse when the pass walks backward)."""
        plan = self.L.groups[g.id]
        return (plan.chunks - 1 - u if backward else u) * self.L.threads_per_row * plan.vector

    def _chunk_index(self, g, u, backward, at, start, srcs):
        """Name the first position of chunk ``u`` of an iteration starting at ``start``."""
        v = self.L.groups[g.id].vector
        q = self.names.new(f"{g.var.name}_{u}")
        lane_part = f"lane * {v}" if v > 1 else "lane"
        offset = self._chunk_offset(g, u, backward)
        self.add("INDEX", (q,), srcs, arg=f"{at}{start} + {lane_part} + {offset}")
        return q

    def streamed_loop(self, g, n_iter, per_iter, backward, at, bound, masked):
        """A loop over ``n_iter`` iterations of a streamed pass; ``masked``: every chunk
        masked by position (the row may end inside any of them, before ``bound``)."""
        it = self.names.new(f"it{g.id}")
        self.add("LOOP", (it,), arg=(n_iter, g.id))
        step, srcs = it, (it, "lane")
        if backward:
            step = f"({n_iter - 1} - {it})"
        elif self.L.stagger and not masked and n_iter > 1:
            step, srcs = f"(({it} + row) % {n_iter})", srcs + ("row",)
        for u in range(self.L.groups[g.id].chunks):
            q = self._chunk_index(g, u, backward, at, f"{step} * {per_iter}", srcs)
            yield _Chunk(g, u, q, self.mask(q, bound, masked), whole=not masked)
        self.add("ENDLOOP", arg=g.id)

    def streamed_tail(self, g, start, extent, backward, at, bound):
        """The last iteration of a streamed pass, where the row (or a split row's segment,
        all ``extent`` long) ends: each chunk masked by position where it reaches past the
        end (``bound``); chunks wholly past it left out."""
        plan = self.L.groups[g.id]
        span = self.L.threads_per_row * plan.vector
        for u in range(plan.chunks):
            first = start + self._chunk_offset(g, u, backward)
            if first >= extent:
                continue
            q = self._chunk_index(g, u, backward, at, start, ("lane",))
            yield _Chunk(g, u, q, self.mask(q, bound, first + span > extent))

    def staged_chunks(self, g, first, count, span, v, at=""):
        """The chunks of a resident row kept in shared memory: a loop over them; the first
        pass loads them from memory and stores them, later passes read them back."""
        it = self.names.new(f"st{g.id}")
        self.add("LOOP", (it,), arg=(count, g.id))
        q = self.names.new(f"{g.var.name}_s")
        lane_part = f"lane * {v}" if v > 1 else "lane"
        self.add("INDEX", (q,), (it, "lane"), arg=f"{at}({it} + {first}) * {span} + {lane_part}")
        inside, bound = self.limits(g)
        yield _Chunk(g, "s", q, self.mask(q, bound, (first + count) * span > inside),
                     stage_it=it)
        self.add("ENDLOOP", arg=g.id)
        for key in [k for k in self.elem_memo if k[1] == g.id and k[2] == "s"]:
            del self.elem_memo[key]
        self.staged_done |= self.staging
        self.staging = set()

    def mask(self, q, bound, need_q):
        """The mask of position ``q`` (below ``bound``: the row's extent, or the name of
        where a split row's segment ends), with the row mask; None where nothing is masked."""
        if not need_q:
            return self.row_mask
        name = self.names.new(f"ok_{q}")
        srcs = (q,) + ((bound,) if isinstance(bound, str) else ())
        if self.row_mask:
            self.add("INDEX", (name,), (self.row_mask,) + srcs,
                     arg=f"{self.row_mask} & ({q} < {bound})")
        else:
            self.add("INDEX", (name,), srcs, arg=f"{q} < {bound}")
        return name

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
        # division an iteration, not one an element). Measured on the H200: column
        # variance 3000 x 50000 37% -> 78% of the copy ceiling; the plain partial sums of a
        # column variance at 100000 x 999, peeled, lost 39% (registers 32 -> 48, a second
        # wave of blocks)
        peel = any(r.id in self.fused_first for r in insts)
        for ch in self.chunks(g, peel):
            batched = batchable and ch.whole
            updates = []
            for r in insts:
                vals = [self.elem_value(r.body, ch, v) for v in range(plan.vector)]
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
                        for v in range(plan.vector):
                            self.elem_value(val, c, v)
            if ch.mask and updates:
                self.add("IF", srcs=(ch.mask,), arg=ch.mask)
            for op, r, srcs, kind in updates:
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

    def combine_level(self, level):
        """The reduces of one depth combined across each row's threads: warp shuffles, then
        (rows wider than a warp, or column layouts) every reduce's partials written to its
        shared array behind one barrier for all of them, then split rows' exchanges."""
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
            self.shared_combine(level, accs)
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

    def shared_combine(self, level, accs):
        """Each warp's (column layout: each thread's) partials of every reduce in ``level``
        to shared memory, one barrier, then each row's partials combined in order."""
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
        for r in level:
            accs[r.id] = self.combine_partials(r, self._kind(r), smem[r.id], count)

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
        UNROLLED_PARTIALS (a forced column layout with more than 32 threads a row) they go
        through a loop, in the same order (same bits): unrolled, numba's compile time grows
        faster than linearly with the number of basic blocks."""
        row = self.L.layout == "row"
        dts = [self._acc_dtype(r, j) for j in range(len(smem))]

        def load(names, i):
            read_idx = f"rib, {i}" if row else f"{i}, rib"
            for n, s, dt in zip(names, smem, dts):
                self.add("SHARED_LOAD", (n,), (s,) + ((i,) if isinstance(i, str) else ()),
                         arg=(read_idx, r.id), dtype=dt)
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

    def prefetched_loads(self, g, insts):
        """Loads of the outputs over ``g`` that are the same for every row (a weight), to be
        issued with the first pass over a split row's chunks rather than after its blocks
        exchange: their latency then hides behind the exchange, and the outputs find them in
        registers. Only where they hold no more values than the row's own chunks do:
        measured on the H200 at 1024 x 65536 (bench/RESULTS.md), rmsnorm's one weight went
        from 91% to 96% of the copy ceiling, layernorm's two weights lost 7%. Not in blocks
        of 1024 threads, whose 64 registers a thread the row's values nearly fill (rmsnorm
        at 256 x 262144 would spill)."""
        plan = self.L.groups[g.id]
        if self.L.split == 1 or not plan.resident or plan.staged or insts[0].depth != 0 or \
                self.L.block_threads > 512:
            return []                   # (one pass over ``g`` is at depth 0: loaded once)
        stores = [s.value for s in self.k.stores if s.group is g]
        loads = {w.id: w for v in stores for w in walk(v) if w.op is Op.LOAD}
        own = {w.id for r in insts for w in walk(r.body) if w.op is Op.LOAD}
        shared = [w for i, w in loads.items() if i not in own and w.arg[1].vars() <= {g.var}]
        return shared if 0 < len(shared) <= len(own) else []

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
                     names, arg=text, dtype=_memory_dtype(s.dtype))
        self.add("ENDIF", arg=cond)

    def store_pass(self, g, stores):
        plan = self.L.groups[g.id]
        self.add("COMMENT", arg=f"outputs over {g.var.name} {g.dims}")
        self.prerender([s.value for s in stores])
        for ch in self.chunks(g):
            writes = []
            for s in stores:
                vals = [self._stored(self.cast(self.elem_value(s.value, ch, v), s.value.dtype,
                                               s.dtype), s.dtype)
                        for v in range(plan.vector)]
                writes.append((s, vals))
            if ch.mask:
                self.add("IF", srcs=(ch.mask,), arg=ch.mask)
            for s, vals in writes:
                buf, dt = self.buf[("out", s.output)], _memory_dtype(s.dtype)
                if self.vectorizable(s.addr, g, ("out", s.output), s.dtype):
                    text, names = self.address(s.addr, ch, 0)
                    self.add("VSTORE", (), (buf,) + tuple(vals) + names, arg=(text, len(vals)),
                             dtype=dt)
                    continue
                for v, val in enumerate(vals):
                    text, names = self.address(s.addr, ch, v)
                    self.add("STORE", (), (buf, val) + names, arg=text, dtype=dt)
            if ch.mask:
                self.add("ENDIF", arg=ch.mask)

    # ---- values ------------------------------------------------------------------------
    def cast(self, name, from_dt, to_dt):
        if np.dtype(from_dt) == np.dtype(to_dt):
            return name
        out = self.names.new(f"{name}_{np.dtype(to_dt).name}")
        self.add("CAST", (out,), (name,), arg=np.dtype(to_dt), dtype=np.dtype(to_dt))
        return out

    def row_value(self, val):
        hit = self.row_memo.get(val.id)
        if hit is not None:
            return hit
        for w in walk(val):
            if w.id not in self.row_memo:
                self.row_memo[w.id] = self.hoisted(self.render, w, None, 0)
        return self.row_memo[val.id]

    def elem_value(self, val, ch, v):
        if self.group_of(val) is None:
            return self.row_value(val)
        key = (val.id, ch.group.id, ch.u, v)
        if key in self.elem_memo:
            return self.elem_memo[key]
        for w in walk(val):
            if self.group_of(w) is None:
                self.row_value(w)
                continue
            k = (w.id, ch.group.id, ch.u, v)
            if k not in self.elem_memo:
                self.elem_memo[k] = self.render(w, ch, v)
        return self.elem_memo[key]

    def lookup(self, val, ch, v):
        if self.group_of(val) is None:
            return self.row_memo[val.id]
        return self.elem_memo[(val.id, ch.group.id, ch.u, v)]

    def render(self, val, ch, v):
        op = val.op
        if op is Op.CONST:
            return const_literal(val.arg, val.dtype)
        if op is Op.REDUCED:
            return self.red[val.arg.id]
        if op is Op.INDEX:
            text, names = self.address(val.arg, ch, v)
            name = self.names.new("idx")
            self.add("INDEX", (name,), names, arg=text)
            return name
        if op is Op.LOAD:
            return self.load(val, ch, v)
        srcs = tuple(self.lookup(s, ch, v) for s in val.srcs)
        name = self.names.new(_val_name(val, ch, v))
        if op is Op.DIV and val.arg == BY_RECIPROCAL and self.L.reciprocal and \
                np.dtype(val.dtype) in RECIP_SCALE:
            r, q = self.reciprocal(val.srcs[1], srcs[1])
            last = (srcs[0], r)         # the last product is rounded on its own, scaled or not
            if q is not None:
                scaled = self.names.new(f"{name}_r")
                self.add("ALU", (scaled,), last, arg=Op.MUL, dtype=val.dtype)
                last = (scaled, q)
            self.add("ALU", (name,), last, arg=Op.MUL_RN, dtype=val.dtype)
            return name
        if op is Op.CAST:
            self.add("CAST", (name,), srcs, arg=val.dtype, dtype=val.dtype)
        else:
            rounded = op is Op.MUL and val.id in self.added_products
            self.add("ALU", (name,), srcs, arg=Op.MUL_RN if rounded else op, dtype=val.dtype)
        return name

    def reciprocal(self, divisor, text):
        """``(r, q)`` with ``x / d == (x * r) * q`` within about one ulp for every ``x``
        (once per row where ``d`` is the same for the whole row, else per element): ``q`` is
        1, or a power of two that brings a ``d`` whose reciprocal would overflow or be
        subnormal back into range, and ``r = 1 / (d * q)``. Zero, inf and NaN
        divisors keep ``q = 1`` and give what division gives (inf, 0, NaN). ``q`` is None
        where ``d`` is provably in range (``ranges``): then ``x / d`` is ``x * r``."""
        if self.group_of(divisor) is not None:      # broadcast along another axis: per element
            return self._reciprocal(divisor, text)
        hit = self.recip_memo.get(divisor.id)
        if hit is None:
            hit = self.recip_memo[divisor.id] = self.hoisted(self._reciprocal, divisor, text)
        return hit

    def _reciprocal(self, divisor, d):
        dt = np.dtype(divisor.dtype)
        tiny, big, scale = RECIP_SCALE[dt]
        lit = lambda x: const_literal(x, dt)            # noqa: E731
        if reciprocal_in_range(divisor, tiny, big):
            r = self.names.new("rc_r")
            self.add("ALU", (r,), (lit(1.0), d), arg=Op.DIV, dtype=dt)
            return r, None
        mag, small, large, q0, q, dq, r = (self.names.new(n) for n in (
            "rc_abs", "rc_small", "rc_large", "rc_q0", "rc_q", "rc_dq", "rc_r"))
        boolean = np.dtype(bool)
        self.add("ALU", (mag,), (d,), arg=Op.ABS, dtype=dt)
        self.add("ALU", (small,), (mag, lit(tiny)), arg=Op.LT, dtype=boolean)
        self.add("ALU", (large,), (mag, lit(big)), arg=Op.GT, dtype=boolean)
        self.add("ALU", (q0,), (large, lit(1.0 / scale), lit(1.0)), arg=Op.WHERE, dtype=dt)
        self.add("ALU", (q,), (small, lit(scale), q0), arg=Op.WHERE, dtype=dt)
        self.add("ALU", (dq,), (d, q), arg=Op.MUL, dtype=dt)
        self.add("ALU", (r,), (lit(1.0), dq), arg=Op.DIV, dtype=dt)
        return r, q

    def load(self, val, ch, v):
        if self.L.persistent and val.id in self.row_stage:
            return self.rows_load(val, ch, v)
        if ch is not None and ch.stage_it is not None and val.id in self.stage_slot:
            return self.staged_load(val, ch, v)
        return self.memory_load(val, ch, v)

    def stage_index(self, val, ch, v):
        """Where element v of a staged chunk lives: [chunk][element][lane], so that a warp's
        accesses fall on consecutive words (no bank conflicts)."""
        name, offset = self.stage_slot[val.id]
        plan, t = self.L.groups[ch.group.id], self.L.threads_per_row
        return name, f"{offset + v * t} + {ch.stage_it} * {plan.vector * t} + lane"

    def staged_load(self, val, ch, v):
        name, index = self.stage_index(val, ch, v)
        if val.id in self.staged_done:               # later passes: read back the copy
            out = self.names.new(f"{self.k.inputs[val.arg[0]][1]}_s_{v}")
            self.add("STAGE_LOAD", (out,), (name, ch.stage_it, "lane"), arg=index,
                     dtype=val.dtype)
            return out
        got = self.memory_load(val, ch, v)           # first pass: load, keep a copy
        width = self.L.groups[ch.group.id].vector
        vector = width > 1 and self.vectorizable(val.arg[1], ch.group, ("in", val.arg[0]),
                                                 val.dtype)
        names = [self.elem_memo.get((val.id, ch.group.id, ch.u, i), got)
                 for i in range(width)] if vector else [got]
        for i, n in enumerate(names):
            name, index = self.stage_index(val, ch, i if vector else v)
            self.add("STAGE_STORE", (), (name, n, ch.stage_it, "lane"), arg=index,
                     dtype=val.dtype)
        self.staging.add(val.id)
        return got

    def memory_load(self, val, ch, v):
        pos, addr = val.arg
        buf = self.buf[("in", pos)]
        base = self.k.inputs[pos][1]
        if ch is not None and self.vectorizable(addr, ch.group, ("in", pos), val.dtype):
            if v != 0:          # the vector load of this chunk made it already
                return self.elem_memo[(val.id, ch.group.id, ch.u, v)]
            width = self.L.groups[ch.group.id].vector
            text, names = self.address(addr, ch, 0)
            outs = [self.names.new(f"{base}_{ch.qvar}_{i}") for i in range(width)]
            mask = (ch.mask,) if ch.mask else ()
            raw, dt = self._raw(outs, val.dtype)
            self.add("VLOAD", tuple(raw), (buf,) + names + mask, arg=(text, ch.mask), dtype=dt)
            self._as_bool(outs, raw)
            for i, o in enumerate(outs[1:], 1):
                self.elem_memo[(val.id, ch.group.id, ch.u, i)] = o
            return outs[0]
        text, names = self.address(addr, ch, v)
        mask = ch.mask if ch is not None else self.row_mask
        name = self.names.new(f"{base}_{ch.qvar}_{v}" if ch is not None else f"{base}_row")
        (raw,), dt = self._raw([name], val.dtype)
        self.add("LOAD", (raw,), (buf,) + names + ((mask,) if mask else ()), arg=(text, mask),
                 dtype=dt)
        self._as_bool([name], [raw])
        return name

    # bool buffers are bytes (uint8 pointers): a bool is loaded as its byte, then taken as
    # "not zero" (NumPy's truth of a byte), and stored as the byte 0 or 1
    def _raw(self, names, dtype):
        """The names and dtype that loads of ``names`` (of ``dtype``) read into."""
        if np.dtype(dtype).kind != "b":
            return names, dtype
        return [self.names.new(f"{n}_u8") for n in names], _memory_dtype(dtype)

    def _as_bool(self, names, raw):
        for n, r in zip(names, raw):
            if n != r:
                self.add("ALU", (n,), (r, const_literal(0, np.uint8)), arg=Op.NE,
                         dtype=np.dtype(bool))

    def _stored(self, name, dtype):
        """The value a store of ``name`` (of ``dtype``) writes, of _memory_dtype(dtype)."""
        return self.cast(name, dtype, _memory_dtype(dtype))

    def vectorizable(self, addr, g, buf, dtype):
        width = self.L.groups[g.id].vector
        if width == 1 or addr.coef(g.var) != 1:
            return False
        if self.aligned is not None and buf not in self.aligned:
            return False
        if width * np.dtype(dtype).itemsize > 32:
            return False
        rest = addr.substitute({g.var: sym.lift(0)})
        return rest.const % width == 0 and all(c % width == 0 for _, c in rest.terms)

    def address(self, expr, ch, v):
        """Text of an index expression at chunk ``ch`` position ``v``, and the names it reads.

        The part that depends on the row only is hoisted into a named row-level index.
        """
        gvar = ch.group.var if ch is not None else None
        row_terms = {a: c for a, c in expr.terms if gvar is None or gvar not in _atom_vars(a)}
        loop_terms = {a: c for a, c in expr.terms if a not in row_terms}
        row_part = sym.Expr.make(dict(row_terms), expr.const)
        names = []
        if row_part.terms:
            text = row_part.render(lambda x: x.name)
            nm = self.index_memo.get(text)
            if nm is None:
                nm = self.names.new("base")
                self.hoisted(self.add, "INDEX", (nm,), ("row",), text)
                self.index_memo[text] = nm
            parts, names = [nm], [nm]
        else:
            parts = [str(row_part.const)] if row_part.const else []
        if loop_terms:
            qv = sym.Var(ch.qvar, gvar.size)
            loop_e = sym.Expr.make(dict(loop_terms), 0).substitute({gvar: sym.lift(qv) + v})
            parts.append(loop_e.render(lambda x: x.name))
            names.append(ch.qvar)
        text = " + ".join(parts) if parts else "0"
        return text, tuple(names)


def _memory_dtype(dtype):
    """The dtype a buffer of ``dtype`` holds: bools as bytes (uint8 pointers)."""
    return np.dtype(np.uint8) if np.dtype(dtype).kind == "b" else np.dtype(dtype)


def _atom_vars(atom):
    return {atom} if isinstance(atom, sym.Var) else atom.x.vars()


def _halvings(n):
    off = n // 2
    while off >= 1:
        yield off
        off //= 2


def _val_name(val, ch, v):
    base = val.op.name.lower()
    return f"{base}_{ch.u}_{v}" if ch is not None else base


def is_arg(r):
    return r.kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN)


def exchange_dtype(dt):
    """Shuffles and shared arrays move bool and narrow integers as int32."""
    dt = np.dtype(dt)
    if dt.kind == "b" or (dt.kind in "iu" and dt.itemsize < 4):
        return np.dtype(np.int32)
    return dt


def identity_literal(r):
    from ..dtypes import identity
    kind = r.kind.value
    dt = r.value_dtype if is_arg(r) else r.dtype
    return const_literal(identity(kind, dt).item(), dt)


def const_literal(value, dtype):
    """Source text of a typed constant (so float32 code never silently widens)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return "True" if value else "False"
    if dt.kind == "f":
        if value != value:
            body = "nan"
        elif value in (float("inf"), float("-inf")):
            body = "inf" if value > 0 else "-inf"
        else:
            body = repr(float(value))
        return f"{dt.name}({body})" if body[0] not in "-" else f"{dt.name}({body})"
    return f"{dt.name}({int(value)})"


def linearize(kernel, layout, aligned=None, simulator=False, fusions=()):
    return Linearizer(kernel, layout, aligned, simulator, fusions).run()
