"""The decorator: a call's signature -> traced graph -> lowered kernels -> compiled -> launched.

Array arguments are traced; every other argument is static: its value is part of the cache
key and the function sees the plain value. ``fn.lower(*args)`` returns what a call with
those arguments would run, without running it.
"""
import collections
import dataclasses
import inspect
import sys
import threading
import time

import numpy as np

from . import dtypes, settings, tune
from .errors import ArgumentError, CompileError, NumbamrError, SourceLoc, is_users_exception
from .graph import format_graph, verify_graph
from .lowering import lower_built, split_into_cluster, KernelOptions
from .runtime import arrays
from .runtime.device import arch
from .runtime.callplan import PlanArray, build_plan, fast_key, on_context
from .runtime.launch import (prepare_leaves, run, make_launchers, device_cc, device_scope,
                             several_gpus, primary_context, temps_on_stream, built)
from .schedule import schedule, format_schedule
from .trace import trace, has_tracer, frozen_names


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


class _Leaf:
    """One argument value after binding: an array or a static value."""
    __slots__ = ("name", "value", "array")

    def __init__(self, name, value, array):
        self.name, self.value, self.array = name, value, array

    def key(self):
        if self.array is not None:
            a = self.array
            return ("A", a.layout_key(), a.where)
        return self.static_key()

    def shape_class(self):
        """The key with an array's extents left out (and its strides, where they are those
        of its shape in C order): what a kernel generic in its rows may serve."""
        if self.array is None:
            return self.static_key()
        a = self.array
        c_order = a.strides == arrays._c_element_strides(a.shape)
        return ("A", a.dtype.str, len(a.shape), "C" if c_order else (a.shape, a.strides),
                a.offset, a.aligned, a.where)

    def static_key(self):
        try:
            hash(self.value)
        except TypeError:
            raise ArgumentError(f"argument {self.name!r} is a {type(self.value).__name__}, which "
                                "is neither an array nor a hashable static value") from None
        return ("S", type(self.value).__name__, dtypes.static_key(self.value))


def _shape_class(leaves, outs=None):       # what a generic kernel serves (_Leaf.shape_class)
    return tuple(x.shape_class() for x in [*leaves, *(_Leaf("O", None, a) for a in outs or ())])


def _extents(leaves, outs=None):           # what a signature adds to its shape class
    return tuple(x.key() for x in leaves) + tuple(("O",) + a.layout_key() for a in outs or ())


class Compiled:
    """One signature's lowered kernels and their numba kernel objects."""

    def __init__(self, lowered, launchers):
        self.lowered, self.launchers = lowered, launchers


def _ufunc_as_function(ufunc):
    """A NumPy ufunc as a function of its inputs alone (its keywords are not arguments a
    kernel takes)."""
    if ufunc.nin == 1:
        def fn(x):
            return ufunc(x)
    elif ufunc.nin == 2:
        def fn(x1, x2):
            return ufunc(x1, x2)
    else:
        raise ArgumentError(f"numbamr.jit: np.{ufunc.__name__} takes {ufunc.nin} inputs; "
                            "wrap it in a function")
    fn.__name__ = fn.__qualname__ = ufunc.__name__
    return fn


class JitFunction:
    def __init__(self, fn, options, autotune=False, dynamic=None):
        fn = _ufunc_as_function(fn) if isinstance(fn, np.ufunc) else fn
        self.fn, self.options, self.autotune = fn, options, autotune
        self.dynamic = dynamic
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self._sig = inspect.signature(fn)
        params = list(self._sig.parameters.values())
        # plain positional parameters: calls without keywords skip inspect's binding (not a
        # NumPy function's, whose "not given" defaults _bind leaves out)
        self._simple = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and
                           p.default is not np._NoValue for p in params)
        self._names = [p.name for p in params]
        self._defaults = [p.default for p in params]
        self._cache = collections.OrderedDict()
        self._fast = {}             # fast_key -> generated call path (runtime.callplan)
        self._classes = {}          # shape class (see _Leaf.shape_class) -> its first extents
        self._said_slow = False     # a compile over SLOW_COMPILE_S was reported
        self._lock = threading.RLock()

    def __repr__(self):
        return f"<numbamr.jit {self.__name__}>"

    # ---- arguments -------------------------------------------------------------------------
    def _bound_arguments(self, args, kwargs):
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.__name__}(): {e}") from None
        bound.apply_defaults()
        for name in [k for k, v in bound.arguments.items() if v is np._NoValue]:
            del bound.arguments[name]      # a NumPy function's "not given": left out again
        return bound

    def _bind(self, args, kwargs):
        bound = self._bound_arguments(args, kwargs)
        leaves = []
        for name, value in bound.arguments.items():
            kind = self._sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                leaves += [self._leaf(f"{name}[{i}]", v) for i, v in enumerate(value)]
            elif kind is inspect.Parameter.VAR_KEYWORD:
                leaves += [self._leaf(f"{name}[{k!r}]", v) for k, v in value.items()]
            else:
                leaves.append(self._leaf(name, value))
        return bound, leaves

    def _leaf(self, name, value):
        return _Leaf(name, value, arrays.inspect_array(value, name))

    def _rebuild(self, bound, values):
        """Call the user's function with ``values`` in place of the leaves."""
        it = iter(values)
        args = {}
        for name, value in bound.arguments.items():
            kind = self._sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                args[name] = tuple(next(it) for _ in value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                args[name] = {k: next(it) for k in value}
            else:
                args[name] = next(it)
        call = inspect.BoundArguments(self._sig, collections.OrderedDict(args))
        return self.fn(*call.args, **call.kwargs)

    # ---- lowering -----------------------------------------------------------------------
    def _lower(self, bound, leaves, simulator=None, outs=None, options=None, generic=False,
               cc=None):
        """Trace, schedule and lower. ``generic``: kernels whose code serves every count of
        their rows, where their layouts allow it (else kernels for these shapes, as
        without it): rows split across blocks are laid out for their count (each block's
        segment, a persistent cluster's grid), so such kernels are compiled per shape.
        ``cc``: the compute capability to lower for (None: this machine's GPU)."""
        if generic:
            lowered = self._lower_once(bound, leaves, simulator, outs, options, True, cc)
            if not any(k.layout.split > 1 or k.layout.persistent for k in lowered.kernels):
                return lowered
        return self._lower_once(bound, leaves, simulator, outs, options, False, cc)

    def _lower_once(self, bound, leaves, simulator, outs, options, generic, cc):
        options = self.options if options is None else options
        specs = [("array", (leaf.array.shape, leaf.array.dtype)) if leaf.array is not None
                 else ("static", leaf.value) for leaf in leaves]
        graph, outputs, structure = trace(lambda vals: self._rebuild(bound, vals), specs)
        verify_graph(outputs)
        layouts = {i: (leaf.array.strides, leaf.array.offset) for i, leaf in enumerate(leaves)
                   if leaf.array is not None}
        aligned = {("in", i) for i, leaf in enumerate(leaves) if leaf.array is not None and
                   leaf.array.aligned}
        names = {i: leaf.name for i, leaf in enumerate(leaves)}
        sim = settings.simulator() if simulator is None else simulator
        cc = None if sim else cc if cc is not None else arch()
        out_layouts = None
        if outs is not None:
            check_out(outs, [(o.dtype, o.shape) for o in outputs])
            out_layouts = {i: (a.strides, a.offset) for i, a in enumerate(outs)}
        groups, temps = schedule(graph, outputs, layouts, _ident(self.__name__), names,
                                 out_layouts,
                                 lambda k: split_into_cluster(k, options, sim, cc),
                                 split_long=options.split is None, generic=generic)
        aligned |= {("in", t.name) for t in temps}
        kernels = []
        for g in groups:
            aligned_all = aligned | {("out", i) for i, t in enumerate(g.targets)
                                     if t[0] == "tmp" or outs is None or outs[t[1]].aligned}
            kernels.append(lower_built(g.kernel, options, sim, aligned_all, g.targets, cc))
        out_specs = [(o.dtype, o.shape) for o in outputs]
        return Lowered(format_graph(outputs), format_schedule(groups), kernels, out_specs,
                       structure, temps, target_name(sim, cc))

    def lower(self, *args, **kwargs):
        """The kernels a call with these arguments would run (nothing is run).

        ``target=``: lower for that machine instead of this one: ``"sim"`` (numba's CPU
        simulator) or a GPU's compute capability as ``"sm_90"``; any machine can lower for
        any target. With autotune, the layout tuned for them on this GPU if a call has
        tuned it, else the heuristics'."""
        target = kwargs.pop("target", None) if "target" not in self._sig.parameters else None
        sim, cc = parse_target(target)
        bound, leaves = self._bind(args, kwargs)
        generic = self._wants_generic(_shape_class(leaves), _extents(leaves))
        lowered = self._lower(bound, leaves, sim, generic=generic, cc=cc)
        if self.autotune and target is None and tune.applies(settings.simulator()):
            tuned = tune.known_options(self, lowered)
            if tuned is not None and tuned != self.options:
                lowered = self._lower(bound, leaves, options=tuned, generic=generic)
        return lowered

    def _wants_generic(self, shape_class, extents):
        """Kernels generic in their rows for these ``extents``? None (the default): once the
        shape class was compiled for other extents (torch's automatic dynamic); or forced."""
        if self.dynamic is not None:
            return self.dynamic
        return self._classes.get(shape_class, extents) != extents

    # ---- calling ------------------------------------------------------------------------
    def _fast_leaves(self, args):
        """Leaves of a keyword-free call of a function with plain parameters, or None."""
        n = len(self._names)
        if not self._simple or len(args) > n:
            return None
        values = list(args) + self._defaults[len(args):]
        if any(v is inspect.Parameter.empty for v in values):
            return None
        return [_Leaf(name, v, arrays.inspect_array(v, name))
                for name, v in zip(self._names, values)]

    def __call__(self, *args, **kwargs):
        if "dask.array" in sys.modules:         # dask arrays in: a lazy dask array out
            from . import dask as nm_dask
            if nm_dask.any_dask(args, kwargs):
                return nm_dask.call(self, args, kwargs)
        try:
            fkey = fast_key(args, kwargs)
        except Exception:           # an argument that cannot be keyed: the full path says why
            fkey = None
        if fkey is not None:
            path = self._fast.get(fkey)
            if path is not None:
                return path(args, kwargs)
        if has_tracer(args, kwargs):    # called by a function being traced: part of its trace
            return self.fn(*args, **kwargs)
        return self._call(args, kwargs, fkey)

    def _call(self, args, kwargs, fkey):
        """A call the way that binds and inspects its arguments; afterwards, where a
        generated path can serve calls with key ``fkey``, one is made and registered."""
        given = dict(kwargs) if fkey is not None else None
        stream = kwargs.pop("stream", None) if "stream" not in self._sig.parameters else None
        out = kwargs.pop("out", None) if "out" not in self._sig.parameters else None
        leaves = None if kwargs else self._fast_leaves(args)
        bound = None
        if leaves is None:
            bound, leaves = self._bind(args, kwargs)
        on_device = all(leaf.array.where == arrays.DEVICE for leaf in leaves
                        if leaf.array is not None)
        leaves, ctx = prepare_leaves(leaves, settings.simulator(), stream)
        outs = None
        if out is not None:
            outs = out_arrays(out, leaves, ctx)
        key = tuple([leaf.key() for leaf in leaves])
        if outs is not None:
            key += tuple(("O",) + a.layout_key() for a in outs)
        if not ctx.simulator:       # kernels are loaded per device, compiled per architecture
            key += (("device", ctx.device, device_cc(ctx.device)),)
        with device_scope(None if ctx.simulator else ctx.device):
            with self._lock:            # least recently used signatures are dropped first
                compiled = self._cache.get(key)
                if compiled is not None:
                    self._cache.move_to_end(key)
            if compiled is None:
                if bound is None:
                    bound, _ = self._bind(args, kwargs)
                compiled = self._compile(bound, leaves, key, outs, ctx)
            if outs is not None:
                check_out(outs, compiled.lowered.out_specs)
            result = run(compiled, leaves, ctx, outs)
        if fkey is not None and on_device and not ctx.simulator:
            self._register_path(fkey, compiled, leaves, ctx, args, given, outs)
        return result

    def _register_path(self, fkey, compiled, leaves, ctx, args, kwargs, outs):
        """Make the generated call path of this signature (runtime.callplan) and keep it
        under ``fkey``; nothing where a call with that key could need what the path skips
        (a check of the grad mode, a host copy, a keyword that is the function's own)."""
        if callplan_refuses(self, compiled, leaves, ctx, kwargs, outs):
            return
        special = {"out", "stream"}
        sources = self._leaf_sources(args, {k: v for k, v in kwargs.items()
                                            if k not in special})
        if len(sources) != len(leaves):
            return
        inputs = {i: PlanArray.of(sources[i], leaf.array) for i, leaf in enumerate(leaves)
                  if leaf.array is not None}
        if any(a.expr is None for a in inputs.values()):
            return
        plan_outs = None
        if outs is not None:
            plan_outs = [PlanArray.of(e, a) for e, a in zip(_out_exprs(kwargs["out"]), outs)]
        stream = kwargs.get("stream")
        call, _ = build_plan(compiled, inputs, ctx.result_kind, ctx.device, plan_outs, stream,
                             stream is not None,
                             temps_on_stream(ctx.result_kind, ctx.device)
                             if stream is not None else None)
        if several_gpus():
            call = on_context(call, primary_context(ctx.device))
        with self._lock:
            if len(self._fast) >= settings.current().max_signatures:
                self._fast.clear()
            self._fast[fkey] = call

    def _leaf_sources(self, args, kwargs):
        """For each leaf of a call with these arguments, the expression that reads it from a
        call's ``args`` and ``kw`` (None for a parameter's default)."""
        marks = [_Mark(f"args[{i}]") for i in range(len(args))]
        named = {k: _Mark(f"kw[{k!r}]") for k in kwargs}
        _, leaves = self._bind(marks, named)
        return [leaf.value.expr if isinstance(leaf.value, _Mark) else None for leaf in leaves]

    def output_specs(self, args, kwargs, array_spec):
        """The (dtype, shape) of each output of a call with these arguments and the outputs'
        structure, from the trace alone (nothing is compiled or run). ``array_spec(value)``
        is the (shape, dtype) of an argument standing for an array, None for a static."""
        bound = self._bound_arguments(args, kwargs)
        values = []
        for name, value in bound.arguments.items():
            kind = self._sig.parameters[name].kind
            values += list(value) if kind is inspect.Parameter.VAR_POSITIONAL else \
                list(value.values()) if kind is inspect.Parameter.VAR_KEYWORD else [value]
        specs = []
        for v in values:
            spec = array_spec(v)
            specs.append(("static", v) if spec is None else ("array", spec))
        _, outputs, structure = trace(lambda vals: self._rebuild(bound, vals), specs)
        return [(o.dtype, o.shape) for o in outputs], structure

    def as_torch_op(self, qualname, schema=None, returns=1):
        """This function as the torch operator ``qualname`` ("namespace::name"), registered
        with torch.library: torch.compile(fullgraph=True) calls it without a graph break
        (its shapes and dtypes come from numbamr's trace), CUDA graphs capture it, CPU
        tensors run its kernels as NumPy arrays do. Returns the operator
        (``torch.ops.namespace.name``). See numbamr.torch_op for the schema it gets."""
        from .torch_op import register
        return register(self, qualname, schema, returns)

    def __reduce__(self):
        """Pickled by reference: the module attribute that is this function (the decorator's
        case), or the module-level function with this function's options."""
        return _reduce_jit(self)

    def _compile_error(self, message):
        code = getattr(self.fn, "__code__", None)
        loc = SourceLoc(code.co_filename, code.co_firstlineno,
                        f"def {self.__name__}(...)") if code else None
        return CompileError(f"compiling {self.__name__}: {message}", loc)

    def _compile(self, bound, leaves, key, outs=None, ctx=None):
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is None:
                shape_class, extents = _shape_class(leaves, outs), _extents(leaves, outs)
                try:
                    lowered = self._lower(bound, leaves, outs=outs,
                                          generic=self._wants_generic(shape_class, extents))
                    sim = settings.simulator()
                    if settings.current().debug:
                        _log_compile(self, key, leaves, lowered, built(lowered, sim))
                    start = time.perf_counter()
                    if self.autotune and ctx is not None and tune.applies(ctx.simulator):
                        compiled = tune.tune(self, bound, leaves, outs, ctx, lowered)
                    else:
                        compiled = Compiled(lowered, make_launchers(lowered, sim))
                    if not sim:
                        self._say_if_slow(time.perf_counter() - start)
                except NumbamrError as e:
                    if isinstance(e, CompileError):
                        raise self._compile_error(e.plain_message) from e
                    raise
                except Exception as e:      # a bug in numbamr: say so, and where it was used
                    if is_users_exception(e):
                        raise               # the user's own code raised it (see trace.trace)
                    raise self._compile_error(
                        f"internal error while compiling ({type(e).__name__}: {e})") from e
                self._cache[key] = compiled
                self._classes.setdefault(shape_class, extents)
                while len(self._cache) > settings.current().max_signatures:
                    self._cache.popitem(last=False)
            return compiled

    def _say_if_slow(self, seconds):
        """Say once on stderr that compiling takes long (a first call seems to hang)."""
        if seconds > SLOW_COMPILE_S and not self._said_slow:
            self._said_slow = True
            print(f"numbamr: building the kernels of {self.__name__} took {seconds:.1f} s; "
                  "they are kept on disk for later processes (NUMBAMR_DEBUG=1 says why a "
                  "call builds kernels)", file=sys.stderr)


SLOW_COMPILE_S = 1.0        # a compile that takes longer is reported once per function


def _log_compile(fn, key, leaves, lowered, built):
    """NUMBAMR_DEBUG=1: say why this call needs kernels (which part of the signature is new,
    in words) and whether they are compiled or served by kernels built already."""
    why = _why_new(fn, key, leaves)
    if lowered.generic:
        what = "kernels generic in their rows"
    else:
        what = "kernels for these shapes"
    if built:
        print(f"numbamr: {fn.__name__}: {why}; served by the {what} built already "
              "(nothing to compile)", file=sys.stderr)
    else:
        print(f"numbamr: compiling {fn.__name__}: {why}; {what}", file=sys.stderr)
    read, closure = frozen_names(fn.fn)
    for kind, names in (("globals", read), ("closure variables", closure)):
        if names:
            print(f"numbamr: {fn.__name__} read {kind} at trace time (frozen): "
                  f"{', '.join(names)}", file=sys.stderr)


def _why_new(fn, key, leaves):
    """What differs between ``key`` and the nearest signature compiled before, in words."""
    if not fn._cache:
        return "first call"
    near = min(fn._cache, key=lambda k: sum(a != b for a, b in zip(k, key)) +
               abs(len(k) - len(key)))
    if len(near) != len(key):
        return "a different number of arguments"
    names = [leaf.name for leaf in leaves] + [f"out[{i}]" for i in range(len(key))]
    diffs = [f"argument {names[i]!r}: {_key_change(a, b)}" if a[0] != "O" else
             f"{names[i]}: {_key_change(a[1:], b[1:])}"
             for i, (a, b) in enumerate(zip(near, key)) if a != b]
    return "; ".join(diffs) or "different arguments"


def _static_text(key):
    """A static value's key as the value reads (a float's key holds its repr beside its bits,
    see dtypes.static_key)."""
    if isinstance(key, tuple) and len(key) >= 3 and isinstance(key[1], str) and \
            isinstance(key[0], str):
        return key[1]
    return repr(key)


_ARRAY_PARTS = ("dtype", "shape", "strides", "offset", "16-byte alignment")


def _key_change(old, new):
    """One argument's change between two signature keys, in words."""
    if old[0] == new[0] == "A":
        (old_layout, old_where), (new_layout, new_where) = old[1:], new[1:]
        old_layout = (np.dtype(old_layout[0]).name,) + old_layout[1:]
        new_layout = (np.dtype(new_layout[0]).name,) + new_layout[1:]
        parts = [f"{what} {a} -> {b}"
                 for what, a, b in zip(_ARRAY_PARTS, old_layout, new_layout) if a != b]
        if old_where != new_where:
            parts.append(f"memory {old_where} -> {new_where}")
        return ", ".join(parts)
    if old[0] == new[0] == "S":
        return f"{old[1]} {_static_text(old[2])} -> {new[1]} {_static_text(new[2])}"
    return "an array where a static value was, or the other way"


class _Mark:
    """An argument's place in a call (``args[0]``, ``kw['w']``), bound in its stead to learn
    which leaf each argument becomes."""
    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr


def _out_exprs(out):
    """Where each out= array is found in a call's ``kw``."""
    if isinstance(out, dict):
        return [f"kw['out'][{k!r}]" for k in out]
    if isinstance(out, (tuple, list)):
        return [f"kw['out'][{i}]" for i in range(len(out))]
    return ["kw['out']"]


def callplan_refuses(fn, compiled, leaves, ctx, kwargs, outs):
    """Whether calls like this one must keep taking the full path."""
    params = fn._sig.parameters
    if any(k in params for k in ("out", "stream") if k in kwargs):
        return True                 # the function's own parameters: plain arguments
    if ctx.result_kind == "cupy" and arrays.cupy_module() is None:
        return True
    objs = [leaf.array.obj for leaf in leaves if leaf.array is not None] + \
        [a.obj for a in outs or ()]
    if any(getattr(o, "requires_grad", False) for o in objs):
        return True                 # refused with grad on, taken with grad off: both checked
    return outs is None and ctx.result_kind == "cupy" and compiled.lowered.has_bfloat16


def _reduce_jit(jf):
    import pickle
    fn = jf.fn
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    options = {f.name: getattr(jf.options, f.name) for f in dataclasses.fields(jf.options)}
    if module == __name__ and isinstance(getattr(np, fn.__name__, None), np.ufunc):
        return _rebuild_jit, (getattr(np, fn.__name__), options, jf.autotune, jf.dynamic)
    target = _module_attr(module, qualname) if module and "<" not in qualname else None
    if target is jf:
        return _import_jit, (module, qualname)
    if target is fn or (isinstance(target, JitFunction) and target.fn is fn):
        return _rebuild_jit, (target, options, jf.autotune, jf.dynamic)
    raise pickle.PicklingError(
        f"numbamr.jit {jf.__name__}: only a function defined at a module's top level pickles "
        f"(by reference to {module}.{qualname}), and that name does not refer to it; define "
        "it at module level")


def _module_attr(module, qualname):
    """The object at ``qualname`` in ``module`` (imported), or None."""
    import importlib
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj


def _import_jit(module, qualname):
    """Unpickling a jitted function pickled by reference: the module's attribute."""
    obj = _module_attr(module, qualname)
    if obj is None:
        import pickle
        raise pickle.UnpicklingError(f"numbamr.jit: {module}.{qualname} is not there to "
                                     "unpickle")
    return obj


def _rebuild_jit(fn, options, autotune, dynamic=None):
    if isinstance(fn, JitFunction):
        fn = fn.fn
    return JitFunction(fn, KernelOptions(**options), autotune, dynamic)


def out_arrays(out, leaves, ctx):
    """The out= arrays as ArrayArgs, on the side the kernels run, not overlapping inputs."""
    items = list(out.values()) if isinstance(out, dict) else \
        list(out) if isinstance(out, (tuple, list)) else [out]
    result = []
    for i, a in enumerate(items):
        info = arrays.inspect_array(a, f"out[{i}]")
        if info is None:
            raise ArgumentError(f"out[{i}] is a {type(a).__name__}, not an array")
        if ctx.simulator and info.where != arrays.HOST:
            raise ArgumentError(f"out[{i}] is a device array, but kernels run in numba's CPU "
                                "simulator: pass NumPy arrays")
        if not ctx.simulator and info.where != arrays.DEVICE:
            raise ArgumentError(f"out[{i}] is a host array, but the kernels run on the GPU: "
                                "pass device arrays (e.g. CuPy) as out=")
        if not ctx.simulator and info.device != ctx.device:
            raise ArgumentError(f"out[{i}] is on device {info.device}, but the call runs on "
                                f"device {ctx.device}, where its inputs are")
        if any(s == 0 and n > 1 for s, n in zip(info.strides, info.shape)):
            raise ArgumentError(f"out[{i}] is a broadcast view (zero stride): its elements "
                                "overlap each other")
        lo, hi = info.base_ptr, info.base_ptr + info.span * info.dtype.itemsize
        for leaf in leaves:
            if leaf.array is None:
                continue
            b = leaf.array
            blo, bhi = b.base_ptr, b.base_ptr + b.span * b.dtype.itemsize
            if lo < bhi and blo < hi:
                raise ArgumentError(f"out[{i}] overlaps the memory of input {leaf.name!r}")
        result.append(info)
    return result


def check_out(outs, specs):
    """out= must match the outputs (``specs``: (dtype, shape) each) in number, shape, dtype."""
    if len(outs) != len(specs):
        raise ArgumentError(f"out= has {len(outs)} array(s) but the function returns "
                            f"{len(specs)}")
    for i, (a, (dt, shape)) in enumerate(zip(outs, specs)):
        if tuple(a.shape) != tuple(shape):
            raise ArgumentError(f"out[{i}] has shape {tuple(a.shape)}, the output has shape "
                                f"{tuple(shape)}")
        if a.dtype != dt:
            raise ArgumentError(f"out[{i}] has dtype {a.dtype}, the output has dtype {dt}")


def _ident(name):
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return name if name and not name[0].isdigit() else "k_" + name


def jit(fn=None, autotune=False, dynamic=None, **options):
    """Compile ``fn`` (numpy-style array code) into fused CUDA kernels.

    Use bare (``@numbamr.jit``) or with kernel options (``@numbamr.jit(threads_per_row=64)``);
    see ``numbamr.KernelOptions`` for the options. ``autotune=True``: a signature's first
    call on a GPU times a few layouts beside the heuristics' choice and keeps the fastest
    (kept on disk per GPU; see ``numbamr.tune``). ``dynamic``: whether kernels are generic
    in the extents that are not reduced (rows, batch, sequence): None (the default) once a
    second shape of the same dtypes and layouts is called, True always, False never (see
    docs/recompilation.md).
    """
    if not isinstance(autotune, bool):
        raise ArgumentError(f"numbamr.jit: autotune must be True or False, got {autotune!r}")
    if dynamic not in (None, True, False):
        raise ArgumentError(f"numbamr.jit: dynamic must be None, True or False, got "
                            f"{dynamic!r}")
    try:
        opts = KernelOptions(**options)
    except ArgumentError:
        raise                   # a known option with a bad value says so itself
    except TypeError as e:
        names = ", ".join(f.name for f in dataclasses.fields(KernelOptions))
        raise ArgumentError(f"numbamr.jit: unknown option ({e}); the options are {names}")
    if fn is None:
        return lambda f: JitFunction(f, opts, autotune, dynamic)
    if not callable(fn):
        raise ArgumentError(f"numbamr.jit expects a function, got {type(fn).__name__}")
    return JitFunction(fn, opts, autotune, dynamic)


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
