"""The table of instruction ops (``linearize.OPS``) against the emitter and the checks."""
import numpy as np
import pytest

import numbamr as nm
from numbamr.lowering.emit import Emitter
from numbamr.lowering.linearize import OPS, Instr
from numbamr.lowering.verify import verify, VerifyError


def _rules():
    return {name[3:].upper() for name in dir(Emitter) if name.startswith("op_")}


def test_every_op_has_an_emitter_rule_and_every_rule_an_op():
    assert set(OPS) == _rules()


def test_every_block_closes_with_an_op_of_the_table():
    for op, info in OPS.items():
        if info.closes:
            assert info.closes in OPS and not OPS[info.closes].closes, op


def _program(fn, *args, target="sim"):
    return nm.jit(fn).lower(*args, target=target).kernels[0].program


def test_verify_names_an_op_missing_from_the_table():
    prog = _program(lambda x: x.sum(axis=1), np.empty((4, 64), np.float32))
    prog.instrs.insert(len(prog.instrs) - 1, Instr("NOPE"))
    with pytest.raises(VerifyError, match="unknown op 'NOPE'"):
        verify(prog)


def test_a_persistent_row_loop_is_a_scope():
    """A name defined inside the loop over a persistent cluster's rows is not read after it."""
    x, w, b = (np.empty((1024, 65536), np.float32), np.empty(65536, np.float32),
               np.empty(65536, np.float32))

    def layernorm(x, w, b):
        d = x - x.mean(axis=-1, keepdims=True)
        return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b

    prog = _program(layernorm, x, w, b, target="sm_90")
    assert prog.layout.persistent
    ops = [ins.op for ins in prog.instrs]
    inside = next(ins for ins in prog.instrs[ops.index("ROWLOOP") + 1:] if ins.out)
    prog.instrs.append(Instr("INDEX", ("late",), (inside.out[0],), arg=inside.out[0]))
    with pytest.raises(VerifyError, match="outside the scope"):
        verify(prog)
