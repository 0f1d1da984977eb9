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

from . import settings, tune
from .errors import ArgumentError, CompileError, NumbamrError, SourceLoc, is_users_exception
from .experimental import DEFAULT as DEFAULT_KNOBS, current_knobs
from .graph import format_graph, verify_graph
from .lowering import lower_built, split_into_cluster, KernelOptions
from .runtime import arrays
from .runtime.device import arch
from .runtime.callplan import fast_key
from .runtime.callcontext import prepare_leaves
from .runtime.contexts import device_cc, device_scope
from .runtime.launch import run, make_launchers, built
from .callpaths import register_path
from .lowered import Compiled, Lowered, parse_target, target_name
from .outs import check_out, out_arrays
from .schedule import schedule, format_schedule
from .signature import Leaf, knobs_key, log_compile
from .trace import trace, has_tracer


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
        self._classes = {}          # shape class (see Leaf.shape_class) -> its first extents
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
        return Leaf(name, value, arrays.inspect_array(value, name))

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
        generic = self._wants_generic(self._shape_class(leaves), self._extents(leaves))
        lowered = self._lower(bound, leaves, sim, generic=generic, cc=cc)
        if self.autotune and target is None and tune.applies(settings.simulator()):
            tuned = tune.known_options(self, lowered)
            if tuned is not None and tuned != self.options:
                lowered = self._lower(bound, leaves, options=tuned, generic=generic)
        return lowered

    # ---- shapes that change ---------------------------------------------------------------
    @staticmethod
    def _shape_class(leaves, outs=None):
        return tuple(leaf.shape_class() for leaf in leaves) + \
            tuple(("O",) + Leaf("out", None, a).shape_class() for a in outs or ()) + \
            knobs_key()

    @staticmethod
    def _extents(leaves, outs=None):    # what a signature adds to its shape class
        return tuple(x.key() for x in leaves) + tuple(("O",) + a.layout_key() for a in outs or ())

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
        return [Leaf(name, v, arrays.inspect_array(v, name))
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
            knobs = current_knobs()
            if knobs is not DEFAULT_KNOBS:      # calls under other study knobs: paths apart
                fkey = (fkey, knobs)
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
        key += knobs_key()
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
            register_path(self, fkey, compiled, leaves, ctx, args, given, outs)
        return result

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
                shape_class, extents = self._shape_class(leaves, outs), self._extents(leaves, outs)
                try:
                    lowered = self._lower(bound, leaves, outs=outs,
                                          generic=self._wants_generic(shape_class, extents))
                    sim = settings.simulator()
                    if settings.current().debug:
                        log_compile(self, key, leaves, lowered, built(lowered, sim))
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
