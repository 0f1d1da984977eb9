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
from ..ops import Op
from ..runtime.device import L2_POLICY_ARCH, NAN_MINMAX_ARCH, capable
from .emit_persistent import PersistentRowsMixin, launched_dependent, next_kernel_trigger
from .emit_reduce import ReduceRulesMixin
from .emit_split import SplitRowsMixin
from .emit_text import alu_text, cast_text, dtype_name, integer_partial, zero_text

BF16_CVT_ARCH = (8, 0)  # cvt.rn.bf16.f32: float32 to bfloat16 in one instruction


class Emitter(ReduceRulesMixin, SplitRowsMixin, PersistentRowsMixin):
    """One kernel's source: the module head, then one rule (``op_<name>``) per instruction
    of the linear program. The rules of the module's own ops are here: values, loads and
    stores, ALU ops, casts, barriers, staged rows and blocks; the mixins hold those of
    reductions (emit_reduce), split rows' exchanges (emit_split) and persistent clusters
    (emit_persistent); their texts of values are emit_text's."""

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
            ins.op == "XLOAD" and integer_partial(ins.dtype) for ins in p.instrs) else ""
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
            self.line(f"{ins.out[0]} = {got} if {mask} else {zero_text(ins.dtype)}")
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
            zeros = ", ".join([zero_text(ins.dtype)] * n)
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
            self.line(f"{ins.out[0]} = {alu_text(ins.arg, ins.dtype, ins.srcs, self.native)}")

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
        self.line(f"{ins.out[0]} = {cast_text(src, ins.arg, self.dtype_of.get(src))}")

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

    def op_if(self, ins):
        self.line(f"if {ins.arg}:")
        self.indent += 1

    def op_endif(self, ins):
        self.indent -= 1

    def op_exit(self, ins):
        self.line(f"if not ({ins.arg}):")
        self.indent += 1
        self.line("return  # the rest needs only these threads")
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


def emit(program, target="cuda", arch=None):
    """Python source (a module) defining one function named ``program.name``; ``arch``: the
    compute capability the cuda source is for (None: any)."""
    return Emitter(program, target, arch).module()
