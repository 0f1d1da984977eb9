"""Rendering values: a kernel value at a chunk's position (or the row's) becomes instructions."""
import numpy as np

from ...ops import Op
from ..evaluate import BY_RECIPROCAL, walk
from .literals import const_literal
from .names import value_name

# (smallest normal, largest value with a normal reciprocal, rescaling power of two) per dtype
RECIP_SCALE = {np.dtype(np.float32): (2.0 ** -126, 2.0 ** 126, 2.0 ** 64),
               np.dtype(np.float64): (2.0 ** -1022, 2.0 ** 1022, 2.0 ** 512)}
ROUNDED_PRODUCTS = {np.dtype(np.float32), np.dtype(np.float64)}  # mul_rn takes these


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


class ValuesMixin:
    """Values of the kernel rendered once each: row-level ones hoisted before the open block,
    per-element ones memoized by (value, group, chunk, element)."""

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
        name = self.names.new(value_name(val, ch, v))
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
        from . import reciprocal_in_range       # the package's: bench/reciprocal_scale.py swaps it
        from ...experimental import current_knobs
        if current_knobs().reciprocal_proofs and reciprocal_in_range(divisor, tiny, big):
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
