"""Where the host time of one small numbamr call goes, part by part (each part timed alone
over many back-to-back repetitions; the GPU time per kernel beside it, timed for kernels
queued behind a spin kernel, see launch_floor.py: a launch queue that fills up makes the
host wait for the GPU).

The first table is one row per kind of call (CuPy, out=, stream=, torch, a
__cuda_array_interface__ object, a numba device array, several outputs, two kernels with
temporaries between them): the whole call, its key (runtime.callplan.fast_key) and its
generated path alone, each timed in bursts issued behind a spin kernel (so the GPU's pace
never shows), beside torch's own eager softmax on the same tensor.

    python bench/call_parts.py              # on a GPU machine, with CuPy (and torch)
    python bench/call_parts.py --profile    # and cProfile of 20,000 whole calls
"""
import cProfile
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import numbamr as nm  # noqa: E402
from numbamr.runtime import binary, cudadriver, launch  # noqa: E402
from launch_floor import gpu_us, host_us  # noqa: E402  (calls timed behind a spin kernel)
from numbamr.runtime.callplan import fast_key  # noqa: E402


@nm.jit
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def per_call_us(fn, n=2000, repeats=7, sync=True):
    """Median host microseconds per call over ``repeats`` bursts of ``n`` calls."""
    for _ in range(200):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
        if sync:
            cupy.cuda.runtime.deviceSynchronize()
    return statistics.median(samples) * 1e6


def stats(x):
    return x.max(axis=-1), x.sum(axis=-1)


def column_stats(x):
    """Batch-norm statistics: on a tall array, a kernel of partials and one that finishes
    them, three temporaries between them, two outputs."""
    y = x.astype(np.float32)
    mu = y.mean(axis=0)
    d = y - mu
    return mu, (d * d).mean(axis=0)


class CAI:
    """An array known only by its __cuda_array_interface__."""

    def __init__(self, a):
        self._a = a

    @property
    def __cuda_array_interface__(self):
        return self._a.__cuda_array_interface__


def call_kinds(x):
    """(name, jitted function, args, kwargs) of each kind of call on ``x``'s values."""
    fn, several = nm.jit(softmax.fn), nm.jit(stats)
    kinds = [("cupy", fn, (x,), {}),
             ("cupy out=", fn, (x,), {"out": cupy.empty_like(x)}),
             ("cupy stream=", fn, (x,), {"stream": cupy.cuda.Stream(non_blocking=True)}),
             ("CAI object", fn, (CAI(x),), {})]
    try:
        from numba import cuda
        kinds.append(("numba device array", fn, (cuda.to_device(x.get()),), {}))
    except ImportError:
        pass
    kinds.append(("several outputs (cupy)", several, (x,), {}))
    try:
        import torch
    except ImportError:
        return kinds
    xt = torch.as_tensor(x, device="cuda")
    kinds += [("torch", fn, (xt,), {}), ("torch out=", fn, (xt,), {"out": torch.empty_like(xt)}),
              ("torch stream=", fn, (xt,), {"stream": torch.cuda.Stream()}),
              ("several outputs (torch)", several, (xt,), {})]
    tall = torch.randn(16384, 128, dtype=torch.bfloat16, device="cuda")
    kinds.append(("column statistics, 2 kernels (torch)", nm.jit(column_stats), (tall,), {}))
    return kinds


def path_table(x):
    """Host microseconds per call of each kind: whole call, key, generated path."""
    rows = []
    for name, fn, args, kwargs in call_kinds(x):
        fn(*args, **kwargs)
        fn(*args, **kwargs)
        key = fast_key(args, kwargs)
        path = fn._fast.get(key)
        if path is None:
            rows.append((name, host_us(lambda: fn(*args, **kwargs), spin_ms=2), None, None))
            continue
        whole = host_us(lambda: fn(*args, **kwargs), spin_ms=2)
        key_us = host_us(lambda: fast_key(args, kwargs), spin_ms=2)
        path_us = host_us(lambda: path(args, kwargs), spin_ms=2)
        again = host_us(lambda: fn(*args, **kwargs), spin_ms=2)     # drift shows as a gap
        rows.append((name, min(whole, again), key_us, path_us))
        print(f"  {name}: whole {whole:.2f} then {again:.2f} us", flush=True)
    try:
        import torch
        xt = torch.as_tensor(x, device="cuda")
        rows.append(("torch.softmax (eager)", host_us(lambda: torch.softmax(xt, -1),
                                                      spin_ms=2), None, None))
    except ImportError:
        pass
    print(f"{'call':38s} {'whole us':>9s} {'key us':>8s} {'path us':>8s}")
    for name, whole, key, path in rows:
        cells = [f"{v:8.2f}" if v is not None else f"{'-':>8s}" for v in (key, path)]
        print(f"{name:38s} {whole:9.2f} {cells[0]} {cells[1]}")
    whole = {name: w for name, w, _, _ in rows}
    if "torch" in whole and "torch.softmax (eager)" in whole:
        print(f"torch call / torch.softmax: {whole['torch'] / whole['torch.softmax (eager)']:.2f}")
    print(f"cupy out= / cupy: {whole['cupy out='] / whole['cupy']:.2f}")
    print()


def main():
    x = cupy.random.standard_normal((4, 1024), dtype=cupy.float32)
    path_table(x)
    softmax(x)
    softmax(x)
    cupy.cuda.runtime.deviceSynchronize()
    compiled = next(iter(softmax._cache.values()))
    dl = compiled.launchers[0].launch
    out = cupy.empty((4, 1024), cupy.float32)
    ptrs = [x.data.ptr, out.data.ptr][:len(compiled.launchers[0].params)]
    stream = cupy.cuda.get_current_stream().ptr
    rows = [
        ("whole call (generated path)", lambda: softmax(x)),
        ("whole call, bursts of 100", None),
        ("fast_key(args)", lambda: fast_key((x,))),
        ("cupy.ndarray(shape, dtype)", lambda: cupy.ndarray((4, 1024), np.float32)),
        ("get_current_stream().ptr", lambda: cupy.cuda.get_current_stream().ptr),
        ("x.data.ptr", lambda: x.data.ptr),
        ("driver launch, numba's handle", lambda: dl(ptrs, stream)),
        ("driver launch through CuPy's binding (what the paths call)",
         lambda: cupy.cuda.driver.launchKernel(*dl.raw_head, stream, dl.params.value, 0)),
    ]
    # the same cubin loaded through cuModuleLoadData (a CUfunction, not a library CUkernel)
    library = next(iter(compiled.launchers[0].kernel.overloads.values()))._codelibrary \
        if compiled.launchers[0].kernel is not None else None
    if library is not None:
        image = binary.image_bytes(library.get_cubin())
        handle = cudadriver.load_function(image, library._entry_name)
        dl2 = launch._DriverLaunch(handle, len(ptrs), compiled.launchers[0].grid,
                                   compiled.launchers[0].block, compiled.launchers[0].shared)
        rows.append(("driver launch, module handle", lambda: dl2(ptrs, stream)))
        rows.append(("  its GPU time per kernel", ("gpu", lambda: dl2(ptrs, stream))))
    # the smallest kernel there is: the launch cost alone, without the softmax's GPU time
    tiny = nm.jit(lambda x: x + 1)
    one = cupy.zeros(1, cupy.float32)
    tiny(one)
    tl = next(iter(tiny._cache.values())).launchers[0]
    tiny_ptrs = [one.data.ptr, cupy.empty(1, cupy.float32).data.ptr]
    rows.append(("driver launch, 1-element kernel", lambda: tl.launch(tiny_ptrs, stream)))
    rows.append(("  its GPU time per kernel", ("gpu", lambda: tl.launch(tiny_ptrs, stream))))
    rows.append(("ctypes call (cuCtxGetCurrent)", lambda: cudadriver.current_context()))
    try:
        import torch
        xt = torch.as_tensor(x, device="cuda")
        rows.append(("torch.softmax", lambda: torch.softmax(xt, -1)))
        rows.append(("torch.empty", lambda: torch.empty((4, 1024), device="cuda")))
        dev = torch.device("cuda", 0)
        rows.append(("torch.empty(shape, dtype=, device=)",
                     lambda: torch.empty((4, 1024), dtype=torch.float32, device=dev)))
        rows.append(("t.new_empty(shape)", lambda: xt.new_empty((4, 1024))))
        rows.append(("t.data_ptr()", lambda: xt.data_ptr()))
        raw = torch._C._cuda_getCurrentRawStream
        rows.append(("torch._C._cuda_getCurrentRawStream(0)", lambda: raw(0)))
        rows.append(("fast_key((tensor,))", lambda: fast_key((xt,))))
        rows.append(("  torch.softmax GPU time per kernel",
                     ("gpu", lambda: torch.softmax(xt, -1))))
    except ImportError:
        pass
    rows.append(("  numbamr GPU time per call", ("gpu", lambda: softmax(x))))
    print(f"kernel: grid {compiled.launchers[0].grid}, block {compiled.launchers[0].block}, "
          f"shared {compiled.launchers[0].shared}, handle {dl.head[0].value:#x}")
    for name, fn in rows:
        if fn is None:
            t = per_call_us(lambda: softmax(x), n=100, repeats=50)
        elif isinstance(fn, tuple):
            t = gpu_us(fn[1])
        else:
            t = per_call_us(fn)
        print(f"{name:40s} {t:8.2f} us")
    if "--profile" in sys.argv[1:]:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(20000):
            softmax(x)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        _profile_torch(x)


def _profile_torch(x):
    """cProfile of 20,000 whole calls with a torch tensor in."""
    try:
        import torch
    except ImportError:
        return
    xt = torch.as_tensor(x, device="cuda")
    softmax(xt)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        softmax(xt)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
