"""Split rows: the blocks of a row exchange their partials, through global memory (a
counter of arrivals per row) or, where they are a cluster, into each other's shared memory
(one mbarrier an exchange). A partial crosses as 64 bits (``exchange_bits``)."""
from llvmlite import ir
from numba import types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

from .intrinsics_ir import asm, element_pointer, shared_address, statement


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
        builder.store(bits, element_pointer(context, builder, sig.args[0], args[0], args[1]))
    return sig, codegen


@intrinsic
def xload(typingctx, buf, idx):
    """The float64 whose bits are at ``buf[idx]``."""
    sig = types.float64(buf, idx)

    def codegen(context, builder, sig, args):
        ptr = element_pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.bitcast(builder.load(ptr), ir.DoubleType())
    return sig, codegen


@intrinsic
def xload_int(typingctx, buf, idx):
    """The int64 whose bits are at ``buf[idx]`` (an integer or bool partial; ``buf``: the
    int64 scratch, or a cluster's float64 exchange buffer in shared memory)."""
    sig = types.int64(buf, idx)

    def codegen(context, builder, sig, args):
        ptr = element_pointer(context, builder, sig.args[0], args[0], args[1])
        i64p = ir.PointerType(ir.IntType(64), ptr.type.addrspace)
        return builder.load(builder.bitcast(ptr, i64p))
    return sig, codegen


@intrinsic
def arrive_and_wait(typingctx, flags, idx, target):
    """Fence, add one to ``flags[idx]`` (int32), then spin until it reaches ``target``."""
    sig = types.void(flags, idx, target)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        ptr = element_pointer(context, builder, sig.args[0], args[0], args[1])
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

@intrinsic
def xbar_arm(typingctx, bars, idx, nbytes):
    """Initialize mbarrier ``bars[idx]`` for one arrival and arrive on it expecting
    ``nbytes`` of sent partials (one thread of the block, before the cluster barrier)."""
    sig = types.void(bars, idx, nbytes)

    def codegen(context, builder, sig, args):
        addr = shared_address(context, builder, sig.args[0], args[0], args[1])
        count = context.cast(builder, args[2], sig.args[2], types.int32)
        asm(builder, "mbarrier.init.shared::cta.b64 [$0], 1;\n\t"
                     "fence.mbarrier_init.release.cluster;\n\t"
                     "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
            "r,r", (addr, count))
        return context.get_dummy_value()
    return sig, codegen


cluster_arrive = statement(
    "cluster_arrive", "barrier.cluster.arrive.relaxed;",
    "Arrive at the cluster barrier without ordering any memory access (relaxed); the "
    "mbarrier initializations before it are released by their own fence.")


cluster_wait = statement(
    "cluster_wait", "barrier.cluster.wait.acquire;",
    "Wait until every thread of the cluster has arrived (acquire).")


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
        addr = shared_address(context, builder, sig.args[0], args[0], args[1])
        mbar = shared_address(context, builder, sig.args[3], args[3], args[4])
        bits = _exchange_bits(context, builder, sig.args[2], args[2])
        for rank in range(nblocks.literal_value):
            asm(builder, "{\n\t.reg .b32 ra, rb;\n\t"
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
        addr = shared_address(context, builder, sig.args[0], args[0], args[1])
        # The spin loop lives inside the PTX, not in LLVM blocks around a one-shot try_wait:
        # with the loop in LLVM, NVVM computed a register chunk after the wait from a later
        # loop's values (a staged split row in a cluster, docs/architecture.md). The label
        # is local to the braces, so the wait can appear several times in a kernel.
        asm(builder, "{\n\t.reg .pred p;\n\tXBAR_WAIT:\n\t"
                     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [$0], 0;\n\t"
                     "@!p bra XBAR_WAIT;\n\t}", "r", (addr,))
        return context.get_dummy_value()
    return sig, codegen
