"""The dask task graph of one call: passes of statistics (the reductions that span chunks,
level by level), then the outputs block by block.

Every task runs a numbamr function on whole blocks: a partial stage per block of each
reduction's source (all the reductions of one level over the same blocks in one kernel), a
merge of up to SPLIT_EVERY blocks' partials at a time (in block order, so the same chunking
gives the same bits), and an output stage per block that reads the merged statistics as
inputs broadcast to the block.
"""
import collections
import inspect
import itertools
import threading
import uuid
import weakref

from ..errors import NumbamrError
from ..trace import trace
from . import reductions as red
from .chunks import grid
from .program import (Builder, BlockCall, CombineCall, Mat, Stage, blocks, getitem,
                      structure_key, array_module, replay, wrap)

SPLIT_EVERY = 16


class GraphBuilder:
    def __init__(self, name, jitfn, nodes, outputs, chunks, stats, mats):
        self.name, self.jitfn = name, jitfn
        self.outputs, self.chunks, self.mats = outputs, chunks, mats
        self.dsk, self.out_layers = {}, []
        self.families = {i: red.family_of(nodes[i], how, stats) for i, how in stats.items()}
        self._count = itertools.count()

    def stage(self, kind, program):
        return Stage(kind, self.jitfn.__name__, program, self.jitfn.options,
                     self.jitfn.autotune)

    def grid_of(self, node):
        return grid(self.chunks[id(node)], node.shape)

    def fresh(self, what):
        return f"{self.name}-{what}{next(self._count)}"

    # ---- statistics -----------------------------------------------------------------
    def levels(self):
        """The split reductions' families grouped by (level, grid of the blocks they read):
        a level's reductions read only reductions of lower levels."""
        memo = {}

        def level(fam):
            key = id(fam.node)
            if key not in memo:
                deps = red.dependencies(red.reads(fam), lambda n: id(n) in self.families)
                memo[key] = 1 + max((level(self.families[id(d)]) for d in deps), default=-1)
            return memo[key]

        groups = collections.OrderedDict()
        for fam in self.families.values():
            groups.setdefault((level(fam), self.grid_of(fam.src)), []).append(fam)
        return [groups[k] for k in sorted(groups, key=lambda k: k[0])]

    def build_stats(self):
        for fams in self.levels():
            fams = red.order(fams)
            pname = self.fresh("partial")
            fields = self.partial_stage(pname, fams)
            subgroups = collections.OrderedDict()
            for fam, span in zip(fams, fields):
                subgroups.setdefault((fam.axes, fam.flat), []).append((fam, span))
            for members in subgroups.values():
                self.merge(pname, self.grid_of(fams[0].src), members)

    def partial_stage(self, pname, fams):
        """One task per block computing every family's partial; returns each family's
        fields (positions in the task's tuple)."""
        local = {id(f.node): f for f in fams}
        spans = None
        for idx, region in blocks(self.grid_of(fams[0].src)):
            b = Builder(self.mats, block=region, local=local)
            roots, post, spans_here, nk = [], [], [], 0
            for fam in fams:
                r, p, k = red.partial(fam, b, region)
                spans_here.append(range(len(post), len(post) + len(p)))
                roots += r
                post += [_shift(e, nk) for e in p]
                nk += k
            spans = spans_here
            call = BlockCall(self.stage("block", (b.program(), tuple(roots))), b.plan(),
                             b.leaves, post)
            self.dsk[(pname,) + idx] = (call,) + _leaf_keys(b.leaves)
        return spans

    def merge(self, pname, src_grid, members):
        """The tree of merges of one group of families reducing the same axes, and their
        values as materialized blocks."""
        fams = [f for f, _ in members]
        pick = [i for _, span in members for i in span]
        first = fams[0]
        position = {id(f.node): i for i, f in enumerate(fams)}
        fname = self.fresh("merged")
        names = [self.fresh("stat") for _ in fams]
        parts = collections.OrderedDict()
        for idx, region in blocks(src_grid):
            kept = (0,) if first.flat else \
                tuple(0 if a in first.axes else i for a, i in enumerate(idx))
            parts.setdefault(kept, (region, []))[1].append((pname,) + idx)
        for kept, (region, keys) in parts.items():
            centers = [red.center_instrs(f, self.mats, f.kept(region)) for f in fams]
            program = tuple(red.combine_spec(f, position, c[0]) for f, c in zip(fams, centers))
            shapes = tuple(c[1] for c in centers)
            stage = self.stage("combine", program)
            level, sel = keys, pick
            while len(level) > SPLIT_EVERY:
                tree = self.fresh("tree")
                level = [self._task((tree, j), CombineCall(stage, (False, shapes), sel),
                                    level[j * SPLIT_EVERY:(j + 1) * SPLIT_EVERY])
                         for j in range((len(level) + SPLIT_EVERY - 1) // SPLIT_EVERY)]
                sel = None
            final = self._task((fname,) + kept, CombineCall(stage, (True, shapes), sel), level)
            for i, name in enumerate(names):
                self.dsk[(name,) + kept] = (getitem, final, i)
        for fam, name in zip(fams, names):
            ch = ((1,),) if fam.flat else tuple(
                (1,) if a in fam.axes else c for a, c in enumerate(src_grid))
            self.mats[id(fam.node)] = Mat(name, ch)

    def _task(self, key, call, deps):
        self.dsk[key] = (call,) + tuple(deps)
        return key

    # ---- outputs ----------------------------------------------------------------------
    def build_outputs(self):
        """(name, chunks) of each output, after their tasks are in ``out_layers``."""
        groups = collections.OrderedDict()
        for i, o in enumerate(self.outputs):
            groups.setdefault(self.grid_of(o), []).append(i)
        names = [f"{self.name}-out{i}" for i in range(len(self.outputs))]
        for g, members in groups.items():
            gname = self.fresh("block")
            layers = [{} for _ in members]
            for idx, region in blocks(g):
                b = Builder(self.mats)
                roots = tuple(("value", b.value(self.outputs[i], region)) for i in members)
                call = BlockCall(self.stage("block", (b.program(), roots)), b.plan(),
                                 b.leaves)
                self.dsk[(gname,) + idx] = (call,) + _leaf_keys(b.leaves)
                for layer, i, pos in zip(layers, members, range(len(members))):
                    layer[(names[i],) + idx] = (getitem, (gname,) + idx, pos)
            self.out_layers += [(names[i], layer, g) for i, layer in zip(members, layers)]
        self.out_layers.sort(key=lambda t: names.index(t[0]))
        return [(name, g) for name, _, g in self.out_layers]

    # ---- whole reductions in every chunk: the user's function itself, block by block ------
    def try_user_blocks(self, bound, leaves):
        """Map the jitted function itself over the blocks where that computes the same as
        the trace (no reduction across chunks, every argument read as one block region, and
        the function traced at the block's shapes builds the same graph); else False."""
        if self.families or len({self.grid_of(o) for o in self.outputs}) != 1:
            return False
        g = self.grid_of(self.outputs[0])
        names = [f"{self.name}-out{i}" for i in range(len(self.outputs))]
        arrays = [i for i, leaf in enumerate(leaves) if leaf.kind != "static"]
        tasks, checked = {}, set()
        for idx, region in blocks(g):
            b = Builder(self.mats)
            out_idx = [b.value(o, region) for o in self.outputs]
            if b.has_offsets or any(len(b.input_regions.get(p, ())) != 1 for p in arrays):
                return False
            regions = {p: next(iter(b.input_regions[p])) for p in arrays}
            shapes = tuple(tuple(e - s for s, e in regions[p]) for p in arrays)
            if shapes not in checked:
                if not self._same_trace(bound, leaves, regions, b, out_idx):
                    return False
                checked.add(shapes)
            located = [self.mats[leaves[p].node_id].locate(regions[p]) for p in arrays]
            call = UserCall(self.jitfn, bound, leaves, [sl for _, sl in located])
            keys = tuple(self.mats[leaves[p].node_id].key(blk)
                         for p, (blk, _) in zip(arrays, located))
            tasks[idx] = (call,) + keys
        gname = self.fresh("block")
        for idx, task in tasks.items():
            self.dsk[(gname,) + idx] = task
        self.out_layers = [(names[i], {(names[i],) + idx: (getitem, (gname,) + idx, i)
                                       for idx in tasks}, g)
                           for i in range(len(self.outputs))]
        return [(name, g) for name, _, g in self.out_layers]

    def _same_trace(self, bound, leaves, regions, b, out_idx):
        """Whether the function traced at the blocks' shapes builds the graph that the
        trace's nodes at those regions are (it may use shapes of its own, as constants)."""
        specs = [("static", leaf.value) if leaf.kind == "static" else
                 ("array", (tuple(e - s for s, e in regions[p]), leaf.dtype))
                 for p, leaf in enumerate(leaves)]
        try:
            _, user_outs, _ = trace(lambda vals: self.jitfn._rebuild(bound, vals), specs)
        except NumbamrError:
            return False
        stage_specs = [("array", (b.shapes[i], leaves[b.leaf_inputs[k]].dtype))
                       for k, i in _leaf_instrs(b)]

        def replayed(vals):
            nodes = replay(b.instrs, b.shapes, vals)
            return tuple(wrap(vals[0].graph, nodes[i]) for i in out_idx)
        _, mine, _ = trace(replayed, stage_specs)
        return structure_key(user_outs) == structure_key(mine, b.leaf_inputs)


def _leaf_instrs(b):
    return [(instr[1], i) for i, instr in enumerate(b.instrs) if instr[0] == "in"]


def _leaf_keys(leaves):
    return tuple(leaf[1] for leaf in leaves if leaf[0] == "mat")


def _shift(entry, base):
    tag = entry[0]
    if tag == "count":
        return ("count", entry[1], entry[2] + base)
    return (tag, entry[1] + base) + tuple(entry[2:])


# ---- the user's function as a task ------------------------------------------------------
_TOKENS = weakref.WeakKeyDictionary()     # jitted function -> its name across processes
_USER_FNS = collections.OrderedDict()     # that name -> the function jitted here
_USER_LOCK = threading.Lock()


def _token(jitfn):
    with _USER_LOCK:
        if jitfn not in _TOKENS:
            _TOKENS[jitfn] = uuid.uuid4().hex
        return _TOKENS[jitfn]


class _Slot:
    """Where an argument array goes in the rebuilt call."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __reduce__(self):
        return (_Slot, (self.i,))


class UserCall:
    """Calls the jitted function on blocks (its other arguments as given). Pickles as the
    plain function and its options; the receiving process jits it once."""

    def __init__(self, jitfn, bound, leaves, slices):
        self.jitfn, self.slices, self.token = jitfn, slices, _token(jitfn)
        it = iter(range(len(slices)))
        values = iter([leaf.value if leaf.kind == "static" else _Slot(next(it))
                       for leaf in leaves])
        self.template = []
        for name, value in bound.arguments.items():
            kind = jitfn._sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                value = tuple(next(values) for _ in value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                value = {k: next(values) for k in value}
            else:
                value = next(values)
            self.template.append((name, value))

    def __call__(self, *blocks):
        xp = array_module(blocks[0])
        arrays = [b if sl is None else xp.ascontiguousarray(b[sl])
                  for b, sl in zip(blocks, self.slices)]

        def fill(v):
            return arrays[v.i] if isinstance(v, _Slot) else v
        args = collections.OrderedDict()
        for name, value in self.template:
            if isinstance(value, tuple):
                value = tuple(fill(v) for v in value)
            elif isinstance(value, dict):
                value = {k: fill(v) for k, v in value.items()}
            else:
                value = fill(value)
            args[name] = value
        call = inspect.BoundArguments(self.jitfn._sig, args)
        return tuple(flatten_structure(self.jitfn(*call.args, **call.kwargs)))

    def __reduce__(self):
        j = self.jitfn
        return (_user_call, (self.token, j.fn, j.options, j.autotune, self.template,
                             self.slices))


def _user_call(token, fn, options, autotune, template, slices):
    from ..jit import JitFunction
    with _USER_LOCK:
        jitfn = _USER_FNS.get(token)
        if jitfn is None:
            jitfn = _USER_FNS[token] = JitFunction(fn, options, autotune)
            _TOKENS[jitfn] = token
            while len(_USER_FNS) > 64:
                _USER_FNS.popitem(last=False)
    call = UserCall.__new__(UserCall)
    call.jitfn, call.template, call.slices, call.token = jitfn, template, slices, token
    return call


def flatten_structure(out):
    if isinstance(out, dict):
        return list(out.values())
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]
