"""Run many fuzz programs (tests/fuzzgen.py) through numbamr and compare with float64 NumPy.

On a GPU machine (the default profile, GPU sizes, CuPy arrays where CuPy is installed):
    python3 tests/fuzz_gpu.py                       # 2000 programs
    python3 tests/fuzz_gpu.py --count 500 --start 10000 --numpy
    python3 tests/fuzz_gpu.py --jobs 14 --quiet --time-limit 400   # 2000 programs, 14 processes
Without a GPU it runs in numba's simulator; keep it small there:
    python3 tests/fuzz_gpu.py --sim-small --count 20

Prints one summary line ``fuzz: N programs, M mismatches, E errors`` (and the unsupported
count), with the source of each failing program above it. Exit status 1 if anything failed.
Not collected by pytest (the name does not start with test_).
"""
import argparse
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import conftest  # noqa: E402  (selects numba's simulator when there is no GPU; before numba)

# thousands of programs: keep their kernel sources out of the user's cache
os.environ.setdefault("NUMBAMR_CACHE_DIR", tempfile.mkdtemp(prefix="numbamr-fuzz-"))


# the simulator runs a Python thread per GPU thread: forced options can ask for grids that
# take it an hour (2 x 16384 columns over 32 threads a row: 525952 threads)
SIM_THREADS = 1 << 16


def _simulated_threads(nm, fn, inputs, options):
    """Threads of every kernel of ``fn``'s call (0 where it does not lower: the run says)."""
    try:
        return sum(k.grid * k.block for k in nm.jit(**options)(fn).lower(*inputs).kernels)
    except Exception:
        return 0


def main(argv=None):
    import fuzzgen
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=2000, help="programs to run (default 2000)")
    ap.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--sim-small", action="store_true",
                    help="simulator sizes and options (the profile tests/test_fuzz.py uses)")
    ap.add_argument("--max-size", type=int, default=None,
                    help="most elements of the main input (default: the profile's)")
    ap.add_argument("--numpy", action="store_true",
                    help="pass NumPy arrays, not CuPy arrays (automatic without CuPy or GPU)")
    ap.add_argument("--rtol", type=float, default=None, help="relative tolerance (1e-4)")
    ap.add_argument("--quiet", action="store_true", help="no progress line per program")
    ap.add_argument("--rerun", type=int, default=2,
                    help="on a mismatch, run the program this many times again to tell a "
                         "deterministic failure from a flaky one (default 2)")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="stop starting new programs after this many seconds and report "
                         "the ones run (default: no limit)")
    fuzzgen.add_stream_options(ap)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after this many failures (default: run all)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="run the seeds in this many processes at once (compiling is most "
                         "of the time) and print their output one after another, then one "
                         "total line")
    args = ap.parse_args(argv)
    if args.jobs > 1:
        return _run_jobs(args, argv if argv is not None else sys.argv[1:])

    import numbamr as nm

    profile = dict(fuzzgen.SIM if args.sim_small else fuzzgen.GPU)
    if args.max_size:
        profile["max_elems"] = args.max_size
        profile["max_rows"] = min(profile["max_rows"], args.max_size)
        profile["long_rows"] = 0.0
    if args.rtol:
        profile["rtol"] = args.rtol
    profile = fuzzgen.with_streams(profile, args)

    xp = None
    if not args.numpy and not conftest.SIMULATOR:
        try:
            import cupy as xp
        except ImportError:
            print("CuPy is not installed: passing NumPy arrays", flush=True)
    where = "simulator" if conftest.SIMULATOR else "GPU"
    print(f"fuzz: seeds {args.start}..{args.start + args.count - 1} on the {where}, "
          f"{'CuPy' if xp else 'NumPy'} arrays, "
          f"{'sim-small' if args.sim_small else 'gpu'} sizes (at most {profile['max_elems']} "
          "elements)", flush=True)

    mismatches, errors, unsupported, failures, too_big = 0, 0, [], [], []
    t_start = time.time()
    done = 0
    for seed in range(args.start, args.start + args.count):
        t0 = time.time()
        if args.time_limit and t0 - t_start > args.time_limit:
            print(f"time limit: stopping before seed {seed}", flush=True)
            break
        reported = len(failures)
        try:
            source, fn, inputs, options = fuzzgen.make_case(seed, profile)
        except Exception as e:       # the generator itself failed: report, go on
            errors += 1
            failures.append((seed, "generator error", f"{type(e).__name__}: {e}", ""))
            print(f"\n==== seed {seed}: generator error: {type(e).__name__}: {e}", flush=True)
            continue
        if conftest.SIMULATOR and _simulated_threads(nm, fn, inputs, options) > SIM_THREADS:
            too_big.append(seed)
            continue
        status = "ok"
        try:
            args_in = fuzzgen.to_device(inputs, fn, xp) if xp else inputs
            got = nm.jit(**options)(fn)(*args_in)
            if xp:
                xp.cuda.Device().synchronize()
        except fuzzgen.unsupported_errors() as e:
            status = "unsupported"
            unsupported.append((seed, f"{type(e).__name__}: {e.plain_message}"))
        except Exception as e:
            errors += 1
            status = "ERROR"
            failures.append((seed, "error", f"{type(e).__name__}: {e}\n"
                             + "".join(traceback.format_exc(limit=-4)), source))
        else:
            try:
                fuzzgen.check_result(source, fn, inputs, got)
            except AssertionError as e:
                mismatches += 1
                status = "MISMATCH"
                again = _rerun(nm, fuzzgen, xp, source, fn, inputs, options, args.rerun)
                failures.append((seed, "mismatch", str(e).split("\n\n")[0] + again, source))
            except Exception as e:
                errors += 1
                status = "ERROR"
                failures.append((seed, "error", f"comparing: {type(e).__name__}: {e}", source))
        done += 1
        for f_seed, kind, message, f_source in failures[reported:]:   # at once: a run may be cut
            print(f"\n==== seed {f_seed}: {kind}: {message}\n{f_source}", flush=True)
        if not args.quiet:
            shapes = " ".join(f"{tuple(a.shape)}" for a in inputs)
            print(f"seed {seed}: {status} {time.time() - t0:.2f}s {shapes}", flush=True)
        if args.stop_after and len(failures) >= args.stop_after:
            break

    if failures:
        print("\nfailing seeds: " + " ".join(str(f[0]) for f in failures), flush=True)
    if unsupported:
        print(f"\n{len(unsupported)} programs unsupported by numbamr (NumbamrError):")
        for seed, message in unsupported:
            print(f"  seed {seed}: {message.splitlines()[0]}")
    if too_big:
        print(f"\nnot run, over {SIM_THREADS} threads for the simulator: seeds "
              + " ".join(map(str, too_big)), flush=True)
    print(f"\nfuzz: {done} programs, {mismatches} mismatches, {errors} errors "
          f"({len(unsupported)} unsupported, {time.time() - t_start:.0f}s)", flush=True)
    return 1 if failures else 0


def _run_jobs(args, argv):
    """Split seeds start..start+count over ``args.jobs`` child processes; their outputs, then
    the totals (a child cut short by the time limit still reports what it ran)."""
    import re
    import subprocess
    rest, skip = [], False
    for a in argv:                       # the child arguments: everything but the split
        if skip:
            skip = False
        elif a in ("--jobs", "--start", "--count"):
            skip = True
        elif not a.startswith(("--jobs=", "--start=", "--count=")):
            rest.append(a)
    share = -(-args.count // args.jobs)
    procs = []
    for j in range(args.jobs):
        first, n = args.start + j * share, min(share, args.count - j * share)
        if n > 0:
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--start", str(first),
                 "--count", str(n)] + rest, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True))
    totals, failed, seeds = [0, 0, 0, 0], False, []
    for p in procs:
        out = p.communicate()[0]
        print(out, end="", flush=True)
        seeds += re.findall(r"^failing seeds: (.*)$", out, re.M)
        m = re.search(r"^fuzz: (\d+) programs, (\d+) mismatches, (\d+) errors "
                      r"\((\d+) unsupported", out, re.M)
        if m is None:
            print(f"(a child exited with status {p.returncode} without a summary)")
            failed = True
            continue
        totals = [t + int(v) for t, v in zip(totals, m.groups())]
        failed |= p.returncode != 0
    print(f"\nfuzz total: {totals[0]} programs, {totals[1]} mismatches, {totals[2]} errors "
          f"({totals[3]} unsupported) in {len(procs)} processes", flush=True)
    if seeds:       # last, so that a tail of the output still names them
        print("failing seeds: " + " ".join(seeds), flush=True)
    return 1 if failed else 0


def _rerun(nm, fuzzgen, xp, source, fn, inputs, options, times):
    """Run a mismatching case again: does it fail every time (and the same way)?"""
    if times <= 0:
        return ""
    results = []
    for _ in range(times):
        try:
            args_in = fuzzgen.to_device(inputs, fn, xp) if xp else inputs
            got = nm.jit(**options)(fn)(*args_in)
            fuzzgen.check_result(source, fn, inputs, got)
            results.append("pass")
        except AssertionError as e:
            results.append(str(e).split("\n")[0][:60])
        except Exception as e:
            results.append(type(e).__name__)
    passes = results.count("pass")
    kind = "FLAKY" if passes else "deterministic"
    return f"\n  rerun {times}x: {kind} ({passes} passed; " + "; ".join(
        r for r in results if r != "pass") + ")"


if __name__ == "__main__":
    sys.exit(main())
