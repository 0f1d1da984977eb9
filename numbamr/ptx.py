"""Compile emitted kernels to PTX and machine code for sm_90 without a GPU, and report.

Used by the PTX test tier (in a process where numba's simulator is off): for each kernel it
reports whether it compiled, its vector loads/stores, and what ptxas says about registers,
stack frame and spills (through nvJitLink's verbose log).
    python -m numbamr.ptx < kernels.json > report.json
"""
import json
import re
import sys


def _sig(params, scalars=()):
    from numbamr.runtime.compile import pointer_signature
    return pointer_signature(params, frozenset(scalars)).args


def _ptxas_log(ptx, cc):
    from cuda.bindings import nvjitlink
    h = nvjitlink.create(2, [f"-arch=sm_{cc[0]}{cc[1]}", "-verbose"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(h)
        buf = bytearray(nvjitlink.get_info_log_size(h))
        nvjitlink.get_info_log(h, buf)
        return buf.decode(errors="replace")
    finally:
        nvjitlink.destroy(h)


def inspect(entry, cc=(9, 0)):
    """Compile one kernel: {'ok', 'error', 'vector_loads', 'vector_stores', 'vector_bytes'
    (the widths of its vector accesses), 'registers', 'spill_bytes', 'stack_bytes'}."""
    from numba import cuda
    from numbamr.runtime.compile import load_source, with_deep_stack
    try:
        fn = getattr(load_source(entry["source"], entry["name"]), entry["name"])
        bounds = tuple(entry["launch_bounds"])
        sig = _sig(entry["params"], entry.get("scalars", ()))
        ptx, _ = with_deep_stack(lambda: cuda.compile_ptx(fn, sig, cc=cc,
                                                          launch_bounds=bounds))
        log = _ptxas_log(ptx, cc)
    except Exception as e:          # reported, not raised: the test names the kernel
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    spills = [int(a) + int(b) for a, b in
              re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)]
    stack = [int(x) for x in re.findall(r"(\d+) bytes stack frame", log)]
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    return {
        "ok": True, "error": None,
        "vector_loads": len(re.findall(r"ld\.global(?:\.[\w:]+)*\.v[248]\.", ptx)),
        "vector_stores": len(re.findall(r"st\.global(?:\.[\w:]+)*\.v[248]\.", ptx)),
        # one byte a load or store (bool and 8-bit buffers read or written element-wise)
        "byte_loads": len(re.findall(r"\bld\.global(?:\.[\w:]+)*\.[usb]8\b", ptx)),
        "byte_stores": len(re.findall(r"\bst\.global(?:\.[\w:]+)*\.[usb]8\b", ptx)),
        # two bytes a load (half-precision columns read one element a thread)
        "half_loads": len(re.findall(r"\bld\.global(?:\.[\w:]+)*\.[usbf]16\b", ptx)),
        "scalar_global_loads": len(re.findall(
            r"ld\.global(?:\.nc)?(?:\.L2::cache_hint)?\.[fbsu]\d+", ptx)),
        # loads under an L2 eviction policy, and the policies they use
        "hinted_loads": len(re.findall(r"ld\.global(?:\.[\w:]+)*\.L2::cache_hint\.", ptx)),
        "evict_last_policies": len(re.findall(r"createpolicy\.fractional\.L2::evict_last\.",
                                              ptx)),
        "vector_bytes": sorted({int(n) * int(bits) // 8 for n, bits in re.findall(
            r"(?:ld|st)\.global(?:\.[\w:]+)*?\.v([248])\.[fbsu](\d+)", ptx)}),
        "cluster_barriers": len(re.findall(r"barrier\.cluster\.(?:arrive|wait)", ptx)),
        "async_stores": len(re.findall(r"\bst\.async\.", ptx)),
        "mbarrier_waits": len(re.findall(r"\bmbarrier\.try_wait\.", ptx)),
        "bulk_copies": len(re.findall(r"\bcp\.async\.bulk\.", ptx)),
        "atomics": len(re.findall(r"\batom\.", ptx)),
        "griddep_waits": len(re.findall(r"\bgriddepcontrol\.wait\b", ptx)),
        "griddep_launches": len(re.findall(r"\bgriddepcontrol\.launch_dependents\b", ptx)),
        # no global memory access ahead of the wait for the previous kernel
        "global_before_griddep_wait": _global_access_before(ptx, "griddepcontrol.wait"),
        "nan_minmax": len(re.findall(r"\b(?:max|min)\.NaN\.f32", ptx)),
        "nan_tests": len(re.findall(r"setp\.nan\.f32", ptx)),
        "compares_64": len(re.findall(r"\bsetp\.\w+\.[su]64\b", ptx)),
        "rounded_products": len(re.findall(r"\bmul\.rn\.f(?:32|64)\b", ptx)),
        # float32 -> bfloat16 roundings: one instruction each (sm_80 and newer), or the
        # integer form, whose rounding bias 0x7FFF marks each
        "bf16_cvts": len(re.findall(r"\bcvt\.rn\.bf16\.f32\b", ptx)),
        "bf16_bit_rounds": len(re.findall(r"\badd\.[su]32\s+%r\d+, %r\d+, 32767;", ptx)),
        "local_accesses": len(re.findall(r"\b(?:ld|st)\.local\b", ptx)),
        "registers": max(regs, default=0),
        "spill_bytes": sum(spills),
        "stack_bytes": max(stack, default=0),
    }


def _global_access_before(ptx, marker):
    """How many global loads, stores, atomics and bulk copies from global memory the PTX
    has before ``marker`` (all of them when it has none)."""
    at = ptx.find(marker)
    return len(re.findall(r"\b(?:(?:ld|st|atom|red)\.global|cp\.async\.bulk\.[\w:.]*global)\b",
                          ptx[:at if at >= 0 else None]))


def main():
    entries = json.load(sys.stdin)
    json.dump([inspect(e) for e in entries], sys.stdout)


if __name__ == "__main__":
    main()
