"""Autotuning: the fastest candidate wins, forced options stay, the choice is kept on disk
and reused, candidates that disagree with the default layout are left out.

Without a GPU the tuner runs in the simulator with a stand-in clock (``tune.measure``)
that says how fast each layout is; on a GPU (marked ``gpu``) it times for real.
"""
import glob
import json
import os

import numpy as np
import pytest

import numbamr as nm
from numbamr import tune
from conftest import HAS_GPU
from programs import BY_NAME
from test_ptx import lower_for_gpu


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax64(x):
    return softmax(np.asarray(x, np.float64))


class FakeClock:
    """Seconds per call from the layout that just ran: ``speed(layout)``."""

    def __init__(self, speed):
        self.speed, self.last, self.timed = speed, None, []

    def run(self, real_run):
        def recording(compiled, *args, **kwargs):
            self.last = compiled.lowered.kernels[0].layout
            return real_run(compiled, *args, **kwargs)
        return recording

    def measure(self, call, ctx):
        call()
        self.timed.append(self.last)
        return self.speed(self.last)


@pytest.fixture
def tuning(monkeypatch, tmp_path):
    """Tuning on (in the simulator too), a private cache, and a clock the test sets."""
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tune, "applies", lambda simulator: True)

    def use(speed):
        clock = FakeClock(speed)
        monkeypatch.setattr(tune, "run", clock.run(tune.run))
        monkeypatch.setattr(tune, "measure", clock.measure)
        return clock
    use.dir = tmp_path
    return use


def _tune_files(root):
    return glob.glob(os.path.join(str(root), "tune", "*.json"))


def _x(rows=4, cols=256, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)


def test_the_fastest_candidate_wins_and_its_result_is_right(tuning):
    x = _x()
    default_t = nm.jit(softmax).lower(x).kernels[0].layout.threads_per_row
    clock = tuning(lambda layout: 1.0 / layout.threads_per_row)     # more threads: faster
    jf = nm.jit(softmax, autotune=True)
    got = jf(x)
    np.testing.assert_allclose(got, softmax64(x), rtol=1e-5, atol=1e-7)
    assert len(clock.timed) >= 3          # the heuristics' layout and at least two others
    (path,) = _tune_files(tuning.dir)
    with open(path) as f:
        record = json.load(f)
    assert record["options"] == {"threads_per_row": 2 * default_t}
    assert min(record["seconds_per_call"].values()) == pytest.approx(1.0 / (2 * default_t))
    (compiled,) = jf._cache.values()
    assert compiled.lowered.kernels[0].layout.threads_per_row == 2 * default_t


def test_tuning_says_on_stderr_what_it_timed_and_kept(tuning, capfd):
    x = _x()
    default_t = nm.jit(softmax).lower(x).kernels[0].layout.threads_per_row
    tuning(lambda layout: 1.0 / layout.threads_per_row)
    nm.jit(softmax, autotune=True)(x)
    lines = [line for line in capfd.readouterr().err.splitlines()
             if line.startswith("numbamr: autotuning softmax: ")]
    assert "the heuristics' layout" in lines[0] and "more to try" in lines[0]
    assert any(f"threads_per_row={2 * default_t}:" in line and " us" in line for line in lines)
    assert lines[-1].endswith(f"keeps threads_per_row={2 * default_t}")


def test_a_later_function_reuses_the_choice_without_timing(tuning, monkeypatch):
    x = _x()
    default_t = nm.jit(softmax).lower(x).kernels[0].layout.threads_per_row
    tuning(lambda layout: 1.0 / layout.threads_per_row)
    nm.jit(softmax, autotune=True)(x)

    def no_timing(layout):
        raise AssertionError("timed again although the choice is on disk")
    tuning(no_timing)
    compiled_layouts = []
    real = tune.make_launchers

    def recording(lowered, simulator):
        compiled_layouts.append(lowered.kernels[0].layout.threads_per_row)
        return real(lowered, simulator)
    monkeypatch.setattr(tune, "make_launchers", recording)
    again = nm.jit(softmax, autotune=True)
    assert again.lower(x).kernels[0].layout.threads_per_row == 2 * default_t
    np.testing.assert_allclose(again(x), softmax64(x), rtol=1e-5, atol=1e-7)
    (compiled,) = again._cache.values()
    assert compiled.lowered.kernels[0].layout.threads_per_row == 2 * default_t
    assert compiled_layouts == [2 * default_t]      # the stored choice's kernels only


def test_a_choice_is_kept_apart_for_other_study_knobs(tuning):
    """A study knob of the launch (a persistent grid's cap) changes no kernel source but
    may change the timings: a choice tuned without it is not taken under it."""
    from numbamr.experimental import Knobs, knobs
    x = _x()
    clock = tuning(lambda layout: 1.0 / layout.threads_per_row)
    nm.jit(softmax, autotune=True)(x)
    assert len(_tune_files(tuning.dir)) == 1
    timed = len(clock.timed)
    with knobs(Knobs(persistent_max_clusters=2)):
        np.testing.assert_allclose(nm.jit(softmax, autotune=True)(x), softmax64(x),
                                   rtol=1e-5, atol=1e-7)
    assert len(_tune_files(tuning.dir)) == 2 and len(clock.timed) > timed


def test_the_heuristics_layout_wins_when_it_is_fastest_and_that_is_kept(tuning):
    x = _x()
    default = nm.jit(softmax).lower(x).kernels[0].layout
    tuning(lambda layout: 1.0 if layout == default else 2.0)
    jf = nm.jit(softmax, autotune=True)
    jf(x)
    (path,) = _tune_files(tuning.dir)
    with open(path) as f:
        assert json.load(f)["options"] == {}
    assert jf.lower(x).kernels[0].layout == default


def test_a_candidate_within_the_margin_does_not_replace_the_heuristics(tuning):
    x = _x()
    default = nm.jit(softmax).lower(x).kernels[0].layout
    slightly = 1.0 - tune.MARGIN / 2          # faster, but by less than timing noise
    tuning(lambda layout: 1.0 if layout == default else slightly)
    jf = nm.jit(softmax, autotune=True)
    jf(x)
    (path,) = _tune_files(tuning.dir)
    with open(path) as f:
        record = json.load(f)
    assert record["options"] == {}
    assert min(record["seconds_per_call"].values()) == pytest.approx(slightly)
    assert jf.lower(x).kernels[0].layout == default


def test_the_stored_choice_names_its_function_and_kernels(tuning):
    x = _x()
    tuning(lambda layout: 1.0 / layout.threads_per_row)
    nm.jit(softmax, autotune=True)(x)
    (path,) = _tune_files(tuning.dir)
    with open(path) as f:
        record = json.load(f)
    default = nm.jit(softmax).lower(x).kernels
    assert record["function"] == "softmax"
    assert record["kernels"] == [f"{k.name} grid={k.grid} block={k.block}" for k in default]


def test_a_candidate_that_lowers_to_the_default_kernels_is_not_timed(tuning):
    x = _x(4, 64)      # 32 threads a row stream one chunk each: a longer unroll changes nothing
    jf = nm.jit(softmax, autotune=True, upcast=0, threads_per_row=32)
    default = nm.jit(softmax, upcast=0, threads_per_row=32).lower(x)
    assert {"unroll": 2} in tune.candidates(default, jf.options)
    clock = tuning(lambda layout: 1.0)
    np.testing.assert_allclose(jf(x), softmax64(x), rtol=1e-5, atol=1e-7)
    assert len(clock.timed) == len(set(clock.timed)) >= 2     # each layout timed once
    (path,) = _tune_files(tuning.dir)
    with open(path) as f:
        assert "unroll=2" not in json.load(f)["seconds_per_call"]


def test_forced_options_are_never_tuned(tuning):
    x = _x()
    clock = tuning(lambda layout: 1.0 / layout.threads_per_row)
    jf = nm.jit(softmax, autotune=True, threads_per_row=32)
    np.testing.assert_allclose(jf(x), softmax64(x), rtol=1e-5, atol=1e-7)
    assert clock.timed and all(layout.threads_per_row == 32 for layout in clock.timed)
    for choice in tune.candidates(jf.lower(x), jf.options):
        assert "threads_per_row" not in choice


def test_a_candidate_that_disagrees_is_left_out(tuning, monkeypatch):
    x = _x()
    clock = tuning(lambda layout: 0.5 if layout.blocks_per_sm == 2 else 1.0)
    real = tune._host_outputs

    def spoiled(result):            # the blocks_per_sm=2 layout computes something else
        out = real(result)
        return [o + 1 for o in out] if clock.last.blocks_per_sm == 2 else out
    monkeypatch.setattr(tune, "_host_outputs", spoiled)
    jf = nm.jit(softmax, autotune=True)
    with pytest.warns(RuntimeWarning, match="blocks_per_sm=2 disagrees"):
        jf(x)
    (compiled,) = jf._cache.values()
    assert compiled.lowered.kernels[0].layout.blocks_per_sm != 2
    assert all(layout.blocks_per_sm != 2 for layout in clock.timed)


def test_without_the_disk_cache_nothing_is_written(tuning, monkeypatch):
    monkeypatch.setenv("NUMBAMR_CACHE", "0")
    x = _x()
    clock = tuning(lambda layout: 1.0 / layout.threads_per_row)
    np.testing.assert_allclose(nm.jit(softmax, autotune=True)(x), softmax64(x),
                               rtol=1e-5, atol=1e-7)
    assert len(clock.timed) >= 3
    assert not _tune_files(tuning.dir)


def test_candidates_change_one_option_each_and_are_valid():
    x = _x(64, 8192)
    lowered = nm.jit(softmax).lower(x)
    options = nm.KernelOptions()
    cands = tune.candidates(lowered, options)
    assert cands[0] == {}
    assert all(len(c) == 1 for c in cands[1:])
    assert len({tuple(sorted(c.items())) for c in cands}) == len(cands)
    for c in cands:
        nm.KernelOptions(**c)       # raises on an out-of-range value


def test_a_streamed_row_is_tried_with_twice_its_unroll():
    x = _x(4, 4096)
    lowered = nm.jit(softmax, upcast=0, unroll=3).lower(x)
    (plan,) = lowered.kernels[0].layout.groups
    assert not plan.resident and plan.chunks == 3
    cands = tune.candidates(lowered, nm.KernelOptions(upcast=0))
    assert {"unroll": 6} in cands
    assert not any("unroll" in c for c in tune.candidates(lowered, nm.KernelOptions(unroll=3)))


def test_short_rows_are_tried_in_blocks_of_a_quarter_and_four_times_the_threads():
    """Rows of 1024 held in registers: whatever block the heuristics chose, the tuner also
    times the same threads a row in blocks with four times fewer or more rows (where they
    fit in 1024 threads)."""
    x = np.empty((65536, 1024), np.float32)
    for fn in (softmax, BY_NAME["variance"].fn):
        lowered = lower_for_gpu(fn, (x,))
        layout = lowered.kernels[0].layout
        t, rb = layout.threads_per_row, layout.rows_per_block
        cands = tune.candidates(lowered, nm.KernelOptions())
        blocks = {t * c["rows_per_block"] for c in cands if "rows_per_block" in c}
        assert blocks == {b for b in (t * rb // 4, t * rb * 4) if t <= b <= 1024}, fn
        assert blocks
    forced = tune.candidates(lower_for_gpu(softmax, (x,)), nm.KernelOptions(rows_per_block=1))
    assert not any("rows_per_block" in c for c in forced)


def test_the_l2_policy_is_tried_the_other_way_on_sm80_and_newer(monkeypatch):
    """On a GPU with L2 eviction policies the tuner also times the loads the other way:
    plain for a kernel that writes whole rows, under evict_last for one that writes a
    value per row. Without such a GPU (the choice would change nothing) it does not."""
    from numbamr.runtime import device
    x = np.empty((4096, 1024), np.float32)
    variance = BY_NAME["variance"].fn
    monkeypatch.setattr(device, "arch", lambda: (7, 5))
    assert not any("evict_last" in c
                   for c in tune.candidates(lower_for_gpu(softmax, (x,)), nm.KernelOptions()))
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    for fn, flipped in ((softmax, 0), (variance, 1)):
        cands = tune.candidates(lower_for_gpu(fn, (x,)), nm.KernelOptions())
        assert {"evict_last": flipped} in cands, fn
    forced = tune.candidates(lower_for_gpu(softmax, (x,)), nm.KernelOptions(evict_last=1))
    assert not any("evict_last" in c for c in forced)


def test_results_agree_up_to_the_rounding_of_their_dtype():
    base = np.linspace(1, 2, 64)
    half, single = np.dtype(np.float16), np.dtype(np.float32)
    near = base * (1 + 5e-3)            # another order of reduction, rounded to 11 bits
    assert tune._agree([near.astype(half)], [base.astype(half)], [(half, (64,))])
    assert not tune._agree([near.astype(single)], [base.astype(single)], [(single, (64,))])
    assert tune._agree([(base * (1 + 1e-6)).astype(single)], [base.astype(single)],
                       [(single, (64,))])
    ints = np.arange(64)
    assert tune._agree([ints], [ints.copy()], [(ints.dtype, (64,))])
    assert not tune._agree([ints + (ints == 3)], [ints], [(ints.dtype, (64,))])
    assert not tune._agree([base[:32]], [base[:32].reshape(4, 8)], [(base.dtype, (32,))])


def test_autotune_must_be_a_bool():
    with pytest.raises(nm.ArgumentError, match="autotune must be True or False"):
        nm.jit(softmax, autotune=1)


@pytest.mark.skipif(HAS_GPU, reason="kernels run on the GPU here, not in the simulator")
def test_no_tuning_in_the_simulator_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(tmp_path))

    def no_timing(call, ctx):
        raise AssertionError("timed in the simulator")
    monkeypatch.setattr(tune, "measure", no_timing)
    x = _x()
    np.testing.assert_allclose(nm.jit(softmax, autotune=True)(x), softmax64(x),
                               rtol=1e-5, atol=1e-7)
    assert not _tune_files(tmp_path)


@pytest.mark.gpu
def test_tuning_on_the_gpu_times_candidates_and_keeps_the_fastest(monkeypatch, tmp_path):
    import cupy
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(tmp_path))
    x = _x(1024, 4096)
    xd = cupy.asarray(x)
    jf = nm.jit(softmax, autotune=True)
    got = cupy.asnumpy(jf(xd))
    np.testing.assert_allclose(got, softmax64(x), rtol=1e-5, atol=1e-7)
    (path,) = _tune_files(tmp_path)
    with open(path) as f:
        record = json.load(f)
    times = record["seconds_per_call"]
    assert len(times) >= 3 and all(t > 0 for t in times.values())
    label = ",".join(f"{k}={v}" for k, v in record["options"].items()) or "heuristics"
    keep_default = times["heuristics"] * (1 - tune.MARGIN)
    if label == "heuristics":
        assert min(times.values()) >= keep_default
    else:
        assert times[label] == min(times.values()) < keep_default
    (compiled,) = jf._cache.values()
    assert jf.lower(xd).kernels[0].source == compiled.lowered.kernels[0].source


def test_a_candidate_that_cannot_run_is_left_out_with_a_warning(tuning, monkeypatch):
    x = _x()
    clock = tuning(lambda layout: 0.5 if layout.blocks_per_sm == 2 else 1.0)
    real = tune.make_launchers

    def failing(lowered, simulator):
        if lowered.kernels[0].layout.blocks_per_sm == 2:
            raise RuntimeError("too many resources requested for launch")
        return real(lowered, simulator)
    monkeypatch.setattr(tune, "make_launchers", failing)
    jf = nm.jit(softmax, autotune=True)
    with pytest.warns(RuntimeWarning, match="blocks_per_sm=2 could not compile"):
        np.testing.assert_allclose(jf(x), softmax64(x), rtol=1e-5, atol=1e-7)
    assert all(layout.blocks_per_sm != 2 for layout in clock.timed)


def test_an_unreadable_stored_choice_is_tuned_again(tuning):
    x = _x()
    clock = tuning(lambda layout: 1.0 / layout.threads_per_row)
    nm.jit(softmax, autotune=True)(x)
    (path,) = _tune_files(tuning.dir)
    with open(path, "w") as f:
        json.dump({"options": {"no_such_option": 3}}, f)
    clock.timed.clear()
    np.testing.assert_allclose(nm.jit(softmax, autotune=True)(x), softmax64(x),
                               rtol=1e-5, atol=1e-7)
    assert len(clock.timed) >= 3
    with open(path) as f:
        assert "no_such_option" not in json.load(f)["options"]
