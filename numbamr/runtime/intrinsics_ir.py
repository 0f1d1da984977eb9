"""What the intrinsics of the emitted kernels (``runtime.intrinsics``) build on: element and
shared-memory addresses, inline PTX that touches memory, and intrinsics that are one PTX
statement."""
from llvmlite import ir
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic


def element_pointer(context, builder, arrty, arr, idx):
    if isinstance(arrty, types.CPointer):
        return builder.gep(arr, [idx])
    ary = context.make_array(arrty)(context, builder, arr)
    return cgutils.get_item_pointer(context, builder, arrty, ary, [idx], wraparound=False)


def shared_address(context, builder, arrty, arr, idx):
    """The 32-bit shared-memory address of ``arr[idx]`` (``arr`` a shared array)."""
    ptr = element_pointer(context, builder, arrty, arr, idx)
    byte = builder.bitcast(ptr, ir.IntType(8).as_pointer())
    local = builder.addrspacecast(byte, ir.PointerType(ir.IntType(8), 3))
    return builder.ptrtoint(local, ir.IntType(32))


def asm(builder, text, constraints, args=(), result=ir.VoidType()):
    """Inline PTX ``text`` that touches memory (the compiler moves no access across it)."""
    fnty = ir.FunctionType(result, [a.type for a in args])
    clobbers = ",".join(filter(None, (constraints, "~{memory}")))
    return builder.call(ir.InlineAsm(fnty, text, clobbers, side_effect=True), list(args))


def statement(name, text, doc):
    """An intrinsic of no arguments that is one inline PTX statement."""
    @intrinsic
    def fn(typingctx):
        sig = types.void()

        def codegen(context, builder, sig, args):
            asm(builder, text, "")
            return context.get_dummy_value()
        return sig, codegen
    fn.__name__, fn.__doc__ = name, doc
    return fn


def int32(context, builder, ty, value):
    return context.cast(builder, value, ty, types.int32)
