"""The prologue: parameters, thread and row indices, split segments, shared memory."""
import numpy as np

from ..accesses import edge_anchor, staged_loads, staged_region_bytes
from .literals import exchange_dtype


class PrologueMixin:
    """What a kernel declares before its first pass."""

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
            self.row_edges()
            self.add("INDEX", ("seg",), ("bid",), arg=f"bid % {L.split}")
            head = self.edges.get(k.groups[0].id)
            self.add("INDEX", ("seg_base",), ("seg",) + ((head[1],) if head else ()),
                     arg=f"{head[1]} + seg * {seg_len}" if head else f"seg * {seg_len}")
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
        if L.split == 1:
            self.row_edges()
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

    def row_edges(self):
        """Name, for each loop group walked as an aligned body with edges, where the row's
        body starts (``hd``: the head's length, which brings the anchor access to a vector
        boundary) and ends (``hm``, at most ``extent``; the tail lies past it)."""
        self.edges = {}
        for g in self.k.groups:
            plan = self.L.groups[g.id]
            if not plan.edges:
                continue
            w, n = plan.vector, g.extent
            anchor = edge_anchor(self.k, g)
            names = tuple(sorted(x.name for x in anchor.vars()))
            hd, hm = self.names.new(f"head{g.id}"), self.names.new(f"body_end{g.id}")
            self.add("INDEX", (hd,), names,
                     arg=f"(-({anchor.render(lambda x: x.name)})) & {w - 1}")
            self.add("INDEX", (hm,), (hd,), arg=f"{n} - ({n} - {hd}) % {w}")
            self.edges[g.id] = (anchor, hd, hm)

    def segment_end(self, g, seg_len):
        """A split row's segments are alike but the last, which ends with the row (sooner);
        ``self.inside`` is what every block holds. Where a block's chunks reach past that,
        positions are masked by ``seg_end``, where its own segment ends (a row with edges:
        its body's end, which moves with the row)."""
        plan = self.L.groups[g.id]
        head = self.edges.get(g.id)
        last = plan.body(g.extent) - (self.L.split - 1) * seg_len
        self.inside = max(0, min(seg_len,
                                 plan.least_body(g.extent) - (self.L.split - 1) * seg_len))
        per_pass = self.L.threads_per_row * plan.vector * plan.chunks
        if not per_pass or -(-seg_len // per_pass) * per_pass <= self.inside:
            return      # (rows of nothing hold no chunks)
        end = f"seg_base + {seg_len}"
        if head:
            self.add("INDEX", ("seg_end",), ("seg_base", head[2]), arg=f"min({end}, {head[2]})")
        else:
            self.add("INDEX", ("seg_end",), ("seg_base",),
                     arg=end if last == seg_len else f"min({end}, {g.extent})")
        self.names.used.add("seg_end")

    def limits(self, g):
        """(positions of ``g`` that every block holds, what a position is masked against)."""
        if self.L.split > 1:
            return self.inside, "seg_end"
        head = self.edges.get(g.id)
        if head:
            return self.L.groups[g.id].least_body(g.extent), head[2]
        return g.extent, g.extent

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
                offset += staged_region_bytes(plan.staged, self.L.threads_per_row, plan.vector, dt)
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
