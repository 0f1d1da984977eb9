"""Schedule: which outputs are computed by which kernel.

A group of outputs that share one iteration space becomes one kernel (``lowering.kernel``
decides whether they really can: a nested reduction raises ``FusionError``).
"""
from dataclasses import dataclass

from .graph import format_graph


@dataclass
class KernelGroup:
    name: str
    outputs: list          # graph nodes computed by this kernel


def schedule(outputs, name):
    """All outputs in one kernel."""
    return [KernelGroup(name, list(outputs))]


def format_schedule(groups):
    return "\n\n".join(f"kernel {g.name}:\n{format_graph(g.outputs)}" for g in groups)
