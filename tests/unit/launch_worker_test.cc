// LaunchWorker: jobs run once each, in queue order, whether the worker is
// spinning, polling or asleep when they are queued; drain() sees them all
// done; a failed job stops the worker until the caller takes over.
#include "graph/launch_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace {

using graft::graph::LaunchWorker;

struct Job {
  uint64_t id = 0;
  int result = 0;     // what the run function returns
  bool gated = false;  // waits for Recorder::gate before it runs
};

struct Recorder {
  // Written by whichever thread runs the job (one at a time), read after drain().
  std::vector<uint64_t> ran;
  std::vector<std::thread::id> by;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};  // two jobs ran at once
  std::chrono::microseconds busy{0};    // how long each job keeps its runner busy
  std::atomic<bool> gate{false};
  int run(Job& j) {
    while (j.gated && !gate.load()) std::this_thread::yield();
    if (running.fetch_add(1) != 0) overlapped = true;
    for (const auto until = std::chrono::steady_clock::now() + busy; std::chrono::steady_clock::now() < until;) {
    }
    ran.push_back(j.id);
    by.push_back(std::this_thread::get_id());
    running.fetch_sub(1);
    return j.result;
  }
};

// The worker thread never exits (libgraft's lives as long as the process), so
// each test's worker and what it writes to are left alive.
struct Harness {
  Recorder& rec = *new Recorder;
  LaunchWorker<Job>& w;  // not started
  explicit Harness(unsigned pollMicros, unsigned spinMicros = 200)
      : w(*new LaunchWorker<Job>([r = &rec](Job& j) { return r->run(j); }, nullptr, pollMicros, spinMicros)) {}
};

void queueJob(LaunchWorker<Job>& w, uint64_t id, int result = 0, bool gated = false) {
  Job* slot = w.slot();
  ASSERT_NE(slot, nullptr);
  slot->id = id;
  slot->result = result;
  slot->gated = gated;
  w.queue();
}

// Waits (without drain(), which would wake the worker) until every queued job
// ran, for at most 10 s.
bool becomesIdleUnwoken(LaunchWorker<Job>& w) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!w.idle() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  return w.idle();
}

std::vector<uint64_t> upTo(uint64_t n) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// Bursts of jobs with pauses that leave the worker spinning (none), polling
// (1 ms) and asleep until woken (30 ms > the 20 ms of polling): each job runs
// exactly once, in order.
void runsEveryJobInOrder(unsigned pollMicros) {
  Harness h(pollMicros);
  ASSERT_TRUE(h.w.start());
  auto& [rec, w] = h;
  uint64_t id = 0;
  const int pausesMs[] = {0, 1, 30, 0, 2, 25, 1, 0};
  for (int pause : pausesMs) {
    for (int k = 0; k < 20; ++k) queueJob(w, id++);  // more than the slots: slot() waits
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
  }
  ASSERT_TRUE(w.drain());
  EXPECT_EQ(rec.ran, upTo(id));
  EXPECT_TRUE(w.idle());
  EXPECT_GT(w.cpuSeconds(), 0.0);
}

TEST(LaunchWorker, RunsEveryJobInOrderWhilePolling) { runsEveryJobInOrder(50); }
TEST(LaunchWorker, RunsEveryJobInOrderWithoutPolling) { runsEveryJobInOrder(0); }

// After more than the polling time idle the worker sleeps until woken, and
// one queued job (no drain, nothing else to wake it) still runs.
TEST(LaunchWorker, SleepingWorkerWakesForOneJob) {
  for (unsigned poll : {50u, 0u}) {
    Harness h(poll);
    ASSERT_TRUE(h.w.start());
    auto& [rec, w] = h;
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_GE(w.stats().deepSleeps, 1u);
    queueJob(w, 7);
    ASSERT_TRUE(becomesIdleUnwoken(w)) << "a job queued to a sleeping worker did not run (poll " << poll << " us)";
    ASSERT_TRUE(w.drain());
    EXPECT_EQ(rec.ran, std::vector<uint64_t>{7});
  }
}

// A job queued while the worker polls runs without drain() (within the poll
// period), so the program's thread need not wake it.
TEST(LaunchWorker, PollingWorkerPicksUpJobUnwoken) {
  Harness h(50);
  ASSERT_TRUE(h.w.start());
  auto& [rec, w] = h;
  queueJob(w, 0);
  ASSERT_TRUE(w.drain());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the spin, inside the polling
  queueJob(w, 1);
  ASSERT_TRUE(becomesIdleUnwoken(w));
  EXPECT_EQ(rec.ran, (std::vector<uint64_t>{0, 1}));
}

// The idle worker spins only while jobs come within its spin time: after an
// idle spell longer than that (launches milliseconds apart, as from PyTorch)
// it sleeps at once instead of spinning, and it spins again once a job comes
// soon after it went idle. Every job runs either way. (Margins are wide: a
// 40 ms spin against 150 ms and 1 ms gaps.)
TEST(LaunchWorker, IdleSpinOnlyWhileJobsComeWithinTheSpin) {
  Harness h(0, 40000);
  ASSERT_TRUE(h.w.start());
  auto& rec = h.rec;  // (clang 14 cannot capture a structured binding in a lambda)
  auto& w = h.w;
  uint64_t id = 0;
  const auto queueAfter = [&](int gapMicros) {
    std::this_thread::sleep_for(std::chrono::microseconds(gapMicros));
    queueJob(w, id++);
    ASSERT_TRUE(becomesIdleUnwoken(w)) << "job " << id - 1 << " did not run";
  };
  // Thresholds leave room for a loaded machine that deschedules the worker.
  for (int k = 0; k < 6; ++k) queueAfter(1000);
  EXPECT_GE(w.stats().spinsCaught, 2u) << "jobs 1 ms apart were not caught by a 40 ms spin";
  for (int k = 0; k < 4; ++k) queueAfter(150000);
  EXPECT_GE(w.stats().spinsSkipped, 2u) << "the worker kept spinning although jobs came 150 ms apart";
  const uint64_t caught = w.stats().spinsCaught;
  for (int k = 0; k < 6; ++k) queueAfter(1000);
  EXPECT_GE(w.stats().spinsCaught, caught + 1) << "the worker did not spin again once jobs came 1 ms apart";
  ASSERT_TRUE(w.drain());
  EXPECT_EQ(rec.ran, upTo(id));
}

// With no spin time the idle worker never spins, and still runs every job.
TEST(LaunchWorker, NoSpinTimeNeverSpins) {
  Harness h(0, 0);
  ASSERT_TRUE(h.w.start());
  auto& [rec, w] = h;
  for (uint64_t k = 0; k < 5; ++k) {
    queueJob(w, k);
    ASSERT_TRUE(becomesIdleUnwoken(w));
  }
  EXPECT_EQ(w.stats().spinsCaught, 0u);
  EXPECT_EQ(rec.ran, upTo(5));
}

// The producer runs queued jobs itself when it must wait and nobody runs
// them: here the worker thread is never started, so drain() and a full
// slot() take over every job, in order, on the calling thread.
TEST(LaunchWorker, ProducerTakesOverJobsNobodyRuns) {
  Harness h(0);  // not started
  auto& [rec, w] = h;
  for (uint64_t k = 0; k < 20; ++k) queueJob(w, k);  // 20 > the 8 slots: slot() takes over
  ASSERT_TRUE(w.drain());
  EXPECT_EQ(rec.ran, upTo(20));
  EXPECT_EQ(w.stats().takenOver, 20u);
  for (const std::thread::id& t : rec.by) EXPECT_EQ(t, std::this_thread::get_id());
  EXPECT_TRUE(w.idle());
}

// A job that fails while the producer runs it halts the queue as a failure on
// the worker does: drain() reports it, the rest is the caller's, and after
// finish() new jobs run.
TEST(LaunchWorker, FailureInATakenOverJobHandsTheRestToTheCaller) {
  Harness h(0);  // not started
  auto& [rec, w] = h;
  queueJob(w, 0);
  queueJob(w, 1, 42);
  queueJob(w, 2);
  ASSERT_FALSE(w.drain());
  EXPECT_EQ(w.failure(), 42);
  EXPECT_EQ(w.firstUndone(), 1u);
  EXPECT_EQ(w.slot(), nullptr);
  EXPECT_EQ(rec.ran, (std::vector<uint64_t>{0, 1}));
  w.finish();
  queueJob(w, 3);
  ASSERT_TRUE(w.drain());
  EXPECT_EQ(rec.ran, (std::vector<uint64_t>{0, 1, 3}));
}

// With the worker running, producer and worker race for the jobs (the worker
// asleep, spinning or just woken when drain() comes): every job runs exactly
// once, in order, never two at a time, whoever runs it.
TEST(LaunchWorker, ProducerAndWorkerNeverRunJobsTogether) {
  for (unsigned spin : {0u, 200u}) {
    Harness h(0, spin);
    h.rec.busy = std::chrono::microseconds(20);  // wide windows for the two to collide
    ASSERT_TRUE(h.w.start());
    auto& [rec, w] = h;
    uint64_t id = 0;
    for (int round = 0; round < 300; ++round) {
      for (int k = 0; k < round % 11; ++k) queueJob(w, id++);
      if (round % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(round % 7 * 40));
      if (round % 2 == 0) {
        ASSERT_TRUE(w.drain());
      }
    }
    ASSERT_TRUE(w.drain());
    EXPECT_EQ(rec.ran, upTo(id));
    EXPECT_FALSE(rec.overlapped.load());
    EXPECT_GT(w.stats().takenOver, 0u) << "the producer never ran a job itself (spin " << spin << " us)";
  }
}

// A failed job halts the worker: drain() says so, the jobs from the failed one
// on are left to the caller, and after finish() the worker runs new jobs.
TEST(LaunchWorker, FailureHandsTheRestToTheCaller) {
  Harness h(50);
  ASSERT_TRUE(h.w.start());
  auto& [rec, w] = h;
  queueJob(w, 0, 0, true);  // held until all three are queued (no slot() after the failure)
  queueJob(w, 1, 42);
  queueJob(w, 2);
  rec.gate = true;
  ASSERT_FALSE(w.drain());
  EXPECT_EQ(w.failure(), 42);
  EXPECT_EQ(w.firstUndone(), 1u);
  EXPECT_EQ(w.queuedCount(), 3u);
  EXPECT_EQ(w.slot(), nullptr);  // halted until the caller takes over
  EXPECT_EQ(rec.ran, (std::vector<uint64_t>{0, 1}));
  w.finish();
  queueJob(w, 3);
  ASSERT_TRUE(w.drain());
  EXPECT_EQ(rec.ran, (std::vector<uint64_t>{0, 1, 3}));
}

}  // namespace
