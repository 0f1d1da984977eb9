"""Model-shaped kernels (bench/models.py) as they would run on an H200, without a GPU.

PTX tier (marked ``ptx``): on sm_80 and newer a float32 value rounds to bfloat16 in one
``cvt.rn.bf16.f32``, one for each rounding the source makes and none of the integer form,
with no local memory and with vector loads. Lowering tests: a contiguous (batch, sequence,
hidden) input lowers to the kernels of its (batch * sequence, hidden) matrix. Simulator
tests: bfloat16 results still round as ml_dtypes rounds the float64 reference.
"""
import importlib.util
import os
import re

import numpy as np
import pytest

import numbamr as nm
from helpers import has_vector_load
from test_ptx import compile_report, lower_for_gpu

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTX = [pytest.mark.ptx, pytest.mark.xdist_group("ptx")]


def _bench_models():
    spec = importlib.util.spec_from_file_location("bench_models",
                                                  os.path.join(ROOT, "bench", "models.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


models = _bench_models()


def _arrays(op, shape, dtype):
    """Empty arrays of the op's inputs at ``shape`` (lowering reads only shapes and dtypes)."""
    return tuple(np.empty(s, dt) for s, dt in models.input_specs(op, shape, dtype))


def _lower(op, shape, dtype):
    return lower_for_gpu(models.np_ops()[op], _arrays(op, shape, dtype)).kernels


def _on(monkeypatch, cc):
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: cc)


def _roundings(source):
    """How many float32 -> bfloat16 roundings the kernel's source makes."""
    return len(re.findall(r"\bf32_to_bf16\(", source))


def _wide_vector_load(kernel):
    """Whether the source loads a vector of 8 bytes or more (one of 4 bytes is one 32-bit
    scalar load in the PTX)."""
    size = {name: np.dtype(dt).itemsize for name, _, dt, _ in kernel.program.params}
    return any(int(n) * size[a] >= 8 for a, n in
               re.findall(r"\bvload(?:_keep)?\((\w+), [^,]+, (\d+)\)", kernel.source))


# ---- one instruction a rounding --------------------------------------------------------

BF16_CELLS = [("rmsnorm", (4096, 4096)), ("rmsnorm", (8, 2048, 4096)),
              ("add_rmsnorm", (4096, 4096)), ("layernorm", (4096, 5120)),
              ("softmax", (4096, 32000))]


@pytest.mark.parametrize("op,shape", BF16_CELLS, ids=lambda v: str(v))
@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_bfloat16_rounds_in_one_instruction_on_sm90(monkeypatch, op, shape):
    """Each rounding of the source is one cvt.rn.bf16.f32 in the PTX, and none is the
    integer form; no local memory, no spills; rows read with vector loads."""
    _on(monkeypatch, (9, 0))
    kernels = _lower(op, shape, "bfloat16")
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        n = _roundings(k.source)
        assert n > 0 and "f32_to_bf16_cvt as f32_to_bf16" in k.source, k.name
        assert r["bf16_cvts"] == n, (k.name, r["bf16_cvts"], n)
        assert r["bf16_bit_rounds"] == 0, k.name
        assert r["local_accesses"] == 0 and r["spill_bytes"] == 0 and r["stack_bytes"] == 0, \
            (k.name, r)
        assert has_vector_load(k.source) and r["vector_loads"] > 0, k.name


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_rmsnorm_rounding_has_no_nan_test_on_sm90(monkeypatch):
    """The integer form tests every value for NaN; the instruction needs none, and this
    rmsnorm has nothing else that would."""
    _on(monkeypatch, (9, 0))
    (k,) = _lower("rmsnorm", (4096, 4096), "bfloat16")
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    assert r["nan_tests"] == 0 and r["bf16_cvts"] == _roundings(k.source)


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_bfloat16_keeps_the_integer_form_before_sm80(monkeypatch):
    """A GPU older than sm_80 has no cvt.rn.bf16.f32: there (and for the simulator) the
    kernel rounds with integer steps, one rounding bias per rounding."""
    _on(monkeypatch, (7, 5))
    (k,) = _lower("rmsnorm", (4096, 4096), "bfloat16")
    assert "f32_to_bf16_cvt" not in k.source
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    assert r["bf16_cvts"] == 0 and r["bf16_bit_rounds"] == _roundings(k.source) > 0


@pytest.mark.slow
@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_every_model_cell_compiles_for_sm90_without_local_memory(monkeypatch):
    """Every default cell of bench/models.py, lowered as on the H200, compiles with no
    spills, stack frame or local memory; a vector load of 8 or 16 bytes in the source is
    one in the PTX, the first kernel of a row layout has vector loads (rows of 50257 in
    an aligned body with edges), and a bfloat16 cell rounds only with cvt.rn.bf16.f32."""
    _on(monkeypatch, (9, 0))
    kernels, cells = [], []
    for op, shape, dtype in models.DEFAULT_CELLS:
        lowered = _lower(op, shape, dtype)
        kernels += lowered
        cells += [(op, shape, dtype, i) for i in range(len(lowered))]
    for cell, k, r in zip(cells, kernels, compile_report(kernels)):
        assert r["ok"], (cell, r["error"])
        assert r["spill_bytes"] == r["stack_bytes"] == r["local_accesses"] == 0, (cell, r)
        if _wide_vector_load(k):
            assert r["vector_loads"] > 0, cell
        if cell[3] == 0 and k.layout.layout == "row":
            assert has_vector_load(k.source), cell
            assert _wide_vector_load(k) and r["vector_loads"] > 0, cell
        assert r["bf16_bit_rounds"] == 0 and r["bf16_cvts"] == _roundings(k.source), cell


# ---- column statistics: two blocks a multiprocessor -------------------------------------

COLUMN_CELLS = [((262144, 128), "bfloat16"), ((262144, 256), "float32"),
                ((32, 2048, 256), "float16")]


def _segment_kernel(shape, dtype):
    """The first kernel of batch-norm statistics: the partial sums of column segments."""
    k = _lower("bnstats", shape, dtype)[0]
    assert k.layout.layout == "col" and k.block == 1024 and k.grid > 132, k.layout
    return k


@pytest.mark.parametrize("shape,dtype", COLUMN_CELLS, ids=lambda v: str(v))
def test_column_statistics_keep_two_blocks_of_1024_a_multiprocessor(monkeypatch, shape, dtype):
    """A column layout's grid of 1024-thread blocks is sized as one wave of two blocks a
    multiprocessor: the kernel says so to the compiler (min_blocks_per_sm=2), and with
    float64 partials beside a float32 one (5 registers: float32 columns, whose mean is a
    float32 sum) its loop loads 16 chunks at once, not 32 (a w-th of them where it takes
    w columns a thread: the same bytes in flight); two-byte columns, whose mean is the
    variance's float64 sum, and suite column variance (4 registers of partials) keep 32."""
    _on(monkeypatch, (9, 0))
    k = _segment_kernel(shape, dtype)
    assert k.layout.min_blocks_per_sm == 2
    partials = [np.dtype(r.dtype).itemsize for r in k.kernel.reduces]
    assert partials == ([8, 8] if dtype != "float32" else [4, 8, 8]), partials
    assert k.layout.groups[0].chunks * k.kernel.columns == (16 if dtype == "float32" else 32)
    assert not k.layout.groups[0].resident
    suite_colvar = lower_for_gpu(lambda x: x.var(axis=0),
                                 (np.empty((65536, 1024), np.float32),)).kernels[0]
    assert suite_colvar.layout.min_blocks_per_sm == 2
    assert suite_colvar.layout.groups[0].chunks == 32


def test_column_layouts_of_scalar_loads_or_held_columns_take_no_floor(monkeypatch):
    """The two-block floor is for groups streamed down aligned rows only: column variance
    over rows of odd length (scalar loads) and a split one whose columns are held in
    registers need more than 32 registers a thread, and keep one block a multiprocessor."""
    _on(monkeypatch, (9, 0))
    (odd_rows,) = lower_for_gpu(lambda x: x.var(axis=0),
                                (np.empty((8191, 8193), np.float32),)).kernels
    held = lower_for_gpu(nm.jit(split=8, cluster=1, threads_per_row=32)(
        lambda x: x.var(axis=0)), (np.empty((8192, 8192), np.float32),)).kernels[0]
    for k in (odd_rows, held):
        assert k.layout.layout == "col" and k.layout.block_threads == 1024, k.layout
        assert k.grid > 132, k.grid
    assert held.layout.groups[0].resident and not odd_rows.layout.groups[0].resident
    assert odd_rows.layout.min_blocks_per_sm == held.layout.min_blocks_per_sm == 0


@pytest.mark.parametrize("shape,dtype", COLUMN_CELLS, ids=lambda v: str(v))
@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_column_statistics_fit_32_registers_without_spills(monkeypatch, shape, dtype):
    """Two 1024-thread blocks a multiprocessor leave 32 registers a thread: the segment
    kernel of batch-norm statistics compiles within them, with no spills or local memory."""
    _on(monkeypatch, (9, 0))
    (r,) = compile_report([_segment_kernel(shape, dtype)])
    assert r["ok"], r["error"]
    assert r["registers"] <= 32, r
    assert r["spill_bytes"] == r["stack_bytes"] == r["local_accesses"] == 0, r


@pytest.mark.parametrize("op,shape,dtype,threads", [
    ("cross_entropy", (2048, 50257), "float16", 128),
    ("logsumexp", (16384, 32000), "float16", 128),      # instead of 1024 threads holding it
    ("cross_entropy", (16384, 32000), "float32", 256),  # four-byte elements
    ("cross_entropy", (4096, 128256), "bfloat16", 256)], ids=lambda v: str(v))
def test_streamed_half_precision_rows_take_128_threads(monkeypatch, op, shape, dtype,
                                                       threads):
    """Rows streamed in one pass take 128 threads and 4 chunks an iteration where they hold
    at most 65536 elements of two bytes, else 256 and 8 (docs/heuristics.md#streamed-rows)."""
    _on(monkeypatch, (9, 0))
    k = _lower(op, shape, dtype)[0]
    plan = k.layout.groups[0]
    assert k.layout.split == 1 and not plan.resident, k.layout
    assert (k.layout.threads_per_row, plan.chunks) == (threads, 4 if threads == 128 else 8)


# ---- leading axes merge into rows ------------------------------------------------------

def _without_comments(source):
    lines = (re.sub(r"\s*#.*$", "", line) for line in source.splitlines())
    return [line for line in lines if line.strip()]


THREE_D = [(op, shape, dtype) for op, shape, dtype in models.DEFAULT_CELLS if len(shape) == 3]


@pytest.mark.parametrize("op,shape,dtype", THREE_D + [
    ("layernorm", (3, 7, 4096), "float16"), ("rmsnorm", (5, 333, 5120), "bfloat16"),
    ("bnstats", (5, 333, 5120), "float32")], ids=lambda v: str(v))
def test_batch_and_sequence_lower_as_one_axis_of_rows(monkeypatch, op, shape, dtype):
    """A contiguous (batch, sequence, hidden) input lowers as on sm_90 to the kernels of its
    (batch * sequence, hidden) matrix: same layouts, same sources but for comments (the
    float16 layernorm of (8, 2048, 4096) is the (16384, 4096) one)."""
    _on(monkeypatch, (9, 0))
    three = _lower(op, shape, dtype)
    two = _lower(op, (shape[0] * shape[1], shape[2]), dtype)
    assert len(three) == len(two)
    for a, b in zip(three, two):
        assert (a.grid, a.block, a.layout) == (b.grid, b.block, b.layout), op
        assert _without_comments(a.source) == _without_comments(b.source), op


# ---- the simulator still rounds as ml_dtypes does --------------------------------------

def _nearest_or_tie(got, ref64):
    """Where bfloat16 ``got`` is not ml_dtypes' rounding of float64 ``ref64``: allowed only
    one bfloat16 apart, where ref64 lies within the error of the kernel's float32 arithmetic
    (2**-16 relative: sums of a few dozen terms) of the midpoint between the two."""
    want = ref64.astype(BF16)
    differ = got.view(np.uint16) != want.view(np.uint16)
    g, w = got.astype(np.float64), want.astype(np.float64)
    mid = (g + w) / 2
    near_mid = np.abs(ref64 - mid) <= 2.0 ** -16 * np.abs(ref64)
    one_apart = np.abs(got.view(np.uint16).astype(np.int32) -
                       want.view(np.uint16).astype(np.int32)) == 1
    return differ & ~(near_mid & one_apart)


@pytest.mark.parametrize("op,shape", [("rmsnorm", (6, 72)), ("softmax", (2, 3, 40)),
                                      ("layernorm", (5, 64)), ("add_rmsnorm", (4, 56))],
                         ids=lambda v: str(v))
def test_bfloat16_outputs_are_ml_dtypes_rounding_of_the_reference(op, shape):
    """Every bfloat16 output element is ml_dtypes' rounding of the float64 result, but at
    ties the float32 computation cannot resolve (none at all in most runs)."""
    inputs = models.make_inputs(op, shape, "bfloat16", np.random.default_rng(7))
    got = nm.jit(models.np_ops()[op])(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    ref = models.reference(op, inputs)
    checked = 0
    for g, r in zip(got, ref):
        if g.dtype != BF16:
            continue
        if op == "add_rmsnorm" and g is got[1]:
            # rmsnorm of the bfloat16 sum the kernel holds, as float64
            r = models.reference("rmsnorm", [got[0], inputs[2]])[0]
        bad = _nearest_or_tie(g, r)
        assert not bad.any(), (op, g[bad][:4], r[bad][:4])
        checked += g.size
    assert checked > 0


def test_bfloat16_of_exact_float32_products_is_ml_dtypes_rounding():
    """Where the float32 product is exact (doubling), the kernel's bfloat16 is ml_dtypes'
    rounding of the float64 result bit for bit: at ties, past the largest bfloat16, in the
    subnormals; NaN stays NaN."""
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x3F80FFFF, 0x7E7FFFFF, 0x7EFF8000,
                     0x00008000, 0x80018000], np.uint32).view(np.float32)
    x = np.concatenate([ties, np.random.default_rng(3).standard_normal(200).astype(np.float32),
                        np.array([3e-39, -5e-40, 0.0, -0.0, np.inf, np.nan], np.float32)])
    got = nm.jit(lambda x: (x * 2).astype(ml_dtypes.bfloat16))(x)
    exact = x.astype(np.float64) * 2
    number = ~np.isnan(x)
    assert np.array_equal(got.view(np.uint16)[number], exact.astype(BF16).view(np.uint16)[number])
    assert np.isnan(got[~number].astype(np.float32)).all()
