# column_var_8192x8192, target=sm_90: 2 kernel(s)
# numbamr kernel column_var (cuda target)
# grid=256 block=1024 min_blocks_per_sm=2
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload, vstore, fmax_nan, fmin_nan
from numbamr.runtime.intrinsics import griddep_wait, griddep_launch
inf = math.inf
nan = math.nan


def column_var(x, out0, out1):
    # x: input 0, float32
    # out0: output 0, float64
    # out1: output 1, float64
    griddep_launch()  # the stream's next kernel may start its blocks
    griddep_wait()  # the stream's previous kernel has finished
    # 32768 rows, 128 per block, 8 threads per row (col layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid // 128
    rib = tid % 128
    row = bid * 128 + rib
    smem_sum0 = cuda.shared.array((8, 128), float64)  # reduce #0 only
    smem_sum1 = cuda.shared.array((8, 128), float64)  # reduce #1 only
    # reduce #0 sum, #1 sum over q0 (2048,)
    acc_sum0 = float64(0.0)
    acc_sum1 = float64(0.0)
    base = (row) % 8192
    x_row = x[base]
    abs_1 = abs(x_row)
    lt = abs_1 < float32(inf)
    where = select(lt, x_row, float32(0.0))
    base_1 = 16777216 * ((row) // 8192) + (row) % 8192
    for it0 in range(8):
        q0_0 = it0 * 256 + lane + 0
        x_q0_0_0 = x[base_1 + 8192 * q0_0]
        sub_0_0 = x_q0_0_0 - where
        cast_0_0 = float64(sub_0_0)
        mul_0_0 = cast_0_0 * cast_0_0
        acc_sum0 = acc_sum0 + mul_0_0
        acc_sum1 = acc_sum1 + cast_0_0
        q0_1 = it0 * 256 + lane + 8
        x_q0_1_0 = x[base_1 + 8192 * q0_1]
        sub_1_0 = x_q0_1_0 - where
        cast_1_0 = float64(sub_1_0)
        mul_1_0 = cast_1_0 * cast_1_0
        acc_sum0 = acc_sum0 + mul_1_0
        acc_sum1 = acc_sum1 + cast_1_0
        q0_2 = it0 * 256 + lane + 16
        x_q0_2_0 = x[base_1 + 8192 * q0_2]
        sub_2_0 = x_q0_2_0 - where
        cast_2_0 = float64(sub_2_0)
        mul_2_0 = cast_2_0 * cast_2_0
        acc_sum0 = acc_sum0 + mul_2_0
        acc_sum1 = acc_sum1 + cast_2_0
        q0_3 = it0 * 256 + lane + 24
        x_q0_3_0 = x[base_1 + 8192 * q0_3]
        sub_3_0 = x_q0_3_0 - where
        cast_3_0 = float64(sub_3_0)
        mul_3_0 = cast_3_0 * cast_3_0
        acc_sum0 = acc_sum0 + mul_3_0
        acc_sum1 = acc_sum1 + cast_3_0
        q0_4 = it0 * 256 + lane + 32
        x_q0_4_0 = x[base_1 + 8192 * q0_4]
        sub_4_0 = x_q0_4_0 - where
        cast_4_0 = float64(sub_4_0)
        mul_4_0 = cast_4_0 * cast_4_0
        acc_sum0 = acc_sum0 + mul_4_0
        acc_sum1 = acc_sum1 + cast_4_0
        q0_5 = it0 * 256 + lane + 40
        x_q0_5_0 = x[base_1 + 8192 * q0_5]
        sub_5_0 = x_q0_5_0 - where
        cast_5_0 = float64(sub_5_0)
        mul_5_0 = cast_5_0 * cast_5_0
        acc_sum0 = acc_sum0 + mul_5_0
        acc_sum1 = acc_sum1 + cast_5_0
        q0_6 = it0 * 256 + lane + 48
        x_q0_6_0 = x[base_1 + 8192 * q0_6]
        sub_6_0 = x_q0_6_0 - where
        cast_6_0 = float64(sub_6_0)
        mul_6_0 = cast_6_0 * cast_6_0
        acc_sum0 = acc_sum0 + mul_6_0
        acc_sum1 = acc_sum1 + cast_6_0
        q0_7 = it0 * 256 + lane + 56
        x_q0_7_0 = x[base_1 + 8192 * q0_7]
        sub_7_0 = x_q0_7_0 - where
        cast_7_0 = float64(sub_7_0)
        mul_7_0 = cast_7_0 * cast_7_0
        acc_sum0 = acc_sum0 + mul_7_0
        acc_sum1 = acc_sum1 + cast_7_0
        q0_8 = it0 * 256 + lane + 64
        x_q0_8_0 = x[base_1 + 8192 * q0_8]
        sub_8_0 = x_q0_8_0 - where
        cast_8_0 = float64(sub_8_0)
        mul_8_0 = cast_8_0 * cast_8_0
        acc_sum0 = acc_sum0 + mul_8_0
        acc_sum1 = acc_sum1 + cast_8_0
        q0_9 = it0 * 256 + lane + 72
        x_q0_9_0 = x[base_1 + 8192 * q0_9]
        sub_9_0 = x_q0_9_0 - where
        cast_9_0 = float64(sub_9_0)
        mul_9_0 = cast_9_0 * cast_9_0
        acc_sum0 = acc_sum0 + mul_9_0
        acc_sum1 = acc_sum1 + cast_9_0
        q0_10 = it0 * 256 + lane + 80
        x_q0_10_0 = x[base_1 + 8192 * q0_10]
        sub_10_0 = x_q0_10_0 - where
        cast_10_0 = float64(sub_10_0)
        mul_10_0 = cast_10_0 * cast_10_0
        acc_sum0 = acc_sum0 + mul_10_0
        acc_sum1 = acc_sum1 + cast_10_0
        q0_11 = it0 * 256 + lane + 88
        x_q0_11_0 = x[base_1 + 8192 * q0_11]
        sub_11_0 = x_q0_11_0 - where
        cast_11_0 = float64(sub_11_0)
        mul_11_0 = cast_11_0 * cast_11_0
        acc_sum0 = acc_sum0 + mul_11_0
        acc_sum1 = acc_sum1 + cast_11_0
        q0_12 = it0 * 256 + lane + 96
        x_q0_12_0 = x[base_1 + 8192 * q0_12]
        sub_12_0 = x_q0_12_0 - where
        cast_12_0 = float64(sub_12_0)
        mul_12_0 = cast_12_0 * cast_12_0
        acc_sum0 = acc_sum0 + mul_12_0
        acc_sum1 = acc_sum1 + cast_12_0
        q0_13 = it0 * 256 + lane + 104
        x_q0_13_0 = x[base_1 + 8192 * q0_13]
        sub_13_0 = x_q0_13_0 - where
        cast_13_0 = float64(sub_13_0)
        mul_13_0 = cast_13_0 * cast_13_0
        acc_sum0 = acc_sum0 + mul_13_0
        acc_sum1 = acc_sum1 + cast_13_0
        q0_14 = it0 * 256 + lane + 112
        x_q0_14_0 = x[base_1 + 8192 * q0_14]
        sub_14_0 = x_q0_14_0 - where
        cast_14_0 = float64(sub_14_0)
        mul_14_0 = cast_14_0 * cast_14_0
        acc_sum0 = acc_sum0 + mul_14_0
        acc_sum1 = acc_sum1 + cast_14_0
        q0_15 = it0 * 256 + lane + 120
        x_q0_15_0 = x[base_1 + 8192 * q0_15]
        sub_15_0 = x_q0_15_0 - where
        cast_15_0 = float64(sub_15_0)
        mul_15_0 = cast_15_0 * cast_15_0
        acc_sum0 = acc_sum0 + mul_15_0
        acc_sum1 = acc_sum1 + cast_15_0
        q0_16 = it0 * 256 + lane + 128
        x_q0_16_0 = x[base_1 + 8192 * q0_16]
        sub_16_0 = x_q0_16_0 - where
        cast_16_0 = float64(sub_16_0)
        mul_16_0 = cast_16_0 * cast_16_0
        acc_sum0 = acc_sum0 + mul_16_0
        acc_sum1 = acc_sum1 + cast_16_0
        q0_17 = it0 * 256 + lane + 136
        x_q0_17_0 = x[base_1 + 8192 * q0_17]
        sub_17_0 = x_q0_17_0 - where
        cast_17_0 = float64(sub_17_0)
        mul_17_0 = cast_17_0 * cast_17_0
        acc_sum0 = acc_sum0 + mul_17_0
        acc_sum1 = acc_sum1 + cast_17_0
        q0_18 = it0 * 256 + lane + 144
        x_q0_18_0 = x[base_1 + 8192 * q0_18]
        sub_18_0 = x_q0_18_0 - where
        cast_18_0 = float64(sub_18_0)
        mul_18_0 = cast_18_0 * cast_18_0
        acc_sum0 = acc_sum0 + mul_18_0
        acc_sum1 = acc_sum1 + cast_18_0
        q0_19 = it0 * 256 + lane + 152
        x_q0_19_0 = x[base_1 + 8192 * q0_19]
        sub_19_0 = x_q0_19_0 - where
        cast_19_0 = float64(sub_19_0)
        mul_19_0 = cast_19_0 * cast_19_0
        acc_sum0 = acc_sum0 + mul_19_0
        acc_sum1 = acc_sum1 + cast_19_0
        q0_20 = it0 * 256 + lane + 160
        x_q0_20_0 = x[base_1 + 8192 * q0_20]
        sub_20_0 = x_q0_20_0 - where
        cast_20_0 = float64(sub_20_0)
        mul_20_0 = cast_20_0 * cast_20_0
        acc_sum0 = acc_sum0 + mul_20_0
        acc_sum1 = acc_sum1 + cast_20_0
        q0_21 = it0 * 256 + lane + 168
        x_q0_21_0 = x[base_1 + 8192 * q0_21]
        sub_21_0 = x_q0_21_0 - where
        cast_21_0 = float64(sub_21_0)
        mul_21_0 = cast_21_0 * cast_21_0
        acc_sum0 = acc_sum0 + mul_21_0
        acc_sum1 = acc_sum1 + cast_21_0
        q0_22 = it0 * 256 + lane + 176
        x_q0_22_0 = x[base_1 + 8192 * q0_22]
        sub_22_0 = x_q0_22_0 - where
        cast_22_0 = float64(sub_22_0)
        mul_22_0 = cast_22_0 * cast_22_0
        acc_sum0 = acc_sum0 + mul_22_0
        acc_sum1 = acc_sum1 + cast_22_0
        q0_23 = it0 * 256 + lane + 184
        x_q0_23_0 = x[base_1 + 8192 * q0_23]
        sub_23_0 = x_q0_23_0 - where
        cast_23_0 = float64(sub_23_0)
        mul_23_0 = cast_23_0 * cast_23_0
        acc_sum0 = acc_sum0 + mul_23_0
        acc_sum1 = acc_sum1 + cast_23_0
        q0_24 = it0 * 256 + lane + 192
        x_q0_24_0 = x[base_1 + 8192 * q0_24]
        sub_24_0 = x_q0_24_0 - where
        cast_24_0 = float64(sub_24_0)
        mul_24_0 = cast_24_0 * cast_24_0
        acc_sum0 = acc_sum0 + mul_24_0
        acc_sum1 = acc_sum1 + cast_24_0
        q0_25 = it0 * 256 + lane + 200
        x_q0_25_0 = x[base_1 + 8192 * q0_25]
        sub_25_0 = x_q0_25_0 - where
        cast_25_0 = float64(sub_25_0)
        mul_25_0 = cast_25_0 * cast_25_0
        acc_sum0 = acc_sum0 + mul_25_0
        acc_sum1 = acc_sum1 + cast_25_0
        q0_26 = it0 * 256 + lane + 208
        x_q0_26_0 = x[base_1 + 8192 * q0_26]
        sub_26_0 = x_q0_26_0 - where
        cast_26_0 = float64(sub_26_0)
        mul_26_0 = cast_26_0 * cast_26_0
        acc_sum0 = acc_sum0 + mul_26_0
        acc_sum1 = acc_sum1 + cast_26_0
        q0_27 = it0 * 256 + lane + 216
        x_q0_27_0 = x[base_1 + 8192 * q0_27]
        sub_27_0 = x_q0_27_0 - where
        cast_27_0 = float64(sub_27_0)
        mul_27_0 = cast_27_0 * cast_27_0
        acc_sum0 = acc_sum0 + mul_27_0
        acc_sum1 = acc_sum1 + cast_27_0
        q0_28 = it0 * 256 + lane + 224
        x_q0_28_0 = x[base_1 + 8192 * q0_28]
        sub_28_0 = x_q0_28_0 - where
        cast_28_0 = float64(sub_28_0)
        mul_28_0 = cast_28_0 * cast_28_0
        acc_sum0 = acc_sum0 + mul_28_0
        acc_sum1 = acc_sum1 + cast_28_0
        q0_29 = it0 * 256 + lane + 232
        x_q0_29_0 = x[base_1 + 8192 * q0_29]
        sub_29_0 = x_q0_29_0 - where
        cast_29_0 = float64(sub_29_0)
        mul_29_0 = cast_29_0 * cast_29_0
        acc_sum0 = acc_sum0 + mul_29_0
        acc_sum1 = acc_sum1 + cast_29_0
        q0_30 = it0 * 256 + lane + 240
        x_q0_30_0 = x[base_1 + 8192 * q0_30]
        sub_30_0 = x_q0_30_0 - where
        cast_30_0 = float64(sub_30_0)
        mul_30_0 = cast_30_0 * cast_30_0
        acc_sum0 = acc_sum0 + mul_30_0
        acc_sum1 = acc_sum1 + cast_30_0
        q0_31 = it0 * 256 + lane + 248
        x_q0_31_0 = x[base_1 + 8192 * q0_31]
        sub_31_0 = x_q0_31_0 - where
        cast_31_0 = float64(sub_31_0)
        mul_31_0 = cast_31_0 * cast_31_0
        acc_sum0 = acc_sum0 + mul_31_0
        acc_sum1 = acc_sum1 + cast_31_0
    # combine #0 sum across 8 threads
    # combine #1 sum across 8 threads
    smem_sum0[lane, rib] = acc_sum0
    smem_sum1[lane, rib] = acc_sum1
    cuda.syncthreads()  # partials of reduces #0, #1 written
    if not (lane == 0):
        return  # the rest needs only these threads
    sum0_v = smem_sum0[0, rib]
    sum0_v_1 = smem_sum0[1, rib]
    sum0_v = sum0_v + sum0_v_1
    sum0_v_2 = smem_sum0[2, rib]
    sum0_v = sum0_v + sum0_v_2
    sum0_v_3 = smem_sum0[3, rib]
    sum0_v = sum0_v + sum0_v_3
    sum0_v_4 = smem_sum0[4, rib]
    sum0_v = sum0_v + sum0_v_4
    sum0_v_5 = smem_sum0[5, rib]
    sum0_v = sum0_v + sum0_v_5
    sum0_v_6 = smem_sum0[6, rib]
    sum0_v = sum0_v + sum0_v_6
    sum0_v_7 = smem_sum0[7, rib]
    sum0_v = sum0_v + sum0_v_7
    sum1_v = smem_sum1[0, rib]
    sum1_v_1 = smem_sum1[1, rib]
    sum1_v = sum1_v + sum1_v_1
    sum1_v_2 = smem_sum1[2, rib]
    sum1_v = sum1_v + sum1_v_2
    sum1_v_3 = smem_sum1[3, rib]
    sum1_v = sum1_v + sum1_v_3
    sum1_v_4 = smem_sum1[4, rib]
    sum1_v = sum1_v + sum1_v_4
    sum1_v_5 = smem_sum1[5, rib]
    sum1_v = sum1_v + sum1_v_5
    sum1_v_6 = smem_sum1[6, rib]
    sum1_v = sum1_v + sum1_v_6
    sum1_v_7 = smem_sum1[7, rib]
    sum1_v = sum1_v + sum1_v_7
    sum0 = sum0_v
    sum1 = sum1_v
    # row-level outputs
    base_2 = row
    if lane == 0:
        out0[base_2] = sum0
        out1[base_2] = sum1


# ---- next kernel ----

# numbamr kernel column_var_2 (cuda target)
# grid=256 block=32
import math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.intrinsics import select, vload, vstore, fmax_nan, fmin_nan
from numbamr.runtime.intrinsics import griddep_wait, griddep_launch
inf = math.inf
nan = math.nan


def column_var_2(t0, t1, out0):
    # t0: input t0, float64
    # t1: input t1, float64
    # out0: output 0, float32
    griddep_launch()  # the stream's next kernel may start its blocks
    griddep_wait()  # the stream's previous kernel has finished
    # 8192 rows, 32 per block, 1 threads per row (col layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid // 32
    rib = tid % 32
    row = bid * 32 + rib
    # reduce #0 sum, #1 sum over q0 (4,)
    acc_sum0 = float64(0.0)
    acc_sum1 = float64(0.0)
    # -- pass over loop group 0 (row resident in registers)
    q0_0 = lane + 0
    base = row
    t0_q0_0_0 = t0[base + 8192 * q0_0]
    t1_q0_0_0 = t1[base + 8192 * q0_0]
    acc_sum0 = acc_sum0 + t0_q0_0_0
    acc_sum1 = acc_sum1 + t1_q0_0_0
    q0_1 = lane + 1
    t0_q0_1_0 = t0[base + 8192 * q0_1]
    t1_q0_1_0 = t1[base + 8192 * q0_1]
    acc_sum0 = acc_sum0 + t0_q0_1_0
    acc_sum1 = acc_sum1 + t1_q0_1_0
    q0_2 = lane + 2
    t0_q0_2_0 = t0[base + 8192 * q0_2]
    t1_q0_2_0 = t1[base + 8192 * q0_2]
    acc_sum0 = acc_sum0 + t0_q0_2_0
    acc_sum1 = acc_sum1 + t1_q0_2_0
    q0_3 = lane + 3
    t0_q0_3_0 = t0[base + 8192 * q0_3]
    t1_q0_3_0 = t1[base + 8192 * q0_3]
    acc_sum0 = acc_sum0 + t0_q0_3_0
    acc_sum1 = acc_sum1 + t1_q0_3_0
    # -- end of pass over loop group 0
    # combine #0 sum across 1 threads
    # combine #1 sum across 1 threads
    sum0 = acc_sum0
    sum1 = acc_sum1
    # row-level outputs
    mul = sum1 * sum1
    div = mul / float64(8192.0)
    sub = sum0 - div
    max_1 = select((sub > float64(0.0)) | (sub != sub), sub, float64(0.0))
    cast = float32(max_1)
    div_1 = cast / float32(8192.0)
    if lane == 0:
        out0[base] = div_1
