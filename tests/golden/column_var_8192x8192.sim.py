# column_var_8192x8192, target=sim: 2 kernel(s)
# numbamr kernel column_var (sim target)
# grid=16384 block=8
from numbamr.runtime import simmath as math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.simmath import select
inf = math.inf
nan = math.nan


def column_var(x, out0, out1):
    # x: input 0, float32
    # out0: output 0, float64
    # out1: output 1, float64
    math.quiet()
    # 32768 rows, 2 per block, 4 threads per row (col layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid // 2
    rib = tid % 2
    row = bid * 2 + rib
    with math.shared_lock:
        smem_sum0 = cuda.shared.array((4, 2), float64)  # reduce #0 only
    with math.shared_lock:
        smem_sum1 = cuda.shared.array((4, 2), float64)  # reduce #1 only
    # reduce #0 sum, #1 sum over q0 (2048,)
    acc_sum0 = float64(0.0)
    acc_sum1 = float64(0.0)
    base = (row) % 8192
    x_row = x[base]
    abs_1 = abs(x_row)
    lt = abs_1 < float32(inf)
    where = select(lt, x_row, float32(0.0))
    base_1 = 16777216 * ((row) // 8192) + (row) % 8192
    for it0 in range(256):
        q0_0 = it0 * 8 + lane + 0
        x_q0_0_0 = x[base_1 + 8192 * q0_0]
        sub_0_0 = x_q0_0_0 - where
        cast_0_0 = float64(sub_0_0)
        mul_0_0 = cast_0_0 * cast_0_0
        acc_sum0 = acc_sum0 + mul_0_0
        acc_sum1 = acc_sum1 + cast_0_0
        q0_1 = it0 * 8 + lane + 4
        x_q0_1_0 = x[base_1 + 8192 * q0_1]
        sub_1_0 = x_q0_1_0 - where
        cast_1_0 = float64(sub_1_0)
        mul_1_0 = cast_1_0 * cast_1_0
        acc_sum0 = acc_sum0 + mul_1_0
        acc_sum1 = acc_sum1 + cast_1_0
    # combine #0 sum across 4 threads
    # combine #1 sum across 4 threads
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
    sum1_v = smem_sum1[0, rib]
    sum1_v_1 = smem_sum1[1, rib]
    sum1_v = sum1_v + sum1_v_1
    sum1_v_2 = smem_sum1[2, rib]
    sum1_v = sum1_v + sum1_v_2
    sum1_v_3 = smem_sum1[3, rib]
    sum1_v = sum1_v + sum1_v_3
    sum0 = sum0_v
    sum1 = sum1_v
    # row-level outputs
    base_2 = row
    if lane == 0:
        out0[base_2] = sum0
        out1[base_2] = sum1


# ---- next kernel ----

# numbamr kernel column_var_2 (sim target)
# grid=4096 block=2
from numbamr.runtime import simmath as math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.simmath import select
inf = math.inf
nan = math.nan


def column_var_2(t0, t1, out0):
    # t0: input t0, float64
    # t1: input t1, float64
    # out0: output 0, float32
    math.quiet()
    # 8192 rows, 2 per block, 1 threads per row (col layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid // 2
    rib = tid % 2
    row = bid * 2 + rib
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
