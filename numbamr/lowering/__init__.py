"""Lowering: one kernel group -> Kernel -> Layout -> linear program -> verified -> source."""
from collections import OrderedDict
from dataclasses import dataclass, replace

from ..errors import ArgumentError
from .kernel import build_kernel, format_kernel
from .options import KernelOptions
from .heuristics import choose
from .fingerprint import generic_fingerprint
from .linearize import grid_of, linearize, format_program
from .online import find_fusions
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
    layout = choose(kernel, options, simulator, clusters=not simulator and clusters_available(cc),
                    aligned=aligned)
    fusions = find_fusions(kernel, layout)
    program = verify(linearize(kernel, layout, aligned, simulator, fusions))
    return LoweredKernel(kernel.name, kernel, layout, program, emit(program, "cuda", cc),
                         emit(program, "sim") if simulator else None, targets,
                         launched_dependent(layout, cc))


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
