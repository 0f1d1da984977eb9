"""Persistent clusters: a loop over rows, each row's inputs brought ahead by bulk copy."""
import numpy as np

from ...experimental import current_knobs
from ..accesses import column_loads, row_loads
from .chunks import Chunk
from .program import Instr


class PersistentRowsMixin:
    """The row loop of a persistent kernel: its stages, its weights held in registers, the
    reads of a row from its stage and the refills."""

    def open_rows(self):
        """Declare the shared memory the row inputs' next rows come into (``ahead`` stages
        of a segment each), load the weights of every chunk into registers, and open the
        loop over the cluster's rows (ROWS_OPEN starts the first stages' copies)."""
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
            ch = Chunk(g, u, q, None, plan.vector, whole=True)
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
        if current_knobs().persistent_hold_rows:    # docs/heuristics.md#persistent-registers
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
