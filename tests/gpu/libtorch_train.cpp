// libtorch_train: training and inference loops written against libtorch's C++
// API, no Python: the other kind of PyTorch program graft is preloaded into.
// Its CPU work per op is a fraction of Python's, so launches come several
// times faster than in workloads.py, and the C++ optimizers step parameter by
// parameter (no foreach kernels).
//
//   libtorch_train CASE [--steps N] [--warmup W] [--losses FILE] [--json FILE]
//   libtorch_train --list
//
// Cases (deterministic algorithms, fixed seeds; one float32 hex per step in
// --losses, the same under graft as eagerly):
//   mlp        Linear/LayerNorm/GELU/Dropout, AdamW, cross entropy, no sync
//   mlp_item   the same with loss.item() every step
//   cnn        convolutions (stride-2 downsampling), BatchNorm, SGD with
//              Nesterov momentum and weight decay, .item() every 10th step
//   lastbatch  the MLP whose every 7th batch is smaller, with an eval pass
//              (no_grad, eval mode, accuracy read back) every 25 steps
//   infer      inference under InferenceMode, logits' sum read back every step
//   threads    two threads, each training its own MLP on its own pooled
//              stream at the same time (backward on the autograd engine's
//              device thread for both); losses of thread 0, then thread 1
//
// --json: {"case", "steps", "ms_per_step"} where ms_per_step times the steps
// after the warm-up, synchronized at both ends. Exit: 0 ok, 2 usage, 77 no
// CUDA device.
#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

struct Options {
  std::string name;
  int steps = 300;
  int warmup = 30;
  std::string lossesPath;
  std::string jsonPath;
};

constexpr int64_t kIn = 256, kHidden = 512, kClasses = 16, kBatch = 64, kBatches = 8;

nn::Sequential makeMlp(int depth, double dropout) {
  nn::Sequential s;
  int64_t width = kIn;
  for (int i = 0; i < depth; ++i) {
    s->push_back(nn::Linear(width, kHidden));
    s->push_back(nn::LayerNorm(nn::LayerNormOptions({kHidden})));
    s->push_back(nn::GELU());
    if (dropout > 0) s->push_back(nn::Dropout(dropout));
    width = kHidden;
  }
  s->push_back(nn::Linear(width, kClasses));
  s->to(torch::kCUDA);
  return s;
}

// Fixed synthetic data on the device: kBatches batches of inputs and labels.
struct Data {
  torch::Tensor x, y;
};
Data makeData(std::vector<int64_t> sampleShape) {
  std::vector<int64_t> shape = {kBatches, kBatch};
  shape.insert(shape.end(), sampleShape.begin(), sampleShape.end());
  auto cuda = torch::TensorOptions().device(torch::kCUDA);
  return {torch::randn(shape, cuda), torch::randint(kClasses, {kBatches, kBatch}, cuda.dtype(torch::kLong))};
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Collects one value per step, on the device unless the loop reads it anyway.
struct Losses {
  std::vector<torch::Tensor> onDevice;
  std::vector<float> onHost;
  void add(const torch::Tensor& loss) { onDevice.push_back(loss.detach().reshape({1})); }
  void addRead(float v) { onHost.push_back(v); }
  std::vector<float> values() const {
    if (onDevice.empty()) return onHost;
    torch::Tensor all = torch::cat(onDevice).to(torch::kCPU, torch::kFloat);
    return std::vector<float>(all.data_ptr<float>(), all.data_ptr<float>() + all.numel());
  }
};

// Runs `step(i)` for warm-up plus timed steps; returns ms per timed step.
double timedLoop(const Options& o, const std::function<void(int)>& step) {
  for (int i = 0; i < o.warmup; ++i) step(i);
  torch::cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = o.warmup; i < o.warmup + o.steps; ++i) step(i);
  torch::cuda::synchronize();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / o.steps;
}

double mlpCase(const Options& o, bool readEveryStep, std::vector<float>* out) {
  nn::Sequential model = makeMlp(4, 0.1);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  Data d = makeData({kIn});
  Losses losses;
  const double ms = timedLoop(o, [&](int i) {
    torch::Tensor logits = model->forward(d.x[i % kBatches]);
    torch::Tensor loss = F::cross_entropy(logits, d.y[i % kBatches]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (readEveryStep)
      losses.addRead(loss.item<float>());
    else
      losses.add(loss);
  });
  *out = losses.values();
  return ms;
}

double cnnCase(const Options& o, std::vector<float>* out) {
  auto conv = [](int64_t in, int64_t outCh, int64_t stride) {
    return nn::Conv2d(nn::Conv2dOptions(in, outCh, 3).stride(stride).padding(1).bias(false));
  };
  nn::Sequential model(conv(3, 32, 1), nn::BatchNorm2d(32), nn::ReLU(), conv(32, 64, 2), nn::BatchNorm2d(64),
                       nn::ReLU(), conv(64, 64, 2), nn::BatchNorm2d(64), nn::ReLU(), nn::Flatten(),
                       nn::Linear(64 * 8 * 8, kClasses));
  model->to(torch::kCUDA);
  torch::optim::SGD opt(model->parameters(),
                        torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(5e-4));
  Data d = makeData({3, 32, 32});
  Losses losses;
  const double ms = timedLoop(o, [&](int i) {
    torch::Tensor loss = F::cross_entropy(model->forward(d.x[i % kBatches]), d.y[i % kBatches]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.add(loss);
    if (i % 10 == 9) (void)loss.item<float>();
  });
  *out = losses.values();
  return ms;
}

double lastBatchCase(const Options& o, std::vector<float>* out) {
  nn::Sequential model = makeMlp(3, 0.1);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  Data d = makeData({kIn});
  Losses losses;
  const double ms = timedLoop(o, [&](int i) {
    const int64_t rows = i % 7 == 6 ? kBatch - 16 : kBatch;
    torch::Tensor x = d.x[i % kBatches].narrow(0, 0, rows), y = d.y[i % kBatches].narrow(0, 0, rows);
    torch::Tensor loss = F::cross_entropy(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.add(loss);
    if (i % 25 == 24) {
      torch::NoGradGuard noGrad;
      model->eval();
      torch::Tensor correct = model->forward(d.x[(i + 1) % kBatches]).argmax(1).eq(d.y[(i + 1) % kBatches]).sum();
      losses.add(correct.to(torch::kFloat));
      model->train();
    }
  });
  *out = losses.values();
  return ms;
}

double inferCase(const Options& o, std::vector<float>* out) {
  nn::Sequential model = makeMlp(6, 0.0);
  model->eval();
  Data d = makeData({kIn});
  Losses losses;
  torch::InferenceMode inference;
  const double ms = timedLoop(o, [&](int i) {
    torch::Tensor logits = model->forward(d.x[i % kBatches] * (1.0 + 0.01 * (i % 5)));
    losses.addRead(logits.softmax(1).amax(1).sum().item<float>());
  });
  *out = losses.values();
  return ms;
}

double threadsCase(const Options& o, std::vector<float>* out) {
  constexpr int kThreads = 2;
  // Built on this thread, in order: initialization draws from the global
  // generators, which the threads would otherwise race for.
  std::vector<nn::Sequential> models;
  std::vector<Data> data;
  for (int t = 0; t < kThreads; ++t) {
    models.push_back(makeMlp(3 + t, 0.0));
    data.push_back(makeData({kIn}));
  }
  torch::cuda::synchronize();
  std::vector<std::vector<float>> results(kThreads);
  std::vector<double> ms(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      c10::cuda::CUDAStreamGuard onStream(c10::cuda::getStreamFromPool());
      torch::optim::AdamW opt(models[t]->parameters(), torch::optim::AdamWOptions(1e-3));
      Losses losses;
      ms[t] = timedLoop(o, [&](int i) {
        torch::Tensor loss = F::cross_entropy(models[t]->forward(data[t].x[i % kBatches]), data[t].y[i % kBatches]);
        opt.zero_grad();
        loss.backward();
        opt.step();
        losses.add(loss);
      });
      results[t] = losses.values();
    });
  }
  for (auto& th : pool) th.join();
  out->clear();
  for (auto& r : results) out->insert(out->end(), r.begin(), r.end());
  return std::max(ms[0], ms[1]);
}

struct Case {
  const char* name;
  std::function<double(const Options&, std::vector<float>*)> run;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"mlp", [](const Options& o, std::vector<float>* v) { return mlpCase(o, false, v); }},
      {"mlp_item", [](const Options& o, std::vector<float>* v) { return mlpCase(o, true, v); }},
      {"cnn", cnnCase},
      {"lastbatch", lastBatchCase},
      {"infer", inferCase},
      {"threads", threadsCase},
  };
  return all;
}

int usage() {
  std::fprintf(stderr, "usage: libtorch_train CASE [--steps N] [--warmup W] [--losses FILE] [--json FILE] | --list\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  if (std::strcmp(argv[1], "--list") == 0) {
    for (const Case& c : cases()) std::printf("%s\n", c.name);
    return 0;
  }
  Options o;
  o.name = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--steps") o.steps = std::atoi(v);
    else if (a == "--warmup") o.warmup = std::atoi(v);
    else if (a == "--losses") o.lossesPath = v;
    else if (a == "--json") o.jsonPath = v;
    else return usage();
  }
  if (o.steps < 1 || o.warmup < 0) return usage();
  const Case* chosen = nullptr;
  for (const Case& c : cases())
    if (o.name == c.name) chosen = &c;
  if (!chosen) {
    std::fprintf(stderr, "libtorch_train: unknown case '%s' (--list)\n", o.name.c_str());
    return 2;
  }
  if (!torch::cuda::is_available()) {
    std::printf("libtorch_train: no CUDA device\n");
    return 77;
  }
  torch::manual_seed(0);
  at::globalContext().setDeterministicAlgorithms(true, false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);

  std::vector<float> values;
  const double ms = chosen->run(o, &values);
  if (!o.lossesPath.empty()) {
    FILE* f = std::fopen(o.lossesPath.c_str(), "w");
    if (!f) return 1;
    for (float v : values) std::fprintf(f, "%08x\n", bitsOf(v));
    std::fclose(f);
  }
  if (!o.jsonPath.empty()) {
    FILE* f = std::fopen(o.jsonPath.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "{\"case\": \"%s\", \"steps\": %d, \"ms_per_step\": %.6f}\n", o.name.c_str(), o.steps, ms);
    std::fclose(f);
  }
  std::printf("%s: %d steps, %.4f ms/step, last value %.6g\n", o.name.c_str(), o.steps, ms,
              values.empty() ? 0.0 : double(values.back()));
  return 0;
}
