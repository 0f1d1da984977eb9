"""``out=``: the arrays a call writes its outputs into, checked against its inputs (where
they live, that they overlap none) and against the outputs (number, shape, dtype)."""
from .errors import ArgumentError
from .runtime import arrays


def out_arrays(out, leaves, ctx):
    """The out= arrays as ArrayArgs, on the side the kernels run, not overlapping inputs."""
    items = list(out.values()) if isinstance(out, dict) else \
        list(out) if isinstance(out, (tuple, list)) else [out]
    result = []
    for i, a in enumerate(items):
        info = arrays.inspect_array(a, f"out[{i}]")
        if info is None:
            raise ArgumentError(f"out[{i}] is a {type(a).__name__}, not an array")
        if ctx.simulator and info.where != arrays.HOST:
            raise ArgumentError(f"out[{i}] is a device array, but kernels run in numba's CPU "
                                "simulator: pass NumPy arrays")
        if not ctx.simulator and info.where != arrays.DEVICE:
            raise ArgumentError(f"out[{i}] is a host array, but the kernels run on the GPU: "
                                "pass device arrays (e.g. CuPy) as out=")
        if not ctx.simulator and info.device != ctx.device:
            raise ArgumentError(f"out[{i}] is on device {info.device}, but the call runs on "
                                f"device {ctx.device}, where its inputs are")
        if any(s == 0 and n > 1 for s, n in zip(info.strides, info.shape)):
            raise ArgumentError(f"out[{i}] is a broadcast view (zero stride): its elements "
                                "overlap each other")
        lo, hi = info.base_ptr, info.base_ptr + info.span * info.dtype.itemsize
        for leaf in leaves:
            if leaf.array is None:
                continue
            b = leaf.array
            blo, bhi = b.base_ptr, b.base_ptr + b.span * b.dtype.itemsize
            if lo < bhi and blo < hi:
                raise ArgumentError(f"out[{i}] overlaps the memory of input {leaf.name!r}")
        result.append(info)
    return result


def check_out(outs, specs):
    """out= must match the outputs (``specs``: (dtype, shape) each) in number, shape, dtype."""
    if len(outs) != len(specs):
        raise ArgumentError(f"out= has {len(outs)} array(s) but the function returns "
                            f"{len(specs)}")
    for i, (a, (dt, shape)) in enumerate(zip(outs, specs)):
        if tuple(a.shape) != tuple(shape):
            raise ArgumentError(f"out[{i}] has shape {tuple(a.shape)}, the output has shape "
                                f"{tuple(shape)}")
        if a.dtype != dt:
            raise ArgumentError(f"out[{i}] has dtype {a.dtype}, the output has dtype {dt}")
