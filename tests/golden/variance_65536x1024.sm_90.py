# variance_65536x1024, target=sm_90: 1 kernel(s)
# numbamr kernel variance (cuda target)
# grid=16384 block=256
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload, vstore, fmax_nan, fmin_nan
from numbamr.runtime.intrinsics import griddep_wait, griddep_launch
inf = math.inf
nan = math.nan


def variance(x, out0):
    # x: input 0, float32
    # out0: output 0, float32
    griddep_launch()  # the stream's next kernel may start its blocks
    griddep_wait()  # the stream's previous kernel has finished
    # 65536 rows, 4 per block, 64 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid % 64
    rib = tid // 64
    row = bid * 4 + rib
    smem_sum0 = cuda.shared.array((4, 2), float32)  # reduce #0 only
    smem_sum1 = cuda.shared.array((4, 2), float32)  # reduce #1 only
    # reduce #0 sum over q0 (1024,)
    acc_sum0 = float32(0.0)
    # -- pass over loop group 0 (row resident in registers)
    q0_0 = lane * 4 + 0
    base = 1024 * row
    x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = vload(x, base + q0_0, 4)
    acc_sum0 = acc_sum0 + x_q0_0_0
    acc_sum0 = acc_sum0 + x_q0_0_1
    acc_sum0 = acc_sum0 + x_q0_0_2
    acc_sum0 = acc_sum0 + x_q0_0_3
    q0_1 = lane * 4 + 256
    x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = vload(x, base + q0_1, 4)
    acc_sum0 = acc_sum0 + x_q0_1_0
    acc_sum0 = acc_sum0 + x_q0_1_1
    acc_sum0 = acc_sum0 + x_q0_1_2
    acc_sum0 = acc_sum0 + x_q0_1_3
    q0_2 = lane * 4 + 512
    x_q0_2_0, x_q0_2_1, x_q0_2_2, x_q0_2_3 = vload(x, base + q0_2, 4)
    acc_sum0 = acc_sum0 + x_q0_2_0
    acc_sum0 = acc_sum0 + x_q0_2_1
    acc_sum0 = acc_sum0 + x_q0_2_2
    acc_sum0 = acc_sum0 + x_q0_2_3
    q0_3 = lane * 4 + 768
    x_q0_3_0, x_q0_3_1, x_q0_3_2, x_q0_3_3 = vload(x, base + q0_3, 4)
    acc_sum0 = acc_sum0 + x_q0_3_0
    acc_sum0 = acc_sum0 + x_q0_3_1
    acc_sum0 = acc_sum0 + x_q0_3_2
    acc_sum0 = acc_sum0 + x_q0_3_3
    # -- end of pass over loop group 0
    # combine #0 sum across 64 threads
    acc_sum0_x16 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum0, 16)
    acc_sum0 = acc_sum0 + acc_sum0_x16
    acc_sum0_x8 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum0, 8)
    acc_sum0 = acc_sum0 + acc_sum0_x8
    acc_sum0_x4 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum0, 4)
    acc_sum0 = acc_sum0 + acc_sum0_x4
    acc_sum0_x2 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum0, 2)
    acc_sum0 = acc_sum0 + acc_sum0_x2
    acc_sum0_x1 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum0, 1)
    acc_sum0 = acc_sum0 + acc_sum0_x1
    if lane % 32 == 0:
        smem_sum0[rib, lane // 32] = acc_sum0
    cuda.syncthreads()  # partials of reduce #0 written
    sum0_v = smem_sum0[rib, 0]
    sum0_v_1 = smem_sum0[rib, 1]
    sum0_v = sum0_v + sum0_v_1
    sum0 = sum0_v
    # reduce #1 sum over q0 (1024,)
    acc_sum1 = float32(0.0)
    div = sum0 / float32(1024.0)
    # -- pass over loop group 0 (row resident in registers)
    sub_0_0 = x_q0_0_0 - div
    mul_0_0 = sub_0_0 * sub_0_0
    sub_0_1 = x_q0_0_1 - div
    mul_0_1 = sub_0_1 * sub_0_1
    sub_0_2 = x_q0_0_2 - div
    mul_0_2 = sub_0_2 * sub_0_2
    sub_0_3 = x_q0_0_3 - div
    mul_0_3 = sub_0_3 * sub_0_3
    acc_sum1 = acc_sum1 + mul_0_0
    acc_sum1 = acc_sum1 + mul_0_1
    acc_sum1 = acc_sum1 + mul_0_2
    acc_sum1 = acc_sum1 + mul_0_3
    sub_1_0 = x_q0_1_0 - div
    mul_1_0 = sub_1_0 * sub_1_0
    sub_1_1 = x_q0_1_1 - div
    mul_1_1 = sub_1_1 * sub_1_1
    sub_1_2 = x_q0_1_2 - div
    mul_1_2 = sub_1_2 * sub_1_2
    sub_1_3 = x_q0_1_3 - div
    mul_1_3 = sub_1_3 * sub_1_3
    acc_sum1 = acc_sum1 + mul_1_0
    acc_sum1 = acc_sum1 + mul_1_1
    acc_sum1 = acc_sum1 + mul_1_2
    acc_sum1 = acc_sum1 + mul_1_3
    sub_2_0 = x_q0_2_0 - div
    mul_2_0 = sub_2_0 * sub_2_0
    sub_2_1 = x_q0_2_1 - div
    mul_2_1 = sub_2_1 * sub_2_1
    sub_2_2 = x_q0_2_2 - div
    mul_2_2 = sub_2_2 * sub_2_2
    sub_2_3 = x_q0_2_3 - div
    mul_2_3 = sub_2_3 * sub_2_3
    acc_sum1 = acc_sum1 + mul_2_0
    acc_sum1 = acc_sum1 + mul_2_1
    acc_sum1 = acc_sum1 + mul_2_2
    acc_sum1 = acc_sum1 + mul_2_3
    sub_3_0 = x_q0_3_0 - div
    mul_3_0 = sub_3_0 * sub_3_0
    sub_3_1 = x_q0_3_1 - div
    mul_3_1 = sub_3_1 * sub_3_1
    sub_3_2 = x_q0_3_2 - div
    mul_3_2 = sub_3_2 * sub_3_2
    sub_3_3 = x_q0_3_3 - div
    mul_3_3 = sub_3_3 * sub_3_3
    acc_sum1 = acc_sum1 + mul_3_0
    acc_sum1 = acc_sum1 + mul_3_1
    acc_sum1 = acc_sum1 + mul_3_2
    acc_sum1 = acc_sum1 + mul_3_3
    # -- end of pass over loop group 0
    # combine #1 sum across 64 threads
    acc_sum1_x16 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum1, 16)
    acc_sum1 = acc_sum1 + acc_sum1_x16
    acc_sum1_x8 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum1, 8)
    acc_sum1 = acc_sum1 + acc_sum1_x8
    acc_sum1_x4 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum1, 4)
    acc_sum1 = acc_sum1 + acc_sum1_x4
    acc_sum1_x2 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum1, 2)
    acc_sum1 = acc_sum1 + acc_sum1_x2
    acc_sum1_x1 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_sum1, 1)
    acc_sum1 = acc_sum1 + acc_sum1_x1
    if lane % 32 == 0:
        smem_sum1[rib, lane // 32] = acc_sum1
    cuda.syncthreads()  # partials of reduce #1 written
    if not (lane == 0):
        return  # the rest needs only these threads
    sum1_v = smem_sum1[rib, 0]
    sum1_v_1 = smem_sum1[rib, 1]
    sum1_v = sum1_v + sum1_v_1
    sum1 = sum1_v
    # row-level outputs
    div_1 = sum1 / float32(1024.0)
    base_1 = row
    if lane == 0:
        out0[base_1] = div_1
