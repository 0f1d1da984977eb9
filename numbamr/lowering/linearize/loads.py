"""Loads and addresses: memory (scalar and vector), staged rows, bool bytes."""
import numpy as np

from ...ops import Op
from .. import symbolic as sym
from .literals import const_literal, memory_dtype


class LoadsMixin:
    """Reads of the kernel's inputs (from memory, a staged copy in shared memory, or a
    persistent row's stage) and the index text of an address."""

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
        width = ch.width
        vector = width > 1 and self.vectorizable(val.arg[1], ch, ("in", val.arg[0]),
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
        head = self.k.lanes.get(val.id)
        if head is not None:
            key = (val.id,) + self._chunk_key(ch, v)
            if key not in self.elem_memo:
                self.column_load(head[0], ch, v)
            return self.elem_memo[key]
        if val.id in self.column_lanes:
            return self.column_load(val, ch, v)
        pos, addr = val.arg
        buf = self.buf[("in", pos)]
        base = self.k.inputs[pos][1]
        if ch is not None and self.vectorizable(addr, ch, ("in", pos), val.dtype):
            if v != 0:          # the vector load of this chunk made it already
                return self.elem_memo[(val.id, ch.group.id, ch.u, v)]
            width = ch.width
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

    def column_load(self, head, ch, v):
        """The vector of a packed row's adjacent columns (``pack.pack_columns``; packed only
        from buffers whose base is aligned) at chunk ``ch`` position ``v`` (or the row's
        own position: ``ch`` None): named for column 0, its other elements kept for the
        loads of the other columns."""
        pos, addr = head.arg
        text, names = self.address(addr, ch, v)
        where = f"{ch.qvar}_{v}" if ch is not None else "row"
        outs = [self.names.new(f"{self.k.inputs[pos][1]}_{where}_c{j}")
                for j in range(self.k.columns)]
        mask = ch.mask if ch is not None else self.row_mask
        raw, dt = self._raw(outs, head.dtype)
        self.add("VLOAD", tuple(raw), (self.buf[("in", pos)],) + names +
                 ((mask,) if mask else ()), arg=(text, mask), dtype=dt)
        self._as_bool(outs, raw)
        for lane, j in self.column_lanes[head.id]:
            self.elem_memo[(lane,) + self._chunk_key(ch, v)] = outs[j]
        return outs[0]

    @staticmethod
    def _chunk_key(ch, v):
        """The rest of an ``elem_memo`` key: (group id, chunk, position)."""
        return (ch.group.id, ch.u, v) if ch is not None else (None, None, v)

    # bool buffers are bytes (uint8 pointers): a bool is loaded as its byte, then taken as
    # "not zero" (NumPy's truth of a byte), and stored as the byte 0 or 1
    def _raw(self, names, dtype):
        """The names and dtype that loads of ``names`` (of ``dtype``) read into."""
        if np.dtype(dtype).kind != "b":
            return names, dtype
        return [self.names.new(f"{n}_u8") for n in names], memory_dtype(dtype)

    def _as_bool(self, names, raw):
        for n, r in zip(names, raw):
            if n != r:
                self.add("ALU", (n,), (r, const_literal(0, np.uint8)), arg=Op.NE,
                         dtype=np.dtype(bool))

    def _stored(self, name, dtype):
        """The value a store of ``name`` (of ``dtype``) writes, of memory_dtype(dtype)."""
        return self.cast(name, dtype, memory_dtype(dtype))

    def vectorizable(self, addr, ch, buf, dtype):
        """Can chunk ``ch``'s positions of ``addr`` be one vector access? Where every
        chunk starts on a vector boundary of the access: its index less the position a
        multiple of the width, or on a row with edges, the same as the anchor's modulo
        the width (the head brings the anchor to a boundary)."""
        g, width = ch.group, ch.width
        if width == 1 or addr.coef(g.var) != 1:
            return False
        if self.aligned is not None and buf not in self.aligned:
            return False
        if width * np.dtype(dtype).itemsize > 32:
            return False
        rest = addr.substitute({g.var: sym.lift(0)})
        head = self.edges.get(g.id)
        if head:
            rest = rest - head[0]
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


def _atom_vars(atom):
    return {atom} if isinstance(atom, sym.Var) else atom.x.vars()
