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

import numpy as np

from . import dtypes, settings, tune
from .errors import ArgumentError, CompileError, NumbamrError, SourceLoc
from .graph import format_graph, verify_graph
from .lowering import lower_built, split_into_cluster, KernelOptions
from .runtime import arrays
from .runtime.launch import prepare_leaves, run, make_launchers, FastPath, fast_key
from .schedule import schedule, format_schedule
from .trace import trace


class Lowered:
    """What a call would run: the traced graph, the kernels and their sources."""

    def __init__(self, graph_text, schedule_text, kernels, out_specs, structure, temps):
        self.graph_text, self.schedule_text = graph_text, schedule_text
        self.kernels = kernels
        self.out_specs, self.structure = out_specs, structure
        self.temps = temps          # intermediates kernels pass through memory

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
        try:
            hash(self.value)
        except TypeError:
            raise ArgumentError(f"argument {self.name!r} is a {type(self.value).__name__}, which "
                                "is neither an array nor a hashable static value") from None
        return ("S", type(self.value).__name__, self.value)


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
    def __init__(self, fn, options, autotune=False):
        fn = _ufunc_as_function(fn) if isinstance(fn, np.ufunc) else fn
        self.fn, self.options, self.autotune = fn, options, autotune
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
        self._fast = {}             # fast_key -> FastPath (all-CuPy calls without keywords)
        self._lock = threading.RLock()

    def __repr__(self):
        return f"<numbamr.jit {self.__name__}>"

    # ---- arguments -------------------------------------------------------------------------
    def _bind(self, args, kwargs):
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.__name__}(): {e}") from None
        bound.apply_defaults()
        for name in [k for k, v in bound.arguments.items() if v is np._NoValue]:
            del bound.arguments[name]      # a NumPy function's "not given": left out again
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
    def _lower(self, bound, leaves, simulator=None, outs=None, options=None):
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
        out_layouts = None
        if outs is not None:
            check_out(outs, [(o.dtype, o.shape) for o in outputs])
            out_layouts = {i: (a.strides, a.offset) for i, a in enumerate(outs)}
        groups, temps = schedule(graph, outputs, layouts, _ident(self.__name__), names,
                                 out_layouts,
                                 lambda k: split_into_cluster(k, options, sim),
                                 split_long=options.split is None)
        aligned |= {("in", t.name) for t in temps}
        kernels = []
        for g in groups:
            aligned_all = aligned | {("out", i) for i, t in enumerate(g.targets)
                                     if t[0] == "tmp" or outs is None or outs[t[1]].aligned}
            kernels.append(lower_built(g.kernel, options, sim, aligned_all, g.targets))
        out_specs = [(o.dtype, o.shape) for o in outputs]
        return Lowered(format_graph(outputs), format_schedule(groups), kernels, out_specs,
                       structure, temps)

    def lower(self, *args, **kwargs):
        """The kernels a call with these arguments would run (nothing is run). With
        autotune, the layout tuned for them on this GPU if a call has tuned it, else the
        heuristics'."""
        bound, leaves = self._bind(args, kwargs)
        lowered = self._lower(bound, leaves)
        if self.autotune and tune.applies(settings.simulator()):
            tuned = tune.known_options(self, lowered)
            if tuned is not None and tuned != self.options:
                lowered = self._lower(bound, leaves, options=tuned)
        return lowered

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
        fkey = None
        if not kwargs and self._simple and len(args) == len(self._names):
            fkey = fast_key(args)
            fast = self._fast.get(fkey)
            if fast is not None:
                return fast(args)
        stream = kwargs.pop("stream", None) if "stream" not in self._sig.parameters else None
        out = kwargs.pop("out", None) if "out" not in self._sig.parameters else None
        if out is not None:
            fkey = None
        leaves = None if kwargs else self._fast_leaves(args)
        bound = None
        if leaves is None:
            bound, leaves = self._bind(args, kwargs)
        leaves, ctx = prepare_leaves(leaves, settings.simulator(), stream)
        outs = None
        if out is not None:
            outs = out_arrays(out, leaves, ctx)
        key = tuple([leaf.key() for leaf in leaves])
        if outs is not None:
            key += tuple(("O",) + a.layout_key() for a in outs)
        with self._lock:                # least recently used signatures are dropped first
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
        if compiled is None:
            if bound is None:
                bound, _ = self._bind(args, kwargs)
            compiled = self._compile(bound, leaves, key, outs, ctx)
        if outs is not None:
            check_out(outs, compiled.lowered.out_specs)
            return run(compiled, leaves, ctx, outs)
        if fkey is not None and stream is None and not ctx.simulator and \
                ctx.result_kind == "cupy" and \
                all(leaf.array.offset == 0 and leaf.array.kind == "cupy" for leaf in leaves
                    if leaf.array is not None) and not compiled.lowered.has_bfloat16:
            with self._lock:
                if len(self._fast) >= settings.current().max_signatures:
                    self._fast.clear()
                self._fast[fkey] = FastPath(compiled).call
        return run(compiled, leaves, ctx)

    def _compile_error(self, message):
        code = getattr(self.fn, "__code__", None)
        loc = SourceLoc(code.co_filename, code.co_firstlineno,
                        f"def {self.__name__}(...)") if code else None
        return CompileError(f"compiling {self.__name__}: {message}", loc)

    def _compile(self, bound, leaves, key, outs=None, ctx=None):
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is None:
                if settings.current().debug:
                    _log_recompile(self, key)
                try:
                    lowered = self._lower(bound, leaves, outs=outs)
                    if self.autotune and ctx is not None and tune.applies(ctx.simulator):
                        compiled = tune.tune(self, bound, leaves, outs, ctx, lowered)
                    else:
                        compiled = Compiled(lowered,
                                            make_launchers(lowered, settings.simulator()))
                except NumbamrError as e:
                    if isinstance(e, CompileError):
                        raise self._compile_error(e.plain_message) from e
                    raise
                except Exception as e:      # a bug in numbamr: say so, and where it was used
                    raise self._compile_error(
                        f"internal error while compiling ({type(e).__name__}: {e})") from e
                self._cache[key] = compiled
                while len(self._cache) > settings.current().max_signatures:
                    self._cache.popitem(last=False)
            return compiled


def _log_recompile(fn, key):
    """NUMBAMR_DEBUG=1: say why this call compiles (which part of the signature is new)."""
    import sys
    if not fn._cache:
        why = "first call"
    else:
        near = min(fn._cache, key=lambda k: sum(a != b for a, b in zip(k, key)) +
                   abs(len(k) - len(key)))
        diffs = [f"argument {i}: {a!r} -> {b!r}" for i, (a, b) in enumerate(zip(near, key))
                 if a != b]
        why = "; ".join(diffs) or "different arguments"
    print(f"numbamr: compiling {fn.__name__} ({why})", file=sys.stderr)


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


def jit(fn=None, autotune=False, **options):
    """Compile ``fn`` (numpy-style array code) into fused CUDA kernels.

    Use bare (``@numbamr.jit``) or with kernel options (``@numbamr.jit(threads_per_row=64)``);
    see ``numbamr.KernelOptions`` for the options. ``autotune=True``: a signature's first
    call on a GPU times a few layouts beside the heuristics' choice and keeps the fastest
    (kept on disk per GPU; see ``numbamr.tune``).
    """
    if not isinstance(autotune, bool):
        raise ArgumentError(f"numbamr.jit: autotune must be True or False, got {autotune!r}")
    try:
        opts = KernelOptions(**options)
    except ArgumentError:
        raise                   # a known option with a bad value says so itself
    except TypeError as e:
        names = ", ".join(f.name for f in dataclasses.fields(KernelOptions))
        raise ArgumentError(f"numbamr.jit: unknown option ({e}); the options are {names}")
    if fn is None:
        return lambda f: JitFunction(f, opts, autotune)
    if not callable(fn):
        raise ArgumentError(f"numbamr.jit expects a function, got {type(fn).__name__}")
    return JitFunction(fn, opts, autotune)
