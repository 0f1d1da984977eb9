# layernorm_1024x65536, target=sm_90: 1 kernel(s)
# numbamr kernel layernorm (cuda target)
# grid=8192 block=256 min_blocks_per_sm=2 dynamic_shared=65536
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload, vstore, fmax_nan, fmin_nan, mul_rn
from numbamr.runtime.intrinsics import griddep_wait
from numbamr.runtime.intrinsics import cluster_arrive, cluster_wait, xbar_arm, xbar_wait, xsend
from numbamr.runtime.intrinsics import mbar_init, mbar_expect, mbar_wait, bulk_load, init_fence, proxy_fence, xbar_wait_parity
inf = math.inf
nan = math.nan


def layernorm(x, w, b, out0):
    # x: input 0, float32
    # w: input 1, float32
    # b: input 2, float32
    # out0: output 0, float32
    griddep_wait()  # the stream's previous kernel has finished
    xsm = cuda.shared.array(32, float64)  # every block's partials
    xbar = cuda.shared.array(4, uint64)  # one mbarrier an exchange
    if cuda.threadIdx.x == 0:
        xbar_arm(xbar, 0, 64)
        xbar_arm(xbar, 1, 64)
        xbar_arm(xbar, 2, 64)
        xbar_arm(xbar, 3, 64)
    cluster_arrive()  # waited for before the first partial is sent
    # 1024 rows, 1 per block, 256 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid
    rib = 0
    gdim = int64(cuda.gridDim.x)
    cid = bid // 8
    ncl = gdim // 8
    mine = (1024 - cid + ncl - 1) // ncl
    seg = bid % 8
    seg_base = seg * 8192
    smem_sum0 = cuda.shared.array((1, 8), float32)  # reduce #0 only
    smem_sum1 = cuda.shared.array((1, 8), float32)  # reduce #1 only
    rows_float32 = cuda.shared.array(0, float32)  # staged rows (dynamic shared memory)
    rbar = cuda.shared.array(2, uint64)  # one mbarrier a stage of rows
    if cuda.threadIdx.x == 0:
        mbar_init(rbar, 0, 1)
        mbar_init(rbar, 1, 1)
        init_fence()
        if 0 < mine:
            mbar_expect(rbar, 0, 32768)
            bulk_load(rows_float32, 0 + 0 * 8192 + 0, x, (cid + 0 * ncl) * 65536 + seg_base + 0, 8192, rbar, 0)
            bulk_load(rows_float32, 0 + 0 * 8192 + 2048, x, (cid + 0 * ncl) * 65536 + seg_base + 2048, 8192, rbar, 0)
            bulk_load(rows_float32, 0 + 0 * 8192 + 4096, x, (cid + 0 * ncl) * 65536 + seg_base + 4096, 8192, rbar, 0)
            bulk_load(rows_float32, 0 + 0 * 8192 + 6144, x, (cid + 0 * ncl) * 65536 + seg_base + 6144, 8192, rbar, 0)
        if 1 < mine:
            mbar_expect(rbar, 1, 32768)
            bulk_load(rows_float32, 0 + 1 * 8192 + 0, x, (cid + 1 * ncl) * 65536 + seg_base + 0, 8192, rbar, 1)
            bulk_load(rows_float32, 0 + 1 * 8192 + 2048, x, (cid + 1 * ncl) * 65536 + seg_base + 2048, 8192, rbar, 1)
            bulk_load(rows_float32, 0 + 1 * 8192 + 4096, x, (cid + 1 * ncl) * 65536 + seg_base + 4096, 8192, rbar, 1)
            bulk_load(rows_float32, 0 + 1 * 8192 + 6144, x, (cid + 1 * ncl) * 65536 + seg_base + 6144, 8192, rbar, 1)
    cuda.syncthreads()  # the stages' mbarriers are initialized
    # weights: the same for every row, loaded once
    q0_l0 = lane * 4 + 0
    q0_0 = seg_base + q0_l0
    w_q0_0_0, w_q0_0_1, w_q0_0_2, w_q0_0_3 = vload(w, q0_0, 4)
    b_q0_0_0, b_q0_0_1, b_q0_0_2, b_q0_0_3 = vload(b, q0_0, 4)
    q0_l1 = lane * 4 + 1024
    q0_1 = seg_base + q0_l1
    w_q0_1_0, w_q0_1_1, w_q0_1_2, w_q0_1_3 = vload(w, q0_1, 4)
    b_q0_1_0, b_q0_1_1, b_q0_1_2, b_q0_1_3 = vload(b, q0_1, 4)
    q0_l2 = lane * 4 + 2048
    q0_2 = seg_base + q0_l2
    w_q0_2_0, w_q0_2_1, w_q0_2_2, w_q0_2_3 = vload(w, q0_2, 4)
    b_q0_2_0, b_q0_2_1, b_q0_2_2, b_q0_2_3 = vload(b, q0_2, 4)
    q0_l3 = lane * 4 + 3072
    q0_3 = seg_base + q0_l3
    w_q0_3_0, w_q0_3_1, w_q0_3_2, w_q0_3_3 = vload(w, q0_3, 4)
    b_q0_3_0, b_q0_3_1, b_q0_3_2, b_q0_3_3 = vload(b, q0_3, 4)
    q0_l4 = lane * 4 + 4096
    q0_4 = seg_base + q0_l4
    w_q0_4_0, w_q0_4_1, w_q0_4_2, w_q0_4_3 = vload(w, q0_4, 4)
    b_q0_4_0, b_q0_4_1, b_q0_4_2, b_q0_4_3 = vload(b, q0_4, 4)
    q0_l5 = lane * 4 + 5120
    q0_5 = seg_base + q0_l5
    w_q0_5_0, w_q0_5_1, w_q0_5_2, w_q0_5_3 = vload(w, q0_5, 4)
    b_q0_5_0, b_q0_5_1, b_q0_5_2, b_q0_5_3 = vload(b, q0_5, 4)
    q0_l6 = lane * 4 + 6144
    q0_6 = seg_base + q0_l6
    w_q0_6_0, w_q0_6_1, w_q0_6_2, w_q0_6_3 = vload(w, q0_6, 4)
    b_q0_6_0, b_q0_6_1, b_q0_6_2, b_q0_6_3 = vload(b, q0_6, 4)
    q0_l7 = lane * 4 + 7168
    q0_7 = seg_base + q0_l7
    w_q0_7_0, w_q0_7_1, w_q0_7_2, w_q0_7_3 = vload(w, q0_7, 4)
    b_q0_7_0, b_q0_7_1, b_q0_7_2, b_q0_7_3 = vload(b, q0_7, 4)
    cluster_wait()  # every block of the cluster has armed its mbarriers
    for rit in range(mine):  # the cluster's rows: cid, cid + ncl, ...
        row = cid + rit * ncl
        rstage = rit % 2
        mbar_wait(rbar, rstage, (rit // 2) & 1)  # this row's stage has come
        # reduce #0 sum over q0 (65536,)
        acc_sum0 = float32(0.0)
        # -- pass over loop group 0 (row resident in registers)
        x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l0, 4)
        acc_sum0 = acc_sum0 + x_q0_0_0
        acc_sum0 = acc_sum0 + x_q0_0_1
        acc_sum0 = acc_sum0 + x_q0_0_2
        acc_sum0 = acc_sum0 + x_q0_0_3
        x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l1, 4)
        acc_sum0 = acc_sum0 + x_q0_1_0
        acc_sum0 = acc_sum0 + x_q0_1_1
        acc_sum0 = acc_sum0 + x_q0_1_2
        acc_sum0 = acc_sum0 + x_q0_1_3
        x_q0_2_0, x_q0_2_1, x_q0_2_2, x_q0_2_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l2, 4)
        acc_sum0 = acc_sum0 + x_q0_2_0
        acc_sum0 = acc_sum0 + x_q0_2_1
        acc_sum0 = acc_sum0 + x_q0_2_2
        acc_sum0 = acc_sum0 + x_q0_2_3
        x_q0_3_0, x_q0_3_1, x_q0_3_2, x_q0_3_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l3, 4)
        acc_sum0 = acc_sum0 + x_q0_3_0
        acc_sum0 = acc_sum0 + x_q0_3_1
        acc_sum0 = acc_sum0 + x_q0_3_2
        acc_sum0 = acc_sum0 + x_q0_3_3
        x_q0_4_0, x_q0_4_1, x_q0_4_2, x_q0_4_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l4, 4)
        acc_sum0 = acc_sum0 + x_q0_4_0
        acc_sum0 = acc_sum0 + x_q0_4_1
        acc_sum0 = acc_sum0 + x_q0_4_2
        acc_sum0 = acc_sum0 + x_q0_4_3
        x_q0_5_0, x_q0_5_1, x_q0_5_2, x_q0_5_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l5, 4)
        acc_sum0 = acc_sum0 + x_q0_5_0
        acc_sum0 = acc_sum0 + x_q0_5_1
        acc_sum0 = acc_sum0 + x_q0_5_2
        acc_sum0 = acc_sum0 + x_q0_5_3
        x_q0_6_0, x_q0_6_1, x_q0_6_2, x_q0_6_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l6, 4)
        acc_sum0 = acc_sum0 + x_q0_6_0
        acc_sum0 = acc_sum0 + x_q0_6_1
        acc_sum0 = acc_sum0 + x_q0_6_2
        acc_sum0 = acc_sum0 + x_q0_6_3
        x_q0_7_0, x_q0_7_1, x_q0_7_2, x_q0_7_3 = vload(rows_float32, 0 + rstage * 8192 + q0_l7, 4)
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
        if lane == 0:
            xsend(xsm, (rit & 1) * 16 + 0 + rib * 8 + seg, sum0_v, xbar, 0 + (rit & 1) * 2, 8)
        xbar_wait_parity(xbar, 0 + (rit & 1) * 2, (rit >> 1) & 1)  # exchange 0 of this row
        if cuda.threadIdx.x == 0:
            mbar_expect(xbar, 0 + (rit & 1) * 2, 64)  # armed again for the row after next
        sum0x_v = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 0])
        sum0x_v_1 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 1])
        sum0x_v = sum0x_v + sum0x_v_1
        sum0x_v_2 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 2])
        sum0x_v = sum0x_v + sum0x_v_2
        sum0x_v_3 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 3])
        sum0x_v = sum0x_v + sum0x_v_3
        sum0x_v_4 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 4])
        sum0x_v = sum0x_v + sum0x_v_4
        sum0x_v_5 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 5])
        sum0x_v = sum0x_v + sum0x_v_5
        sum0x_v_6 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 6])
        sum0x_v = sum0x_v + sum0x_v_6
        sum0x_v_7 = float32(xsm[(rit & 1) * 16 + 0 + rib * 8 + 7])
        sum0x_v = sum0x_v + sum0x_v_7
        sum0 = sum0x_v
        # reduce #1 sum over q0 (65536,)
        acc_sum1 = float32(0.0)
        div = sum0 / float32(65536.0)
        # -- pass over loop group 0 (row resident in registers)
        x_q0_0_0_1, x_q0_0_1_1, x_q0_0_2_1, x_q0_0_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l0, 4)
        sub_0_0 = x_q0_0_0_1 - div
        mul_0_0 = sub_0_0 * sub_0_0
        sub_0_1 = x_q0_0_1_1 - div
        mul_0_1 = sub_0_1 * sub_0_1
        sub_0_2 = x_q0_0_2_1 - div
        mul_0_2 = sub_0_2 * sub_0_2
        sub_0_3 = x_q0_0_3_1 - div
        mul_0_3 = sub_0_3 * sub_0_3
        acc_sum1 = acc_sum1 + mul_0_0
        acc_sum1 = acc_sum1 + mul_0_1
        acc_sum1 = acc_sum1 + mul_0_2
        acc_sum1 = acc_sum1 + mul_0_3
        x_q0_1_0_1, x_q0_1_1_1, x_q0_1_2_1, x_q0_1_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l1, 4)
        sub_1_0 = x_q0_1_0_1 - div
        mul_1_0 = sub_1_0 * sub_1_0
        sub_1_1 = x_q0_1_1_1 - div
        mul_1_1 = sub_1_1 * sub_1_1
        sub_1_2 = x_q0_1_2_1 - div
        mul_1_2 = sub_1_2 * sub_1_2
        sub_1_3 = x_q0_1_3_1 - div
        mul_1_3 = sub_1_3 * sub_1_3
        acc_sum1 = acc_sum1 + mul_1_0
        acc_sum1 = acc_sum1 + mul_1_1
        acc_sum1 = acc_sum1 + mul_1_2
        acc_sum1 = acc_sum1 + mul_1_3
        x_q0_2_0_1, x_q0_2_1_1, x_q0_2_2_1, x_q0_2_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l2, 4)
        sub_2_0 = x_q0_2_0_1 - div
        mul_2_0 = sub_2_0 * sub_2_0
        sub_2_1 = x_q0_2_1_1 - div
        mul_2_1 = sub_2_1 * sub_2_1
        sub_2_2 = x_q0_2_2_1 - div
        mul_2_2 = sub_2_2 * sub_2_2
        sub_2_3 = x_q0_2_3_1 - div
        mul_2_3 = sub_2_3 * sub_2_3
        acc_sum1 = acc_sum1 + mul_2_0
        acc_sum1 = acc_sum1 + mul_2_1
        acc_sum1 = acc_sum1 + mul_2_2
        acc_sum1 = acc_sum1 + mul_2_3
        x_q0_3_0_1, x_q0_3_1_1, x_q0_3_2_1, x_q0_3_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l3, 4)
        sub_3_0 = x_q0_3_0_1 - div
        mul_3_0 = sub_3_0 * sub_3_0
        sub_3_1 = x_q0_3_1_1 - div
        mul_3_1 = sub_3_1 * sub_3_1
        sub_3_2 = x_q0_3_2_1 - div
        mul_3_2 = sub_3_2 * sub_3_2
        sub_3_3 = x_q0_3_3_1 - div
        mul_3_3 = sub_3_3 * sub_3_3
        acc_sum1 = acc_sum1 + mul_3_0
        acc_sum1 = acc_sum1 + mul_3_1
        acc_sum1 = acc_sum1 + mul_3_2
        acc_sum1 = acc_sum1 + mul_3_3
        x_q0_4_0_1, x_q0_4_1_1, x_q0_4_2_1, x_q0_4_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l4, 4)
        sub_4_0 = x_q0_4_0_1 - div
        mul_4_0 = sub_4_0 * sub_4_0
        sub_4_1 = x_q0_4_1_1 - div
        mul_4_1 = sub_4_1 * sub_4_1
        sub_4_2 = x_q0_4_2_1 - div
        mul_4_2 = sub_4_2 * sub_4_2
        sub_4_3 = x_q0_4_3_1 - div
        mul_4_3 = sub_4_3 * sub_4_3
        acc_sum1 = acc_sum1 + mul_4_0
        acc_sum1 = acc_sum1 + mul_4_1
        acc_sum1 = acc_sum1 + mul_4_2
        acc_sum1 = acc_sum1 + mul_4_3
        x_q0_5_0_1, x_q0_5_1_1, x_q0_5_2_1, x_q0_5_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l5, 4)
        sub_5_0 = x_q0_5_0_1 - div
        mul_5_0 = sub_5_0 * sub_5_0
        sub_5_1 = x_q0_5_1_1 - div
        mul_5_1 = sub_5_1 * sub_5_1
        sub_5_2 = x_q0_5_2_1 - div
        mul_5_2 = sub_5_2 * sub_5_2
        sub_5_3 = x_q0_5_3_1 - div
        mul_5_3 = sub_5_3 * sub_5_3
        acc_sum1 = acc_sum1 + mul_5_0
        acc_sum1 = acc_sum1 + mul_5_1
        acc_sum1 = acc_sum1 + mul_5_2
        acc_sum1 = acc_sum1 + mul_5_3
        x_q0_6_0_1, x_q0_6_1_1, x_q0_6_2_1, x_q0_6_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l6, 4)
        sub_6_0 = x_q0_6_0_1 - div
        mul_6_0 = sub_6_0 * sub_6_0
        sub_6_1 = x_q0_6_1_1 - div
        mul_6_1 = sub_6_1 * sub_6_1
        sub_6_2 = x_q0_6_2_1 - div
        mul_6_2 = sub_6_2 * sub_6_2
        sub_6_3 = x_q0_6_3_1 - div
        mul_6_3 = sub_6_3 * sub_6_3
        acc_sum1 = acc_sum1 + mul_6_0
        acc_sum1 = acc_sum1 + mul_6_1
        acc_sum1 = acc_sum1 + mul_6_2
        acc_sum1 = acc_sum1 + mul_6_3
        x_q0_7_0_1, x_q0_7_1_1, x_q0_7_2_1, x_q0_7_3_1 = vload(rows_float32, 0 + rstage * 8192 + q0_l7, 4)
        sub_7_0 = x_q0_7_0_1 - div
        mul_7_0 = sub_7_0 * sub_7_0
        sub_7_1 = x_q0_7_1_1 - div
        mul_7_1 = sub_7_1 * sub_7_1
        sub_7_2 = x_q0_7_2_1 - div
        mul_7_2 = sub_7_2 * sub_7_2
        sub_7_3 = x_q0_7_3_1 - div
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
            xsend(xsm, (rit & 1) * 16 + 8 + rib * 8 + seg, sum1_v, xbar, 1 + (rit & 1) * 2, 8)
        xbar_wait_parity(xbar, 1 + (rit & 1) * 2, (rit >> 1) & 1)  # exchange 1 of this row
        if cuda.threadIdx.x == 0:
            mbar_expect(xbar, 1 + (rit & 1) * 2, 64)  # armed again for the row after next
        sum1x_v = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 0])
        sum1x_v_1 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 1])
        sum1x_v = sum1x_v + sum1x_v_1
        sum1x_v_2 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 2])
        sum1x_v = sum1x_v + sum1x_v_2
        sum1x_v_3 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 3])
        sum1x_v = sum1x_v + sum1x_v_3
        sum1x_v_4 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 4])
        sum1x_v = sum1x_v + sum1x_v_4
        sum1x_v_5 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 5])
        sum1x_v = sum1x_v + sum1x_v_5
        sum1x_v_6 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 6])
        sum1x_v = sum1x_v + sum1x_v_6
        sum1x_v_7 = float32(xsm[(rit & 1) * 16 + 8 + rib * 8 + 7])
        sum1x_v = sum1x_v + sum1x_v_7
        sum1 = sum1x_v
        # outputs over q0 (65536,)
        div_1 = sum1 / float32(65536.0)
        add = div_1 + float32(9.999999747378752e-06)
        sqrt = math.sqrt(add)
        # -- pass over loop group 0 (row resident in registers)
        x_q0_0_0_2, x_q0_0_1_2, x_q0_0_2_2, x_q0_0_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l0, 4)
        sub_0_0_1 = x_q0_0_0_2 - div
        rc_r = float32(1.0) / sqrt
        div_0_0 = mul_rn(sub_0_0_1, rc_r)
        mul_0_0_1 = mul_rn(div_0_0, w_q0_0_0)
        add_0_0 = mul_0_0_1 + b_q0_0_0
        sub_0_1_1 = x_q0_0_1_2 - div
        div_0_1 = mul_rn(sub_0_1_1, rc_r)
        mul_0_1_1 = mul_rn(div_0_1, w_q0_0_1)
        add_0_1 = mul_0_1_1 + b_q0_0_1
        sub_0_2_1 = x_q0_0_2_2 - div
        div_0_2 = mul_rn(sub_0_2_1, rc_r)
        mul_0_2_1 = mul_rn(div_0_2, w_q0_0_2)
        add_0_2 = mul_0_2_1 + b_q0_0_2
        sub_0_3_1 = x_q0_0_3_2 - div
        div_0_3 = mul_rn(sub_0_3_1, rc_r)
        mul_0_3_1 = mul_rn(div_0_3, w_q0_0_3)
        add_0_3 = mul_0_3_1 + b_q0_0_3
        base = 65536 * row
        vstore(out0, base + q0_0, (add_0_0, add_0_1, add_0_2, add_0_3))
        x_q0_1_0_2, x_q0_1_1_2, x_q0_1_2_2, x_q0_1_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l1, 4)
        sub_1_0_1 = x_q0_1_0_2 - div
        div_1_0 = mul_rn(sub_1_0_1, rc_r)
        mul_1_0_1 = mul_rn(div_1_0, w_q0_1_0)
        add_1_0 = mul_1_0_1 + b_q0_1_0
        sub_1_1_1 = x_q0_1_1_2 - div
        div_1_1 = mul_rn(sub_1_1_1, rc_r)
        mul_1_1_1 = mul_rn(div_1_1, w_q0_1_1)
        add_1_1 = mul_1_1_1 + b_q0_1_1
        sub_1_2_1 = x_q0_1_2_2 - div
        div_1_2 = mul_rn(sub_1_2_1, rc_r)
        mul_1_2_1 = mul_rn(div_1_2, w_q0_1_2)
        add_1_2 = mul_1_2_1 + b_q0_1_2
        sub_1_3_1 = x_q0_1_3_2 - div
        div_1_3 = mul_rn(sub_1_3_1, rc_r)
        mul_1_3_1 = mul_rn(div_1_3, w_q0_1_3)
        add_1_3 = mul_1_3_1 + b_q0_1_3
        vstore(out0, base + q0_1, (add_1_0, add_1_1, add_1_2, add_1_3))
        x_q0_2_0_2, x_q0_2_1_2, x_q0_2_2_2, x_q0_2_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l2, 4)
        sub_2_0_1 = x_q0_2_0_2 - div
        div_2_0 = mul_rn(sub_2_0_1, rc_r)
        mul_2_0_1 = mul_rn(div_2_0, w_q0_2_0)
        add_2_0 = mul_2_0_1 + b_q0_2_0
        sub_2_1_1 = x_q0_2_1_2 - div
        div_2_1 = mul_rn(sub_2_1_1, rc_r)
        mul_2_1_1 = mul_rn(div_2_1, w_q0_2_1)
        add_2_1 = mul_2_1_1 + b_q0_2_1
        sub_2_2_1 = x_q0_2_2_2 - div
        div_2_2 = mul_rn(sub_2_2_1, rc_r)
        mul_2_2_1 = mul_rn(div_2_2, w_q0_2_2)
        add_2_2 = mul_2_2_1 + b_q0_2_2
        sub_2_3_1 = x_q0_2_3_2 - div
        div_2_3 = mul_rn(sub_2_3_1, rc_r)
        mul_2_3_1 = mul_rn(div_2_3, w_q0_2_3)
        add_2_3 = mul_2_3_1 + b_q0_2_3
        vstore(out0, base + q0_2, (add_2_0, add_2_1, add_2_2, add_2_3))
        x_q0_3_0_2, x_q0_3_1_2, x_q0_3_2_2, x_q0_3_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l3, 4)
        sub_3_0_1 = x_q0_3_0_2 - div
        div_3_0 = mul_rn(sub_3_0_1, rc_r)
        mul_3_0_1 = mul_rn(div_3_0, w_q0_3_0)
        add_3_0 = mul_3_0_1 + b_q0_3_0
        sub_3_1_1 = x_q0_3_1_2 - div
        div_3_1 = mul_rn(sub_3_1_1, rc_r)
        mul_3_1_1 = mul_rn(div_3_1, w_q0_3_1)
        add_3_1 = mul_3_1_1 + b_q0_3_1
        sub_3_2_1 = x_q0_3_2_2 - div
        div_3_2 = mul_rn(sub_3_2_1, rc_r)
        mul_3_2_1 = mul_rn(div_3_2, w_q0_3_2)
        add_3_2 = mul_3_2_1 + b_q0_3_2
        sub_3_3_1 = x_q0_3_3_2 - div
        div_3_3 = mul_rn(sub_3_3_1, rc_r)
        mul_3_3_1 = mul_rn(div_3_3, w_q0_3_3)
        add_3_3 = mul_3_3_1 + b_q0_3_3
        vstore(out0, base + q0_3, (add_3_0, add_3_1, add_3_2, add_3_3))
        x_q0_4_0_2, x_q0_4_1_2, x_q0_4_2_2, x_q0_4_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l4, 4)
        sub_4_0_1 = x_q0_4_0_2 - div
        div_4_0 = mul_rn(sub_4_0_1, rc_r)
        mul_4_0_1 = mul_rn(div_4_0, w_q0_4_0)
        add_4_0 = mul_4_0_1 + b_q0_4_0
        sub_4_1_1 = x_q0_4_1_2 - div
        div_4_1 = mul_rn(sub_4_1_1, rc_r)
        mul_4_1_1 = mul_rn(div_4_1, w_q0_4_1)
        add_4_1 = mul_4_1_1 + b_q0_4_1
        sub_4_2_1 = x_q0_4_2_2 - div
        div_4_2 = mul_rn(sub_4_2_1, rc_r)
        mul_4_2_1 = mul_rn(div_4_2, w_q0_4_2)
        add_4_2 = mul_4_2_1 + b_q0_4_2
        sub_4_3_1 = x_q0_4_3_2 - div
        div_4_3 = mul_rn(sub_4_3_1, rc_r)
        mul_4_3_1 = mul_rn(div_4_3, w_q0_4_3)
        add_4_3 = mul_4_3_1 + b_q0_4_3
        vstore(out0, base + q0_4, (add_4_0, add_4_1, add_4_2, add_4_3))
        x_q0_5_0_2, x_q0_5_1_2, x_q0_5_2_2, x_q0_5_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l5, 4)
        sub_5_0_1 = x_q0_5_0_2 - div
        div_5_0 = mul_rn(sub_5_0_1, rc_r)
        mul_5_0_1 = mul_rn(div_5_0, w_q0_5_0)
        add_5_0 = mul_5_0_1 + b_q0_5_0
        sub_5_1_1 = x_q0_5_1_2 - div
        div_5_1 = mul_rn(sub_5_1_1, rc_r)
        mul_5_1_1 = mul_rn(div_5_1, w_q0_5_1)
        add_5_1 = mul_5_1_1 + b_q0_5_1
        sub_5_2_1 = x_q0_5_2_2 - div
        div_5_2 = mul_rn(sub_5_2_1, rc_r)
        mul_5_2_1 = mul_rn(div_5_2, w_q0_5_2)
        add_5_2 = mul_5_2_1 + b_q0_5_2
        sub_5_3_1 = x_q0_5_3_2 - div
        div_5_3 = mul_rn(sub_5_3_1, rc_r)
        mul_5_3_1 = mul_rn(div_5_3, w_q0_5_3)
        add_5_3 = mul_5_3_1 + b_q0_5_3
        vstore(out0, base + q0_5, (add_5_0, add_5_1, add_5_2, add_5_3))
        x_q0_6_0_2, x_q0_6_1_2, x_q0_6_2_2, x_q0_6_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l6, 4)
        sub_6_0_1 = x_q0_6_0_2 - div
        div_6_0 = mul_rn(sub_6_0_1, rc_r)
        mul_6_0_1 = mul_rn(div_6_0, w_q0_6_0)
        add_6_0 = mul_6_0_1 + b_q0_6_0
        sub_6_1_1 = x_q0_6_1_2 - div
        div_6_1 = mul_rn(sub_6_1_1, rc_r)
        mul_6_1_1 = mul_rn(div_6_1, w_q0_6_1)
        add_6_1 = mul_6_1_1 + b_q0_6_1
        sub_6_2_1 = x_q0_6_2_2 - div
        div_6_2 = mul_rn(sub_6_2_1, rc_r)
        mul_6_2_1 = mul_rn(div_6_2, w_q0_6_2)
        add_6_2 = mul_6_2_1 + b_q0_6_2
        sub_6_3_1 = x_q0_6_3_2 - div
        div_6_3 = mul_rn(sub_6_3_1, rc_r)
        mul_6_3_1 = mul_rn(div_6_3, w_q0_6_3)
        add_6_3 = mul_6_3_1 + b_q0_6_3
        vstore(out0, base + q0_6, (add_6_0, add_6_1, add_6_2, add_6_3))
        x_q0_7_0_2, x_q0_7_1_2, x_q0_7_2_2, x_q0_7_3_2 = vload(rows_float32, 0 + rstage * 8192 + q0_l7, 4)
        sub_7_0_1 = x_q0_7_0_2 - div
        div_7_0 = mul_rn(sub_7_0_1, rc_r)
        mul_7_0_1 = mul_rn(div_7_0, w_q0_7_0)
        add_7_0 = mul_7_0_1 + b_q0_7_0
        sub_7_1_1 = x_q0_7_1_2 - div
        div_7_1 = mul_rn(sub_7_1_1, rc_r)
        mul_7_1_1 = mul_rn(div_7_1, w_q0_7_1)
        add_7_1 = mul_7_1_1 + b_q0_7_1
        sub_7_2_1 = x_q0_7_2_2 - div
        div_7_2 = mul_rn(sub_7_2_1, rc_r)
        mul_7_2_1 = mul_rn(div_7_2, w_q0_7_2)
        add_7_2 = mul_7_2_1 + b_q0_7_2
        sub_7_3_1 = x_q0_7_3_2 - div
        div_7_3 = mul_rn(sub_7_3_1, rc_r)
        mul_7_3_1 = mul_rn(div_7_3, w_q0_7_3)
        add_7_3 = mul_7_3_1 + b_q0_7_3
        vstore(out0, base + q0_7, (add_7_0, add_7_1, add_7_2, add_7_3))
        # -- end of pass over loop group 0
        cuda.syncthreads()  # every thread is done with this row's shared memory
        if cuda.threadIdx.x == 0 and rit + 2 < mine:
            proxy_fence()  # the stage's reads before the copy's writes
            mbar_expect(rbar, rstage, 32768)
            bulk_load(rows_float32, 0 + rstage * 8192 + 0, x, (row + 2 * ncl) * 65536 + seg_base + 0, 8192, rbar, rstage)
            bulk_load(rows_float32, 0 + rstage * 8192 + 2048, x, (row + 2 * ncl) * 65536 + seg_base + 2048, 8192, rbar, rstage)
            bulk_load(rows_float32, 0 + rstage * 8192 + 4096, x, (row + 2 * ncl) * 65536 + seg_base + 4096, 8192, rbar, rstage)
            bulk_load(rows_float32, 0 + rstage * 8192 + 6144, x, (row + 2 * ncl) * 65536 + seg_base + 6144, 8192, rbar, rstage)
