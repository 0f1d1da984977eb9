# sum_max_4096x4096, target=sim: 1 kernel(s)
# numbamr kernel sum_and_max (sim target)
# grid=2048 block=64
from numbamr.runtime import simmath as math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.simmath import select
inf = math.inf
nan = math.nan


def sum_and_max(x, out0, out1):
    # x: input 0, float32
    # out0: output 0, float32
    # out1: output 1, float32
    math.quiet()
    with math.shared_lock:
        xchg_0 = cuda.shared.array(64, float32)
    with math.shared_lock:
        xchg_1 = cuda.shared.array(64, float32)
    # 4096 rows, 2 per block, 32 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid % 32
    rib = tid // 32
    row = bid * 2 + rib
    # reduce #0 sum, #1 max over q0 (4096,)
    acc_sum0 = float32(0.0)
    acc_max1 = float32(-inf)
    base = 4096 * row
    for it0 in range(16):
        q0_0 = it0 * 256 + lane * 4 + 0
        x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = (x[base + q0_0], x[base + q0_0 + 1], x[base + q0_0 + 2], x[base + q0_0 + 3])
        acc_sum0 = acc_sum0 + x_q0_0_0
        acc_sum0 = acc_sum0 + x_q0_0_1
        acc_sum0 = acc_sum0 + x_q0_0_2
        acc_sum0 = acc_sum0 + x_q0_0_3
        acc_max1 = select((x_q0_0_0 > acc_max1) | (x_q0_0_0 != x_q0_0_0), x_q0_0_0, acc_max1)
        acc_max1 = select((x_q0_0_1 > acc_max1) | (x_q0_0_1 != x_q0_0_1), x_q0_0_1, acc_max1)
        acc_max1 = select((x_q0_0_2 > acc_max1) | (x_q0_0_2 != x_q0_0_2), x_q0_0_2, acc_max1)
        acc_max1 = select((x_q0_0_3 > acc_max1) | (x_q0_0_3 != x_q0_0_3), x_q0_0_3, acc_max1)
        q0_1 = it0 * 256 + lane * 4 + 128
        x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = (x[base + q0_1], x[base + q0_1 + 1], x[base + q0_1 + 2], x[base + q0_1 + 3])
        acc_sum0 = acc_sum0 + x_q0_1_0
        acc_sum0 = acc_sum0 + x_q0_1_1
        acc_sum0 = acc_sum0 + x_q0_1_2
        acc_sum0 = acc_sum0 + x_q0_1_3
        acc_max1 = select((x_q0_1_0 > acc_max1) | (x_q0_1_0 != x_q0_1_0), x_q0_1_0, acc_max1)
        acc_max1 = select((x_q0_1_1 > acc_max1) | (x_q0_1_1 != x_q0_1_1), x_q0_1_1, acc_max1)
        acc_max1 = select((x_q0_1_2 > acc_max1) | (x_q0_1_2 != x_q0_1_2), x_q0_1_2, acc_max1)
        acc_max1 = select((x_q0_1_3 > acc_max1) | (x_q0_1_3 != x_q0_1_3), x_q0_1_3, acc_max1)
    # combine #0 sum across 32 threads
    xchg_0[tid] = acc_sum0
    cuda.syncthreads()
    acc_sum0_x16 = xchg_0[tid ^ 16]
    cuda.syncthreads()
    acc_sum0 = acc_sum0 + acc_sum0_x16
    xchg_0[tid] = acc_sum0
    cuda.syncthreads()
    acc_sum0_x8 = xchg_0[tid ^ 8]
    cuda.syncthreads()
    acc_sum0 = acc_sum0 + acc_sum0_x8
    xchg_0[tid] = acc_sum0
    cuda.syncthreads()
    acc_sum0_x4 = xchg_0[tid ^ 4]
    cuda.syncthreads()
    acc_sum0 = acc_sum0 + acc_sum0_x4
    xchg_0[tid] = acc_sum0
    cuda.syncthreads()
    acc_sum0_x2 = xchg_0[tid ^ 2]
    cuda.syncthreads()
    acc_sum0 = acc_sum0 + acc_sum0_x2
    xchg_0[tid] = acc_sum0
    cuda.syncthreads()
    acc_sum0_x1 = xchg_0[tid ^ 1]
    cuda.syncthreads()
    acc_sum0 = acc_sum0 + acc_sum0_x1
    # combine #1 max across 32 threads
    xchg_1[tid] = acc_max1
    cuda.syncthreads()
    acc_max1_x16 = xchg_1[tid ^ 16]
    cuda.syncthreads()
    acc_max1 = select((acc_max1_x16 > acc_max1) | (acc_max1_x16 != acc_max1_x16), acc_max1_x16, acc_max1)
    xchg_1[tid] = acc_max1
    cuda.syncthreads()
    acc_max1_x8 = xchg_1[tid ^ 8]
    cuda.syncthreads()
    acc_max1 = select((acc_max1_x8 > acc_max1) | (acc_max1_x8 != acc_max1_x8), acc_max1_x8, acc_max1)
    xchg_1[tid] = acc_max1
    cuda.syncthreads()
    acc_max1_x4 = xchg_1[tid ^ 4]
    cuda.syncthreads()
    acc_max1 = select((acc_max1_x4 > acc_max1) | (acc_max1_x4 != acc_max1_x4), acc_max1_x4, acc_max1)
    xchg_1[tid] = acc_max1
    cuda.syncthreads()
    acc_max1_x2 = xchg_1[tid ^ 2]
    cuda.syncthreads()
    acc_max1 = select((acc_max1_x2 > acc_max1) | (acc_max1_x2 != acc_max1_x2), acc_max1_x2, acc_max1)
    xchg_1[tid] = acc_max1
    cuda.syncthreads()
    acc_max1_x1 = xchg_1[tid ^ 1]
    cuda.syncthreads()
    acc_max1 = select((acc_max1_x1 > acc_max1) | (acc_max1_x1 != acc_max1_x1), acc_max1_x1, acc_max1)
    sum0 = acc_sum0
    max1 = acc_max1
    # row-level outputs
    base_1 = row
    if lane == 0:
        out0[base_1] = sum0
        out1[base_1] = max1
