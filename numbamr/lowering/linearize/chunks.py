"""The chunks of a pass: resident (straight-line), streamed (a loop, maybe peeled) or staged."""


class Chunk:
    """One chunk of a pass: V consecutive positions of the loop variable. ``stage_it`` is
    set for the chunks of a resident row kept in shared memory: they are walked by a loop
    (its variable), so that the compiler does not hold them all in registers at once."""

    def __init__(self, group, u, qvar, mask, width, stage_it=None, whole=False):
        self.group, self.u, self.qvar, self.mask = group, u, qvar, mask
        self.width = width          # positions of the chunk: the vector, or 1 (a row's edges)
        self.stage_it = stage_it
        # every chunk of this chunk's iteration lies inside the row (no position mask), so
        # a one-pass reduce may take one update for the whole iteration
        self.whole = whole


class ChunksMixin:
    """Opening a pass over a loop group and naming each chunk's positions and masks."""

    def chunks(self, g, peel=False):
        """Open a pass over ``g``; yields a Chunk per chunk; closes the pass when done.
        ``peel``: a streamed row that ends inside an iteration gets a loop over its whole
        iterations, with no position masks, then its last iteration, masked."""
        L = self.L
        plan = L.groups[g.id]
        t, v = L.threads_per_row, plan.vector
        span = t * v
        extent = L.segment(g)       # positions a block walks
        inside, bound = self.limits(g)
        head = self.edges.get(g.id)
        # a split row: this block's segment; a row with edges: its aligned body
        at = "seg_base + " if L.split > 1 else f"{head[1]} + " if head else ""
        if plan.resident:
            first = plan.chunks - plan.staged
            self.add("PASS", arg=(g.id, "resident"))
            for u in range(first):
                if (g.id, u) not in self.resident_q:     # positions stay valid across passes
                    q = self.names.new(f"{g.var.name}_{u}")
                    self.add("INDEX", (q,), ("lane",) + self._at_names(g),
                             arg=f"{at}lane * {v} + {u * span}"
                             if v > 1 else f"{at}lane + {u * span}")
                    self.resident_q[(g.id, u)] = (q, self.mask(q, bound, (u + 1) * span > inside))
                q, mask = self.resident_q[(g.id, u)]
                yield Chunk(g, u, q, mask, v, whole=span * plan.chunks <= inside)
            if plan.staged:
                yield from self.staged_chunks(g, first, plan.staged, span, v, at)
            if head:
                yield self.edge_chunk(g)
            self.add("ENDPASS", arg=(g.id, "resident"))
            if L.persistent:
                # later passes read the row again from shared memory: the registers hold
                # the weights (docs/heuristics.md#persistent-registers)
                self.forget_row_values(g)
            return
        per_iter = span * plan.chunks
        n_iter = -(-extent // per_iter)
        self.streamed[g.id] = self.streamed.get(g.id, 0) + 1
        backward = L.zigzag and self.streamed[g.id] % 2 == 0 and n_iter > 1
        ragged = n_iter * per_iter > inside
        # (the blocks of a split row whose last segment is shorter end in different
        # iterations: there every chunk is masked, no iteration peeled; a row with edges
        # ends its body in the iteration after the ones every row fills)
        peel = peel and (inside == extent or L.split == 1)
        if not peel or not ragged:
            parts = [("loop", n_iter)]
        else:       # the partial iteration comes first when the pass walks backward
            whole = inside // per_iter
            parts = [("loop", whole)] if whole else []
            parts = [("tail", whole)] + parts if backward else parts + [("tail", whole)]
        for kind, n in parts:
            if kind == "loop":
                masked = ragged and not peel
                yield from self.streamed_loop(g, n, per_iter, backward, at, bound, masked)
            else:
                yield from self.streamed_tail(g, n * per_iter, extent, backward, at, bound,
                                              inside)
            for key in [k for k in self.elem_memo if k[1] == g.id]:
                del self.elem_memo[key]
        if head:
            yield self.edge_chunk(g)

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
        self.add("INDEX", (q,), srcs + self._at_names(g),
                 arg=f"{at}{start} + {lane_part} + {offset}")
        return q

    def _at_names(self, g):
        """The names a chunk's first position reads beside the lane and the loop."""
        head = self.edges.get(g.id)
        return ("seg_base",) if self.L.split > 1 else (head[1],) if head else ()

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
        plan = self.L.groups[g.id]
        for u in range(plan.chunks):
            q = self._chunk_index(g, u, backward, at, f"{step} * {per_iter}", srcs)
            yield Chunk(g, u, q, self.mask(q, bound, masked), plan.vector, whole=not masked)
        self.add("ENDLOOP", arg=g.id)

    def streamed_tail(self, g, start, extent, backward, at, bound, inside):
        """The last iteration of a streamed pass, where the row (or a split row's segment,
        all ``extent`` long) ends: each chunk masked by position where it reaches past
        what every row holds (``inside``; positions masked against ``bound``); chunks
        wholly past the end left out."""
        plan = self.L.groups[g.id]
        span = self.L.threads_per_row * plan.vector
        for u in range(plan.chunks):
            first = start + self._chunk_offset(g, u, backward)
            if first >= extent:
                continue
            q = self._chunk_index(g, u, backward, at, start, ("lane",))
            yield Chunk(g, u, q, self.mask(q, bound, first + span > inside), plan.vector)

    def edge_chunk(self, g):
        """The positions of a row with edges outside its aligned body, one a thread: the
        head (``lane < hd``: positions 0..hd-1) and then the tail (from the body's end).
        Taken by the first block of a split row. Its position and mask are named once, in
        the kernel's top scope, for every pass."""
        key = (g.id, "e")
        if key not in self.resident_q:
            _, hd, hm = self.edges[g.id]
            q, ok = self.names.new(f"{g.var.name}_e"), self.names.new(f"ok_{g.var.name}_e")
            self.add("INDEX", (q,), ("lane", hd, hm),
                     arg=f"lane if lane < {hd} else lane - {hd} + {hm}")
            conds = [f"({q} < {g.extent})"] + (["(seg == 0)"] if self.L.split > 1 else []) + \
                ([self.row_mask] if self.row_mask else [])
            self.add("INDEX", (ok,), (q,) + (("seg",) if self.L.split > 1 else ()) +
                     ((self.row_mask,) if self.row_mask else ()), arg=" & ".join(conds))
            self.resident_q[key] = (q, ok)
        q, ok = self.resident_q[key]
        return Chunk(g, "e", q, ok, 1)

    def staged_chunks(self, g, first, count, span, v, at=""):
        """The chunks of a resident row kept in shared memory: a loop over them; the first
        pass loads them from memory and stores them, later passes read them back."""
        it = self.names.new(f"st{g.id}")
        self.add("LOOP", (it,), arg=(count, g.id))
        q = self.names.new(f"{g.var.name}_s")
        lane_part = f"lane * {v}" if v > 1 else "lane"
        self.add("INDEX", (q,), (it, "lane") + self._at_names(g),
                 arg=f"{at}({it} + {first}) * {span} + {lane_part}")
        inside, bound = self.limits(g)
        yield Chunk(g, "s", q, self.mask(q, bound, (first + count) * span > inside), v,
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
