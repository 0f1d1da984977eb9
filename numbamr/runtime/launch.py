"""Launching compiled kernels: argument buffers, output allocation, result conversion.

On a GPU every kernel parameter is a raw pointer (``CPointer``), so a launch is one
``cuLaunchKernel`` with a parameter block filled in place: no per-call argument objects.
In the simulator the same source runs on 1-D NumPy views.
"""
import ctypes
import threading
import warnings

import numpy as np

from .. import dtypes, settings
from ..errors import ArgumentError, DTypeError
from . import arrays, binary, cudadriver, simmath
from .callplan import const_slot, fast_key, stream_handle  # noqa: F401 (fast_key: jit's)
from .compile import code_text, jit_kernel, source_path
from .device import CLUSTER_ARCH, arch, clusters_available, gpu_count


CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_SM_COUNT = 16


def allow_dynamic_shared(handle, nbytes):
    """Raise a kernel's dynamic shared memory limit to ``nbytes`` (static and dynamic shared
    memory above 48 KB in all must be asked for)."""
    lib = cudadriver.driver()
    err = lib.cuFuncSetAttribute(ctypes.c_void_p(int(handle)),
                                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 ctypes.c_int(nbytes))
    if err != 0:                        # a CUkernel handle: set it for the current device
        dev = ctypes.c_int(0)
        lib.cuCtxGetDevice(ctypes.byref(dev))
        err = lib.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       ctypes.c_int(nbytes), ctypes.c_void_p(int(handle)),
                                       dev)
    if err != 0:
        raise RuntimeError(f"could not allow {nbytes} bytes of dynamic shared memory "
                           f"({cudadriver.error_text(err)})")


CUDA_ERROR_INVALID_CONTEXT = 201
# A call's first kernel is launched as a programmatic dependent of whatever ran before it on
# the stream only when it has this many blocks: a small kernel's call is paced by the host,
# and the ordinary launch (through CuPy's compiled binding) costs the host less. A call's
# later kernels always are (they wait for the call's own earlier kernels).
DEPENDENT_GRID = 128


class _DriverLaunch:
    """cuLaunchKernel with a parameter block filled in place (one pointer-sized slot per
    parameter) and every other argument converted to its C type once.

    The call goes through ``ctypes.PyDLL``, which keeps the GIL (the launch is a few
    microseconds and never waits for the GPU); ``lock`` keeps two threads from filling the
    block at once. A ``dependent`` kernel (one that waits for the stream's previous kernel
    itself, see intrinsics.griddep_wait) goes through cuLaunchKernelEx with programmatic
    stream serialization: its blocks may start while the previous kernel's last ones run."""

    def __init__(self, handle, nparams, grid, block, shared=0, dependent=False):
        cudadriver.driver()
        if shared:      # the 48 KB a kernel gets unasked counts its static shared memory too
            allow_dynamic_shared(handle, shared)
        n = max(nparams, 1)
        self.values = (ctypes.c_uint64 * n)()
        base = ctypes.addressof(self.values)
        self._slots = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        # function, grid, block, shared bytes: plain integers for CuPy's binding (the
        # generated call paths, see callplan),
        # C values for ctypes
        self.raw_head = (int(handle), grid, 1, 1, block, 1, 1, shared)
        self.head = (ctypes.c_void_p(self.raw_head[0]),) + \
            tuple(ctypes.c_uint(v) for v in self.raw_head[1:])
        self.params = ctypes.c_void_p(ctypes.addressof(self._slots))
        self.config, self._attr = _dependent_config(self.raw_head) \
            if dependent and cudadriver.LAUNCH_EX is not None else (None, None)
        self.config_ptr = ctypes.addressof(self.config) if self.config is not None else None
        self.lock = threading.Lock()
        # the context the kernel was loaded in: a thread that has never touched the GPU
        # has no current context, and the driver answers such a launch with an error
        self._context = cudadriver.current_context()

    def __call__(self, pointers, stream):
        err = self._launch(pointers, stream)
        if err != 0:
            self.retry(err, pointers, stream)

    def _launch(self, pointers, stream):
        with self.lock:
            self.values[:len(pointers)] = pointers
            if self.config is not None:
                self.config.stream = stream
                return cudadriver.LAUNCH_EX(self.config_ptr, self.head[0], self.params, None)
            return cudadriver.LAUNCH(*self.head, stream, self.params, None)

    def retry(self, err, pointers, stream):
        """After a failed launch: in a thread without a current context, make the kernel's
        context current and launch again; any other error is raised."""
        if err == CUDA_ERROR_INVALID_CONTEXT:
            cudadriver.driver().cuCtxSetCurrent(self._context)
            err = self._launch(pointers, stream)
        if err != 0:
            what = "cuLaunchKernelEx" if self.config is not None else "cuLaunchKernel"
            raise RuntimeError(f"{what} failed with {cudadriver.error_text(err)}")


def _dependent_config(raw_head):
    """A CUlaunchConfig for (function, grid, 1, 1, block, 1, 1, shared) with programmatic
    stream serialization on; its stream is set at each launch."""
    attr = cudadriver.LaunchAttribute(
        id=cudadriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
    config = cudadriver.LaunchConfig(grid=raw_head[1:4], block=raw_head[4:7],
                                     shared=raw_head[7], nattrs=1)
    config.attrs = ctypes.pointer(attr)
    return config, attr         # the attribute must live as long as the config


class Launcher:
    """One kernel ready to launch: the compiled kernel, its grid, where its args come from."""

    def __init__(self, lowered_kernel, simulator, first=True):
        lk = lowered_kernel
        self.grid, self.block = lk.grid, lk.block
        self.shared = lk.program.dynamic_shared
        # where each parameter comes from: ('leaf', arg position), ('out', i), ('tmp', name),
        # ('scratch', (what, size, dtype)): a split row's exchange buffers, made each launch;
        # ('const', int): a scalar the kernel takes by value (written into its slot as it is)
        self.params = [(("tmp", pos) if isinstance(pos, str) else ("leaf", pos))
                       if kind == "in" else ("scratch", pos + (dt,)) if kind == "scratch"
                       else ("const", pos) if kind == "const"
                       else ("const", lk.kernel.nrows) if kind == "rows"   # generic rows
                       else tuple(lk.targets[pos]) for _, kind, dt, pos in lk.program.params]
        # a split row's exchanges: the simulator runs the kernel once per exchange and once
        # more (see Emitter.op_xsync)
        self.phases = 1 + sum(ins.op == "XSYNC" for ins in lk.program.instrs)
        self.simulator = simulator
        if simulator:
            self.kernel, self.path = jit_kernel(lk.sim_source, lk.name, True)
            if len(_SIM_BUILT) > HANDLES_KEPT:
                _SIM_BUILT.clear()
            _SIM_BUILT.add(code_text(lk.sim_source))
            return
        handle = self._compile(lk)
        if lk.layout.cluster:
            _make_cluster(handle, lk)
        if lk.layout.persistent:
            if self.shared:
                allow_dynamic_shared(handle, self.shared)
            self.grid = _persistent_grid(handle, lk, self.shared)
        elif lk.layout.split > 1:
            _check_coresident(handle, lk)
        self.launch = _DriverLaunch(handle, len(self.params), self.grid, self.block,
                                    self.shared, lk.dependent and (not first or
                                                                   self.grid >= DEPENDENT_GRID))

    def _compile(self, lk):
        """The kernel's driver handle: built before in this process (for the same code, on
        the same device), from the cubin cache, or compiled by numba (and then stored in
        the cache)."""
        memo = _code_key(lk), cudadriver.current_context().value
        found = _HANDLES.get(memo)
        if found is not None:
            self.kernel, self.path, handle = found
            return handle
        handle = self._build(lk)
        _HANDLES[memo] = (self.kernel, self.path, handle)
        if len(_HANDLES) > HANDLES_KEPT:        # the oldest first (signatures keep theirs)
            del _HANDLES[next(iter(_HANDLES))]
        return handle

    def _build(self, lk):
        dtypes, scalars = _param_types(lk)
        key = binary.entry_key(code_text(lk.source), lk.name, lk.launch_bounds,
                               dtypes + [f"scalar {i}" for i in sorted(scalars)]) \
            if settings.current().cache else None
        handle = binary.load(key) if key else None
        if handle is not None:
            self.kernel, self.path = None, source_path(lk.source)
            return handle
        self.kernel, self.path = jit_kernel(lk.source, lk.name, False, lk.launch_bounds,
                                            pointer_dtypes=dtypes, scalars=scalars)
        library = next(iter(self.kernel.overloads.values()))._codelibrary
        handle = library.get_cufunc().handle
        if lk.layout.cluster:
            # numba's handle is a library kernel, which takes no cluster shape: load the
            # cubin as a module, as the disk cache does
            handle = cudadriver.load_function(binary.image_bytes(library.get_cubin()),
                                              library._entry_name)
            if handle is None or library._setup_functions:
                raise RuntimeError(f"kernel {lk.name}: its cubin could not be loaded as a "
                                   "module for a cluster launch")
        if key and not library._setup_functions:   # setup hooks would not run from a cubin
            try:
                binary.store(key, library._entry_name, library.get_cubin())
            except Exception as e:      # the kernel runs; only the disk cache misses it
                warnings.warn(f"numbamr: kernel {lk.name} not written to the disk cache "
                              f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)
        return int(handle)


# (code key, context) -> (numba kernel or None, source path, driver handle): kernels built
# in this process, shared by every signature whose kernel has the same code (a generic
# kernel's, for each row count)
_HANDLES = {}
HANDLES_KEPT = 1024


def _param_types(lk):
    """The kernel's parameter dtypes and the positions of those passed by value."""
    params = lk.program.params
    return [dt for _, _, dt, _ in params], \
        frozenset(i for i, (_, kind, _, _) in enumerate(params) if kind == "rows")


def _code_key(lk):
    dtypes, scalars = _param_types(lk)
    return (code_text(lk.source), lk.name, lk.launch_bounds,
            tuple(str(d) for d in dtypes), scalars)


def built(lowered, simulator):
    """Has this process built every kernel of ``lowered`` already (on the current device)?"""
    if simulator:
        return all(code_text(k.sim_source) in _SIM_BUILT for k in lowered.kernels)
    context = cudadriver.current_context().value
    return all((_code_key(k), context) in _HANDLES for k in lowered.kernels)


_SIM_BUILT = set()          # code of the kernels run in the simulator so far


def _check_coresident(handle, lk):
    """The blocks of a split row wait for each other: refuse a kernel whose row has more
    blocks than the GPU holds at once (it would never finish)."""
    lib = cudadriver.driver()
    per_sm, dev, sms = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    err = lib.cuCtxGetDevice(ctypes.byref(dev)) or \
        lib.cuDeviceGetAttribute(ctypes.byref(sms), CU_DEVICE_ATTRIBUTE_SM_COUNT, dev)
    if err != 0:
        raise RuntimeError(f"kernel {lk.name}: could not read the GPU's multiprocessor count "
                           f"({cudadriver.error_text(err)})")
    if lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(per_sm), ctypes.c_void_p(handle), ctypes.c_int(lk.block),
            ctypes.c_size_t(lk.program.dynamic_shared)) != 0:
        per_sm.value = 1        # a handle the query does not take: one block each, surely
    if per_sm.value * sms.value < lk.layout.split:
        raise ArgumentError(f"kernel {lk.name}: its rows are split across {lk.layout.split} "
                            f"blocks that must run at once, but this GPU holds only "
                            f"{per_sm.value * sms.value} of them: use a smaller split=")


CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 11      # then HEIGHT 12, DEPTH 13
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
PORTABLE_CLUSTER = 8


def _make_cluster(handle, lk):
    """Launch ``handle`` in clusters of a split row's blocks (the hardware starts a cluster's
    blocks together, so they never wait on a block that has not started)."""
    cc = arch()
    if not clusters_available(cc):
        raise ArgumentError(f"kernel {lk.name}: option cluster=1 needs a GPU of compute "
                            f"capability {'%d.%d' % CLUSTER_ARCH} or newer (this one: "
                            f"{'none' if cc is None else '%d.%d' % cc})")
    lib = cudadriver.driver()
    split = lk.layout.split
    attrs = [(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)] \
        if split > PORTABLE_CLUSTER else []
    attrs += [(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, split),
              (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH + 1, 1),
              (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH + 2, 1)]
    for attr, value in attrs:
        err = lib.cuFuncSetAttribute(ctypes.c_void_p(handle), ctypes.c_int(attr),
                                     ctypes.c_int(value))
        if err != 0:
            raise ArgumentError(f"kernel {lk.name}: the driver refused clusters of {split} "
                                f"blocks ({cudadriver.error_text(err)} setting attribute "
                                f"{attr}): use cluster=0 or a smaller split=")


CU_OCCUPANCY_QUERY_GRID = 64     # clusters of the launch the occupancy query describes
# a cap on a persistent kernel's clusters (None: as many as the GPU holds at once); a study
# knob of bench/variants.py
PERSISTENT_MAX_CLUSTERS = None


def _persistent_grid(handle, lk, shared):
    """A persistent kernel's grid: as many of its clusters as the GPU holds at once (each
    loops over its share of the rows), no more than it has rows."""
    lib = cudadriver.driver()
    split = lk.layout.split
    config = cudadriver.LaunchConfig(grid=(split * CU_OCCUPANCY_QUERY_GRID, 1, 1),
                                     block=(lk.block, 1, 1), shared=shared, nattrs=0)
    fit = ctypes.c_int()
    err = lib.cuOccupancyMaxActiveClusters(ctypes.byref(fit), ctypes.c_void_p(handle),
                                           ctypes.byref(config))
    if err != 0 or fit.value < 1:
        why = cudadriver.error_text(err) if err else "none fits"
        raise ArgumentError(f"kernel {lk.name}: no cluster of its {split} blocks fits on this "
                            f"GPU ({why}): use persistent=0")
    return min(fit.value, lk.grid // split, PERSISTENT_MAX_CLUSTERS or fit.value) * split


def make_launchers(lowered, simulator):
    return [Launcher(k, simulator, i == 0) for i, k in enumerate(lowered.kernels)]


_SIM_LOCK = threading.Lock()


class CallContext:
    """Where a call's arrays live (the simulator, or a GPU's ordinal), which stream it uses,
    whether the call named that stream, and what kind of arrays it returns."""

    def __init__(self, simulator, result_kind, stream=0, device=0, stream_given=False):
        self.simulator, self.result_kind, self.stream = simulator, result_kind, stream
        self.device, self.stream_given = device, stream_given


def _current_stream(kind, device):
    """The current stream of the result's kind (torch's or CuPy's) on ``device``."""
    if kind == "torch":
        import torch
        return torch.cuda.current_stream(device).cuda_stream
    cp = arrays.cupy_module()
    if cp is None:
        return 0
    try:
        return cp.cuda.get_current_stream(device).ptr
    except TypeError:               # a CuPy whose get_current_stream takes no device
        return cp.cuda.get_current_stream().ptr


def prepare_leaves(leaves, simulator, stream=None):
    """Move host arrays to the device when running on a GPU; returns (leaves, context)."""
    arrs = [leaf for leaf in leaves if leaf.array is not None]
    kinds = {leaf.array.kind for leaf in arrs}
    if simulator:
        for leaf in arrs:
            if leaf.array.where != arrays.HOST:
                raise ArgumentError(f"argument {leaf.name!r} is a device array, but kernels run in "
                                    "numba's CPU simulator (NUMBA_ENABLE_CUDASIM=1): pass NumPy "
                                    "arrays")
        return leaves, CallContext(True, "numpy")
    if gpu_count() == 0:
        raise ArgumentError("there is no CUDA GPU here: to run the kernels in numba's CPU "
                            "simulator (NumPy in, NumPy out; small sizes, it is slow), set "
                            "NUMBA_ENABLE_CUDASIM=1 before numbamr is imported")
    devices = {leaf.array.device for leaf in arrs if leaf.array.where == arrays.DEVICE}
    if len(devices) > 1:
        raise ArgumentError("arrays on different devices: " + ", ".join(
            f"{leaf.name!r} on device {leaf.array.device}" for leaf in arrs
            if leaf.array.where == arrays.DEVICE))
    device = devices.pop() if devices else current_device()
    result_kind = "numpy" if kinds <= {"numpy"} else ("torch" if "torch" in kinds else "cupy")
    cp = arrays.cupy_module()
    with device_scope(device):
        for leaf in arrs:
            if leaf.array.where == arrays.HOST:
                if cp is None:
                    raise ArgumentError("running on a GPU needs CuPy for NumPy inputs: "
                                        "pip install cupy-cuda13x")
                leaf.array = arrays.to_device(leaf.array, cp)
    s = stream_handle(stream)
    ctx = CallContext(False, result_kind,
                      _current_stream(result_kind, device) if s is None else s, device,
                      s is not None)
    return leaves, ctx


# ---- several GPUs ---------------------------------------------------------------------------

def several_gpus():
    """Whether this process sees more than one GPU (then every launch checks that its
    device's context is current)."""
    return gpu_count() > 1


def current_device():
    """The ordinal of the calling thread's current device (0 on a host with one GPU)."""
    if not several_gpus():
        return 0
    found = cudadriver.current_device()
    return found[0] if found is not None else 0


_PRIMARY = {}
_CC = {}


def primary_context(device):
    """The primary context of GPU ``device`` (what CuPy, torch and numba use), retained once
    for the life of the process."""
    ctx = _PRIMARY.get(device)
    if ctx is None:
        lib = cudadriver.driver()
        handle, dev = ctypes.c_void_p(), ctypes.c_int()
        err = lib.cuInit(0) or lib.cuDeviceGet(ctypes.byref(dev), device) or \
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev)
        if err != 0:
            raise ArgumentError(f"GPU {device}: its context could not be made "
                                f"({cudadriver.error_text(err)})")
        ctx = _PRIMARY[device] = handle.value
    return ctx


def device_cc(device):
    """GPU ``device``'s compute capability (major, minor)."""
    cc = _CC.get(device)
    if cc is None:
        lib = cudadriver.driver()
        major, minor, dev = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        lib.cuInit(0)
        lib.cuDeviceGet(ctypes.byref(dev), device)
        lib.cuDeviceGetAttribute(ctypes.byref(major),
                                 cudadriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor),
                                 cudadriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        cc = _CC[device] = (major.value, minor.value)
    return cc


class device_scope:
    """Within it, GPU ``device``'s context is current (kernels compiled and loaded there,
    outputs allocated there, launches made there); the thread's own context is restored
    after. Nothing is changed on a host with one GPU, or for ``None`` (the simulator)."""

    def __init__(self, device):
        self.device, self.prev = device, None

    def __enter__(self):
        if self.device is None or not several_gpus():
            return self
        want = primary_context(self.device)
        prev = cudadriver.current_context().value
        if prev != want:
            self.prev = (prev,)
            _set_context(want)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            _set_context(self.prev[0])
            self.prev = None


def _set_context(handle):
    err = cudadriver.driver().cuCtxSetCurrent(ctypes.c_void_p(handle))
    if err != 0:
        raise RuntimeError(f"cuCtxSetCurrent failed with {cudadriver.error_text(err)}")


def _alloc(ctx, dtype, shape, temp=False):
    if ctx.simulator:
        return np.empty(shape, dtype)
    if ctx.result_kind == "torch":
        import torch
        return torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name),
                           device=torch.device("cuda", ctx.device))
    if dtypes.is_bfloat16(dtype):       # CuPy has no bfloat16: its bits (see _convert)
        if ctx.result_kind == "cupy" and not temp:
            raise DTypeError("this function returns a bfloat16 array, which CuPy cannot "
                             "hold: pass torch tensors (torch out) or NumPy arrays")
        dtype = np.uint16
    return arrays.cupy_module().empty(shape, dtype)


def temps_on_stream(result_kind, device):
    """A function of a stream handle giving the context in which a call's temporaries are
    allocated for that stream, so that the allocator (CuPy's pool, torch's caching
    allocator, both ordered by stream) reuses their memory only behind the call's kernels;
    None for the simulator."""
    if result_kind == "torch":
        import torch

        def on_stream(handle):
            return torch.cuda.stream(torch.cuda.ExternalStream(handle, device=device))
        return on_stream
    cp = arrays.cupy_module()
    if cp is None:
        return None

    def on_stream(handle):
        with warnings.catch_warnings():     # CuPy 14 deprecates it for another protocol
            warnings.simplefilter("ignore", DeprecationWarning)
            return cp.cuda.ExternalStream(handle, device)
    return on_stream


def _device_ptr(arr):
    if hasattr(arr, "data_ptr"):
        return arr.data_ptr()
    return arr.data.ptr


def run(compiled, leaves, ctx, given=None):
    """Launch every kernel; ``given``: out= arrays (ArrayArgs) to write instead."""
    lowered = compiled.lowered
    if given is not None:
        return _run_into(compiled, leaves, ctx, given)
    outs = [_alloc(ctx, dt, shape) for dt, shape in lowered.out_specs]
    if not any(0 in s for _, s in lowered.out_specs):
        _launch_all(compiled, leaves, ctx, [o.reshape(-1) for o in outs] if ctx.simulator
                    else [_device_ptr(o) for o in outs])
    return structured(lowered.structure, [_convert(ctx, o, dt)
                                          for o, (dt, _) in zip(outs, lowered.out_specs)])


def _run_into(compiled, leaves, ctx, given):
    lowered = compiled.lowered
    if any(0 in s for _, s in lowered.out_specs):
        return structured(lowered.structure, [a.obj for a in given])
    if not ctx.simulator:
        _launch_all(compiled, leaves, ctx, [a.base_ptr for a in given])
        return structured(lowered.structure, [a.obj for a in given])
    # the simulator copies every argument in and out, so views of one buffer would undo each
    # other's writes: there, kernels write into private spans copied into the views after
    spans = [np.empty(a.span, a.dtype) for a in given]
    _launch_all(compiled, leaves, ctx, spans)
    for a, span in zip(given, spans):
        item = a.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(span[a.offset:], a.shape,
                                               [s * item for s in a.strides])
        np.copyto(a.obj, view)
    return structured(lowered.structure, [a.obj for a in given])


def _launch_all(compiled, leaves, ctx, outs):
    """Launch every kernel writing ``outs``: 1-D host arrays in the simulator, device
    pointers on a GPU. Temporaries between kernels are allocated here (for a named stream,
    on that stream: see temps_on_stream)."""
    launchers = [launcher for launcher in compiled.launchers if launcher.grid > 0]
    on_stream = temps_on_stream(ctx.result_kind, ctx.device) \
        if ctx.stream_given and not ctx.simulator else None
    with on_stream(ctx.stream) if on_stream is not None else _NO_SCOPE:
        temps = {t.name: _alloc(ctx, t.dtype, t.shape, temp=True)
                 for t in compiled.lowered.temps}
        scratch = [{i: _scratch(ctx, i) for src, i in launcher.params if src == "scratch"}
                   for launcher in launchers]
    for launcher, scratch_of in zip(launchers, scratch):
        if ctx.simulator:
            _simulate(launcher, [_sim_arg(leaves, outs, scratch_of, temps, src, i)
                                 for src, i in launcher.params])
        else:
            ptrs = [leaves[i].array.base_ptr if src == "leaf" else
                    outs[i] if src == "out" else _device_ptr(scratch_of[i])
                    if src == "scratch" else _device_ptr(temps[i]) if src == "tmp"
                    else const_slot(i) for src, i in launcher.params]
            launcher.launch(ptrs, ctx.stream)


class _NoScope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_SCOPE = _NoScope()


def _sim_arg(leaves, outs, scratch, temps, src, i):
    """A kernel argument in the simulator: a 1-D view of an array's memory (bfloat16 as its
    bits), or a constant's int."""
    if src == "const":
        return int(i)
    return arrays.bits_view(arrays.host_buffer(leaves[i].array) if src == "leaf" else
                            outs[i] if src == "out" else scratch[i] if src == "scratch"
                            else temps[i].reshape(-1))


def _simulate(launcher, args):
    with _SIM_LOCK:          # numba's simulator runs one kernel at a time
        for phase in range(launcher.phases):
            simmath.PHASE[0] = phase
            launcher.kernel[launcher.grid, launcher.block, 0, launcher.shared](*args)


def _scratch(ctx, spec):
    """A split row's exchange buffer for one launch: partials (int64 words, written before
    they are read) or arrival counts (int32, zeroed on the launch's stream)."""
    what, size, dtype = spec
    if ctx.simulator:
        return np.zeros(size, dtype)
    buf = _alloc(ctx, dtype, (size,), temp=True)
    if what == "flag":
        cudadriver.memset32(_device_ptr(buf), 0, size, ctx.stream)
    return buf


def _convert(ctx, out, dtype):
    """An output as the call returns it; ``dtype`` is the output's (a bfloat16 output comes
    back from CuPy as its bits)."""
    if ctx.result_kind == "numpy":
        if not isinstance(out, np.ndarray):
            out = out.get()
            if dtypes.is_bfloat16(dtype):
                out = out.view(dtype)
        return out[()] if out.ndim == 0 else out
    return out


def structured(structure, outs):   # as the traced function returned them
    kind, meta = structure
    if kind == "single":
        return outs[0]
    if kind == "dict":
        return dict(zip(meta, outs))
    return tuple(outs) if kind == "tuple" else list(outs)
