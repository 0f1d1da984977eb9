"""PTX tier: every catalogue kernel, as it would run on an H200, compiles for sm_90.

Kernels are lowered here with the GPU heuristics at realistic sizes, then compiled in a
child process with numba's simulator off (numba picks simulator or CUDA once per process).
The report also guards the fast path: vector loads where the source uses them, and no
register spills or stack frames.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import numbamr as nm
from helpers import has_vector_load
from programs import PROGRAMS, BY_NAME

pytestmark = [pytest.mark.ptx, pytest.mark.xdist_group("ptx")]   # one compile report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lower_for_gpu(fn, inputs):
    jf = nm.jit(fn) if not isinstance(fn, nm.JitFunction) else fn
    bound, leaves = jf._bind(inputs, {})
    return jf._lower(bound, leaves, simulator=False)


def compile_report(kernels):
    entries = [{"name": k.name, "source": k.source, "launch_bounds": k.launch_bounds,
                "params": [np.dtype(dt).name for _, _, dt, _ in k.program.params],
                "scalars": [i for i, (_, kind, _, _) in enumerate(k.program.params)
                            if kind == "rows"]}
               for k in kernels]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "numbamr.ptx"], input=json.dumps(entries),
                          capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


GPU_SHAPES = [(256, 1000), (64, 8192), (8, 65536)]


def _cases():
    cases = []
    for p in PROGRAMS:
        for rows, cols in GPU_SHAPES:
            cases.append((p, rows, cols))
    return cases


@pytest.fixture(scope="module")
def report():
    rng = np.random.default_rng(0)
    lowered, names = [], []
    for p, rows, cols in _cases():
        inputs = p.make(rng, rows, cols)
        for k in lower_for_gpu(p.fn, inputs).kernels:
            lowered.append(k)
            names.append(f"{p.name}[{rows}x{cols}]")
    return dict(zip(names, zip(lowered, compile_report(lowered))))


def test_every_kernel_compiles_for_sm90_without_spills(report):
    failures = [f"{n}: {r['error']}" for n, (_, r) in report.items() if not r["ok"]]
    assert not failures, "\n".join(failures)
    spills = [f"{n}: {r['spill_bytes']} spill bytes, {r['stack_bytes']} stack bytes"
              for n, (_, r) in report.items() if r["spill_bytes"] or r["stack_bytes"]]
    assert not spills, "\n".join(spills)


def test_vector_access_in_source_is_vector_access_in_ptx(report):
    for name, (k, r) in report.items():
        if has_vector_load(k.source):
            assert r["vector_loads"] > 0, f"{name}: vload in source but no ld.global.v*"
        if "vstore(" in k.source:
            assert r["vector_stores"] > 0, f"{name}: vstore in source but no st.global.v*"


def test_row_kernels_read_with_16_byte_loads(report):
    """The suite's row kernels (softmax, layernorm...) use 16-byte loads at these sizes."""
    for prog in ("softmax", "layernorm", "rmsnorm", "variance", "logsumexp", "sum_and_max"):
        for rows, cols in GPU_SHAPES:
            k, r = report[f"{prog}[{rows}x{cols}]"]
            assert has_vector_load(k.source) and r["vector_loads"] > 0, f"{prog} {rows}x{cols}"


def test_half_rows_move_16_bytes_per_access():
    """float16 rows alone load and store 16 bytes per access (an <8 x half> vector would
    otherwise become two 8-byte accesses); beside float32 weights, 8 bytes of the row and 16
    of the weight (a warp's weight loads fill whole sectors)."""
    rng = np.random.default_rng(2)

    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def rmsnorm(x, w):
        y = x.astype(np.float32)
        return (y / np.sqrt((y * y).mean(axis=-1, keepdims=True) + 1e-5) * w).astype(x.dtype)

    w = rng.standard_normal(8192).astype(np.float32)
    kernels = [lower_for_gpu(softmax, (np.empty((64, 8192), np.float16),)).kernels[0],
               lower_for_gpu(rmsnorm, (np.empty((64, 8192), np.float16), w)).kernels[0]]
    for k, r, want in zip(kernels, compile_report(kernels), ([16], [8, 16])):
        assert r["ok"], r["error"]
        assert r["vector_loads"] > 0 and r["vector_stores"] > 0, k.name
        assert r["vector_bytes"] == want, (k.name, r["vector_bytes"])


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    dict(threads_per_row=1024, rows_per_block=1),
    dict(threads_per_row=32, rows_per_block=8, upcast=0, unroll=8),
    dict(threads_per_row=8, rows_per_block=32, layout="col"),
])
def test_forced_layouts_compile(options):
    rng = np.random.default_rng(1)
    kernels = []
    for name in ("softmax", "layernorm_stats", "chain4", "vector_matrix", "two_axes"):
        p = BY_NAME[name]
        kernels += lower_for_gpu(nm.jit(**options)(p.fn), p.make(rng, 64, 4096)).kernels
    results = compile_report(kernels)
    bad = [f"{k.name}: {r['error']}" for k, r in zip(kernels, results) if not r["ok"]]
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_long_rows_are_staged_on_chip_without_spills():
    """1024 x 65536 float32 in one block a row (split=1; by default such rows are split
    across blocks, see test_split): rows that need a second pass (softmax, z-score) are kept
    in registers + shared memory (read once); one-pass reductions (sum+max, and variance and
    logsumexp in their one-pass forms) and rows read beside weights (layernorm, rmsnorm:
    staging measured slower) stream. Forced staging of the weighted ones compiles too."""
    rng = np.random.default_rng(0)
    staged, streamed = [], []
    for name in ("softmax", "layernorm", "rmsnorm", "zscore", "sum_and_max", "variance"):
        p = BY_NAME[name]
        x = np.empty((1024, 65536), np.float32)
        inputs = (x,) + tuple(a for a in p.make(rng, 1, 65536)[1:])
        k = lower_for_gpu(nm.jit(split=1)(p.fn), inputs).kernels[0]
        (staged if k.program.dynamic_shared else streamed).append((name, k))
    assert [n for n, _ in staged] == ["softmax", "zscore"]
    for name in ("layernorm", "rmsnorm"):
        p = BY_NAME[name]
        inputs = (np.empty((1024, 65536), np.float32),) + p.make(rng, 1, 65536)[1:]
        k = lower_for_gpu(nm.jit(stage=160 * 1024)(p.fn), inputs).kernels[0]
        assert k.program.dynamic_shared, name
        staged.append((name, k))
    report = compile_report([k for _, k in staged])
    for (name, k), r in zip(staged, report):
        assert r["ok"], r["error"]
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (name, r)
        assert r["vector_loads"] > 0, name


def _bench_suite():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import suite
    finally:
        sys.path.pop(0)
    return suite


@pytest.mark.slow
def test_the_benchmark_suite_compiles_as_on_the_h200_without_spills(monkeypatch):
    """Every cell of bench/suite.py, lowered as on the H200 (sm_90: split rows as clusters,
    dependent launches), compiles without spills or stack frames, reads its rows with
    vector loads (column layouts read adjacent columns instead) and writes rows written
    whole (softmax, layernorm, rmsnorm, z-score) with vector stores, their inputs read under
    the L2 evict_last policy (the other cells' plainly; persistent clusters' rows arrive by
    bulk copy instead)."""
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    suite = _bench_suite()
    ops = suite.np_ops(np)
    kernels, cells = [], []         # cells: (op, shape, dtype, kernel's position in the call)
    for op, shape, dtype in suite.cases():
        fn = ops[op] if dtype == "float32" else suite.half_wrap(ops[op])
        params = [np.empty(shape[1], np.float32)
                  for _ in suite.params_of(op, shape[1], np.random.default_rng(0))]
        lowered = lower_for_gpu(fn, (np.empty(shape, dtype),) + tuple(params))
        kernels += lowered.kernels
        cells += [(op, shape, dtype, i) for i in range(len(lowered.kernels))]
    assert any(k.layout.cluster for k in kernels)       # the long rows, as on the H200
    whole = ("softmax", "layernorm", "rmsnorm", "zscore")
    for cell, k, r in zip(cells, kernels, compile_report(kernels)):
        op, _, _, position = cell
        assert r["ok"], (cell, r["error"])
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (cell, r)
        if position == 0 and k.layout.layout == "row":
            assert r["vector_loads"] > 0, cell
        if k.layout.persistent:         # rows arrive by bulk copy into shared memory
            assert r["bulk_copies"] > 0 and r["hinted_loads"] == 0, cell
        else:
            assert (r["hinted_loads"] > 0) == (op in whole), cell
        if op in whole:
            assert r["vector_stores"] > 0, cell


@pytest.mark.slow
def test_column_reductions_over_aligned_rows_load_32_chunks_an_iteration(monkeypatch):
    """A column layout that only reduces loads 32 chunks an iteration where every row starts
    16-byte aligned (4096 or 50000 columns), 8 where rows are odd (8193) or the kernel writes
    columns (a softmax over axis 0); all compile without spills."""
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    ops = _bench_suite().np_ops(np)
    colsoftmax = lambda x: ops["softmax"](x.T).T      # noqa: E731
    cases = [(ops["colvar"], (4096, 4096), 32), (ops["colvar"], (3000, 50000), 32),
             (ops["colvar"], (8191, 8193), 8), (colsoftmax, (4096, 4096), 8)]
    kernels = []
    for fn, shape, chunks in cases:
        k = lower_for_gpu(fn, (np.empty(shape, np.float32),)).kernels[0]
        assert k.layout.layout == "col" and not k.layout.groups[0].resident, shape
        assert k.layout.groups[0].chunks == chunks, (shape, k.layout.groups[0])
        kernels.append(k)
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)


@pytest.mark.slow
@pytest.mark.parametrize("cols", [32768, 32000])
def test_rows_of_16k_to_32k_floats_leave_blocks_of_1024_threads(monkeypatch, cols):
    """Rows that 1024 threads would hold in registers, 32 values each: one-pass kernels with
    a value per row stream them with 256 threads, 8 chunks an iteration; kernels writing
    whole rows hold them with 512 threads, or split them across a cluster where 512 threads
    would stream them twice (layernorm, also at 32000 columns: segments of 8000 that a
    block's 256 threads hold in 8 chunks, the last one partly masked). All compile without
    spills."""
    from numbamr.runtime import device
    from test_constant import _cross_entropy
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    suite = _bench_suite()
    ops = dict(suite.np_ops(np), cross_entropy=_cross_entropy)
    rows = 4096
    want = {"logsumexp": (256, False, 1), "var": (256, False, 1), "sum_max": (256, False, 1),
            "cross_entropy": (256, False, 1), "softmax": (512, True, 1),
            "zscore": (512, True, 1),
            "layernorm": (256, True, 4)}
    kernels = []
    for op, (threads, resident, split) in want.items():
        extra = (np.empty(rows, np.int64),) if op == "cross_entropy" else \
            tuple(np.empty(cols, np.float32)
                  for _ in suite.params_of(op, cols, np.random.default_rng(0)))
        (k,) = lower_for_gpu(ops[op], (np.empty((rows, cols), np.float32),) + extra).kernels
        L = k.layout
        assert (L.threads_per_row, L.groups[0].resident, L.split) == (threads, resident, split), op
        if not resident:
            assert L.groups[0].chunks == 8, op
        kernels.append(k)
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], (k.name, r["error"])
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)


CUBIN_CHILD = r"""
import sys
import numpy as np
from numba import cuda
from numba.cuda.cudadrv import driver
from numbamr.runtime import binary
from numbamr.runtime.compile import load_source, pointer_signature, with_deep_stack
from programs import BY_NAME
from test_ptx import lower_for_gpu
p = BY_NAME["softmax"]
(k,) = lower_for_gpu(p.fn, p.make(np.random.default_rng(0), 4, 256)).kernels
fn = getattr(load_source(k.source, k.name), k.name)
dtypes = [dt for _, _, dt, _ in k.program.params]
ptx, _ = with_deep_stack(lambda: cuda.compile_ptx(fn, pointer_signature(dtypes), cc=(9, 0)))
linker = driver._Linker(max_registers=None, cc=(9, 0), lto=False)
linker.add_ptx(ptx.encode())
image = linker.complete()
binary.store("k1", k.name, image)
entry, data = binary.read("k1")
assert entry == k.name, entry
assert data == binary.image_bytes(image) and data[:4] == b"\x7fELF"
print("stored", len(data))
"""


@pytest.mark.ptx
def test_cubin_cache_entries_round_trip(tmp_path, monkeypatch):
    """A kernel linked to a cubin the way numba links it on a GPU (a cuda.core ObjectCode,
    no GPU needed) is stored and read back whole; a truncated or altered entry, or a
    missing one, reads as None (then numbamr compiles and rewrites it)."""
    from numbamr.runtime import binary
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "tests"),
                                         env.get("PYTHONPATH", "")])
    env["NUMBAMR_CACHE_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CUBIN_CHILD], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(tmp_path))
    path = pathlib.Path(binary._path("k1"))      # the entry's file, named by its key's hash
    assert path.parent == tmp_path / "bin"
    whole = path.read_bytes()
    assert binary.read("k1") is not None
    path.write_bytes(whole[:len(whole) // 2])
    assert binary.read("k1") is None
    path.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))
    assert binary.read("k1") is None
    assert binary.read("missing") is None


@pytest.mark.slow
def test_min_blocks_per_sm_caps_the_registers(monkeypatch):
    """A launch bound of 4 blocks of 256 threads per multiprocessor leaves 64 registers a
    thread: the compiler fits the split softmax (124 registers unbounded) into them.
    Lowered as without a GPU (no architecture-specific loads), wherever the test runs."""
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: None)
    p = BY_NAME["softmax"]
    x = np.empty((1024, 65536), np.float32)
    base = dict(split=8, threads_per_row=256, cluster=0, online=1)
    free, bounded = (lower_for_gpu(nm.jit(**base, **o)(p.fn), (x,)).kernels[0]
                     for o in ({}, dict(min_blocks_per_sm=4)))
    assert bounded.launch_bounds == (256, 4) and free.launch_bounds == (256,)
    assert "min_blocks_per_sm=4" in bounded.source
    r_free, r_bounded = compile_report([free, bounded])
    assert r_free["ok"] and r_bounded["ok"], (r_free["error"], r_bounded["error"])
    assert r_free["registers"] > 64 >= r_bounded["registers"], (r_free, r_bounded)
    assert r_bounded["spill_bytes"] == 0


@pytest.mark.parametrize("value,why", [(0, "must be 1..32"), (33, "must be 1..32"),
                                       (5, "at most 2048 threads")])
def test_min_blocks_per_sm_is_checked(value, why):
    x = np.empty((4, 1024), np.float32)
    with pytest.raises(nm.NumbamrError, match=why):
        nm.jit(min_blocks_per_sm=value, threads_per_row=512)(BY_NAME["softmax"].fn).lower(x)


def _column_sum(x):
    return x.sum(axis=0)


def _less_row_max(x):
    return x - x.max(axis=-1, keepdims=True)


# shapes whose heuristic blocks have 1024 threads: a column sum's tiles, a row of 262144
# held in one cluster of 8 blocks
BLOCKS_OF_1024 = [(_column_sum, (4096, 4096)), (_less_row_max, (64, 262144))]


@pytest.mark.parametrize("fn,shape", BLOCKS_OF_1024)
@pytest.mark.parametrize("per_sm", [3, 4])
def test_forced_min_blocks_per_sm_shrinks_the_heuristics_blocks(monkeypatch, fn, shape,
                                                                per_sm):
    """Blocks the heuristics would make too large for a forced ``min_blocks_per_sm`` to fit
    on a multiprocessor are made smaller (512 threads), not refused."""
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    x = np.empty(shape, np.float32)
    assert [k.block for k in lower_for_gpu(fn, (x,)).kernels] == [1024]
    bounded = lower_for_gpu(nm.jit(min_blocks_per_sm=per_sm)(fn), (x,)).kernels
    assert all(k.launch_bounds == (k.block, per_sm) for k in bounded)
    assert max(k.block for k in bounded) == 512


@pytest.mark.gpu
@pytest.mark.parametrize("fn,shape", BLOCKS_OF_1024)
def test_forced_min_blocks_per_sm_on_gpu(fn, shape):
    from helpers import check
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    check(fn, x, jitted=nm.jit(min_blocks_per_sm=3)(fn), rtol=1e-4)


@pytest.mark.slow
def test_float32_max_and_min_are_one_instruction_on_sm80(monkeypatch):
    """Lowered for an sm_80+ GPU, numpy's NaN-propagating float32 max/min (reductions,
    np.maximum, the online softmax's running max) is one ``max.NaN``/``min.NaN``: no NaN
    tests, compares and selects per element. Lowered for an older GPU the portable form
    stays. (The gpu tier runs the NaN/inf programs through this form.)"""
    from numbamr.runtime import device
    rng = np.random.default_rng(3)
    names = ("logsumexp", "sum_max_min", "softmax")
    monkeypatch.setattr(device, "arch", lambda: (7, 5))
    portable = [lower_for_gpu(BY_NAME[n].fn, BY_NAME[n].make(rng, 64, 4096)).kernels[0]
                for n in names]
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    native = [lower_for_gpu(BY_NAME[n].fn, BY_NAME[n].make(rng, 64, 4096)).kernels[0]
              for n in names]
    reports = compile_report(portable + native)
    for k, r in zip(portable, reports[:3]):
        assert r["ok"] and "fmax_nan" not in k.source and r["nan_minmax"] == 0, k.name
    for k, r, p in zip(native, reports[3:], reports[:3]):
        assert r["ok"], r["error"]
        assert "fmax_nan(" in k.source and r["nan_minmax"] > 0, k.name
        assert r["nan_tests"] < p["nan_tests"], (k.name, r["nan_tests"], p["nan_tests"])


def _shifted_quotient(x):
    return x / x.sum(axis=-1, keepdims=True) + 1.0


def _shifted_normalized(x):         # a divisor in range: x * r, with no scale
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + 1e-5) + 1.0


@pytest.mark.parametrize("fn", [_shifted_quotient, _shifted_normalized])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_quotient_through_a_reciprocal_is_rounded_before_it_is_added_to(dt, fn):
    """``x / rowsum`` is ``(x * r) * q`` (``x * r`` where the divisor is in range); the last
    product is one ``mul.rn`` in the PTX, which the compiler never fuses with the ``+ 1.0``
    into an FMA (that would add to the unrounded product, so the quotient would round
    differently where it is used differently)."""
    x = np.ones((64, 4096), dt)
    (k,) = lower_for_gpu(fn, (x,)).kernels
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    per_thread = 4096 // k.layout.threads_per_row
    assert k.source.count("mul_rn(") == per_thread
    assert r["rounded_products"] >= per_thread


def _root_of_distance_to_row_min(y, z):
    p = y * z
    return np.sqrt(p - p.min(axis=-1, keepdims=True)).max(), (-(p * z) + 1.0).sum(axis=-1)


def test_products_that_are_added_to_are_rounded_on_their_own():
    """``p = y * z`` is rounded where ``p.min()`` is taken; where ``p - min`` is computed (in
    another kernel) it is one ``mul.rn`` as well: a plain ``mul`` the assembler may fuse with
    the subtraction into an FMA, which subtracts from the unrounded product (the difference
    went below 0 and its square root was NaN on the H200, GPU fuzz seed 144479). In the
    first kernel ``p * z`` is rounded (1.0 is added to its negation) and ``p`` itself is
    not (it is only multiplied and reduced there); the last kernel multiplies nothing."""
    y = np.ones((64, 4096), np.float32)
    kernels = lower_for_gpu(_root_of_distance_to_row_min, (y, y[0])).kernels
    assert ["sqrt(" in k.source for k in kernels] == [False, True, False]
    per_thread = [k.kernel.groups[0].extent // k.layout.threads_per_row for k in kernels]
    expected = per_thread[:2] + [0]
    assert [k.source.count("mul_rn(") for k in kernels] == expected
    reports = compile_report(kernels)
    assert all(r["ok"] for r in reports), [r["error"] for r in reports]
    assert [r["rounded_products"] for r in reports] == expected


def test_kernels_for_sm90_wait_for_the_previous_kernel_before_touching_memory(monkeypatch):
    """Lowered for an sm_90 GPU, every kernel (each of a multi-kernel call's, and a single
    kernel's) is launched as a programmatic dependent of the stream's previous kernel: its
    PTX waits for that kernel (griddepcontrol.wait) before its first global load, store or
    atomic, and lets the next kernel start (launch_dependents). Lowered for a GPU without
    it (or none), neither instruction appears and the kernel is not marked dependent."""
    from numbamr.runtime import device
    rng = np.random.default_rng(4)
    cases = [("all_axes", 64, 65536), ("column_var", 8192, 64), ("softmax", 256, 1000)]
    old = [k for n, r, c in cases
           for k in lower_for_gpu(BY_NAME[n].fn, BY_NAME[n].make(rng, r, c)).kernels]
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    new = [k for n, r, c in cases
           for k in lower_for_gpu(BY_NAME[n].fn, BY_NAME[n].make(rng, r, c)).kernels]
    assert len(new) > len(cases)            # some of the cases take two kernels
    reports = compile_report(old + new)
    for k, r in zip(old, reports[:len(old)]):
        assert r["ok"] and not k.dependent, k.name
        assert r["griddep_waits"] == r["griddep_launches"] == 0, k.name
    for k, r in zip(new, reports[len(old):]):
        assert r["ok"] and k.dependent, (k.name, r["error"])
        assert r["griddep_waits"] == r["griddep_launches"] == 1, k.name
        assert r["global_before_griddep_wait"] == 0, k.name


def _row_max(x):
    return x.max(axis=-1)


def _less_row_max(x):
    return x - x.max(axis=-1, keepdims=True)


KEPT_DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.int32,
               np.int64]


@pytest.mark.slow
def test_inputs_load_under_the_l2_evict_last_policy_on_sm80_and_newer(monkeypatch):
    """Lowered for an sm_80+ GPU, a kernel that writes whole rows loads its inputs under the
    L2 evict_last policy (``createpolicy`` and ``ld.global.L2::cache_hint`` vectors): every
    dtype's vector compiles (narrow elements packed in 32-bit words, 8-byte ones as pairs of
    words), still as vector loads. ``evict_last=0``, an older GPU, or a kernel that writes
    a value per row loads plainly."""
    from numbamr.runtime import device
    x = {dt: np.empty((64, 4096), dt) for dt in KEPT_DTYPES}
    monkeypatch.setattr(device, "arch", lambda: (7, 5))
    older = [lower_for_gpu(_less_row_max, (x[dt],)).kernels[0] for dt in KEPT_DTYPES]
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    kept = [lower_for_gpu(_less_row_max, (x[dt],)).kernels[0] for dt in KEPT_DTYPES]
    plain = [lower_for_gpu(nm.jit(evict_last=0)(_less_row_max), (x[dt],)).kernels[0]
             for dt in KEPT_DTYPES[:4]] + \
        [lower_for_gpu(_row_max, (x[dt],)).kernels[0] for dt in KEPT_DTYPES[4:]]
    n = len(KEPT_DTYPES)
    reports = compile_report(older + kept + plain)
    for dt, k, r in zip(KEPT_DTYPES, kept, reports[n:2 * n]):
        assert r["ok"], (dt, r["error"])
        assert "vload_keep(" in k.source, dt
        assert r["hinted_loads"] >= r["vector_loads"] > 0 and r["evict_last_policies"] > 0, \
            (dt, r)
        assert r["spill_bytes"] == 0, (dt, r)
    for dt, k, r in zip(KEPT_DTYPES * 2, older + plain, reports[:n] + reports[2 * n:]):
        assert r["ok"], (dt, r["error"])
        assert "vload_keep" not in k.source and has_vector_load(k.source), dt
        assert r["hinted_loads"] == r["evict_last_policies"] == 0 and r["vector_loads"] > 0, \
            (dt, r)


def test_evict_last_is_checked():
    with pytest.raises(nm.NumbamrError, match="evict_last must be 0 or 1"):
        nm.jit(evict_last=2)(_row_max).lower(np.empty((4, 64), np.float32))


def _refused(seed):
    """Does numbamr refuse fuzz case ``seed`` of the GPU profile (its forced options)?"""
    import fuzzgen
    _, fn, inputs, options = fuzzgen.make_case(seed, fuzzgen.GPU)
    try:
        lower_for_gpu(nm.jit(**options)(fn), inputs)
    except fuzzgen.unsupported_errors():
        return True
    return False


def test_the_compile_time_script_skips_programs_numbamr_refuses():
    """bench/compile_time.py reports a fuzz case whose forced options its program refuses
    (a split of a row with two loops, more segments than elements) and goes on without
    counting it, instead of stopping at the error."""
    seed = next(s for s in range(200) if _refused(s))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compile_time.py"),
                           "--seeds", str(seed), str(seed + 1)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"seed {seed}: unsupported, not counted" in proc.stdout, proc.stdout
    assert "total over 0 seeds" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_float64_rows_held_by_a_thread_count_two_registers_a_value(monkeypatch):
    """A z-score of float64 rows of 32768 beside three statistics: the rows a thread
    holds are counted in registers, two a value (64 values of 512 threads took all 128
    registers and spilled 504 bytes), and the kernel compiles with none in local memory;
    float32 rows of the same length still hold 64 values in 512 threads."""
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: (9, 0))

    def zscore_and_stats(x):
        z = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)
        return z, x.min(axis=1), x.max(axis=1), x.sum(axis=1)

    held = {}
    for dtype in (np.float64, np.float32):
        kernels = lower_for_gpu(zscore_and_stats, (np.empty((512, 32768), dtype),)).kernels
        for k, r in zip(kernels, compile_report(kernels)):
            assert r["ok"], r["error"]
            assert r["spill_bytes"] == r["stack_bytes"] == r["local_accesses"] == 0, (dtype, r)
        g = kernels[0].layout.groups[0]
        held[dtype] = (kernels[0].layout.threads_per_row, g.chunks * g.vector, g.staged)
    assert held[np.float32] == (512, 64, 0)
    t, values, staged = held[np.float64]
    assert values * 8 // 4 <= 128 and (t, values, staged) != (512, 64, 0), held
