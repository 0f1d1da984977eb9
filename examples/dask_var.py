"""The variance of long rows cut into chunks, with dask: one numbamr pass over the data (each
block's count, mean and M2 in one kernel, merged across a row's chunks by Chan's formula),
then the z-scores of the rows, a kernel per block with the row statistics broadcast in.

    python examples/dask_var.py     # GPU: CuPy chunks, 2048 x 262144 in 512 x 65536 blocks;
                                    # without one, NumPy chunks in the simulator at 6 x 40
"""
import sys

from _common import SIMULATOR, np, to_device, to_host, where

import numbamr as nm


@nm.jit
def row_var(x):
    return x.var(axis=1)


@nm.jit
def zscore(x):
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def main():
    try:
        import dask
        import dask.array as da
    except ImportError:
        print("this example needs dask: pip install 'dask[array]'")
        return False
    shape, chunks = ((6, 40), (3, 16)) if SIMULATOR else ((2048, 262144), (512, 65536))
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) + 3
    (xd,) = to_device(x)
    xd = da.from_array(xd, chunks=chunks, asarray=False)
    v, z = dask.compute(row_var(xd), zscore(xd), scheduler="sync" if SIMULATOR else None)
    x64 = x.astype(np.float64)
    z64 = (x64 - x64.mean(axis=1, keepdims=True)) / x64.std(axis=1, keepdims=True)
    ok = True
    for name, got, ref in [("var", v, x64.var(axis=1)), ("z-score", z, z64)]:
        got, ref = to_host(got).astype(np.float64), np.asarray(ref)
        err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        good = err < 1e-5
        ok = ok and good
        print(f"{name} of {shape[0]}x{shape[1]} in {chunks[0]}x{chunks[1]} chunks on {where()}: "
              f"max relative error vs float64 NumPy {err:.2e} -> {'OK' if good else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
