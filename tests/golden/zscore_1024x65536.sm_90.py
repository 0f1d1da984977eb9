# zscore_1024x65536, target=sm_90: 1 kernel(s)
# numbamr kernel zscore (cuda target)
# grid=8192 block=256
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload_keep, vstore, fmax_nan, fmin_nan, mul_rn
from numbamr.runtime.intrinsics import griddep_wait, griddep_launch
from numbamr.runtime.intrinsics import cluster_arrive, cluster_wait, xbar_arm, xbar_wait, xsend
inf = math.inf
nan = math.nan


def zscore(x, out0):
    # x: input 0, float32
    # out0: output 0, float32
    griddep_launch()  # the stream's next kernel may start its blocks
    griddep_wait()  # the stream's previous kernel has finished
    xsm = cuda.shared.array(16, float64)  # every block's partials
    xbar = cuda.shared.array(2, uint64)  # one mbarrier an exchange
    if cuda.threadIdx.x == 0:
        xbar_arm(xbar, 0, 64)
        xbar_arm(xbar, 1, 64)
    cluster_arrive()  # waited for before the first partial is sent
    # 1024 rows, 1 per block, 256 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid
    rib = 0
    tile = bid // 8
    row = tile
    seg = bid % 8
    seg_base = seg * 8192
    smem_sum0 = cuda.shared.array((1, 8), float32)  # reduce #0 only
    smem_sum1 = cuda.shared.array((1, 8), float32)  # reduce #1 only
    # reduce #0 sum over q0 (65536,)
    acc_sum0 = float32(0.0)
    # -- pass over loop group 0 (row resident in registers)
    q0_0 = seg_base + lane * 4 + 0
    base = 65536 * row
    x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = vload_keep(x, base + q0_0, 4)
    acc_sum0 = acc_sum0 + x_q0_0_0
    acc_sum0 = acc_sum0 + x_q0_0_1
    acc_sum0 = acc_sum0 + x_q0_0_2
    acc_sum0 = acc_sum0 + x_q0_0_3
    q0_1 = seg_base + lane * 4 + 1024
    x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = vload_keep(x, base + q0_1, 4)
    acc_sum0 = acc_sum0 + x_q0_1_0
    acc_sum0 = acc_sum0 + x_q0_1_1
    acc_sum0 = acc_sum0 + x_q0_1_2
    acc_sum0 = acc_sum0 + x_q0_1_3
    q0_2 = seg_base + lane * 4 + 2048
    x_q0_2_0, x_q0_2_1, x_q0_2_2, x_q0_2_3 = vload_keep(x, base + q0_2, 4)
    acc_sum0 = acc_sum0 + x_q0_2_0
    acc_sum0 = acc_sum0 + x_q0_2_1
    acc_sum0 = acc_sum0 + x_q0_2_2
    acc_sum0 = acc_sum0 + x_q0_2_3
    q0_3 = seg_base + lane * 4 + 3072
    x_q0_3_0, x_q0_3_1, x_q0_3_2, x_q0_3_3 = vload_keep(x, base + q0_3, 4)
    acc_sum0 = acc_sum0 + x_q0_3_0
    acc_sum0 = acc_sum0 + x_q0_3_1
    acc_sum0 = acc_sum0 + x_q0_3_2
    acc_sum0 = acc_sum0 + x_q0_3_3
    q0_4 = seg_base + lane * 4 + 4096
    x_q0_4_0, x_q0_4_1, x_q0_4_2, x_q0_4_3 = vload_keep(x, base + q0_4, 4)
    acc_sum0 = acc_sum0 + x_q0_4_0
    acc_sum0 = acc_sum0 + x_q0_4_1
    acc_sum0 = acc_sum0 + x_q0_4_2
    acc_sum0 = acc_sum0 + x_q0_4_3
    q0_5 = seg_base + lane * 4 + 5120
    x_q0_5_0, x_q0_5_1, x_q0_5_2, x_q0_5_3 = vload_keep(x, base + q0_5, 4)
    acc_sum0 = acc_sum0 + x_q0_5_0
    acc_sum0 = acc_sum0 + x_q0_5_1
    acc_sum0 = acc_sum0 + x_q0_5_2
    acc_sum0 = acc_sum0 + x_q0_5_3
    q0_6 = seg_base + lane * 4 + 6144
    x_q0_6_0, x_q0_6_1, x_q0_6_2, x_q0_6_3 = vload_keep(x, base + q0_6, 4)
    acc_sum0 = acc_sum0 + x_q0_6_0
    acc_sum0 = acc_sum0 + x_q0_6_1
    acc_sum0 = acc_sum0 + x_q0_6_2
    acc_sum0 = acc_sum0 + x_q0_6_3
    q0_7 = seg_base + lane * 4 + 7168
    x_q0_7_0, x_q0_7_1, x_q0_7_2, x_q0_7_3 = vload_keep(x, base + q0_7, 4)
    acc_sum0 = acc_sum0 + x_q0_7_0
    acc_sum0 = acc_sum0 + x_q0_7_1
    acc_sum0 = acc_sum0 + x_q0_7_2
    acc_sum0 = acc_sum0 + x_q0_7_3
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
    if lane % 32 == 0:
        smem_sum0[rib, lane // 32] = acc_sum0
    cuda.syncthreads()  # partials of reduce #0 written
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
    # exchange #0 across the 8 blocks of the row
    cluster_wait()  # every block of the cluster has armed its mbarriers
    if lane == 0:
        xsend(xsm, 0 + rib * 8 + seg, sum0_v, xbar, 0, 8)
    xbar_wait(xbar, 0)  # exchange 0: the row's partials have arrived
    sum0x_v = float32(xsm[0 + rib * 8 + 0])
    sum0x_v_1 = float32(xsm[0 + rib * 8 + 1])
    sum0x_v = sum0x_v + sum0x_v_1
    sum0x_v_2 = float32(xsm[0 + rib * 8 + 2])
    sum0x_v = sum0x_v + sum0x_v_2
    sum0x_v_3 = float32(xsm[0 + rib * 8 + 3])
    sum0x_v = sum0x_v + sum0x_v_3
    sum0x_v_4 = float32(xsm[0 + rib * 8 + 4])
    sum0x_v = sum0x_v + sum0x_v_4
    sum0x_v_5 = float32(xsm[0 + rib * 8 + 5])
    sum0x_v = sum0x_v + sum0x_v_5
    sum0x_v_6 = float32(xsm[0 + rib * 8 + 6])
    sum0x_v = sum0x_v + sum0x_v_6
    sum0x_v_7 = float32(xsm[0 + rib * 8 + 7])
    sum0x_v = sum0x_v + sum0x_v_7
    sum0 = sum0x_v
    # reduce #1 sum over q0 (65536,)
    acc_sum1 = float32(0.0)
    div = sum0 / float32(65536.0)
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
    sub_4_0 = x_q0_4_0 - div
    mul_4_0 = sub_4_0 * sub_4_0
    sub_4_1 = x_q0_4_1 - div
    mul_4_1 = sub_4_1 * sub_4_1
    sub_4_2 = x_q0_4_2 - div
    mul_4_2 = sub_4_2 * sub_4_2
    sub_4_3 = x_q0_4_3 - div
    mul_4_3 = sub_4_3 * sub_4_3
    acc_sum1 = acc_sum1 + mul_4_0
    acc_sum1 = acc_sum1 + mul_4_1
    acc_sum1 = acc_sum1 + mul_4_2
    acc_sum1 = acc_sum1 + mul_4_3
    sub_5_0 = x_q0_5_0 - div
    mul_5_0 = sub_5_0 * sub_5_0
    sub_5_1 = x_q0_5_1 - div
    mul_5_1 = sub_5_1 * sub_5_1
    sub_5_2 = x_q0_5_2 - div
    mul_5_2 = sub_5_2 * sub_5_2
    sub_5_3 = x_q0_5_3 - div
    mul_5_3 = sub_5_3 * sub_5_3
    acc_sum1 = acc_sum1 + mul_5_0
    acc_sum1 = acc_sum1 + mul_5_1
    acc_sum1 = acc_sum1 + mul_5_2
    acc_sum1 = acc_sum1 + mul_5_3
    sub_6_0 = x_q0_6_0 - div
    mul_6_0 = sub_6_0 * sub_6_0
    sub_6_1 = x_q0_6_1 - div
    mul_6_1 = sub_6_1 * sub_6_1
    sub_6_2 = x_q0_6_2 - div
    mul_6_2 = sub_6_2 * sub_6_2
    sub_6_3 = x_q0_6_3 - div
    mul_6_3 = sub_6_3 * sub_6_3
    acc_sum1 = acc_sum1 + mul_6_0
    acc_sum1 = acc_sum1 + mul_6_1
    acc_sum1 = acc_sum1 + mul_6_2
    acc_sum1 = acc_sum1 + mul_6_3
    sub_7_0 = x_q0_7_0 - div
    mul_7_0 = sub_7_0 * sub_7_0
    sub_7_1 = x_q0_7_1 - div
    mul_7_1 = sub_7_1 * sub_7_1
    sub_7_2 = x_q0_7_2 - div
    mul_7_2 = sub_7_2 * sub_7_2
    sub_7_3 = x_q0_7_3 - div
    mul_7_3 = sub_7_3 * sub_7_3
    acc_sum1 = acc_sum1 + mul_7_0
    acc_sum1 = acc_sum1 + mul_7_1
    acc_sum1 = acc_sum1 + mul_7_2
    acc_sum1 = acc_sum1 + mul_7_3
    # -- end of pass over loop group 0
    # combine #1 sum across 256 threads
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
    sum1_v_2 = smem_sum1[rib, 2]
    sum1_v = sum1_v + sum1_v_2
    sum1_v_3 = smem_sum1[rib, 3]
    sum1_v = sum1_v + sum1_v_3
    sum1_v_4 = smem_sum1[rib, 4]
    sum1_v = sum1_v + sum1_v_4
    sum1_v_5 = smem_sum1[rib, 5]
    sum1_v = sum1_v + sum1_v_5
    sum1_v_6 = smem_sum1[rib, 6]
    sum1_v = sum1_v + sum1_v_6
    sum1_v_7 = smem_sum1[rib, 7]
    sum1_v = sum1_v + sum1_v_7
    # exchange #1 across the 8 blocks of the row
    if lane == 0:
        xsend(xsm, 8 + rib * 8 + seg, sum1_v, xbar, 1, 8)
    xbar_wait(xbar, 1)  # exchange 1: the row's partials have arrived
    sum1x_v = float32(xsm[8 + rib * 8 + 0])
    sum1x_v_1 = float32(xsm[8 + rib * 8 + 1])
    sum1x_v = sum1x_v + sum1x_v_1
    sum1x_v_2 = float32(xsm[8 + rib * 8 + 2])
    sum1x_v = sum1x_v + sum1x_v_2
    sum1x_v_3 = float32(xsm[8 + rib * 8 + 3])
    sum1x_v = sum1x_v + sum1x_v_3
    sum1x_v_4 = float32(xsm[8 + rib * 8 + 4])
    sum1x_v = sum1x_v + sum1x_v_4
    sum1x_v_5 = float32(xsm[8 + rib * 8 + 5])
    sum1x_v = sum1x_v + sum1x_v_5
    sum1x_v_6 = float32(xsm[8 + rib * 8 + 6])
    sum1x_v = sum1x_v + sum1x_v_6
    sum1x_v_7 = float32(xsm[8 + rib * 8 + 7])
    sum1x_v = sum1x_v + sum1x_v_7
    sum1 = sum1x_v
    # outputs over q0 (65536,)
    div_1 = sum1 / float32(65536.0)
    sqrt = math.sqrt(div_1)
    # -- pass over loop group 0 (row resident in registers)
    rc_abs = abs(sqrt)
    rc_small = rc_abs < float32(1.1754943508222875e-38)
    rc_large = rc_abs > float32(8.507059173023462e+37)
    rc_q0 = select(rc_large, float32(5.421010862427522e-20), float32(1.0))
    rc_q = select(rc_small, float32(1.8446744073709552e+19), rc_q0)
    rc_dq = sqrt * rc_q
    rc_r = float32(1.0) / rc_dq
    div_0_0_r = sub_0_0 * rc_r
    div_0_0 = mul_rn(div_0_0_r, rc_q)
    div_0_1_r = sub_0_1 * rc_r
    div_0_1 = mul_rn(div_0_1_r, rc_q)
    div_0_2_r = sub_0_2 * rc_r
    div_0_2 = mul_rn(div_0_2_r, rc_q)
    div_0_3_r = sub_0_3 * rc_r
    div_0_3 = mul_rn(div_0_3_r, rc_q)
    vstore(out0, base + q0_0, (div_0_0, div_0_1, div_0_2, div_0_3))
    div_1_0_r = sub_1_0 * rc_r
    div_1_0 = mul_rn(div_1_0_r, rc_q)
    div_1_1_r = sub_1_1 * rc_r
    div_1_1 = mul_rn(div_1_1_r, rc_q)
    div_1_2_r = sub_1_2 * rc_r
    div_1_2 = mul_rn(div_1_2_r, rc_q)
    div_1_3_r = sub_1_3 * rc_r
    div_1_3 = mul_rn(div_1_3_r, rc_q)
    vstore(out0, base + q0_1, (div_1_0, div_1_1, div_1_2, div_1_3))
    div_2_0_r = sub_2_0 * rc_r
    div_2_0 = mul_rn(div_2_0_r, rc_q)
    div_2_1_r = sub_2_1 * rc_r
    div_2_1 = mul_rn(div_2_1_r, rc_q)
    div_2_2_r = sub_2_2 * rc_r
    div_2_2 = mul_rn(div_2_2_r, rc_q)
    div_2_3_r = sub_2_3 * rc_r
    div_2_3 = mul_rn(div_2_3_r, rc_q)
    vstore(out0, base + q0_2, (div_2_0, div_2_1, div_2_2, div_2_3))
    div_3_0_r = sub_3_0 * rc_r
    div_3_0 = mul_rn(div_3_0_r, rc_q)
    div_3_1_r = sub_3_1 * rc_r
    div_3_1 = mul_rn(div_3_1_r, rc_q)
    div_3_2_r = sub_3_2 * rc_r
    div_3_2 = mul_rn(div_3_2_r, rc_q)
    div_3_3_r = sub_3_3 * rc_r
    div_3_3 = mul_rn(div_3_3_r, rc_q)
    vstore(out0, base + q0_3, (div_3_0, div_3_1, div_3_2, div_3_3))
    div_4_0_r = sub_4_0 * rc_r
    div_4_0 = mul_rn(div_4_0_r, rc_q)
    div_4_1_r = sub_4_1 * rc_r
    div_4_1 = mul_rn(div_4_1_r, rc_q)
    div_4_2_r = sub_4_2 * rc_r
    div_4_2 = mul_rn(div_4_2_r, rc_q)
    div_4_3_r = sub_4_3 * rc_r
    div_4_3 = mul_rn(div_4_3_r, rc_q)
    vstore(out0, base + q0_4, (div_4_0, div_4_1, div_4_2, div_4_3))
    div_5_0_r = sub_5_0 * rc_r
    div_5_0 = mul_rn(div_5_0_r, rc_q)
    div_5_1_r = sub_5_1 * rc_r
    div_5_1 = mul_rn(div_5_1_r, rc_q)
    div_5_2_r = sub_5_2 * rc_r
    div_5_2 = mul_rn(div_5_2_r, rc_q)
    div_5_3_r = sub_5_3 * rc_r
    div_5_3 = mul_rn(div_5_3_r, rc_q)
    vstore(out0, base + q0_5, (div_5_0, div_5_1, div_5_2, div_5_3))
    div_6_0_r = sub_6_0 * rc_r
    div_6_0 = mul_rn(div_6_0_r, rc_q)
    div_6_1_r = sub_6_1 * rc_r
    div_6_1 = mul_rn(div_6_1_r, rc_q)
    div_6_2_r = sub_6_2 * rc_r
    div_6_2 = mul_rn(div_6_2_r, rc_q)
    div_6_3_r = sub_6_3 * rc_r
    div_6_3 = mul_rn(div_6_3_r, rc_q)
    vstore(out0, base + q0_6, (div_6_0, div_6_1, div_6_2, div_6_3))
    div_7_0_r = sub_7_0 * rc_r
    div_7_0 = mul_rn(div_7_0_r, rc_q)
    div_7_1_r = sub_7_1 * rc_r
    div_7_1 = mul_rn(div_7_1_r, rc_q)
    div_7_2_r = sub_7_2 * rc_r
    div_7_2 = mul_rn(div_7_2_r, rc_q)
    div_7_3_r = sub_7_3 * rc_r
    div_7_3 = mul_rn(div_7_3_r, rc_q)
    vstore(out0, base + q0_7, (div_7_0, div_7_1, div_7_2, div_7_3))
    # -- end of pass over loop group 0
