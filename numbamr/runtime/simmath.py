"""The ``math`` of kernels run in numba's CPU simulator.

On a GPU, ``math.log(0.0)`` is ``-inf`` and float32 stays float32; Python's ``math`` raises
and returns float64 instead. Emitted simulator sources import this module as ``math`` so
that both targets compute the same values in the same dtypes.
"""
import math as _math
import threading

import numpy as np

# numba's simulator finds a block's shared array by the declaring line, but looks it up and
# creates it without a lock: two threads racing there get two different arrays. Simulator
# sources declare shared arrays while holding this lock.
shared_lock = threading.Lock()

exp, log, log2, sqrt = np.exp, np.log, np.log2, np.sqrt
sin, cos, tanh = np.sin, np.cos, np.tanh
log1p, expm1 = np.log1p, np.expm1
sinh, cosh, tan, asin, acos, atan = np.sinh, np.cosh, np.tan, np.arcsin, np.arccos, np.arctan
asinh, acosh, atanh, atan2, hypot = np.arcsinh, np.arccosh, np.arctanh, np.arctan2, np.hypot
floor, ceil, fmod, copysign = np.floor, np.ceil, np.fmod, np.copysign
inf, nan = _math.inf, _math.nan


def erf(x):
    return type(x)(_math.erf(float(x)))


def quiet():
    """Silence numpy's floating-point warnings in this simulated thread (GPUs raise none)."""
    np.seterr(all="ignore")


def bf16_to_f32(bits):
    """bfloat16 bits (a uint16) as float32, as the GPU intrinsic computes it."""
    return np.array(int(bits) << 16, np.uint32).view(np.float32)[()]


def f32_to_bf16(value):
    """float32 rounded to bfloat16 (ties to even), its bits as uint16; NaN stays a quiet NaN."""
    bits = int(np.array(value, np.float32).view(np.uint32))
    if value != value:
        return np.uint16((bits >> 16) | 0x40)
    return np.uint16(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)


def f64_to_f32_odd(value):
    """float64 as float32 rounded to odd (see runtime.intrinsics.f64_to_f32_odd)."""
    value = np.float64(value)
    near = np.float32(value)
    bits = int(np.array(near).view(np.uint32))
    back = np.float64(near)
    bits -= int(abs(back) > abs(value))
    bits |= int(back != value and value == value)
    return np.array(bits, np.uint32).view(np.float32)[()]


def select(cond, a, b):
    """The simulator's ``select`` (see runtime.intrinsics.select)."""
    return a if cond else b


def mul_rn(a, b):
    """The simulator's ``mul_rn``: NumPy scalars round every product already."""
    return a * b


# ---- split rows (see lowering.emit.Emitter.op_xsync): partials as 64-bit patterns --------

def xstore(buf, idx, value):
    value = np.asarray(value)
    buf[idx] = value.astype(np.int64)[()] if value.dtype.kind in "biu" else \
        value.astype(np.float64).view(np.int64)[()]


def xload(buf, idx):
    return np.array(buf[idx], np.int64).view(np.float64)[()]


def xload_int(buf, idx):
    return np.int64(buf[idx])


# the exchange a run of a split kernel stops at (set by the launcher before each run)
PHASE = [0]


def sim_phase():
    return PHASE[0]
