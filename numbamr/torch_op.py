"""numbamr functions as torch operators: ``fn.as_torch_op("lib::name")``.

The operator is defined with ``torch.library`` and given

- a fake implementation: the outputs' shapes and dtypes from numbamr's trace of the function
  on the fake tensors' shapes and dtypes (kept per signature), so that torch.compile, with
  ``fullgraph=True`` too, puts the call in its graph;
- a CUDA implementation: the jitted call itself (outputs from torch's caching allocator on
  the tensors' device, kernels launched on torch's current stream: a CUDA graph being
  captured there captures them, and replays them on the same memory);
- a CPU implementation: the tensors as NumPy arrays through the same call (its kernels in
  the simulator where there is no GPU) and the results as tensors;
- an autograd kernel that refuses tensors requiring grad with an ArgumentError (the
  kernels have no backward; under ``torch.no_grad()`` they are taken as they are).

Its schema, unless given, has a ``Tensor`` for each parameter without a default and, for one
with a default, the default's type (``float``, ``int``, ``bool``, ``str``, ``int[]`` for a
tuple of ints, ``Tensor?`` for None); it returns one ``Tensor`` or, with ``returns=n``, a
tuple of n (a function returning a dict gives its values in order).
"""
import inspect
import math
import threading

import numpy as np

from .errors import ArgumentError
from .runtime import arrays

_OPS = {}               # qualname -> _TorchOp (their torch.library registrations live here)
_LOCK = threading.Lock()
_SPECS_KEPT = 256       # signatures whose traced output specs an operator keeps


def register(fn, qualname, schema=None, returns=1):
    """Define ``qualname`` ("namespace::name") as the operator computing ``fn`` (a
    JitFunction); returns ``torch.ops.namespace.name``."""
    import torch
    ns, sep, name = qualname.partition("::")
    if not sep or not ns.isidentifier() or not name.isidentifier():
        raise ArgumentError(f"as_torch_op: {qualname!r} is not a 'namespace::name'")
    if not isinstance(returns, int) or isinstance(returns, bool) or returns < 1:
        raise ArgumentError(f"as_torch_op: returns must be a count of outputs >= 1, "
                            f"got {returns!r}")
    with _LOCK:
        done = _OPS.get(qualname)
        if done is not None:
            if done.fn is fn:
                return done.packet
            raise ArgumentError(f"as_torch_op: the operator {qualname} is already "
                                f"numbamr.jit {done.fn.__name__}")
        schema = schema_of(fn, returns) if schema is None else schema.strip()
        if schema.startswith(name + "("):
            schema = schema[len(name):]
        op = _TorchOp(fn, qualname, schema)
        lib = torch.library.Library(ns, "FRAGMENT")
        lib.define(name + schema)
        lib.impl(name, op.cpu, "CPU")
        lib.impl(name, op.cuda, "CUDA")
        lib.impl(name, op.autograd, "Autograd", with_keyset=True)
        torch.library.register_fake(qualname, op.fake, lib=lib)
        op.lib = lib
        op.packet = getattr(getattr(torch.ops, ns), name)
        op.overload = op.packet.default
        op.arg_names = [a.name for a in op.overload._schema.arguments]
        _OPS[qualname] = op
        return op.packet


def schema_of(fn, returns=1):
    """The schema ``(Tensor x, float eps=1e-05) -> Tensor`` of a JitFunction's parameters
    (see the module's docstring)."""
    parts, keyword_only = [], False
    for p in fn._sig.parameters.values():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ArgumentError(f"as_torch_op: {fn.__name__} takes *{p.name}, which a torch "
                                "schema cannot say; pass schema=")
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ArgumentError(f"as_torch_op: {fn.__name__}'s parameter {p.name!r} is "
                                "positional-only; pass schema=")
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
            keyword_only = True
        parts.append(_parameter(fn, p))
    out = "Tensor" if returns == 1 else "(" + ", ".join(["Tensor"] * returns) + ")"
    return f"({', '.join(parts)}) -> {out}"


def _parameter(fn, p):
    d = p.default
    if d is p.empty or d is np._NoValue:
        return f"Tensor {p.name}"
    if d is None:
        return f"Tensor? {p.name}=None"
    if isinstance(d, bool):
        return f"bool {p.name}={d}"
    if isinstance(d, int):
        return f"int {p.name}={d}"
    if isinstance(d, float) and math.isfinite(d):
        return f"float {p.name}={d!r}"
    if isinstance(d, str) and "'" not in d and '"' not in d:
        return f"str {p.name}='{d}'"
    if isinstance(d, tuple) and all(type(v) is int for v in d):
        return f"int[] {p.name}=[{', '.join(str(v) for v in d)}]"
    raise ArgumentError(f"as_torch_op: {fn.__name__}'s parameter {p.name!r} has default "
                        f"{d!r}, which has no torch schema type here; pass schema=")


class _TorchOp:
    """One operator's implementations (see the module's docstring)."""

    def __init__(self, fn, qualname, schema):
        self.fn, self.qualname = fn, qualname
        returned = schema.rpartition("->")[2].strip()
        self.as_tuple = returned.startswith("(")
        self.count = returned.count("Tensor") if self.as_tuple else 1
        self._specs = {}

    # ---- implementations ------------------------------------------------------------------
    def cuda(self, *args, **kwargs):
        return self._returned(self.fn(*_plain(args), **kwargs), args, _as_is)

    def cpu(self, *args, **kwargs):
        import torch
        host = [_to_numpy(a) if isinstance(a, torch.Tensor) else a for a in _plain(args)]
        named = {k: _to_numpy(v) if isinstance(v, torch.Tensor) else v
                 for k, v in kwargs.items()}
        result = self.fn(*host, **named)
        inputs = [a for a in list(host) + list(named.values()) if isinstance(a, np.ndarray)]
        return self._returned(result, args, lambda o: _from_numpy(o, inputs))

    def fake(self, *args, **kwargs):
        import torch
        args = _plain(args)
        specs = self._output_specs(args, kwargs)
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device("cpu")
        outs = [torch.empty(shape, dtype=arrays.numpy_dtype_to_torch(dt), device=device)
                for dt, shape in specs]
        return tuple(outs) if self.as_tuple else outs[0]

    def autograd(self, keyset, *args, **kwargs):
        import torch
        if torch.is_grad_enabled():
            named = list(zip(self.arg_names, args)) + list(kwargs.items())
            for name, a in named:
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    raise ArgumentError(
                        f"{self.qualname}: argument {name!r} requires grad, and numbamr's "
                        "kernels have no backward: pass t.detach(), or call under "
                        "torch.no_grad()")
        with torch._C._AutoDispatchBelowAutograd():
            return self.overload.redispatch(keyset & torch._C._after_autograd_keyset,
                                            *args, **kwargs)

    # ---- helpers ---------------------------------------------------------------------------
    def _output_specs(self, args, kwargs):
        key = tuple(_spec_key(a) for a in args) + \
            tuple((k, _spec_key(v)) for k, v in sorted(kwargs.items()))
        found = self._specs.get(key)
        if found is None:
            specs, _ = self.fn.output_specs(args, kwargs, _tensor_spec)
            self._check_count(len(specs))
            found = [(dt, tuple(int(n) for n in shape)) for dt, shape in specs]
            if len(self._specs) >= _SPECS_KEPT:
                self._specs.clear()
            self._specs[key] = found
        return found

    def _check_count(self, n):
        if n != self.count:
            raise ArgumentError(f"{self.qualname}: numbamr.jit {self.fn.__name__} returns "
                                f"{n} array(s), the operator's schema {self.count}; define it "
                                f"with as_torch_op(..., returns={n})")

    def _returned(self, result, args, convert):
        kind = type(result)
        outs = list(result.values()) if kind is dict else list(result) \
            if kind in (tuple, list) else [result]
        self._check_count(len(outs))
        outs = [convert(o) for o in outs]
        outs = [_fresh(o, args) for o in outs]
        return tuple(outs) if self.as_tuple else outs[0]


def _plain(args):
    """torch gives ``int[]`` arguments as lists; numbamr's statics are tuples."""
    return [tuple(a) if isinstance(a, list) else a for a in args]


def _as_is(o):
    return o


def _tensor_spec(v):
    import torch
    if not isinstance(v, torch.Tensor):
        return None
    return (tuple(int(n) for n in v.shape), arrays.torch_dtype_to_numpy(v.dtype, "a tensor"))


def _spec_key(v):
    import torch
    if isinstance(v, torch.Tensor):
        return ("T", tuple(int(n) for n in v.shape), v.dtype)
    return ("S", type(v), v)


def _to_numpy(t):
    """A CPU tensor as a NumPy array over its memory (bfloat16 through its bits)."""
    import torch
    from . import dtypes
    t = t.detach()
    if t.dtype == torch.bfloat16:
        if dtypes.BFLOAT16 is None:
            raise dtypes.bfloat16_needed("a bfloat16 tensor")
        return t.view(torch.uint16).numpy().view(dtypes.BFLOAT16)
    return t.numpy()


def _from_numpy(o, inputs):
    """A NumPy result as a new CPU tensor (never one sharing an input's memory)."""
    import torch
    from . import dtypes
    o = np.asarray(o)
    if any(np.may_share_memory(o, a) for a in inputs) or not o.flags.c_contiguous or \
            not o.flags.writeable:
        o = np.array(o, order="C")
    if dtypes.is_bfloat16(o.dtype):
        return torch.from_numpy(o.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(o)


def _fresh(o, args):
    """An output that is an input tensor itself comes back as a copy (an operator's outputs
    never alias its inputs unless its schema says so)."""
    return o.clone() if any(o is a for a in args) else o
