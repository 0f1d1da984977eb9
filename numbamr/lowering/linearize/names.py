"""Names of the emitted kernel's values: unique, readable, never a name the module uses."""
import builtins
import keyword

RESERVED = set(dir(builtins)) | set(keyword.kwlist) | {
    "math", "cuda", "inf", "nan", "vload", "vload_keep", "vstore", "select", "bf16_to_f32",
    "f32_to_bf16", "f64_to_f32_odd", "boolean", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
    "_hi", "_nn", "_d", "_mn", "_cmu", "_cm2", "_take",       # the emitter's scratch names
    "xsm", "xbar", "xload", "xload_int", "xstore", "xsend", "xbar_arm", "xbar_wait",
    "cluster_arrive", "cluster_wait", "arrive_and_wait", "sim_phase", "fmax_nan", "fmin_nan",
    "griddep_wait", "griddep_launch"}


class Names:
    """Unique, readable names that never shadow a builtin or a name the emitted module uses."""

    def __init__(self):
        self.used = set(RESERVED)

    def new(self, base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name


def value_name(val, ch, v):
    base = val.op.name.lower()
    return f"{base}_{ch.u}_{v}" if ch is not None else base
