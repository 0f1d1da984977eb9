"""The emitter's rules for split rows: the blocks of a row exchange their partials, through
each other's shared memory where they are a cluster (``xsend``, one mbarrier an exchange),
else through global memory with arrival counts; the simulator runs a phase an exchange."""
import numpy as np

from .emit_text import cast_text, integer_partial


class SplitRowsMixin:
    """Rules of the exchange ops (``Emitter`` supplies ``line``, ``p``, ``target`` and
    ``dsmem``)."""

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
        if integer_partial(ins.dtype):     # crossed as an int64 (runtime.intrinsics.xstore)
            got = f"xload_int({buf}, {at})"
            read_as = np.dtype(np.int64)
        else:                               # as a float64's bits
            got = f"xsm[{at}]" if self.dsmem else f"xload({buf}, {at})"
            read_as = np.dtype(np.float64)
        dt = np.dtype(ins.dtype)
        self.line(f"{ins.out[0]} = {got if dt == read_as else cast_text(got, dt)}")

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
