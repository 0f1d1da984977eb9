"""The CUDA driver library through ctypes, for the few calls numbamr makes itself (launching,
loading cached binaries): these are the cheapest calls Python can make."""
import ctypes

_libcuda = None
LAUNCH = None     # cuLaunchKernel, called with the GIL held (see runtime.launch)
LAUNCH_EX = None  # cuLaunchKernelEx, likewise


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id and a 64-byte value (a union; its first int for the
    attributes numbamr sets)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: grid, block, shared bytes, stream and attributes of one launch."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("nattrs", ctypes.c_uint)]


CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


def driver():
    global _libcuda, LAUNCH, LAUNCH_EX
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
        launch = ctypes.PyDLL("libcuda.so.1").cuLaunchKernel
        launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        launch.restype = ctypes.c_int
        launch_ex = getattr(ctypes.PyDLL("libcuda.so.1"), "cuLaunchKernelEx", None)
        if launch_ex is not None:       # drivers before CUDA 12 have none
            launch_ex.argtypes = [ctypes.c_void_p] * 4
            launch_ex.restype = ctypes.c_int
        LAUNCH, LAUNCH_EX = launch, launch_ex
    return _libcuda


def error_text(err):
    """``CUDA error <n> (<CUDA_ERROR_NAME>)``: the driver's name for an error code."""
    name = ctypes.c_char_p()
    try:
        ok = driver().cuGetErrorName(ctypes.c_int(err), ctypes.byref(name)) == 0
    except (OSError, AttributeError):
        ok = False
    return f"CUDA error {err}" + (f" ({name.value.decode()})" if ok and name.value else "")


def memset32(pointer, value, count, stream):
    """cuMemsetD32Async: ``count`` 32-bit words at ``pointer`` set to ``value`` on
    ``stream``."""
    err = driver().cuMemsetD32Async(ctypes.c_uint64(pointer), ctypes.c_uint(value),
                                    ctypes.c_size_t(count), ctypes.c_void_p(stream))
    if err != 0:
        raise RuntimeError(f"cuMemsetD32Async failed with {error_text(err)}")


def current_context():
    """The calling thread's current context (a ctypes pointer; NULL when there is none)."""
    ctx = ctypes.c_void_p()
    driver().cuCtxGetCurrent(ctypes.byref(ctx))
    return ctx


CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def ensure_context():
    """Make device 0's primary context current when the thread has none (what numba and
    CuPy would pick); True if a context is current afterwards."""
    if current_context().value:
        return True
    lib = driver()
    ctx = ctypes.c_void_p()
    if lib.cuInit(0) != 0 or lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) != 0:
        return False
    return lib.cuCtxSetCurrent(ctx) == 0


def current_device():
    """(ordinal, (major, minor)) of the current context's device, or None without one."""
    lib = driver()
    dev = ctypes.c_int(-1)
    if not ensure_context() or lib.cuCtxGetDevice(ctypes.byref(dev)) != 0:
        return None
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.cuDeviceGetAttribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                             dev)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                             dev)
    return dev.value, (major.value, minor.value)


def load_function(image, entry):
    """Load a cubin ``image`` into the current context; the handle (int) of its kernel
    ``entry``, or None if the driver refuses it (then the caller compiles anew)."""
    lib = driver()
    module = ctypes.c_void_p()
    if lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)) != 0:
        return None
    func = ctypes.c_void_p()
    if lib.cuModuleGetFunction(ctypes.byref(func), module, entry.encode()) != 0:
        lib.cuModuleUnload(module)
        return None
    return func.value


def stream_synchronize(stream):
    """Wait until everything queued on ``stream`` (a raw handle; 0: the legacy default
    stream) has finished."""
    err = driver().cuStreamSynchronize(ctypes.c_void_p(stream))
    if err != 0:
        raise RuntimeError(f"cuStreamSynchronize failed with {error_text(err)}")


def device_name():
    """The current device's name ('' without a GPU or a driver)."""
    try:
        found = current_device()
    except OSError:
        return ""
    buf = ctypes.create_string_buffer(256)
    if found is None or driver().cuDeviceGetName(buf, 256, found[0]) != 0:
        return ""
    return buf.value.decode()
