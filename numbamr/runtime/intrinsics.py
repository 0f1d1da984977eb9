"""16-byte vector loads and stores for emitted kernels (numba.cuda targets only).

``a[4*i+k]`` stays four scalar loads in numba's output; these intrinsics load or store
``n`` consecutive elements as one ``<n x T>`` access, aligned to the whole vector up to 16
bytes (a 32-byte vector becomes two 16-byte accesses). The emitter only uses them where the
address is a multiple of ``n`` elements and the buffer's base is 16-byte aligned.
"""
from llvmlite import ir
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic


def _element_pointer(context, builder, arrty, arr, idx):
    if isinstance(arrty, types.CPointer):
        return builder.gep(arr, [idx])
    ary = context.make_array(arrty)(context, builder, arr)
    return cgutils.get_item_pointer(context, builder, arrty, ary, [idx], wraparound=False)


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
    ptr = _element_pointer(context, builder, arrty, arr, idx)
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
        got = _asm(builder, text, ",".join(["=r"] * n + ["l", "l"]), (addr, policy), rty)
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


# ---- split rows: the blocks of a row exchange partials through global memory ------------
# A block publishes a partial (xstore), then thread 0 announces it and waits until every
# block of the row has (arrive_and_wait: fence, atomic add, spin on an atomic read, fence),
# and a barrier releases the block's other threads to read the partials (xload): the
# pattern of a cooperative grid sync, with a counter per row instead of one per grid. The
# blocks of a row are adjacent in the grid: blocks start in order, so a waiting block's
# partners have started or will start as soon as any block ends.

def _spin_until(builder, arrived, name):
    """A loop that runs ``arrived(builder)`` (an i1) until it is true; the builder is left
    after the loop."""
    spin = builder.append_basic_block(f"{name}_spin")
    done = builder.append_basic_block(f"{name}_done")
    builder.branch(spin)
    builder.position_at_end(spin)
    builder.cbranch(arrived(builder), done, spin)
    builder.position_at_end(done)


def _fence(builder):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                        "llvm.nvvm.membar.gl")
    builder.call(fn, [])


def _exchangeable(value):
    return isinstance(value, (types.Float, types.Integer, types.Boolean))


def _exchange_bits(context, builder, ty, value):
    """The 64 bits a partial crosses an exchange as: a float as a float64's bits (exact for
    float16/32/64), an integer or bool as an int64 (exact: sign- or zero-extended, and
    unsigned 64-bit values keep their bits)."""
    if isinstance(ty, types.Float):
        return builder.bitcast(context.cast(builder, value, ty, types.float64), ir.IntType(64))
    return context.cast(builder, value, ty, types.int64)


@intrinsic
def xstore(typingctx, buf, idx, value):
    """Store ``value``'s exchange bits at ``buf[idx]`` (``buf``: int64 pointer)."""
    if not _exchangeable(value):
        return None
    sig = types.void(buf, idx, value)

    def codegen(context, builder, sig, args):
        bits = _exchange_bits(context, builder, sig.args[2], args[2])
        builder.store(bits, _element_pointer(context, builder, sig.args[0], args[0], args[1]))
    return sig, codegen


@intrinsic
def xload(typingctx, buf, idx):
    """The float64 whose bits are at ``buf[idx]``."""
    sig = types.float64(buf, idx)

    def codegen(context, builder, sig, args):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.bitcast(builder.load(ptr), ir.DoubleType())
    return sig, codegen


@intrinsic
def xload_int(typingctx, buf, idx):
    """The int64 whose bits are at ``buf[idx]`` (an integer or bool partial; ``buf``: the
    int64 scratch, or a cluster's float64 exchange buffer in shared memory)."""
    sig = types.int64(buf, idx)

    def codegen(context, builder, sig, args):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1])
        i64p = ir.PointerType(ir.IntType(64), ptr.type.addrspace)
        return builder.load(builder.bitcast(ptr, i64p))
    return sig, codegen


@intrinsic
def arrive_and_wait(typingctx, flags, idx, target):
    """Fence, add one to ``flags[idx]`` (int32), then spin until it reaches ``target``."""
    sig = types.void(flags, idx, target)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1])
        goal = context.cast(builder, args[2], sig.args[2], types.int32)
        _fence(builder)
        builder.atomic_rmw("add", ptr, ir.Constant(i32, 1), "monotonic")
        _spin_until(builder, lambda b: b.icmp_signed(
            ">=", b.atomic_rmw("add", ptr, ir.Constant(i32, 0), "monotonic"), goal), "flag")
        _fence(builder)
    return sig, codegen


# ---- split rows as clusters: partials sent to every block's shared memory ----------------
# A cluster's blocks can write each other's shared memory. Each exchange has an mbarrier in
# every block, armed at the start for the bytes the exchange will bring. A row's first thread
# sends its partial to every block of the cluster (``st.async``: the write itself counts the
# bytes off the receiver's mbarrier), and each thread waits on its own block's mbarrier: no
# fence, no round trip through global memory, no cluster-wide barrier per exchange. One
# cluster barrier at the start (arrive early, wait just before the first send) makes sure
# every block's mbarriers are armed before anyone writes to them. A block receives nothing
# after its last wait, and every block waits for every other block's partials, so no block
# can exit while another still writes to it.

def _shared_address(context, builder, arrty, arr, idx):
    """The 32-bit shared-memory address of ``arr[idx]`` (``arr`` a shared array)."""
    ptr = _element_pointer(context, builder, arrty, arr, idx)
    byte = builder.bitcast(ptr, ir.IntType(8).as_pointer())
    local = builder.addrspacecast(byte, ir.PointerType(ir.IntType(8), 3))
    return builder.ptrtoint(local, ir.IntType(32))


def _asm(builder, text, constraints, args=(), result=ir.VoidType()):
    """Inline PTX ``text`` that touches memory (the compiler moves no access across it)."""
    fnty = ir.FunctionType(result, [a.type for a in args])
    clobbers = ",".join(filter(None, (constraints, "~{memory}")))
    return builder.call(ir.InlineAsm(fnty, text, clobbers, side_effect=True), list(args))


@intrinsic
def xbar_arm(typingctx, bars, idx, nbytes):
    """Initialize mbarrier ``bars[idx]`` for one arrival and arrive on it expecting
    ``nbytes`` of sent partials (one thread of the block, before the cluster barrier)."""
    sig = types.void(bars, idx, nbytes)

    def codegen(context, builder, sig, args):
        addr = _shared_address(context, builder, sig.args[0], args[0], args[1])
        count = context.cast(builder, args[2], sig.args[2], types.int32)
        _asm(builder, "mbarrier.init.shared::cta.b64 [$0], 1;\n\t"
                      "fence.mbarrier_init.release.cluster;\n\t"
                      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
             "r,r", (addr, count))
        return context.get_dummy_value()
    return sig, codegen


def _statement(name, text, doc):
    """An intrinsic of no arguments that is one inline PTX statement."""
    @intrinsic
    def fn(typingctx):
        sig = types.void()

        def codegen(context, builder, sig, args):
            _asm(builder, text, "")
            return context.get_dummy_value()
        return sig, codegen
    fn.__name__, fn.__doc__ = name, doc
    return fn


cluster_arrive = _statement(
    "cluster_arrive", "barrier.cluster.arrive.relaxed;",
    "Arrive at the cluster barrier without ordering any memory access (relaxed); the "
    "mbarrier initializations before it are released by their own fence.")
cluster_wait = _statement(
    "cluster_wait", "barrier.cluster.wait.acquire;",
    "Wait until every thread of the cluster has arrived (acquire).")

# ---- programmatic dependent launch (sm_90): a kernel launched with the stream's
# programmatic serialization may start while the previous kernel's last blocks still run;
# it must wait for that kernel (its writes visible) before touching global memory.
griddep_wait = _statement(
    "griddep_wait", "griddepcontrol.wait;",
    "Wait until the kernels this one depends on have finished and their writes are visible "
    "(returns at once in a kernel launched the ordinary way).")
griddep_launch = _statement(
    "griddep_launch", "griddepcontrol.launch_dependents;",
    "Let the stream's next kernel, if launched as a programmatic dependent, start its "
    "blocks once every block of this one has got here or ended.")


@intrinsic
def xsend(typingctx, buf, idx, value, bars, bar, nblocks):
    """Write ``value``'s exchange bits (see _exchange_bits) to ``buf[idx]`` in each of the
    cluster's ``nblocks`` blocks (a literal), counting its 8 bytes off that block's mbarrier
    ``bars[bar]``."""
    if not _exchangeable(value) or not isinstance(nblocks, types.IntegerLiteral):
        return None
    sig = types.void(buf, idx, value, bars, bar, nblocks)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        addr = _shared_address(context, builder, sig.args[0], args[0], args[1])
        mbar = _shared_address(context, builder, sig.args[3], args[3], args[4])
        bits = _exchange_bits(context, builder, sig.args[2], args[2])
        for rank in range(nblocks.literal_value):
            _asm(builder, "{\n\t.reg .b32 ra, rb;\n\t"
                          "mapa.shared::cluster.u32 ra, $0, $2;\n\t"
                          "mapa.shared::cluster.u32 rb, $1, $2;\n\t"
                          "st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 "
                          "[ra], $3, [rb];\n\t}",
                 "r,r,r,l", (addr, mbar, ir.Constant(i32, rank), bits))
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def xbar_wait(typingctx, bars, idx):
    """Wait until mbarrier ``bars[idx]`` has completed its first phase (every partial of
    the exchange arrived); acquires the partials for this thread."""
    sig = types.void(bars, idx)

    def codegen(context, builder, sig, args):
        addr = _shared_address(context, builder, sig.args[0], args[0], args[1])
        # The spin loop lives inside the PTX, not in LLVM blocks around a one-shot try_wait:
        # with the loop in LLVM, NVVM computed a register chunk after the wait from a later
        # loop's values (a staged split row in a cluster, docs/architecture.md). The label
        # is local to the braces, so the wait can appear several times in a kernel.
        _asm(builder, "{\n\t.reg .pred p;\n\tXBAR_WAIT:\n\t"
                      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [$0], 0;\n\t"
                      "@!p bra XBAR_WAIT;\n\t}", "r", (addr,))
        return context.get_dummy_value()
    return sig, codegen


# ---- persistent clusters: rows brought into shared memory by the bulk-copy engine --------
# Thread 0 of a block arms a stage's mbarrier for the bytes to come (mbar_expect) and starts
# the copies (bulk_load: ``cp.async.bulk``, each counting its bytes off the mbarrier when it
# lands); every thread waits on the stage's phase parity (mbar_wait). Before a stage that
# threads have read is copied into again, thread 0 orders those reads before the copy's
# writes (proxy_fence). A cluster exchange's mbarrier completes one phase a row
# (xbar_wait_parity), armed again by mbar_expect.

def _int32(context, builder, ty, value):
    return context.cast(builder, value, ty, types.int32)


def _mbar_statement(name, text, doc):
    """An intrinsic ``name(bars, idx, value)`` that is inline PTX ``text`` on mbarrier
    ``bars[idx]`` (``$0``, its shared address) and ``value`` (``$1``, as an int32)."""
    def fn(typingctx, bars, idx, value):
        sig = types.void(bars, idx, value)

        def codegen(context, builder, sig, args):
            addr = _shared_address(context, builder, sig.args[0], args[0], args[1])
            _asm(builder, text, "r,r", (addr, _int32(context, builder, sig.args[2], args[2])))
            return context.get_dummy_value()
        return sig, codegen
    fn.__name__, fn.__doc__ = name, doc
    return intrinsic(fn)


mbar_init = _mbar_statement(
    "mbar_init", "mbarrier.init.shared::cta.b64 [$0], $1;",
    "Initialize mbarrier ``bars[idx]`` for ``value`` arrivals a phase.")
mbar_expect = _mbar_statement(
    "mbar_expect", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
    "Arrive on mbarrier ``bars[idx]``, its phase now waiting for ``value`` more bytes of "
    "asynchronous writes.")


def _parity_wait(name, scope, doc):
    def wait(typingctx, bars, idx, parity):
        sig = types.void(bars, idx, parity)

        def codegen(context, builder, sig, args):
            addr = _shared_address(context, builder, sig.args[0], args[0], args[1])
            # the spin loop inside the PTX, as in xbar_wait
            _asm(builder, "{\n\t.reg .pred p;\n\tPARITY_WAIT:\n\t"
                          f"mbarrier.try_wait.parity.acquire.{scope}.shared::cta.b64 "
                          "p, [$0], $1;\n\t@!p bra PARITY_WAIT;\n\t}", "r,r",
                 (addr, _int32(context, builder, sig.args[2], args[2])))
            return context.get_dummy_value()
        return sig, codegen
    wait.__name__, wait.__doc__ = name, doc
    return intrinsic(wait)


mbar_wait = _parity_wait(
    "mbar_wait", "cta", "Wait until the phase of mbarrier ``bars[idx]`` whose parity is "
    "``parity`` has completed (a stage's bulk copies have landed).")
xbar_wait_parity = _parity_wait(
    "xbar_wait_parity", "cluster", "Wait until the phase of exchange mbarrier ``bars[idx]`` "
    "whose parity is ``parity`` has completed; acquires the partials the cluster sent.")


@intrinsic
def bulk_load(typingctx, dst, didx, src, sidx, nbytes, bars, bar):
    """Copy ``nbytes`` (a multiple of 16, both ends 16-byte aligned) from global ``src[sidx:]``
    to shared ``dst[didx:]`` by the bulk-copy engine, counted off mbarrier ``bars[bar]``."""
    sig = types.void(dst, didx, src, sidx, nbytes, bars, bar)

    def codegen(context, builder, sig, args):
        to = _shared_address(context, builder, sig.args[0], args[0], args[1])
        frm = builder.ptrtoint(_element_pointer(context, builder, sig.args[2], args[2],
                                                args[3]), ir.IntType(64))
        mbar = _shared_address(context, builder, sig.args[5], args[5], args[6])
        _asm(builder, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                      "[$0], [$1], $2, [$3];", "r,l,r,r",
             (to, frm, _int32(context, builder, sig.args[4], args[4]), mbar))
        return context.get_dummy_value()
    return sig, codegen


init_fence = _statement(
    "init_fence", "fence.mbarrier_init.release.cluster;",
    "Make this thread's mbarrier initializations visible to the cluster and to the copies.")
proxy_fence = _statement(
    "proxy_fence", "fence.proxy.async.shared::cta;",
    "Order this block's accesses to shared memory before the bulk copies issued next.")
