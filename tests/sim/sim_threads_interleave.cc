// sim_threads_interleave: threads that launch at the same time, each on its
// own non-blocking stream and buffers, in an order the test controls. One op
// at a time holds the turn; after each op the turn passes as --order says:
//   random     to a thread drawn from a seeded generator: the order of ops
//              across threads never repeats (threads that run at once, as a
//              multi-threaded server's): graft must rest instead of recording
//              every op (reason threads_interleave), values right;
//   bursts     to another thread drawn from the generator after a run of 8
//              to 31 ops (drawn too): longer runs, as threads in tight loops
//              contending for a lock issue them; graft must rest as well;
//   alternate  to the next thread, every op: the order repeats exactly, so
//              graft's graphs still apply;
//   handoff    to the next thread after a whole iteration of --ops ops (as a
//              forward pass handing over to the autograd thread's backward
//              pass): the order repeats, graphs apply.
// Every thread's ops form one dependent chain (x = x + k), checked at the end
// and every --check-every iterations by a stream synchronize and a
// synchronous copy. --solo S: after the threads end, the main thread runs S
// iterations of the same loop alone (graft must go back to its graphs once
// the threads stop, not rest on).
//   sim_threads_interleave [--order random|bursts|alternate|handoff] [--threads N]
//                          [--iterations M] [--ops K] [--check-every C] [--solo S]
//                          [--expect-graphs PCT]
// Exit 1 on a wrong value or (--expect-graphs) too few effects from graphs.
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

enum class Order { Random, Bursts, Alternate, Handoff };

// Whose turn it is to issue the next op.
class Turns {
 public:
  Turns(Order order, int threads, uint64_t opsPerIteration)
      : order_(order), threads_(threads), ops_per_iteration_(opsPerIteration), generator_(12345) {}

  void await(int thread) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return turn_ == thread; });
  }
  // Called by the thread holding the turn after its op (`finished`: it has
  // issued its last op).
  void pass(int thread, bool finished) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished) done_[thread] = true;
    ++ops_;
    int next = thread;
    switch (order_) {
      case Order::Random: next = int(generator_() % uint64_t(threads_)); break;
      case Order::Bursts:
        if (--burst_left_ == 0) {
          next = threads_ > 1 ? int((uint64_t(thread) + 1 + generator_() % uint64_t(threads_ - 1)) % threads_) : thread;
          burst_left_ = 8 + generator_() % 24;
        }
        break;
      case Order::Alternate: next = (thread + 1) % threads_; break;
      case Order::Handoff:
        if (ops_ % ops_per_iteration_ == 0) next = (thread + 1) % threads_;
        break;
    }
    for (int tries = 0; done_[next] && tries < threads_; ++tries) next = (next + 1) % threads_;
    turn_ = next;
    changed_.notify_all();
  }

 private:
  Order order_;
  int threads_;
  uint64_t ops_per_iteration_;
  std::mt19937_64 generator_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int turn_ = 0;
  uint64_t ops_ = 0;
  uint64_t burst_left_ = 8;
  bool done_[8] = {};
};

struct Worker {
  const simtest::Driver* drv;
  CUcontext ctx;
  CUfunction add;
  Turns* turns;
  int id;
  uint64_t iterations, opsPerIteration, checkEvery;
  bool ok = true;

  void run() {
    const simtest::DriverApi& cu = drv->plain;
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    CUstream s;
    SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
    uint64_t expected = 0, issued = 0;
    for (uint64_t it = 1; it <= iterations; ++it) {
      for (uint64_t k = 0; k < opsPerIteration; ++k) {
        if (turns) turns->await(id);
        // x and y take turns being the destination; the value chains through both.
        const uint64_t add1 = it * 7 + k + uint64_t(id);
        const bool toY = issued++ % 2 == 0;
        SIM_CHECK(toY ? simtest::launchAdd(cu, add, y, x, add1, s) : simtest::launchAdd(cu, add, x, y, add1, s));
        expected += add1;
        const bool last = it == iterations && k + 1 == opsPerIteration;
        if (k + 1 == opsPerIteration && (it % checkEvery == 0 || last)) {
          uint64_t got = 0;
          SIM_CHECK(cu.cuStreamSynchronize(s));  // the copy is ordered on the legacy stream only
          SIM_CHECK(cu.cuMemcpyDtoH(&got, toY ? y : x, 8));
          if (got != expected) {
            std::printf("sim_threads_interleave: thread %d iteration %llu: %llu, expected %llu\n", id,
                        (unsigned long long)it, (unsigned long long)got, (unsigned long long)expected);
            ok = false;
          }
        }
        if (turns) turns->pass(id, last);
      }
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
  }
};

}  // namespace

int main(int argc, char** argv) {
  Order order = Order::Random;
  int threads = 2;
  uint64_t iterations = 400, ops = 8, checkEvery = 50, expectPct = 0, solo = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::printf("sim_threads_interleave: %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--order") {
      const std::string o = v;
      if (o == "random") order = Order::Random;
      else if (o == "bursts") order = Order::Bursts;
      else if (o == "alternate") order = Order::Alternate;
      else if (o == "handoff") order = Order::Handoff;
      else {
        std::printf("sim_threads_interleave: --order random, bursts, alternate or handoff, not '%s'\n", v);
        return 2;
      }
    } else if (a == "--threads") threads = std::atoi(v);
    else if (a == "--iterations") iterations = std::strtoull(v, nullptr, 10);
    else if (a == "--ops") ops = std::strtoull(v, nullptr, 10);
    else if (a == "--check-every") checkEvery = std::strtoull(v, nullptr, 10);
    else if (a == "--expect-graphs") expectPct = std::strtoull(v, nullptr, 10);
    else if (a == "--solo") solo = std::strtoull(v, nullptr, 10);
    else {
      std::printf("usage: sim_threads_interleave [--order random|bursts|alternate|handoff] [--threads N] "
                  "[--iterations M] [--ops K] [--check-every C] [--solo S] [--expect-graphs PCT]\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 8 || ops < 1 || checkEvery < 1) {
    std::printf("sim_threads_interleave: --threads 1..8, --ops and --check-every at least 1\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_threads_interleave", &drv, &ctx)) return rc;
  CUfunction add = simtest::libraryKernel3("sim_add_interleave");
  Turns turns(order, threads, ops);
  std::vector<Worker> workers;
  for (int t = 0; t < threads; ++t) workers.push_back({&drv, ctx, add, &turns, t, iterations, ops, checkEvery});
  std::vector<std::thread> pool;
  for (Worker& w : workers) pool.emplace_back([&w] { w.run(); });
  for (std::thread& t : pool) t.join();
  if (solo) {
    workers.push_back({&drv, ctx, add, nullptr, threads, solo, ops, checkEvery});
    workers.back().run();
  }
  SimCounters c{};
  simCounters(&c);
  bool ok = simtest::failedCalls() == 0;
  for (const Worker& w : workers) ok &= w.ok;
  std::printf("sim_threads_interleave: %d threads x %llu iterations x %llu ops, %s; effects from graphs %llu, "
              "eager %llu, graph launches %llu\n",
              threads, (unsigned long long)iterations, (unsigned long long)ops,
              ok ? "every value right" : "WRONG VALUES", (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager, (unsigned long long)c.graphLaunches);
  if (!ok) return 1;
  if (expectPct && simtest::tooFewFromGraphs("sim_threads_interleave", c, expectPct)) return 1;
  return 0;
}
