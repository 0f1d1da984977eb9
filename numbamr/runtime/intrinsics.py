"""The intrinsics the emitted kernels import (numba.cuda targets only).

Here: bfloat16 conversions, ``select`` (an LLVM select, not a branch), a product that never
fuses into an FMA, NaN-propagating float32 max/min, and programmatic dependent launch. The
families in modules of their own are imported here, so a kernel names every intrinsic from
this module: vector loads and stores (``intrinsics_vector``), split rows' exchanges
(``intrinsics_exchange``), persistent clusters' bulk copies (``intrinsics_bulk``).
"""
from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

from .intrinsics_bulk import (bulk_load, init_fence, mbar_expect, mbar_init, mbar_wait,
                              proxy_fence, xbar_wait_parity)
from .intrinsics_exchange import (arrive_and_wait, cluster_arrive, cluster_wait, xbar_arm,
                                  xbar_wait, xload, xload_int, xsend, xstore)
from .intrinsics_ir import statement
from .intrinsics_vector import vload, vload_keep, vstore

__all__ = ["vload", "vload_keep", "vstore", "bf16_to_f32", "f32_to_bf16", "f32_to_bf16_cvt",
           "f64_to_f32_odd", "select", "mul_rn", "fmax_nan", "fmin_nan", "griddep_wait",
           "griddep_launch", "xstore", "xload", "xload_int", "arrive_and_wait", "xbar_arm",
           "cluster_arrive", "cluster_wait", "xsend", "xbar_wait", "mbar_init", "mbar_expect",
           "mbar_wait", "xbar_wait_parity", "bulk_load", "init_fence", "proxy_fence"]


# ---- bfloat16: stored as its 16 bits (uint16), computed in float32 ----------------------

@intrinsic
def bf16_to_f32(typingctx, bits):
    """The float32 value of bfloat16 ``bits`` (exact: its 16 bits are float32's high half)."""
    if bits != types.uint16:
        return None
    sig = types.float32(bits)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        wide = builder.shl(builder.zext(args[0], i32), ir.Constant(i32, 16))
        return builder.bitcast(wide, ir.FloatType())
    return sig, codegen


@intrinsic
def f32_to_bf16(typingctx, value):
    """The bits of float32 ``value`` rounded to the nearest bfloat16 (ties to even; NaN stays
    a quiet NaN of the same sign; overflow rounds to inf), as ml_dtypes does."""
    if value != types.float32:
        return None
    sig = types.uint16(value)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        bits = builder.bitcast(args[0], i32)
        odd = builder.and_(builder.lshr(bits, ir.Constant(i32, 16)), ir.Constant(i32, 1))
        rounded = builder.add(bits, builder.add(ir.Constant(i32, 0x7FFF), odd))
        high = builder.lshr(rounded, ir.Constant(i32, 16))
        quiet_nan = builder.or_(builder.lshr(bits, ir.Constant(i32, 16)), ir.Constant(i32, 0x40))
        is_nan = builder.fcmp_unordered("uno", args[0], args[0])
        out = builder.select(is_nan, quiet_nan, high)
        return builder.trunc(out, ir.IntType(16))
    return sig, codegen


@intrinsic
def f32_to_bf16_cvt(typingctx, value):
    """``f32_to_bf16`` as one instruction, ``cvt.rn.bf16.f32`` (sm_80 and newer): the same
    bits for every number (ties to even, overflow to inf, subnormals kept); a NaN comes out
    as the canonical quiet NaN, 0x7FFF, where the bit form keeps its sign and payload. The
    bit form is seven integer instructions and a NaN test per element."""
    if value != types.float32:
        return None
    sig = types.uint16(value)

    def codegen(context, builder, sig, args):
        i16 = ir.IntType(16)
        # no side effect and no memory: the compiler may schedule or share it freely
        cvt = ir.InlineAsm(ir.FunctionType(i16, [ir.FloatType()]), "cvt.rn.bf16.f32 $0, $1;",
                           "=h,f")
        return builder.call(cvt, [args[0]])
    return sig, codegen


@intrinsic
def f64_to_f32_odd(typingctx, value):
    """float64 ``value`` as float32 rounded to odd: truncated toward zero, with the lowest
    bit set where that dropped anything. Rounding this to bfloat16 gives the bfloat16 nearest
    ``value`` (float32 keeps more than two bits beyond bfloat16's, and the odd bit stands
    for the dropped ones): float64 through a float32 rounded to nearest would round twice,
    onto a bfloat16 midpoint and then to even. NaN and infinities pass through."""
    if value != types.float64:
        return None
    sig = types.float32(value)

    def codegen(context, builder, sig, args):
        i32, f64 = ir.IntType(32), ir.DoubleType()
        x = args[0]
        near = builder.fptrunc(x, ir.FloatType())
        back = builder.fpext(near, f64)
        zero = ir.Constant(f64, 0.0)          # rounded away from zero: back past x
        away = builder.or_(
            builder.and_(builder.fcmp_ordered(">", x, zero), builder.fcmp_ordered(">", back, x)),
            builder.and_(builder.fcmp_ordered("<", x, zero), builder.fcmp_ordered("<", back, x)))
        bits = builder.sub(builder.bitcast(near, i32), builder.zext(away, i32))
        inexact = builder.fcmp_ordered("!=", back, x)
        bits = builder.or_(bits, builder.zext(inexact, i32))
        return builder.bitcast(bits, ir.FloatType())
    return sig, codegen


@intrinsic
def select(typingctx, cond, a, b):
    """``a if cond else b`` as one LLVM ``select``: both sides are plain values already, and
    without the branch numba's front end sees fewer basic blocks (it compiles much faster on
    kernels with many NaN-aware max/min steps)."""
    if not isinstance(cond, types.Boolean):
        return None
    ty = typingctx.unify_types(a, b)
    if ty is None:
        return None
    sig = ty(cond, a, b)

    def codegen(context, builder, sig, args):
        c, x, y = args
        x = context.cast(builder, x, sig.args[1], sig.return_type)
        y = context.cast(builder, y, sig.args[2], sig.return_type)
        return builder.select(c, x, y)
    return sig, codegen


@intrinsic
def mul_rn(typingctx, a, b):
    """``a * b`` rounded to nearest as one ``mul.rn`` instruction, which the compiler never
    fuses with a following add into an FMA (an FMA would use the unrounded product: a
    quotient computed through a reciprocal must round the same wherever it is used)."""
    if not isinstance(a, types.Float) or a != b or a.bitwidth not in (32, 64):
        return None
    sig = a(a, b)

    def codegen(context, builder, sig, args):
        bits = sig.return_type.bitwidth
        fty = ir.FloatType() if bits == 32 else ir.DoubleType()
        reg = "f" if bits == 32 else "d"
        asm = ir.InlineAsm(ir.FunctionType(fty, [fty, fty]), f"mul.rn.f{bits} $0, $1, $2;",
                           f"={reg},{reg},{reg}")
        return builder.call(asm, list(args))
    return sig, codegen


def _nan_minmax(name, op):
    @intrinsic
    def fn(typingctx, a, b):
        if not isinstance(a, types.Float) or not isinstance(b, types.Float):
            return None
        sig = types.float32(a, b)

        def codegen(context, builder, sig, args):
            f32 = ir.FloatType()
            x, y = (context.cast(builder, v, t, types.float32) for v, t in zip(args, sig.args))
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32, f32]), f"{op}.NaN.f32 $0, $1, $2;",
                               "=f,f,f")
            return builder.call(asm, [x, y])
        return sig, codegen
    fn.__name__ = name
    fn.__doc__ = (f"numpy's {'maximum' if op == 'max' else 'minimum'} of two float32 values "
                  f"(NaN if either is NaN) as one ``{op}.NaN.f32`` (sm_80 and newer).")
    return fn


fmax_nan = _nan_minmax("fmax_nan", "max")
fmin_nan = _nan_minmax("fmin_nan", "min")


# ---- programmatic dependent launch (sm_90): a kernel launched with the stream's
# programmatic serialization may start while the previous kernel's last blocks still run;
# it must wait for that kernel (its writes visible) before touching global memory.
griddep_wait = statement(
    "griddep_wait", "griddepcontrol.wait;",
    "Wait until the kernels this one depends on have finished and their writes are visible "
    "(returns at once in a kernel launched the ordinary way).")
griddep_launch = statement(
    "griddep_launch", "griddepcontrol.launch_dependents;",
    "Let the stream's next kernel, if launched as a programmatic dependent, start its "
    "blocks once every block of this one has got here or ended.")
