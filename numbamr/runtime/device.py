"""Is there a CUDA GPU here? Answered through the driver library, without importing numba."""
import ctypes
import functools
import os


@functools.lru_cache(maxsize=1)
def gpu_count():
    """Number of CUDA devices the driver sees (0 when there is no driver or no device)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 0
    if lib.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def use_simulator_if_no_gpu():
    """Select numba's CPU simulator when no GPU is present; returns True if it did.

    Must run before ``numba.cuda`` is first imported (numba reads the variable then).
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM") not in (None, ""):
        return os.environ["NUMBA_ENABLE_CUDASIM"] not in ("0",)
    if gpu_count() == 0:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        return True
    return False


@functools.lru_cache(maxsize=1)
def arch():
    """The current GPU's compute capability (major, minor), or None without a GPU."""
    if gpu_count() == 0:
        return None
    from .cudadriver import current_device
    found = current_device()
    return found[1] if found is not None else None


NAN_MINMAX_ARCH = (8, 0)           # max.NaN / min.NaN: sm_80 and newer
L2_POLICY_ARCH = (8, 0)            # loads under an L2 eviction policy: sm_80 and newer
CLUSTER_ARCH = (9, 0)              # thread-block clusters: sm_90 and newer
DEPENDENT_LAUNCH_ARCH = (9, 0)     # programmatic dependent launch: sm_90 and newer


def capable(cc, least):
    """Is compute capability ``cc`` (None: no GPU) ``least`` or newer?"""
    return cc is not None and tuple(cc) >= least


def clusters_available(cc=None):
    """Can this GPU (or one of compute capability ``cc``) launch thread-block clusters?"""
    return capable(arch() if cc is None else cc, CLUSTER_ARCH)


def dependent_launches(cc):
    """Are kernels for a GPU of compute capability ``cc`` launched as programmatic
    dependents of the stream's previous kernel (each waits for it in the kernel, so its
    launch overlaps the previous kernel's last blocks)?"""
    return capable(cc, DEPENDENT_LAUNCH_ARCH)
