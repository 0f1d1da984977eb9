"""The traced array: a ``Tracer`` has a shape and a dtype and no values.

Its operators, methods and numpy protocols call the traced functions through the tables
below (``UFUNCS``, ``FUNCTIONS``, ``METHODS``), which ``trace.py`` fills from the modules
that build on this class (``ufuncs``, ``movement``, ``reductions``, ``composite``): every
import goes downward, to this module at the bottom.
"""
import numbers

import numpy as np

from .errors import TraceError, user_loc

# numpy ufunc -> traced function, numpy function -> traced function, array method -> traced
# function (of those that are no numpy function: astype, getitem); filled by trace.py
UFUNCS = {}
FUNCTIONS = {}
METHODS = {}


class Tracer:
    """A traced array: a node of the graph plus the graph it belongs to."""
    __slots__ = ("graph", "node")
    __array_priority__ = 1000

    def __init__(self, graph, node):
        self.graph, self.node = graph, node

    # ---- array attributes -------------------------------------------------------------
    shape = property(lambda self: self.node.shape)
    dtype = property(lambda self: self.node.dtype)
    ndim = property(lambda self: len(self.node.shape))
    size = property(lambda self: int(np.prod(self.node.shape, dtype=np.int64)))
    T = property(lambda self: self.transpose())

    def __repr__(self):
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"

    def __len__(self):
        if not self.shape:
            raise TraceError("len() of a 0-d traced array", user_loc())
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # ---- things that need values: refused with a clear message ------------------------
    def __bool__(self):
        raise TraceError("Python control flow on a traced array (if/while/and/or/not, or bool()) "
                         "needs its value, which is not known while tracing; use np.where or "
                         "pass the decision as a static (non-array) argument", user_loc())

    def _no_value(self, *_):
        raise TraceError("a traced array has no value at trace time (int()/float()/index use); "
                         "pass such numbers as static (non-array) arguments", user_loc())

    __float__ = __int__ = __index__ = __complex__ = _no_value

    def __array__(self, *_, **__):
        raise TraceError("a traced array cannot be converted to a NumPy array (np.asarray, or a "
                         "numpy function numbamr does not support)", user_loc())

    def __setitem__(self, key, value):
        raise TraceError("in-place assignment (x[...] = v) inside a numbamr function is not "
                         "supported: arrays are immutable while tracing; build a new array with "
                         "np.where", user_loc())

    def _inplace(self, *_):
        raise TraceError("in-place operators (+=, *=, ...) on arrays inside a numbamr function are "
                         "not supported (they would mutate an input); write x = x + y instead",
                         user_loc())

    __iadd__ = __isub__ = __imul__ = __itruediv__ = __ifloordiv__ = __imod__ = __ipow__ = _inplace
    __iand__ = __ior__ = __ixor__ = __imatmul__ = _inplace
    __hash__ = object.__hash__

    # ---- operators ---------------------------------------------------------------------
    def __add__(self, o): return UFUNCS[np.add](self, o)
    def __radd__(self, o): return UFUNCS[np.add](o, self)
    def __sub__(self, o): return UFUNCS[np.subtract](self, o)
    def __rsub__(self, o): return UFUNCS[np.subtract](o, self)
    def __mul__(self, o): return UFUNCS[np.multiply](self, o)
    def __rmul__(self, o): return UFUNCS[np.multiply](o, self)
    def __truediv__(self, o): return UFUNCS[np.true_divide](self, o)
    def __rtruediv__(self, o): return UFUNCS[np.true_divide](o, self)
    def __floordiv__(self, o): return UFUNCS[np.floor_divide](self, o)
    def __rfloordiv__(self, o): return UFUNCS[np.floor_divide](o, self)
    def __mod__(self, o): return UFUNCS[np.remainder](self, o)
    def __rmod__(self, o): return UFUNCS[np.remainder](o, self)
    def __pow__(self, o): return UFUNCS[np.power](self, o)
    def __rpow__(self, o): return UFUNCS[np.power](o, self)
    def __neg__(self): return UFUNCS[np.negative](self)
    def __pos__(self): return self
    def __abs__(self): return UFUNCS[np.absolute](self)
    def __invert__(self): return UFUNCS[np.invert](self)
    def __and__(self, o): return UFUNCS[np.bitwise_and](self, o)
    def __rand__(self, o): return UFUNCS[np.bitwise_and](o, self)
    def __or__(self, o): return UFUNCS[np.bitwise_or](self, o)
    def __ror__(self, o): return UFUNCS[np.bitwise_or](o, self)
    def __xor__(self, o): return UFUNCS[np.bitwise_xor](self, o)
    def __rxor__(self, o): return UFUNCS[np.bitwise_xor](o, self)
    def __lt__(self, o): return UFUNCS[np.less](self, o)
    def __le__(self, o): return UFUNCS[np.less_equal](self, o)
    def __gt__(self, o): return UFUNCS[np.greater](self, o)
    def __ge__(self, o): return UFUNCS[np.greater_equal](self, o)
    def __eq__(self, o): return UFUNCS[np.equal](self, o)
    def __ne__(self, o): return UFUNCS[np.not_equal](self, o)

    def __matmul__(self, o): return UFUNCS[np.matmul](self, o)
    def __rmatmul__(self, o): return UFUNCS[np.matmul](o, self)

    # ---- methods -----------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.sum](self, axis, dtype, out, keepdims, **kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.prod](self, axis, dtype, out, keepdims, **kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.max](self, axis, out, keepdims, **kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.min](self, axis, out, keepdims, **kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.mean](self, axis, dtype, out, keepdims, **kw)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return FUNCTIONS[np.var](self, axis, dtype, out, ddof, keepdims, **kw)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return FUNCTIONS[np.std](self, axis, dtype, out, ddof, keepdims, **kw)

    def argmax(self, axis=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.argmax](self, axis, out, keepdims=keepdims, **kw)

    def argmin(self, axis=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.argmin](self, axis, out, keepdims=keepdims, **kw)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.any](self, axis, out, keepdims, **kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return FUNCTIONS[np.all](self, axis, out, keepdims, **kw)

    def copy(self, order="K"):
        return self         # traced values are never written in place: a copy is the value

    def astype(self, dtype, copy=True):
        return METHODS["astype"](self, dtype)

    def reshape(self, *shape, order="C"):
        if order != "C":
            raise TraceError(f"reshape(order={order!r}) is not supported; only order='C'",
                             user_loc())
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        return FUNCTIONS[np.reshape](self, shape)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = axes[0]
        return FUNCTIONS[np.transpose](self, axes if axes else None)

    def swapaxes(self, a, b):
        return FUNCTIONS[np.swapaxes](self, a, b)

    def flatten(self):
        return FUNCTIONS[np.reshape](self, (-1,))

    ravel = flatten

    def squeeze(self, axis=None):
        return FUNCTIONS[np.squeeze](self, axis)

    def clip(self, a_min=None, a_max=None):
        return FUNCTIONS[np.clip](self, a_min, a_max)

    def __getitem__(self, key):
        return METHODS["getitem"](self, key)

    def __getattr__(self, name):
        # only reached for names a Tracer lacks: name the ndarray method numbamr cannot trace
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise _UnsupportedAttribute(f"the array method or attribute .{name} is not supported "
                                        "by numbamr", user_loc())
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- numpy protocols ---------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            raise TraceError(f"np.{ufunc.__name__}.{method} is not supported; use the "
                             f"array methods (.sum(), .max(), ...)", user_loc())
        fn = UFUNCS.get(ufunc)
        if fn is None:
            raise TraceError(f"the numpy ufunc np.{ufunc.__name__} is not supported by numbamr",
                             user_loc())
        out = kwargs.pop("out", None)
        if out is not None:
            raise TraceError(f"np.{ufunc.__name__}(..., out=...) inside a numbamr function is not "
                             "supported: return the result instead", user_loc())
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("casting", None)
        taken = {k: kwargs.pop(k) for k in getattr(fn, "keywords", ()) if k in kwargs}
        if kwargs:
            raise TraceError(f"np.{ufunc.__name__}: arguments {sorted(kwargs)} are not supported",
                             user_loc())
        result = fn(*inputs, **taken)
        return METHODS["astype"](result, dtype) if dtype is not None else result

    def __array_function__(self, func, types, args, kwargs):
        fn = FUNCTIONS.get(func)
        if fn is None:
            hint = INSTEAD.get(getattr(func, "__name__", ""), "")
            raise TraceError(f"the numpy function {_numpy_name(func)} is not supported by "
                             f"numbamr{hint}", user_loc())
        # NumPy's own "not given" marker (np.sum(x) jitted as a function passes every default)
        return fn(*args, **{k: v for k, v in kwargs.items() if v is not np._NoValue})


# what to write instead of an unsupported NumPy function, where a fused form exists
INSTEAD = {
    "take_along_axis": "; to pick one element a row, compare positions with the indices: "
                       "np.where(np.arange(n) == idx[:, None], x, 0).sum(axis=-1) (an index "
                       "out of range picks nothing instead of raising IndexError)",
}


class _UnsupportedAttribute(TraceError, AttributeError):
    """An ndarray method or attribute a Tracer does not have (still an AttributeError, so
    hasattr() keeps working)."""


def _numpy_name(func):
    """np.cumsum, np.fft.fft, np.linalg.norm: a numpy function as the user would write it."""
    mod = getattr(func, "__module__", None) or "numpy"
    parts = [p for p in mod.split(".")[1:] if not p.startswith("_")] \
        if mod.split(".")[0] == "numpy" else []
    return ".".join(["np", *parts, getattr(func, "__name__", repr(func))])
