"""The decorator: a call's signature -> traced graph -> lowered kernels -> compiled -> launched.

Array arguments are traced; every other argument is static: its value is part of the cache
key and the function sees the plain value. ``fn.lower(*args)`` returns what a call with
those arguments would run, without running it.
"""
import collections
import dataclasses
import inspect
import threading

import numpy as np

from . import dtypes, settings, tune
from .errors import ArgumentError, CompileError, NumbamrError, SourceLoc
from .graph import format_graph, verify_graph
from .lowering import lower_built, split_into_cluster, KernelOptions
from .runtime import arrays
from .runtime.callplan import PlanArray, build_plan, fast_key, on_context
from .runtime.launch import (prepare_leaves, run, make_launchers, device_cc, device_scope,
                             several_gpus, primary_context, temps_on_stream)
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
        self._fast = {}             # fast_key -> generated call path (runtime.callplan)
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
        try:
            fkey = fast_key(args, kwargs)
        except Exception:           # an argument that cannot be keyed: the full path says why
            fkey = None
        if fkey is not None:
            path = self._fast.get(fkey)
            if path is not None:
                return path(args, kwargs)
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
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.__name__}(): {e}") from None
        bound.apply_defaults()
        for name in [k for k, v in bound.arguments.items() if v is np._NoValue]:
            del bound.arguments[name]
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
        return _rebuild_jit, (getattr(np, fn.__name__), options, jf.autotune)
    target = _module_attr(module, qualname) if module and "<" not in qualname else None
    if target is jf:
        return _import_jit, (module, qualname)
    if target is fn or (isinstance(target, JitFunction) and target.fn is fn):
        return _rebuild_jit, (target, options, jf.autotune)
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


def _rebuild_jit(fn, options, autotune):
    if isinstance(fn, JitFunction):
        fn = fn.fn
    return JitFunction(fn, KernelOptions(**options), autotune)


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
