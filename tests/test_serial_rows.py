"""Rows taken one after another by a block (option ``serial_rows``): the block moves on to
its next rows after storing the last ones' outputs, and what no row changes (a layernorm's
weight and bias) is loaded once, by the first rows, where rows are resident.

The simulator (CI) runs each case against float64 NumPy: split rows (a cluster or not,
fused or exact exchanges), rows that fit one block, tiles of rows, streamed and staged rows,
and row counts the turns do not divide. The PTX tier compiles the GPU forms."""
import re

import numpy as np
import pytest

import numbamr as nm
from helpers import run_and_check
from programs import BY_NAME
from test_ptx import compile_report, lower_for_gpu

PROGRAMS = ["layernorm", "rmsnorm", "softmax", "layernorm_stats", "zscore", "sum_and_max",
            "chain4"]


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("turns,rows,cols,options", [
    (2, 4, 512, dict(split=4)),                                   # split rows, two turns
    (3, 7, 512, dict(split=2, cluster=1)),                        # a ragged last tile
    (2, 6, 512, dict(split=4, cluster=1, online=0)),              # two exchanges a turn
    (2, 5, 300, {}),                                              # one block a row
    (4, 9, 64, dict(threads_per_row=16, rows_per_block=2)),       # tiles of rows, ragged
    (2, 5, 1024, dict(threads_per_row=32, upcast=0, unroll=2)),   # streamed rows
    (2, 3, 512, dict(threads_per_row=8, stage=4096)),             # partly in shared memory
], ids=["split", "split-cluster-ragged", "split-two-exchanges", "one-block", "tiles",
        "streamed", "staged"])
def test_rows_in_turn_match_numpy(name, turns, rows, cols, options):
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(turns * 1000 + cols), rows, cols)
    fn = nm.jit(serial_rows=turns, **options)(p.fn)
    kernels = fn.lower(*inputs).kernels
    k = kernels[-1]
    rb = k.layout.rows_per_block
    assert k.layout.serial_rows == turns
    assert k.grid == -(-k.kernel.nrows // (rb * turns)) * k.layout.split
    run_and_check(p, inputs, jitted=fn)


@pytest.mark.parametrize("name", ["vector_matrix", "row_shape_intermediate", "middle_axis",
                                  "column_var", "two_inputs", "dict_outputs"])
@pytest.mark.parametrize("turns", [2, 3])
def test_other_programs_in_turn_match_numpy(name, turns):
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(turns), 7, 96)
    run_and_check(p, inputs, jitted=nm.jit(serial_rows=turns)(p.fn))


def test_weights_are_loaded_once_for_all_turns():
    """A split layernorm taking 4 rows in turn loads its weight and bias in the first turn
    only (as many loads as for one row), and its rows 4 times as often."""
    p = BY_NAME["layernorm"]
    inputs = p.make(np.random.default_rng(0), 8, 65536)
    one, four = (lower_for_gpu(nm.jit(split=8, cluster=1, serial_rows=s)(p.fn), inputs)
                 .kernels[0] for s in (1, 4))
    assert all(g.resident for g in four.layout.groups)

    def loads(k, arg):              # vector loads, or element loads where there are none
        return len(re.findall(rf"= vload\({arg}, |= {arg}\[", k.source))
    x, w, b = (name for name, kind, _, _ in one.program.params[:3])
    assert loads(four, x) == 4 * loads(one, x) > 0
    assert loads(four, w) == loads(one, w) > 0 and loads(four, b) == loads(one, b) > 0
    assert four.grid == one.grid // 4


@pytest.mark.parametrize("value", [0, 33, 2.0])
def test_serial_rows_option_is_checked(value):
    with pytest.raises(nm.NumbamrError, match="serial_rows"):
        nm.jit(serial_rows=value)(BY_NAME["softmax"].fn).lower(np.zeros((4, 64), np.float32))


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_rows_in_turn_compile_for_sm90_without_spills(monkeypatch):
    """Lowered for an sm_90 GPU (clusters), a long-row layernorm taking 2 and 4 rows in
    turn compiles without spills; each turn has its own mbarrier waits and sends (no
    mbarrier is used twice), and the block count drops by the turns."""
    from numbamr.runtime import device
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    p = BY_NAME["layernorm"]
    inputs = p.make(np.random.default_rng(1), 1024, 65536)
    kernels = [lower_for_gpu(nm.jit(serial_rows=s)(p.fn), inputs).kernels[0] for s in (1, 2, 4)]
    reports = compile_report(kernels)
    base = reports[0]
    for turns, k, r in zip((1, 2, 4), kernels, reports):
        assert r["ok"], r["error"]
        assert k.layout.cluster and k.layout.split > 1
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (turns, r)
        assert r["mbarrier_waits"] == turns * base["mbarrier_waits"] > 0, (turns, r)
        assert r["async_stores"] == turns * base["async_stores"], (turns, r)
        assert k.grid * turns == kernels[0].grid
