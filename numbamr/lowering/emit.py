"""Emit: a linear program becomes Python source for numba.cuda, one rule per instruction op.

Two targets share every rule but a few: ``cuda`` uses warp shuffles, 16-byte vector
loads/stores and, where a split row's blocks are a cluster, sends their partials into each
other's shared memory (``numbamr.runtime.intrinsics``); ``sim`` (numba's CPU simulator, which
has none of these) exchanges through a shared scratch array between two barriers, moves
vectors as scalars and passes a cluster's partials through global memory, keeping the same
combine order, hence the same result bits.
"""
import numpy as np

from .. import dtypes
from ..experimental import current_knobs
from ..ops import Op, ReduceKind
from ..runtime.device import L2_POLICY_ARCH, NAN_MINMAX_ARCH, capable, dependent_launches
from .linearize import const_literal, exchange_dtype as _xdt

FULL_MASK = "0xFFFFFFFF"
BF16_CVT_ARCH = (8, 0)  # cvt.rn.bf16.f32: float32 to bfloat16 in one instruction


def dtype_name(dt):
    """The numba type of values of ``dt`` (bfloat16 values are their bits, a uint16)."""
    dt = np.dtype(dt)
    if dtypes.is_bfloat16(dt):
        return "uint16"
    return "boolean" if dt.kind == "b" else dt.name


def _cast_text(text, to_dt, from_dt=None):
    to_dt = np.dtype(to_dt)
    if from_dt is not None and dtypes.is_bfloat16(from_dt):
        text, from_dt = f"bf16_to_f32({text})", dtypes.FLOAT32
        if to_dt == dtypes.FLOAT32:
            return text
    if dtypes.is_bfloat16(to_dt):
        return f"f32_to_bf16({_to_float32_for_bfloat16(text, from_dt)})"
    if to_dt.kind == "b":
        return f"({text} != 0)"
    return f"{dtype_name(to_dt)}({text})"


def _shuffle_dtype(dt):
    """The dtype ``dt`` crosses a warp shuffle in: numba shuffles only int32, int64, float32
    and float64, so unsigned integers go as the signed integer of their width (numba's casts
    between them keep the bits) and narrower values as shared memory holds them."""
    xdt = _xdt(dt)
    if xdt.kind == "u":
        return np.dtype(f"int{8 * xdt.itemsize}")
    return np.dtype(np.float32) if xdt == np.float16 else xdt


def _integer_partial(dt):
    return np.dtype(dt).kind in "biu"


def _to_float32_for_bfloat16(text, from_dt):
    """``text`` as a float32 that rounds to the bfloat16 nearest its value: float64 (and
    integers, through float64 as ml_dtypes casts them) rounded to odd, so the one rounding to
    bfloat16 is the only one (see intrinsics.f64_to_f32_odd)."""
    from_dt = None if from_dt is None else np.dtype(from_dt)
    if from_dt == dtypes.FLOAT32:
        return text
    if from_dt == np.dtype(np.float64):
        return f"f64_to_f32_odd({text})"
    if from_dt is not None and from_dt.kind in "iu":
        return f"f64_to_f32_odd(float64({text}))"
    return f"float32({text})"


def _narrow(dt):
    """numba widens integer arithmetic to 64 bits; results of narrower ints are cast back."""
    dt = np.dtype(dt)
    return dt.kind in "iu" and dt.itemsize < 8


def _wrap(text, dt):
    return _cast_text(text, dt) if _narrow(dt) else text


def _nan_minmax(op_max, dt, a, b, native):
    """NaN-propagating max/min of texts ``a``, ``b`` (numpy's): one ``max.NaN`` instruction
    where ``native`` (float32 on sm_80 and newer), else compare, NaN test and select."""
    if native and np.dtype(dt) == np.float32:
        return f"{'fmax_nan' if op_max else 'fmin_nan'}({a}, {b})"
    cmp = ">" if op_max else "<"
    return f"select(({a} {cmp} {b}) | ({a} != {a}), {a}, {b})"


# ops that are one function of the target's ``math`` (numba's on the GPU, runtime.simmath in
# the simulator), on all their operands
MATH_FUNCTIONS = {
    Op.EXP: "exp", Op.LOG: "log", Op.LOG2: "log2", Op.SQRT: "sqrt", Op.SIN: "sin",
    Op.COS: "cos", Op.TANH: "tanh", Op.ERF: "erf", Op.LOG1P: "log1p", Op.EXPM1: "expm1",
    Op.SINH: "sinh", Op.COSH: "cosh", Op.TAN: "tan", Op.ASIN: "asin", Op.ACOS: "acos",
    Op.ATAN: "atan", Op.ASINH: "asinh", Op.ACOSH: "acosh", Op.ATANH: "atanh",
    Op.ATAN2: "atan2", Op.HYPOT: "hypot", Op.FMOD: "fmod", Op.COPYSIGN: "copysign",
}


def _alu(op, dt, a, native=False):
    """Source text of an ALU op on operand texts ``a`` with result dtype ``dt`` (``native``:
    see _nan_minmax)."""
    dt = np.dtype(dt)
    f = dt.kind == "f"
    one = f"{dtype_name(dt)}(1.0)" if f else None
    x = a[0]
    simple = {
        Op.ADD: lambda: f"{a[0]} + {a[1]}", Op.SUB: lambda: f"{a[0]} - {a[1]}",
        Op.MUL: lambda: f"{a[0]} * {a[1]}", Op.DIV: lambda: f"{a[0]} / {a[1]}",
        Op.MUL_RN: lambda: f"mul_rn({a[0]}, {a[1]})",
        Op.LT: lambda: f"{a[0]} < {a[1]}", Op.LE: lambda: f"{a[0]} <= {a[1]}",
        Op.GT: lambda: f"{a[0]} > {a[1]}", Op.GE: lambda: f"{a[0]} >= {a[1]}",
        Op.EQ: lambda: f"{a[0]} == {a[1]}", Op.NE: lambda: f"{a[0]} != {a[1]}",
        Op.AND: lambda: f"{a[0]} & {a[1]}", Op.OR: lambda: f"{a[0]} | {a[1]}",
        Op.XOR: lambda: f"{a[0]} ^ {a[1]}", Op.WHERE: lambda: f"select({a[0]}, {a[1]}, {a[2]})",
        Op.NEG: lambda: f"-{x}", Op.ABS: lambda: f"abs({x})",
        Op.ISNAN: lambda: f"{x} != {x}",
    }
    if op in simple:
        text = simple[op]()
        return _wrap(text, dt) if op not in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE,
                                             Op.ISNAN) else text
    if op is Op.NOT:
        return f"not {x}" if dt.kind == "b" else _wrap(f"~{x}", dt)
    if op in (Op.MAX, Op.MIN):
        if f:          # numpy propagates NaN through maximum/minimum
            return _nan_minmax(op is Op.MAX, dt, a[0], a[1], native)
        cmp = ">" if op is Op.MAX else "<"
        return f"select({a[0]} {cmp} {a[1]}, {a[0]}, {a[1]})"
    if op is Op.FLOORDIV and not f:     # floats: Emitter.float_divmod
        return _cast_text(f"{a[0]} // {a[1]} if {a[1]} != 0 else 0", dt)
    if op is Op.MOD and not f:
        return _cast_text(f"{a[0]} % {a[1]} if {a[1]} != 0 else 0", dt)
    if op is Op.POW:
        return _cast_text(f"{a[0]} ** {a[1]}", dt)
    if op in MATH_FUNCTIONS:
        return f"math.{MATH_FUNCTIONS[op]}({', '.join(a)})"
    if op is Op.EXP2:
        return f"{dtype_name(dt)}(2.0) ** {x}"
    if op is Op.RSQRT:
        return f"{one} / math.sqrt({x})"
    if op is Op.SIGMOID:
        return f"{one} / ({one} + math.exp(-{x}))"
    if op is Op.RECIP:
        return f"{one} / {x}" if f else _cast_text(f"1 // {x} if {x} != 0 else 0", dt)
    if op in (Op.FLOOR, Op.CEIL):
        fn = "math.floor" if op is Op.FLOOR else "math.ceil"
        return _cast_text(f"{fn}({x})", dt) if f else x
    raise NotImplementedError(op)


def _update(kind, dt, acc, v, native=False):
    """Text of ``acc`` combined with ``v`` for a reduce of ``kind`` (NaN-propagating max/min;
    ``native``: see _nan_minmax)."""
    if kind is ReduceKind.SUM:
        return _wrap(f"{acc} + {v}", dt)
    if kind is ReduceKind.PROD:
        return _wrap(f"{acc} * {v}", dt)
    cmp = ">" if kind is ReduceKind.MAX else "<"
    if np.dtype(dt).kind == "f":
        return _nan_minmax(kind is ReduceKind.MAX, dt, v, acc, native)
    if np.dtype(dt).kind == "b":
        return f"{acc} | {v}" if kind is ReduceKind.MAX else f"{acc} & {v}"
    return f"select({v} {cmp} {acc}, {v}, {acc})"


def _arg_take(kind, av, ai, bv, bi, first):
    """Condition for an arg-reduce to take (bv, bi) over (av, ai): NaN first, then value,
    then the smaller index (numpy returns the first maximum)."""
    cmp = ">" if kind is ReduceKind.ARGMAX else "<"
    if first:       # in-thread: positions grow, so only a strictly better value moves
        return (f"({bv} {cmp} {av}) | (({bv} != {bv}) & ({av} == {av})) | "
                f"({ai} == {1 << 62})")
    return (f"(({bv} != {bv}) & (({av} == {av}) | ({bi} < {ai}))) | "
            f"(({av} == {av}) & (({bv} {cmp} {av}) | (({bv} == {av}) & ({bi} < {ai}))))")


def launched_dependent(layout, arch):
    """Whether a kernel of ``layout`` is launched as a programmatic dependent of the stream's
    previous kernel (and waits for it itself): every kernel where the GPU has it, but a
    persistent grid only where the study knob ``Knobs.persistent_dependent`` says so (by
    default it is: see numbamr.experimental.Knobs)."""
    return dependent_launches(arch) and \
        (not layout.persistent or current_knobs().persistent_dependent > 0)


def next_kernel_trigger(layout):
    """Where a dependent kernel lets the stream's next kernel start: ``"start"``, ``"last
    row"`` (each block of a persistent grid, at its cluster's last row) or None (as its
    blocks end). A persistent grid fills the GPU: letting the next kernel start at once cost
    it 4-5% on the H200 (numbamr.experimental.Knobs)."""
    if not layout.persistent:
        return "start"
    return {1: "start", 2: "last row"}.get(current_knobs().persistent_dependent)


class Emitter:
    def __init__(self, program, target, arch=None):
        assert target in ("cuda", "sim")
        self.p, self.target = program, target
        # float32 max/min as one max.NaN/min.NaN instruction (sm_80 and newer)
        self.native = target == "cuda" and capable(arch, NAN_MINMAX_ARCH)
        # float32 -> bfloat16 as one cvt.rn.bf16.f32 rather than integer bit steps
        self.bf16_cvt = target == "cuda" and capable(arch, BF16_CVT_ARCH)
        # vector loads of inputs under the L2 evict_last policy (sm_80 and newer)
        self.keep = target == "cuda" and program.layout.evict_last and \
            capable(arch, L2_POLICY_ARCH)
        # a split row's blocks are a cluster: partials go to each block's shared memory
        self.dsmem = target == "cuda" and program.layout.cluster and \
            any(ins.op == "XSTORE" for ins in program.instrs)
        self.dependent = target == "cuda" and launched_dependent(program.layout, arch)
        self.trigger = next_kernel_trigger(program.layout) if self.dependent else None
        self.rounded = any(ins.op == "ALU" and ins.arg is Op.MUL_RN for ins in program.instrs)
        self.lines, self.indent = [], 1
        self.scratch = {}              # (reduce id, dtype) -> scratch array (sim shuffles)
        self.dtype_of = {}             # value name -> dtype (a cast must know its source's)

    def line(self, text):
        self.lines.append("    " * self.indent + text)

    def module(self):
        head = self.module_head()
        if self.target == "sim":
            self.line("math.quiet()")
            self.declare_scratch()
        if self.dependent:
            if self.trigger == "start":
                self.line("griddep_launch()  # the stream's next kernel may start its blocks")
            self.line("griddep_wait()  # the stream's previous kernel has finished")
        if self.dsmem:
            self.declare_cluster_exchange()
        instrs, i = self.p.instrs, 0
        while i < len(instrs):
            masked = _masked_accs(instrs, i)
            if masked:                  # IF mask: ACC ... ENDIF, as selects
                for ins in masked:
                    self.op_acc(ins, mask=instrs[i].arg)
                i += len(masked) + 2
                continue
            ins = instrs[i]
            getattr(self, "op_" + ins.op.lower())(ins)
            for name in ins.out:
                self.dtype_of[name] = ins.dtype
            i += 1
        return "\n".join(head + self.lines) + "\n"

    def module_head(self):
        """The module's comment header, imports and the kernel's signature line with its
        parameter comments."""
        p = self.p
        params = ", ".join(name for name, *_ in p.params)
        head = [f"# numbamr kernel {p.name} ({self.target} target)",
                f"# grid={_generic_grid(p.layout.rows_per_block) if p.kernel.generic else p.grid}"
                f" block={p.block}" +
                (f" min_blocks_per_sm={p.layout.min_blocks_per_sm}"
                 if p.layout.min_blocks_per_sm else "") +
                (f" dynamic_shared={p.dynamic_shared}" if p.dynamic_shared else ""),
                "import math" if self.target == "cuda" else
                "from numbamr.runtime import simmath as math",
                "from numba import cuda",
                "from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, "
                "uint32, uint64,",
                "                         float16, float32, float64)"]
        lib = "intrinsics" if self.target == "cuda" else "simmath"
        head.append(f"from numbamr.runtime.{lib} import select" +
                    (", vload_keep, vstore" if self.keep else
                     ", vload, vstore" if self.target == "cuda" else "") +
                    (", fmax_nan, fmin_nan" if self.native else "") +
                    (", mul_rn" if self.rounded else ""))
        if self.dependent:
            head.append("from numbamr.runtime.intrinsics import griddep_wait" +
                        (", griddep_launch" if self.trigger else ""))
        int_partials = ", xload_int" if any(
            ins.op == "XLOAD" and _integer_partial(ins.dtype) for ins in p.instrs) else ""
        if self.dsmem:
            head.append("from numbamr.runtime.intrinsics import cluster_arrive, cluster_wait, "
                        f"xbar_arm, xbar_wait, xsend{int_partials}")
        elif any(kind == "scratch" for _, kind, _, _ in p.params):
            wait = "sim_phase" if self.target == "sim" else "arrive_and_wait"
            head.append(f"from numbamr.runtime.{lib} import {wait}, xload, xstore{int_partials}")
        if p.layout.persistent and self.target == "cuda":
            head.append("from numbamr.runtime.intrinsics import mbar_init, mbar_expect, "
                        "mbar_wait, bulk_load, init_fence, proxy_fence" +
                        (", xbar_wait_parity" if self.dsmem else ""))
        # bfloat16 values come from parameters or from casts inside the kernel
        if any(dtypes.is_bfloat16(dt) for _, _, dt, _ in p.params) or \
                any(ins.op == "CAST" and dtypes.is_bfloat16(ins.arg) for ins in p.instrs):
            to_bf16 = "f32_to_bf16_cvt as f32_to_bf16" if self.bf16_cvt else "f32_to_bf16"
            head.append(f"from numbamr.runtime.{lib} import bf16_to_f32, {to_bf16}, "
                        "f64_to_f32_odd")
        head += ["inf = math.inf", "nan = math.nan", "", "",
                 f"def {p.name}({params}):"]
        for n, kind, dt, pos in p.params:
            if kind == "rows":
                head.append(f"    # {n}: the number of rows, {dt}")
                continue
            what = {"in": "input", "out": "output"}.get(kind, "exchange between blocks,")
            head.append(f"    # {n}: {what} {pos[0] if kind == 'scratch' else pos}, {dt}")
        return head

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

    def shared_decl(self, text):
        if self.target == "sim":        # see simmath.shared_lock
            self.line("with math.shared_lock:")
            self.indent += 1
            self.line(text)
            self.indent -= 1
        else:
            self.line(text)

    # ---- one rule per op ---------------------------------------------------------------
    def op_comment(self, ins):
        self.line(f"# {ins.arg}")

    def op_special(self, ins):
        self.line(f"{ins.out[0]} = int64(cuda.{ins.arg})")

    def op_index(self, ins):
        self.line(f"{ins.out[0]} = {ins.arg}")

    def op_shared(self, ins):
        shape, rid = ins.arg
        self.shared_decl(f"{ins.out[0]} = cuda.shared.array({shape}, {dtype_name(ins.dtype)})"
                         f"  # reduce #{rid} only")

    def op_define_acc(self, ins):
        self.line(f"{ins.out[0]} = {ins.arg}")

    def op_load(self, ins):
        text, mask = ins.arg
        got = f"{ins.srcs[0]}[{text}]"
        if mask:
            self.line(f"{ins.out[0]} = {got} if {mask} else {_zero(ins.dtype)}")
        else:
            self.line(f"{ins.out[0]} = {got}")

    def op_vload(self, ins):
        text, mask = ins.arg
        buf, n = ins.srcs[0], len(ins.out)
        outs = ", ".join(ins.out)
        if self.target == "cuda":
            src = f"{'vload_keep' if self.keep else 'vload'}({buf}, {text}, {n})"
        else:
            src = "(" + ", ".join(f"{buf}[{text} + {i}]" if i else f"{buf}[{text}]"
                                  for i in range(n)) + ")"
        if mask:
            zeros = ", ".join([_zero(ins.dtype)] * n)
            self.line(f"{outs} = {src} if {mask} else ({zeros})")
        else:
            self.line(f"{outs} = {src}")

    def op_store(self, ins):
        buf, val = ins.srcs[0], ins.srcs[1]
        self.line(f"{buf}[{ins.arg}] = {val}")

    def op_vstore(self, ins):
        text, n = ins.arg
        buf, vals = ins.srcs[0], ins.srcs[1:1 + n]
        if self.target == "cuda":
            self.line(f"vstore({buf}, {text}, ({', '.join(vals)}))")
        else:
            for i, v in enumerate(vals):
                self.line(f"{buf}[{text}{' + ' + str(i) if i else ''}] = {v}")

    def op_alu(self, ins):
        if ins.arg == "copy":
            self.line(f"{ins.out[0]} = {ins.srcs[0]}")
        elif ins.arg in (Op.FLOORDIV, Op.MOD) and np.dtype(ins.dtype).kind == "f":
            self.float_divmod(ins)
        else:
            self.line(f"{ins.out[0]} = {_alu(ins.arg, ins.dtype, ins.srcs, self.native)}")

    def float_divmod(self, ins):
        """Floor division or remainder of floats as NumPy computes them (npy_divmod): from
        the exact ``fmod``, so a remainder is exact (``a - floor(a / b) * b`` is not, and
        can land on the wrong side of 0 or b), and zeros, infinities and NaN come out as
        NumPy's."""
        (a, b), out, t = ins.srcs, ins.out[0], dtype_name(ins.dtype)
        zero, one = f"{t}(0.0)", f"{t}(1.0)"
        m = f"{out}__fmod"
        self.line(f"{m} = math.fmod({a}, {b})")
        # a nonzero remainder of the divisor's sign: the quotient rounds down, not to zero
        fix = f"({m} != {zero}) & (({b} < {zero}) != ({m} < {zero}))"
        if ins.arg is Op.MOD:
            self.line(f"{out} = select({fix}, {m} + {b}, select({m} != {zero}, {m}, "
                      f"math.copysign({zero}, {b})))")
            return
        d, q = f"{out}__div", f"{out}__floor"
        self.line(f"{d} = ({a} - {m}) / {b} - select({fix}, {one}, {zero})")
        self.line(f"{q} = math.floor({d})")
        self.line(f"{q} = select({d} - {q} > {t}(0.5), {q} + {one}, {q})")
        self.line(f"{out} = select({b} == {zero}, {a} / {b}, select({d} != {zero}, {q}, "
                  f"math.copysign({zero}, {a} / {b})))")

    def op_cast(self, ins):
        src = ins.srcs[0]
        self.line(f"{ins.out[0]} = {_cast_text(src, ins.arg, self.dtype_of.get(src))}")

    def op_acc(self, ins, mask=None):
        """One update of an accumulator; under ``mask`` (a masked chunk) as a select, so that
        a masked chunk adds no branch."""
        kind = ins.arg
        if kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN):
            av, ai, v, pos = ins.srcs
            cond = _arg_take(kind, av, ai, v, pos, first=True)
            self.take_pair(av, ai, v, pos, cond if mask is None else f"{mask} & ({cond})")
        else:
            acc, v = ins.srcs
            update = _update(kind, ins.dtype, acc, v, self.native)
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
            self.take_pair(av, ai, bv, bi, _arg_take(kind, av, ai, bv, bi, first=False))
        else:
            self.line(f"{mine[0]} = {_update(kind, ins.dtype, mine[0], other[0], self.native)}")

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
        self.line(f"if _nn > {_lit(0, dt)}:")
        self.indent += 1
        self.line(f"{mu} = {mu} + _d * ({on} / _nn)")
        self.line(f"{m2} = {m2} + {om2} + _d * _d * ({n} * {on} / _nn)")
        self.indent -= 1
        self.line(f"{n} = _nn")

    def lse_combine(self, mine, other, dt):
        (m, s), (om, os_) = mine, other
        self.line(f"_mn = {_update(ReduceKind.MAX, dt, m, om, self.native)}")
        self.line(f"if _mn != {_lit(float('-inf'), dt)}:")
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
        k = _lit(float(len(vals)), dt)
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
            self.line(f"_mn = {_update(ReduceKind.MAX, dt, '_mn', v, self.native)}")
        self.line(f"if _mn != {_lit(float('-inf'), dt)}:")
        self.indent += 1
        terms = " + ".join(f"math.exp({v} - _mn)" for v in vals)
        self.line(f"{s} = {s} * math.exp({m} - _mn) + {terms}")
        self.indent -= 1
        self.line(f"{m} = _mn")

    def op_shfl(self, ins):
        off, rid = ins.arg
        src, dt = ins.srcs[0], np.dtype(ins.dtype)
        xdt = _shuffle_dtype(dt) if self.target == "cuda" else _xdt(dt)
        sent = src if xdt == dt else _cast_text(src, xdt)
        if self.target == "cuda":
            got = f"cuda.shfl_xor_sync({FULL_MASK}, {sent}, {off})"
        else:
            scr = self.scratch[(rid, dt.name)]
            self.line(f"{scr}[tid] = {sent}")
            self.line("cuda.syncthreads()")
            got = f"{scr}[tid ^ {off}]"
        self.line(f"{ins.out[0]} = {got if xdt == dt else _cast_text(got, dt)}")
        if self.target == "sim":
            self.line("cuda.syncthreads()")

    def op_shared_store(self, ins):
        smem, val = ins.srcs
        xdt = _xdt(ins.dtype)
        self.line(f"{smem}[{ins.arg[0]}] = "
                  f"{val if xdt == np.dtype(ins.dtype) else _cast_text(val, xdt)}")

    def op_shared_load(self, ins):
        got = f"{ins.srcs[0]}[{ins.arg[0]}]"
        dt = np.dtype(ins.dtype)
        self.line(f"{ins.out[0]} = {got if _xdt(dt) == dt else _cast_text(got, dt)}")

    # ---- split rows: partials exchanged through memory between the blocks of a row ------
    def declare_cluster_exchange(self):
        """A cluster's exchange buffers: ``xsm[slot][row of the block][block of the row]``
        (floats as float64 bits, integers and bools as int64) and one mbarrier per exchange,
        armed for the bytes it brings (every row of every block of the cluster sends each of
        the exchange's slots)."""
        split, rb = self.p.layout.split, self.p.layout.rows_per_block
        slots = {}                      # exchange -> its slots
        for ins in self.p.instrs:
            if ins.op == "XSTORE":
                slots.setdefault(ins.arg[3], set()).add(ins.arg[1])
        nslots = 1 + max(max(s) for s in slots.values())
        # a persistent cluster's blocks may send the next row's partials before every block
        # has read this row's: rows take turns between two sets of buffers and mbarriers
        sets = 2 if self.p.layout.persistent else 1
        self.xsm_set, self.xbar_set = nslots * rb * split, len(slots)
        self.line(f"xsm = cuda.shared.array({sets * nslots * rb * split}, float64)"
                  "  # every block's partials")
        self.line(f"xbar = cuda.shared.array({sets * len(slots)}, uint64)"
                  "  # one mbarrier an exchange")
        self.line("if cuda.threadIdx.x == 0:")
        self.xbytes = {j: len(slots[j]) * rb * split * 8 for j in slots}
        for k in range(sets):
            for j in sorted(slots):
                self.line(f"    xbar_arm(xbar, {j + k * len(slots)}, {self.xbytes[j]})")
        self.line("cluster_arrive()  # waited for before the first partial is sent")

    def _xsm_index(self, slot, block):
        split, rb = self.p.layout.split, self.p.layout.rows_per_block
        turn = f"(rit & 1) * {self.xsm_set} + " if self.p.layout.persistent else ""
        return f"{turn}{slot * rb * split} + rib * {split} + {block}"

    def op_xopen(self, ins):
        if self.dsmem and ins.arg == 0 and not self.p.layout.persistent:
            self.line("cluster_wait()  # every block of the cluster has armed its mbarriers")

    def op_xstore(self, ins):
        val, buf = ins.srcs[0], ins.srcs[-1]
        index, slot, block, j = ins.arg
        if self.dsmem:
            bar = f"{j} + (rit & 1) * {self.xbar_set}" if self.p.layout.persistent else j
            self.line(f"xsend(xsm, {self._xsm_index(slot, block)}, {val}, xbar, {bar}, "
                      f"{self.p.layout.split})")
        else:
            self.line(f"xstore({buf}, {index}, {val})")

    def op_xload(self, ins):
        index, slot, block = ins.arg
        buf, at = ("xsm", self._xsm_index(slot, block)) if self.dsmem else (ins.srcs[-1], index)
        if _integer_partial(ins.dtype):     # crossed as an int64 (runtime.intrinsics.xstore)
            got = f"xload_int({buf}, {at})"
            read_as = np.dtype(np.int64)
        else:                               # as a float64's bits
            got = f"xsm[{at}]" if self.dsmem else f"xload({buf}, {at})"
            read_as = np.dtype(np.float64)
        dt = np.dtype(ins.dtype)
        self.line(f"{ins.out[0]} = {got if dt == read_as else _cast_text(got, dt)}")

    def op_xsync(self, ins):
        """Wait until every block of the row has published exchange ``j``. The simulator
        runs blocks one after another, so there each exchange is a phase: the kernel is run
        once per phase, and a run stops at the exchange its phase names (earlier exchanges
        read what earlier runs published; the values are the same every run). In a cluster
        every thread waits on its own block's mbarrier, so no block barrier follows."""
        j, split = ins.arg
        if self.target == "sim":
            self.line(f"if sim_phase() == {j}:")
            self.line("    return")
        elif self.dsmem and self.p.layout.persistent:
            # the mbarrier completes one phase a row: wait for this row's, then arm the next
            # (no block sends the next row's partial before every block has read this one's)
            bar = f"{j} + (rit & 1) * {self.xbar_set}"
            self.line(f"xbar_wait_parity(xbar, {bar}, (rit >> 1) & 1)  # exchange {j} of "
                      "this row")
            self.line("if cuda.threadIdx.x == 0:")
            self.line(f"    mbar_expect(xbar, {bar}, {self.xbytes[j]})  # armed again for the "
                      "row after next")
            return
        elif self.dsmem:
            self.line(f"xbar_wait(xbar, {j})  # exchange {j}: the row's partials have arrived")
            return
        else:
            self.line("if tid == 0:")
            self.line(f"    arrive_and_wait({ins.srcs[0]}, tile, {split * (j + 1)})")
        self.line(f"cuda.syncthreads()  # exchange {j}: the row's partials are published")

    def op_barrier(self, ins):
        if not ins.arg:
            self.line("cuda.syncthreads()  # every thread is done with this row's shared memory")
            return
        ids = ", ".join(f"#{i}" for i in ins.arg)
        self.line(f"cuda.syncthreads()  # partials of reduce{'s' if len(ins.arg) > 1 else ''} "
                  f"{ids} written")

    def op_stage_decl(self, ins):
        self.shared_decl(f"{ins.out[0]} = cuda.shared.array(0, {dtype_name(ins.dtype)})"
                         f"  # staged rows (dynamic shared memory)")

    def op_stage_store(self, ins):
        self.line(f"{ins.srcs[0]}[{ins.arg}] = {ins.srcs[1]}")

    def op_stage_load(self, ins):
        self.line(f"{ins.out[0]} = {ins.srcs[0]}[{ins.arg}]")

    # ---- persistent clusters: rows come into shared memory ahead of their use --------
    def op_rows_open(self, ins):
        """One mbarrier a stage; thread 0 starts bringing the cluster's first rows."""
        ahead, self.rows_arg = ins.arg["ahead"], ins.arg
        if self.target == "cuda":
            self.shared_decl(f"rbar = cuda.shared.array({ahead}, uint64)"
                             "  # one mbarrier a stage of rows")
        self.line("if cuda.threadIdx.x == 0:")
        self.indent += 1
        if self.target == "cuda":
            for s in range(ahead):
                self.line(f"mbar_init(rbar, {s}, 1)")
            self.line("init_fence()")
        for s in range(ahead):
            self.line(f"if {s} < mine:")
            self.indent += 1
            self.fill_stage(ins.arg, str(s), f"cid + {s} * ncl")
            self.indent -= 1
        self.indent -= 1
        # the block's other threads wait on the stages' mbarriers: not before they exist
        self.line("cuda.syncthreads()  # the stages' mbarriers are initialized")

    def fill_stage(self, arg, stage, row):
        """Bring the segment of ``row`` of every row input into ``stage``: bulk copies that
        complete on the stage's mbarrier (on a GPU), element copies (in the simulator)."""
        seg, extent = arg["seg"], arg["extent"]
        if self.target == "sim":
            self.line(f"for e in range({seg}):")
            for arr, off, buf, _ in arg["fills"]:
                self.line(f"    {arr}[{off} + {stage} * {seg} + e] = "
                          f"{buf}[({row}) * {extent} + seg_base + e]")
            return
        nbytes = sum(seg * size for *_, size in arg["fills"])
        self.line(f"mbar_expect(rbar, {stage}, {nbytes})")
        for arr, off, buf, size in arg["fills"]:
            piece = current_knobs().bulk_piece // size
            for p in range(0, seg, piece):
                n = min(piece, seg - p) * size
                self.line(f"bulk_load({arr}, {off} + {stage} * {seg} + {p}, {buf}, "
                          f"({row}) * {extent} + seg_base + {p}, {n}, rbar, {stage})")

    def op_rowloop(self, ins):
        ahead = ins.arg
        if self.dsmem:
            self.line("cluster_wait()  # every block of the cluster has armed its mbarriers")
        self.line("for rit in range(mine):  # the cluster's rows: cid, cid + ncl, ...")
        self.indent += 1
        self.line("row = cid + rit * ncl")
        self.line(f"rstage = rit % {ahead}")
        if self.trigger == "last row":
            self.line("if rit == mine - 1:")
            self.line("    griddep_launch()  # the stream's next kernel may start its blocks")
        if self.target == "cuda":
            self.line(f"mbar_wait(rbar, rstage, (rit // {ahead}) & 1)  # this row's stage "
                      "has come")
        else:
            self.line("cuda.syncthreads()  # this row's stage has come")

    def op_svload(self, ins):
        arr, n = ins.srcs[0], len(ins.out)
        if self.target == "cuda":
            src = f"vload({arr}, {ins.arg}, {n})"
        else:
            src = "(" + ", ".join(f"{arr}[{ins.arg} + {i}]" for i in range(n)) + ")"
        self.line(f"{', '.join(ins.out)} = {src}")

    def op_rows_fill(self, ins):
        """Every thread has read this row's stage: bring the row ``ahead`` rows on into it."""
        ahead = ins.arg
        self.line(f"if cuda.threadIdx.x == 0 and rit + {ahead} < mine:")
        self.indent += 1
        if self.target == "cuda":
            self.line("proxy_fence()  # the stage's reads before the copy's writes")
        self.fill_stage(self.rows_arg, "rstage", f"row + {ahead} * ncl")
        self.indent -= 1

    def op_endrowloop(self, ins):
        self.indent -= 1

    def op_if(self, ins):
        self.line(f"if {ins.arg}:")
        self.indent += 1

    def op_endif(self, ins):
        self.indent -= 1

    def op_loop(self, ins):
        n, gid = ins.arg
        self.line(f"for {ins.out[0]} in range({n}):")
        self.indent += 1

    def op_endloop(self, ins):
        self.indent -= 1

    def op_pass(self, ins):
        self.line(f"# -- pass over loop group {ins.arg[0]} (row resident in registers)")

    def op_endpass(self, ins):
        self.line(f"# -- end of pass over loop group {ins.arg[0]}")


def _masked_accs(instrs, i):
    """The ACC instructions of an ``IF`` at ``i`` that holds nothing else, or None."""
    if instrs[i].op != "IF":
        return None
    j = i + 1
    while j < len(instrs) and instrs[j].op == "ACC":
        j += 1
    if j == i + 1 or j == len(instrs) or instrs[j].op != "ENDIF":
        return None
    return instrs[i + 1:j]


def _generic_grid(rows_per_block):
    return "rows" if rows_per_block == 1 else f"ceil(rows / {rows_per_block})"


def _lit(value, dt):
    return const_literal(value, dt)


def _zero(dt):
    dt = np.dtype(dt)
    return "False" if dt.kind == "b" else f"{dtype_name(dt)}(0)"


def emit(program, target="cuda", arch=None):
    """Python source (a module) defining one function named ``program.name``; ``arch``: the
    compute capability the cuda source is for (None: any)."""
    return Emitter(program, target, arch).module()
