"""Where a call runs: the simulator or a GPU (the device its arrays are on, host arrays
copied there), the stream it launches on (the one named, else the current one of the
arrays' library) and the kind of arrays it returns."""
import numpy as np

from ..errors import ArgumentError
from . import arrays
from .contexts import current_device, device_scope
from .device import gpu_count


class CallContext:
    """Where a call's arrays live (the simulator, or a GPU's ordinal), which stream it uses,
    whether the call named that stream, and what kind of arrays it returns."""

    def __init__(self, simulator, result_kind, stream=0, device=0, stream_given=False):
        self.simulator, self.result_kind, self.stream = simulator, result_kind, stream
        self.device, self.stream_given = device, stream_given


def _current_stream(kind, device):
    """The current stream of the result's kind (torch's or CuPy's) on ``device``."""
    if kind == "torch":
        import torch
        return torch.cuda.current_stream(device).cuda_stream
    cp = arrays.cupy_module()
    if cp is None:
        return 0
    try:
        return cp.cuda.get_current_stream(device).ptr
    except TypeError:               # a CuPy whose get_current_stream takes no device
        return cp.cuda.get_current_stream().ptr


def stream_handle(stream):
    """A raw CUstream handle from a CuPy stream, a torch stream, or an int."""
    if stream is None:
        return None
    if isinstance(stream, (int, np.integer)):
        return int(stream)
    for attr in ("ptr", "cuda_stream", "handle"):
        h = getattr(stream, attr, None)
        if h is not None:
            return int(h) if not hasattr(h, "value") else int(h.value)
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    raise ArgumentError(f"stream= must be a CuPy stream, a torch stream or a raw handle, got "
                        f"{type(stream).__name__}")


def prepare_leaves(leaves, simulator, stream=None):
    """Move host arrays to the device when running on a GPU; returns (leaves, context)."""
    arrs = [leaf for leaf in leaves if leaf.array is not None]
    kinds = {leaf.array.kind for leaf in arrs}
    if simulator:
        for leaf in arrs:
            if leaf.array.where != arrays.HOST:
                raise ArgumentError(f"argument {leaf.name!r} is a device array, but kernels run in "
                                    "numba's CPU simulator (NUMBA_ENABLE_CUDASIM=1): pass NumPy "
                                    "arrays")
        return leaves, CallContext(True, "numpy")
    if gpu_count() == 0:
        raise ArgumentError("there is no CUDA GPU here: to run the kernels in numba's CPU "
                            "simulator (NumPy in, NumPy out; small sizes, it is slow), set "
                            "NUMBA_ENABLE_CUDASIM=1 before numbamr is imported")
    devices = {leaf.array.device for leaf in arrs if leaf.array.where == arrays.DEVICE}
    if len(devices) > 1:
        raise ArgumentError("arrays on different devices: " + ", ".join(
            f"{leaf.name!r} on device {leaf.array.device}" for leaf in arrs
            if leaf.array.where == arrays.DEVICE))
    device = devices.pop() if devices else current_device()
    result_kind = "numpy" if kinds <= {"numpy"} else ("torch" if "torch" in kinds else "cupy")
    cp = arrays.cupy_module()
    with device_scope(device):
        for leaf in arrs:
            if leaf.array.where == arrays.HOST:
                if cp is None:
                    raise ArgumentError("running on a GPU needs CuPy for NumPy inputs: "
                                        "pip install cupy-cuda13x")
                leaf.array = arrays.to_device(leaf.array, cp)
    s = stream_handle(stream)
    ctx = CallContext(False, result_kind,
                      _current_stream(result_kind, device) if s is None else s, device,
                      s is not None)
    return leaves, ctx
