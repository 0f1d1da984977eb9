"""The emitter's rules for reductions: accumulator updates (under a mask as selects), the
combines of two partials (Welford/Chan, online max-sum-exp, arg-reduces), one chunk into a
fused accumulator, warp shuffles (through a scratch array in the simulator) and partials
through shared memory."""
import numpy as np

from ..ops import ReduceKind
from .emit_text import (FULL_MASK, arg_take, cast_text, dtype_name, literal, shuffle_dtype,
                        update_text)
from .linearize import exchange_dtype as _xdt


class ReduceRulesMixin:
    """Rules of the reduce ops (``Emitter`` supplies ``line``, ``p``, ``target``, ``native``
    and ``scratch``)."""

    # ---- simulator shuffles: one scratch array per reduce and dtype --------------------
    def declare_scratch(self):
        for ins in self.p.instrs:
            if ins.op == "SHFL":
                key = (ins.arg[1], np.dtype(ins.dtype).name)
                if key not in self.scratch:
                    name = f"xchg_{len(self.scratch)}"
                    self.scratch[key] = name
                    self.shared_decl(f"{name} = cuda.shared.array({self.p.block}, "
                                     f"{dtype_name(_xdt(ins.dtype))})")

    def op_acc(self, ins, mask=None):
        """One update of an accumulator; under ``mask`` (a masked chunk) as a select, so that
        a masked chunk adds no branch."""
        kind = ins.arg
        if kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN):
            av, ai, v, pos = ins.srcs
            cond = arg_take(kind, av, ai, v, pos, first=True)
            self.take_pair(av, ai, v, pos, cond if mask is None else f"{mask} & ({cond})")
        else:
            acc, v = ins.srcs
            update = update_text(kind, ins.dtype, acc, v, self.native)
            self.line(f"{acc} = {update if mask is None else f'select({mask}, {update}, {acc})'}")

    def take_pair(self, av, ai, bv, bi, cond):
        """(av, ai) = (bv, bi) where ``cond`` holds, as two selects on one condition."""
        self.line(f"_take = {cond}")
        self.line(f"{av} = select(_take, {bv}, {av})")
        self.line(f"{ai} = select(_take, {bi}, {ai})")

    def op_combine(self, ins):
        (kind, off), n = ins.arg, len(ins.out)
        mine, other = list(ins.srcs[:n]), list(ins.srcs[n:2 * n])
        if kind == "welford":
            self.welford_combine(mine, other, off, ins.dtype)
        elif kind == "lse":
            self.lse_combine(mine, other, ins.dtype)
        elif kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN):
            (av, ai), (bv, bi) = mine, other
            self.take_pair(av, ai, bv, bi, arg_take(kind, av, ai, bv, bi, first=False))
        else:
            self.line(f"{mine[0]} = {update_text(kind, ins.dtype, mine[0], other[0], self.native)}")

    # ---- one-pass (fused) reduces: Welford/Chan and online max-sum-exp --------------------
    def welford_combine(self, mine, other, off, dt):
        """Chan's merge of (n, mean, M2) pairs; in a butterfly both lanes order the pair the
        same way (lower lane first), so every lane computes the same bits."""
        (n, mu, m2), (on, omu, om2) = mine, other
        if off is not None:
            self.line(f"_hi = (lane & {off}) != 0")
            self.line(f"{n}, {mu}, {m2}, {on}, {omu}, {om2} = "
                      f"({on}, {omu}, {om2}, {n}, {mu}, {m2}) if _hi else "
                      f"({n}, {mu}, {m2}, {on}, {omu}, {om2})")
        self.line(f"_nn = {n} + {on}")
        self.line(f"_d = {omu} - {mu}")
        self.line(f"if _nn > {literal(0, dt)}:")
        self.indent += 1
        self.line(f"{mu} = {mu} + _d * ({on} / _nn)")
        self.line(f"{m2} = {m2} + {om2} + _d * _d * ({n} * {on} / _nn)")
        self.indent -= 1
        self.line(f"{n} = _nn")

    def lse_combine(self, mine, other, dt):
        (m, s), (om, os_) = mine, other
        self.line(f"_mn = {update_text(ReduceKind.MAX, dt, m, om, self.native)}")
        self.line(f"if _mn != {literal(float('-inf'), dt)}:")
        self.indent += 1
        self.line(f"{s} = {s} * math.exp({m} - _mn) + {os_} * math.exp({om} - _mn)")
        self.indent -= 1
        self.line("else:")
        self.indent += 1
        self.line(f"{s} = {s} + {os_}")
        self.indent -= 1
        self.line(f"{m} = _mn")

    def op_online(self, ins):
        """One chunk of values into a fused accumulator."""
        n_acc = len(ins.out)
        accs, vals, dt = ins.srcs[:n_acc], ins.srcs[n_acc:], ins.dtype
        k = literal(float(len(vals)), dt)
        if ins.arg == "welford":
            n, mu, m2 = accs
            self.line(f"_cmu = ({' + '.join(vals)}) / {k}")
            self.line("_cm2 = " + " + ".join(f"({v} - _cmu) * ({v} - _cmu)" for v in vals))
            self.line(f"_nn = {n} + {k}")
            self.line(f"_d = _cmu - {mu}")
            self.line(f"{mu} = {mu} + _d * ({k} / _nn)")
            self.line(f"{m2} = {m2} + _cm2 + _d * _d * ({n} * {k} / _nn)")
            self.line(f"{n} = _nn")
            return
        m, s = accs
        self.line(f"_mn = {m}")
        for v in vals:
            self.line(f"_mn = {update_text(ReduceKind.MAX, dt, '_mn', v, self.native)}")
        self.line(f"if _mn != {literal(float('-inf'), dt)}:")
        self.indent += 1
        terms = " + ".join(f"math.exp({v} - _mn)" for v in vals)
        self.line(f"{s} = {s} * math.exp({m} - _mn) + {terms}")
        self.indent -= 1
        self.line(f"{m} = _mn")

    def op_shfl(self, ins):
        off, rid = ins.arg
        src, dt = ins.srcs[0], np.dtype(ins.dtype)
        xdt = shuffle_dtype(dt) if self.target == "cuda" else _xdt(dt)
        sent = src if xdt == dt else cast_text(src, xdt)
        if self.target == "cuda":
            got = f"cuda.shfl_xor_sync({FULL_MASK}, {sent}, {off})"
        else:
            scr = self.scratch[(rid, dt.name)]
            self.line(f"{scr}[tid] = {sent}")
            self.line("cuda.syncthreads()")
            got = f"{scr}[tid ^ {off}]"
        self.line(f"{ins.out[0]} = {got if xdt == dt else cast_text(got, dt)}")
        if self.target == "sim":
            self.line("cuda.syncthreads()")

    def op_shared_store(self, ins):
        smem, val = ins.srcs
        xdt = _xdt(ins.dtype)
        self.line(f"{smem}[{ins.arg[0]}] = "
                  f"{val if xdt == np.dtype(ins.dtype) else cast_text(val, xdt)}")

    def op_shared_load(self, ins):
        got = f"{ins.srcs[0]}[{ins.arg[0]}]"
        dt = np.dtype(ins.dtype)
        self.line(f"{ins.out[0]} = {got if _xdt(dt) == dt else cast_text(got, dt)}")
