# softmax_4096x1024, target=sm_90: 1 kernel(s)
# numbamr kernel softmax (cuda target)
# grid=4096 block=64
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload_keep, vstore, fmax_nan, fmin_nan, mul_rn
from numbamr.runtime.intrinsics import griddep_wait, griddep_launch
inf = math.inf
nan = math.nan


def softmax(x, out0):
    # x: input 0, float32
    # out0: output 0, float32
    griddep_launch()  # the stream's next kernel may start its blocks
    griddep_wait()  # the stream's previous kernel has finished
    # 4096 rows, 1 per block, 64 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid
    rib = 0
    row = bid * 1 + rib
    smem_max0 = cuda.shared.array((1, 2), float32)  # reduce #0 only
    smem_sum1 = cuda.shared.array((1, 2), float32)  # reduce #1 only
    # reduce #0 max over q0 (1024,)
    acc_max0 = float32(-inf)
    # -- pass over loop group 0 (row resident in registers)
    q0_0 = lane * 4 + 0
    base = 1024 * row
    x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = vload_keep(x, base + q0_0, 4)
    acc_max0 = fmax_nan(x_q0_0_0, acc_max0)
    acc_max0 = fmax_nan(x_q0_0_1, acc_max0)
    acc_max0 = fmax_nan(x_q0_0_2, acc_max0)
    acc_max0 = fmax_nan(x_q0_0_3, acc_max0)
    q0_1 = lane * 4 + 256
    x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = vload_keep(x, base + q0_1, 4)
    acc_max0 = fmax_nan(x_q0_1_0, acc_max0)
    acc_max0 = fmax_nan(x_q0_1_1, acc_max0)
    acc_max0 = fmax_nan(x_q0_1_2, acc_max0)
    acc_max0 = fmax_nan(x_q0_1_3, acc_max0)
    q0_2 = lane * 4 + 512
    x_q0_2_0, x_q0_2_1, x_q0_2_2, x_q0_2_3 = vload_keep(x, base + q0_2, 4)
    acc_max0 = fmax_nan(x_q0_2_0, acc_max0)
    acc_max0 = fmax_nan(x_q0_2_1, acc_max0)
    acc_max0 = fmax_nan(x_q0_2_2, acc_max0)
    acc_max0 = fmax_nan(x_q0_2_3, acc_max0)
    q0_3 = lane * 4 + 768
    x_q0_3_0, x_q0_3_1, x_q0_3_2, x_q0_3_3 = vload_keep(x, base + q0_3, 4)
    acc_max0 = fmax_nan(x_q0_3_0, acc_max0)
    acc_max0 = fmax_nan(x_q0_3_1, acc_max0)
    acc_max0 = fmax_nan(x_q0_3_2, acc_max0)
    acc_max0 = fmax_nan(x_q0_3_3, acc_max0)
    # -- end of pass over loop group 0
    # combine #0 max across 64 threads
    acc_max0_x16 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max0, 16)
    acc_max0 = fmax_nan(acc_max0_x16, acc_max0)
    acc_max0_x8 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max0, 8)
    acc_max0 = fmax_nan(acc_max0_x8, acc_max0)
    acc_max0_x4 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max0, 4)
    acc_max0 = fmax_nan(acc_max0_x4, acc_max0)
    acc_max0_x2 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max0, 2)
    acc_max0 = fmax_nan(acc_max0_x2, acc_max0)
    acc_max0_x1 = cuda.shfl_xor_sync(0xFFFFFFFF, acc_max0, 1)
    acc_max0 = fmax_nan(acc_max0_x1, acc_max0)
    if lane % 32 == 0:
        smem_max0[rib, lane // 32] = acc_max0
    cuda.syncthreads()  # partials of reduce #0 written
    max0_v = smem_max0[rib, 0]
    max0_v_1 = smem_max0[rib, 1]
    max0_v = fmax_nan(max0_v_1, max0_v)
    max0 = max0_v
    # reduce #1 sum over q0 (1024,)
    acc_sum1 = float32(0.0)
    # -- pass over loop group 0 (row resident in registers)
    sub_0_0 = x_q0_0_0 - max0
    exp_0_0 = math.exp(sub_0_0)
    sub_0_1 = x_q0_0_1 - max0
    exp_0_1 = math.exp(sub_0_1)
    sub_0_2 = x_q0_0_2 - max0
    exp_0_2 = math.exp(sub_0_2)
    sub_0_3 = x_q0_0_3 - max0
    exp_0_3 = math.exp(sub_0_3)
    acc_sum1 = acc_sum1 + exp_0_0
    acc_sum1 = acc_sum1 + exp_0_1
    acc_sum1 = acc_sum1 + exp_0_2
    acc_sum1 = acc_sum1 + exp_0_3
    sub_1_0 = x_q0_1_0 - max0
    exp_1_0 = math.exp(sub_1_0)
    sub_1_1 = x_q0_1_1 - max0
    exp_1_1 = math.exp(sub_1_1)
    sub_1_2 = x_q0_1_2 - max0
    exp_1_2 = math.exp(sub_1_2)
    sub_1_3 = x_q0_1_3 - max0
    exp_1_3 = math.exp(sub_1_3)
    acc_sum1 = acc_sum1 + exp_1_0
    acc_sum1 = acc_sum1 + exp_1_1
    acc_sum1 = acc_sum1 + exp_1_2
    acc_sum1 = acc_sum1 + exp_1_3
    sub_2_0 = x_q0_2_0 - max0
    exp_2_0 = math.exp(sub_2_0)
    sub_2_1 = x_q0_2_1 - max0
    exp_2_1 = math.exp(sub_2_1)
    sub_2_2 = x_q0_2_2 - max0
    exp_2_2 = math.exp(sub_2_2)
    sub_2_3 = x_q0_2_3 - max0
    exp_2_3 = math.exp(sub_2_3)
    acc_sum1 = acc_sum1 + exp_2_0
    acc_sum1 = acc_sum1 + exp_2_1
    acc_sum1 = acc_sum1 + exp_2_2
    acc_sum1 = acc_sum1 + exp_2_3
    sub_3_0 = x_q0_3_0 - max0
    exp_3_0 = math.exp(sub_3_0)
    sub_3_1 = x_q0_3_1 - max0
    exp_3_1 = math.exp(sub_3_1)
    sub_3_2 = x_q0_3_2 - max0
    exp_3_2 = math.exp(sub_3_2)
    sub_3_3 = x_q0_3_3 - max0
    exp_3_3 = math.exp(sub_3_3)
    acc_sum1 = acc_sum1 + exp_3_0
    acc_sum1 = acc_sum1 + exp_3_1
    acc_sum1 = acc_sum1 + exp_3_2
    acc_sum1 = acc_sum1 + exp_3_3
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
    sum1_v = smem_sum1[rib, 0]
    sum1_v_1 = smem_sum1[rib, 1]
    sum1_v = sum1_v + sum1_v_1
    sum1 = sum1_v
    # outputs over q0 (1024,)
    # -- pass over loop group 0 (row resident in registers)
    rc_r = float32(1.0) / sum1
    div_0_0 = mul_rn(exp_0_0, rc_r)
    div_0_1 = mul_rn(exp_0_1, rc_r)
    div_0_2 = mul_rn(exp_0_2, rc_r)
    div_0_3 = mul_rn(exp_0_3, rc_r)
    vstore(out0, base + q0_0, (div_0_0, div_0_1, div_0_2, div_0_3))
    div_1_0 = mul_rn(exp_1_0, rc_r)
    div_1_1 = mul_rn(exp_1_1, rc_r)
    div_1_2 = mul_rn(exp_1_2, rc_r)
    div_1_3 = mul_rn(exp_1_3, rc_r)
    vstore(out0, base + q0_1, (div_1_0, div_1_1, div_1_2, div_1_3))
    div_2_0 = mul_rn(exp_2_0, rc_r)
    div_2_1 = mul_rn(exp_2_1, rc_r)
    div_2_2 = mul_rn(exp_2_2, rc_r)
    div_2_3 = mul_rn(exp_2_3, rc_r)
    vstore(out0, base + q0_2, (div_2_0, div_2_1, div_2_2, div_2_3))
    div_3_0 = mul_rn(exp_3_0, rc_r)
    div_3_1 = mul_rn(exp_3_1, rc_r)
    div_3_2 = mul_rn(exp_3_2, rc_r)
    div_3_3 = mul_rn(exp_3_3, rc_r)
    vstore(out0, base + q0_3, (div_3_0, div_3_1, div_3_2, div_3_3))
    # -- end of pass over loop group 0
