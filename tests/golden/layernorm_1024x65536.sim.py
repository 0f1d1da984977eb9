# layernorm_1024x65536, target=sim: 1 kernel(s)
# numbamr kernel layernorm (sim target)
# grid=512 block=64
from numbamr.runtime import simmath as math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.simmath import select, mul_rn
inf = math.inf
nan = math.nan


def layernorm(x, w, b, out0):
    # x: input 0, float32
    # w: input 1, float32
    # b: input 2, float32
    # out0: output 0, float32
    math.quiet()
    with math.shared_lock:
        xchg_0 = cuda.shared.array(64, float32)
    # 1024 rows, 2 per block, 32 threads per row (row layout)
    tid = int64(cuda.threadIdx.x)
    bid = int64(cuda.blockIdx.x)
    lane = tid % 32
    rib = tid // 32
    row = bid * 2 + rib
    # reduce #0 sum over q0 (65536,)
    acc_sum0_n = float32(0.0)
    acc_sum0_mean = float32(0.0)
    acc_sum0_m2 = float32(0.0)
    base = 65536 * row
    for it0 in range(256):
        q0_0 = it0 * 256 + lane * 4 + 0
        x_q0_0_0, x_q0_0_1, x_q0_0_2, x_q0_0_3 = (x[base + q0_0], x[base + q0_0 + 1], x[base + q0_0 + 2], x[base + q0_0 + 3])
        q0_1 = it0 * 256 + lane * 4 + 128
        x_q0_1_0, x_q0_1_1, x_q0_1_2, x_q0_1_3 = (x[base + q0_1], x[base + q0_1 + 1], x[base + q0_1 + 2], x[base + q0_1 + 3])
        _cmu = (x_q0_0_0 + x_q0_0_1 + x_q0_0_2 + x_q0_0_3 + x_q0_1_0 + x_q0_1_1 + x_q0_1_2 + x_q0_1_3) / float32(8.0)
        _cm2 = (x_q0_0_0 - _cmu) * (x_q0_0_0 - _cmu) + (x_q0_0_1 - _cmu) * (x_q0_0_1 - _cmu) + (x_q0_0_2 - _cmu) * (x_q0_0_2 - _cmu) + (x_q0_0_3 - _cmu) * (x_q0_0_3 - _cmu) + (x_q0_1_0 - _cmu) * (x_q0_1_0 - _cmu) + (x_q0_1_1 - _cmu) * (x_q0_1_1 - _cmu) + (x_q0_1_2 - _cmu) * (x_q0_1_2 - _cmu) + (x_q0_1_3 - _cmu) * (x_q0_1_3 - _cmu)
        _nn = acc_sum0_n + float32(8.0)
        _d = _cmu - acc_sum0_mean
        acc_sum0_mean = acc_sum0_mean + _d * (float32(8.0) / _nn)
        acc_sum0_m2 = acc_sum0_m2 + _cm2 + _d * _d * (acc_sum0_n * float32(8.0) / _nn)
        acc_sum0_n = _nn
    # combine #0 sum across 32 threads
    xchg_0[tid] = acc_sum0_n
    cuda.syncthreads()
    acc_sum0_n_x16 = xchg_0[tid ^ 16]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_mean
    cuda.syncthreads()
    acc_sum0_mean_x16 = xchg_0[tid ^ 16]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_m2
    cuda.syncthreads()
    acc_sum0_m2_x16 = xchg_0[tid ^ 16]
    cuda.syncthreads()
    _hi = (lane & 16) != 0
    acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x16, acc_sum0_mean_x16, acc_sum0_m2_x16 = (acc_sum0_n_x16, acc_sum0_mean_x16, acc_sum0_m2_x16, acc_sum0_n, acc_sum0_mean, acc_sum0_m2) if _hi else (acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x16, acc_sum0_mean_x16, acc_sum0_m2_x16)
    _nn = acc_sum0_n + acc_sum0_n_x16
    _d = acc_sum0_mean_x16 - acc_sum0_mean
    if _nn > float32(0.0):
        acc_sum0_mean = acc_sum0_mean + _d * (acc_sum0_n_x16 / _nn)
        acc_sum0_m2 = acc_sum0_m2 + acc_sum0_m2_x16 + _d * _d * (acc_sum0_n * acc_sum0_n_x16 / _nn)
    acc_sum0_n = _nn
    xchg_0[tid] = acc_sum0_n
    cuda.syncthreads()
    acc_sum0_n_x8 = xchg_0[tid ^ 8]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_mean
    cuda.syncthreads()
    acc_sum0_mean_x8 = xchg_0[tid ^ 8]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_m2
    cuda.syncthreads()
    acc_sum0_m2_x8 = xchg_0[tid ^ 8]
    cuda.syncthreads()
    _hi = (lane & 8) != 0
    acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x8, acc_sum0_mean_x8, acc_sum0_m2_x8 = (acc_sum0_n_x8, acc_sum0_mean_x8, acc_sum0_m2_x8, acc_sum0_n, acc_sum0_mean, acc_sum0_m2) if _hi else (acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x8, acc_sum0_mean_x8, acc_sum0_m2_x8)
    _nn = acc_sum0_n + acc_sum0_n_x8
    _d = acc_sum0_mean_x8 - acc_sum0_mean
    if _nn > float32(0.0):
        acc_sum0_mean = acc_sum0_mean + _d * (acc_sum0_n_x8 / _nn)
        acc_sum0_m2 = acc_sum0_m2 + acc_sum0_m2_x8 + _d * _d * (acc_sum0_n * acc_sum0_n_x8 / _nn)
    acc_sum0_n = _nn
    xchg_0[tid] = acc_sum0_n
    cuda.syncthreads()
    acc_sum0_n_x4 = xchg_0[tid ^ 4]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_mean
    cuda.syncthreads()
    acc_sum0_mean_x4 = xchg_0[tid ^ 4]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_m2
    cuda.syncthreads()
    acc_sum0_m2_x4 = xchg_0[tid ^ 4]
    cuda.syncthreads()
    _hi = (lane & 4) != 0
    acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x4, acc_sum0_mean_x4, acc_sum0_m2_x4 = (acc_sum0_n_x4, acc_sum0_mean_x4, acc_sum0_m2_x4, acc_sum0_n, acc_sum0_mean, acc_sum0_m2) if _hi else (acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x4, acc_sum0_mean_x4, acc_sum0_m2_x4)
    _nn = acc_sum0_n + acc_sum0_n_x4
    _d = acc_sum0_mean_x4 - acc_sum0_mean
    if _nn > float32(0.0):
        acc_sum0_mean = acc_sum0_mean + _d * (acc_sum0_n_x4 / _nn)
        acc_sum0_m2 = acc_sum0_m2 + acc_sum0_m2_x4 + _d * _d * (acc_sum0_n * acc_sum0_n_x4 / _nn)
    acc_sum0_n = _nn
    xchg_0[tid] = acc_sum0_n
    cuda.syncthreads()
    acc_sum0_n_x2 = xchg_0[tid ^ 2]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_mean
    cuda.syncthreads()
    acc_sum0_mean_x2 = xchg_0[tid ^ 2]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_m2
    cuda.syncthreads()
    acc_sum0_m2_x2 = xchg_0[tid ^ 2]
    cuda.syncthreads()
    _hi = (lane & 2) != 0
    acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x2, acc_sum0_mean_x2, acc_sum0_m2_x2 = (acc_sum0_n_x2, acc_sum0_mean_x2, acc_sum0_m2_x2, acc_sum0_n, acc_sum0_mean, acc_sum0_m2) if _hi else (acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x2, acc_sum0_mean_x2, acc_sum0_m2_x2)
    _nn = acc_sum0_n + acc_sum0_n_x2
    _d = acc_sum0_mean_x2 - acc_sum0_mean
    if _nn > float32(0.0):
        acc_sum0_mean = acc_sum0_mean + _d * (acc_sum0_n_x2 / _nn)
        acc_sum0_m2 = acc_sum0_m2 + acc_sum0_m2_x2 + _d * _d * (acc_sum0_n * acc_sum0_n_x2 / _nn)
    acc_sum0_n = _nn
    xchg_0[tid] = acc_sum0_n
    cuda.syncthreads()
    acc_sum0_n_x1 = xchg_0[tid ^ 1]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_mean
    cuda.syncthreads()
    acc_sum0_mean_x1 = xchg_0[tid ^ 1]
    cuda.syncthreads()
    xchg_0[tid] = acc_sum0_m2
    cuda.syncthreads()
    acc_sum0_m2_x1 = xchg_0[tid ^ 1]
    cuda.syncthreads()
    _hi = (lane & 1) != 0
    acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x1, acc_sum0_mean_x1, acc_sum0_m2_x1 = (acc_sum0_n_x1, acc_sum0_mean_x1, acc_sum0_m2_x1, acc_sum0_n, acc_sum0_mean, acc_sum0_m2) if _hi else (acc_sum0_n, acc_sum0_mean, acc_sum0_m2, acc_sum0_n_x1, acc_sum0_mean_x1, acc_sum0_m2_x1)
    _nn = acc_sum0_n + acc_sum0_n_x1
    _d = acc_sum0_mean_x1 - acc_sum0_mean
    if _nn > float32(0.0):
        acc_sum0_mean = acc_sum0_mean + _d * (acc_sum0_n_x1 / _nn)
        acc_sum0_m2 = acc_sum0_m2 + acc_sum0_m2_x1 + _d * _d * (acc_sum0_n * acc_sum0_n_x1 / _nn)
    acc_sum0_n = _nn
    sum0 = acc_sum0_mean * float32(65536.0)
    sum1 = acc_sum0_m2
    # outputs over q0 (65536,)
    div = sum0 / float32(65536.0)
    div_1 = sum1 / float32(65536.0)
    add = div_1 + float32(9.999999747378752e-06)
    sqrt = math.sqrt(add)
    rc_r = float32(1.0) / sqrt
    for it0_1 in range(256):
        q0_0_1 = it0_1 * 256 + lane * 4 + 0
        x_q0_0_1_0, x_q0_0_1_1, x_q0_0_1_2, x_q0_0_1_3 = (x[base + q0_0_1], x[base + q0_0_1 + 1], x[base + q0_0_1 + 2], x[base + q0_0_1 + 3])
        sub_0_0 = x_q0_0_1_0 - div
        div_0_0 = mul_rn(sub_0_0, rc_r)
        w_q0_0_1_0, w_q0_0_1_1, w_q0_0_1_2, w_q0_0_1_3 = (w[q0_0_1], w[q0_0_1 + 1], w[q0_0_1 + 2], w[q0_0_1 + 3])
        mul_0_0 = mul_rn(div_0_0, w_q0_0_1_0)
        b_q0_0_1_0, b_q0_0_1_1, b_q0_0_1_2, b_q0_0_1_3 = (b[q0_0_1], b[q0_0_1 + 1], b[q0_0_1 + 2], b[q0_0_1 + 3])
        add_0_0 = mul_0_0 + b_q0_0_1_0
        sub_0_1 = x_q0_0_1_1 - div
        div_0_1 = mul_rn(sub_0_1, rc_r)
        mul_0_1 = mul_rn(div_0_1, w_q0_0_1_1)
        add_0_1 = mul_0_1 + b_q0_0_1_1
        sub_0_2 = x_q0_0_1_2 - div
        div_0_2 = mul_rn(sub_0_2, rc_r)
        mul_0_2 = mul_rn(div_0_2, w_q0_0_1_2)
        add_0_2 = mul_0_2 + b_q0_0_1_2
        sub_0_3 = x_q0_0_1_3 - div
        div_0_3 = mul_rn(sub_0_3, rc_r)
        mul_0_3 = mul_rn(div_0_3, w_q0_0_1_3)
        add_0_3 = mul_0_3 + b_q0_0_1_3
        out0[base + q0_0_1] = add_0_0
        out0[base + q0_0_1 + 1] = add_0_1
        out0[base + q0_0_1 + 2] = add_0_2
        out0[base + q0_0_1 + 3] = add_0_3
        q0_1_1 = it0_1 * 256 + lane * 4 + 128
        x_q0_1_1_0, x_q0_1_1_1, x_q0_1_1_2, x_q0_1_1_3 = (x[base + q0_1_1], x[base + q0_1_1 + 1], x[base + q0_1_1 + 2], x[base + q0_1_1 + 3])
        sub_1_0 = x_q0_1_1_0 - div
        div_1_0 = mul_rn(sub_1_0, rc_r)
        w_q0_1_1_0, w_q0_1_1_1, w_q0_1_1_2, w_q0_1_1_3 = (w[q0_1_1], w[q0_1_1 + 1], w[q0_1_1 + 2], w[q0_1_1 + 3])
        mul_1_0 = mul_rn(div_1_0, w_q0_1_1_0)
        b_q0_1_1_0, b_q0_1_1_1, b_q0_1_1_2, b_q0_1_1_3 = (b[q0_1_1], b[q0_1_1 + 1], b[q0_1_1 + 2], b[q0_1_1 + 3])
        add_1_0 = mul_1_0 + b_q0_1_1_0
        sub_1_1 = x_q0_1_1_1 - div
        div_1_1 = mul_rn(sub_1_1, rc_r)
        mul_1_1 = mul_rn(div_1_1, w_q0_1_1_1)
        add_1_1 = mul_1_1 + b_q0_1_1_1
        sub_1_2 = x_q0_1_1_2 - div
        div_1_2 = mul_rn(sub_1_2, rc_r)
        mul_1_2 = mul_rn(div_1_2, w_q0_1_1_2)
        add_1_2 = mul_1_2 + b_q0_1_1_2
        sub_1_3 = x_q0_1_1_3 - div
        div_1_3 = mul_rn(sub_1_3, rc_r)
        mul_1_3 = mul_rn(div_1_3, w_q0_1_1_3)
        add_1_3 = mul_1_3 + b_q0_1_1_3
        out0[base + q0_1_1] = add_1_0
        out0[base + q0_1_1 + 1] = add_1_1
        out0[base + q0_1_1 + 2] = add_1_2
        out0[base + q0_1_1 + 3] = add_1_3
