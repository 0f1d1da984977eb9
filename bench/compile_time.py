"""Compile time of generated programs, without a GPU: for fuzz seeds of the GPU profile
(tests/fuzzgen.py), numbamr's lowering and numba's compilation of every kernel to sm_90 PTX.

    python bench/compile_time.py                 # seeds 0..39, one line each and a total
    python bench/compile_time.py --seeds 0 100   # seeds 0..99
"""
import argparse
import contextlib
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), ROOT]
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"          # compile for the GPU (no GPU needed)
os.environ.setdefault("NUMBAMR_CACHE_DIR", tempfile.mkdtemp(prefix="numbamr-ctime-"))


def compile_seed(seed):
    """(lowering seconds, numba seconds, kernels, emitted lines) of fuzz seed ``seed``."""
    from numba import cuda
    import fuzzgen
    import numbamr as nm
    from numbamr.runtime.compile import load_source, pointer_signature, with_deep_stack
    _, fn, inputs, options = fuzzgen.make_case(seed, fuzzgen.GPU)
    jf = nm.jit(**options)(fn)
    t0 = time.perf_counter()
    bound, leaves = jf._bind(inputs, {})
    kernels = jf._lower(bound, leaves, simulator=False).kernels
    t1 = time.perf_counter()
    for k in kernels:
        kernel_fn = getattr(load_source(k.source, k.name), k.name)
        sig = pointer_signature([dt for _, _, dt, _ in k.program.params]).args
        with_deep_stack(lambda: cuda.compile_ptx(kernel_fn, sig, cc=(9, 0),
                                                 launch_bounds=k.launch_bounds))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(kernels), sum(k.source.count("\n") for k in kernels)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs=2, default=(0, 40), metavar=("FIRST", "END"))
    args = ap.parse_args()
    import fuzzgen
    for seed in range(*args.seeds):     # numba's one-time start-up, not counted
        with contextlib.suppress(fuzzgen.unsupported_errors()):
            compile_seed(seed)
            break
    total_lower = total_numba = 0.0
    counted = 0
    for seed in range(*args.seeds):
        try:
            lower, numba, kernels, lines = compile_seed(seed)
        except fuzzgen.unsupported_errors() as e:     # a forced option the program refuses
            print(f"seed {seed}: unsupported, not counted ({type(e).__name__}: "
                  f"{e.plain_message})", flush=True)
            continue
        counted += 1
        total_lower += lower
        total_numba += numba
        print(f"seed {seed}: lowering {lower:.2f} s, numba to PTX {numba:.2f} s, "
              f"{kernels} kernels, {lines} lines", flush=True)
    print(f"total over {counted} seeds: lowering {total_lower:.1f} s, numba to PTX "
          f"{total_numba:.1f} s ({(total_lower + total_numba) / max(counted, 1):.2f} s a "
          "program)")


if __name__ == "__main__":
    main()
