"""How the chunks of the argument arrays carry through a traced graph, and which region of
each node a block of another node reads.

A node's chunks are one entry per axis: a tuple of chunk sizes, or ``None`` where the axis
is free (a plain array broadcast to the chunks, a constant, an axis of size 1): any region
of it can be taken. A node that cannot be cut along the chunks of its sources (a reshape or
a slice across chunk boundaries) gets a ``Broken`` entry, which only a reduction over its
whole flattened extent may read (it then reads the source of the reshape); anything else
reading it raises.

A region is a tuple of (start, stop) per axis, in the node's own global indices.
"""
import math

from ..errors import ArgumentError, ShapeError
from ..graph import toposort
from ..ops import Op, ALU, LEAF, UNARY


class Broken:
    """A node that cannot be computed chunk by chunk; ``why`` says so in words."""

    def __init__(self, node, why):
        self.node, self.why = node, why

    def error(self):
        return ShapeError(f"numbamr.dask: {self.why}; rechunk the argument so that this "
                          "operation stays inside each chunk", self.node.loc)


def multi(c):
    """Whether an axis entry is cut into several chunks."""
    return c is not None and len(c) > 1


def whole(shape):
    """Chunks of one block per axis (free where the axis has size 1)."""
    return tuple(None if n == 1 else (n,) for n in shape)


def grid(chunks, shape):
    """Chunks with the free axes as one block each: the blocks a stage runs over."""
    return tuple((n,) if c is None else c for c, n in zip(chunks, shape))


def describe(node):
    what = node.op.name.lower()
    if node.op is Op.REDUCE:
        kind, axes = node.arg
        what = f"the {kind.value} over axes {list(axes)}"
    return f"{what} of shape {list(node.shape)}"


def _unify(node, entries, srcs):
    """One chunks entry per axis from the sources' (they must agree where not free)."""
    out = []
    for axis in range(node.ndim):
        seen = [(e[axis], s) for e, s in zip(entries, srcs) if e[axis] is not None]
        first = seen[0][0] if seen else None
        for c, s in seen[1:]:
            if c != first:
                raise ArgumentError(
                    f"numbamr.dask: {describe(node)} combines arrays chunked differently "
                    f"along axis {axis} ({first} and {c}); rechunk the arguments alike",
                    node.loc)
        out.append(first)
    return tuple(out)


def reshape_groups(src_shape, out_shape):
    """The reshape as groups (source axes, output axes) of equal element counts; an axis of
    size 1 is a group of its own with nothing on the other side."""
    groups, i, j = [], 0, 0
    while i < len(src_shape) or j < len(out_shape):
        if i < len(src_shape) and src_shape[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(out_shape) and out_shape[j] == 1:
            groups.append(([], [j]))
            j += 1
            continue
        a, b = [i], [j]
        ps, po = src_shape[i], out_shape[j]
        i, j = i + 1, j + 1
        while ps != po:
            if ps < po:
                ps *= src_shape[i]
                a.append(i)
                i += 1
            else:
                po *= out_shape[j]
                b.append(j)
                j += 1
        groups.append((a, b))
    return groups


def _reshape_chunks(node, src_entries):
    """Chunks of a reshape's output, or a reason why it crosses chunk boundaries."""
    src = node.srcs[0]
    if 0 in src.shape:
        return None, "a reshape of an empty array"
    out = [None] * node.ndim
    for a, b in reshape_groups(src.shape, node.shape):
        if not a or not b or all(src_entries[i] is None for i in a):
            continue
        ents = [src_entries[i] or (src.shape[i],) for i in a]
        if any(len(e) > 1 for e in ents[1:]):
            return None, (f"the reshape {list(src.shape)} -> {list(node.shape)} merges axis "
                          f"{a[1]}, which is cut into chunks {ents[1]}, into axis {b[0]}")
        inner_src = math.prod(src.shape[i] for i in a[1:])
        inner_out = math.prod(node.shape[j] for j in b[1:])
        flat = [c * inner_src for c in ents[0]]
        if any(f % inner_out for f in flat):
            return None, (f"the reshape {list(src.shape)} -> {list(node.shape)} splits axis "
                          f"{a[0]}, chunked {ents[0]}, into pieces of {inner_out // inner_src}"
                          " that the chunks do not hold whole")
        out[b[0]] = tuple(f // inner_out for f in flat)
        for j in b[1:]:
            out[j] = (node.shape[j],)
    return tuple(out), None


def _shrink_chunks(node, src_entry):
    src = node.srcs[0]
    starts, steps = node.arg
    out = []
    for axis, c in enumerate(src_entry):
        same = starts[axis] == 0 and steps[axis] == 1 and node.shape[axis] == src.shape[axis]
        if c is None or same:
            out.append(c)
        elif len(c) == 1:
            out.append((node.shape[axis],))
        else:
            return None, (f"the slice of axis {axis} (start {starts[axis]}, step "
                          f"{steps[axis]}, {node.shape[axis]} of {src.shape[axis]}) cuts across "
                          f"its chunks {c}")
    return tuple(out), None


def flattened(node):
    """(the array, the unary ops after it) where ``node`` is an array flattened into one
    axis with elementwise functions of one value applied (what ``x.argmax()`` reduces: a
    cast of ``x.reshape(-1)``), else None."""
    chain = []
    while node.op in UNARY:
        chain.append(node)
        node = node.srcs[0]
    if node.op is Op.RESHAPE and node.ndim == 1 and node.srcs[0].ndim > 1:
        return node.srcs[0], tuple(reversed(chain))
    return None


def propagate(outputs, leaf_entries):
    """(chunks of every node by id, the reductions that span several chunks by id: "split"
    or "flat", a reduction of a flattened array that reads the array itself)."""
    chunks, stats = {}, {}
    for n in toposort(outputs):
        if n.op in LEAF:
            entry = leaf_entries.get(n.arg) if n.op is Op.INPUT else None
            chunks[id(n)] = entry if entry is not None else (None,) * n.ndim
            continue
        srcs = [chunks[id(s)] for s in n.srcs]
        broken = next((s for s in srcs if isinstance(s, Broken)), None)
        if n.op is Op.REDUCE:
            chunks[id(n)] = _reduce_chunks(n, srcs[0], stats)
            continue
        if broken is not None and n.op in UNARY:
            chunks[id(n)] = broken      # a cast of a flattened array, say, on its way to a sum
        elif broken is not None:
            raise broken.error()
        else:
            chunks[id(n)] = _node_chunks(n, srcs)
    for o in outputs:
        if isinstance(chunks[id(o)], Broken):
            raise chunks[id(o)].error()
    return chunks, stats


def _reduce_chunks(n, src_entry, stats):
    kind, axes = n.arg
    src = n.srcs[0]
    if isinstance(src_entry, Broken):
        if flattened(src) is not None:      # reduce the array itself, over all its axes
            stats[id(n)] = "flat"
            return (None,)
        raise ShapeError(f"numbamr.dask: {describe(n)} cannot be split across chunks: its "
                         f"input is not cut along them ({src_entry.why})", n.loc)
    entry = tuple(None if i in axes else c for i, c in enumerate(src_entry))
    if any(multi(src_entry[a]) for a in axes):
        stats[id(n)] = "split"
    return entry


def _node_chunks(n, srcs):
    if n.op in ALU:
        return _unify(n, srcs, n.srcs)
    src, entry = n.srcs[0], srcs[0]
    if n.op is Op.EXPAND:
        return tuple(None if s == 1 and t != 1 else c
                     for c, s, t in zip(entry, src.shape, n.shape))
    if n.op is Op.PERMUTE:
        return tuple(entry[p] for p in n.arg)
    if n.op is Op.RESHAPE:
        out, why = _reshape_chunks(n, entry)
    elif n.op is Op.SHRINK:
        out, why = _shrink_chunks(n, entry)
    else:
        raise ShapeError(f"numbamr.dask: {describe(n)} is not supported", n.loc)
    return Broken(n, why) if out is None else out


# ---- regions: what part of each source a region of a node reads -------------------------
def full(shape):
    return tuple((0, n) for n in shape)


def extent(region):
    return tuple(e - s for s, e in region)


def source_regions(node, region):
    """The region of each source that ``region`` of ``node`` reads (a chunk-local node)."""
    op = node.op
    if op in ALU:
        return [region] * len(node.srcs)
    src = node.srcs[0]
    if op is Op.REDUCE:
        axes = node.arg[1]
        return [tuple((0, src.shape[i]) if i in axes else r for i, r in enumerate(region))]
    if op is Op.EXPAND:
        return [tuple((0, 1) if s == 1 and t != 1 else r
                      for r, s, t in zip(region, src.shape, node.shape))]
    if op is Op.PERMUTE:
        out = [None] * src.ndim
        for i, p in enumerate(node.arg):
            out[p] = region[i]
        return [tuple(out)]
    if op is Op.SHRINK:
        return [_shrink_region(node, region)]
    if op is Op.RESHAPE:
        return [_reshape_region(node, region)]
    raise AssertionError(f"no region rule for {op}")


def _shrink_region(node, region):
    src = node.srcs[0]
    starts, steps = node.arg
    out = []
    for axis, r in enumerate(region):
        same = starts[axis] == 0 and steps[axis] == 1 and node.shape[axis] == src.shape[axis]
        if same:
            out.append(r)
        else:
            assert r == (0, node.shape[axis]), "a slice read in part"
            out.append((0, src.shape[axis]))
    return tuple(out)


def _reshape_region(node, region):
    src = node.srcs[0]
    out = [None] * src.ndim
    for a, b in reshape_groups(src.shape, node.shape):
        if not a:
            continue
        if not b:
            out[a[0]] = (0, 1)
            continue
        inner_src = math.prod(src.shape[i] for i in a[1:])
        inner_out = math.prod(node.shape[j] for j in b[1:])
        assert all(region[j] == (0, node.shape[j]) for j in b[1:]), "a reshape read in part"
        s, e = region[b[0]][0] * inner_out, region[b[0]][1] * inner_out
        assert s % inner_src == 0 and e % inner_src == 0, "a reshape across chunks"
        out[a[0]] = (s // inner_src, e // inner_src)
        for i in a[1:]:
            out[i] = (0, src.shape[i])
    return tuple(out)
