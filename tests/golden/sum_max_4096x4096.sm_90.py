# sum_max_4096x4096, target=sm_90: 1 kernel(s)
# numbamr kernel sum_and_max (cuda target)
# grid=4096 block=256
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload, vstore, fmax_nan, fmin_nan
from numbamr.runtime.intrinsics import griddep_wait, griddep_launch
inf = math.inf
nan = math.nan


def sum_and_max(x, out0, out1):
    # x: input 0, float32
    # out0: output 0, float32
    # out1: output 1, float32
    griddep_launch()  # the stream's next kernel may start its blocks
    griddep_wait()  # the stream's previous kernel has finished
    # 4096 rows, 1 per block, 256 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid
    rib = 0
    row = bid * 1 + rib
    smem_sum0 = cuda.shared.array((1, 8), float32)  # reduce #0 only
    smem_max1 = cuda.shared.array((1, 8), float32)  # reduce #1 only
    # reduce #0 sum, #1 max over q0 (4096,)
    acc_sum0 = float32(0.0)
    acc_max1 = float32(-inf)
    # -- pass over loop group 0 (row resident in registers)
    q0_0 = lane * 4 + 0
    base = 4096 * row
    x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = vload(x, base + q0_0, 4)
    acc_sum0 = acc_sum0 + x_q0_0_0
    acc_sum0 = acc_sum0 + x_q0_0_1
    acc_sum0 = acc_sum0 + x_q0_0_2
    acc_sum0 = acc_sum0 + x_q0_0_3
    acc_max1 = fmax_nan(x_q0_0_0, acc_max1)
    acc_max1 = fmax_nan(x_q0_0_1, acc_max1)
    acc_max1 = fmax_nan(x_q0_0_2, acc_max1)
    acc_max1 = fmax_nan(x_q0_0_3, acc_max1)
    q0_1 = lane * 4 + 1024
    x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = vload(x, base + q0_1, 4)
    acc_sum0 = acc_sum0 + x_q0_1_0
    acc_sum0 = acc_sum0 + x_q0_1_1
    acc_sum0 = acc_sum0 + x_q0_1_2
    acc_sum0 = acc_sum0 + x_q0_1_3
    acc_max1 = fmax_nan(x_q0_1_0, acc_max1)
    acc_max1 = fmax_nan(x_q0_1_1, acc_max1)
    acc_max1 = fmax_nan(x_q0_1_2, acc_max1)
    acc_max1 = fmax_nan(x_q0_1_3, acc_max1)
    q0_2 = lane * 4 + 2048
    x_q0_2_0, x_q0_2_1, x_q0_2_2, x_q0_2_3 = vload(x, base + q0_2, 4)
    acc_sum0 = acc_sum0 + x_q0_2_0
    acc_sum0 = acc_sum0 + x_q0_2_1
    acc_sum0 = acc_sum0 + x_q0_2_2
    acc_sum0 = acc_sum0 + x_q0_2_3
    acc_max1 = fmax_nan(x_q0_2_0, acc_max1)
    acc_max1 = fmax_nan(x_q0_2_1, acc_max1)
    acc_max1 = fmax_nan(x_q0_2_2, acc_max1)
    acc_max1 = fmax_nan(x_q0_2_3, acc_max1)
    q0_3 = lane * 4 + 3072
    x_q0_3_0, x_q0_3_1, x_q0_3_2, x_q0_3_3 = vload(x, base + q0_3, 4)
    acc_sum0 = acc_sum0 + x_q0_3_0
    acc_sum0 = acc_sum0 + x_q0_3_1
    acc_sum0 = acc_sum0 + x_q0_3_2
    acc_sum0 = acc_sum0 + x_q0_3_3
    acc_max1 = fmax_nan(x_q0_3_0, acc_max1)
    acc_max1 = fmax_nan(x_q0_3_1, acc_max1)
    acc_max1 = fmax_nan(x_q0_3_2, acc_max1)
    acc_max1 = fmax_nan(x_q0_3_3, acc_max1)
    # -- end of pass over loop group 0
    # combine #0 sum across 256 threads
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
    # combine #1 max across 256 threads
    acc_max1_x16 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max1, 16)
    acc_max1 = fmax_nan(acc_max1_x16, acc_max1)
    acc_max1_x8 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max1, 8)
    acc_max1 = fmax_nan(acc_max1_x8, acc_max1)
    acc_max1_x4 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max1, 4)
    acc_max1 = fmax_nan(acc_max1_x4, acc_max1)
    acc_max1_x2 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max1, 2)
    acc_max1 = fmax_nan(acc_max1_x2, acc_max1)
    acc_max1_x1 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max1, 1)
    acc_max1 = fmax_nan(acc_max1_x1, acc_max1)
    if lane % 32 == 0:
        smem_sum0[rib, lane // 32] = acc_sum0
        smem_max1[rib, lane // 32] = acc_max1
    cuda.syncthreads()  # partials of reduces #0, #1 written
    if not (lane == 0):
        return  # the rest needs only these threads
    sum0_v = smem_sum0[rib, 0]
    sum0_v_1 = smem_sum0[rib, 1]
    sum0_v = sum0_v + sum0_v_1
    sum0_v_2 = smem_sum0[rib, 2]
    sum0_v = sum0_v + sum0_v_2
    sum0_v_3 = smem_sum0[rib, 3]
    sum0_v = sum0_v + sum0_v_3
    sum0_v_4 = smem_sum0[rib, 4]
    sum0_v = sum0_v + sum0_v_4
    sum0_v_5 = smem_sum0[rib, 5]
    sum0_v = sum0_v + sum0_v_5
    sum0_v_6 = smem_sum0[rib, 6]
    sum0_v = sum0_v + sum0_v_6
    sum0_v_7 = smem_sum0[rib, 7]
    sum0_v = sum0_v + sum0_v_7
    max1_v = smem_max1[rib, 0]
    max1_v_1 = smem_max1[rib, 1]
    max1_v = fmax_nan(max1_v_1, max1_v)
    max1_v_2 = smem_max1[rib, 2]
    max1_v = fmax_nan(max1_v_2, max1_v)
    max1_v_3 = smem_max1[rib, 3]
    max1_v = fmax_nan(max1_v_3, max1_v)
    max1_v_4 = smem_max1[rib, 4]
    max1_v = fmax_nan(max1_v_4, max1_v)
    max1_v_5 = smem_max1[rib, 5]
    max1_v = fmax_nan(max1_v_5, max1_v)
    max1_v_6 = smem_max1[rib, 6]
    max1_v = fmax_nan(max1_v_6, max1_v)
    max1_v_7 = smem_max1[rib, 7]
    max1_v = fmax_nan(max1_v_7, max1_v)
    sum0 = sum0_v
    max1 = max1_v
    # row-level outputs
    base_1 = row
    if lane == 0:
        out0[base_1] = sum0
        out1[base_1] = max1
