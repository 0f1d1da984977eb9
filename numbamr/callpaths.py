"""Registering a signature's generated call path (``runtime.callplan``): after a call took
the full path, a small function made for its signature serves the later calls with the same
fast key, where nothing the full path does could be needed (a check of the grad mode, a
host copy, a keyword that is the function's own).
"""
from . import settings
from .runtime import arrays
from .runtime.callplan import PlanArray, build_plan, on_context
from .runtime.contexts import several_gpus, primary_context
from .runtime.launch import temps_on_stream


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


def register_path(fn, fkey, compiled, leaves, ctx, args, kwargs, outs):
    """Make the generated call path of this signature of the jitted function ``fn`` and
    keep it in ``fn._fast`` under ``fkey``; nothing where a call with that key could need
    what the path skips (a check of the grad mode, a host copy, a keyword that is the
    function's own)."""
    if callplan_refuses(fn, compiled, leaves, ctx, kwargs, outs):
        return
    special = {"out", "stream"}
    sources = leaf_sources(fn, args, {k: v for k, v in kwargs.items() if k not in special})
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
    with fn._lock:
        if len(fn._fast) >= settings.current().max_signatures:
            fn._fast.clear()
        fn._fast[fkey] = call


def leaf_sources(fn, args, kwargs):
    """For each leaf of a call of ``fn`` with these arguments, the expression that reads it
    from a call's ``args`` and ``kw`` (None for a parameter's default)."""
    marks = [_Mark(f"args[{i}]") for i in range(len(args))]
    named = {k: _Mark(f"kw[{k!r}]") for k in kwargs}
    _, leaves = fn._bind(marks, named)
    return [leaf.value.expr if isinstance(leaf.value, _Mark) else None for leaf in leaves]
