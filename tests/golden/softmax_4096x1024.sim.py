# softmax_4096x1024, target=sim: 1 kernel(s)
# numbamr kernel softmax (sim target)
# grid=2048 block=64
from numbamr.runtime import simmath as math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.simmath import select, mul_rn
inf = math.inf
nan = math.nan


def softmax(x, out0):
    # x: input 0, float32
    # out0: output 0, float32
    math.quiet()
    with math.shared_lock:
        xchg_0 = cuda.shared.array(64, float32)
    # 4096 rows, 2 per block, 32 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid % 32
    rib = tid // 32
    row = bid * 2 + rib
    # reduce #0 max over q0 (1024,)
    acc_max0_max = float32(-inf)
    acc_max0_sum = float32(0.0)
    base = 1024 * row
    for it0 in range(4):
        q0_0 = it0 * 256 + lane * 4 + 0
        x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = (x[base + q0_0], x[base + q0_0 + 1], x[base + q0_0 + 2], x[base + q0_0 + 3])
        q0_1 = it0 * 256 + lane * 4 + 128
        x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = (x[base + q0_1], x[base + q0_1 + 1], x[base + q0_1 + 2], x[base + q0_1 + 3])
        _mn = acc_max0_max
        _mn = select((x_q0_0_0 > _mn) | (x_q0_0_0 != x_q0_0_0), x_q0_0_0, _mn)
        _mn = select((x_q0_0_1 > _mn) | (x_q0_0_1 != x_q0_0_1), x_q0_0_1, _mn)
        _mn = select((x_q0_0_2 > _mn) | (x_q0_0_2 != x_q0_0_2), x_q0_0_2, _mn)
        _mn = select((x_q0_0_3 > _mn) | (x_q0_0_3 != x_q0_0_3), x_q0_0_3, _mn)
        _mn = select((x_q0_1_0 > _mn) | (x_q0_1_0 != x_q0_1_0), x_q0_1_0, _mn)
        _mn = select((x_q0_1_1 > _mn) | (x_q0_1_1 != x_q0_1_1), x_q0_1_1, _mn)
        _mn = select((x_q0_1_2 > _mn) | (x_q0_1_2 != x_q0_1_2), x_q0_1_2, _mn)
        _mn = select((x_q0_1_3 > _mn) | (x_q0_1_3 != x_q0_1_3), x_q0_1_3, _mn)
        if _mn != float32(-inf):
            acc_max0_sum = acc_max0_sum * math.exp(acc_max0_max - _mn) + math.exp(x_q0_0_0 - _mn) + math.exp(x_q0_0_1 - _mn) + math.exp(x_q0_0_2 - _mn) + math.exp(x_q0_0_3 - _mn) + math.exp(x_q0_1_0 - _mn) + math.exp(x_q0_1_1 - _mn) + math.exp(x_q0_1_2 - _mn) + math.exp(x_q0_1_3 - _mn)
        acc_max0_max = _mn
    # combine #0 max across 32 threads
    xchg_0[tid] = acc_max0_max
    cuda.syncthreads()
    acc_max0_max_x16 = xchg_0[tid ^ 16]
    cuda.syncthreads()
    xchg_0[tid] = acc_max0_sum
    cuda.syncthreads()
    acc_max0_sum_x16 = xchg_0[tid ^ 16]
    cuda.syncthreads()
    _mn = select((acc_max0_max_x16 > acc_max0_max) | (acc_max0_max_x16 != acc_max0_max_x16), acc_max0_max_x16, acc_max0_max)
    if _mn != float32(-inf):
        acc_max0_sum = acc_max0_sum * math.exp(acc_max0_max - _mn) + acc_max0_sum_x16 * math.exp(acc_max0_max_x16 - _mn)
    else:
        acc_max0_sum = acc_max0_sum + acc_max0_sum_x16
    acc_max0_max = _mn
    xchg_0[tid] = acc_max0_max
    cuda.syncthreads()
    acc_max0_max_x8 = xchg_0[tid ^ 8]
    cuda.syncthreads()
    xchg_0[tid] = acc_max0_sum
    cuda.syncthreads()
    acc_max0_sum_x8 = xchg_0[tid ^ 8]
    cuda.syncthreads()
    _mn = select((acc_max0_max_x8 > acc_max0_max) | (acc_max0_max_x8 != acc_max0_max_x8), acc_max0_max_x8, acc_max0_max)
    if _mn != float32(-inf):
        acc_max0_sum = acc_max0_sum * math.exp(acc_max0_max - _mn) + acc_max0_sum_x8 * math.exp(acc_max0_max_x8 - _mn)
    else:
        acc_max0_sum = acc_max0_sum + acc_max0_sum_x8
    acc_max0_max = _mn
    xchg_0[tid] = acc_max0_max
    cuda.syncthreads()
    acc_max0_max_x4 = xchg_0[tid ^ 4]
    cuda.syncthreads()
    xchg_0[tid] = acc_max0_sum
    cuda.syncthreads()
    acc_max0_sum_x4 = xchg_0[tid ^ 4]
    cuda.syncthreads()
    _mn = select((acc_max0_max_x4 > acc_max0_max) | (acc_max0_max_x4 != acc_max0_max_x4), acc_max0_max_x4, acc_max0_max)
    if _mn != float32(-inf):
        acc_max0_sum = acc_max0_sum * math.exp(acc_max0_max - _mn) + acc_max0_sum_x4 * math.exp(acc_max0_max_x4 - _mn)
    else:
        acc_max0_sum = acc_max0_sum + acc_max0_sum_x4
    acc_max0_max = _mn
    xchg_0[tid] = acc_max0_max
    cuda.syncthreads()
    acc_max0_max_x2 = xchg_0[tid ^ 2]
    cuda.syncthreads()
    xchg_0[tid] = acc_max0_sum
    cuda.syncthreads()
    acc_max0_sum_x2 = xchg_0[tid ^ 2]
    cuda.syncthreads()
    _mn = select((acc_max0_max_x2 > acc_max0_max) | (acc_max0_max_x2 != acc_max0_max_x2), acc_max0_max_x2, acc_max0_max)
    if _mn != float32(-inf):
        acc_max0_sum = acc_max0_sum * math.exp(acc_max0_max - _mn) + acc_max0_sum_x2 * math.exp(acc_max0_max_x2 - _mn)
    else:
        acc_max0_sum = acc_max0_sum + acc_max0_sum_x2
    acc_max0_max = _mn
    xchg_0[tid] = acc_max0_max
    cuda.syncthreads()
    acc_max0_max_x1 = xchg_0[tid ^ 1]
    cuda.syncthreads()
    xchg_0[tid] = acc_max0_sum
    cuda.syncthreads()
    acc_max0_sum_x1 = xchg_0[tid ^ 1]
    cuda.syncthreads()
    _mn = select((acc_max0_max_x1 > acc_max0_max) | (acc_max0_max_x1 != acc_max0_max_x1), acc_max0_max_x1, acc_max0_max)
    if _mn != float32(-inf):
        acc_max0_sum = acc_max0_sum * math.exp(acc_max0_max - _mn) + acc_max0_sum_x1 * math.exp(acc_max0_max_x1 - _mn)
    else:
        acc_max0_sum = acc_max0_sum + acc_max0_sum_x1
    acc_max0_max = _mn
    max0 = acc_max0_max
    max0_gt_ninf = acc_max0_max != float32(-inf)
    sum1 = select(max0_gt_ninf, acc_max0_sum, float32(nan))
    # outputs over q0 (1024,)
    rc_r = float32(1.0) / sum1
    for it0_1 in range(4):
        q0_0_1 = it0_1 * 256 + lane * 4 + 0
        x_q0_0_1_0, x_q0_0_1_1, x_q0_0_1_2, x_q0_0_1_3 = (x[base + q0_0_1], x[base + q0_0_1 + 1], x[base + q0_0_1 + 2], x[base + q0_0_1 + 3])
        sub_0_0 = x_q0_0_1_0 - max0
        exp_0_0 = math.exp(sub_0_0)
        div_0_0 = mul_rn(exp_0_0, rc_r)
        sub_0_1 = x_q0_0_1_1 - max0
        exp_0_1 = math.exp(sub_0_1)
        div_0_1 = mul_rn(exp_0_1, rc_r)
        sub_0_2 = x_q0_0_1_2 - max0
        exp_0_2 = math.exp(sub_0_2)
        div_0_2 = mul_rn(exp_0_2, rc_r)
        sub_0_3 = x_q0_0_1_3 - max0
        exp_0_3 = math.exp(sub_0_3)
        div_0_3 = mul_rn(exp_0_3, rc_r)
        out0[base + q0_0_1] = div_0_0
        out0[base + q0_0_1 + 1] = div_0_1
        out0[base + q0_0_1 + 2] = div_0_2
        out0[base + q0_0_1 + 3] = div_0_3
        q0_1_1 = it0_1 * 256 + lane * 4 + 128
        x_q0_1_1_0, x_q0_1_1_1, x_q0_1_1_2, x_q0_1_1_3 = (x[base + q0_1_1], x[base + q0_1_1 + 1], x[base + q0_1_1 + 2], x[base + q0_1_1 + 3])
        sub_1_0 = x_q0_1_1_0 - max0
        exp_1_0 = math.exp(sub_1_0)
        div_1_0 = mul_rn(exp_1_0, rc_r)
        sub_1_1 = x_q0_1_1_1 - max0
        exp_1_1 = math.exp(sub_1_1)
        div_1_1 = mul_rn(exp_1_1, rc_r)
        sub_1_2 = x_q0_1_1_2 - max0
        exp_1_2 = math.exp(sub_1_2)
        div_1_2 = mul_rn(exp_1_2, rc_r)
        sub_1_3 = x_q0_1_1_3 - max0
        exp_1_3 = math.exp(sub_1_3)
        div_1_3 = mul_rn(exp_1_3, rc_r)
        out0[base + q0_1_1] = div_1_0
        out0[base + q0_1_1 + 1] = div_1_1
        out0[base + q0_1_1 + 2] = div_1_2
        out0[base + q0_1_1 + 3] = div_1_3
