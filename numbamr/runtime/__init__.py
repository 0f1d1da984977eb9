"""Runtime: compiling emitted source with numba.cuda, arrays in and out, launching."""
