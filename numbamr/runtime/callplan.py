"""Generated call paths: one small function for each signature a call has met on a GPU.

A call finds its path by a key computed from the arguments themselves, cheaply: for each
array its type, dtype, shape, strides, the alignment of its data pointer and its device; for
each static its type and value; for out= its form (one array, a sequence, a dict) and its
arrays' keys; for stream= its type. Calls with equal keys have the same compiled signature,
so the path made for one serves them all: it reads the data pointers (``x.data.ptr``,
``t.data_ptr()``, ...), allocates the outputs (CuPy's or torch's allocator, on the arrays'
device) or takes the out= arrays, and launches each kernel on the call's stream with its
parameter block filled slot by slot; nothing is bound, inspected or looked up again.
"""
import sys

import numpy as np

from . import arrays, cudadriver
from ..dtypes import static_key
from ..errors import ArgumentError
from .callcontext import stream_handle

# ---- keys --------------------------------------------------------------------------------

_SCALARS = (int, float, bool, str, type(None))
_KEYERS = {}            # argument type -> its key function (None: no path for it)


def _static_key(v):
    return (v.__class__, static_key(v))     # floats by their bits: 0.0 is not -0.0


def _tuple_key(v):
    for e in v:
        if e.__class__ not in _SCALARS:
            return None
    return (tuple, static_key(v))


def _cupy_key(a):
    data = a.data
    return (a.__class__, a.dtype.char, a.shape, a.strides, data.ptr & 15, data.device_id)


def _torch_key(t):
    # requires_grad: such a tensor never takes a path (a call checks the grad mode)
    return (t.__class__, t.dtype, t.shape, t.stride(), t.data_ptr() & 15, t.get_device(),
            t.requires_grad)


def _numba_key(a):
    p = a.device_ctypes_pointer.value or 0
    return (a.__class__, a.dtype.char, a.shape, a.strides, p & 15, arrays.pointer_device(p))


def _cai_key(a):
    c = a.__cuda_array_interface__
    p = c["data"][0]
    s = c.get("strides")
    return (a.__class__, c["typestr"], tuple(c["shape"]), None if s is None else tuple(s),
            p & 15, arrays.cai_device(a, p))


def _no_key(v):
    return None


def pointer_kind(obj):
    """How a path reads the data pointer of array ``obj``: 'cupy', 'torch', 'numba' (a numba
    device array) or 'cai' (any other ``__cuda_array_interface__`` object)."""
    if isinstance(obj, arrays.cupy_ndarray()):
        return "cupy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return "torch"
    if type(obj).__module__.split(".")[0] in ("numba", "numba_cuda") and \
            hasattr(obj, "device_ctypes_pointer"):
        return "numba"
    return "cai"


def _is_device_array(v):
    """Whether ``v`` is an array a path can take (CuPy, torch, any other object with a
    ``__cuda_array_interface__``), found without reading the interface itself."""
    if isinstance(v, arrays.cupy_ndarray()):
        return True
    torch = sys.modules.get("torch")
    return (torch is not None and isinstance(v, torch.Tensor)) or \
        hasattr(type(v), "__cuda_array_interface__") or \
        "__cuda_array_interface__" in getattr(v, "__dict__", ())


_ARRAY_KEYS = {"cupy": _cupy_key, "torch": _torch_key, "numba": _numba_key, "cai": _cai_key}


def _keyer(v):
    if v.__class__ in _SCALARS or isinstance(v, (np.generic, np.dtype, type)):
        f = _static_key
    elif v.__class__ is tuple:
        f = _tuple_key
    elif not isinstance(v, np.ndarray) and _is_device_array(v):
        f = _ARRAY_KEYS[pointer_kind(v)]
    else:
        f = _no_key                     # host arrays (copied to the device) and the rest
    if len(_KEYERS) < 512:
        _KEYERS[v.__class__] = f
    return f


def value_key(v):
    f = _KEYERS.get(v.__class__)
    return (f or _keyer(v))(v)


def _out_key(out):
    if isinstance(out, (tuple, list)):
        names, items = None, list(out)
    elif isinstance(out, dict):
        names, items = tuple(out), list(out.values())
    else:
        names, items = "one", [out]
    keys = tuple(value_key(a) for a in items)
    if any(k is None for k in keys):
        return None
    return (out.__class__, names, keys)


def fast_key(args, kwargs=None):
    """The key of a call (see the module's docstring), or None where no path can serve it.
    ``out`` and ``stream`` keywords are keyed as out= arrays and a stream."""
    if not kwargs and len(args) == 1:       # the commonest call, keyed with the least work
        a = args[0]
        k = (_KEYERS.get(a.__class__) or _keyer(a))(a)
        return None if k is None else (k,)
    key = []
    for a in args:
        f = _KEYERS.get(a.__class__)
        k = (f or _keyer(a))(a)
        if k is None:
            return None
        key.append(k)
    if kwargs:
        key.append(len(args))
        for name, v in kwargs.items():
            if name == "out":
                k = _out_key(v)
            elif name == "stream":
                k = (v.__class__,)
            else:
                k = value_key(v)
            if k is None:
                return None
            key.append((name, k))
    return tuple(key)


# ---- the generated path ---------------------------------------------------------------------

_POINTER = {"cupy": "{v}.data.ptr", "torch": "{v}.data_ptr()",
            "numba": "({v}.device_ctypes_pointer.value or 0)",
            "cai": '{v}.__cuda_array_interface__["data"][0]'}


class PlanArray:
    """An array a path reads or writes: the expression that finds it among the call's
    ``args`` and ``kw``, how its pointer is read, the bytes from that pointer back to the
    lowest address it touches, and the bytes it spans."""

    def __init__(self, expr, kind, offset_bytes=0, span_bytes=0, name="", dtype=None):
        self.expr, self.kind = expr, kind
        self.offset_bytes, self.span_bytes, self.name = offset_bytes, span_bytes, name
        self.dtype = dtype

    @classmethod
    def of(cls, expr, info):
        """From an ArrayArg ``info``."""
        item = info.dtype.itemsize
        return cls(expr, pointer_kind(info.obj), info.offset * item, info.span * item,
                   info.name, info.dtype)

    def pointer(self, var):
        p = _POINTER[self.kind].format(v=var)
        return f"{p} - {self.offset_bytes}" if self.offset_bytes else p


class _Source:
    """Lines of a generated function and the names they use."""

    def __init__(self, env):
        self.env, self.lines = env, []

    def add(self, line, indent=1):
        self.lines.append("    " * indent + line)

    def name(self, prefix, value):
        """A name in the function's globals bound to ``value``."""
        name = f"{prefix}{len(self.env)}"
        self.env[name] = value
        return name


def _allocator(src, result_kind, device, inputs):
    """(a function of (variable, shape name, dtype name) giving the line that allocates it,
    format of its pointer). Torch's outputs are made by an input tensor's ``new_empty``
    (on its device; a microsecond less than ``torch.empty(..., device=)``)."""
    if result_kind == "torch":
        like = next((a.expr for a in inputs.values() if a.kind == "torch"), None)
        if like is not None:
            return (lambda o, s, d: f"{o} = {like}.new_empty({s}, dtype={d})"), \
                "{o}.data_ptr()"
        import torch
        src.env.update(EMPTY=torch.empty, DEV=torch.device("cuda", device))
        return (lambda o, s, d: f"{o} = EMPTY({s}, dtype={d}, device=DEV)"), "{o}.data_ptr()"
    src.env["EMPTY"] = arrays.cupy_module().ndarray
    return (lambda o, s, d: f"{o} = EMPTY({s}, {d})"), "{o}.data.ptr"


def _element_type(result_kind, dtype):
    """What the result kind's allocator is given for ``dtype`` (CuPy holds bfloat16 as its
    bits; torch takes its own dtypes)."""
    from .. import dtypes
    if result_kind == "torch":
        import torch
        return getattr(torch, np.dtype(dtype).name)
    return np.dtype(np.uint16) if dtypes.is_bfloat16(dtype) else np.dtype(dtype)


def _stream_line(src, result_kind, device, stream_obj, given):
    """``s = <the call's stream handle>``."""
    if not given:
        if result_kind == "torch":
            import torch
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
                (lambda d: torch.cuda.current_stream(d).cuda_stream)
            src.env.update(RAW=raw, DEVI=device)
            return "s = RAW(DEVI)"
        src.env["CUR"] = arrays.cupy_module().cuda.get_current_stream
        return "s = CUR().ptr"
    if isinstance(stream_obj, (int, np.integer)):
        return 's = int(kw["stream"])'
    for attr in ("ptr", "cuda_stream"):
        if isinstance(getattr(stream_obj, attr, None), int):
            return f's = kw["stream"].{attr}'
    src.env["HANDLE"] = stream_handle
    return 's = HANDLE(kw["stream"])'


def _overlap_lines(src, inputs, outs):
    """Refuse out= arrays that share memory with an input (their pointers are new each call)."""
    src.env["OVERLAP"] = _overlap_error
    for i, o in enumerate(outs):
        if not o.span_bytes:
            continue
        for j, a in inputs.items():
            if a.span_bytes:
                src.add(f"if q{i} < p{j} + {a.span_bytes} and p{j} < q{i} + {o.span_bytes}:")
                src.add(f"OVERLAP({i}, {a.name!r})", 2)


def _overlap_error(i, name):
    raise ArgumentError(f"out[{i}] overlaps the memory of input {name!r}")


def build_plan(compiled, inputs, result_kind, device, outs=None, stream_obj=None,
               stream_given=False, temps_on_stream=None):
    """The generated path of ``compiled``: ``call(args, kw)``.

    ``inputs``: leaf index -> PlanArray of each array argument; ``outs``: the out= arrays
    (PlanArrays, in output order) or None to allocate the outputs with the allocator of
    ``result_kind`` ('cupy' or 'torch') on ``device``; ``stream_given``: whether the call
    names its stream (``kw["stream"]``, like ``stream_obj``), else the current stream of
    the result's kind. ``temps_on_stream``: a function of a stream handle giving a context
    in which temporaries are allocated for that stream (for a named stream: memory freed
    when the call returns is then reused only behind the call's kernels)."""
    lowered = compiled.lowered
    src = _Source({"DRIVER_ERROR": _driver_error_class()})
    alloc, out_ptr = _allocator(src, result_kind, device, inputs)
    for j, a in inputs.items():
        src.add(f"p{j} = {a.pointer(a.expr)}")
    if outs is not None:
        for i, o in enumerate(outs):
            src.add(f"g{i} = {o.expr}")
            src.add(f"q{i} = {o.pointer(f'g{i}')}")
        _overlap_lines(src, inputs, outs)
        results = [f"g{i}" for i in range(len(outs))]
    else:
        for i, (dt, shape) in enumerate(lowered.out_specs):
            d = src.name("D", _element_type(result_kind, dt))
            s = src.name("S", tuple(shape))
            src.add(alloc(f"o{i}", s, d))
        results = [f"o{i}" for i in range(len(lowered.out_specs))]
    if not any(0 in tuple(shape) for _, shape in lowered.out_specs):
        if outs is None:
            for i in range(len(lowered.out_specs)):
                src.add(f"q{i} = {out_ptr.format(o=f'o{i}')}")
        src.add(_stream_line(src, result_kind, device, stream_obj, stream_given))
        _launch_lines(src, compiled, result_kind, alloc, out_ptr, temps_on_stream)
    src.add(_return(src, lowered.structure, results))
    body = "def call(args, kw):\n" + "\n".join(src.lines)
    exec(body, src.env)                     # noqa: S102 (our own generated code)
    return src.env["call"], body


def _launch_lines(src, compiled, result_kind, alloc, out_ptr, temps_on_stream):
    lowered = compiled.lowered
    launchers = [launcher for launcher in compiled.launchers if launcher.grid > 0]
    pieces = []                         # (variable, bytes, zeroed int32 words or 0)
    temp_var = {}
    for j, t in enumerate(lowered.temps):
        temp_var[t.name] = f"t{j}"
        pieces.append((f"t{j}", int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize, 0))
    for k, launcher in enumerate(launchers):
        for j, (source, spec) in enumerate(launcher.params):
            if source == "scratch":
                what, size, dtype = spec
                pieces.append((f"x{k}_{j}", size * np.dtype(dtype).itemsize,
                               size if what == "flag" else 0))
    if pieces:
        _block_lines(src, pieces, result_kind, alloc, out_ptr, temps_on_stream)
    for k, launcher in enumerate(launchers):
        slots = []
        for j, (source, spec) in enumerate(launcher.params):
            slots.append(f"p{spec}" if source == "leaf" else f"q{spec}" if source == "out"
                         else f"{temp_var[spec]}p" if source == "tmp"
                         else f"x{k}_{j}p" if source == "scratch"
                         else str(const_slot(spec)))
        _launch(src, k, launcher.launch, slots)


PIECE_ALIGN = 256       # each piece of a call's block starts where any vector access may


def block_offsets(sizes):
    """(offset of each piece, total bytes) of one block holding pieces of ``sizes`` bytes,
    each at a multiple of PIECE_ALIGN."""
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-max(size, 1) // PIECE_ALIGN) * PIECE_ALIGN
    return offsets, total


def _block_lines(src, pieces, result_kind, alloc, out_ptr, temps_on_stream):
    """Lines allocating one block of bytes for a call's temporaries and exchange buffers
    (one allocation a call, not one each: each costs the host microseconds), naming each
    piece's pointer and zeroing the arrival counts on the call's stream."""
    offsets, total = block_offsets([size for _, size, _ in pieces])
    line = alloc("tb", src.name("S", (total,)), src.name("D", _element_type(result_kind, np.uint8)))
    if temps_on_stream is not None:
        src.env["ON_STREAM"] = temps_on_stream
        src.add("with ON_STREAM(s):")
        src.add(line, 2)
    else:
        src.add(line)
    src.add(f"tbp = {out_ptr.format(o='tb')}")
    for (var, _, words), offset in zip(pieces, offsets):
        src.add(f"{var}p = tbp + {offset}")
        if words:
            src.env["MEMSET"] = cudadriver.memset32
            src.add(f"MEMSET({var}p, 0, {words}, s)")


def const_slot(value):
    """A constant parameter's slot value: the int as 64 bits (a 32-bit parameter reads the
    low half, which holds the same value for every int32)."""
    return int(value) & 0xFFFFFFFFFFFFFFFF


def _driver_error_class():
    cp = arrays.cupy_module()
    return cp.cuda.driver.CUDADriverError if cp is not None else _NeverRaised


class _NeverRaised(Exception):
    pass


def _launch(src, k, launch, slots):
    """Lines launching kernel ``k`` (a _DriverLaunch) with ``slots`` on stream ``s``: its
    parameter block filled slot by slot, then one driver call (a failed one is retried or
    raised by the _DriverLaunch, outside its lock)."""
    src.env.update({f"K{k}": launch, f"V{k}": launch.values, f"P{k}": launch.params.value})
    head = ", ".join(str(v) for v in launch.raw_head)
    src.add(f"with K{k}.lock:")
    for j, p in enumerate(slots):
        src.add(f"V{k}[{j}] = a{k}_{j} = {p}", 2)
    if launch.config is not None:       # a dependent launch: cuLaunchKernelEx, by ctypes
        src.env.update({f"C{k}": launch.config, f"CP{k}": launch.config_ptr,
                        "LAUNCH_EX": cudadriver.LAUNCH_EX})
        src.add(f"C{k}.stream = s", 2)
        src.add(f"e = LAUNCH_EX(CP{k}, {launch.raw_head[0]}, P{k}, None)", 2)
    else:
        cp = arrays.cupy_module()
        if cp is not None:
            # CuPy's cuLaunchKernel binding (compiled) costs the host about a microsecond
            # less than a ctypes call; it raises where the driver returns an error
            src.env["LAUNCH"] = cp.cuda.driver.launchKernel
            src.add("try:", 2)
            src.add(f"LAUNCH({head}, s, P{k}, 0)", 3)
            src.add("e = 0", 3)
            src.add("except DRIVER_ERROR as error:", 2)
            src.add("e = error.status", 3)
        else:
            src.env["LAUNCH_C"] = cudadriver.LAUNCH
            src.add(f"e = LAUNCH_C({head}, s, P{k}, None)", 2)
    src.add("if e:")
    src.add(f"K{k}.retry(e, [{', '.join(f'a{k}_{j}' for j in range(len(slots)))}], s)", 2)


def _return(src, structure, names):
    kind, meta = structure
    if kind == "single":
        return f"return {names[0]}"
    if kind == "dict":
        src.env["KEYS"] = list(meta)
        return f"return dict(zip(KEYS, ({', '.join(names)},)))"
    inner = ", ".join(names) + ("," if len(names) == 1 else "")
    return f"return ({inner})" if kind == "tuple" else f"return [{', '.join(names)}]"


def on_context(call, context):
    """``call`` run with CUDA context ``context`` current (the one its kernels were loaded
    in), the thread's own context restored after: on hosts with several GPUs, where the
    current device may be another than the arrays'."""
    def guarded(args, kw):
        prev = cudadriver.current_context().value
        if prev == context:
            return call(args, kw)
        set_current(context)
        try:
            return call(args, kw)
        finally:
            set_current(prev)
    return guarded


def set_current(context):
    import ctypes
    err = cudadriver.driver().cuCtxSetCurrent(ctypes.c_void_p(context))
    if err != 0:
        raise RuntimeError(f"cuCtxSetCurrent failed with {cudadriver.error_text(err)}")
