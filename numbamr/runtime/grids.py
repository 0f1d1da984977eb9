"""What a kernel's launch asks of the driver beside its grid: dynamic shared memory above
48 KB, clusters of a split row's blocks, that a split row's blocks fit on the GPU at once,
and a persistent kernel's grid (as many clusters as the GPU holds at once)."""
import ctypes

from ..errors import ArgumentError
from ..experimental import current_knobs
from . import cudadriver
from .device import CLUSTER_ARCH, arch, clusters_available


CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


CU_DEVICE_ATTRIBUTE_SM_COUNT = 16


def allow_dynamic_shared(handle, nbytes):
    """Raise a kernel's dynamic shared memory limit to ``nbytes`` (static and dynamic shared
    memory above 48 KB in all must be asked for)."""
    lib = cudadriver.driver()
    err = lib.cuFuncSetAttribute(ctypes.c_void_p(int(handle)),
                                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 ctypes.c_int(nbytes))
    if err != 0:                        # a CUkernel handle: set it for the current device
        dev = ctypes.c_int(0)
        lib.cuCtxGetDevice(ctypes.byref(dev))
        err = lib.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       ctypes.c_int(nbytes), ctypes.c_void_p(int(handle)),
                                       dev)
    if err != 0:
        raise RuntimeError(f"could not allow {nbytes} bytes of dynamic shared memory "
                           f"({cudadriver.error_text(err)})")


def check_coresident(handle, lk):
    """The blocks of a split row wait for each other: refuse a kernel whose row has more
    blocks than the GPU holds at once (it would never finish)."""
    lib = cudadriver.driver()
    per_sm, dev, sms = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    err = lib.cuCtxGetDevice(ctypes.byref(dev)) or \
        lib.cuDeviceGetAttribute(ctypes.byref(sms), CU_DEVICE_ATTRIBUTE_SM_COUNT, dev)
    if err != 0:
        raise RuntimeError(f"kernel {lk.name}: could not read the GPU's multiprocessor count "
                           f"({cudadriver.error_text(err)})")
    if lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(per_sm), ctypes.c_void_p(handle), ctypes.c_int(lk.block),
            ctypes.c_size_t(lk.program.dynamic_shared)) != 0:
        per_sm.value = 1        # a handle the query does not take: one block each, surely
    if per_sm.value * sms.value < lk.layout.split:
        raise ArgumentError(f"kernel {lk.name}: its rows are split across {lk.layout.split} "
                            f"blocks that must run at once, but this GPU holds only "
                            f"{per_sm.value * sms.value} of them: use a smaller split=")


CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 11      # then HEIGHT 12, DEPTH 13


CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14


PORTABLE_CLUSTER = 8


def make_cluster(handle, lk):
    """Launch ``handle`` in clusters of a split row's blocks (the hardware starts a cluster's
    blocks together, so they never wait on a block that has not started)."""
    cc = arch()
    if not clusters_available(cc):
        raise ArgumentError(f"kernel {lk.name}: option cluster=1 needs a GPU of compute "
                            f"capability {'%d.%d' % CLUSTER_ARCH} or newer (this one: "
                            f"{'none' if cc is None else '%d.%d' % cc})")
    lib = cudadriver.driver()
    split = lk.layout.split
    attrs = [(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)] \
        if split > PORTABLE_CLUSTER else []
    attrs += [(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, split),
              (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH + 1, 1),
              (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH + 2, 1)]
    for attr, value in attrs:
        err = lib.cuFuncSetAttribute(ctypes.c_void_p(handle), ctypes.c_int(attr),
                                     ctypes.c_int(value))
        if err != 0:
            raise ArgumentError(f"kernel {lk.name}: the driver refused clusters of {split} "
                                f"blocks ({cudadriver.error_text(err)} setting attribute "
                                f"{attr}): use cluster=0 or a smaller split=")


CU_OCCUPANCY_QUERY_GRID = 64     # clusters of the launch the occupancy query describes


def persistent_grid(handle, lk, shared):
    """A persistent kernel's grid: as many of its clusters as the GPU holds at once (each
    loops over its share of the rows), no more than it has rows nor than the study knob
    ``Knobs.persistent_max_clusters`` allows."""
    lib = cudadriver.driver()
    split = lk.layout.split
    config = cudadriver.LaunchConfig(grid=(split * CU_OCCUPANCY_QUERY_GRID, 1, 1),
                                     block=(lk.block, 1, 1), shared=shared, nattrs=0)
    fit = ctypes.c_int()
    err = lib.cuOccupancyMaxActiveClusters(ctypes.byref(fit), ctypes.c_void_p(handle),
                                           ctypes.byref(config))
    if err != 0 or fit.value < 1:
        why = cudadriver.error_text(err) if err else "none fits"
        raise ArgumentError(f"kernel {lk.name}: no cluster of its {split} blocks fits on this "
                            f"GPU ({why}): use persistent=0")
    cap = current_knobs().persistent_max_clusters
    return min(fit.value, lk.grid // split, cap or fit.value) * split
