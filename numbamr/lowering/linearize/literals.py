"""Source text of constants, and the dtypes values cross memory and threads in."""
import numpy as np

from ...ops import ReduceKind

ARG_SENTINEL = 1 << 62       # index of an arg-reduce that has seen no element yet


def memory_dtype(dtype):
    """The dtype a buffer of ``dtype`` holds: bools as bytes (uint8 pointers)."""
    return np.dtype(np.uint8) if np.dtype(dtype).kind == "b" else np.dtype(dtype)


def is_arg(r):
    return r.kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN)


def exchange_dtype(dt):
    """Shuffles and shared arrays move bool and narrow integers as int32."""
    dt = np.dtype(dt)
    if dt.kind == "b" or (dt.kind in "iu" and dt.itemsize < 4):
        return np.dtype(np.int32)
    return dt


def identity_literal(r):
    from ...dtypes import identity
    kind = r.kind.value
    dt = r.value_dtype if is_arg(r) else r.dtype
    return const_literal(identity(kind, dt).item(), dt)


def const_literal(value, dtype):
    """Source text of a typed constant (so float32 code never silently widens)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return "True" if value else "False"
    if dt.kind == "f":
        if value != value:
            body = "nan"
        elif value in (float("inf"), float("-inf")):
            body = "inf" if value > 0 else "-inf"
        else:
            body = repr(float(value))
        return f"{dt.name}({body})" if body[0] not in "-" else f"{dt.name}({body})"
    return f"{dt.name}({int(value)})"
