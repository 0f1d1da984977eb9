"""The generated all-CuPy call path (runtime.launch.FastPath) and the driver launch, run
against a stand-in for CuPy and for the CUDA driver: what each launch is given, in which
order, and what the call returns. (On a GPU the same path is exercised by the gpu tier.)"""
import ctypes
import sys
import types

import numpy as np
import pytest

from numbamr.runtime import cudadriver, launch


class FakeMemory:
    def __init__(self, ptr):
        self.ptr, self.device_id = ptr, 0


class FakeArray:
    next_ptr = 0x10000

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        FakeArray.next_ptr += 0x1000
        self.data = FakeMemory(FakeArray.next_ptr)


@pytest.fixture
def fake_gpu(monkeypatch):
    """CuPy and the driver replaced; returns the list of launches (their C arguments)."""
    launches, answers, contexts = [], [], []

    class DriverError(Exception):
        def __init__(self, status):
            self.status = status

    def cupy_launch(*args):         # CuPy's binding: plain integers, raises on an error
        err = fake_launch(*args)
        if err:
            raise DriverError(err)

    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeArray
    cupy.cuda = types.SimpleNamespace(
        get_current_stream=lambda: types.SimpleNamespace(ptr=77),
        driver=types.SimpleNamespace(launchKernel=cupy_launch, CUDADriverError=DriverError))
    monkeypatch.setitem(sys.modules, "cupy", cupy)

    def fake_launch(*args):         # ctypes: C values, returns the error code
        values = [a.value if hasattr(a, "value") else a for a in args]
        block = ctypes.cast(values[9], ctypes.POINTER(ctypes.c_void_p))
        slots = [block[i] for i in range(len(fake_launch.nparams[values[0]]))]
        params = [ctypes.c_uint64.from_address(s).value for s in slots]
        launches.append(dict(func=values[0], grid=values[1], block=values[4],
                             shared=values[7], stream=values[8], params=params))
        return answers.pop(0) if answers else 0
    fake_launch.nparams = {}

    def fake_launch_ex(config, func, params, extra):    # cuLaunchKernelEx by ctypes
        c = cudadriver.LaunchConfig.from_address(config)
        attrs = [(c.attrs[i].id, c.attrs[i].value) for i in range(c.nattrs)]
        err = fake_launch(func, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                          c.block[2], c.shared, c.stream, params, extra)
        launches[-1]["attrs"] = attrs
        return err
    driver = types.SimpleNamespace(cuCtxGetCurrent=lambda p: 0,
                                   cuCtxSetCurrent=lambda c: contexts.append(c))
    monkeypatch.setattr(cudadriver, "_libcuda", driver)
    monkeypatch.setattr(cudadriver, "LAUNCH", fake_launch)
    monkeypatch.setattr(cudadriver, "LAUNCH_EX", fake_launch_ex)
    return types.SimpleNamespace(launches=launches, answers=answers, contexts=contexts,
                                 register=fake_launch.nparams)


def _launcher(fake_gpu, handle, params, grid=5, block=128, dependent=False):
    dl = launch._DriverLaunch(handle, len(params), grid, block, 0, dependent)
    fake_gpu.register[handle] = params
    return types.SimpleNamespace(grid=grid, params=params, launch=dl)


def _compiled(launchers, outs, temps=(), structure=("single", None)):
    lowered = types.SimpleNamespace(
        out_specs=list(outs), structure=structure,
        temps=[types.SimpleNamespace(name=n, dtype=np.dtype(d), shape=s) for n, d, s in temps])
    return types.SimpleNamespace(lowered=lowered, launchers=launchers)


def test_each_kernel_gets_its_pointers_in_parameter_order(fake_gpu):
    k1 = _launcher(fake_gpu, 111, [("leaf", 1), ("tmp", "t0")], grid=3, block=64)
    k2 = _launcher(fake_gpu, 222, [("leaf", 0), ("tmp", "t0"), ("out", 1), ("out", 0)])
    skipped = _launcher(fake_gpu, 333, [("out", 0)], grid=0)
    compiled = _compiled([k1, skipped, k2], [(np.float32, (4, 8)), (np.int64, (4,))],
                         temps=[("t0", np.float32, (4,))], structure=("tuple", None))
    call = launch.FastPath(compiled).call
    x, y = FakeArray((4, 8), np.float32), FakeArray((8,), np.float32)
    o0, o1 = call([x, y])
    assert (o0.shape, o0.dtype, o1.shape, o1.dtype) == ((4, 8), np.float32, (4,), np.int64)
    first, second = fake_gpu.launches
    assert (first["func"], first["grid"], first["block"], first["stream"]) == (111, 3, 64, 77)
    assert second["func"] == 222 and second["stream"] == 77
    temp = first["params"][1]
    assert first["params"] == [y.data.ptr, temp]
    assert second["params"] == [x.data.ptr, temp, o1.data.ptr, o0.data.ptr]
    assert len({x.data.ptr, y.data.ptr, temp, o0.data.ptr, o1.data.ptr}) == 5


@pytest.mark.parametrize("structure, check", [
    (("single", None), lambda r, o: r is o[0]),
    (("list", None), lambda r, o: isinstance(r, list) and r == o),
    (("dict", ("mean", "rstd")), lambda r, o: list(r) == ["mean", "rstd"]
     and list(r.values()) == o)])
def test_outputs_come_back_in_the_functions_structure(fake_gpu, structure, check):
    outs = [(np.float32, (3,))] * (1 if structure[0] == "single" else 2)
    k = _launcher(fake_gpu, 7, [("leaf", 0)] + [("out", i) for i in range(len(outs))])
    result = launch.FastPath(_compiled([k], outs, structure=structure)).call(
        [FakeArray((3, 5), np.float32)])
    made = fake_gpu.launches[0]["params"][1:]
    values = [result] if structure[0] == "single" else list(
        result.values() if isinstance(result, dict) else result)
    assert [v.data.ptr for v in values] == made
    assert check(result, values)


def test_a_thread_without_a_context_sets_it_and_launches_again(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)])
    fake_gpu.answers.append(launch.CUDA_ERROR_INVALID_CONTEXT)
    x = FakeArray((2, 2), np.float32)
    out = launch.FastPath(_compiled([k], [(np.float32, (2, 2))])).call([x])
    assert len(fake_gpu.contexts) == 1
    assert [leaf["params"] for leaf in fake_gpu.launches] == [[x.data.ptr, out.data.ptr]] * 2


def test_other_launch_errors_are_raised(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)])
    fake_gpu.answers.append(700)
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        launch.FastPath(_compiled([k], [(np.float32, (2,))])).call([FakeArray((2,), "f4")])
    fake_gpu.answers.append(1)
    with pytest.raises(RuntimeError, match="CUDA error 1"):
        k.launch([1, 2], 0)


def test_driver_errors_are_named_where_the_driver_names_them(monkeypatch):
    def name_of(err, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_LAUNCH_FAILED"
        return 0
    monkeypatch.setattr(cudadriver, "_libcuda", types.SimpleNamespace(cuGetErrorName=name_of))
    assert cudadriver.error_text(719) == "CUDA error 719 (CUDA_ERROR_LAUNCH_FAILED)"
    monkeypatch.setattr(cudadriver, "_libcuda", types.SimpleNamespace())
    assert cudadriver.error_text(719) == "CUDA error 719"


PROGRAMMATIC = (cudadriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)


def test_dependent_kernels_launch_with_programmatic_serialization_on_the_calls_stream(
        fake_gpu):
    """A dependent kernel goes through cuLaunchKernelEx with programmatic stream
    serialization, on the call's stream, with the same grid, block and pointers as an
    ordinary launch; the others go through cuLaunchKernel without attributes."""
    k1 = _launcher(fake_gpu, 111, [("leaf", 0), ("tmp", "t0")], grid=1024, block=256)
    k2 = _launcher(fake_gpu, 222, [("tmp", "t0"), ("out", 0)], grid=1, block=64,
                   dependent=True)
    compiled = _compiled([k1, k2], [(np.float32, ())], temps=[("t0", np.float32, (1024,))])
    x = FakeArray((1024, 1024), np.float32)
    out = launch.FastPath(compiled).call([x])
    first, second = fake_gpu.launches
    assert "attrs" not in first and (first["grid"], first["block"]) == (1024, 256)
    assert second["attrs"] == [PROGRAMMATIC]
    assert (second["func"], second["grid"], second["block"], second["stream"]) == \
        (222, 1, 64, 77)
    assert second["params"] == [first["params"][1], out.data.ptr]
    k2.launch([5, 6], 99)           # the launcher's own call: the stream it is given
    assert fake_gpu.launches[-1]["stream"] == 99 and fake_gpu.launches[-1]["params"] == [5, 6]
    assert fake_gpu.launches[-1]["attrs"] == [PROGRAMMATIC]


def test_a_failed_dependent_launch_is_retried_or_raised(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)], dependent=True)
    fake_gpu.answers += [launch.CUDA_ERROR_INVALID_CONTEXT, 0, 700]
    call = launch.FastPath(_compiled([k], [(np.float32, (2, 2))])).call
    call([FakeArray((2, 2), np.float32)])
    assert len(fake_gpu.contexts) == 1 and len(fake_gpu.launches) == 2
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        call([FakeArray((2, 2), np.float32)])


@pytest.mark.parametrize("index, grid, dependent", [
    (0, 4, False), (0, launch.DEPENDENT_GRID, True), (1, 1, True)])
def test_which_kernels_launch_as_dependents(monkeypatch, index, grid, dependent):
    """A call's later kernels are always dependents of its earlier ones; its first kernel is
    one only when it is large (a small call is paced by the host, and the ordinary launch
    costs the host less); nothing is where the kernel does not wait itself."""
    made = []
    monkeypatch.setattr(launch, "_DriverLaunch", lambda *a: made.append(a[-1]))
    monkeypatch.setattr(launch.Launcher, "_compile", lambda self, lk, dt: 1)
    for waits in (True, False):
        lk = types.SimpleNamespace(grid=grid, block=128, dependent=waits, source="",
                                   layout=types.SimpleNamespace(cluster=False, split=1,
                                                                persistent=0),
                                   program=types.SimpleNamespace(dynamic_shared=0, params=[],
                                                                 instrs=[]))
        launch.Launcher(lk, False, first=index == 0)
    assert made == [dependent, False]
