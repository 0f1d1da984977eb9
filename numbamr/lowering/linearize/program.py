"""The linear program: its instructions, the table of their ops, and its text form.

Each op is a string; the emitter prints an instruction through its rule ``op_<op>``
(``Emitter.op_alu`` for "ALU"), and ``verify`` checks a program through the properties
``OPS`` gives each op.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OpInfo:
    """What the checks and the text form need to know of an op."""
    doc: str
    closes: str = None      # the op that ends the block this one opens
    scope: bool = False     # its block is a Python block: names defined inside end with it
    barrier: bool = False   # every thread (of the block; of the warp for a shuffle) must reach
    #                         it, so it is never inside an if block
    shared: str = None      # shared memory it touches: "reduce" (a reduce's own array),
    #                         "stage" (staged or persistent rows), "exchange" (partials)
    declares: bool = False  # declares the shared memory it names as its output


OPS = {
    "COMMENT": OpInfo("a comment line (arg: its text)"),
    "SPECIAL": OpInfo("a thread or block index (arg: threadIdx.x, blockIdx.x, gridDim.x)"),
    "INDEX": OpInfo("an integer expression (arg: its text)"),
    "LOAD": OpInfo("a scalar load from global memory (arg: (index text, mask or None))"),
    "VLOAD": OpInfo("a vector load, one name an element (arg: (index text, mask or None))"),
    "STORE": OpInfo("a scalar store to global memory (arg: index text)"),
    "VSTORE": OpInfo("a vector store (arg: (index text, width))"),
    "ALU": OpInfo("an operation on values (arg: the Op, or 'copy')"),
    "CAST": OpInfo("a conversion (arg: the dtype converted to)"),
    "DEFINE_ACC": OpInfo("an accumulator and its initial value (arg: its literal)"),
    "ACC": OpInfo("accumulate values into a reduce's accumulators (arg: the ReduceKind)"),
    "ONLINE": OpInfo("a one-pass (fused) update of several values (arg: 'welford' or 'lse')"),
    "SHFL": OpInfo("a warp exchange (arg: (lane offset, reduce id))", barrier=True),
    "COMBINE": OpInfo("two partials of a reduce combined (arg: (kind, lane offset or None))"),
    "SHARED": OpInfo("a reduce's shared array (arg: (shape, reduce id))", shared="reduce",
                     declares=True),
    "SHARED_STORE": OpInfo("a partial written to its reduce's shared array (arg: (index "
                           "text, reduce id))", shared="reduce"),
    "SHARED_LOAD": OpInfo("a partial read back (arg: (index text, reduce id))",
                          shared="reduce"),
    "BARRIER": OpInfo("a block barrier (arg: the reduces whose partials it publishes)",
                      barrier=True),
    "LOOP": OpInfo("a loop over iterations (arg: (count, group id))", closes="ENDLOOP",
                   scope=True),
    "ENDLOOP": OpInfo("the end of a LOOP"),
    "IF": OpInfo("an if block (arg: its condition's text)", closes="ENDIF", scope=True),
    "ENDIF": OpInfo("the end of an IF"),
    "EXIT": OpInfo("threads that do not meet the condition leave the kernel: what follows "
                   "needs only the others (arg: the condition's text)"),
    "PASS": OpInfo("a marker before the chunks of a resident pass (their values stay "
                   "defined after it)", closes="ENDPASS"),
    "ENDPASS": OpInfo("the marker after them"),
    # split rows: partials exchanged between the blocks of a row
    "XOPEN": OpInfo("an exchange begins (arg: its number)"),
    "XSTORE": OpInfo("publish a partial (arg: (index into xpart, slot, block of the row, "
                     "exchange)); reads xpart, its last source, unless the blocks are a "
                     "cluster on a GPU", shared="exchange"),
    "XSYNC": OpInfo("wait for the row's blocks (arg: (exchange, split))", barrier=True),
    "XLOAD": OpInfo("read a partial (arg: (index into xpart, slot, block of the row))",
                    shared="exchange"),
    # rows staged in dynamic shared memory
    "STAGE_DECL": OpInfo("a region of dynamic shared memory (arg: its dtype's name)",
                         shared="stage", declares=True),
    "STAGE_STORE": OpInfo("a staged element written (arg: index text)", shared="stage"),
    "STAGE_LOAD": OpInfo("a staged element read back (arg: index text)", shared="stage"),
    # persistent clusters: a loop over rows, brought into stages ahead of their use
    "ROWS_OPEN": OpInfo("the stages' mbarriers armed, the first rows' copies started (arg: "
                        "dict of ahead, seg, extent, fills)", shared="stage"),
    "ROWLOOP": OpInfo("the loop over the cluster's rows (arg: stages ahead)",
                      closes="ENDROWLOOP", scope=True),
    "SVLOAD": OpInfo("a row's chunk read from its stage (arg: index text)", shared="stage"),
    "ROWS_FILL": OpInfo("a stage refilled with the row that many rows on (arg: stages "
                        "ahead)", shared="stage"),
    "ENDROWLOOP": OpInfo("the end of the ROWLOOP"),
}
CLOSERS = {info.closes: op for op, info in OPS.items() if info.closes}   # ENDIF -> IF ...


@dataclass
class Instr:
    op: str                  # a key of OPS
    out: tuple = ()          # names defined
    srcs: tuple = ()         # names read
    arg: object = None
    dtype: object = None

    def __repr__(self):
        out = ", ".join(self.out)
        return f"{out + ' = ' if out else ''}{self.op} {self.arg!r} <- {', '.join(self.srcs)}"


@dataclass
class Program:
    """The linear program of one kernel: ``instrs`` in order (OPS says what each op is)."""
    name: str
    instrs: list
    params: list             # (name, 'in'|'out', dtype, position)
    block: int
    grid: int
    layout: object
    kernel: object
    shared: list = field(default_factory=list)   # (name, shape, dtype, reduce id)
    dynamic_shared: int = 0  # bytes of dynamic shared memory (staged rows)


def format_program(p):
    lines, depth = [f"program {p.name} grid={p.grid} block={p.block}"], 1
    for ins in p.instrs:
        if ins.op in CLOSERS:
            depth -= 1
        lines.append("  " * depth + repr(ins))
        if OPS[ins.op].closes:
            depth += 1
    return "\n".join(lines)
