"""Rows split across blocks (``split=``): each block holds a segment of a row and the blocks
of a row exchange their partial reductions through memory.

In the simulator (CI) blocks run one after another, so a split kernel runs once per exchange
(see Emitter.op_xsync): the segment indexing, the partials and their combination order are
all checked there against float64 NumPy. The PTX tier compiles the GPU form (atomics, fences,
no spills) and checks that long rows pick it; the gpu tests run it at real sizes.
"""
import numpy as np
import pytest

import numbamr as nm
from conftest import SIMULATOR
from helpers import check, has_vector_load, run_and_check, to_host
from numbamr.lowering.online import find_fusions
from numbamr.lowering.options import STREAM_UNROLL, KernelOptions, choose
from numbamr.runtime.device import clusters_available
from programs import BY_NAME, Program

SPLIT_PROGRAMS = ["softmax", "log_softmax", "logsumexp", "layernorm", "layernorm_stats",
                  "rmsnorm", "variance", "stddev", "zscore", "sum_and_max", "sum_max_min",
                  "centered_sum", "chain3", "chain4", "dict_outputs", "geometric_mean"]


def _lowered(fn, inputs):
    return fn.lower(*inputs).kernels


@pytest.mark.parametrize("name", SPLIT_PROGRAMS)
@pytest.mark.parametrize("split,rows,cols,options", [
    (2, 3, 256, {}),
    (4, 2, 512, {}),
    (2, 5, 192, dict(threads_per_row=8)),                 # three chunks a segment
    (4, 3, 1024, dict(threads_per_row=16, upcast=0, unroll=2)),   # segments streamed
    (2, 3, 512, dict(threads_per_row=8, stage=4096)),     # segments partly in shared memory
    (4, 3, 512, dict(cluster=1)),                         # the row's blocks are a cluster
    (2, 3, 1024, dict(threads_per_row=16, upcast=0, unroll=2, cluster=1)),
    (4, 3, 512, dict(online=0, cluster=1)),               # two exchanges where they depend
    (2, 5, 256, dict(layout="col", threads_per_row=4, rows_per_block=2)),  # tiles of rows
    (4, 7, 512, dict(threads_per_row=8, rows_per_block=4, cluster=1)),     # a ragged tile
    (3, 3, 768, {}),                                      # a split of any count
    (7, 2, 1792, dict(cluster=1)),
    (6, 3, 1536, dict(threads_per_row=16, upcast=0, unroll=2)),
], ids=["s2", "s4", "s2-t8", "s4-streamed", "s2-staged", "s4-cluster", "s2-streamed-cluster",
        "s4-two-exchanges", "s2-col-tiles", "s4-row-tiles-cluster", "s3", "s7-cluster",
        "s6-streamed"])
def test_split_rows_match_numpy(name, split, rows, cols, options):
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(split * 100 + cols), rows, cols)
    fn = nm.jit(split=split, **options)(p.fn)
    (k,) = _lowered(fn, inputs)
    rb = options.get("rows_per_block", 1)
    assert k.layout.split == split and k.grid == -(-rows // rb) * split
    # unforced, a split row is a cluster where the GPU launches clusters (never here in CI)
    cluster = bool(options["cluster"]) if "cluster" in options else \
        (not SIMULATOR and clusters_available())
    assert k.layout.cluster == cluster
    publish = "xsend(" if cluster else "xstore("      # k.source: the GPU's source
    assert (publish in k.source) == bool(k.kernel.reduces)
    waits = "xbar_wait(" in k.source or "xbar_wait_parity(" in k.source
    assert waits == (cluster and bool(k.kernel.reduces))
    assert ("arrive_and_wait(" in k.source) == (not cluster and bool(k.kernel.reduces))
    run_and_check(p, inputs, jitted=fn)


@pytest.mark.slow
@pytest.mark.parametrize("name", SPLIT_PROGRAMS)
@pytest.mark.parametrize("split,rows,cols,options", [
    (4, 3, 250, {}),                                      # pairs: segments of 64, the last 58
    (8, 2, 1000, dict(threads_per_row=16)),               # segments of 128, the last 104
    (4, 3, 999, {}),                                      # odd: segments of 250, the last 249
    (4, 3, 1030, dict(threads_per_row=16, upcast=0, unroll=2)),   # streamed, ragged
    (2, 3, 1030, dict(threads_per_row=16, upcast=0, unroll=2, zigzag=1)),
    (2, 3, 1040, dict(threads_per_row=16, upcast=0, unroll=2)),   # equal, last pass peeled
    (2, 3, 700, dict(threads_per_row=8, stage=4096)),     # partly in shared memory
    (4, 3, 1010, dict(cluster=1)),
    (2, 5, 251, dict(layout="col", threads_per_row=4, rows_per_block=2)),
    (3, 3, 999, {}),                                      # segments of 336, the last 327
    (7, 2, 1000, dict(cluster=1)),                        # segments of 144, the last 136
    (5, 3, 1030, dict(threads_per_row=16, upcast=0, unroll=2)),
    (3, 5, 251, dict(layout="col", threads_per_row=4, rows_per_block=2)),
], ids=["s4-pairs", "s8-t16", "s4-odd", "s4-streamed", "s2-streamed-zigzag",
        "s2-streamed-peeled", "s2-staged", "s4-cluster", "s2-col-tiles", "s3-odd",
        "s7-cluster", "s5-streamed", "s3-col-tiles"])
def test_split_rows_that_do_not_divide_match_numpy(name, split, rows, cols, options):
    """Rows that do not divide into whole steps of the split's blocks: segments of whole
    vectors, the last one shorter where the row's length is no multiple of them, each
    block masking where its own segment ends."""
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(split * 100 + cols), rows, cols)
    fn = nm.jit(split=split, **options)(p.fn)
    (k,) = _lowered(fn, inputs)
    seg, plan = k.layout.segment(k.kernel.groups[0]), k.layout.groups[0]
    step = k.layout.threads_per_row * plan.vector * (1 if plan.resident else plan.chunks)
    assert k.layout.split == split and (seg * split != cols or seg % step)
    assert seg % plan.vector == 0 and (split - 1) * seg < cols
    run_and_check(p, inputs, jitted=fn)


@pytest.mark.parametrize("options", [dict(split=4), dict(split=2, cluster=1, online=0),
                                     dict(split=4, threads_per_row=4, rows_per_block=4)])
def test_column_reductions_split_across_blocks_match_numpy(options):
    """Columns (the reduced axis strided) split across blocks when forced: a block holds a
    tile of adjacent columns over one segment of the rows, and each column's partials are
    exchanged. (Not chosen by the heuristics: not measured on a GPU yet.)"""
    p = BY_NAME["column_var"]
    inputs = p.make(np.random.default_rng(9), 512, 37)     # 37 columns: a ragged last tile
    fn = nm.jit(**options)(p.fn)
    (k,) = _lowered(fn, inputs)
    assert k.layout.layout == "col" and k.layout.split == options["split"]
    run_and_check(p, inputs, jitted=fn)
    (auto,) = _lowered(nm.jit(p.fn), inputs)
    assert auto.layout.split == 1


def test_split_rows_give_the_same_bits_every_call():
    p = BY_NAME["layernorm_stats"]
    inputs = p.make(np.random.default_rng(3), 4, 512)
    fn = nm.jit(split=4)(p.fn)
    first = [to_host(a) for a in fn(*inputs)]
    for _ in range(2):
        again = [to_host(a) for a in fn(*inputs)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_split_rows_with_nan_and_inf_as_numpy():
    x = np.random.default_rng(4).standard_normal((4, 256)).astype(np.float32)
    x[0, 200] = np.nan          # in the second segment only
    x[1, 10] = np.inf
    x[2, :] = -np.inf
    run_and_check(BY_NAME["softmax"], (x,), jitted=nm.jit(split=2)(BY_NAME["softmax"].fn))
    run_and_check(BY_NAME["sum_max_min"], (x,),
                  jitted=nm.jit(split=2)(BY_NAME["sum_max_min"].fn))


def _count_of_max(x):
    return (x == x.max(axis=-1, keepdims=True)).sum(axis=-1)


def _argmin_below_max(x):
    return (x.max(axis=-1, keepdims=True) - x).argmax(axis=-1)


# reductions whose partials are integers, bools or (value, index) pairs
INTEGER_PARTIALS = {
    "sum": lambda x: x.sum(axis=-1),
    "argmax_argmin": lambda x: (x.argmax(axis=-1), x.argmin(axis=-1)),
    "any_all": lambda x: ((x > 2).any(axis=-1), (x > 0).all(axis=-1)),
    "count_of_max": _count_of_max,              # an integer count after a max: two exchanges
    "argmin_below_max": _argmin_below_max,      # an arg-reduction after a max
}


def _integer_partial_inputs(rng, rows, cols):
    """Rows with ties across segments (the first index must win), int64 sums past 2**53,
    uint64 sums that wrap, and rows whose NaN, only maximum, only value above 2 or only value
    not above 0 is in the last segment."""
    small = rng.integers(1, 3, (rows, cols)).astype(np.int32)
    small[0, -7], small[1 % rows, -9] = 3, 0
    big = rng.integers(2 ** 52, 2 ** 53, (rows, cols), dtype=np.int64)
    wraps = rng.integers(2 ** 63, 2 ** 64 - 1, (rows, cols), dtype=np.uint64)
    floats = rng.standard_normal((rows, cols)).astype(np.float32)
    floats[0, -5] = np.nan
    floats[1 % rows, -3] = 100.0
    return {"int32": small, "int64": big, "uint64": wraps, "float32": floats}


@pytest.mark.slow
@pytest.mark.parametrize("name", INTEGER_PARTIALS)
@pytest.mark.parametrize("options,cols", [
    (dict(split=4), 1024), (dict(split=2, cluster=1), 1024),
    (dict(split=4, threads_per_row=8, rows_per_block=2), 1024),
    (dict(split=4), 1022), (dict(split=8, threads_per_row=16), 1001)],
    ids=["s4", "s2-cluster", "s4-row-tiles", "s4-ragged", "s8-odd"])
def test_integer_and_arg_partials_exchange_exactly(name, options, cols):
    """Integer, bool and arg-reduction partials cross a split row's exchange as int64 bits
    (floats as float64 bits): sums exact past 2**53, uint64 sums wrapping as NumPy's, the
    first of tied maxima and the first NaN winning across segments (equal ones, or a
    shorter last one)."""
    fn = INTEGER_PARTIALS[name]
    jitted = nm.jit(**options)(fn)
    for dt, x in _integer_partial_inputs(np.random.default_rng(7), 3, cols).items():
        (k,) = _lowered(jitted, (x,))
        assert k.layout.split == options["split"], dt
        check(fn, x, jitted=jitted)


@pytest.mark.parametrize("fn,shapes,why", [
    (lambda x: x.sum(axis=-1), [(4, 3)], "fill only 3 segments"),
    (lambda x: x.sum(axis=-1), [(4, 5)], "fill only 3 segments of 2"),
    (lambda x, y: x.sum(axis=-1) + y.max(axis=-1), [(4, 256), (4, 512)], "more than one loop"),
])
def test_split_refused_with_the_reason(fn, shapes, why):
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with pytest.raises(nm.NumbamrError, match=f"split=4.*{why}"):
        nm.jit(split=4)(fn).lower(*inputs)


def test_split_rows_of_nothing_give_the_identities():
    x = np.zeros((3, 0), np.float32)
    check(lambda x: (x.sum(axis=-1), x.max(axis=-1, initial=-1.0)), x,
          jitted=nm.jit(split=4)(lambda x: (x.sum(axis=-1), x.max(axis=-1, initial=-1.0))))


@pytest.mark.parametrize("value,why", [(0, "1..32, got 0"), (33, "1..32, got 33"),
                                       (2.0, "an integer, got 2.0")])
def test_split_option_is_checked(value, why):
    with pytest.raises(nm.NumbamrError, match=f"^option split must be .*{why}") as info:
        nm.jit(split=value)(lambda x: x.sum(axis=-1))
    assert "unknown option" not in str(info.value)     # a known option with a bad value


@pytest.mark.parametrize("options,why", [
    (dict(cluster=1, split=32), "cluster=1: a cluster holds at most 16 blocks"),
    (dict(cluster=2, split=4), "cluster must be 0 or 1"),
])
def test_cluster_option_is_checked(options, why):
    x = np.ones((4, 4096), np.float32)
    with pytest.raises(nm.NumbamrError, match=why):
        nm.jit(**options)(BY_NAME["softmax"].fn).lower(x)


def test_cluster_option_leaves_rows_that_are_not_split_alone():
    x = np.ones((4, 1024), np.float32)
    (k,) = _lowered(nm.jit(cluster=1)(BY_NAME["softmax"].fn), (x,))
    assert k.layout.split == 1 and not k.layout.cluster


def test_cluster_refused_before_compute_capability_9(monkeypatch):
    from numbamr.runtime import grids
    p = BY_NAME["softmax"]
    (k,) = _lowered(nm.jit(split=4, cluster=1)(p.fn), p.make(np.random.default_rng(0), 2, 2048))
    monkeypatch.setattr(grids, "arch", lambda: (8, 0))
    with pytest.raises(nm.NumbamrError, match="cluster=1 needs a GPU of compute capability 9.0"):
        grids.make_cluster(0, k)


@pytest.mark.slow
@pytest.mark.ptx
def test_cluster_rows_exchange_through_shared_memory_without_atomics():
    """A split row whose blocks are a cluster sends its partials to every block's shared
    memory (``st.async``, one per block of the row and partial) and waits on an mbarrier per
    exchange: one cluster barrier in all (arrive, wait), no arrival counts, no atomics, no
    spills."""
    from test_ptx import lower_for_gpu, compile_report
    rng = np.random.default_rng(0)
    kernels = []
    for name in ("softmax", "layernorm", "chain4"):
        p = BY_NAME[name]
        inputs = (np.empty((1024, 65536), np.float32),) + p.make(rng, 1, 65536)[1:]
        fn = nm.jit(cluster=1, persistent=0)(p.fn)
        kernels.append(lower_for_gpu(fn, inputs).kernels[0])
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        assert k.layout.split == 8 and k.layout.cluster
        exchanges = k.source.count("xbar_wait(")
        sends = k.source.count("xsend(")
        assert exchanges >= 1 and r["mbarrier_waits"] == exchanges, (k.name, r)
        assert r["async_stores"] == 8 * sends >= 8 * exchanges, (k.name, r)
        assert r["cluster_barriers"] == 2, (k.name, r)
        assert r["atomics"] == 0, (k.name, r)
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)


@pytest.mark.parametrize("clusters,split,cluster", [
    (True, 4, True), (True, 16, True), (True, 32, False), (False, 8, False)])
def test_split_rows_are_clusters_where_the_gpu_launches_them(clusters, split, cluster):
    x = np.ones((2, 8192), np.float32)
    (k,) = _lowered(nm.jit(BY_NAME["softmax"].fn), (x,))
    layout = choose(k.kernel, KernelOptions(split=split), simulator=True, clusters=clusters)
    assert layout.split == split and layout.cluster == cluster


def test_split_rows_staged_in_shared_memory_are_clusters():
    # GPU heuristics on a GPU that launches clusters: segments of 4096 over 32 threads hold
    # 64 values a thread in registers and stage the rest (GPU fuzz seed 141591), and the
    # segments still exchange through the cluster
    p = BY_NAME["zscore"]
    (k,) = _lowered(nm.jit(p.fn), p.make(np.random.default_rng(0), 2, 8192))
    layout = choose(k.kernel, KernelOptions(split=2, threads_per_row=32), simulator=False,
                    clusters=True)
    assert any(g.staged for g in layout.groups) and layout.cluster


@pytest.mark.parametrize("options,fused", [
    (dict(split=4, cluster=0), True),            # arrival counts: one exchange (online forms)
    (dict(split=4, cluster=1), False),           # a cluster: two exact exchanges
    (dict(split=4, cluster=1, online=1), True),
    (dict(split=4, cluster=0, online=0), False),
    (dict(split=1), False),                      # resident row: the second pass is free
    (dict(split=1, upcast=0), True),             # streamed row: one pass
    (dict(split=4, upcast=0, cluster=1), True),  # streamed segments: one pass each
])
def test_which_split_rows_use_the_online_forms(options, fused):
    p = BY_NAME["layernorm_stats"]
    (k,) = _lowered(nm.jit(p.fn), p.make(np.random.default_rng(0), 2, 4096))
    layout = choose(k.kernel, KernelOptions(**{"threads_per_row": 32, "upcast": 32, **options}),
                    simulator=True)
    assert layout.groups[0].resident == (options.get("upcast") != 0)
    assert bool(find_fusions(k.kernel, layout)) == fused


@pytest.mark.slow
@pytest.mark.ptx
def test_integer_and_arg_partials_compile_for_the_gpu():
    """Integer, bool and (value, index) partials compile in both exchanges of the GPU (a
    cluster's shared memory, the scratch in global memory) for every integer width, read
    back as int64 bits, without spills; two-pass integer rows of 65536 are split by the
    heuristics like float ones."""
    from test_ptx import lower_for_gpu, compile_report
    kernels = []
    for dt in (np.int8, np.uint32, np.int64, np.uint64, np.float16):
        x = np.empty((1024, 65536), dt)
        for name, fn in INTEGER_PARTIALS.items():
            for cluster in (0, 1):
                (k,) = lower_for_gpu(nm.jit(cluster=cluster)(fn), (x,)).kernels
                if name in ("count_of_max", "argmin_below_max"):
                    assert k.layout.split == 8 and k.layout.cluster == bool(cluster), (dt, name)
                    assert "xload_int(" in k.source, (dt, name)
                    kernels.append(k)
        kernels += [lower_for_gpu(nm.jit(split=8, cluster=c)(INTEGER_PARTIALS[n]), (x,))
                    .kernels[0] for n in ("sum", "argmax_argmin", "any_all") for c in (0, 1)]
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], (k.name, r["error"])
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)


@pytest.mark.slow
@pytest.mark.ptx
@pytest.mark.parametrize("cluster", [0, 1])
def test_long_two_pass_rows_are_split_and_compile_without_spills(cluster):
    """1024 x 65536 float32: rows that need two passes are split 8 ways (segments of 8192
    in registers); one-pass reductions stream with 256 threads a row, 8 chunks an iteration
    (unless the unroll is forced). Blocks counting
    arrivals exchange once (online forms); a cluster's blocks exchange twice where one
    reduce depends on another (rmsnorm has one reduce); with weights to keep and two
    exchanges (layernorm) a cluster loops over rows, waiting on exchanges by phase."""
    from test_ptx import lower_for_gpu, compile_report
    rng = np.random.default_rng(0)
    split, streamed, k_inputs = [], [], {}
    for name in ("softmax", "layernorm", "rmsnorm", "zscore", "sum_and_max", "variance"):
        p = BY_NAME[name]
        inputs = (np.empty((1024, 65536), np.float32),) + tuple(p.make(rng, 1, 65536)[1:])
        (k,) = lower_for_gpu(nm.jit(cluster=cluster)(p.fn), inputs).kernels
        k_inputs[name] = inputs
        (split if k.layout.split > 1 else streamed).append((name, k))
    assert [n for n, _ in split] == ["softmax", "layernorm", "rmsnorm", "zscore"]
    for name, k in split:
        assert k.layout.split == 8 and k.grid == 8192 and k.block == 256, name
        if cluster:
            want = 1 if name == "rmsnorm" else 2
            looped = name == "layernorm"
            assert k.layout.persistent == (2 if looped else 0), name
            wait = "xbar_wait_parity(" if looped else "xbar_wait("
            assert k.source.count(wait) == want, f"{name}: {want} exchanges"
        else:
            assert k.source.count("arrive_and_wait(") == 1, f"{name}: one exchange"
    assert [n for n, _ in streamed] == ["sum_and_max", "variance"]
    for name, k in streamed:
        assert k.block == 256 and not k.layout.groups[0].resident, name
        assert k.layout.groups[0].chunks == STREAM_UNROLL, name
        forced = lower_for_gpu(nm.jit(cluster=cluster, unroll=2)(BY_NAME[name].fn), k_inputs[name])
        assert forced.kernels[0].layout.groups[0].chunks == 2, name
    report = compile_report([k for _, k in split + streamed])
    for (name, k), r in zip(split + streamed, report):
        assert r["ok"], r["error"]
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (name, r)
        assert r["vector_bytes"] == [16], (name, r["vector_bytes"])


@pytest.mark.slow
@pytest.mark.ptx
@pytest.mark.parametrize("cols,vector,split", [(50000, 16, 7), (50257, 16, 8), (100000, 16, 14)])
def test_long_rows_that_do_not_divide_are_split_and_compile_without_spills(cols, vector, split):
    """Two-pass rows whose length is no multiple of the split (50000: 7 segments of 7144
    floats; 50257, odd: 8 of 6283) are split like those that are, each segment held in
    registers (not streamed twice), with 16-byte accesses (an odd row's body in aligned
    vectors, its head and tail scalar: docs/heuristics.md#row-edges)."""
    from test_ptx import lower_for_gpu, compile_report
    rng = np.random.default_rng(0)
    kernels = []
    for name in ("softmax", "layernorm", "rmsnorm", "zscore"):
        p = BY_NAME[name]
        inputs = (np.empty((1024, cols), np.float32),) + tuple(p.make(rng, 1, cols)[1:])
        (k,) = lower_for_gpu(nm.jit(p.fn), inputs).kernels
        assert k.layout.split == split and k.layout.groups[0].resident, name
        assert "seg_end = min(" in k.source, name       # the last segment is shorter
        kernels.append(k)
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)
        assert r["vector_bytes"] == ([vector] if vector else []), (k.name, r["vector_bytes"])


# the heuristics' split of a two-pass row of float32 (SPLIT_SEGMENT 8192, 256 threads a
# block holding whole chunks of 1024): from the fewest segments up to the next power of two,
# the count that pads least, a tie to more blocks
FULLEST_SPLIT = {65536: 8, 131072: 16, 50000: 7, 50257: 8, 100000: 14, 98304: 16, 40000: 8}


@pytest.mark.parametrize("cols", FULLEST_SPLIT)
def test_long_rows_split_into_the_segments_that_pad_least(monkeypatch, cols):
    """Each thread of a split row holds whole chunks of its segment: rows of 100000 go in
    14 segments of 7144 (7 chunks, all but full), not 16 of 6250 (the 7th chunk a tenth
    full); where two counts pad alike (50257 in 7 or 8: 8 chunks or 7), the larger wins."""
    (k,) = _lowered_for_gpu(monkeypatch, "softmax", 1024, cols)
    assert k.layout.split == FULLEST_SPLIT[cols], cols
    assert k.layout.groups[0].resident


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "zscore"])
@pytest.mark.parametrize("cols,options,kept", [
    (65536, None, True), (131072, None, True), (100000, None, False), (50000, None, False),
    (100352, {"split": 14}, False), (100352, {"split": 16}, False),
    (100000, {"evict_last": 1}, True), (65536, {"evict_last": 0}, False)])
def test_split_rows_load_under_evict_last_only_in_whole_power_of_two_segments(
        monkeypatch, name, cols, options, kept):
    """Rows written whole load their inputs under the L2 evict_last policy, except rows split
    in a count that is not a power of two (100000 in 14, 50000 in 7, 100352 in 14 whole
    segments of 7168) or into segments that end inside a chunk (100352 in 16); a forced
    ``evict_last`` wins either way. (Rows that a cluster loops over come by bulk copies
    instead, so the loop is off here.)"""
    options = dict(options or {}, persistent=0)
    (k,) = _lowered_for_gpu(monkeypatch, name, 1024, cols, options=options)
    assert k.layout.split > 1 and k.layout.groups[0].vector == 4, k.layout
    assert k.layout.evict_last == kept, k.layout
    assert ("vload_keep(" in k.source) == kept


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["softmax", "layernorm_stats", "rmsnorm", "zscore",
                                  "chain4", "log_softmax"])
@pytest.mark.parametrize("rows,cols,split,cluster", [
    (264, 65536, None, None), (264, 131072, None, None), (300, 4096, 4, None),
    (264, 32768, 32, None), (264, 65536, None, 1), (264, 65536, None, 0),
    (264, 131072, None, 1), (300, 4096, 2, 1), (264, 50000, None, None),
    (264, 50257, None, 1), (264, 50257, None, 0), (300, 4100, 4, 1), (264, 50000, 7, None),
    (264, 100000, 14, 1), (300, 4100, 3, 0)])
def test_split_rows_on_gpu(name, rows, cols, split, cluster):
    """Heuristic splits of long rows (7, 8 and 16 blocks a row) and forced ones (2, 3, 4, 7,
    14, 32), the row's blocks a cluster or not, rows that divide into the split and rows
    that do not (a shorter last segment), against float64 NumPy, and the same bits on a
    second call (CuPy arrays). At least 264 rows: fewer long rows are split by the scheduler into
    several kernels instead."""
    cp = pytest.importorskip("cupy")
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(rows + cols), rows, cols)
    options = {k: v for k, v in dict(split=split, cluster=cluster).items() if v is not None}
    fn = nm.jit(**options)(p.fn) if options else nm.jit(p.fn)
    (k,) = _lowered(fn, inputs)
    assert k.layout.split == (split or FULLEST_SPLIT[cols])
    if cluster is not None:
        assert k.layout.cluster == bool(cluster)
    run_and_check(p, inputs, jitted=fn)
    dev = [cp.asarray(a) for a in inputs]
    first, again = (fn(*dev), fn(*dev))
    first = first if isinstance(first, tuple) else (first,)
    again = again if isinstance(again, tuple) else (again,)
    assert all(np.array_equal(to_host(a), to_host(b)) for a, b in zip(first, again))


@pytest.mark.gpu
@pytest.mark.parametrize("name", INTEGER_PARTIALS)
@pytest.mark.parametrize("cluster", [0, 1])
def test_integer_and_arg_partials_on_gpu(name, cluster):
    """264 rows of 65536 (split 8 ways: by the heuristics where the row takes two passes,
    forced otherwise), exact against NumPy for int32/int64/uint64/float32 rows."""
    fn = INTEGER_PARTIALS[name]
    two_pass = name in ("count_of_max", "argmin_below_max")
    jitted = nm.jit(cluster=cluster) if two_pass else nm.jit(split=8, cluster=cluster)
    jitted = jitted(fn)
    for dt, x in _integer_partial_inputs(np.random.default_rng(11), 264, 65536).items():
        (k,) = _lowered(jitted, (x,))
        assert k.layout.split == 8 and k.layout.cluster == bool(cluster), dt
        check(fn, x, jitted=jitted)


@pytest.mark.gpu
def test_split_rows_with_torch_tensors_on_their_stream():
    """Torch in, torch out; the exchange buffers are torch's and zeroed on torch's stream."""
    torch = pytest.importorskip("torch")
    p = BY_NAME["layernorm"]
    inputs = p.make(np.random.default_rng(7), 264, 65536)
    fn = nm.jit(p.fn)
    assert _lowered(fn, inputs)[0].layout.split == 8
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        got = fn(*[torch.from_numpy(a).cuda() for a in inputs])
    stream.synchronize()
    assert isinstance(got, torch.Tensor) and got.is_cuda
    run_and_check(p, inputs, jitted=lambda *a: got.cpu().numpy())


class _FakeDriver:
    """The four driver calls _check_coresident makes, answering ``per_sm`` blocks a
    multiprocessor on ``sms`` multiprocessors."""

    def __init__(self, per_sm, sms):
        self.per_sm, self.sms = per_sm, sms

    def cuCtxGetDevice(self, ref):
        ref._obj.value = 0
        return 0

    def cuDeviceGetAttribute(self, ref, attr, dev):
        ref._obj.value = self.sms
        return 0

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, ref, handle, block, shared):
        ref._obj.value = self.per_sm
        return 0


@pytest.mark.parametrize("per_sm,sms,ok", [(1, 16, True), (1, 7, False), (2, 4, True),
                                           (0, 132, False)])
def test_a_split_larger_than_the_gpu_holds_at_once_is_refused(monkeypatch, per_sm, sms, ok):
    """The blocks of a split row wait for each other: a kernel whose row has more blocks
    than the GPU can hold at once would never finish, so the launcher refuses it."""
    from numbamr.runtime import cudadriver, grids
    p = BY_NAME["softmax"]
    (k,) = _lowered(nm.jit(split=8)(p.fn), p.make(np.random.default_rng(0), 2, 2048))
    monkeypatch.setattr(cudadriver, "driver", lambda: _FakeDriver(per_sm, sms))
    if ok:
        grids.check_coresident(0, k)
    else:
        with pytest.raises(nm.NumbamrError, match="split across 8 blocks.*holds only"):
            grids.check_coresident(0, k)


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [0, 1])
def test_split_rows_read_this_calls_partials(cluster):
    """Two calls on different data back to back: each row combines the partials its own
    blocks published in this call (a block that read too early would see the last call's)."""
    cp = pytest.importorskip("cupy")
    p = BY_NAME["layernorm_stats"]
    a = p.make(np.random.default_rng(11), 264, 65536)
    b = tuple(2.0 * x + 1.0 for x in a)
    fn = nm.jit(cluster=cluster)(p.fn)
    for _ in range(3):
        for inputs in (a, b):
            got = fn(*[cp.asarray(x) for x in inputs])
            run_and_check(p, inputs, jitted=lambda *_: got)


@pytest.mark.slow
@pytest.mark.ptx
def test_forced_column_splits_compile_without_spills():
    """Column variance at GPU sizes, split 8 ways when forced (tiles of 32 columns: one
    kernel, where unforced 8192 x 8192 takes two), with
    arrival counts and as a cluster, streamed or resident: each compiles for sm_90 without
    spills, with the exchange it was asked for."""
    from test_ptx import lower_for_gpu, compile_report
    p = BY_NAME["column_var"]
    kernels = []
    for options in (dict(split=8, cluster=0), dict(split=8, cluster=1),
                    dict(split=8, cluster=1, threads_per_row=32)):
        x = np.empty((8192, 8192), np.float32)
        (k,) = lower_for_gpu(nm.jit(**options)(p.fn), (x,)).kernels
        assert k.layout.layout == "col" and k.layout.split == 8 and k.layout.rows_per_block > 1
        kernels.append(k)
    assert kernels[2].layout.groups[0].resident
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)
        assert (r["cluster_barriers"] > 0) == k.layout.cluster
        assert (r["atomics"] > 0) == (not k.layout.cluster)


@pytest.mark.parametrize("options", [dict(split=4), dict(split=2, cluster=1, online=0)])
def test_forced_split_keeps_long_reductions_over_few_rows_in_one_kernel(options):
    """Unforced, a whole-array sum and a column variance of a tall array take two kernels
    (segments, then their combine); a forced split asks for one kernel whose rows are split
    across blocks instead, and gets the same results."""
    from numbamr.experimental import Knobs, knobs
    x = np.random.default_rng(5).standard_normal((2048, 24)).astype(np.float32) + 3

    def stats(x):
        return x.sum(), (x - x.mean(axis=0)).var(axis=0), x.max()
    with knobs(Knobs(split_min_extent=1024, split_min_extent_col=1024, split_min_segment=256)):
        assert len(nm.jit(stats).lower(x).kernels) > len(nm.jit(**options)(stats).lower(x).kernels)
        fn = nm.jit(**options)(stats)
        for k in fn.lower(x).kernels:
            assert k.layout.split == options["split"] or not k.kernel.reduces
        run_and_check(Program("stats", stats, None), (x,), jitted=fn)


def _lowered_for_gpu(monkeypatch, name, rows, cols, arch=(9, 0), options=None):
    """The GPU kernels of program ``name`` over ``rows`` x ``cols`` float32, lowered as for
    a GPU of compute capability ``arch`` (no GPU needed)."""
    from numbamr.runtime import device
    from test_ptx import lower_for_gpu
    monkeypatch.setattr(device, "arch", lambda: arch)
    p = BY_NAME[name]
    inputs = (np.empty((rows, cols), np.float32),) + tuple(
        p.make(np.random.default_rng(0), 1, cols)[1:])
    return lower_for_gpu(nm.jit(**options)(p.fn) if options else p.fn, inputs).kernels


def _wide_rows_lowered(monkeypatch, name, rows, arch=(9, 0), options=None):
    return _lowered_for_gpu(monkeypatch, name, rows, 262144, arch, options)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "variance", "sum_and_max"])
@pytest.mark.parametrize("clusters", [True, False])
def test_few_long_rows_stay_one_kernel_where_a_cluster_holds_them(monkeypatch, name, clusters):
    """128 rows of 65536, too few to fill the GPU a block a row: each row is split across an
    8-block cluster where the GPU launches clusters, one kernel (two-pass rows held in
    registers, one-pass ones combined in the cluster: docs/heuristics.md#few-rows), not the
    scheduler's chain of kernels (each of which reads the rows again, or combines the
    segments in a second launch); that chain where clusters do not launch."""
    ks = _lowered_for_gpu(monkeypatch, name, 128, 65536, (9, 0) if clusters else (8, 0))
    if clusters:
        assert len(ks) == 1, [k.name for k in ks]
        assert ks[0].layout.split == 8 and ks[0].layout.cluster
    else:
        assert len(ks) >= 2 and not any(k.layout.cluster for k in ks)


def _split_rows_match_on_gpu(name, shapes, laid_out):
    """Program ``name`` at each (rows, cols) of ``shapes`` on the GPU: its one kernel laid
    out as ``laid_out(layout, block)`` says, against float64 NumPy, and the same bits on a
    second call (CuPy arrays)."""
    cp = pytest.importorskip("cupy")
    p = BY_NAME[name]
    for rows, cols in shapes:
        inputs = p.make(np.random.default_rng(rows + cols), rows, cols)
        fn = nm.jit(p.fn)
        (k,) = _lowered(fn, inputs)
        assert laid_out(k.layout, k.block), (rows, cols, k.layout)
        run_and_check(p, inputs, jitted=fn)
        dev = [cp.asarray(a) for a in inputs]
        first, again = fn(*dev), fn(*dev)
        first = first if isinstance(first, tuple) else (first,)
        again = again if isinstance(again, tuple) else (again,)
        assert all(np.array_equal(to_host(a), to_host(b)) for a, b in zip(first, again))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sum_and_max", "variance", "logsumexp"])
def test_few_rows_read_once_split_in_a_cluster_on_gpu(name):
    """Rows reduced in one pass, too few to fill the GPU (1 to 100 of 50000 to 128256, one of
    odd length), are one kernel split across a cluster: against float64 NumPy, and the same
    bits on a second call (CuPy arrays)."""
    _split_rows_match_on_gpu(name, ((1, 65536), (16, 128256), (100, 50000), (2, 50257)),
                             lambda layout, block: layout.split > 1 and layout.cluster)


WIDE_ROWS = {"softmax": (8, 1024), "layernorm": (8, 1024), "rmsnorm": (8, 1024),
             "zscore": (8, 1024), "logsumexp": (16, 512), "variance": (16, 512)}


@pytest.mark.parametrize("name", list(WIDE_ROWS) + ["sum_and_max"])
def test_rows_longer_than_sixteen_segments_are_one_cluster_of_wider_blocks(monkeypatch, name):
    """256 rows of 262144 float32 (32 segments of 8192, more than a cluster holds): a kernel
    that writes rows is one kernel over clusters of 8 blocks of 1024 threads, and one that
    writes a value per row from reduces that depend on one another over clusters of 16 of
    512, each thread holding 32 values, not the scheduler's chain of kernels that reads the
    rows again. Sum + max (independent reduces, one pass) keeps its two kernels, and so does
    every program where the GPU launches no clusters or ``cluster=0`` is asked for."""
    ks = _wide_rows_lowered(monkeypatch, name, 256)
    if name not in WIDE_ROWS:
        assert len(ks) == 2 and not any(k.layout.cluster for k in ks)
        return
    (k,) = ks
    split, threads = WIDE_ROWS[name]
    assert (k.layout.split, k.block, k.grid) == (split, threads, 256 * split)
    assert k.layout.cluster and k.layout.groups[0].resident and not k.layout.groups[0].staged
    assert k.layout.groups[0].chunks * k.layout.groups[0].vector == 32
    assert len(_wide_rows_lowered(monkeypatch, name, 256, (8, 0))) >= 2
    assert len(_wide_rows_lowered(monkeypatch, name, 256, options=dict(cluster=0))) >= 2


@pytest.mark.parametrize("name,split", [("softmax", 8), ("variance", 1), ("logsumexp", 1)])
def test_many_rows_longer_than_sixteen_segments(monkeypatch, name, split):
    """1024 such rows fill the GPU unsplit: a row that is written whole is still held in a
    cluster (two passes otherwise), one reduced to a value streams in one pass. Where
    ``min_blocks_per_sm=4`` asks for more blocks a multiprocessor than 1024 threads allow,
    the row is split as before (32 blocks of 256 threads)."""
    (k,) = _wide_rows_lowered(monkeypatch, name, 1024)
    assert k.layout.split == split and k.layout.cluster == (split > 1)
    if split > 1:
        (k,) = _wide_rows_lowered(monkeypatch, name, 1024, options=dict(min_blocks_per_sm=4))
        assert (k.layout.split, k.block) == (32, 256)


@pytest.mark.parametrize("name", ["softmax", "zscore"])
def test_few_written_rows_of_at_most_40_values_a_thread_take_blocks_of_256(monkeypatch, name):
    """64 rows of 151936, too few to fill the GPU, written whole: 16 blocks of 256 threads
    (40 values a thread, two blocks a multiprocessor), not 8 of 1024; rows of 200000 (49
    values a thread there) and many rows keep 8 of 1024 (docs/heuristics.md#wide-clusters)."""
    (k,) = _lowered_for_gpu(monkeypatch, name, 64, 151936)
    assert (k.layout.split, k.block, k.grid) == (16, 256, 64 * 16) and k.layout.cluster
    plan = k.layout.groups[0]
    assert plan.resident and not plan.staged and plan.chunks * plan.vector <= 40
    for rows, cols in ((64, 200000), (256, 262144)):
        (k,) = _lowered_for_gpu(monkeypatch, name, rows, cols)
        assert (k.layout.split, k.block) == (8, 1024), (rows, cols)


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_few_written_rows_in_blocks_of_256_compile_without_spills(monkeypatch):
    """Softmax over 64 x 151936 in 16 blocks of 256 holds its 40 values a thread in
    registers, with 16-byte accesses."""
    from test_ptx import compile_report
    (k,) = _lowered_for_gpu(monkeypatch, "softmax", 64, 151936)
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, r
    assert r["vector_bytes"] == [16], r["vector_bytes"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["softmax", "zscore"])
def test_few_written_rows_in_blocks_of_256_on_gpu(name):
    """6 rows of 151936 and 3 of 140001 (a shorter last segment) in 16 blocks of 256,
    against float64 NumPy, and the same bits on a second call."""
    _split_rows_match_on_gpu(name, ((6, 151936), (3, 140001)),
                             lambda layout, block: (layout.split, block) == (16, 256) and
                             layout.cluster)


@pytest.mark.slow
@pytest.mark.ptx
def test_rows_of_wide_clusters_compile_without_spills(monkeypatch):
    """The kernels of 256 x 262144 fit their 32 values a thread in registers with 16-byte
    accesses: in blocks of 1024 threads (64 registers a thread) rmsnorm's weight is loaded
    with the outputs, after the exchange, not with the row (it spilled there)."""
    from test_ptx import compile_report
    kernels = [_wide_rows_lowered(monkeypatch, name, 256)[0] for name in WIDE_ROWS]
    rms = kernels[list(WIDE_ROWS).index("rmsnorm")]
    lines = rms.source.split("\n")
    exchange = min(i for i, line in enumerate(lines) if "# exchange #0" in line)
    weight = [i for i, line in enumerate(lines) if has_vector_load(line, "w")]
    assert weight and all(i > exchange for i in weight)
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], (k.name, r["error"])
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)
        assert r["vector_bytes"] == [16], (k.name, r["vector_bytes"])


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(WIDE_ROWS) + ["log_softmax", "chain4"])
def test_rows_of_wide_clusters_on_gpu(name):
    """Few rows of 262144 and 200000 (a shorter last segment) held in clusters of wider
    blocks, against float64 NumPy, and the same bits on a second call."""
    _split_rows_match_on_gpu(name, ((8, 262144), (5, 200000)),
                             lambda layout, block: layout.split in (8, 16) and layout.cluster
                             and block >= 512)


def _weighted_rms(x, w):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def _weighted_layernorm(x, w, b):
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b


@pytest.mark.parametrize("cluster", [0, 1])
@pytest.mark.parametrize("fn,early", [(_weighted_rms, True), (_weighted_layernorm, False)])
def test_a_split_rows_weight_is_loaded_before_the_exchange_where_it_fits(fn, early, cluster):
    """One weight (as many values as the row's own chunk) is loaded right after the chunk, so
    its latency hides behind the blocks' exchange; two would hold more registers than they
    save time (both measured at 1024 x 65536 on the H200) and stay with the outputs. Either
    way the results are NumPy's. (A cluster that loops over rows loads every weight once,
    before the loop; that layout is off here.)"""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 2048)).astype(np.float32)
    params = [rng.standard_normal(2048).astype(np.float32)
              for _ in range(fn.__code__.co_argcount - 1)]
    jf = nm.jit(fn, split=4, cluster=cluster, threads_per_row=64, persistent=0)
    (k,) = jf.lower(x, *params).kernels
    lines = k.source.split("\n")                   # the GPU's source: one vload a chunk
    exchange = min(i for i, line in enumerate(lines) if "# exchange #0" in line)
    weight = [i for i, line in enumerate(lines) if has_vector_load(line, "w")]
    assert len(weight) == k.layout.groups[0].chunks >= 2
    assert all(i < exchange for i in weight) == early
    want = fn(x.astype(np.float64), *[p.astype(np.float64) for p in params])
    np.testing.assert_allclose(jf(x, *params), want, rtol=2e-5, atol=2e-5)
