"""The GPU the layout heuristics are tuned for, as numbers: multiprocessors, threads, memory.

The heuristics (``heuristics.py``) were measured on an H200; the thresholds they derive from
its size (a grid of one wave, the shared memory a block may stage rows in) read ``H200``.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    sms: int                    # multiprocessors
    threads_per_sm: int         # resident threads a multiprocessor holds at most
    shared_per_sm: int          # bytes of shared memory of one multiprocessor
    shared_reserved: int        # ... of which each resident block takes this much
    shared_per_block: int       # bytes of shared memory one block may ask for at most
    max_cluster: int            # blocks of a thread-block cluster at most (non-portable size)

    def occupancy_shared(self, blocks_per_sm):
        """Dynamic shared memory per block that leaves room for ``blocks_per_sm`` blocks on
        one multiprocessor and not one more (0 for no cap)."""
        if not blocks_per_sm:
            return 0
        need = self.shared_per_sm // (blocks_per_sm + 1) - self.shared_reserved + 16
        return -(-need // 16) * 16


# NVIDIA H200 (sm_90; the H100 has the same multiprocessors): 8 blocks a cluster portably,
# 16 with the non-portable cluster size the launcher asks for
H200 = DeviceProfile(name="H200", sms=132, threads_per_sm=2048, shared_per_sm=228 * 1024,
                     shared_reserved=1024, shared_per_block=227 * 1024, max_cluster=16)
