"""Checks between stages: scopes, blocks and barriers of a linear program.

- every name is defined before it is read, in a scope that is still open;
- blocks (IF/ENDIF, LOOP/ENDLOOP, ROWLOOP/ENDROWLOOP) nest and are all closed by the end;
- no barrier or warp shuffle sits inside an IF or after an EXIT (every thread of a block
  must reach it), and an EXIT is outside every block;
- no block is empty (its Python source would not parse);
- every shared array belongs to one reduce, and only that reduce's instructions touch it.

What each op is (opens a block, is a barrier, touches a reduce's shared array) comes from
the table ``linearize.OPS``.
"""
import re

from ..errors import VerifyError
from .linearize.program import CLOSERS, OPS

_OPEN = {op: info.closes for op, info in OPS.items() if info.scope}    # IF -> ENDIF ...
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
_LITERALS = {"True", "False"}


__all__ = ["verify", "VerifyError"]


def verify(program):
    scopes = [set(name for name, *_ in program.params)]
    stack = []
    owner = {}
    exited = False
    for i, ins in enumerate(program.instrs):
        where = f"instruction {i} ({ins!r}) of {program.name}"
        for s in ins.srcs:
            if _IDENT.match(s) and s not in _LITERALS and not any(s in sc for sc in scopes):
                raise VerifyError(f"{where} reads {s!r} outside the scope that defines it")
        info = OPS.get(ins.op)
        if info is None:
            raise VerifyError(f"{where}: unknown op {ins.op!r}")
        if info.barrier and "IF" in stack:
            raise VerifyError(f"{where}: a {ins.op.lower()} inside an if block is not reached "
                              "by every thread")
        if info.barrier and exited:
            raise VerifyError(f"{where}: a {ins.op.lower()} after an exit is not reached by "
                              "every thread")
        if ins.op == "EXIT":
            if stack:
                raise VerifyError(f"{where}: an exit inside a block")
            exited = True
        if info.shared == "reduce" and info.declares:
            owner[ins.out[0]] = ins.arg[1]
        elif info.shared == "reduce":
            if ins.srcs[0] not in owner:
                raise VerifyError(f"{where} uses an undeclared shared array")
            if owner[ins.srcs[0]] != ins.arg[1]:
                raise VerifyError(f"{where}: reduce #{ins.arg[1]} uses the shared array of "
                                  f"reduce #{owner[ins.srcs[0]]}")
        if ins.op in _OPEN:
            stack.append(ins.op)
            scopes.append(set())
        elif CLOSERS.get(ins.op) in _OPEN:
            if not stack or _OPEN[stack[-1]] != ins.op:
                raise VerifyError(f"{where} closes a block that is not open")
            if i and program.instrs[i - 1].op in _OPEN:
                raise VerifyError(f"{where} closes an empty block")
            stack.pop()
            scopes.pop()
        scopes[-1].update(ins.out)
    if stack:
        raise VerifyError(f"{program.name} ends with open blocks: {stack}")
    reduce_of_shared = {}
    for name, _, _, rid in program.shared:
        if name in reduce_of_shared:
            raise VerifyError(f"shared array {name} declared twice")
        reduce_of_shared[name] = rid
    return program
