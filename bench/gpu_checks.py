"""GPU checks that are measurements, not tests: first call in a new process (disk cache),
and memory over many calls (leaks).

    python bench/gpu_checks.py            # prints a small table; run on a GPU machine
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import sys, time
sys.path.insert(0, {root!r})
import cupy, numpy as np
import numbamr as nm

@nm.jit
def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b

x = cupy.random.standard_normal((4096, 1024), dtype=cupy.float32)
w = cupy.ones(1024, cupy.float32); b = cupy.zeros(1024, cupy.float32)
cupy.cuda.runtime.deviceSynchronize()
t = time.perf_counter()
layernorm(x, w, b)
cupy.cuda.runtime.deviceSynchronize()
print(f"{{(time.perf_counter() - t) * 1e3:.1f}} {{'numba' in sys.modules}}")
"""


def first_call_ms():
    """(cold first call, first call of an already compiled function), each in a new process."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBAMR_CACHE_DIR=cache)
        code = CHILD.format(root=ROOT)
        runs = []
        for _ in range(3):
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                sys.exit(f"the first-call child failed:\n{proc.stderr[-3000:]}")
            ms, numba_imported = proc.stdout.split()[-2:]
            runs.append((float(ms), numba_imported == "True"))
    return runs[0], min(runs[1:])


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def leak_check(calls=10000):
    import cupy
    import numpy as np
    import numbamr as nm

    @nm.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    xs = [cupy.random.standard_normal((64, n), dtype=cupy.float32) for n in (1000, 1024, 4096)]
    pool = cupy.get_default_memory_pool()
    for x in xs:
        softmax(x)
    cupy.cuda.runtime.deviceSynchronize()
    before = (rss_mb(), pool.used_bytes(), pool.total_bytes())
    t = time.perf_counter()
    for i in range(calls):
        y = softmax(xs[i % 3])
        del y
    cupy.cuda.runtime.deviceSynchronize()
    elapsed = time.perf_counter() - t
    after = (rss_mb(), pool.used_bytes(), pool.total_bytes())
    return before, after, elapsed


def main():
    (cold, _), (warm, numba_imported) = first_call_ms()
    print(f"first call, new process, empty cache:      {cold:.1f} ms")
    print(f"first call, new process, compiled before:  {warm:.1f} ms "
          f"(numba imported: {numba_imported})")
    (r0, u0, t0), (r1, u1, t1), s = leak_check()
    print(f"10000 calls in {s:.2f} s: host RSS {r0:.1f} -> {r1:.1f} MB, "
          f"device pool used {u0} -> {u1} B, pool total {t0} -> {t1} B")


if __name__ == "__main__":
    main()
