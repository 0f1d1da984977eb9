"""What a kernel's loops read and write: the facts the layout heuristics decide on.

Which loads move along a loop group's axis (and whether with the row), how wide their
vectors can be, whether the kernel writes whole rows, how many passes its rows take.
"""
import numpy as np

from ..ops import Op
from .evaluate import walk
from .options import segments_filled
from . import symbolic as sym


def pow2_ceil(n):
    return 1 << max(0, int(n - 1).bit_length())


def group_values(kernel, group):
    """The values computed inside ``group``'s loops: reduce bodies and stored values."""
    return [r.body for r in kernel.reduces if r.group is group] + \
        [s.value for s in kernel.stores if s.group is group]


def group_accesses(kernel, group):
    """(dtype, address) of every load and store inside ``group``'s loops."""
    out = []
    for v in group_values(kernel, group):
        for w in walk(v):
            if w.op is Op.LOAD and group.var in w.arg[1].vars():
                out.append((w.dtype, w.arg[1]))
    for s in kernel.stores:
        if s.group is group:
            out.append((s.dtype, s.addr))
    return out


def contiguous_in(addr, var):
    """Is ``addr`` = (terms without ``var``) + 1 * var?"""
    return addr.coef(var) == 1


def natural_width(kernel, group, forced):
    """Elements a vector access of ``group`` may take, before the row's length is asked
    (1: no access moves along the group contiguously)."""
    acc = group_accesses(kernel, group)
    vec = [dt for dt, a in acc if contiguous_in(a, group.var)]
    if not vec:
        return 1
    # at most 16 bytes of any data per access, so that a warp's weight loads beside float16
    # rows fill whole sectors (docs/heuristics.md#vector-width)
    narrow = min((np.dtype(dt).itemsize for dt in vec if np.dtype(dt).kind != "b"), default=16)
    wide = max(np.dtype(dt).itemsize for dt, _ in acc)
    width = max(1, min(16 // narrow, 16 // wide))
    return width if forced is None else max(1, min(width, forced))


def vector_width(kernel, group, forced, split=1):
    """Elements a vector access of ``group`` takes where its rows are walked in whole
    vectors: the natural width, halved until it divides the row."""
    width = natural_width(kernel, group, forced)
    # whole vectors a row; a split row's segments of whole vectors leave no block empty
    while width > 1 and (group.extent % width or
                         segments_filled(group.extent, split, width) < split):
        width //= 2
    return width


EDGE_MIN_EXTENT = 1024      # rows shorter than this are walked in whole (narrower) vectors


def edge_anchor(kernel, group):
    """The index, less the group's position, of the contiguous access that a row with
    edges aligns its vectors to: the first one that moves with the row (else the first)."""
    rests = [a.substitute({group.var: sym.lift(0)}) for _, a in group_accesses(kernel, group)
             if contiguous_in(a, group.var)]
    moving = [r for r in rests if kernel.row in r.vars()]
    return (moving or rests)[0]


def edges_fit(kernel, group, width, split=1):
    """Can rows of ``group`` whose length ``width`` does not divide be walked as an aligned
    body of whole vectors plus scalar edges (the head before the first 16-byte boundary,
    the tail after the last)? Each contiguous access's index must depend on the row
    alone beside the position, and the body's segments must leave no block empty
    (docs/heuristics.md#row-edges)."""
    n = group.extent
    if width < 2 or n % width == 0 or n < EDGE_MIN_EXTENT:
        return False
    for _, a in group_accesses(kernel, group):
        if contiguous_in(a, group.var) and \
                not a.substitute({group.var: sym.lift(0)}).vars() <= {kernel.row}:
            return False
    return segments_filled(n - n % width, split, width) == split


def address_step(addr, var, other):
    """addr(var=1) - addr(var=0), with ``other`` at 0 (None where var is not in addr)."""
    if var not in addr.vars():
        return None
    at = lambda v: addr.substitute({var: sym.lift(v), other: sym.lift(0)})  # noqa: E731
    d = at(1) - at(0)
    return d.const if d.is_const() else None


def prefers_col(kernel):
    """Column layout when loads walk rows contiguously but loops stride through memory."""
    row = kernel.row
    if kernel.layout_rows < 2:
        return False
    for g in kernel.groups:
        for _, addr in group_accesses(kernel, g):
            if address_step(addr, g.var, row) == 1:
                return False
            if address_step(addr, row, g.var) == 1:
                return True
    return False


def narrowest_load(kernel):
    sizes = [np.dtype(dt).itemsize for g in kernel.groups for dt, _ in group_accesses(kernel, g)]
    return min(sizes, default=4)


def widest_access(kernel, g):
    """Bytes of the widest element ``g``'s accesses read (0: none)."""
    return max((np.dtype(dt).itemsize for dt, _ in group_accesses(kernel, g)), default=0)


def writes_rows(kernel):
    """Does ``kernel`` write outputs over its rows' elements (not only a value per row)?"""
    return any(s.group is not None for s in kernel.stores)


def many_combines_to_a_value(kernel):
    """Does ``kernel`` write a value per row from three reduces or more (a one-hot
    cross-entropy: max, picked logit, sum of exponentials)? Such rows hold twice the values
    a thread (float32: 32), so that each thread's share of the combines halves
    (docs/heuristics.md#many-combines)."""
    return len(kernel.reduces) >= 3 and not writes_rows(kernel)


def unvectorized_kernel(kernel):
    """Is every loop group of ``kernel`` read and written one element an access?"""
    return bool(kernel.groups) and all(
        vector_width(kernel, g, None) == 1 and
        not edges_fit(kernel, g, natural_width(kernel, g, None)) for g in kernel.groups)


def loads_along(kernel, g):
    """Distinct loads of ``g`` whose address moves along the group's axis."""
    seen, out = set(), []
    for v in group_values(kernel, g):
        for w in walk(v):
            if w.op is Op.LOAD and g.var in w.arg[1].vars() and w.id not in seen:
                seen.add(w.id)
                out.append(w)
    return out


def row_loads(kernel, g):
    """The loads of ``g``'s loops whose address depends on the row."""
    return [w for w in loads_along(kernel, g) if kernel.row in w.arg[1].vars()]


def column_loads(kernel):
    """The loads of the kernel's loops whose address does not depend on the row (weights
    indexed by column)."""
    return [w for g in kernel.groups for w in loads_along(kernel, g)
            if kernel.row not in w.arg[1].vars()]


def nonbool_loads_along(kernel, group):
    """Distinct non-bool loads of ``group`` whose address moves along the group's axis."""
    return [w for w in loads_along(kernel, group) if w.dtype.kind != "b"]


def staged_loads(kernel, group):
    """Loads of ``group`` whose address depends on the row: the per-row data that staging
    keeps on chip (row-independent data such as weights is re-read from L2)."""
    return [w for w in nonbool_loads_along(kernel, group) if kernel.row in w.arg[1].vars()]


def has_row_independent_loads(kernel, group):
    return any(kernel.row not in w.arg[1].vars() for w in nonbool_loads_along(kernel, group))


def streamed_passes(kernel, layout):
    """Passes over each loop group when its rows are streamed (one-pass fusions counted)."""
    from .online import find_fusions
    fused = {f.second.id for f in find_fusions(kernel, layout)}
    out = {}
    for g in kernel.groups:
        depths = {r.depth for r in kernel.reduces if r.group is g and r.id not in fused}
        out[g.id] = len(depths) + any(s.group is g for s in kernel.stores)
    return out


def staged_region_bytes(staged, t, v, dtype):
    """Bytes of one staged load, rounded up to 16 (regions start 16-byte aligned)."""
    return -(-staged * t * v * np.dtype(dtype).itemsize // 16) * 16


def whole_segments(layout, g):
    """Do the ``layout.split`` segments of group ``g`` cover its rows exactly, each in
    whole chunks of the block's threads?"""
    seg = layout.segment(g)
    return seg * layout.split == g.extent and \
        seg % (layout.groups[g.id].vector * layout.threads_per_row) == 0
