/* cuda_backend.h — the CUDA backend (cuBLAS for products, own kernels for the rest).
 *
 * Plain C: nothing here needs the CUDA headers, so host code can include it. The
 * functions live in the plugin libworldstate-cuda.so, built where a CUDA toolkit
 * was found (WS_HAVE_CUDA); programs load it with ws_backend_cuda_load
 * (backend.h), test_backend_cuda links it. Only the functions declared here
 * are exported (cuda_exports.map).
 *
 * Every op is queued on one cudaStream_t per backend, in call order; device memory
 * is stream-ordered (cudaMallocAsync from the device's default pool where the device
 * supports it). upload() returns once the host buffer may be reused (pageable memory
 * is staged by the driver); download() and sync() wait for the stream.
 *
 * Environment: WS_CUDA_TF32=1 (read by ws_backend_cuda_new) runs the cuBLAS products
 * in TF32; WS_CUDA_SYNC_CHECK=1, in builds without NDEBUG, synchronises after every
 * kernel launch so that a fault is reported by the op that caused it. */
#ifndef WS_CUDA_BACKEND_H
#define WS_CUDA_BACKEND_H

/* Inside extern "C": backend.h and ws_status.h are C headers without guards of
 * their own, and the .cu files call ws_error_set. */
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend.h"

/* Flags for ws_backend_cuda_new_ex. */
#define WS_CUDA_TF32 1u /* cuBLAS products in TF32 tensor-op math (10-bit mantissa inputs) */

/* Creates a backend on CUDA device `device` (0-based). Products run in full FP32
 * unless the environment sets WS_CUDA_TF32=1. Returns WS_ERR_UNSUPPORTED (with a
 * message) when there is no usable GPU or driver, WS_ERR_INVALID for a device
 * index out of range, WS_ERR_BACKEND when CUDA or cuBLAS fails to start. */
ws_status ws_backend_cuda_new(ws_backend **out, int device, ws_error *err);
/* As ws_backend_cuda_new with explicit flags (WS_CUDA_TF32); the environment is
 * not read. */
ws_status ws_backend_cuda_new_ex(ws_backend **out, int device, unsigned flags, ws_error *err);

/* The plugin's side of the interface check (backend_plugin.c): 1 when the
 * caller was built with the same WS_BACKEND_ABI and struct sizes. */
int ws_backend_cuda_plugin_abi(unsigned abi, size_t ops_size, size_t backend_size);

/* 1 when be is a CUDA backend. */
int ws_backend_is_cuda(const ws_backend *be);
/* The message of the last CUDA/cuBLAS failure of an op on this backend ("" if
 * none): ops return only a ws_status, so this says what WS_ERR_BACKEND meant. */
const char *ws_backend_cuda_last_error(const ws_backend *be);

#ifdef __cplusplus
}
#endif

#endif
