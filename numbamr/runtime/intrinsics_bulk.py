"""Persistent clusters: rows brought into shared memory by the bulk-copy engine, counted off
mbarriers whose phases the threads wait on."""
from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

from .intrinsics_ir import asm, element_pointer, int32, shared_address, statement

# ---- persistent clusters: rows brought into shared memory by the bulk-copy engine --------
# Thread 0 of a block arms a stage's mbarrier for the bytes to come (mbar_expect) and starts
# the copies (bulk_load: ``cp.async.bulk``, each counting its bytes off the mbarrier when it
# lands); every thread waits on the stage's phase parity (mbar_wait). Before a stage that
# threads have read is copied into again, thread 0 orders those reads before the copy's
# writes (proxy_fence). A cluster exchange's mbarrier completes one phase a row
# (xbar_wait_parity), armed again by mbar_expect.


def _mbar_statement(name, text, doc):
    """An intrinsic ``name(bars, idx, value)`` that is inline PTX ``text`` on mbarrier
    ``bars[idx]`` (``$0``, its shared address) and ``value`` (``$1``, as an int32)."""
    def fn(typingctx, bars, idx, value):
        sig = types.void(bars, idx, value)

        def codegen(context, builder, sig, args):
            addr = shared_address(context, builder, sig.args[0], args[0], args[1])
            asm(builder, text, "r,r", (addr, int32(context, builder, sig.args[2], args[2])))
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
            addr = shared_address(context, builder, sig.args[0], args[0], args[1])
            # the spin loop inside the PTX, as in xbar_wait
            asm(builder, "{\n\t.reg .pred p;\n\tPARITY_WAIT:\n\t"
                         f"mbarrier.try_wait.parity.acquire.{scope}.shared::cta.b64 "
                         "p, [$0], $1;\n\t@!p bra PARITY_WAIT;\n\t}", "r,r",
                (addr, int32(context, builder, sig.args[2], args[2])))
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
        to = shared_address(context, builder, sig.args[0], args[0], args[1])
        frm = builder.ptrtoint(element_pointer(context, builder, sig.args[2], args[2],
                                               args[3]), ir.IntType(64))
        mbar = shared_address(context, builder, sig.args[5], args[5], args[6])
        asm(builder, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[$0], [$1], $2, [$3];", "r,l,r,r",
            (to, frm, int32(context, builder, sig.args[4], args[4]), mbar))
        return context.get_dummy_value()
    return sig, codegen


init_fence = statement(
    "init_fence", "fence.mbarrier_init.release.cluster;",
    "Make this thread's mbarrier initializations visible to the cluster and to the copies.")


proxy_fence = statement(
    "proxy_fence", "fence.proxy.async.shared::cta;",
    "Order this block's accesses to shared memory before the bulk copies issued next.")
