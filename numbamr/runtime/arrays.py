"""Arrays in and out: what kind an argument is, its layout, and 1-D views of its memory.

Kernels take every array as a flat 1-D buffer that starts at the lowest address the array
touches; the strides and the offset of element (0, ..., 0) are compiled into the kernel.
So strided, transposed and sliced views are read in place, without copies.
"""
import sys
import numpy as np

from .. import dtypes
from ..errors import ArgumentError, DTypeError

HOST, DEVICE = "host", "device"


class ArrayArg:
    """An array argument: where it lives, its layout, and the object itself."""
    __slots__ = ("name", "obj", "kind", "where", "shape", "dtype", "strides", "ptr", "device",
                 "offset", "base_ptr", "aligned")

    def __init__(self, name, obj, kind, where, shape, dtype, strides, ptr, device=0):
        self.name, self.obj, self.kind, self.where = name, obj, kind, where
        self.shape, self.dtype, self.strides, self.ptr = shape, dtype, strides, ptr
        self.device = device
        # elements from the lowest address touched to element (0, ..., 0)
        self.offset = -sum((n - 1) * s for n, s in zip(shape, strides) if s < 0 and n > 0)
        self.base_ptr = ptr - self.offset * dtype.itemsize
        self.aligned = self.base_ptr % 16 == 0

    @property
    def span(self):
        """Elements from the lowest to the highest address touched (+1)."""
        if any(n == 0 for n in self.shape):
            return 0
        return 1 + sum((n - 1) * abs(s) for n, s in zip(self.shape, self.strides))

    def layout_key(self):
        return (self.dtype.str, self.shape, self.strides, self.offset, self.aligned)


_BYTE_STRIDES = {}


def _element_strides(byte_strides, shape, itemsize, name):
    if byte_strides is None:                      # C-contiguous
        return _c_element_strides(tuple(shape))
    hit = _BYTE_STRIDES.get((byte_strides, shape, itemsize))
    if hit is not None:
        return hit
    out = []
    for s, n in zip(byte_strides, shape):
        if n == 1:
            out.append(0)
        elif s % itemsize:
            raise ArgumentError(f"argument {name!r} has a stride of {s} bytes, not a multiple of "
                                f"its itemsize {itemsize}; make a contiguous copy first")
        else:
            out.append(s // itemsize)
    out = tuple(out)
    if len(_BYTE_STRIDES) < 4096:
        _BYTE_STRIDES[(tuple(byte_strides), tuple(shape), itemsize)] = out
    return out


def _canonical_strides(strides, shape):
    return tuple(0 if n == 1 else s for s, n in zip(strides, shape))


_CUPY_NDARRAY = None


def cupy_ndarray():
    """cupy.ndarray, or a class nothing is an instance of when CuPy is not loaded."""
    global _CUPY_NDARRAY
    if _CUPY_NDARRAY is None:
        cp = sys.modules.get("cupy")
        if cp is None:
            return _NotLoaded
        _CUPY_NDARRAY = cp.ndarray
    return _CUPY_NDARRAY


class _NotLoaded:
    pass


def _is_cupy(value):
    return isinstance(value, cupy_ndarray())


def _inspect_cupy(value, name):
    dt = value.dtype
    if dt not in dtypes.SUPPORTED:
        dtypes.check(dt, f"argument {name!r}")
    shape = value.shape
    strides = _element_strides(value.strides, shape, dt.itemsize, name)
    data = value.data
    return ArrayArg(name, value, "cupy", DEVICE, shape, dt, strides, data.ptr, data.device_id)


_C_STRIDES = {}


def _c_element_strides(shape):
    hit = _C_STRIDES.get(shape)
    if hit is None:
        out, acc = [], 1
        for n in reversed(shape):
            out.append(0 if n == 1 else acc)
            acc *= n
        hit = _C_STRIDES[shape] = tuple(reversed(out))
    return hit


def inspect_array(value, name):
    """An ArrayArg for array-like ``value``, or None if it is not an array."""
    if _is_cupy(value):
        return _inspect_cupy(value, name)
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
        ptr = cai["data"][0]
        return ArrayArg(name, value, kind, DEVICE, shape, dt, strides, ptr,
                        cai_device(value, ptr))
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, float, bool, np.ndarray, np.generic)) for v in value):
        return None
    return None


def _inspect_torch(t, name):
    import torch
    if t.requires_grad and torch.is_grad_enabled():
        raise ArgumentError(f"argument {name!r} is a tensor that requires grad; numbamr's "
                            "kernels have no backward: pass t.detach(), or call under "
                            "torch.no_grad()")
    dt = torch_dtype_to_numpy(t.dtype, f"argument {name!r}")
    if t.is_cuda:
        strides = _canonical_strides(tuple(t.stride()), tuple(t.shape))
        return ArrayArg(name, t, "torch", DEVICE, tuple(t.shape), dt, strides, t.data_ptr(),
                        t.get_device())
    if t.device.type != "cpu":
        raise ArgumentError(f"argument {name!r} is a torch tensor on {t.device}; numbamr takes "
                            "CUDA and CPU tensors")
    arr = t.detach()
    arr = arr.view(torch.uint16).numpy().view(dtypes.BFLOAT16) if dtypes.is_bfloat16(dt) \
        else arr.numpy()
    info = inspect_array(arr, name)
    info.kind = "torch"
    return info


_TORCH_DTYPES = {}


def torch_dtype_to_numpy(torch_dtype, what):
    """The NumPy dtype of a torch dtype (bfloat16: ml_dtypes'), or a DTypeError naming
    ``what``."""
    dt = _TORCH_DTYPES.get(torch_dtype)
    if dt is not None:
        return dt
    name = str(torch_dtype).rpartition(".")[2]
    if name == "bfloat16":
        if dtypes.BFLOAT16 is None:
            raise dtypes.bfloat16_needed(what)
        dt = dtypes.BFLOAT16
    else:
        try:
            dt = np.dtype(name)
        except TypeError:
            raise DTypeError(f"{what} has torch dtype {torch_dtype}, which numbamr does not "
                             "support") from None
        dt = dtypes.check(dt, what)
    _TORCH_DTYPES[torch_dtype] = dt
    return dt


def numpy_dtype_to_torch(dtype):
    import torch
    return getattr(torch, np.dtype(dtype).name)


# ---- which GPU an array is on ----------------------------------------------------------------

CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_GPUS = None


def _gpus():
    global _GPUS
    if _GPUS is None:
        from .device import gpu_count
        _GPUS = gpu_count()
    return _GPUS


def pointer_device(ptr):
    """The ordinal of the GPU whose memory ``ptr`` points into (0 on a host with one GPU,
    without asking the driver)."""
    if _gpus() <= 1 or not ptr:
        return 0
    import ctypes
    from . import cudadriver
    ordinal = ctypes.c_int(0)
    err = cudadriver.driver().cuPointerGetAttribute(
        ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ctypes.c_uint64(ptr))
    return ordinal.value if err == 0 else 0


def cai_device(obj, ptr):
    """The GPU of a ``__cuda_array_interface__`` object: its ``device.id`` where it has one,
    else the device its pointer belongs to."""
    dev = getattr(getattr(obj, "device", None), "id", None)
    return dev if isinstance(dev, int) else pointer_device(ptr)


def to_device(arg, cp):
    """A device copy of host array ``arg`` (an ArrayArg) as a CuPy array; bfloat16, which
    CuPy lacks, travels as its bits and keeps its dtype in the returned ArrayArg."""
    host = np.ascontiguousarray(arg.obj)
    info = inspect_array(cp.asarray(bits_view(host)), arg.name)
    if dtypes.is_bfloat16(host.dtype):
        info.dtype = host.dtype
    return info


# ---- 1-D views of an array's memory ------------------------------------------------------

def host_buffer(arg):
    """A 1-D numpy array over the memory ``arg`` touches (no copy)."""
    arr = arg.obj if arg.kind == "numpy" else np.asarray(arg.obj)
    if arg.span == 0:
        return np.empty(0, arg.dtype)
    # flip axes with negative strides so that element (0, ..., 0) is the lowest address
    low = arr[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in arr.strides)]
    buf = np.lib.stride_tricks.as_strided(low, shape=(arg.span,), strides=(arg.dtype.itemsize,),
                                          writeable=arr.flags.writeable)
    # numba's simulator copies every argument back after a kernel: a read-only one (an
    # np.broadcast_to view, setflags(write=False)) could not take it, so it gets a copy
    return buf if arr.flags.writeable else buf.copy()


def bits_view(arr):
    """bfloat16 arrays as their bits (uint16), the element type kernels take them as."""
    return arr.view(np.uint16) if dtypes.is_bfloat16(arr.dtype) else arr


def cupy_module():
    return sys.modules.get("cupy") or _import_cupy()


def _import_cupy():
    try:
        import cupy
        return cupy
    except ImportError:
        return None
