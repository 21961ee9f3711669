// traps_libs: loops over the CUDA libraries a C++ application links (cuBLAS,
// cuRAND, cuFFT) and device-side launches (dynamic parallelism), in the
// style of traps.cu (trap_common.cuh): each scenario is deterministic in
// eager and prints digests of its buffers; check_traps.py requires the same
// output under graft. Built apart from traps.cu because it links those
// libraries and needs relocatable device code (-rdc=true -lcudadevrt).
//
//   traps_libs NAME [--iters N]    one scenario (see kScenarios)
//   traps_libs --list              the scenario names
//
// The libraries carry their own copy of the CUDA runtime and launch through
// the driver with their own handles and attributes (cuBLAS uses cluster
// dimensions and programmatic serialization on Hopper), and keep state that
// changes per call (cuRAND's generator offset): what graft sees of them is
// what it sees of PyTorch's, from a C++ program.

#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>

#include "trap_common.cuh"

// A library call that must return its library's success status (all are 0).
#define CKF(call) CK_LIB(call, "cuFFT")
static_assert(CUBLAS_STATUS_SUCCESS == 0 && CURAND_STATUS_SUCCESS == 0 && CUFFT_SUCCESS == 0);

namespace {

// Floats from the words of a buffer, in [-1, 1).
__global__ void toFloat(float* dst, const uint32_t* src, int n, float scale) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = (float(src[k] >> 8) * (1.0f / 8388608.0f) - 1.0f) * scale;
}
// Folds float bits back into words (so every later step depends on them).
__global__ void foldFloat(uint32_t* dst, const float* src, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) ^ __float_as_uint(src[k]);
}
// Keeps values bounded between steps (tanh of each element).
__global__ void squash(float* x, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = tanhf(x[k]);
}

// A training-shaped loop of GEMMs: C = alpha*A*B + beta*C with alpha and beta
// changing every step (host pointer mode: scalars by value), then device
// pointer mode with the scalars in device memory, and a strided batched GEMM,
// on a non-blocking stream with a workspace set by the program.
void cublasGemm() {
  constexpr int m = 128;
  cudaStream_t s = nonBlockingStream();
  cublasHandle_t h;
  CKB(cublasCreate(&h));
  CKB(cublasSetStream(h, s));
  void* workspace = nullptr;
  CK(cudaMalloc(&workspace, 4 << 20));
  CKB(cublasSetWorkspace(h, workspace, 4 << 20));
  uint32_t *seedA = deviceBuffer(201, m * m), *seedB = deviceBuffer(202, m * m), *fold = deviceBuffer(203, m * m);
  float *A, *B, *C, *D, *scalars;
  CK(cudaMalloc(&A, m * m * 4));
  CK(cudaMalloc(&B, m * m * 4));
  CK(cudaMalloc(&C, m * m * 4));
  CK(cudaMalloc(&D, 4 * m * m * 4));
  CK(cudaMalloc(&scalars, 2 * 4));
  CK(cudaMemset(C, 0, m * m * 4));
  CK(cudaMemset(D, 0, 4 * m * m * 4));
  const int grid = (m * m + kBlock - 1) / kBlock;
  toFloat<<<grid, kBlock, 0, s>>>(A, seedA, m * m, 0.1f);
  toFloat<<<grid, kBlock, 0, s>>>(B, seedB, m * m, 0.1f);
  for (int i = 0; i < g_iters; ++i) {
    const float alpha = 1.0f + 0.001f * float(i % 17), beta = 0.5f - 0.01f * float(i % 5);
    CKB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, A, m, B, m, &beta, C, m));
    squash<<<grid, kBlock, 0, s>>>(C, m * m);
    CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &alpha, C, m, A, m, &beta, B, m));
    squash<<<grid, kBlock, 0, s>>>(B, m * m);
    const float hostScalars[2] = {alpha * 0.5f, beta};
    CK(cudaMemcpyAsync(scalars, hostScalars, sizeof hostScalars, cudaMemcpyHostToDevice, s));
    CKB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    CKB(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, m, m, m, scalars, B, m, 0, C, m, 0, scalars + 1, D,
                                  m, m * m, 4));
    squash<<<4 * grid, kBlock, 0, s>>>(D, 4 * m * m);
    foldFloat<<<grid, kBlock, 0, s>>>(fold, D + (i % 4) * m * m, m * m);
    CKL();
    CK(cudaStreamSynchronize(s));  // a sync every step, as a loop that reads a result has
    checkpoint(i, s, "fold", fold, m * m);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(fold, m * m * 4) ^ deviceDigest(C, m * m * 4) ^ deviceDigest(D, 4 * m * m * 4));
  CKB(cublasDestroy(h));
}

// The same without a sync in the step: alpha changes every step, the host
// never waits until a checkpoint.
void cublasNoSync() {
  constexpr int m = 96;
  cudaStream_t s = nonBlockingStream();
  cublasHandle_t h;
  CKB(cublasCreate(&h));
  CKB(cublasSetStream(h, s));
  uint32_t *seedA = deviceBuffer(204, m * m), *fold = deviceBuffer(205, m * m);
  float *A, *B, *C;
  CK(cudaMalloc(&A, m * m * 4));
  CK(cudaMalloc(&B, m * m * 4));
  CK(cudaMalloc(&C, m * m * 4));
  const int grid = (m * m + kBlock - 1) / kBlock;
  toFloat<<<grid, kBlock, 0, s>>>(A, seedA, m * m, 0.2f);
  toFloat<<<grid, kBlock, 0, s>>>(B, fold, m * m, 0.2f);
  for (int i = 0; i < g_iters; ++i) {
    const float alpha = 1.0f - 0.002f * float(i % 11), beta = 0.0f;
    for (int layer = 0; layer < 4; ++layer) {
      CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, layer % 2 ? C : B, m, A, m, &beta,
                      layer % 2 ? B : C, m));
      squash<<<grid, kBlock, 0, s>>>(layer % 2 ? B : C, m * m);
    }
    foldFloat<<<grid, kBlock, 0, s>>>(fold, B, m * m);
    CKL();
    checkpoint(i, s, "fold", fold, m * m);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(fold, m * m * 4) ^ deviceDigest(B, m * m * 4));
  CKB(cublasDestroy(h));
}

// cuRAND's host API: a Philox generator (its offset advances with every
// call, a new kernel argument each time) and an XORWOW generator (state in
// device memory, updated in place), on the program's stream.
void curandGenerate() {
  constexpr int n = kN;
  cudaStream_t s = nonBlockingStream();
  curandGenerator_t philox, xorwow;
  CKR(curandCreateGenerator(&philox, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CKR(curandCreateGenerator(&xorwow, CURAND_RNG_PSEUDO_XORWOW));
  CKR(curandSetPseudoRandomGeneratorSeed(philox, 1234));
  CKR(curandSetPseudoRandomGeneratorSeed(xorwow, 5678));
  CKR(curandSetStream(philox, s));
  CKR(curandSetStream(xorwow, s));
  uint32_t *r1 = deviceBuffer(206), *r2 = deviceBuffer(207), *a = deviceBuffer(208);
  float* u = nullptr;
  CK(cudaMalloc(&u, n * 4));
  for (int i = 0; i < g_iters; ++i) {
    CKR(curandGenerate(philox, r1, n));
    mix<<<kGrid, kBlock, 0, s>>>(a, r1, n, uint32_t(i));
    CKR(curandGenerate(xorwow, r2, n));
    CKR(curandGenerateNormal(philox, u, n, 0.0f, 1.0f));
    foldFloat<<<kGrid, kBlock, 0, s>>>(a, u, n);
    mix<<<kGrid, kBlock, 0, s>>>(a, r2, n, uint32_t(i) + 1);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, n * 4));
  CKR(curandDestroyGenerator(philox));
  CKR(curandDestroyGenerator(xorwow));
}

// cuFFT: a batched complex-to-complex forward and inverse transform every
// step, with the program's kernels between them; and a real-to-complex plan.
__global__ void scaleComplex(cufftComplex* x, int n, float scale, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    x[k].x = tanhf(x[k].x * scale + float(salt % 7) * 1e-3f);
    x[k].y = tanhf(x[k].y * scale);
  }
}
void cufftRoundTrip() {
  constexpr int len = 1024, batch = 8, n = len * batch;
  cudaStream_t s = nonBlockingStream();
  cufftHandle c2c, r2c;
  CKF(cufftPlan1d(&c2c, len, CUFFT_C2C, batch));
  CKF(cufftPlan1d(&r2c, len, CUFFT_R2C, batch));
  CKF(cufftSetStream(c2c, s));
  CKF(cufftSetStream(r2c, s));
  uint32_t *seed = deviceBuffer(209, 2 * n), *fold = deviceBuffer(210, 2 * n);
  cufftComplex *x, *y;
  float* real = nullptr;
  CK(cudaMalloc(&x, n * sizeof(cufftComplex)));
  CK(cudaMalloc(&y, (len / 2 + 1) * batch * sizeof(cufftComplex)));
  CK(cudaMalloc(&real, n * 4));
  const int grid = (2 * n + kBlock - 1) / kBlock;
  toFloat<<<grid, kBlock, 0, s>>>(reinterpret_cast<float*>(x), seed, 2 * n, 1.0f);
  for (int i = 0; i < g_iters; ++i) {
    CKF(cufftExecC2C(c2c, x, x, CUFFT_FORWARD));
    scaleComplex<<<(n + kBlock - 1) / kBlock, kBlock, 0, s>>>(x, n, 1.0f / len, uint32_t(i));
    CKF(cufftExecC2C(c2c, x, x, CUFFT_INVERSE));
    scaleComplex<<<(n + kBlock - 1) / kBlock, kBlock, 0, s>>>(x, n, 0.5f, uint32_t(i) + 1);
    toFloat<<<(n + kBlock - 1) / kBlock, kBlock, 0, s>>>(real, fold, n, 1.0f);
    CKF(cufftExecR2C(r2c, real, y));
    foldFloat<<<grid, kBlock, 0, s>>>(fold, reinterpret_cast<const float*>(x), 2 * n);
    foldFloat<<<(len + 2) * batch / kBlock + 1, kBlock, 0, s>>>(fold, reinterpret_cast<const float*>(y),
                                                                  (len + 2) * batch);
    CKL();
    checkpoint(i, s, "fold", fold, 2 * n);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(fold, 2 * n * 4));
  CKF(cufftDestroy(c2c));
  CKF(cufftDestroy(r2c));
}

// Dynamic parallelism: a parent kernel launches child grids from the device
// (into the tail-launch stream, which runs them after the parent finishes,
// and into a fire-and-forget stream), the count depending on the data.
__global__ void childAdd(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) + src[(k * 5 + 1) % n] + salt;
}
__global__ void childXor(uint32_t* dst, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] ^= salt * 2654435761u + uint32_t(k);
}
__global__ void parent(uint32_t* a, uint32_t* b, const uint32_t* c, int n, uint32_t salt) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int children = 1 + int(c[salt % n] % 3);
  // Fire-and-forget children run concurrently with each other: each touches its own buffer.
  childXor<<<n / 128, 128, 0, cudaStreamFireAndForget>>>(b, n, salt);
  for (int k = 0; k < children; ++k) childAdd<<<n / 128, 128, 0, cudaStreamTailLaunch>>>(a, c, n, salt + k);
}
void dynamicParallelism() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(211), *b = deviceBuffer(212), *c = deviceBuffer(213);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(c, a, kN, uint32_t(i));
    parent<<<1, 32, 0, s>>>(a, b, c, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(c, b, kN, uint32_t(i) + 1);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

constexpr Scenario kScenarios[] = {
    {"cublas_gemm", cublasGemm},         {"cublas_nosync", cublasNoSync},
    {"curand_generate", curandGenerate}, {"cufft_round_trip", cufftRoundTrip},
    {"dynamic_parallelism", dynamicParallelism},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
