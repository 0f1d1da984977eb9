"""Shared by the examples: pick GPU or simulator, make arrays, report the check."""
import os
import sys

from numbamr.runtime.device import use_simulator_if_no_gpu

_ASKED = os.environ.get("NUMBA_ENABLE_CUDASIM", "") != ""
SIMULATOR = use_simulator_if_no_gpu()     # before numba is imported
if SIMULATOR:
    sys.setswitchinterval(1e-4)           # the simulator runs one Python thread a GPU thread
if SIMULATOR and not _ASKED:
    print("numbamr: no CUDA GPU found, so kernels run in numba's CPU simulator "
          "(NUMBA_ENABLE_CUDASIM=1), at a small size", file=sys.stderr)

import numpy as np  # noqa: E402


def where():
    return "numba's CPU simulator" if SIMULATOR else "the GPU"


def to_device(*arrays):
    if SIMULATOR:
        return arrays
    import cupy
    return tuple(cupy.asarray(a) for a in arrays)


def to_host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def report(name, got, ref, kernels):
    got, ref = to_host(got).astype(np.float64), np.asarray(ref, np.float64)
    err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    ok = err < 1e-5
    print(f"{name} on {where()}: {kernels} kernel(s), max relative error vs float64 NumPy "
          f"{err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return ok
