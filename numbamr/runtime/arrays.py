"""Arrays in and out: what kind an argument is, its layout, and 1-D views of its memory.

Kernels take every array as a flat 1-D buffer that starts at the lowest address the array
touches; the strides and the offset of element (0, ..., 0) are compiled into the kernel.
So strided, transposed and sliced views are read in place, without copies.
"""
import sys
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..errors import ArgumentError, DTypeError

HOST, DEVICE = "host", "device"


@dataclass
class ArrayArg:
    """An array argument: where it lives, its layout, and the object itself."""
    name: str
    obj: object
    kind: str               # 'numpy', 'cupy', 'torch', 'numba', 'cai'
    where: str              # HOST or DEVICE
    shape: tuple
    dtype: np.dtype
    strides: tuple          # in elements
    ptr: int                # address of element (0, ..., 0)
    device: int = 0

    @property
    def offset(self):
        """Elements from the lowest address touched to element (0, ..., 0)."""
        return -sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0 and n > 0)

    @property
    def span(self):
        """Elements from the lowest to the highest address touched (+1)."""
        if any(n == 0 for n in self.shape):
            return 0
        return 1 + sum((n - 1) * abs(s) for n, s in zip(self.shape, self.strides))

    @property
    def base_ptr(self):
        return self.ptr - self.offset * self.dtype.itemsize

    @property
    def aligned(self):
        return self.base_ptr % 16 == 0

    def layout_key(self):
        return (self.dtype.str, self.shape, self.strides, self.offset, self.aligned)


def _element_strides(byte_strides, shape, itemsize, name):
    if byte_strides is None:                      # C-contiguous
        out, acc = [], 1
        for n in reversed(shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))
    out = []
    for s, n in zip(byte_strides, shape):
        if n == 1:
            out.append(0)
        elif s % itemsize:
            raise ArgumentError(f"argument {name!r} has a stride of {s} bytes, not a multiple of "
                                f"its itemsize {itemsize}; make a contiguous copy first")
        else:
            out.append(s // itemsize)
    return tuple(out)


def _canonical_strides(strides, shape):
    return tuple(0 if n == 1 else s for s, n in zip(strides, shape))


def inspect_array(value, name):
    """An ArrayArg for array-like ``value``, or None if it is not an array."""
    mod = type(value).__module__.split(".")[0]
    if isinstance(value, np.ndarray):
        dt = dtypes.check(value.dtype, f"argument {name!r}")
        strides = _element_strides(value.strides, value.shape, dt.itemsize, name)
        return ArrayArg(name, value, "numpy", HOST, value.shape, dt, strides,
                        value.__array_interface__["data"][0])
    if mod == "torch":
        return _inspect_torch(value, name)
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        try:
            dt = np.dtype(cai["typestr"])
        except TypeError:
            raise DTypeError(f"argument {name!r} has typestr {cai['typestr']!r}, "
                             "which numbamr does not support") from None
        dt = dtypes.check(dt, f"argument {name!r}")
        shape = tuple(cai["shape"])
        strides = _element_strides(cai.get("strides"), shape, dt.itemsize, name)
        kind = "cupy" if mod == "cupy" else ("numba" if mod == "numba" else "cai")
        dev = getattr(getattr(value, "device", None), "id", 0)
        return ArrayArg(name, value, kind, DEVICE, shape, dt, strides, cai["data"][0],
                        dev if isinstance(dev, int) else 0)
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, float, bool, np.ndarray, np.generic)) for v in value):
        return None
    return None


def _inspect_torch(t, name):
    if t.is_cuda:
        cai = t.__cuda_array_interface__
        dt = dtypes.check(np.dtype(cai["typestr"]), f"argument {name!r}")
        strides = tuple(int(s) for s in t.stride())
        strides = _canonical_strides(strides, tuple(t.shape))
        return ArrayArg(name, t, "torch", DEVICE, tuple(t.shape), dt, strides, cai["data"][0],
                        t.device.index or 0)
    arr = t.detach().numpy()
    info = inspect_array(arr, name)
    info.kind = "torch"
    return info


# ---- 1-D views of an array's memory ------------------------------------------------------

def host_buffer(arg):
    """A 1-D numpy array over the memory ``arg`` touches (no copy)."""
    arr = arg.obj if arg.kind == "numpy" else np.asarray(arg.obj)
    if arg.span == 0:
        return np.empty(0, arg.dtype)
    # flip axes with negative strides so that element (0, ..., 0) is the lowest address
    low = arr[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in arr.strides)]
    return np.lib.stride_tricks.as_strided(low, shape=(arg.span,), strides=(arg.dtype.itemsize,),
                                           writeable=arr.flags.writeable)


class DeviceSpan:
    """A 1-D ``__cuda_array_interface__`` view of a device array's memory."""

    def __init__(self, ptr, n, dtype, owner, stream=None):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": (n,), "typestr": np.dtype(dtype).str, "data": (ptr, False),
            "version": 3, "strides": None, "stream": stream}


def device_buffer(arg):
    return DeviceSpan(arg.base_ptr, arg.span, arg.dtype, arg.obj)


def cupy_module():
    return sys.modules.get("cupy") or _import_cupy()


def _import_cupy():
    try:
        import cupy
        return cupy
    except ImportError:
        return None
