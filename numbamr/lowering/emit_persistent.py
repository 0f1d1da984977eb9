"""The emitter's rules for persistent clusters: rows come into stages of shared memory by
bulk copy ahead of their use, and the cluster loops over its rows; and how such a kernel
is launched (a study knob, ``numbamr.experimental.Knobs.persistent_dependent``)."""
from ..experimental import current_knobs
from ..runtime.device import dependent_launches


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


class PersistentRowsMixin:
    """Rules of the ops of a persistent cluster's row loop (``Emitter`` supplies ``line``,
    ``target``, ``dsmem``, ``trigger`` and ``shared_decl``)."""

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
