// apps2: eight more application loops in the style of apps.cu (trap_common.cuh),
// run by check_traps.py, over the NVIDIA libraries apps.cu and the trap
// programs leave alone: cuSPARSE, cuSOLVER, cuBLASLt, NVRTC with the driver
// API, cuFFT plans shared by two streams, the cuRAND host API with explicit
// offsets and stream switches, and CUB/thrust with reused temporary storage.
// Each scenario is deterministic in eager and prints digests of its results at
// checkpoints and at the end; the output under graft must be the same line for
// line.
//
//   sparse_adaptive    nonlinear diffusion on an adaptively refined grid:
//                      every step a kernel rewrites the values of a CSR
//                      matrix (conductivities of the current field), the
//                      step size is computed on the device and used as
//                      cusparseSpMV's alpha in device pointer mode
//                      (CUSPARSE_SPMV_CSR_ALG2), four tracers follow by
//                      one SpMV each (CSR_ALG2) in host pointer mode with the
//                      step size read back the step before; the buffer sizes
//                      are asked every step (buffers grown when short); the
//                      maximum read back every step decides when the grid is
//                      refined: new arrays, new pattern, new descriptors
//   dense_newton       Newton's method on a dense nonlinear system: cuSOLVER
//                      getrf/getrs every step with devInfo read back by
//                      cudaMemcpy (legacy stream, blocking streams); an exactly
//                      singular Jacobian now and then (info > 0) falls back to
//                      Levenberg-Marquardt (normal equations, potrf/potrs);
//                      every 10 steps a least-squares fit (geqrf, ormqr,
//                      cublasStrsm) on a second stream, the solver handle's
//                      stream switched there and back, ordered by events;
//                      the system grows twice (buffers and workspaces
//                      re-allocated); solves restart when converged
//   eigen_batched      64 small Gaussian-process systems per step:
//                      cusolverDnSpotrfBatched/potrsBatched through pointer
//                      arrays the host rewrites every step (a rotating
//                      order), infoArray read back every step, failed members
//                      get more jitter; every 5 steps a second handle on a
//                      second stream assembles a 128x128 matrix from the
//                      solutions and runs syevd, its eigenvalues consumed by
//                      the host one round later (they set the next shift)
//   lt_mlp             a two-layer MLP server on cuBLASLt: a plan (layouts,
//                      heuristic algorithm) cached per token count, epilogues
//                      RELU_BIAS and BIAS, the bias pointer attribute switched
//                      between two bias vectors, alpha changing per request,
//                      requests alternating between two streams with their
//                      own workspaces and buffers (grown on demand), results
//                      consumed two requests late, weight updates ordered
//                      across the streams by events
//   nvrtc_jit          a stencil code compiled at start by NVRTC (a template
//                      kernel by name expressions, a cubin for the device)
//                      and launched through the driver API: cuLaunchKernelEx
//                      with a cluster dimension, cuLaunchKernel with the
//                      `extra` parameter buffer and a changing dynamic shared
//                      size, a __constant__ array updated every step by
//                      cuMemcpyHtoDAsync from pageable memory, a residual
//                      read back every step that picks the stencil's radius;
//                      every 100 steps the module is unloaded and a new one
//                      compiled with another constant (hot reload)
//   fft_two_streams    a pseudo-spectral solver for two fields on two streams
//                      sharing one R2C and one C2R plan (no auto-allocation:
//                      cufftSetStream and cufftSetWorkArea toggled per use,
//                      uses chained by an event); an energy controller reads
//                      the energies back every 10 steps and changes the
//                      forcing; the grid grows twice (plans re-made)
//   curand_filter      a particle filter: Philox normals generated one step
//                      ahead on a side stream at explicit offsets
//                      (curandSetGeneratorOffset), double-buffered and
//                      ordered by events; the effective sample size read back
//                      every step decides on resampling (an MRG32k3a uniform
//                      on the main stream); every 10 steps the Philox
//                      generator is switched to the main stream for
//                      curandGeneratePoisson with a data-dependent lambda;
//                      every 75 steps a Sobol rejuvenation at a rewound offset
//   cub_thrust_counts  streaming key counting: batches of varying size sorted
//                      by cub::DeviceRadixSort and reduced by
//                      DeviceReduce::ReduceByKey in one temporary buffer that
//                      grows when a query asks for more, merged into a table by
//                      thrust (merge_by_key, reduce_by_key, remove_if) with a
//                      caching allocator (thrust::cuda::par(alloc).on(s)),
//                      heavy hitters selected by DeviceSelect::If with a
//                      threshold adjusted from the counts read back
//
//   apps2 NAME [--iters N]    one scenario
//   apps2 --list              the scenario names
//
// Built with -lcublas -lcublasLt -lcusparse -lcusolver -lcurand -lcufft -lnvrtc
// -lcuda; thrust and CUB are header-only.

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusparse.h>
#include <nvrtc.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/std/functional>
#include <thrust/execution_policy.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/merge.h>
#include <thrust/reduce.h>
#include <thrust/remove.h>
#include <thrust/transform.h>
#include <thrust/tuple.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trap_common.cuh"

#define CKSP(call) CK_LIB(call, "cuSPARSE")
#define CKSO(call) CK_LIB(call, "cuSOLVER")
#define CKF(call) CK_LIB(call, "cuFFT")
#define CKN(call) CK_LIB(call, "NVRTC")
// A library call that must return its library's success status (all are 0).
static_assert(CUBLAS_STATUS_SUCCESS == 0 && CURAND_STATUS_SUCCESS == 0 && CUFFT_SUCCESS == 0 &&
              CUSPARSE_STATUS_SUCCESS == 0 && CUSOLVER_STATUS_SUCCESS == 0 && NVRTC_SUCCESS == 0);

namespace {

// ---------------------------------------------------------------- helpers

constexpr float kPi = 3.14159265358979f;

__global__ void initUniform(float* w, int n, uint32_t seed, float scale) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] = (unitFloat(hash32(seed ^ (uint32_t(k) * 0x9e3779b9u))) - 0.5f) * scale;
}

int blocksFor(int n, int block) { return (n + block - 1) / block; }

// ================================================================ sparse_adaptive

constexpr int kSpSide0 = 48, kSpSideStep = 16, kSpSideMax = 128, kSpTracers = 4, kSpLevelSteps = 60;

// The 5-point pattern of a side x side grid, columns ascending in each row.
void stencilPattern(int side, std::vector<int>& rowPtr, std::vector<int>& col) {
  const int n = side * side;
  rowPtr.assign(n + 1, 0);
  col.clear();
  for (int r = 0; r < n; ++r) {
    const int y = r / side, x = r % side;
    if (y > 0) col.push_back(r - side);
    if (x > 0) col.push_back(r - 1);
    col.push_back(r);
    if (x < side - 1) col.push_back(r + 1);
    if (y < side - 1) col.push_back(r + side);
    rowPtr[r + 1] = int(col.size());
  }
}

__device__ inline float conductivity(float u) { return 1.0f + fminf(u * u, 4.0f); }

// Row r of the operator from the current field: each face the mean of its two
// cells' conductivities, the diagonal minus their sum and minus a Dirichlet
// face (to 0) per missing neighbour. One thread per row: the same every run.
__global__ void spCoefficients(const int* __restrict__ rowPtr, const int* __restrict__ col, float* __restrict__ val,
                               const float* __restrict__ u, int n) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const float kr = conductivity(u[r]);
  float diag = 0.0f;
  int dk = -1, faces = 0;
  for (int k = rowPtr[r]; k < rowPtr[r + 1]; ++k) {
    const int c = col[k];
    if (c == r) {
      dk = k;
      continue;
    }
    const float kf = 0.5f * (kr + conductivity(u[c]));
    val[k] = kf;
    diag -= kf;
    ++faces;
  }
  diag -= float(4 - faces) * kr;
  if (dk >= 0) val[dk] = diag;
}

// One block of 256, fixed order: scal = {dt = 0.2 / max|a_ij|, 1 (SpMV's
// beta), max|u|, sum u}. dt * |A| <= 0.8: explicit Euler stays stable.
__global__ void spStepSize(const float* __restrict__ val, int nnz, const float* __restrict__ u, int n, float* scal) {
  __shared__ float sA[256], sU[256], sS[256];
  const int t = threadIdx.x;
  float a = 0.0f, b = 0.0f, c = 0.0f;
  for (int k = t; k < nnz; k += 256) a = fmaxf(a, fabsf(val[k]));
  for (int k = t; k < n; k += 256) {
    b = fmaxf(b, fabsf(u[k]));
    c += u[k];
  }
  sA[t] = a;
  sU[t] = b;
  sS[t] = c;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) {
      sA[t] = fmaxf(sA[t], sA[t + stride]);
      sU[t] = fmaxf(sU[t], sU[t + stride]);
      sS[t] += sS[t + stride];
    }
    __syncthreads();
  }
  if (t == 0) {
    scal[0] = 0.2f / fmaxf(sA[0], 1e-6f);
    scal[1] = 1.0f;
    scal[2] = sU[0];
    scal[3] = sS[0];
  }
}

// A hot spot around (cx, cy) (fractions of the side) added to u, and a spot at
// the mirrored place added to one tracer column.
__global__ void spSource(float* u, float* tracers, int side, float cx, float cy, float amp, int tracer) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x, n = side * side;
  if (k >= n) return;
  const float x = (float(k % side) + 0.5f) / float(side), y = (float(k / side) + 0.5f) / float(side);
  const float d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
  if (d2 < 0.004f) u[k] += amp * (1.0f - d2 / 0.004f);
  const float e2 = (x - (1.0f - cx)) * (x - (1.0f - cx)) + (y - (1.0f - cy)) * (y - (1.0f - cy));
  if (e2 < 0.004f) tracers[size_t(tracer) * n + k] += 0.5f * (1.0f - e2 / 0.004f);
}

// `fields` fields of the old grid sampled (nearest cell) onto the new grid.
__global__ void spRefine(const float* __restrict__ oldF, int oldSide, float* __restrict__ newF, int newSide,
                         int fields) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x, newN = newSide * newSide, oldN = oldSide * oldSide;
  if (k >= newN * fields) return;
  const int f = k / newN, r = k % newN, x = r % newSide, y = r / newSide;
  const int ox = x * oldSide / newSide, oy = y * oldSide / newSide;
  newF[k] = oldF[size_t(f) * oldN + oy * oldSide + ox];
}

// Nonlinear diffusion with a moving source on a grid refined when the field's
// maximum (read back every step) passes a threshold, or after 60 steps on a
// level. The operator's values are rewritten by a kernel every step; SpMV
// takes the step size from device memory (device pointer mode), SpMM the one
// read back the step before (host pointer mode); both buffer sizes are asked
// every step as a library wrapper does, and the buffers grown when short.
void sparseAdaptive() {
  cudaStream_t s = nonBlockingStream();
  cusparseHandle_t h;
  CKSP(cusparseCreate(&h));
  CKSP(cusparseSetStream(h, s));
  int side = kSpSide0, n = side * side, nnz = 0, nnzCap = 0;
  std::vector<int> hRow, hCol;
  int *dRow = nullptr, *dCol = nullptr;
  float* dVal = nullptr;
  float *u[2] = {nullptr, nullptr}, *tr[2] = {nullptr, nullptr};
  float* scal = nullptr;
  float* hScal = nullptr;
  CK(cudaMalloc(&scal, 4 * 4));
  CK(cudaMallocHost(&hScal, 4 * 4));
  void *spmvBuf = nullptr, *spmmBuf = nullptr;
  size_t spmvCap = 0, spmmCap = 0;
  int bufferGrows = 0;
  cusparseSpMatDescr_t A = nullptr;
  cusparseDnVecDescr_t vec[2] = {nullptr, nullptr};
  cusparseDnMatDescr_t mat[2] = {nullptr, nullptr};

  // The pattern of the current side on the device and descriptors over the
  // current buffers (the stream is idle when this runs).
  auto buildOperator = [&]() {
    stencilPattern(side, hRow, hCol);
    nnz = int(hCol.size());
    if (nnz > nnzCap) {
      CK(cudaFree(dCol));
      CK(cudaFree(dVal));
      nnzCap = nnz;
      CK(cudaMalloc(&dCol, size_t(nnzCap) * 4));
      CK(cudaMalloc(&dVal, size_t(nnzCap) * 4));
    }
    CK(cudaFree(dRow));
    CK(cudaMalloc(&dRow, size_t(n + 1) * 4));
    CK(cudaMemcpy(dRow, hRow.data(), size_t(n + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dCol, hCol.data(), size_t(nnz) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dVal, 0, size_t(nnzCap) * 4));
    if (A) CKSP(cusparseDestroySpMat(A));
    CKSP(cusparseCreateCsr(&A, n, n, nnz, dRow, dCol, dVal, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    for (int k = 0; k < 2; ++k) {
      if (vec[k]) CKSP(cusparseDestroyDnVec(vec[k]));
      if (mat[k]) CKSP(cusparseDestroyDnMat(mat[k]));
      CKSP(cusparseCreateDnVec(&vec[k], n, u[k], CUDA_R_32F));
      CKSP(cusparseCreateDnMat(&mat[k], n, kSpTracers, n, tr[k], CUDA_R_32F, CUSPARSE_ORDER_COL));
    }
  };
  for (int k = 0; k < 2; ++k) {
    CK(cudaMalloc(&u[k], size_t(n) * 4));
    CK(cudaMalloc(&tr[k], size_t(n) * kSpTracers * 4));
    CK(cudaMemset(u[k], 0, size_t(n) * 4));
    CK(cudaMemset(tr[k], 0, size_t(n) * kSpTracers * 4));
  }
  buildOperator();

  int cur = 0, level = 0, levelStart = 0;
  float dtPrev = 0.0f;
  const float hostOne = 1.0f;
  Digest trace;
  for (int i = 0; i < g_iters; ++i) {
    const int nxt = 1 - cur, grid = blocksFor(n, 256);
    // SpMV: alpha = dt and beta = 1 in device memory.
    CKSP(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_DEVICE));
    size_t need = 0;
    CKSP(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, scal, A, vec[cur], scal + 1, vec[nxt],
                                 CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG2, &need));
    if (need > spmvCap || !spmvBuf) {  // the stream is idle: the last step ended with a wait
      CK(cudaFree(spmvBuf));
      spmvCap = std::max<size_t>(need, 256);
      CK(cudaMalloc(&spmvBuf, spmvCap));
      ++bufferGrows;
    }
    spCoefficients<<<grid, 256, 0, s>>>(dRow, dCol, dVal, u[cur], n);
    spStepSize<<<1, 256, 0, s>>>(dVal, nnz, u[cur], n, scal);
    CKL();
    CK(cudaMemcpyAsync(u[nxt], u[cur], size_t(n) * 4, cudaMemcpyDeviceToDevice, s));
    CKSP(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, scal, A, vec[cur], scal + 1, vec[nxt], CUDA_R_32F,
                      CUSPARSE_SPMV_CSR_ALG2, spmvBuf));
    // The tracers, one SpMV each (CSR_ALG2; SpMM's CSR_ALG1 gave different
    // bits from run to run on an H100): alpha from the host, the step size
    // read back last step.
    CKSP(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST));
    CK(cudaMemcpyAsync(tr[nxt], tr[cur], size_t(n) * kSpTracers * 4, cudaMemcpyDeviceToDevice, s));
    for (int t = 0; t < kSpTracers; ++t) {
      cusparseDnVecDescr_t xv = nullptr, yv = nullptr;
      CKSP(cusparseCreateDnVec(&xv, n, tr[cur] + size_t(t) * n, CUDA_R_32F));
      CKSP(cusparseCreateDnVec(&yv, n, tr[nxt] + size_t(t) * n, CUDA_R_32F));
      CKSP(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &dtPrev, A, xv, &hostOne, yv, CUDA_R_32F,
                                   CUSPARSE_SPMV_CSR_ALG2, &need));
      if (need > spmmCap || !spmmBuf) {
        CK(cudaStreamSynchronize(s));
        CK(cudaFree(spmmBuf));
        spmmCap = std::max<size_t>(need, 256);
        CK(cudaMalloc(&spmmBuf, spmmCap));
        ++bufferGrows;
      }
      CKSP(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &dtPrev, A, xv, &hostOne, yv, CUDA_R_32F,
                        CUSPARSE_SPMV_CSR_ALG2, spmmBuf));
      CKSP(cusparseDestroyDnVec(xv));
      CKSP(cusparseDestroyDnVec(yv));
    }
    const float cx = 0.5f + 0.3f * cosf(0.05f * float(i)), cy = 0.5f + 0.3f * sinf(0.07f * float(i));
    spSource<<<grid, 256, 0, s>>>(u[nxt], tr[nxt], side, cx, cy, 0.12f, i % kSpTracers);
    CKL();
    CK(cudaMemcpyAsync(hScal, scal, 4 * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    trace.add(hScal, 4 * 4);
    dtPrev = hScal[0];
    cur = nxt;

    const float threshold = 1.0f + 0.5f * float(level);
    if (side < kSpSideMax && (hScal[2] > threshold || i - levelStart >= kSpLevelSteps)) {
      // Refine: new buffers, the fields sampled onto them, a new operator.
      const int oldSide = side;
      side += kSpSideStep;
      n = side * side;
      float *nu[2], *nt[2];
      for (int k = 0; k < 2; ++k) {
        CK(cudaMalloc(&nu[k], size_t(n) * 4));
        CK(cudaMalloc(&nt[k], size_t(n) * kSpTracers * 4));
      }
      spRefine<<<blocksFor(n, 256), 256, 0, s>>>(u[cur], oldSide, nu[0], side, 1);
      spRefine<<<blocksFor(n * kSpTracers, 256), 256, 0, s>>>(tr[cur], oldSide, nt[0], side, kSpTracers);
      CKL();
      CK(cudaMemsetAsync(nu[1], 0, size_t(n) * 4, s));
      CK(cudaMemsetAsync(nt[1], 0, size_t(n) * kSpTracers * 4, s));
      CK(cudaStreamSynchronize(s));
      for (int k = 0; k < 2; ++k) {
        CK(cudaFree(u[k]));
        CK(cudaFree(tr[k]));
        u[k] = nu[k];
        tr[k] = nt[k];
      }
      cur = 0;
      buildOperator();
      ++level;
      levelStart = i;
      std::printf("refine step %d side %d nnz %d max %08x sum %08x dt %08x\n", i, side, nnz, bits(hScal[2]),
                  bits(hScal[3]), bits(hScal[0]));
    }
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      print("u", i, deviceDigest(u[cur], size_t(n) * 4));
      print("tracers", i, deviceDigest(tr[cur], size_t(n) * kSpTracers * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  std::fprintf(stderr, "sparse_adaptive: %d buffer allocations, spmv %zu spmm %zu bytes\n", bufferGrows, spmvCap,
               spmmCap);
  print("end", level,
        trace.h ^ deviceDigest(u[cur], size_t(n) * 4) ^ deviceDigest(tr[cur], size_t(n) * kSpTracers * 4));
  CKSP(cusparseDestroySpMat(A));
  for (int k = 0; k < 2; ++k) {
    CKSP(cusparseDestroyDnVec(vec[k]));
    CKSP(cusparseDestroyDnMat(mat[k]));
    CK(cudaFree(u[k]));
    CK(cudaFree(tr[k]));
  }
  CKSP(cusparseDestroy(h));
  for (void* p : {(void*)dRow, (void*)dCol, (void*)dVal, (void*)scal, spmvBuf, spmmBuf}) CK(cudaFree(p));
  CK(cudaFreeHost(hScal));
  CK(cudaStreamDestroy(s));
}

// ================================================================ dense_newton

constexpr int kNwtSizes[3] = {64, 96, 128};
constexpr int kNwtMax = 128, kFitM = 192, kFitP = 32;

// A fixed, strictly diagonally dominant matrix (column-major).
__global__ void nwtBaseMatrix(float* A0, int n, uint32_t seed) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n * n) return;
  const int i = k % n, j = k / n;
  A0[k] = i == j ? 0.5f * float(n) + 1.0f : unitFloat(hash32(seed ^ (uint32_t(k) * 0x9e3779b9u))) - 0.5f;
}
// F(x) = A0 x + 0.1 sin(x) + 0.05 x^3 - b(load, fit coefficients); one row per thread.
__global__ void nwtResidual(const float* __restrict__ A0, const float* __restrict__ x, const float* __restrict__ coef,
                            int n, float load, float* __restrict__ F) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int j = 0; j < n; ++j) acc += A0[i + j * n] * x[j];
  const float xi = x[i];
  F[i] = acc + 0.1f * sinf(xi) + 0.05f * xi * xi * xi -
         (load * (1.0f + 0.3f * cosf(float(i))) + 0.01f * coef[i % kFitP]);
}
// J = A0 + diag(0.1 cos x + 0.15 x^2); column zeroCol (if >= 0) set to zero:
// the LU then meets an exactly zero pivot.
__global__ void nwtJacobian(const float* __restrict__ A0, const float* __restrict__ x, int n, int zeroCol,
                            float* __restrict__ J) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n * n) return;
  const int i = k % n, j = k / n;
  float v = A0[k];
  if (i == j) v += 0.1f * cosf(x[i]) + 0.15f * x[i] * x[i];
  J[k] = j == zeroCol ? 0.0f : v;
}
// N = J^T J + mu I, g = J^T F (each entry by one thread, in row order).
__global__ void nwtNormal(const float* __restrict__ J, const float* __restrict__ F, int n, float mu,
                          float* __restrict__ N, float* __restrict__ g) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n * n) return;
  const int i = k % n, j = k / n;
  float acc = 0.0f;
  for (int r = 0; r < n; ++r) acc += J[r + i * n] * J[r + j * n];
  N[k] = acc + (i == j ? mu : 0.0f);
  if (k < n) {
    float gk = 0.0f;
    for (int r = 0; r < n; ++r) gk += J[r + k * n] * F[r];
    g[k] = gk;
  }
}
// One block of 256: status[2] = |F| as float bits.
__global__ void nwtNorm(const float* F, int n, int* status) {
  __shared__ float s[256];
  const int t = threadIdx.x;
  float acc = 0.0f;
  for (int k = t; k < n; k += 256) acc += F[k] * F[k];
  s[t] = acc;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) status[2] = __float_as_int(sqrtf(s[0]));
}
__global__ void nwtUpdate(float* x, const float* dx, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] -= dx[i];
}
// An overdetermined cosine fit (m x p, column-major, well conditioned) whose
// data depend on the current x.
__global__ void fitDesign(float* M, float* y, const float* x, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= kFitM * kFitP) return;
  const int i = k % kFitM, j = k / kFitM;
  const float t = kPi * (float(i) + 0.5f) / float(kFitM);
  M[k] = cosf(float(j) * t) * (1.0f + 0.01f * x[i % n]);
  if (j == 0) y[i] = sinf(3.0f * t) + 0.1f * x[(i * 5) % n];
}

// Newton's method for F(x) = 0 with the Jacobian factored by getrf and solved
// by getrs every step; devInfo and |F| come back by one cudaMemcpy (both
// streams are blocking streams, so it waits for them). At every 41st step the
// Jacobian has a zero column: info > 0, and the step is taken by
// Levenberg-Marquardt instead (normal equations by a kernel, potrf/potrs,
// whose info must be 0). Every 10 steps a cosine fit to data from x runs on
// the second stream (geqrf, ormqr, cublasStrsm; the solver handle's stream
// switched to it and back, events both ways) and feeds the right-hand side.
// The system grows at steps 100 and 200: buffers, workspaces, a new matrix.
void denseNewton() {
  cudaStream_t s0, s1;
  CK(cudaStreamCreate(&s0));
  CK(cudaStreamCreate(&s1));
  cusolverDnHandle_t h;
  CKSO(cusolverDnCreate(&h));
  CKSO(cusolverDnSetDeterministicMode(h, CUSOLVER_DETERMINISTIC_RESULTS));
  CKSO(cusolverDnSetStream(h, s0));
  cublasHandle_t hb;
  CKB(cublasCreate(&hb));
  CKB(cublasSetStream(hb, s1));
  cudaEvent_t xReady, fitDone;
  CK(cudaEventCreateWithFlags(&xReady, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&fitDone, cudaEventDisableTiming));
  float *x, *F, *dx, *g, *coef, *M, *y, *tau;
  int *ipiv, *status;
  CK(cudaMalloc(&x, kNwtMax * 4));
  CK(cudaMalloc(&F, kNwtMax * 4));
  CK(cudaMalloc(&dx, kNwtMax * 4));
  CK(cudaMalloc(&g, kNwtMax * 4));
  CK(cudaMalloc(&coef, kFitP * 4));
  CK(cudaMalloc(&M, kFitM * kFitP * 4));
  CK(cudaMalloc(&y, kFitM * 4));
  CK(cudaMalloc(&tau, kFitP * 4));
  CK(cudaMalloc(&ipiv, kNwtMax * 4));
  CK(cudaMalloc(&status, 8 * 4));
  CK(cudaMemset(coef, 0, kFitP * 4));
  CK(cudaMemset(status, 0, 8 * 4));
  float *J = nullptr, *Nm = nullptr, *A0 = nullptr, *work = nullptr, *fitWork = nullptr;
  size_t matCap = 0;
  int workCap = 0, fitLwork = 0;
  {
    int l1 = 0, l2 = 0;
    CKSO(cusolverDnSgeqrf_bufferSize(h, kFitM, kFitP, M, kFitM, &l1));
    CKSO(cusolverDnSormqr_bufferSize(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, kFitM, 1, kFitP, M, kFitM, tau, y, kFitM, &l2));
    fitLwork = std::max(std::max(l1, l2), 1);
    CK(cudaMalloc(&fitWork, size_t(fitLwork) * 4));
  }
  int n = 0, solve = 0, newtonIters = 0, singular = 0, fits = 0;
  float load = 1.0f, norm0 = 0.0f;
  Digest trace;
  CK(cudaEventRecord(xReady, s0));
  for (int i = 0; i < g_iters; ++i) {
    const int want = kNwtSizes[std::min(i / 100, 2)];
    if (want != n) {
      CK(cudaDeviceSynchronize());
      n = want;
      if (size_t(n) * n > matCap) {
        for (float* p : {J, Nm, A0}) CK(cudaFree(p));
        matCap = size_t(n) * n;
        CK(cudaMalloc(&J, matCap * 4));
        CK(cudaMalloc(&Nm, matCap * 4));
        CK(cudaMalloc(&A0, matCap * 4));
      }
      nwtBaseMatrix<<<blocksFor(n * n, 256), 256, 0, s0>>>(A0, n, 17u + uint32_t(n));
      CKL();
      CK(cudaMemsetAsync(x, 0, kNwtMax * 4, s0));
      int l1 = 0, l2 = 0;
      CKSO(cusolverDnSgetrf_bufferSize(h, n, n, J, n, &l1));
      CKSO(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, Nm, n, &l2));
      const int lwork = std::max(std::max(l1, l2), 1);
      if (lwork > workCap) {
        CK(cudaFree(work));
        workCap = lwork;
        CK(cudaMalloc(&work, size_t(workCap) * 4));
      }
      std::fprintf(stderr, "dense_newton: n %d lwork %d\n", n, lwork);
      std::printf("size %d at %d\n", n, i);
      newtonIters = 0;
      CK(cudaEventRecord(xReady, s0));
    }
    if (i % 10 == 0) {
      // The fit on s1, after this x; the Newton stream waits for its result.
      CK(cudaStreamWaitEvent(s1, xReady, 0));
      CKSO(cusolverDnSetStream(h, s1));
      fitDesign<<<blocksFor(kFitM * kFitP, 256), 256, 0, s1>>>(M, y, x, n);
      CKL();
      CKSO(cusolverDnSgeqrf(h, kFitM, kFitP, M, kFitM, tau, fitWork, fitLwork, status + 5));
      CKSO(cusolverDnSormqr(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, kFitM, 1, kFitP, M, kFitM, tau, y, kFitM, fitWork,
                            fitLwork, status + 6));
      const float one = 1.0f;
      CKB(cublasStrsm(hb, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, kFitP, 1, &one,
                      M, kFitM, y, kFitM));
      CK(cudaMemcpyAsync(coef, y, kFitP * 4, cudaMemcpyDeviceToDevice, s1));
      CK(cudaEventRecord(fitDone, s1));
      CKSO(cusolverDnSetStream(h, s0));
      CK(cudaStreamWaitEvent(s0, fitDone, 0));
      ++fits;
    }
    const int zeroCol = (i % 41 == 40) ? (i * 7) % n : -1;
    nwtResidual<<<blocksFor(n, 128), 128, 0, s0>>>(A0, x, coef, n, load, F);
    nwtJacobian<<<blocksFor(n * n, 256), 256, 0, s0>>>(A0, x, n, zeroCol, J);
    nwtNorm<<<1, 256, 0, s0>>>(F, n, status);
    CKL();
    CK(cudaMemcpyAsync(dx, F, size_t(n) * 4, cudaMemcpyDeviceToDevice, s0));
    CKSO(cusolverDnSgetrf(h, n, n, J, n, work, ipiv, status + 0));
    CKSO(cusolverDnSgetrs(h, CUBLAS_OP_N, n, 1, J, n, ipiv, dx, n, status + 1));
    int st[8];
    CK(cudaMemcpy(st, status, sizeof st, cudaMemcpyDeviceToHost));
    if (st[0] < 0 || st[1] != 0 || st[5] != 0 || st[6] != 0) {
      std::fprintf(stderr, "dense_newton: step %d: bad info %d %d %d %d\n", i, st[0], st[1], st[5], st[6]);
      std::exit(1);
    }
    float normF;
    std::memcpy(&normF, &st[2], 4);
    char path = 'N';
    if (st[0] == 0) {
      nwtUpdate<<<blocksFor(n, 128), 128, 0, s0>>>(x, dx, n);
      CKL();
    } else {
      // Singular: the LU overwrote J; rebuild it and take a damped step.
      path = 'L';
      ++singular;
      nwtJacobian<<<blocksFor(n * n, 256), 256, 0, s0>>>(A0, x, n, zeroCol, J);
      nwtNormal<<<blocksFor(n * n, 256), 256, 0, s0>>>(J, F, n, 0.5f, Nm, g);
      CKL();
      CKSO(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, Nm, n, work, workCap, status + 3));
      CKSO(cusolverDnSpotrs(h, CUBLAS_FILL_MODE_LOWER, n, 1, Nm, n, g, n, status + 4));
      int lm[2];
      CK(cudaMemcpy(lm, status + 3, sizeof lm, cudaMemcpyDeviceToHost));
      if (lm[0] != 0 || lm[1] != 0) {
        std::fprintf(stderr, "dense_newton: step %d: potrf/potrs info %d %d\n", i, lm[0], lm[1]);
        std::exit(1);
      }
      nwtUpdate<<<blocksFor(n, 128), 128, 0, s0>>>(x, g, n);
      CKL();
    }
    CK(cudaEventRecord(xReady, s0));
    trace.add(uint64_t(uint32_t(st[0])) << 32 | bits(normF));
    ++newtonIters;
    if (newtonIters == 1) norm0 = normF;
    if (normF <= 1e-5f * norm0 || newtonIters >= 12) {
      CK(cudaStreamSynchronize(s0));
      std::printf("solve %d n %d step %d iters %d path %c norm %08x x %016llx\n", solve, n, i, newtonIters, path,
                  bits(normF), ull(deviceDigest(x, size_t(n) * 4)));
      ++solve;
      newtonIters = 0;
      load = 1.0f + 0.37f * float(solve % 7);
    }
    if (i % 100 == 99) {
      CK(cudaDeviceSynchronize());
      print("x", i, deviceDigest(x, size_t(n) * 4));
      print("coef", i, deviceDigest(coef, kFitP * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("end solves %d singular %d fits %d\n", solve, singular, fits);
  print("end", solve, trace.h ^ deviceDigest(x, size_t(n) * 4) ^ deviceDigest(coef, kFitP * 4));
  CKSO(cusolverDnDestroy(h));
  CKB(cublasDestroy(hb));
  for (void* p : {(void*)x, (void*)F, (void*)dx, (void*)g, (void*)coef, (void*)M, (void*)y, (void*)tau, (void*)ipiv,
                  (void*)status, (void*)J, (void*)Nm, (void*)A0, (void*)work, (void*)fitWork})
    CK(cudaFree(p));
  CK(cudaEventDestroy(xReady));
  CK(cudaEventDestroy(fitDone));
  CK(cudaStreamDestroy(s0));
  CK(cudaStreamDestroy(s1));
}

// ================================================================ eigen_batched

constexpr int kGpBatch = 64, kGpN = 16, kGpMat = kGpN * kGpN, kEigN = 128;

// Member b's kernel matrix (a Gaussian kernel of 16 moving points plus its
// jitter on the diagonal; exactly symmetric) and right-hand side. Member
// `bad` gets a negative first entry: potrf reports info = 1 for it.
__global__ void gpBuild(float* slab, float* rhs, float t, const float* jitter, int bad) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < kGpBatch * kGpMat) {
    const int b = k / kGpMat, e = k % kGpMat, r = e % kGpN, c = e / kGpN;
    const float l = 0.12f + 0.01f * float(b % 7), wobble = 0.01f * sinf(t + float(b));
    const float pr = float(r) / float(kGpN - 1) + wobble, pc = float(c) / float(kGpN - 1) + wobble;
    float v = expf(-(pr - pc) * (pr - pc) / (2.0f * l * l));
    if (r == c) v += jitter[b];
    if (b == bad && e == 0) v = -1.0f;
    slab[k] = v;
  }
  if (k < kGpBatch * kGpN) {
    const int b = k / kGpN, r = k % kGpN;
    rhs[k] = sinf(0.3f * float(r) + float(b) + t);
  }
}
// Zeroes the solutions of the members whose factorization failed (slot kk of
// the pointer arrays holds member (kk + rot) % 64).
__global__ void gpMask(float* rhs, const int* info, int rot) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= kGpBatch * kGpN) return;
  const int b = k / kGpN, slot = (b - rot + kGpBatch) % kGpBatch;
  if (info[slot] != 0) rhs[k] = 0.0f;
}
// A symmetric 128x128 matrix: a shifted 1-D Laplacian plus a rank-one term
// from the batch's solutions.
__global__ void eigAssemble(float* K, const float* sol, float shift) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= kEigN * kEigN) return;
  const int r = k % kEigN, c = k / kEigN;
  const float vr = tanhf(sol[r * 8]), vc = tanhf(sol[c * 8]);
  float lap = 0.0f;
  if (r == c) lap = 2.0f + shift;
  else if (r - c == 1 || c - r == 1) lap = -1.0f;
  K[k] = lap + 0.05f * vr * vc;
}

// A Gaussian-process style batch: every step 64 small SPD systems are built,
// factored and solved by potrfBatched/potrsBatched through pointer arrays the
// host rewrites (from pinned memory) in a rotating order; infoArray comes
// back every step and failed members get ten times the jitter. Every 5 steps
// a second handle on a second stream assembles a matrix from the solutions
// (after an event; the first stream waits for the assembly before it
// overwrites them) and runs syevd; the host consumes the eigenvalues at the
// next round (its event) and derives the next shift from them.
void eigenBatched() {
  cudaStream_t s0 = nonBlockingStream(), s1 = nonBlockingStream();
  cusolverDnHandle_t h0, h1;
  CKSO(cusolverDnCreate(&h0));
  CKSO(cusolverDnCreate(&h1));
  CKSO(cusolverDnSetDeterministicMode(h0, CUSOLVER_DETERMINISTIC_RESULTS));
  CKSO(cusolverDnSetDeterministicMode(h1, CUSOLVER_DETERMINISTIC_RESULTS));
  CKSO(cusolverDnSetStream(h0, s0));
  CKSO(cusolverDnSetStream(h1, s1));
  cudaEvent_t solved, assembled, eigDone;
  for (cudaEvent_t* e : {&solved, &assembled, &eigDone}) CK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  float *slabs[2], *rhs, *jitter, *K, *W, *eigWork;
  float **dA, **dB;
  int *info, *eigInfo;
  for (auto& sl : slabs) CK(cudaMalloc(&sl, kGpBatch * kGpMat * 4));
  CK(cudaMalloc(&rhs, kGpBatch * kGpN * 4));
  CK(cudaMalloc(&jitter, kGpBatch * 4));
  CK(cudaMalloc(&K, kEigN * kEigN * 4));
  CK(cudaMalloc(&W, kEigN * 4));
  CK(cudaMalloc(&dA, kGpBatch * sizeof(float*)));
  CK(cudaMalloc(&dB, kGpBatch * sizeof(float*)));
  CK(cudaMalloc(&info, (kGpBatch + 1) * 4));
  CK(cudaMalloc(&eigInfo, 4));
  int lwork = 0;
  CKSO(cusolverDnSsyevd_bufferSize(h1, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, kEigN, K, kEigN, W, &lwork));
  lwork = std::max(lwork, 1);
  CK(cudaMalloc(&eigWork, size_t(lwork) * 4));
  float **hA, **hB, *hJitter, *hW;
  int *hInfo, *hEigInfo;
  CK(cudaMallocHost(&hA, kGpBatch * sizeof(float*)));
  CK(cudaMallocHost(&hB, kGpBatch * sizeof(float*)));
  CK(cudaMallocHost(&hJitter, kGpBatch * 4));
  CK(cudaMallocHost(&hW, kEigN * 4));
  CK(cudaMallocHost(&hInfo, (kGpBatch + 1) * 4));
  CK(cudaMallocHost(&hEigInfo, 4));
  for (int b = 0; b < kGpBatch; ++b) hJitter[b] = (b % 4 == 0) ? 1e-6f : 1e-3f;
  bool jitterDirty = true, assemblyPending = false, eigPending = false;
  float shift = 0.0f;
  int failures = 0, eigs = 0;
  Digest trace, eigTrace;
  auto consumeEig = [&]() {
    CK(cudaEventSynchronize(eigDone));
    if (*hEigInfo != 0) {
      std::fprintf(stderr, "eigen_batched: syevd info %d\n", *hEigInfo);
      std::exit(1);
    }
    eigTrace.add(hW, kEigN * 4);
    shift = hW[0] < 0.1f ? std::min(0.1f - hW[0], 10.0f) : 0.0f;
    ++eigs;
    eigPending = false;
  };
  for (int i = 0; i < g_iters; ++i) {
    if (assemblyPending) {  // the solutions are read by the assembly on s1
      CK(cudaStreamWaitEvent(s0, assembled, 0));
      assemblyPending = false;
    }
    const int slab = i % 2, rot = i % kGpBatch, bad = (i % 23 == 22) ? (i / 23) % kGpBatch : -1;
    // The pinned arrays are free: the last step's copies finished before its wait.
    for (int kk = 0; kk < kGpBatch; ++kk) {
      const int member = (kk + rot) % kGpBatch;
      hA[kk] = slabs[slab] + member * kGpMat;
      hB[kk] = rhs + member * kGpN;
    }
    CK(cudaMemcpyAsync(dA, hA, kGpBatch * sizeof(float*), cudaMemcpyHostToDevice, s0));
    CK(cudaMemcpyAsync(dB, hB, kGpBatch * sizeof(float*), cudaMemcpyHostToDevice, s0));
    if (jitterDirty) {
      CK(cudaMemcpyAsync(jitter, hJitter, kGpBatch * 4, cudaMemcpyHostToDevice, s0));
      jitterDirty = false;
    }
    gpBuild<<<blocksFor(kGpBatch * kGpMat, 256), 256, 0, s0>>>(slabs[slab], rhs, 0.05f * float(i), jitter, bad);
    CKL();
    CKSO(cusolverDnSpotrfBatched(h0, CUBLAS_FILL_MODE_LOWER, kGpN, dA, kGpN, info, kGpBatch));
    CKSO(cusolverDnSpotrsBatched(h0, CUBLAS_FILL_MODE_LOWER, kGpN, 1, dA, kGpN, dB, kGpN, info + kGpBatch, kGpBatch));
    gpMask<<<blocksFor(kGpBatch * kGpN, 256), 256, 0, s0>>>(rhs, info, rot);
    CKL();
    CK(cudaMemcpyAsync(hInfo, info, (kGpBatch + 1) * 4, cudaMemcpyDeviceToHost, s0));
    CK(cudaEventRecord(solved, s0));
    CK(cudaStreamSynchronize(s0));
    if (hInfo[kGpBatch] != 0) {
      std::fprintf(stderr, "eigen_batched: potrsBatched info %d\n", hInfo[kGpBatch]);
      std::exit(1);
    }
    for (int kk = 0; kk < kGpBatch; ++kk) {
      if (hInfo[kk] == 0) continue;
      const int member = (kk + rot) % kGpBatch;
      hJitter[member] = std::min(hJitter[member] * 10.0f, 1.0f);
      jitterDirty = true;
      ++failures;
      trace.add(uint64_t(i) << 40 | uint64_t(member) << 20 | uint32_t(hInfo[kk]));
    }
    if (i % 5 == 4) {
      if (eigPending) consumeEig();  // the pinned eigenvalues are rewritten below
      CK(cudaStreamWaitEvent(s1, solved, 0));
      eigAssemble<<<blocksFor(kEigN * kEigN, 256), 256, 0, s1>>>(K, rhs, shift);
      CKL();
      CK(cudaEventRecord(assembled, s1));
      assemblyPending = true;
      CKSO(cusolverDnSsyevd(h1, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, kEigN, K, kEigN, W, eigWork, lwork,
                            eigInfo));
      CK(cudaMemcpyAsync(hW, W, kEigN * 4, cudaMemcpyDeviceToHost, s1));
      CK(cudaMemcpyAsync(hEigInfo, eigInfo, 4, cudaMemcpyDeviceToHost, s1));
      CK(cudaEventRecord(eigDone, s1));
      eigPending = true;
    }
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s0));
      CK(cudaStreamSynchronize(s1));
      print("solutions", i, deviceDigest(rhs, kGpBatch * kGpN * 4));
      std::printf("step %d failures %d eigs %d shift %08x eigenvalues %016llx\n", i, failures, eigs, bits(shift),
                  ull(eigTrace.h));
    }
  }
  CK(cudaStreamSynchronize(s0));
  if (eigPending) consumeEig();
  CK(cudaStreamSynchronize(s1));
  // The eigenvectors, each column's sign fixed by its largest entry.
  std::vector<float> vecs(kEigN * kEigN);
  CK(cudaMemcpy(vecs.data(), K, vecs.size() * 4, cudaMemcpyDeviceToHost));
  for (int c = 0; c < kEigN; ++c) {
    int arg = 0;
    for (int r = 1; r < kEigN; ++r)
      if (std::fabs(vecs[c * kEigN + r]) > std::fabs(vecs[c * kEigN + arg])) arg = r;
    if (vecs[c * kEigN + arg] < 0.0f)
      for (int r = 0; r < kEigN; ++r) vecs[c * kEigN + r] = -vecs[c * kEigN + r];
  }
  std::printf("end failures %d eigs %d eigenvalues %016llx vectors %016llx\n", failures, eigs, ull(eigTrace.h),
              ull(hostDigest(vecs.data(), vecs.size() * 4)));
  print("end", 0, trace.h ^ deviceDigest(rhs, kGpBatch * kGpN * 4) ^ hostDigest(hJitter, kGpBatch * 4));
  CKSO(cusolverDnDestroy(h0));
  CKSO(cusolverDnDestroy(h1));
  for (void* p : {(void*)slabs[0], (void*)slabs[1], (void*)rhs, (void*)jitter, (void*)K, (void*)W, (void*)eigWork,
                  (void*)dA, (void*)dB, (void*)info, (void*)eigInfo})
    CK(cudaFree(p));
  for (void* p : {(void*)hA, (void*)hB, (void*)hJitter, (void*)hW, (void*)hInfo, (void*)hEigInfo})
    CK(cudaFreeHost(p));
  for (cudaEvent_t e : {solved, assembled, eigDone}) CK(cudaEventDestroy(e));
  CK(cudaStreamDestroy(s0));
  CK(cudaStreamDestroy(s1));
}

// ================================================================ lt_mlp

constexpr int kLtIn = 256, kLtHid = 512, kLtOut = 64;
constexpr int kLtTokens[4] = {64, 128, 192, 256};
constexpr size_t kLtWorkspace = 4u << 20;

// One block of kLtOut threads per token: the argmax of its logits (lowest
// index on ties) by a tree in a fixed order.
__global__ void ltArgmax(const float* __restrict__ y, int* __restrict__ arg) {
  __shared__ float sv[kLtOut];
  __shared__ int si[kLtOut];
  const int tok = blockIdx.x, c = threadIdx.x;
  sv[c] = y[size_t(tok) * kLtOut + c];
  si[c] = c;
  __syncthreads();
  for (int stride = kLtOut / 2; stride > 0; stride >>= 1) {
    if (c < stride) {
      const float o = sv[c + stride];
      if (o > sv[c] || (o == sv[c] && si[c + stride] < si[c])) {
        sv[c] = o;
        si[c] = si[c + stride];
      }
    }
    __syncthreads();
  }
  if (c == 0) arg[tok] = si[0];
}
__global__ void ltPerturb(float* w, int n, uint32_t seed) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] += 0.002f * (unitFloat(hash32(seed * 2654435761u + uint32_t(k))) - 0.5f);
}

struct LtPlan {
  cublasLtMatrixLayout_t w1, x, h, w2, y;
  cublasLtMatmulAlgo_t algo1, algo2;
};
struct LtLane {
  cudaStream_t s;
  void* ws;
  float *x = nullptr, *h = nullptr, *y = nullptr;
  int* arg = nullptr;
  float *hx, *hy;
  int* harg;
  int cap = 0, m = 0, req = -1;
  bool busy = false, waitWeights = false;
  cudaEvent_t done;
};

cublasLtMatmulAlgo_t ltHeuristic(cublasLtHandle_t lt, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                                 cublasLtMatmulPreference_t pref) {
  cublasLtMatmulHeuristicResult_t r = {};
  int count = 0;
  CKB(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 1, &r, &count));
  if (count < 1 || r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > kLtWorkspace) {
    std::fprintf(stderr, "lt_mlp: no algorithm (%d, state %d)\n", count, int(r.state));
    std::exit(1);
  }
  return r.algo;
}

// An MLP inference server on cuBLASLt: layer 1 with the RELU_BIAS epilogue
// (FP32), layer 2 with BIAS (TF32 compute). Each request has one of 4 token
// counts (an LCG picks which); the layouts and the heuristic's algorithms are
// cached per count. Requests alternate between two streams, each with its
// own workspace and activations (re-allocated when a larger count comes);
// a request's results are consumed when its stream's next request begins.
// The first layer's bias pointer switches between two vectors every 25
// requests, alpha cycles through three values, and every 100 requests the
// first layer's weights are perturbed on one stream, after the other
// stream's request in flight, which waits for the update in turn.
void ltMlp() {
  cublasLtHandle_t lt;
  CKB(cublasLtCreate(&lt));
  float *W1, *W2, *b1[2], *b2;
  CK(cudaMalloc(&W1, kLtHid * kLtIn * 4));
  CK(cudaMalloc(&W2, kLtOut * kLtHid * 4));
  CK(cudaMalloc(&b1[0], kLtHid * 4));
  CK(cudaMalloc(&b1[1], kLtHid * 4));
  CK(cudaMalloc(&b2, kLtOut * 4));
  initUniform<<<blocksFor(kLtHid * kLtIn, 256), 256>>>(W1, kLtHid * kLtIn, 31u, 0.125f);
  initUniform<<<blocksFor(kLtOut * kLtHid, 256), 256>>>(W2, kLtOut * kLtHid, 32u, 0.25f);
  initUniform<<<blocksFor(kLtHid, 256), 256>>>(b1[0], kLtHid, 33u, 0.2f);
  initUniform<<<blocksFor(kLtHid, 256), 256>>>(b1[1], kLtHid, 34u, 0.2f);
  initUniform<<<blocksFor(kLtOut, 256), 256>>>(b2, kLtOut, 35u, 0.1f);
  CKL();
  CK(cudaDeviceSynchronize());

  cublasLtMatmulDesc_t op1, op2;
  CKB(cublasLtMatmulDescCreate(&op1, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CKB(cublasLtMatmulDescCreate(&op2, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
  const cublasLtEpilogue_t reluBias = CUBLASLT_EPILOGUE_RELU_BIAS, bias = CUBLASLT_EPILOGUE_BIAS;
  CKB(cublasLtMatmulDescSetAttribute(op1, CUBLASLT_MATMUL_DESC_EPILOGUE, &reluBias, sizeof reluBias));
  CKB(cublasLtMatmulDescSetAttribute(op1, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b1[0], sizeof(float*)));
  CKB(cublasLtMatmulDescSetAttribute(op2, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias, sizeof bias));
  CKB(cublasLtMatmulDescSetAttribute(op2, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b2, sizeof(float*)));
  cublasLtMatmulPreference_t pref;
  CKB(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t wsBytes = kLtWorkspace;
  CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes, sizeof wsBytes));
  std::map<int, LtPlan> plans;
  auto planFor = [&](int m) -> const LtPlan& {
    auto it = plans.find(m);
    if (it != plans.end()) return it->second;
    LtPlan p;
    CKB(cublasLtMatrixLayoutCreate(&p.w1, CUDA_R_32F, kLtHid, kLtIn, kLtHid));
    CKB(cublasLtMatrixLayoutCreate(&p.x, CUDA_R_32F, kLtIn, m, kLtIn));
    CKB(cublasLtMatrixLayoutCreate(&p.h, CUDA_R_32F, kLtHid, m, kLtHid));
    CKB(cublasLtMatrixLayoutCreate(&p.w2, CUDA_R_32F, kLtOut, kLtHid, kLtOut));
    CKB(cublasLtMatrixLayoutCreate(&p.y, CUDA_R_32F, kLtOut, m, kLtOut));
    p.algo1 = ltHeuristic(lt, op1, p.w1, p.x, p.h, pref);
    p.algo2 = ltHeuristic(lt, op2, p.w2, p.h, p.y, pref);
    return plans.emplace(m, p).first->second;
  };

  LtLane lanes[2];
  for (LtLane& L : lanes) {
    L.s = nonBlockingStream();
    CK(cudaMalloc(&L.ws, kLtWorkspace));
    CK(cudaMallocHost(&L.hx, kLtIn * kLtTokens[3] * 4));
    CK(cudaMallocHost(&L.hy, kLtOut * kLtTokens[3] * 4));
    CK(cudaMallocHost(&L.harg, kLtTokens[3] * 4));
    CK(cudaEventCreateWithFlags(&L.done, cudaEventDisableTiming));
  }
  cudaEvent_t weightsUpdated;
  CK(cudaEventCreateWithFlags(&weightsUpdated, cudaEventDisableTiming));
  Digest out;
  std::vector<int> classes(kLtOut, 0);
  int served = 0;
  auto consume = [&](LtLane& L) {
    CK(cudaEventSynchronize(L.done));
    out.add(uint64_t(L.req) << 32 | uint32_t(L.m));
    out.add(L.hy, size_t(kLtOut) * L.m * 4);
    for (int k = 0; k < L.m; ++k) ++classes[L.harg[k] % kLtOut];
    ++served;
    L.busy = false;
  };
  uint32_t lcg = 777u;
  for (int r = 0; r < g_iters; ++r) {
    LtLane &L = lanes[r % 2], &O = lanes[1 - r % 2];
    if (L.busy) consume(L);  // also frees its pinned buffers and activations
    lcg = lcg * 1664525u + 1013904223u;
    const int m = kLtTokens[(lcg >> 16) % 4u];
    if (m > L.cap) {
      for (void* p : {(void*)L.x, (void*)L.h, (void*)L.y, (void*)L.arg}) CK(cudaFree(p));
      CK(cudaMalloc(&L.x, size_t(kLtIn) * m * 4));
      CK(cudaMalloc(&L.h, size_t(kLtHid) * m * 4));
      CK(cudaMalloc(&L.y, size_t(kLtOut) * m * 4));
      CK(cudaMalloc(&L.arg, size_t(m) * 4));
      L.cap = m;
      std::printf("request %d lane %d grows to %d tokens\n", r, r % 2, m);
    }
    const LtPlan& P = planFor(m);
    for (int k = 0; k < kLtIn * m; ++k)
      L.hx[k] = unitFloat(hash32(uint32_t(r) * 7919u + uint32_t(k))) * 2.0f - 1.0f;
    CK(cudaMemcpyAsync(L.x, L.hx, size_t(kLtIn) * m * 4, cudaMemcpyHostToDevice, L.s));
    if (L.waitWeights) {
      CK(cudaStreamWaitEvent(L.s, weightsUpdated, 0));
      L.waitWeights = false;
    }
    if (r % 100 == 50) {  // a model update, after the other lane's request in flight
      if (O.busy) CK(cudaStreamWaitEvent(L.s, O.done, 0));
      ltPerturb<<<blocksFor(kLtHid * kLtIn, 256), 256, 0, L.s>>>(W1, kLtHid * kLtIn, uint32_t(r));
      CKL();
      CK(cudaEventRecord(weightsUpdated, L.s));
      O.waitWeights = true;
    }
    CKB(cublasLtMatmulDescSetAttribute(op1, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b1[(r / 25) % 2], sizeof(float*)));
    const float alpha = 1.0f + 0.125f * float(r % 3), one = 1.0f, zero = 0.0f;
    CKB(cublasLtMatmul(lt, op1, &alpha, W1, P.w1, L.x, P.x, &zero, L.h, P.h, L.h, P.h, &P.algo1, L.ws, kLtWorkspace,
                       L.s));
    CKB(cublasLtMatmul(lt, op2, &one, W2, P.w2, L.h, P.h, &zero, L.y, P.y, L.y, P.y, &P.algo2, L.ws, kLtWorkspace,
                       L.s));
    ltArgmax<<<m, kLtOut, 0, L.s>>>(L.y, L.arg);
    CKL();
    CK(cudaMemcpyAsync(L.hy, L.y, size_t(kLtOut) * m * 4, cudaMemcpyDeviceToHost, L.s));
    CK(cudaMemcpyAsync(L.harg, L.arg, size_t(m) * 4, cudaMemcpyDeviceToHost, L.s));
    CK(cudaEventRecord(L.done, L.s));
    L.busy = true;
    L.m = m;
    L.req = r;
    if (r % 50 == 49)
      std::printf("request %d served %d out %016llx classes %016llx\n", r, served, ull(out.h),
                  ull(hostDigest(classes.data(), classes.size() * 4)));
  }
  // In request order: the lane of the second-to-last request first.
  for (int k = 0; k < 2; ++k) {
    LtLane& L = lanes[(g_iters + k) % 2];
    if (L.busy) consume(L);
  }
  print("end", served, out.h ^ hostDigest(classes.data(), classes.size() * 4) ^
                           deviceDigest(W1, kLtHid * kLtIn * 4));
  for (auto& kv : plans)
    for (cublasLtMatrixLayout_t l : {kv.second.w1, kv.second.x, kv.second.h, kv.second.w2, kv.second.y})
      CKB(cublasLtMatrixLayoutDestroy(l));
  CKB(cublasLtMatmulPreferenceDestroy(pref));
  CKB(cublasLtMatmulDescDestroy(op1));
  CKB(cublasLtMatmulDescDestroy(op2));
  CKB(cublasLtDestroy(lt));
  for (LtLane& L : lanes) {
    for (void* p : {L.ws, (void*)L.x, (void*)L.h, (void*)L.y, (void*)L.arg}) CK(cudaFree(p));
    for (void* p : {(void*)L.hx, (void*)L.hy, (void*)L.harg}) CK(cudaFreeHost(p));
    CK(cudaEventDestroy(L.done));
    CK(cudaStreamDestroy(L.s));
  }
  CK(cudaEventDestroy(weightsUpdated));
  for (void* p : {(void*)W1, (void*)W2, (void*)b1[0], (void*)b1[1], (void*)b2}) CK(cudaFree(p));
}

// ================================================================ nvrtc_jit

constexpr int kJitW = 256, kJitH = 256, kJitN = kJitW * kJitH;
constexpr float kJitGains[3] = {1.0f, 0.995f, 1.002f};

const char* const kJitSource = R"(
#ifndef GAIN
#define GAIN 1.0f
#endif
__constant__ float coeffs[8];
__device__ unsigned int launches;
__device__ float residual;

// A periodic star stencil of radius R with the weights in constant memory.
template <int R>
__global__ void stencil(float* out, const float* in, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = coeffs[0] * in[y * w + x];
  for (int d = 1; d <= R; ++d)
    acc += coeffs[d] * (in[y * w + (x + d) % w] + in[y * w + (x - d + w) % w] + in[((y + d) % h) * w + x] +
                        in[((y - d + h) % h) * w + x]);
  out[y * w + x] = GAIN * acc + coeffs[7];
}

// Relaxes field towards a pairwise mean of other's values (through shared memory).
extern "C" __global__ void relax(float* field, const float* other, int n, float omega) {
  extern __shared__ float tile[];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = k < n ? other[k] : 0.0f;
  __syncthreads();
  if (k < n) {
    const float nb = tile[(threadIdx.x + 1) % blockDim.x];
    field[k] = (1.0f - omega) * field[k] + omega * 0.5f * (tile[threadIdx.x] + nb);
  }
  if (k == 0) atomicAdd(&launches, 1u);
}

// One block of 256: the RMS difference of a and b, in a fixed order.
extern "C" __global__ void rmsDiff(const float* a, const float* b, int n) {
  __shared__ float s[256];
  float acc = 0.0f;
  for (int k = threadIdx.x; k < n; k += 256) {
    const float d = a[k] - b[k];
    acc += d * d;
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) residual = sqrtf(s[0] / float(n));
}
)";

struct JitModule {
  CUmodule mod = nullptr;
  CUfunction stencil[2] = {nullptr, nullptr}, relax = nullptr, rms = nullptr;
  CUdeviceptr coeffs = 0, launches = 0, residual = 0;
};

// Compiles the source for the device with GAIN = gain and loads it.
JitModule jitBuild(int major, int minor, float gain) {
  nvrtcProgram prog;
  CKN(nvrtcCreateProgram(&prog, kJitSource, "jit_stencil.cu", 0, nullptr, nullptr));
  const char* const names[] = {"stencil<1>", "stencil<2>", "&coeffs", "&launches", "&residual"};
  for (const char* nm : names) CKN(nvrtcAddNameExpression(prog, nm));
  char arch[48], gainDef[48];
  std::snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
  std::snprintf(gainDef, sizeof gainDef, "-DGAIN=%.4ff", double(gain));
  const char* opts[] = {arch, gainDef, "--std=c++17"};
  const nvrtcResult rc = nvrtcCompileProgram(prog, 3, opts);
  if (rc != NVRTC_SUCCESS) {
    size_t logSize = 0;
    nvrtcGetProgramLogSize(prog, &logSize);
    std::string log(logSize + 1, '\0');
    nvrtcGetProgramLog(prog, log.data());
    std::fprintf(stderr, "nvrtc_jit: compile failed (%s):\n%s\n", nvrtcGetErrorString(rc), log.c_str());
    std::exit(1);
  }
  size_t cubinSize = 0;
  CKN(nvrtcGetCUBINSize(prog, &cubinSize));
  std::vector<char> cubin(cubinSize);
  CKN(nvrtcGetCUBIN(prog, cubin.data()));
  JitModule m;
  CKD(cuModuleLoadData(&m.mod, cubin.data()));
  const char* lowered = nullptr;
  for (int r = 0; r < 2; ++r) {
    CKN(nvrtcGetLoweredName(prog, names[r], &lowered));
    CKD(cuModuleGetFunction(&m.stencil[r], m.mod, lowered));
  }
  CKD(cuModuleGetFunction(&m.relax, m.mod, "relax"));
  CKD(cuModuleGetFunction(&m.rms, m.mod, "rmsDiff"));
  CUdeviceptr* globals[3] = {&m.coeffs, &m.launches, &m.residual};
  for (int g = 0; g < 3; ++g) {
    size_t bytes = 0;
    CKN(nvrtcGetLoweredName(prog, names[2 + g], &lowered));
    CKD(cuModuleGetGlobal(globals[g], &bytes, m.mod, lowered));
  }
  CKN(nvrtcDestroyProgram(&prog));
  return m;
}

// The kernel's parameters as one buffer (the `extra` launch form): the
// layout of (float*, const float*, int, float).
struct RelaxArgs {
  CUdeviceptr field;
  CUdeviceptr other;
  int n;
  float omega;
};
static_assert(sizeof(RelaxArgs) == 24);

// A stencil code on NVRTC and the driver API: the kernels are compiled at
// start for the device's architecture and loaded with cuModuleLoadData. Every
// step the stencil's weights go to a __constant__ array by cuMemcpyHtoDAsync
// from pageable memory, the stencil (radius 1 or 2: the residual read back
// last step against its running mean decides) runs by cuLaunchKernelEx with a
// cluster dimension of 2 (Hopper and later), relax by cuLaunchKernel with the
// `extra` buffer and 1 or 2 KiB of dynamic shared memory, and the residual
// comes back from a __device__ variable into pinned memory. Every 100 steps
// the module is unloaded and the source recompiled with another GAIN.
void nvrtcJit() {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));  // the primary context, current for the driver API
  int major = 0, minor = 0;
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  const bool clusters = major >= 9;
  CUstream s;
  CKD(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr u, v;
  CKD(cuMemAlloc(&u, kJitN * 4));
  CKD(cuMemAlloc(&v, kJitN * 4));
  {
    std::vector<float> init(kJitN);
    for (int k = 0; k < kJitN; ++k) init[k] = unitFloat(hash32(uint32_t(k) * 977u + 5u)) - 0.5f;
    CKD(cuMemcpyHtoD(u, init.data(), kJitN * 4));
    CKD(cuMemcpyHtoD(v, init.data(), kJitN * 4));
  }
  float* hResid = nullptr;
  CK(cudaMallocHost(&hResid, 4));
  int reloads = 0;
  JitModule jm = jitBuild(major, minor, kJitGains[0]);
  double mean = 0.0;
  float residPrev = 0.0f;
  Digest trace;
  for (int i = 0; i < g_iters; ++i) {
    // Pageable weights: the copy takes them before cuMemcpyHtoDAsync returns.
    std::array<float, 8> coeffs = {0.40f + 0.01f * float(i % 5), 0.10f, 0.035f, 0.0f, 0.0f, 0.0f, 0.0f,
                                   0.001f * std::sin(0.1f * float(i))};
    CKD(cuMemcpyHtoDAsync(jm.coeffs, coeffs.data(), sizeof coeffs, s));
    coeffs.fill(-1.0f);  // reused at once, as the caller may
    const int radius = (i > 0 && double(residPrev) > mean) ? 2 : 1;
    {
      int w = kJitW, hgt = kJitH;
      void* args[] = {&v, &u, &w, &hgt};
      CUlaunchAttribute attr[1] = {};
      attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr[0].value.clusterDim.x = 2;
      attr[0].value.clusterDim.y = 1;
      attr[0].value.clusterDim.z = 1;
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kJitW / 16;
      cfg.gridDimY = kJitH / 16;
      cfg.gridDimZ = 1;
      cfg.blockDimX = 16;
      cfg.blockDimY = 16;
      cfg.blockDimZ = 1;
      cfg.sharedMemBytes = 0;
      cfg.hStream = s;
      cfg.attrs = attr;
      cfg.numAttrs = clusters ? 1 : 0;
      CKD(cuLaunchKernelEx(&cfg, jm.stencil[radius - 1], args, nullptr));
    }
    {
      RelaxArgs ra{v, u, kJitN, 0.25f + 0.05f * float(i % 3)};
      size_t raSize = sizeof ra;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &ra, CU_LAUNCH_PARAM_BUFFER_SIZE, &raSize, CU_LAUNCH_PARAM_END};
      const unsigned smem = 256u * 4u * unsigned(1 + (i & 1));
      CKD(cuLaunchKernel(jm.relax, kJitN / 256, 1, 1, 256, 1, 1, smem, s, nullptr, extra));
    }
    {
      int nn = kJitN;
      void* args[] = {&u, &v, &nn};
      CKD(cuLaunchKernel(jm.rms, 1, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    }
    CKD(cuMemcpyDtoHAsync(hResid, jm.residual, 4, s));
    CKD(cuStreamSynchronize(s));
    residPrev = *hResid;
    mean = i == 0 ? double(residPrev) : 0.9 * mean + 0.1 * double(residPrev);
    trace.add(uint64_t(radius) << 32 | bits(residPrev));
    std::swap(u, v);
    if (i % 100 == 99) {
      print("field", i, deviceDigest(reinterpret_cast<void*>(u), kJitN * 4));
      if (i + 1 < g_iters) {
        // Hot reload: the old module goes first, then the new one is built.
        unsigned launches = 0;
        CKD(cuMemcpyDtoH(&launches, jm.launches, 4));
        CKD(cuModuleUnload(jm.mod));
        ++reloads;
        jm = jitBuild(major, minor, kJitGains[reloads % 3]);
        std::printf("reload %d at %d launches %u residual %08x\n", reloads, i, launches, bits(residPrev));
      }
    }
  }
  CKD(cuStreamSynchronize(s));
  unsigned launches = 0;
  CKD(cuMemcpyDtoH(&launches, jm.launches, 4));
  std::printf("end reloads %d launches %u trace %016llx\n", reloads, launches, ull(trace.h));
  print("end", reloads, trace.h ^ deviceDigest(reinterpret_cast<void*>(u), kJitN * 4) ^
                            deviceDigest(reinterpret_cast<void*>(v), kJitN * 4));
  CKD(cuModuleUnload(jm.mod));
  CKD(cuMemFree(u));
  CKD(cuMemFree(v));
  CK(cudaFreeHost(hResid));
  CKD(cuStreamDestroy(s));
}

// ================================================================ fft_two_streams

constexpr int kFftSizes[3] = {128, 160, 192};

__global__ void fftForce(float* u, int N, float amp, float phase, int member) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= N * N) return;
  const float x = float(k / N) / float(N), y = float(k % N) / float(N);
  u[k] += amp * sinf(2.0f * kPi * 2.0f * x + phase) * cosf(2.0f * kPi * float(3 + member) * y - phase);
}
// Diffusion, a 2/3 dealiasing cut, a shift by (cx, cy) cells and the 1/N^2 of
// the round trip, on the N x (N/2+1) half spectrum.
__global__ void fftSpectral(cufftComplex* U, int N, float nu, float cx, float cy) {
  const int half = N / 2 + 1;
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= N * half) return;
  const int kxi = k / half, kyi = k % half;
  const float fx = float(kxi <= N / 2 ? kxi : kxi - N), fy = float(kyi);
  const float k2 = fx * fx + fy * fy, cut = float(N) / 3.0f;
  float damp = k2 > cut * cut ? 0.0f : expf(-nu * k2) / float(N * N);
  float sn, cs;
  sincosf(-2.0f * kPi * (fx * cx + fy * cy) / float(N), &sn, &cs);
  const cufftComplex a = U[k];
  U[k] = make_cuComplex(damp * (a.x * cs - a.y * sn), damp * (a.x * sn + a.y * cs));
}
// One block of 256: the mean square of u, in a fixed order.
__global__ void fftEnergy(const float* u, int n, float* e) {
  __shared__ float s[256];
  const int t = threadIdx.x;
  float acc = 0.0f;
  for (int k = t; k < n; k += 256) acc += u[k] * u[k];
  s[t] = acc;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) *e = s[0] / float(n);
}
// Bilinear, periodic resampling of an Ns x Ns field onto Nd x Nd.
__global__ void fftResample(const float* src, int Ns, float* dst, int Nd) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= Nd * Nd) return;
  const float fx = float(k / Nd) * float(Ns) / float(Nd), fy = float(k % Nd) * float(Ns) / float(Nd);
  const int x0 = int(fx), y0 = int(fy), x1 = (x0 + 1) % Ns, y1 = (y0 + 1) % Ns;
  const float ax = fx - float(x0), ay = fy - float(y0);
  dst[k] = (1.0f - ax) * ((1.0f - ay) * src[x0 * Ns + y0] + ay * src[x0 * Ns + y1]) +
           ax * ((1.0f - ay) * src[x1 * Ns + y0] + ay * src[x1 * Ns + y1]);
}

// Two fields of a forced, advected, diffusing flow, each on its own stream,
// share one R2C and one C2R plan made without auto-allocation: before each use
// the plan's stream and work area (one per stream) are set, and the uses are
// chained by an event (a plan is one object: its uses must not overlap). The
// other kernels of the two streams overlap. Every 10 steps the energies come
// back (events) and the host adjusts each field's forcing towards a target.
// At steps 100 and 200 the grid grows: fields resampled, plans re-made, work
// areas grown.
void fftTwoStreams() {
  cudaStream_t s[2] = {nonBlockingStream(), nonBlockingStream()};
  cudaEvent_t planFree, eDone[2];
  CK(cudaEventCreateWithFlags(&planFree, cudaEventDisableTiming));
  for (auto& e : eDone) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  int N = kFftSizes[0];
  float* u[2];
  cufftComplex* U[2];
  void* work[2] = {nullptr, nullptr};
  size_t workCap = 0;
  float *energy, *hE;
  CK(cudaMalloc(&energy, 2 * 4));
  CK(cudaMallocHost(&hE, 2 * 4));
  for (int k = 0; k < 2; ++k) {
    CK(cudaMalloc(&u[k], size_t(N) * N * 4));
    CK(cudaMalloc(&U[k], size_t(N) * (N / 2 + 1) * sizeof(cufftComplex)));
    initUniform<<<blocksFor(N * N, 256), 256, 0, s[k]>>>(u[k], N * N, 71u + uint32_t(k), 0.2f);
    CKL();
  }
  cufftHandle pf = 0, pb = 0;
  auto makePlans = [&]() {
    size_t wf = 0, wb = 0;
    CKF(cufftCreate(&pf));
    CKF(cufftSetAutoAllocation(pf, 0));
    CKF(cufftMakePlan2d(pf, N, N, CUFFT_R2C, &wf));
    CKF(cufftCreate(&pb));
    CKF(cufftSetAutoAllocation(pb, 0));
    CKF(cufftMakePlan2d(pb, N, N, CUFFT_C2R, &wb));
    const size_t need = std::max<size_t>(std::max(wf, wb), 256);
    if (need > workCap) {
      for (void*& w : work) {
        CK(cudaFree(w));
        CK(cudaMalloc(&w, need));
      }
      workCap = need;
    }
    std::fprintf(stderr, "fft_two_streams: N %d work %zu %zu\n", N, wf, wb);
  };
  CK(cudaDeviceSynchronize());
  makePlans();
  auto exec = [&](int k, bool forward) {
    CK(cudaStreamWaitEvent(s[k], planFree, 0));
    const cufftHandle p = forward ? pf : pb;
    CKF(cufftSetStream(p, s[k]));
    CKF(cufftSetWorkArea(p, work[k]));
    if (forward)
      CKF(cufftExecR2C(p, u[k], U[k]));
    else
      CKF(cufftExecC2R(p, U[k], u[k]));
    CK(cudaEventRecord(planFree, s[k]));
  };
  float amp[2] = {0.02f, 0.03f};
  const float target[2] = {0.01f, 0.02f};
  Digest trace;
  for (int i = 0; i < g_iters; ++i) {
    if (i > 0 && i % 100 == 0 && i / 100 < 3) {
      for (cudaStream_t q : s) CK(cudaStreamSynchronize(q));
      const int oldN = N;
      N = kFftSizes[i / 100];
      for (int k = 0; k < 2; ++k) {
        float* nu;
        CK(cudaMalloc(&nu, size_t(N) * N * 4));
        fftResample<<<blocksFor(N * N, 256), 256, 0, s[k]>>>(u[k], oldN, nu, N);
        CKL();
        CK(cudaStreamSynchronize(s[k]));
        CK(cudaFree(u[k]));
        CK(cudaFree(U[k]));
        u[k] = nu;
        CK(cudaMalloc(&U[k], size_t(N) * (N / 2 + 1) * sizeof(cufftComplex)));
      }
      CKF(cufftDestroy(pf));
      CKF(cufftDestroy(pb));
      makePlans();
      std::printf("grid %d at %d\n", N, i);
    }
    const int nn = N * N, half = N * (N / 2 + 1);
    for (int k = 0; k < 2; ++k) {
      fftForce<<<blocksFor(nn, 256), 256, 0, s[k]>>>(u[k], N, amp[k], 0.1f * float(i), k);
      CKL();
      exec(k, true);
    }
    for (int k = 0; k < 2; ++k) {
      const float cx = 0.5f + 0.25f * float(k), cy = 0.3f * std::cos(0.02f * float(i));
      fftSpectral<<<blocksFor(half, 256), 256, 0, s[k]>>>(U[k], N, 2e-4f, cx, cy);
      CKL();
      exec(k, false);
      fftEnergy<<<1, 256, 0, s[k]>>>(u[k], nn, energy + k);
      CKL();
    }
    if (i % 10 == 9) {
      for (int k = 0; k < 2; ++k) {
        CK(cudaMemcpyAsync(hE + k, energy + k, 4, cudaMemcpyDeviceToHost, s[k]));
        CK(cudaEventRecord(eDone[k], s[k]));
      }
      for (int k = 0; k < 2; ++k) {
        CK(cudaEventSynchronize(eDone[k]));
        amp[k] = std::min(std::max(amp[k] * (hE[k] < target[k] ? 1.1f : 0.9f), 0.001f), 0.5f);
        trace.add(uint64_t(bits(hE[k])) << 32 | bits(amp[k]));
      }
    }
    if (i % 100 == 99) {
      for (cudaStream_t q : s) CK(cudaStreamSynchronize(q));
      print("field0", i, deviceDigest(u[0], size_t(N) * N * 4));
      print("field1", i, deviceDigest(u[1], size_t(N) * N * 4));
      std::printf("energy %d %08x %08x amp %08x %08x\n", i, bits(hE[0]), bits(hE[1]), bits(amp[0]), bits(amp[1]));
    }
  }
  for (cudaStream_t q : s) CK(cudaStreamSynchronize(q));
  print("end", N, trace.h ^ deviceDigest(u[0], size_t(N) * N * 4) ^ deviceDigest(u[1], size_t(N) * N * 4));
  CKF(cufftDestroy(pf));
  CKF(cufftDestroy(pb));
  for (int k = 0; k < 2; ++k) {
    CK(cudaFree(u[k]));
    CK(cudaFree(U[k]));
    CK(cudaFree(work[k]));
    CK(cudaEventDestroy(eDone[k]));
    CK(cudaStreamDestroy(s[k]));
  }
  CK(cudaFree(energy));
  CK(cudaFreeHost(hE));
  CK(cudaEventDestroy(planFree));
}

// ================================================================ curand_filter

constexpr int kPf = 16384, kPfThreads = 1024, kPfChunk = kPf / kPfThreads, kPfPoisson = 4096;
constexpr unsigned long long kPfPoissonOffset = 1ull << 40;

__global__ void pfPropagate(float* x, const float* noise, int n, float drift) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = 0.9f * x[k] + drift + noise[k];
}
__global__ void pfLogWeights(const float* x, float* logw, int n, float obs) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) logw[k] = -(obs - x[k]) * (obs - x[k]) / (2.0f * 0.25f);
}
// One block of kPfThreads, fixed order: w = exp(logw - max), stats = {ESS,
// weighted mean of x, max logw, sum w}.
__global__ void pfStats(const float* __restrict__ logw, float* __restrict__ w, const float* __restrict__ x, int n,
                        float* __restrict__ stats) {
  __shared__ float s1[kPfThreads], s2[kPfThreads], s3[kPfThreads];
  const int t = threadIdx.x;
  float mx = -3.0e38f;
  for (int k = t; k < n; k += kPfThreads) mx = fmaxf(mx, logw[k]);
  s1[t] = mx;
  __syncthreads();
  for (int stride = kPfThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) s1[t] = fmaxf(s1[t], s1[t + stride]);
    __syncthreads();
  }
  mx = s1[0];
  __syncthreads();
  float sw = 0.0f, sw2 = 0.0f, swx = 0.0f;
  for (int k = t; k < n; k += kPfThreads) {
    const float wk = expf(logw[k] - mx);
    w[k] = wk;
    sw += wk;
    sw2 += wk * wk;
    swx += wk * x[k];
  }
  s1[t] = sw;
  s2[t] = sw2;
  s3[t] = swx;
  __syncthreads();
  for (int stride = kPfThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) {
      s1[t] += s1[t + stride];
      s2[t] += s2[t + stride];
      s3[t] += s3[t + stride];
    }
    __syncthreads();
  }
  if (t == 0) {
    stats[0] = s1[0] * s1[0] / s2[0];
    stats[1] = s3[0] / s1[0];
    stats[2] = mx;
    stats[3] = s1[0];
  }
}
// One block of kPfThreads: the normalized inclusive prefix sums of w (each
// thread a contiguous chunk, the chunk totals scanned by thread 0).
__global__ void pfCdf(const float* __restrict__ w, float* __restrict__ cdf) {
  __shared__ float tot[kPfThreads];
  __shared__ float total;
  const int t = threadIdx.x, base = t * kPfChunk;
  float acc = 0.0f;
  for (int j = 0; j < kPfChunk; ++j) acc += w[base + j];
  tot[t] = acc;
  __syncthreads();
  if (t == 0) {
    float run = 0.0f;
    for (int j = 0; j < kPfThreads; ++j) {
      const float v = tot[j];
      tot[j] = run;
      run += v;
    }
    total = run;
    cdf[kPf] = run;  // the total, kept after the entries
  }
  __syncthreads();
  float run = tot[t];
  for (int j = 0; j < kPfChunk; ++j) {
    run += w[base + j];
    cdf[base + j] = run / total;
  }
}
// Systematic resampling: particle j takes the first k whose cdf reaches (u + j) / n.
__global__ void pfResample(const float* __restrict__ x, const float* __restrict__ cdf, const float* __restrict__ u,
                           float* __restrict__ out, int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const float target = (u[0] + float(j)) / float(n);
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (cdf[mid] >= target) hi = mid;
    else lo = mid + 1;
  }
  out[j] = x[lo];
}
__global__ void pfBirths(float* x, const unsigned* counts, int m, float lambda) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < m) x[k * 4] += 0.01f * (float(counts[k]) - lambda);
}
__global__ void pfRejuvenate(float* x, const float* q, int n, float center) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = 0.5f * x[k] + 0.5f * (center + 4.0f * (q[k] - 0.5f));
}

// A bootstrap particle filter tracking a noisy oscillator. The process noise
// is drawn by a Philox generator one step ahead on a side stream, at an
// explicit offset per step, into two buffers ordered by events both ways.
// The main stream propagates, weights, and reduces; the effective sample size
// comes back every step and decides on systematic resampling (an MRG32k3a
// uniform, on the main stream). Every 10 steps the Philox generator moves to
// the main stream (after its last use on the side stream) for
// curandGeneratePoisson with a lambda picked by the estimate, and back; every
// 75 steps a Sobol32 generator, rewound to an offset of its own, rejuvenates
// the particles.
void curandFilter() {
  cudaStream_t s0 = nonBlockingStream(), sR = nonBlockingStream();
  cudaEvent_t ready[2], consumed[2], philoxDone, philoxFree;
  for (int k = 0; k < 2; ++k) {
    CK(cudaEventCreateWithFlags(&ready[k], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&consumed[k], cudaEventDisableTiming));
  }
  CK(cudaEventCreateWithFlags(&philoxDone, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&philoxFree, cudaEventDisableTiming));
  curandGenerator_t philox, mrg, sobol;
  CKR(curandCreateGenerator(&philox, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CKR(curandCreateGenerator(&mrg, CURAND_RNG_PSEUDO_MRG32K3A));
  CKR(curandCreateGenerator(&sobol, CURAND_RNG_QUASI_SOBOL32));
  CKR(curandSetPseudoRandomGeneratorSeed(philox, 4242ull));
  CKR(curandSetPseudoRandomGeneratorSeed(mrg, 99ull));
  CKR(curandSetGeneratorOrdering(philox, CURAND_ORDERING_PSEUDO_DEFAULT));
  CKR(curandSetQuasiRandomGeneratorDimensions(sobol, 1));
  CKR(curandSetStream(philox, sR));
  CKR(curandSetStream(mrg, s0));
  CKR(curandSetStream(sobol, s0));
  float *x[2], *noise[2], *logw, *w, *cdf, *uni, *q, *stats, *hStats;
  unsigned* counts;
  for (int k = 0; k < 2; ++k) {
    CK(cudaMalloc(&x[k], kPf * 4));
    CK(cudaMalloc(&noise[k], kPf * 4));
  }
  CK(cudaMalloc(&logw, kPf * 4));
  CK(cudaMalloc(&w, kPf * 4));
  CK(cudaMalloc(&cdf, (kPf + 1) * 4));
  CK(cudaMalloc(&uni, 2 * 4));
  CK(cudaMalloc(&q, kPf * 4));
  CK(cudaMalloc(&stats, 4 * 4));
  CK(cudaMalloc(&counts, kPfPoisson * 4));
  CK(cudaMallocHost(&hStats, 4 * 4));
  initUniform<<<blocksFor(kPf, 256), 256, 0, s0>>>(x[0], kPf, 5u, 4.0f);
  CKL();
  CK(cudaEventRecord(consumed[1], s0));
  // Step 0's noise.
  CKR(curandSetGeneratorOffset(philox, 0ull));
  CKR(curandGenerateNormal(philox, noise[0], kPf, 0.0f, 0.5f));
  CK(cudaEventRecord(ready[0], sR));
  CK(cudaEventRecord(philoxDone, sR));
  const float lambdas[3] = {2.5f, 7.0f, 40.0f};
  double truth = 0.0;
  int cur = 0, resamples = 0, births = 0;
  Digest trace;
  for (int i = 0; i < g_iters; ++i) {
    const float drift = 2.0f * std::sin(0.1f * float(i));
    truth = 0.9 * truth + double(drift) + 0.5 * (double(unitFloat(hash32(uint32_t(i) * 3u + 1u))) - 0.5) * 3.4;
    const float obs = float(truth + 0.5 * (double(unitFloat(hash32(uint32_t(i) * 3u + 2u))) - 0.5) * 3.4);
    CK(cudaStreamWaitEvent(s0, ready[i % 2], 0));
    pfPropagate<<<blocksFor(kPf, 256), 256, 0, s0>>>(x[cur], noise[i % 2], kPf, drift);
    CKL();
    CK(cudaEventRecord(consumed[i % 2], s0));
    pfLogWeights<<<blocksFor(kPf, 256), 256, 0, s0>>>(x[cur], logw, kPf, obs);
    pfStats<<<1, kPfThreads, 0, s0>>>(logw, w, x[cur], kPf, stats);
    CKL();
    CK(cudaMemcpyAsync(hStats, stats, 4 * 4, cudaMemcpyDeviceToHost, s0));
    CK(cudaStreamSynchronize(s0));
    const float ess = hStats[0], estimate = hStats[1];
    trace.add(hStats, 4 * 4);
    bool resampled = false;
    if (ess < 0.5f * float(kPf)) {
      CKR(curandGenerateUniform(mrg, uni, 2));
      pfCdf<<<1, kPfThreads, 0, s0>>>(w, cdf);
      pfResample<<<blocksFor(kPf, 256), 256, 0, s0>>>(x[cur], cdf, uni, x[1 - cur], kPf);
      CKL();
      cur = 1 - cur;
      ++resamples;
      resampled = true;
    }
    if (i % 10 == 9) {
      // Philox on the main stream, after its last use on the side stream.
      const float lambda = lambdas[estimate < -1.0f ? 0 : (estimate < 1.0f ? 1 : 2)];
      CK(cudaStreamWaitEvent(s0, philoxDone, 0));
      CKR(curandSetStream(philox, s0));
      CKR(curandSetGeneratorOffset(philox, kPfPoissonOffset + 8192ull * uint64_t(i)));
      CKR(curandGeneratePoisson(philox, counts, kPfPoisson, double(lambda)));
      pfBirths<<<blocksFor(kPfPoisson, 256), 256, 0, s0>>>(x[cur], counts, kPfPoisson, lambda);
      CKL();
      CK(cudaEventRecord(philoxFree, s0));
      CKR(curandSetStream(philox, sR));
      CK(cudaStreamWaitEvent(sR, philoxFree, 0));
      ++births;
      trace.add(bits(lambda));
    }
    if (i % 75 == 74) {
      CKR(curandSetGeneratorOffset(sobol, uint64_t(i / 75 % 2) * kPf));
      CKR(curandGenerateUniform(sobol, q, kPf));
      pfRejuvenate<<<blocksFor(kPf, 256), 256, 0, s0>>>(x[cur], q, kPf, estimate);
      CKL();
    }
    if (i + 1 < g_iters) {
      // The next step's noise on the side stream, once its buffer is consumed.
      CK(cudaStreamWaitEvent(sR, consumed[(i + 1) % 2], 0));
      CKR(curandSetGeneratorOffset(philox, uint64_t(i + 1) * 2ull * kPf));
      CKR(curandGenerateNormal(philox, noise[(i + 1) % 2], kPf, 0.0f, 0.5f));
      CK(cudaEventRecord(ready[(i + 1) % 2], sR));
      CK(cudaEventRecord(philoxDone, sR));
    }
    if (i % 25 == 24)
      std::printf("step %d ess %08x estimate %08x obs %08x resamples %d births %d%s\n", i, bits(ess), bits(estimate),
                  bits(obs), resamples, births, resampled ? " resampled" : "");
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s0));
      print("particles", i, deviceDigest(x[cur], kPf * 4));
    }
  }
  CK(cudaStreamSynchronize(sR));
  CK(cudaStreamSynchronize(s0));
  print("end", resamples, trace.h ^ deviceDigest(x[cur], kPf * 4) ^ deviceDigest(counts, kPfPoisson * 4));
  for (curandGenerator_t gen : {philox, mrg, sobol}) CKR(curandDestroyGenerator(gen));
  for (int k = 0; k < 2; ++k) {
    CK(cudaFree(x[k]));
    CK(cudaFree(noise[k]));
    CK(cudaEventDestroy(ready[k]));
    CK(cudaEventDestroy(consumed[k]));
  }
  for (void* p : {(void*)logw, (void*)w, (void*)cdf, (void*)uni, (void*)q, (void*)stats, (void*)counts})
    CK(cudaFree(p));
  CK(cudaFreeHost(hStats));
  CK(cudaEventDestroy(philoxDone));
  CK(cudaEventDestroy(philoxFree));
  CK(cudaStreamDestroy(s0));
  CK(cudaStreamDestroy(sR));
}

// ================================================================ cub_thrust_counts

constexpr int kKvMaxBatch = 65536, kKvKeyBits = 15, kKvKeys = 1 << kKvKeyBits;

// A batch of m (key, weight) events: half of them among 256 hot keys.
__global__ void kvBatch(uint32_t* keys, uint32_t* vals, int m, uint32_t step) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  const uint32_t h = hash32(step * 2654435761u + uint32_t(j) * 40503u + 1u);
  keys[j] = (h & 1023u) < 512u ? (h >> 10) % 256u : (h >> 10) % uint32_t(kKvKeys);
  vals[j] = 1u + (h >> 28);
}
struct HeavyPred {
  uint32_t threshold;
  __host__ __device__ bool operator()(uint32_t v) const { return v >= threshold; }
};
struct Halve {
  __host__ __device__ uint32_t operator()(uint32_t v) const { return v >> 1; }
};
struct ZeroCount {
  __host__ __device__ bool operator()(const thrust::tuple<uint32_t, uint32_t>& t) const {
    return thrust::get<1>(t) == 0u;
  }
};

// thrust's temporary storage from a cache: freed blocks are kept and handed
// out again (the same addresses step after step), freed at the end.
struct CachedAllocator {
  using value_type = char;
  std::multimap<std::ptrdiff_t, char*> freeBlocks;
  std::map<char*, std::ptrdiff_t> inUse;
  int mallocs = 0, hits = 0;
  char* allocate(std::ptrdiff_t bytes) {
    auto it = freeBlocks.lower_bound(bytes);
    char* p = nullptr;
    std::ptrdiff_t size = bytes;
    if (it != freeBlocks.end()) {
      size = it->first;
      p = it->second;
      freeBlocks.erase(it);
      ++hits;
    } else {
      CK(cudaMalloc(&p, size_t(std::max<std::ptrdiff_t>(bytes, 1))));
      ++mallocs;
    }
    inUse.emplace(p, size);
    return p;
  }
  void deallocate(char* p, size_t) {
    auto it = inUse.find(p);
    if (it == inUse.end()) {
      std::fprintf(stderr, "cub_thrust_counts: unknown block freed\n");
      std::exit(1);
    }
    freeBlocks.emplace(it->second, p);
    inUse.erase(it);
  }
  void release() {
    for (auto& kv : freeBlocks) CK(cudaFree(kv.second));
    freeBlocks.clear();
  }
};

// A streaming counter of keyed events: every step a batch of 20k..65k events
// is generated, sorted by cub::DeviceRadixSort and reduced by
// DeviceReduce::ReduceByKey, both in one temporary buffer that is grown when
// a size query asks for more; the number of distinct keys comes back and the
// batch is merged into a sorted table by thrust (merge_by_key, then
// reduce_by_key) with a caching allocator. Every 50 steps the counts decay
// and zero entries are removed (remove_if on a zip). Heavy hitters are
// selected by DeviceSelect::If with a threshold the host doubles or halves
// from the count read back.
void cubThrustCounts() {
  cudaStream_t s = nonBlockingStream();
  CachedAllocator alloc;
  const auto policy = thrust::cuda::par(alloc).on(s);
  uint32_t *keysIn, *valsIn, *keysOut, *valsOut, *uK, *uV, *tK, *tV, *mK, *mV, *sel;
  int* dCounts;
  int* hCounts;
  for (uint32_t** p : {&keysIn, &valsIn, &keysOut, &valsOut, &uK, &uV, &mK, &mV})
    CK(cudaMalloc(p, kKvMaxBatch * 4));
  CK(cudaMalloc(&tK, kKvKeys * 4));
  CK(cudaMalloc(&tV, kKvKeys * 4));
  CK(cudaMalloc(&sel, kKvKeys * 4));
  CK(cudaMalloc(&dCounts, 2 * 4));
  CK(cudaMallocHost(&hCounts, 2 * 4));
  void* temp = nullptr;
  size_t tempCap = 0;
  int tempGrows = 0;
  auto ensureTemp = [&](size_t bytes) {
    if (bytes <= tempCap && temp) return;
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(temp));
    tempCap = std::max<size_t>(bytes + bytes / 4, 256);
    CK(cudaMalloc(&temp, tempCap));
    ++tempGrows;
  };
  int T = 0;
  uint32_t threshold = 64;
  Digest trace;
  for (int i = 0; i < g_iters; ++i) {
    const int m = 20000 + int(hash32(uint32_t(i) + 12345u) % 45536u);
    kvBatch<<<blocksFor(m, 256), 256, 0, s>>>(keysIn, valsIn, m, uint32_t(i));
    CKL();
    size_t bytes = 0;
    CK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keysIn, keysOut, valsIn, valsOut, m, 0, kKvKeyBits, s));
    ensureTemp(bytes);
    bytes = tempCap;
    CK(cub::DeviceRadixSort::SortPairs(temp, bytes, keysIn, keysOut, valsIn, valsOut, m, 0, kKvKeyBits, s));
    bytes = 0;
    CK(cub::DeviceReduce::ReduceByKey(nullptr, bytes, keysOut, uK, valsOut, uV, dCounts, ::cuda::std::plus<uint32_t>{},
                                      m, s));
    ensureTemp(bytes);
    bytes = tempCap;
    CK(cub::DeviceReduce::ReduceByKey(temp, bytes, keysOut, uK, valsOut, uV, dCounts, ::cuda::std::plus<uint32_t>{}, m,
                                      s));
    CK(cudaMemcpyAsync(hCounts, dCounts, 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const int runs = hCounts[0];
    if (runs <= 0 || runs > kKvKeys) {
      std::fprintf(stderr, "cub_thrust_counts: %d runs\n", runs);
      std::exit(1);
    }
    // Merge into the table (thrust waits for its stream at the end of each call).
    const auto merged = thrust::merge_by_key(policy, tK, tK + T, uK, uK + runs, tV, uV, mK, mV);
    const int mergedSize = int(merged.first - mK);
    const auto reduced = thrust::reduce_by_key(policy, mK, mK + mergedSize, mV, tK, tV);
    T = int(reduced.first - tK);
    if (i % 50 == 49) {
      thrust::transform(policy, tV, tV + T, tV, Halve{});
      const auto zipBegin = thrust::make_zip_iterator(thrust::make_tuple(tK, tV));
      const auto zipEnd = thrust::remove_if(policy, zipBegin, zipBegin + T, ZeroCount{});
      T = int(zipEnd - zipBegin);
    }
    bytes = 0;
    CK(cub::DeviceSelect::If(nullptr, bytes, tV, sel, dCounts + 1, T, HeavyPred{threshold}, s));
    ensureTemp(bytes);
    bytes = tempCap;
    CK(cub::DeviceSelect::If(temp, bytes, tV, sel, dCounts + 1, T, HeavyPred{threshold}, s));
    CK(cudaMemcpyAsync(hCounts + 1, dCounts + 1, 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const int heavy = hCounts[1];
    trace.add(uint64_t(uint32_t(m)) << 32 | uint32_t(runs));
    trace.add(uint64_t(uint32_t(T)) << 32 | uint32_t(heavy));
    trace.add(threshold);
    if (heavy > 64) threshold *= 2;
    else if (heavy < 8 && threshold > 64) threshold /= 2;
    if (i % 25 == 24)
      std::printf("step %d batch %d runs %d table %d heavy %d threshold %u\n", i, m, runs, T, heavy, threshold);
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      print("table", i, deviceDigest(tK, size_t(T) * 4) ^ deviceDigest(tV, size_t(T) * 4));
      print("heavy", i, heavy > 0 ? deviceDigest(sel, size_t(heavy) * 4) : 0);
    }
  }
  CK(cudaStreamSynchronize(s));
  std::printf("end table %d allocator mallocs %d hits %d temp grows %d\n", T, alloc.mallocs, alloc.hits, tempGrows);
  print("end", T, trace.h ^ deviceDigest(tK, size_t(T) * 4) ^ deviceDigest(tV, size_t(T) * 4));
  alloc.release();
  for (void* p : {(void*)keysIn, (void*)valsIn, (void*)keysOut, (void*)valsOut, (void*)uK, (void*)uV, (void*)tK,
                  (void*)tV, (void*)mK, (void*)mV, (void*)sel, (void*)dCounts, temp})
    CK(cudaFree(p));
  CK(cudaFreeHost(hCounts));
  CK(cudaStreamDestroy(s));
}

constexpr Scenario kScenarios[] = {
    {"sparse_adaptive", sparseAdaptive}, {"dense_newton", denseNewton},       {"eigen_batched", eigenBatched},
    {"lt_mlp", ltMlp},                   {"nvrtc_jit", nvrtcJit},             {"fft_two_streams", fftTwoStreams},
    {"curand_filter", curandFilter},     {"cub_thrust_counts", cubThrustCounts},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
