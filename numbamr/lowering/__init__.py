"""Lowering: one kernel group -> Kernel -> Layout -> linear program -> verified -> source."""
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ArgumentError
from .kernel import build_kernel, format_kernel
from .options import KernelOptions
from .heuristics import choose
from .fingerprint import generic_fingerprint
from .linearize import grid_of, linearize, format_program
from .online import find_fusions
from .pack import DEFAULT_COLUMNS, pack_columns, word_columns
from .verify import verify
from .emit import emit, launched_dependent


@dataclass
class LoweredKernel:
    """Everything known about one kernel; ``source`` is what numba.cuda compiles on a GPU.

    ``targets`` says where each of its outputs goes: ('out', i) is the user's output i,
    ('tmp', name) a temporary that a later kernel reads.
    """
    name: str
    kernel: object          # lowering.kernel.Kernel
    layout: object          # lowering.options.Layout
    program: object         # lowering.linearize.Program
    source: str             # numba.cuda source (GPU target)
    sim_source: str         # the same kernel for numba's CPU simulator (lowered for it)
    targets: list = None
    dependent: bool = False     # launched as a programmatic dependent (waits in the kernel)

    @property
    def grid(self):
        return self.program.grid

    @property
    def block(self):
        return self.program.block

    @property
    def launch_bounds(self):
        """(threads per block[, blocks per SM the compiler must leave registers for])."""
        m = self.layout.min_blocks_per_sm
        return (self.block, m) if m else (self.block,)

    def as_text(self):
        return self.source

    def format(self):
        return format_kernel(self.kernel) + "\n" + format_program(self.program)


def lower_built(kernel, options=None, simulator=False, aligned=None, targets=None, cc=None):
    """Layout, linear program, verification and source for an analyzed kernel, for a GPU of
    compute capability ``cc`` (None: this machine's) or the simulator. A generic kernel
    lowered before (the same fingerprint, for another row count) reuses that lowering, its
    grid sized for these rows."""
    from ..runtime.device import arch
    cc = None if simulator else cc if cc is not None else arch()
    memo = _memo_key(kernel, options, simulator, aligned, targets, cc)
    done = _GENERIC_LOWERED.get(memo) if memo is not None else None
    if done is not None:
        _GENERIC_LOWERED.move_to_end(memo)
        return _for_rows(done, kernel)
    lowered = _lower_fresh(kernel, options, simulator, aligned, targets, cc)
    if memo is not None and lowered.layout.split == 1 and not lowered.layout.persistent:
        # (a split or persistent layout is sized for its rows: such kernels are per shape)
        _GENERIC_LOWERED[memo] = lowered
        if len(_GENERIC_LOWERED) > GENERIC_LOWERED_KEPT:
            _GENERIC_LOWERED.popitem(last=False)
    return lowered


def _lower_fresh(kernel, options, simulator, aligned, targets, cc):
    from ..runtime.device import clusters_available
    clusters = not simulator and clusters_available(cc)
    layout = choose(kernel, options, simulator, clusters=clusters, aligned=aligned)
    program = _packed_program(kernel, layout, options, simulator, clusters, aligned) or \
        _fitted_program(kernel, layout, options, simulator, clusters, aligned)
    return LoweredKernel(kernel.name, program.kernel, program.layout, program,
                         emit(program, "cuda", cc),
                         emit(program, "sim") if simulator else None, targets,
                         launched_dependent(program.layout, cc))


def _program(kernel, layout, aligned, simulator):
    fusions = find_fusions(kernel, layout)
    return verify(linearize(kernel, layout, aligned, simulator, fusions))


STATIC_SHARED = 48 * 1024       # bytes of shared arrays a kernel may declare


def _shared_bytes(program):
    return sum(int(np.prod(shape)) * np.dtype(dt).itemsize for _, shape, dt, _ in program.shared)


def _fitted_program(kernel, layout, options, simulator, clusters, aligned):
    """The program of ``kernel`` in ``layout``; where its reduces' shared arrays (one
    value a thread and accumulator, in a column layout) would pass what a kernel may
    declare, in the same layout with half the threads down each column, until they fit."""
    program = _program(kernel, layout, aligned, simulator)
    while _shared_bytes(program) > STATIC_SHARED:
        t, rb = layout.threads_per_row, layout.rows_per_block
        if layout.layout != "col" or t == 1 or options is not None and \
                (options.threads_per_row or options.rows_per_block):
            raise ArgumentError(
                f"the {len(kernel.reduces)} reductions of kernel {kernel.name} need "
                f"{_shared_bytes(program)} bytes of shared memory in blocks of {t} x {rb} "
                f"threads, more than the {STATIC_SHARED} a kernel may declare: force "
                "fewer threads_per_row or rows_per_block")
        forced = replace(options or KernelOptions(), layout="col", threads_per_row=t // 2,
                         rows_per_block=rb)
        layout = choose(kernel, forced, simulator, clusters=clusters, aligned=aligned)
        program = _program(kernel, layout, aligned, simulator)
    return program


def _packed_program(kernel, layout, options, simulator, clusters, aligned):
    """The program of ``kernel`` with ``options.columns`` adjacent columns a thread
    (``pack.pack_columns``), its column layout chosen again, where it takes them: a column
    layout with a load narrower than 4 bytes, from buffers whose base is aligned, whose
    reduces' shared arrays then stay within what a kernel may declare; else None. Its
    layout keeps the blocks and threads of ``layout`` (docs/heuristics.md#column-pairs)."""
    if layout.layout != "col" or word_columns(kernel) == 1:
        return None
    w = options.columns if options is not None and options.columns else DEFAULT_COLUMNS
    if w == 1:
        return None
    packed = pack_columns(kernel, w)
    if packed is None or aligned is not None and \
            any(("in", head.arg[0]) not in aligned for head, _ in packed.lanes.values()):
        return None     # (a buffer whose base is not aligned: scalar loads of every column)
    # the same blocks of as many threads: w times the threads down each column, each
    # thread w columns of a w-th of the positions
    t, rb = layout.threads_per_row * w, max(1, layout.rows_per_block // w)
    if t > 1024 or t * rb > 1024:
        return None
    forced = replace(options or KernelOptions(), layout="col", threads_per_row=t,
                     rows_per_block=rb)
    layout = choose(packed, forced, simulator, clusters=clusters, aligned=aligned)
    program = _program(packed, layout, aligned, simulator)
    return program if _shared_bytes(program) <= STATIC_SHARED else None


def _memo_key(kernel, options, simulator, aligned, targets, cc):
    from ..experimental import current_knobs       # (they steer the linearizer and emitter)
    fingerprint = generic_fingerprint(kernel)
    if fingerprint is None:
        return None
    return (fingerprint, current_knobs(), options, simulator, frozenset(aligned or ()),
            tuple(map(tuple, targets or ())), cc)


def _for_rows(lowered, kernel):
    """``lowered`` (a generic kernel's) for ``kernel``, the same code for other rows."""
    program = replace(lowered.program, kernel=kernel, grid=grid_of(kernel, lowered.layout))
    return replace(lowered, kernel=kernel, program=program)


# fingerprint and lowering facts -> LoweredKernel: generic kernels lowered in this process
_GENERIC_LOWERED = OrderedDict()
GENERIC_LOWERED_KEPT = 256


def split_into_cluster(kernel, options=None, simulator=False, cc=None):
    """Whether ``kernel``'s rows would be split across a cluster of blocks on a GPU of
    compute capability ``cc`` (None: this machine's)."""
    from ..runtime.device import clusters_available
    if simulator:
        return False
    try:
        layout = choose(kernel, options, False, clusters=clusters_available(cc))
    except ArgumentError:       # options this kernel cannot take: lowering it will say so
        return False
    return layout.split > 1 and layout.cluster


def lower_kernel(name, outputs, layouts, out_layouts, options=None, simulator=False,
                 aligned=None, arg_names=None):
    kernel = build_kernel(outputs, layouts, out_layouts, name, arg_names)
    return lower_built(kernel, options, simulator, aligned)


__all__ = ["lower_kernel", "lower_built", "split_into_cluster", "LoweredKernel",
           "KernelOptions", "choose", "format_kernel", "format_program"]
