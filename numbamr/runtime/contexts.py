"""Several GPUs: which device a thread is on, each device's primary context and compute
capability, and a scope in which a device's context is current (kernels are compiled,
loaded and launched per device)."""
import ctypes

from ..errors import ArgumentError
from . import cudadriver
from .device import gpu_count


def several_gpus():
    """Whether this process sees more than one GPU (then every launch checks that its
    device's context is current)."""
    return gpu_count() > 1


def current_device():
    """The ordinal of the calling thread's current device (0 on a host with one GPU)."""
    if not several_gpus():
        return 0
    found = cudadriver.current_device()
    return found[0] if found is not None else 0


_PRIMARY = {}


_CC = {}


def primary_context(device):
    """The primary context of GPU ``device`` (what CuPy, torch and numba use), retained once
    for the life of the process."""
    ctx = _PRIMARY.get(device)
    if ctx is None:
        lib = cudadriver.driver()
        handle, dev = ctypes.c_void_p(), ctypes.c_int()
        err = lib.cuInit(0) or lib.cuDeviceGet(ctypes.byref(dev), device) or \
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev)
        if err != 0:
            raise ArgumentError(f"GPU {device}: its context could not be made "
                                f"({cudadriver.error_text(err)})")
        ctx = _PRIMARY[device] = handle.value
    return ctx


def device_cc(device):
    """GPU ``device``'s compute capability (major, minor)."""
    cc = _CC.get(device)
    if cc is None:
        lib = cudadriver.driver()
        major, minor, dev = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        lib.cuInit(0)
        lib.cuDeviceGet(ctypes.byref(dev), device)
        lib.cuDeviceGetAttribute(ctypes.byref(major),
                                 cudadriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor),
                                 cudadriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        cc = _CC[device] = (major.value, minor.value)
    return cc


class device_scope:
    """Within it, GPU ``device``'s context is current (kernels compiled and loaded there,
    outputs allocated there, launches made there); the thread's own context is restored
    after. Nothing is changed on a host with one GPU, or for ``None`` (the simulator)."""

    def __init__(self, device):
        self.device, self.prev = device, None

    def __enter__(self):
        if self.device is None or not several_gpus():
            return self
        want = primary_context(self.device)
        prev = cudadriver.current_context().value
        if prev != want:
            self.prev = (prev,)
            _set_context(want)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            _set_context(self.prev[0])
            self.prev = None


def _set_context(handle):
    err = cudadriver.driver().cuCtxSetCurrent(ctypes.c_void_p(handle))
    if err != 0:
        raise RuntimeError(f"cuCtxSetCurrent failed with {cudadriver.error_text(err)}")
