"""The chunks of a pass: resident (straight-line), streamed (a loop, maybe peeled) or staged."""


class Chunk:
    """One chunk of a pass: V consecutive positions of the loop variable. ``stage_it`` is
    set for the chunks of a resident row kept in shared memory: they are walked by a loop
    (its variable), so that the compiler does not hold them all in registers at once."""

    def __init__(self, group, u, qvar, mask, stage_it=None, whole=False):
        self.group, self.u, self.qvar, self.mask = group, u, qvar, mask
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
                yield Chunk(g, u, q, mask, whole=span * plan.chunks <= inside)
            if plan.staged:
                yield from self.staged_chunks(g, first, plan.staged, span, v, at)
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
            yield Chunk(g, u, q, self.mask(q, bound, masked), whole=not masked)
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
            yield Chunk(g, u, q, self.mask(q, bound, first + span > extent))

    def staged_chunks(self, g, first, count, span, v, at=""):
        """The chunks of a resident row kept in shared memory: a loop over them; the first
        pass loads them from memory and stores them, later passes read them back."""
        it = self.names.new(f"st{g.id}")
        self.add("LOOP", (it,), arg=(count, g.id))
        q = self.names.new(f"{g.var.name}_s")
        lane_part = f"lane * {v}" if v > 1 else "lane"
        self.add("INDEX", (q,), (it, "lane"), arg=f"{at}({it} + {first}) * {span} + {lane_part}")
        inside, bound = self.limits(g)
        yield Chunk(g, "s", q, self.mask(q, bound, (first + count) * span > inside),
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
