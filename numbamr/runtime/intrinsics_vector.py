"""16-byte vector loads and stores (and loads under the L2 evict_last policy).

``a[4*i+k]`` stays four scalar loads in numba's output; these intrinsics load or store
``n`` consecutive elements as one ``<n x T>`` access, aligned to the whole vector up to 16
bytes (a 32-byte vector becomes two 16-byte accesses). The emitter only uses them where the
address is a multiple of ``n`` elements and the buffer's base is 16-byte aligned.
"""
from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

from .intrinsics_ir import asm, element_pointer


def _vector_pointer(context, builder, arrty, arr, idx, n):
    """(pointer, memory vector type, alignment) of ``n`` elements from ``idx``. Elements
    narrower than 4 bytes are accessed as 32-bit words: LLVM splits an ``<8 x half>`` access
    into two 8-byte ones, but keeps ``<4 x i32>`` one 16-byte access."""
    elem = context.get_value_type(arrty.dtype)
    nbytes = elem.get_abi_size(context.target_data) * n
    if nbytes < 4 * n and nbytes % 4 == 0:
        vty = ir.VectorType(ir.IntType(32), nbytes // 4)
    else:
        vty = ir.VectorType(elem, n)
    ptr = element_pointer(context, builder, arrty, arr, idx)
    # at most 16-byte alignment is promised: wider vectors (32 bytes) become two accesses
    return builder.bitcast(ptr, vty.as_pointer()), min(16, nbytes)


def _split_words(builder, loaded, elem, count):
    """The ``count`` elements of a loaded vector (narrow ones packed in 32-bit words)."""
    words = loaded.type.count
    if words == count:
        return [builder.extract_element(loaded, ir.Constant(ir.IntType(32), i))
                for i in range(count)]
    per = count // words
    bits = 32 // per
    ity = ir.IntType(bits)
    elems = []
    for w in range(words):
        word = builder.extract_element(loaded, ir.Constant(ir.IntType(32), w))
        for j in range(per):
            part = builder.trunc(builder.lshr(word, ir.Constant(ir.IntType(32), bits * j)), ity)
            elems.append(builder.bitcast(part, elem) if elem != ity else part)
    return elems


# L2 keeps the lines these loads bring in ahead of others (the kernel's written lines go
# first): on the H200, kernels that write whole rows ran 1-2.3% faster with it (also with
# every call reading a different input), kernels that write a value per row 0.3-1.4% slower
# (bench/RESULTS.md, run 15)
_KEEP_POLICY = "createpolicy.fractional.L2::evict_last.b64 $0, 1.0;"


def _kept_load(builder, vptr, nbytes):
    """Load ``*vptr`` (a vector of ``nbytes``, a multiple of 4, aligned to its size up to 16)
    as 16-byte or narrower pieces of 32-bit words, each with the L2 evict_last policy."""
    vty = vptr.type.pointee
    i32 = ir.IntType(32)
    base = builder.ptrtoint(vptr, ir.IntType(64))
    # no side effect and no memory read: the compiler is free to share it between loads
    policy_fn = ir.InlineAsm(ir.FunctionType(ir.IntType(64), []), _KEEP_POLICY, "=l")
    policy = builder.call(policy_fn, [])
    words = []
    for offset in range(0, nbytes, 16):
        n = min(4, (nbytes - offset) // 4)
        addr = builder.add(base, ir.Constant(ir.IntType(64), offset))
        outs = ", ".join(f"${i}" for i in range(n))
        shape = f".v{n}.b32 {{{outs}}}" if n > 1 else f".b32 {outs}"
        text = f"ld.global.L2::cache_hint{shape}, [${n}], ${n + 1};"
        rty = ir.LiteralStructType([i32] * n) if n > 1 else i32
        got = asm(builder, text, ",".join(["=r"] * n + ["l", "l"]), (addr, policy), rty)
        words += [builder.extract_value(got, i) for i in range(n)] if n > 1 else [got]
    vec = ir.Constant(ir.VectorType(i32, len(words)), ir.Undefined)
    for i, w in enumerate(words):
        vec = builder.insert_element(vec, w, ir.Constant(i32, i))
    return builder.bitcast(vec, vty)


def _vload(keep):
    def vload(typingctx, arr, idx, n):
        if not isinstance(n, types.IntegerLiteral):
            return None
        count = n.literal_value
        sig = types.UniTuple(arr.dtype, count)(arr, idx, n)

        def codegen(context, builder, sig, args):
            vptr, align = _vector_pointer(context, builder, sig.args[0], args[0], args[1], count)
            elem = context.get_value_type(sig.args[0].dtype)
            pointee = vptr.type.pointee
            nbytes = pointee.count * pointee.element.get_abi_size(context.target_data)
            if keep and nbytes % 4 == 0:
                loaded = _kept_load(builder, vptr, nbytes)
            else:
                loaded = builder.load(vptr, align=align)
            return context.make_tuple(builder, sig.return_type,
                                      _split_words(builder, loaded, elem, count))
        return sig, codegen
    vload.__name__ = "vload_keep" if keep else "vload"
    vload.__doc__ = ("Load ``n`` (a literal) elements of ``arr`` from ``idx`` as one vector "
                     "access" + (" under the L2 evict_last policy (sm_80 and newer)" if keep
                                 else "") + ".")
    return intrinsic(vload)


vload = _vload(False)
vload_keep = _vload(True)


@intrinsic
def vstore(typingctx, arr, idx, vals):
    """Store the tuple ``vals`` at ``arr[idx:idx+len(vals)]`` as one vector access."""
    if not isinstance(vals, types.BaseTuple):
        return None
    count = len(vals)
    sig = types.void(arr, idx, vals)

    def codegen(context, builder, sig, args):
        vptr, align = _vector_pointer(context, builder, sig.args[0], args[0], args[1], count)
        dtype = sig.args[0].dtype
        elem = context.get_value_type(dtype)
        vals = [context.cast(builder, builder.extract_value(args[2], i), sig.args[2][i], dtype)
                for i in range(count)]
        vty = vptr.type.pointee
        if vty.count != count:      # narrow elements: pack them into 32-bit words
            per = count // vty.count
            bits = 32 // per
            i32, words = ir.IntType(32), []
            for w in range(vty.count):
                word = ir.Constant(i32, 0)
                for j in range(per):
                    v = vals[w * per + j]
                    if elem != ir.IntType(bits):
                        v = builder.bitcast(v, ir.IntType(bits))
                    word = builder.or_(word, builder.shl(builder.zext(v, i32),
                                                         ir.Constant(i32, bits * j)))
                words.append(word)
            vals = words
        vec = ir.Constant(vty, ir.Undefined)
        for i, v in enumerate(vals):
            vec = builder.insert_element(vec, v, ir.Constant(ir.IntType(32), i))
        builder.store(vec, vptr, align=align)
    return sig, codegen
