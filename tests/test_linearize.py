"""Properties of the linear program itself (not only of results), for every catalogue program
under several forced layouts: scopes, shared arrays, reduce order, ifs, hoisting, loop sharing.
"""
import numpy as np
import pytest

import numbamr as nm
from numbamr.lowering.linearize import Instr
from numbamr.lowering.verify import verify, VerifyError
from programs import PROGRAMS, BY_NAME
from test_ptx import lower_for_gpu
from test_constant import _cross_entropy

LAYOUTS = [
    dict(),
    dict(threads_per_row=64, rows_per_block=2),                  # cross-warp combine
    dict(threads_per_row=256, rows_per_block=1, upcast=0, unroll=2),   # loops over chunks
    dict(threads_per_row=4, rows_per_block=16, layout="col"),
]


def programs_for(options, rows=6, cols=300):
    rng = np.random.default_rng(0)
    for p in PROGRAMS:
        for k in lower_for_gpu(nm.jit(**options)(p.fn), p.make(rng, rows, cols)).kernels:
            yield p.name, k.program


def blocks(program):
    """(instr, stack of open blocks) for each instruction."""
    stack = []
    for ins in program.instrs:
        if ins.op in ("ENDIF", "ENDLOOP"):
            stack.pop()
        yield ins, tuple(stack)
        if ins.op in ("IF", "LOOP"):
            stack.append(ins.op)


@pytest.mark.parametrize("options", LAYOUTS, ids=str)
def test_each_reduce_owns_its_shared_arrays(options):
    for name, prog in programs_for(options):
        owners = {}
        for n, _, _, rid in prog.shared:
            assert n not in owners, f"{name}: shared array {n} declared twice"
            owners[n] = rid
        for ins in prog.instrs:
            if ins.op in ("SHARED_STORE", "SHARED_LOAD"):
                assert owners[ins.srcs[0]] == ins.arg[1], f"{name}: {ins}"
        combining = {int(ins.arg.split("#")[1].split()[0]) for ins in prog.instrs
                     if ins.op == "COMMENT" and ins.arg.startswith("combine #")}
        if prog.layout.threads_per_row > 32 or (prog.layout.layout == "col" and
                                                prog.layout.threads_per_row > 1):
            assert combining <= set(owners.values()), f"{name}: a reduce without its own array"


@pytest.mark.parametrize("options", LAYOUTS, ids=str)
def test_reduces_render_deepest_first(options):
    for name, prog in programs_for(options):
        first_acc, result = {}, {}
        by_name = {r.name: r.id for r in prog.kernel.reduces}
        acc_owner = {}
        for i, ins in enumerate(prog.instrs):
            if ins.op == "DEFINE_ACC":
                acc_owner[ins.out[0]] = next(rid for n, rid in sorted(
                    by_name.items(), key=lambda kv: -len(kv[0]))
                    if ins.out[0].startswith(f"acc_{n}"))
            if ins.op in ("ACC", "ONLINE"):
                first_acc.setdefault(acc_owner[ins.out[0]], i)
            if ins.op == "ALU" and ins.out[0] in by_name:
                result[by_name[ins.out[0]]] = i
        for r in prog.kernel.reduces:
            for d in r.deps:
                if r.id in first_acc:
                    assert result[d] < first_acc[r.id], f"{name}: #{r.id} accumulates before #{d}"
                else:           # computed in one pass with its dependency (online form)
                    assert d in first_acc and result[d] <= result[r.id], name


def test_order_does_not_follow_the_program_text():
    def dependent_first(x):
        return (x - x.mean(1, keepdims=True)).sum(1), x.mean(1)

    def dependent_last(x):
        return x.mean(1), (x - x.mean(1, keepdims=True)).sum(1)
    x = np.zeros((4, 50), np.float32)
    for fn in (dependent_first, dependent_last):
        k = lower_for_gpu(fn, (x,)).kernels[0]
        depths = [r.depth for r in k.kernel.reduces]
        assert depths == sorted(depths) and len(k.kernel.reduces) == 2


@pytest.mark.parametrize("options", LAYOUTS, ids=str)
def test_ifs_close_before_barriers_and_kernel_end(options):
    for name, prog in programs_for(options):
        for ins, stack in blocks(prog):
            if ins.op in ("BARRIER", "SHFL"):
                assert "IF" not in stack, f"{name}: {ins.op} inside an if block"
        depth = 0
        for ins in prog.instrs:
            depth += ins.op in ("IF", "LOOP")
            depth -= ins.op in ("ENDIF", "ENDLOOP")
        assert depth == 0, f"{name}: {depth} blocks left open"


@pytest.mark.parametrize("options", LAYOUTS, ids=str)
def test_no_value_used_outside_its_scope(options):
    for name, prog in programs_for(options):
        verify(prog)      # raises VerifyError on any out-of-scope use


def test_verifier_catches_a_value_used_after_its_loop():
    # rows of two whole iterations and a partial one: a loop, then its last iteration
    prog = next(p for n, p in programs_for(LAYOUTS[2], cols=5000) if n == "softmax")
    inside = next(i for i, ins in enumerate(prog.instrs) if ins.op == "LOOP")
    defined = next(ins.out[0] for ins in prog.instrs[inside + 1:] if ins.out)
    prog.instrs.append(Instr("STORE", (), (prog.params[-1][0], defined), arg="0"))
    with pytest.raises(VerifyError, match="outside the scope"):
        verify(prog)


def test_verifier_catches_a_barrier_inside_an_if():
    prog = next(p for n, p in programs_for(LAYOUTS[1]) if n == "softmax")
    prog.instrs[-1:-1] = [Instr("IF", (), ("lane",), arg="lane == 0"),
                          Instr("BARRIER", arg=(0,)), Instr("ENDIF")]
    with pytest.raises(VerifyError, match="inside an if"):
        verify(prog)


def test_verifier_catches_a_barrier_after_an_exit():
    prog = next(p for n, p in programs_for(LAYOUTS[1]) if n == "softmax")
    prog.instrs[-1:-1] = [Instr("EXIT", (), ("lane",), arg="lane == 0"),
                          Instr("BARRIER", arg=(0,))]
    with pytest.raises(VerifyError, match="after an exit"):
        verify(prog)


def test_verifier_catches_an_exit_inside_a_block():
    prog = next(p for n, p in programs_for(LAYOUTS[1]) if n == "softmax")
    prog.instrs[-1:-1] = [Instr("IF", (), ("lane",), arg="lane < 4"),
                          Instr("EXIT", (), ("lane",), arg="lane == 0"), Instr("ENDIF")]
    with pytest.raises(VerifyError, match="exit inside a block"):
        verify(prog)


def test_verifier_catches_an_empty_block():
    """An if or loop with nothing in it (not even a comment) is not Python."""
    prog = next(p for n, p in programs_for(LAYOUTS[1]) if n == "softmax")
    prog.instrs[-1:-1] = [Instr("IF", (), ("lane",), arg="lane == 0"), Instr("ENDIF")]
    with pytest.raises(VerifyError, match="empty"):
        verify(prog)


def test_loop_invariant_work_sits_outside_loops():
    for name, prog in programs_for(LAYOUTS[2]):
        inside = []
        for ins, stack in blocks(prog):
            if ins.op == "LOOP":
                inside.append(set(ins.out))
                continue
            if ins.op == "ENDLOOP":
                inside.pop()
                continue
            if not inside or ins.op in ("IF", "ENDIF", "COMMENT"):
                if inside:
                    inside[-1].update(ins.out)
                continue
            assert set(ins.srcs) & inside[-1], \
                f"{name}: {ins} in a loop depends on nothing the loop defines"
            inside[-1].update(ins.out)


def _scaled_row_sum(x, s):
    return x.sum(axis=1) * s + s


@pytest.mark.parametrize("options", [dict(upcast=0, threads_per_row=32),
                                     dict(layout="col", threads_per_row=16, rows_per_block=8)],
                         ids=["row", "col"])
def test_loads_only_row_outputs_read_come_before_the_passes(options):
    """A value loaded once a row and read only by the row-level outputs (here a scale; a
    split variance's shift in its combine kernel) is loaded in the prologue, where its
    latency hides behind the pass, not after the last combine; the sums are NumPy's."""
    rng = np.random.default_rng(3)
    x, s = rng.standard_normal((40, 300)).astype(np.float32), rng.random(40).astype(np.float32)
    if options.get("layout") == "col":
        x = np.ascontiguousarray(x.T)
        fn = lambda x, s: x.sum(axis=0) * s + s                     # noqa: E731
    else:
        fn = _scaled_row_sum
    jf = nm.jit(**options)(fn)
    prog = jf.lower(x, s).kernels[0].program
    ops = [(ins.op, ins.srcs[:1]) for ins in prog.instrs]
    s_name = next(n for n, kind, _, _ in prog.params if kind == "in" and n != prog.params[0][0])
    first_s = next(i for i, (op, srcs) in enumerate(ops) if op == "LOAD" and srcs == (s_name,))
    first_pass = next(i for i, (op, _) in enumerate(ops) if op in ("LOOP", "PASS"))
    assert first_s < first_pass, prog.instrs[first_s]
    got = jf(x, s)
    want = fn(x.astype(np.float64), s.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-5)


@pytest.mark.parametrize("options", [dict(upcast=0, threads_per_row=32), dict()], ids=str)
def test_independent_reduces_share_one_loop(options):
    x = np.zeros((8, 4096), np.float32)
    prog = lower_for_gpu(nm.jit(**options)(BY_NAME["sum_max_min"].fn), (x,)).kernels[0].program
    region, regions = None, []
    for ins in prog.instrs:
        if ins.op in ("LOOP", "PASS"):
            region = set()
        elif ins.op in ("ENDLOOP", "ENDPASS"):
            regions.append(region)
            region = None
        elif ins.op == "ACC" and region is not None:
            region.add(ins.out[0])
    with_acc = [r for r in regions if r]
    assert len(with_acc) == 1 and len(with_acc[0]) == 3


def test_dependent_reduces_do_not_share_a_loop():
    x = np.zeros((8, 4096), np.float32)
    prog = lower_for_gpu(nm.jit(upcast=0)(BY_NAME["chain4"].fn), (x,)).kernels[0].program
    loops_with_acc = 0
    region = None
    for ins in prog.instrs:
        if ins.op == "LOOP":
            region = set()
        elif ins.op == "ENDLOOP":
            loops_with_acc += bool(region)
            region = None
        elif ins.op == "ACC" and region is not None:
            region.add(ins.out[0])
    assert loops_with_acc == 4


def test_resident_rows_are_loaded_once():
    """With the row in registers, every input element is loaded by exactly one instruction."""
    for name in ("softmax", "layernorm", "variance", "logsumexp", "chain4"):
        p = BY_NAME[name]
        k = lower_for_gpu(p.fn, p.make(np.random.default_rng(0), 64, 8192)).kernels[0]
        assert all(g.resident for g in k.layout.groups), name
        loads = [ins for ins in k.program.instrs if ins.op in ("LOAD", "VLOAD")
                 and ins.srcs[0] == k.program.params[0][0]]
        per_thread = 8192 // k.layout.threads_per_row
        width = k.layout.groups[0].vector
        assert len(loads) * width == per_thread, name


@pytest.mark.parametrize("name,loops", [("variance", 1), ("logsumexp", 1), ("softmax", 2),
                                        ("layernorm", 2), ("column_var", 1)])
def test_streamed_dependent_reduces_read_memory_once(name, loops):
    """Rows too long for registers: variance (Welford) and the softmax denominator (online
    max-sum) are computed in one pass, so x is read by `loops` passes in all."""
    p = BY_NAME[name]
    k = lower_for_gpu(nm.jit(upcast=0)(p.fn), p.make(np.random.default_rng(0), 64, 8192))
    prog = k.kernels[0].program
    passes = [ins for ins in prog.instrs if ins.op == "LOOP" and ins.arg[1] is not None]
    assert len(passes) == loops           # (loops over shared-memory partials have no group)
    assert any(ins.op == "ONLINE" for ins in prog.instrs)


def test_zigzag_walks_every_second_streamed_pass_backward():
    """zigzag=1: softmax streamed in two passes; the second walks the row from its end."""
    p = BY_NAME["softmax"]
    inputs = p.make(np.random.default_rng(0), 64, 8192)
    plain = lower_for_gpu(nm.jit(upcast=0, threads_per_row=256)(p.fn), inputs).kernels[0]
    zig = lower_for_gpu(nm.jit(upcast=0, threads_per_row=256, zigzag=1)(p.fn),
                        inputs).kernels[0]
    loops = [ins for ins in zig.program.instrs if ins.op == "LOOP" and ins.arg[1] is not None]
    assert len(loops) == 2
    n = loops[1].arg[0]
    backward = [ins.arg for ins in zig.program.instrs
                if ins.op == "INDEX" and f"({n - 1} - {loops[1].out[0]})" in ins.arg]
    forward = [ins.arg for ins in zig.program.instrs
               if ins.op == "INDEX" and ins.arg.startswith(f"{loops[0].out[0]} *")]
    assert backward and forward
    assert not any(f"({n - 1} -" in ins.arg for ins in plain.program.instrs
                   if ins.op == "INDEX")


def test_stagger_starts_each_rows_streamed_passes_at_its_own_iteration():
    """stagger=1: both streamed passes of softmax walk their iterations from ``row % n`` on,
    wrapping around (rows ending inside an iteration: test_programs)."""
    p = BY_NAME["softmax"]
    inputs = p.make(np.random.default_rng(0), 64, 8192)
    (k,) = lower_for_gpu(nm.jit(upcast=0, threads_per_row=256, unroll=2, stagger=1)(p.fn),
                         inputs).kernels
    loops = [ins for ins in k.program.instrs if ins.op == "LOOP" and ins.arg[1] is not None]
    assert len(loops) == 2
    for loop in loops:
        it, n = loop.out[0], loop.arg[0]
        assert n == 8192 // (256 * 4 * 2) == 4
        starts = [ins.arg for ins in k.program.instrs if ins.op == "INDEX" and
                  ins.arg.startswith(f"(({it} + row) % {n}) * ")]
        assert len(starts) == 2                      # both chunks of an iteration
    (plain,) = lower_for_gpu(nm.jit(upcast=0, threads_per_row=256, unroll=2)(p.fn),
                             inputs).kernels
    assert "+ row) %" not in plain.source


def test_blocks_per_sm_asks_for_shared_memory_that_leaves_no_room_for_more():
    from numbamr.lowering.options import SHARED_PER_SM, SHARED_RESERVED
    p = BY_NAME["variance"]
    inputs = p.make(np.random.default_rng(0), 64, 8192)
    for n in (1, 2, 3):
        (k,) = lower_for_gpu(nm.jit(blocks_per_sm=n)(p.fn), inputs).kernels
        per_block = k.program.dynamic_shared + SHARED_RESERVED
        assert n * per_block <= SHARED_PER_SM < (n + 1) * per_block, n
        assert f"dynamic_shared={k.program.dynamic_shared}" in k.source


@pytest.mark.parametrize("shape,columns,threads", [((8192, 16384), 64, 16),
                                                   ((1024, 65536), 128, 4),
                                                   ((4096, 8192), 32, 32)])
def test_column_layouts_take_wide_blocks_while_blocks_remain(shape, columns, threads):
    """Column variance: 128 columns a block where 256 blocks remain, else 64 or 32; as
    many threads down each column as keep the grid to one wave (2 * 132 * 1024 threads)."""
    p = BY_NAME["column_var"]
    (k,) = lower_for_gpu(p.fn, (np.empty(shape, np.float32),)).kernels
    assert k.layout.layout == "col"
    assert (k.layout.rows_per_block, k.layout.threads_per_row) == (columns, threads)
    assert k.grid * k.block <= 2 * 132 * 1024


@pytest.mark.parametrize("name,block", [("softmax", 64), ("layernorm", 64), ("zscore", 64),
                                        ("variance", 256), ("logsumexp", 256),
                                        ("sum_and_max", 256)])
@pytest.mark.parametrize("columns", [64, 256, 1024])
def test_short_rows_written_whole_take_small_blocks(name, block, columns):
    """Short rows held in registers: a kernel that writes its rows whole runs in blocks of
    64 threads, one that writes a value per row in blocks of 256 (several rows a block in
    both; the H200 measurements are in bench/RESULTS.md)."""
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(0), 65536, columns)
    (k,) = lower_for_gpu(p.fn, inputs).kernels
    assert k.layout.layout == "row" and k.layout.split == 1
    assert all(plan.resident for plan in k.layout.groups)
    assert k.block == block
    assert k.layout.threads_per_row * k.layout.rows_per_block == block


@pytest.mark.parametrize("options", LAYOUTS[1:2] + LAYOUTS[3:], ids=str)
def test_one_barrier_for_the_reduces_of_a_depth(options):
    """The sum, max and min of a row write their partials to shared memory before one
    barrier, and each is read back after it."""
    x = np.zeros((8, 4096), np.float32)
    prog = lower_for_gpu(nm.jit(**options)(BY_NAME["sum_max_min"].fn), (x,)).kernels[0].program
    ops = [ins.op for ins in prog.instrs]
    assert ops.count("BARRIER") == 1
    barrier = ops.index("BARRIER")
    stores = [i for i, op in enumerate(ops) if op == "SHARED_STORE"]
    loads = [i for i, op in enumerate(ops) if op == "SHARED_LOAD"]
    assert len(stores) == 3 and max(stores) < barrier < min(loads)


def test_reduces_of_two_depths_take_two_barriers():
    """A row held in registers by two warps: logsumexp's max, then its sum (two barriers)."""
    x = np.zeros((8, 1024), np.float32)
    jit = nm.jit(threads_per_row=64, rows_per_block=2)
    prog = lower_for_gpu(jit(BY_NAME["logsumexp"].fn), (x,)).kernels[0].program
    assert [ins.op for ins in prog.instrs].count("BARRIER") == 2


@pytest.mark.parametrize("columns", [1024, 2048, 8192])
def test_rows_of_three_reduces_to_a_value_hold_32_floats_a_thread(columns):
    """A value per row from three reduces (cross-entropy; sum, max and min): 32 float32 a
    thread; from two (logsumexp, variance) or written whole (softmax): 16 (bench/RESULTS.md);
    float16 rows: 32 a thread either way."""
    rng = np.random.default_rng(0)
    logits = np.zeros((4096, columns), np.float32)    # lowered only: the values do not matter
    cases = [(_cross_entropy, (logits, np.zeros(4096, np.int64)), 32)]
    cases += [(BY_NAME[n].fn, BY_NAME[n].make(rng, 4096, columns), per_thread)
              for n, per_thread in (("sum_max_min", 32), ("logsumexp", 16), ("variance", 16),
                                    ("softmax", 16))]
    # float16 rows already hold 32 values a thread (64 bytes): twice would leave registers
    cases.append((_cross_entropy, (logits.astype(np.float16), np.zeros(4096, np.int64)),
                  32))
    for fn, inputs, per_thread in cases:
        (k,) = lower_for_gpu(fn, inputs).kernels
        assert k.layout.threads_per_row * per_thread == columns, (fn.__name__, k.layout)
        assert all(plan.resident for plan in k.layout.groups), fn.__name__


def test_column_reductions_over_few_columns_split_into_two_kernels():
    """8192 x 8192 column variance: 8192 columns fill fewer than 264 blocks of 32, so the
    reduction is split in four segments (shifted sums) and combined by a second kernel."""
    p = BY_NAME["column_var"]
    first, second = lower_for_gpu(p.fn, (np.empty((8192, 8192), np.float32),)).kernels
    assert first.kernel.nrows == 4 * 8192 and first.block * first.grid <= 2 * 132 * 1024
    assert second.kernel.nrows == 8192 and 0 not in second.kernel.inputs


def test_half_outputs_are_rounded_once():
    """A float16 result is stored as the float16 it was rounded to, not rounded, widened
    and rounded again (two conversions per element saved; the same bits)."""
    def softmax16(x):
        y = x.astype(np.float32)
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float16)

    (k,) = lower_for_gpu(softmax16, (np.empty((64, 8192), np.float16),)).kernels
    (store,) = k.kernel.stores
    assert store.value.dtype == np.float16
    per_thread = 8192 // k.layout.threads_per_row
    assert k.source.count("float16(") == per_thread


def _tall(p, rows, columns):
    """Inputs of catalogue program ``p`` with ``rows`` rows of zeros (lowered only)."""
    inputs = list(p.make(np.random.default_rng(0), 1, columns))
    inputs[0] = np.zeros((rows,) + inputs[0].shape[1:], inputs[0].dtype)
    return tuple(inputs)


def _loop_spans(prog):
    """(first, last) instruction index of each LOOP ... ENDLOOP, outermost loops only."""
    spans, depth, start = [], 0, None
    for i, ins in enumerate(prog.instrs):
        if ins.op == "LOOP":
            depth += 1
            start = i if depth == 1 else start
        elif ins.op == "ENDLOOP":
            depth -= 1
            if depth == 0:
                spans.append((start, i))
    return spans


@pytest.mark.parametrize("zigzag", [0, 1])
def test_a_streamed_row_ending_inside_an_iteration_is_peeled(zigzag):
    """Variance (one-pass Welford) over rows of 1100 streamed 1024 an iteration: the loop
    takes the one whole iteration with no position mask and one update for its 16 values;
    the partial iteration (76 values: one masked chunk, three past the end left out) is
    outside the loop, masked."""
    x = np.zeros((8, 1100), np.float32)
    jit = nm.jit(threads_per_row=64, upcast=0, unroll=4, zigzag=zigzag)
    (k,) = lower_for_gpu(jit(BY_NAME["variance"].fn), (x,)).kernels
    prog = k.program
    (start, end), = _loop_spans(prog)
    inside, after = prog.instrs[start:end + 1], prog.instrs[end + 1:]
    assert sum(ins.op == "ONLINE" for ins in inside) == 1
    assert not any(ins.op == "INDEX" and "<" in str(ins.arg) for ins in inside)
    masks = [ins for ins in after if ins.op == "INDEX" and "< 1100" in str(ins.arg)]
    assert len(masks) == 1
    assert sum(ins.op == "ONLINE" for ins in after) == 1


def test_a_two_pass_reduce_keeps_one_masked_loop():
    """Without a one-pass reduce (a sum), a row ending inside an iteration keeps a single
    loop over every iteration, each chunk masked (measured: peeling the plain partial
    sums of a column variance took them from 32 to 48 registers and lost 39%,
    bench/RESULTS.md)."""
    x = np.zeros((8, 1100), np.float32)
    jit = nm.jit(threads_per_row=64, upcast=0, unroll=4)
    (k,) = lower_for_gpu(jit(lambda a: a.sum(axis=-1)), (x,)).kernels
    (start, end), = _loop_spans(k.program)
    masks = [ins for ins in k.program.instrs[start:end] if ins.op == "INDEX" and
             "< 1100" in str(ins.arg)]
    assert len(masks) == 4
    assert "range(2)" in k.source


@pytest.mark.parametrize("name", ["softmax", "layernorm", "zscore", "rmsnorm"])
@pytest.mark.parametrize("columns", [8193, 16384])
def test_rows_of_up_to_16384_written_whole_take_512_threads(name, columns):
    """Rows held in registers that 1024 threads would hold one block a multiprocessor:
    512 threads (at most 32 values each) instead, where the kernel writes its rows or
    no access is a vector (8193: odd rows); the H200 measurements are in
    bench/RESULTS.md."""
    p = BY_NAME[name]
    (k,) = lower_for_gpu(p.fn, _tall(p, 4096, columns)).kernels
    assert k.layout.threads_per_row == 512 and k.layout.split == 1
    assert all(plan.resident and plan.chunks * plan.vector <= 32 for plan in k.layout.groups)


@pytest.mark.parametrize("name", ["variance", "logsumexp", "softmax", "layernorm"])
def test_odd_rows_with_edges_take_the_layout_of_aligned_rows(name):
    """Rows of 8193 are read in the vectors of rows of 8192 (an aligned body, scalar edges:
    docs/heuristics.md#row-edges), so they take the same threads, vectors and chunks."""
    p = BY_NAME[name]
    (odd,) = lower_for_gpu(p.fn, _tall(p, 4096, 8193)).kernels
    (even,) = lower_for_gpu(p.fn, _tall(p, 4096, 8192)).kernels
    assert all(plan.edges for plan in odd.layout.groups)
    assert odd.layout.threads_per_row == even.layout.threads_per_row
    assert [(a.vector, a.chunks, a.resident) for a in odd.layout.groups] == \
        [(b.vector, b.chunks, b.resident) for b in even.layout.groups]


@pytest.mark.parametrize("name,threads", [("layernorm", 128), ("rmsnorm", 128),
                                          ("softmax", 128), ("variance", 64)])
def test_odd_short_rows_written_whole_hold_8_values_a_thread(name, threads):
    """Rows of 999 (no vector access): a kernel that writes them whole holds 8 values a
    thread (128 threads), one that writes a value per row keeps 16 (64 threads)."""
    p = BY_NAME[name]
    (k,) = lower_for_gpu(p.fn, _tall(p, 4096, 999)).kernels
    assert all(plan.vector == 1 for plan in k.layout.groups)
    assert k.layout.threads_per_row == threads


def test_odd_rows_under_512_keep_16_values_a_thread():
    """The 8-value rule was measured on rows of 999; shorter odd rows keep 16 a thread."""
    p = BY_NAME["layernorm"]
    (k,) = lower_for_gpu(p.fn, _tall(p, 4096, 255)).kernels
    assert all(plan.vector == 1 for plan in k.layout.groups)
    assert k.layout.threads_per_row == 16


def test_odd_rows_of_three_reduces_stay_in_registers():
    """Sum, max and min of rows of 8193: the aligned body of 8192 held as rows of 8192 are
    (all 32 values a thread in registers), the one position left over in the edge chunk."""
    p = BY_NAME["sum_max_min"]
    (k,) = lower_for_gpu(p.fn, _tall(p, 4096, 8193)).kernels
    (even,) = lower_for_gpu(p.fn, _tall(p, 4096, 8192)).kernels
    assert k.layout.threads_per_row == even.layout.threads_per_row
    assert all(plan.resident and plan.edges and plan.chunks * plan.vector <= 32
               for plan in k.layout.groups)
