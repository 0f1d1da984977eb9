"""The host cost of one launch, apart from the GPU's pace.

Back-to-back launches of tiny kernels fill the launch queue, and then the host waits for the
GPU: a burst's host time per call is then the GPU's time per kernel, not the host's cost.
Here each burst of calls is issued while a spin kernel keeps the GPU busy (so the queue
never drains or fills), and the GPU time per tiny kernel is timed with events around kernels
that were all queued behind the spin.

    python bench/launch_floor.py
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import numbamr as nm  # noqa: E402

SPIN = cupy.RawKernel(r'''
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}''', "spin")
ONE = cupy.RawKernel(r'''
extern "C" __global__ void one(float* x) { x[0] += 1.0f; }''', "one")


def busy(ms):
    SPIN((1,), (1,), (np.int64(ms * 2.0e6),))      # ~2 GHz clock


def host_us(fn, n=100, repeats=30, spin_ms=None):
    """Median host microseconds per call over bursts of ``n`` calls; with ``spin_ms`` each
    burst is issued behind a spin kernel of that length."""
    for _ in range(50):
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    samples = []
    for _ in range(repeats):
        if spin_ms:
            busy(spin_ms)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
        cupy.cuda.runtime.deviceSynchronize()
    return statistics.median(samples) * 1e6


def gpu_us(fn, n=500):
    """GPU microseconds per call, for calls all queued behind a spin kernel."""
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    fn()
    cupy.cuda.runtime.deviceSynchronize()
    busy(20)
    start.record()
    for _ in range(n):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) * 1e3 / n


@nm.jit
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    x = cupy.random.standard_normal((4, 1024), dtype=cupy.float32)
    softmax(x)
    tiny = nm.jit(lambda v: v + 1)
    one = cupy.zeros(1, cupy.float32)
    tiny(one)
    tl = next(iter(tiny._cache.values())).launchers[0]
    ptrs = [one.data.ptr, cupy.empty(1, cupy.float32).data.ptr]
    stream = cupy.cuda.get_current_stream().ptr
    rows = [("numbamr softmax(x), 4 x 1024", lambda: softmax(x)),
            ("numbamr driver launch, 1-element kernel", lambda: tl.launch(ptrs, stream)),
            ("cupy RawKernel, 1 thread", lambda: ONE((1,), (1,), (one,))),
            ("cupy.ndarray((4, 1024), float32)", lambda: cupy.ndarray((4, 1024), np.float32))]
    try:
        import torch
        xt = torch.as_tensor(x, device="cuda")
        ot = torch.zeros(1, device="cuda")
        ct = torch.compile(lambda t: torch.softmax(t, -1))
        ct(xt)
        rows += [("torch.softmax", lambda: torch.softmax(xt, -1)),
                 ("torch.compile softmax", lambda: ct(xt)),
                 ("torch add_ on 1 element", lambda: ot.add_(1))]
    except ImportError:
        pass
    print(f"{'':42s} {'idle GPU':>9s} {'busy GPU':>9s} {'GPU/kernel':>10s}   (us)")
    for name, fn in rows:
        idle = host_us(fn)
        hidden = host_us(fn, spin_ms=5)
        g = gpu_us(fn) if "ndarray" not in name else float("nan")
        print(f"{name:42s} {idle:9.2f} {hidden:9.2f} {g:10.2f}", flush=True)


if __name__ == "__main__":
    main()
