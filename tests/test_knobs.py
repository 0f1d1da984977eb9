"""Study knobs (numbamr.experimental): one frozen Knobs, set for a block, part of the key of
every signature compiled under it."""
import pickle
import threading
from dataclasses import replace

import numpy as np
import pytest

import numbamr as nm
from numbamr.experimental import DEFAULT, Knobs, current_knobs, knobs


def whole_sum(x):
    return x.sum(), x.max()


def _x():
    return np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)


def _check(got, x):
    want = whole_sum(x.astype(np.float64))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-5, atol=1e-5)


# the scheduler splits the whole-array reductions of _x() only under these
SMALL_SPLITS = Knobs(split_min_extent=64, split_min_extent_col=64, split_min_segment=16)


def test_the_default_knobs_lower_what_no_knobs_lower():
    x = _x()
    plain = nm.jit(whole_sum).lower(x, target="sm_90").as_text()
    with knobs(Knobs()) as k:
        assert k == DEFAULT and current_knobs() is DEFAULT
        assert nm.jit(whole_sum).lower(x, target="sm_90").as_text() == plain


def test_a_knob_that_changes_the_kernels_compiles_a_signature_of_its_own():
    x = _x()
    fn = nm.jit(whole_sum)
    _check(fn(x), x)
    one = fn.lower(x)
    with knobs(SMALL_SPLITS):
        _check(fn(x), x)
        split = fn.lower(x)
        assert len(fn._cache) == 2
    assert len(split.kernels) > len(one.kernels)        # segments, then their combine
    _check(fn(x), x)                                    # the first signature's kernels again
    assert len(fn._cache) == 2 and fn.lower(x).as_text() == one.as_text()


def test_a_knob_of_the_launch_alone_is_in_the_key_too():
    """A cap on a persistent grid's clusters changes no source, only the launch: a call
    under it must not take the kernels (and grids) made without it."""
    x = _x()
    fn = nm.jit(whole_sum)
    fn(x)
    with knobs(Knobs(persistent_max_clusters=2)):
        assert fn.lower(x).as_text() == nm.jit(whole_sum).lower(x).as_text()
        _check(fn(x), x)
    assert len(fn._cache) == 2
    assert {e for key in fn._cache for e in key if e[0] == "knobs"} == \
        {("knobs", DEFAULT), ("knobs", Knobs(persistent_max_clusters=2))}


def test_other_knobs_do_not_make_a_signature_dynamic():
    """A second signature of the same shapes under other knobs is not a second shape: its
    kernels stay laid out for their rows (dynamic=None lowers generic kernels only once a
    shape changes)."""
    fn = nm.jit(lambda x: x - x.mean(axis=1, keepdims=True))
    x = _x()
    fn(x)
    with knobs(Knobs(persistent_max_clusters=2)):
        fn(x)
    assert not any(c.lowered.generic for c in fn._cache.values())


def test_why_a_call_compiles_names_the_knobs_that_changed(monkeypatch, capsys):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    x = _x()
    fn = nm.jit(whole_sum)
    fn(x)
    with knobs(Knobs(split_min_blocks=100)):
        fn(x)
    assert "study knobs split_min_blocks 264 -> 100" in capsys.readouterr().err


def test_the_block_restores_the_knobs_before_it_even_when_it_raises():
    outer = Knobs(col_line=1)
    with knobs(outer):
        with pytest.raises(RuntimeError):
            with knobs(Knobs(col_line=2)):
                assert current_knobs().col_line == 2
                raise RuntimeError
        assert current_knobs() is outer
    assert current_knobs() is DEFAULT


def test_a_thread_started_in_the_block_has_the_default_knobs():
    seen = []
    with knobs(Knobs(col_line=1)):
        t = threading.Thread(target=lambda: seen.append(current_knobs()))
        t.start()
        t.join()
    assert seen == [DEFAULT]


def test_knobs_are_hashable_picklable_and_equal_by_value():
    a = Knobs(split_min_blocks=np.int64(128), persistent_hold_rows=np.bool_(True))
    b = Knobs(split_min_blocks=128, persistent_hold_rows=True)
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert type(a.split_min_blocks) is int and type(a.persistent_hold_rows) is bool
    assert pickle.loads(pickle.dumps(a)) == a
    assert {a: 1}[pickle.loads(pickle.dumps(b))] == 1
    with pytest.raises(AttributeError):
        a.col_line = 1                                  # frozen


@pytest.mark.parametrize("field,value,says", [
    ("split_min_blocks", -1, "at least 0"),
    ("split_min_extent", 0, "at least 1"),
    ("split_min_extent_col", 0, "at least 1"),
    ("split_min_segment", 0, "at least 1"),
    ("split_target_blocks", 2.5, "an integer"),
    ("col_line", True, "an integer"),
    ("persistent_max_clusters", 0, "at least 1"),
    ("persistent_hold_rows", 1, "True or False"),
    ("reciprocal_proofs", 0, "True or False"),
    ("split_mean_shared", "no", "True or False"),
    ("first_thread_tail", None, "True or False"),
    ("persistent_dependent", 4, "0, 1, 2 or 3"),
    ("bulk_piece", 100, "multiple of 16"),
    ("bulk_piece", 0, "multiple of 16"),
])
def test_an_invalid_knob_is_refused_by_name(field, value, says):
    with pytest.raises(nm.ArgumentError, match=f"Knobs.{field} must be .*{says}"):
        Knobs(**{field: value})


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _bf16_batch_stats(x):
    y = x.astype(np.float32)
    mu = y.mean(axis=0)
    return mu, ((y - mu) ** 2).mean(axis=0)


def _row_sums(x):
    return x.sum(axis=1), x.max(axis=1)


def _sources(low):
    return "\n".join(k.source for k in low.kernels)


@pytest.mark.parametrize("field,fn,shape,dtype,options,shows", [
    ("reciprocal_proofs", _softmax, (64, 72), np.float32, {},
     lambda low: "rc_q" not in _sources(low)),
    ("split_mean_shared", _bf16_batch_stats, (256, 72), np.float16, {},   # (split: SMALL_SPLITS)
     lambda low: all(np.dtype(r.dtype) == np.float64 for r in low.kernels[0].kernel.reduces)),
    ("first_thread_tail", _row_sums, (3, 300), np.float32, dict(threads_per_row=64),
     lambda low: "the rest needs only these threads" in _sources(low)),
])
def test_the_lowering_forms_kept_for_timing_switch_back(field, fn, shape, dtype, options,
                                                        shows):
    """Each switchable form of the lowering is in the kernels by default and gone under
    its knob set False, and both forms give NumPy's results."""
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    want = fn(x.astype(np.float64))
    for value in (True, False):
        base = SMALL_SPLITS if field == "split_mean_shared" else DEFAULT
        with knobs(replace(base, **{field: value})):
            jf = nm.jit(**options)(fn)
            assert shows(jf.lower(x)) == value
            got = jf(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=2e-5, atol=1e-6)


def test_knobs_takes_a_knobs():
    with pytest.raises(nm.ArgumentError, match="takes a Knobs, got dict"):
        with knobs({"col_line": 1}):
            pass
    with pytest.raises(TypeError):
        Knobs(no_such_knob=1)


@pytest.mark.gpu
def test_a_generated_call_path_serves_only_the_knobs_it_was_made_under():
    """A call under other knobs finds no generated path made without them (nor the other
    way round): each compiles its own signature and makes its own path."""
    import cupy as cp
    host = _x()
    x = cp.asarray(host)
    fn = nm.jit(whole_sum)
    fn(x)
    assert len(fn._fast) == 1
    with knobs(SMALL_SPLITS):
        _check([g.get() for g in fn(x)], host)
        _check([g.get() for g in fn(x)], host)          # its own path
    assert len(fn._cache) == 2 and len(fn._fast) == 2
    with knobs(Knobs(persistent_max_clusters=2)):
        fn(x)
    assert len(fn._cache) == 3
