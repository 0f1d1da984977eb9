"""What lowering a call gives (``Lowered``: the graph, the schedule, the kernels) and what
compiling it gives (``Compiled``), and the targets a lowering may be for."""
from . import dtypes
from .errors import ArgumentError


class Lowered:
    """What a call would run: the traced graph, the kernels and their sources."""

    def __init__(self, graph_text, schedule_text, kernels, out_specs, structure, temps,
                 target=None):
        self.graph_text, self.schedule_text = graph_text, schedule_text
        self.kernels = kernels
        self.out_specs, self.structure = out_specs, structure
        self.temps = temps          # intermediates kernels pass through memory
        self.target = target        # "sim" or "sm_XY" (None: a GPU of no known kind)

    @property
    def generic(self):
        """Whether every kernel's code is the same for every count of its rows."""
        return all(k.kernel.generic for k in self.kernels)

    @property
    def has_bfloat16(self):
        """Whether an output or temporary is bfloat16 (CuPy, hence the fast path, has none)."""
        return any(dtypes.is_bfloat16(dt) for dt, _ in self.out_specs) or \
            any(dtypes.is_bfloat16(t.dtype) for t in self.temps)

    def as_text(self):
        """The emitted numba.cuda source of every kernel."""
        return "\n\n".join(k.source for k in self.kernels)

    def __repr__(self):
        return f"<Lowered: {len(self.kernels)} kernel(s): " + \
            ", ".join(k.name for k in self.kernels) + ">"


class Compiled:
    """One signature's lowered kernels and their numba kernel objects."""

    def __init__(self, lowered, launchers):
        self.lowered, self.launchers = lowered, launchers


def parse_target(target):
    """(simulator, compute capability) of a ``target=``: None (this machine), "sim", or
    "sm_XY" (compute capability X.Y)."""
    if target is None:
        return None, None
    if target == "sim":
        return True, None
    text = target if isinstance(target, str) else ""
    digits = text[3:].rstrip("af")
    if not text.startswith("sm_") or not digits.isdigit() or len(digits) < 2:
        raise ArgumentError(f"target must be 'sim' or a GPU's compute capability such as "
                            f"'sm_90', got {target!r}")
    return False, (int(digits[:-1]), int(digits[-1]))


def target_name(simulator, cc):
    """The target a lowering is for, as ``target=`` names it (None: a GPU of no known kind)."""
    if simulator:
        return "sim"
    return None if cc is None else f"sm_{cc[0]}{cc[1]}"
