"""Launching compiled kernels: argument buffers, output allocation, result conversion."""
import numpy as np

from ..errors import ArgumentError
from . import arrays
from .compile import jit_kernel


class Launcher:
    """One kernel ready to launch: the numba kernel, its grid, and where its args come from."""

    def __init__(self, lowered_kernel, simulator):
        lk = lowered_kernel
        source = lk.sim_source if simulator else lk.source
        self.kernel, self.path = jit_kernel(source, lk.name, simulator, lk.block)
        self.grid, self.block = lk.grid, lk.block
        self.params = [(kind, pos) for _, kind, _, pos in lk.program.params]


def make_launchers(lowered, simulator):
    return [Launcher(k, simulator) for k in lowered.kernels]


class CallContext:
    """Where a call's arrays live and what kind of arrays the caller gets back."""

    def __init__(self, simulator, result_kind):
        self.simulator, self.result_kind = simulator, result_kind


def prepare_leaves(leaves, simulator):
    """Move host arrays to the device when running on a GPU; returns (leaves, context)."""
    arrs = [l for l in leaves if l.array is not None]
    kinds = {l.array.kind for l in arrs}
    if simulator:
        for l in arrs:
            if l.array.where != arrays.HOST:
                raise ArgumentError(f"argument {l.name!r} is a device array, but kernels run in "
                                    "numba's CPU simulator (NUMBA_ENABLE_CUDASIM=1): pass NumPy "
                                    "arrays")
        return leaves, CallContext(True, "numpy")
    devices = {l.array.device for l in arrs if l.array.where == arrays.DEVICE}
    if len(devices) > 1:
        raise ArgumentError("arrays on different devices: " + ", ".join(
            f"{l.name!r} on device {l.array.device}" for l in arrs
            if l.array.where == arrays.DEVICE))
    result_kind = "numpy" if kinds <= {"numpy"} else ("torch" if "torch" in kinds else "cupy")
    cp = arrays.cupy_module()
    for l in arrs:
        if l.array.where == arrays.HOST:
            if cp is not None:
                dev = cp.asarray(np.ascontiguousarray(l.array.obj))
            else:
                from numba import cuda
                dev = cuda.to_device(np.ascontiguousarray(l.array.obj))
            l.array = arrays.inspect_array(dev, l.name)
    return leaves, CallContext(False, result_kind)


def _alloc(ctx, dtype, shape):
    if ctx.simulator:
        return np.empty(shape, dtype)
    cp = arrays.cupy_module()
    if cp is not None:
        return cp.empty(shape, dtype)
    from numba import cuda
    return cuda.device_array(shape, dtype)


def _flat(ctx, arr):
    if ctx.simulator:
        return arr.reshape(-1)
    if hasattr(arr, "reshape") and type(arr).__module__.startswith("cupy"):
        return arr.reshape(-1)
    cai = arr.__cuda_array_interface__
    n = int(np.prod(cai["shape"], dtype=np.int64))
    return arrays.DeviceSpan(cai["data"][0], n, np.dtype(cai["typestr"]), arr)


def _input_buffer(ctx, arg):
    return arrays.host_buffer(arg) if ctx.simulator else arrays.device_buffer(arg)


def run(compiled, leaves, ctx):
    lowered = compiled.lowered
    outs = [_alloc(ctx, dt, shape) for dt, shape in lowered.out_specs]
    for launcher in compiled.launchers:
        if launcher.grid == 0 or any(int(np.prod(s)) == 0 for _, s in lowered.out_specs):
            continue
        args = []
        for kind, pos in launcher.params:
            if kind == "in":
                args.append(_input_buffer(ctx, leaves[pos].array))
            else:
                args.append(_flat(ctx, outs[pos]))
        launcher.kernel[launcher.grid, launcher.block](*args)
    return _structure(lowered.structure, [_convert(ctx, o) for o in outs])


def _convert(ctx, out):
    if ctx.result_kind == "numpy":
        if not isinstance(out, np.ndarray):
            out = out.get() if hasattr(out, "get") else out.copy_to_host()
        return out[()] if out.ndim == 0 else out
    if ctx.result_kind == "torch":
        import torch
        return torch.from_dlpack(out)
    return out


def _structure(structure, outs):
    kind, meta = structure
    if kind == "single":
        return outs[0]
    if kind == "dict":
        return dict(zip(meta, outs))
    return tuple(outs) if kind == "tuple" else list(outs)
