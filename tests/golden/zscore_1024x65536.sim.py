# zscore_1024x65536, target=sim: 1 kernel(s)
# numbamr kernel zscore (sim target)
# grid=512 block=64
from numbamr.runtime import simmath as math
from numba import cuda
from numba.types import (boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                         float16, float32, float64)
from numbamr.runtime.simmath import select, mul_rn
inf = math.inf
nan = math.nan


def zscore(x, out0):
    # x: input 0, float32
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
    sqrt = math.sqrt(div_1)
    rc_abs = abs(sqrt)
    rc_small = rc_abs < float32(1.1754943508222875e-38)
    rc_large = rc_abs > float32(8.507059173023462e+37)
    rc_q0 = select(rc_large, float32(5.421010862427522e-20), float32(1.0))
    rc_q = select(rc_small, float32(1.8446744073709552e+19), rc_q0)
    rc_dq = sqrt * rc_q
    rc_r = float32(1.0) / rc_dq
    for it0_1 in range(256):
        q0_0_1 = it0_1 * 256 + lane * 4 + 0
        x_q0_0_1_0, x_q0_0_1_1, x_q0_0_1_2, x_q0_0_1_3 = (x[base + q0_0_1], x[base + q0_0_1 + 1], x[base + q0_0_1 + 2], x[base + q0_0_1 + 3])
        sub_0_0 = x_q0_0_1_0 - div
        div_0_0_r = sub_0_0 * rc_r
        div_0_0 = mul_rn(div_0_0_r, rc_q)
        sub_0_1 = x_q0_0_1_1 - div
        div_0_1_r = sub_0_1 * rc_r
        div_0_1 = mul_rn(div_0_1_r, rc_q)
        sub_0_2 = x_q0_0_1_2 - div
        div_0_2_r = sub_0_2 * rc_r
        div_0_2 = mul_rn(div_0_2_r, rc_q)
        sub_0_3 = x_q0_0_1_3 - div
        div_0_3_r = sub_0_3 * rc_r
        div_0_3 = mul_rn(div_0_3_r, rc_q)
        out0[base + q0_0_1] = div_0_0
        out0[base + q0_0_1 + 1] = div_0_1
        out0[base + q0_0_1 + 2] = div_0_2
        out0[base + q0_0_1 + 3] = div_0_3
        q0_1_1 = it0_1 * 256 + lane * 4 + 128
        x_q0_1_1_0, x_q0_1_1_1, x_q0_1_1_2, x_q0_1_1_3 = (x[base + q0_1_1], x[base + q0_1_1 + 1], x[base + q0_1_1 + 2], x[base + q0_1_1 + 3])
        sub_1_0 = x_q0_1_1_0 - div
        div_1_0_r = sub_1_0 * rc_r
        div_1_0 = mul_rn(div_1_0_r, rc_q)
        sub_1_1 = x_q0_1_1_1 - div
        div_1_1_r = sub_1_1 * rc_r
        div_1_1 = mul_rn(div_1_1_r, rc_q)
        sub_1_2 = x_q0_1_1_2 - div
        div_1_2_r = sub_1_2 * rc_r
        div_1_2 = mul_rn(div_1_2_r, rc_q)
        sub_1_3 = x_q0_1_1_3 - div
        div_1_3_r = sub_1_3 * rc_r
        div_1_3 = mul_rn(div_1_3_r, rc_q)
        out0[base + q0_1_1] = div_1_0
        out0[base + q0_1_1 + 1] = div_1_1
        out0[base + q0_1_1 + 2] = div_1_2
        out0[base + q0_1_1 + 3] = div_1_3
