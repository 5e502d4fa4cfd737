// The busy-kernel executor (gpu::CudaKernelExecutor) and the completion
// thread it shares with the libtorch CUDA executor (gpu::EventCompleter).
//
// CudaRuntimeTest runs everywhere the CUDA toolkit is (label cuda): without a
// device the CUDA runtime's answer and the executor's start-up error must say
// why. CudaKernelExecutorGpuTest needs a device (label gpu) and skips
// without one: exactly-once reports in launch order, concurrent launches,
// back-to-back batches with their idle gaps timed, the destructor draining,
// and a Runtime serving on the executor. The only time bounds are loose
// sanity bounds on the calibration (a factor of two), never a speed claim.
#include "symphony/gpu/kernel_executor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/runtime_support.hpp"
#include "support/test_support.hpp"
#include "symphony/gpu/cuda_check.hpp"
#include "symphony/runtime/runtime.hpp"

namespace symphony {
namespace {

using gpu::CudaKernelExecutor;

// Records every completion; waits for a count with a timeout.
class RecordingPort final : public CompletionPort {
 public:
  void report(BatchCompletion c) override {
    std::lock_guard<std::mutex> lock(mu_);
    got_.push_back(std::move(c));
    cv_.notify_all();
  }
  bool wait_for(std::size_t n, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return got_.size() >= n; });
  }
  std::vector<BatchCompletion> completions() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<BatchCompletion> got_;
};

ExecBatch batch(BatchId id, Duration length) {
  ExecBatch b;
  b.batch = id;
  b.model = 0;
  b.gpu = 0;
  b.size = 1;
  b.dispatched_at = SteadyClock{}.now();
  b.exec = b.dispatched_at;
  b.predicted = length;
  b.exec_deadline = TimePoint::infinite();
  return b;
}

TEST(CudaRuntimeTest, DeviceCountSaysWhyItIsZero) {
  const gpu::DeviceCount dc = gpu::cuda_device_count();
  EXPECT_GE(dc.count, 0);
  EXPECT_EQ(dc.count == 0, !dc.error.empty()) << dc.error;
  if (dc.count == 0) {
    EXPECT_NE(dc.error.find("cudaGetDeviceCount"), std::string::npos) << dc.error;
  }
}

TEST(CudaRuntimeTest, CheckNamesTheCallTheLineAndTheError) {
  try {
    SYMPHONY_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cudaErrorInvalidValue failed at"), std::string::npos) << m;
    EXPECT_NE(m.find("cuda_kernel_executor_test.cc:"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorInvalidValue ("), std::string::npos) << m;  // name, then the text
  }
}

TEST(CudaRuntimeTest, ExecutorOnAMissingDeviceFailsSayingWhy) {
  const gpu::DeviceCount dc = gpu::cuda_device_count();
  for (int device : {dc.count, dc.count + 3, -1}) {
    try {
      CudaKernelExecutor e(device);
      FAIL() << "device " << device << " accepted";
    } catch (const std::runtime_error& ex) {
      const std::string m = ex.what();
      EXPECT_NE(m.find("CUDA device " + std::to_string(device) + " does not exist"), std::string::npos) << m;
      if (dc.count == 0) {
        EXPECT_NE(m.find(dc.error), std::string::npos) << m;  // the runtime's reason
      }
    }
  }
}

class CudaKernelExecutorGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const gpu::DeviceCount dc = gpu::cuda_device_count();
    if (dc.count == 0) GTEST_SKIP() << "no CUDA device: " << dc.error;
  }
};

TEST_F(CudaKernelExecutorGpuTest, CalibratesAndRunsEachBatchForAboutItsPredictedLength) {
  CudaKernelExecutor e(0);
  // An SM clock between 0.3 and 4 GHz.
  EXPECT_GT(e.cycles_per_ns(), 0.3);
  EXPECT_LT(e.cycles_per_ns(), 4.0);
  RecordingPort port;
  constexpr int kBatches = 10;
  for (int i = 0; i < kBatches; ++i) {
    e.execute(batch(static_cast<BatchId>(i), Duration::milliseconds(2)), port);
    ASSERT_TRUE(port.wait_for(static_cast<std::size_t>(i + 1)));
  }
  const gpu::CudaExecutorStats s = e.stats();
  EXPECT_EQ(s.batches, static_cast<std::uint64_t>(kBatches));
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(s.predicted, Duration::milliseconds(2 * kBatches));
  const double ratio = s.busy.to_seconds() / s.predicted.to_seconds();
  RecordProperty("busy_over_predicted", std::to_string(ratio));
  EXPECT_GT(ratio, 0.5);  // a factor-of-two sanity bound: a unit or calibration bug is orders off
  EXPECT_LT(ratio, 2.0);
  for (const BatchCompletion& c : port.completions()) EXPECT_EQ(c.status, BatchStatus::kOk) << c.error;
}

TEST_F(CudaKernelExecutorGpuTest, ReportsEveryBatchOnceInLaunchOrderFromConcurrentLaunches) {
  RecordingPort port;
  constexpr int kThreads = 4, kPerThread = 100;
  {
    CudaKernelExecutor e(0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i)
          e.execute(batch(static_cast<BatchId>(t * kPerThread + i), Duration::microseconds(20)), port);
      });
    for (auto& t : threads) t.join();
    ASSERT_TRUE(port.wait_for(kThreads * kPerThread));
    const gpu::CudaExecutorStats s = e.stats();
    EXPECT_EQ(s.batches, static_cast<std::uint64_t>(kThreads * kPerThread));
    EXPECT_EQ(s.dispatch_overheads.count(), static_cast<std::uint64_t>(kThreads * kPerThread));
    // Its parts, one each per batch; busy kernels stage nothing.
    EXPECT_EQ(s.queued.count(), s.dispatch_overheads.count());
    EXPECT_EQ(s.enqueueing.count(), s.dispatch_overheads.count());
    EXPECT_EQ(s.staging.count(), 0u);
  }
  const std::vector<BatchCompletion> got = port.completions();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kThreads * kPerThread));  // none after the destructor
  std::set<BatchId> ids;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ids.insert(got[i].batch);
    EXPECT_EQ(got[i].status, BatchStatus::kOk) << got[i].error;
    if (i > 0) {
      EXPECT_GE(got[i].actual_end, got[i - 1].actual_end);
    }
  }
  EXPECT_EQ(ids.size(), got.size());
  // Per launching thread, its batches were launched, hence reported, in order.
  std::vector<BatchId> last(kThreads, kNoBatch);
  for (const BatchCompletion& c : got) {
    const std::size_t t = c.batch / kPerThread;
    if (last[t] != kNoBatch) {
      EXPECT_GT(c.batch, last[t]);
    }
    last[t] = c.batch;
  }
}

TEST_F(CudaKernelExecutorGpuTest, BackToBackBatchesHaveTheirIdleGapTimed) {
  CudaKernelExecutor e(0);
  RecordingPort port;
  constexpr int kBatches = 20;
  // All enqueued at once: every batch after the first finds the GPU busy.
  for (int i = 0; i < kBatches; ++i)
    e.execute(batch(static_cast<BatchId>(i), Duration::milliseconds(1)), port);
  ASSERT_TRUE(port.wait_for(kBatches));
  const gpu::CudaExecutorStats s = e.stats();
  EXPECT_GE(s.back_to_back, static_cast<std::uint64_t>(kBatches / 2));
  EXPECT_EQ(s.idle_gap_histogram.count(), s.back_to_back);
  // Kernels queued on one stream follow each other: far less than a batch apart.
  EXPECT_LT(s.max_idle_gap, Duration::milliseconds(1));
}

TEST_F(CudaKernelExecutorGpuTest, DestructorReportsBatchesStillRunning) {
  RecordingPort port;
  {
    CudaKernelExecutor e(0);
    for (int i = 0; i < 5; ++i) e.execute(batch(static_cast<BatchId>(i), Duration::milliseconds(5)), port);
  }
  EXPECT_EQ(port.completions().size(), 5u);
}

TEST_F(CudaKernelExecutorGpuTest, RuntimeServesEveryRequestExactlyOnceOnTheGpu) {
  using Rt = Runtime<testing::ExactlyOnceSink>;
  constexpr std::uint64_t kRequests = 3000;
  testing::ExactlyOnceSink sink(kRequests);
  RuntimeConfig c;
  c.shards = 1;
  c.max_models = 2;
  c.max_gpus = 1;
  c.max_requests_per_shard = 1u << 14;
  c.max_outstanding_per_gpu = 2;
  auto rt = Rt::create(c, sink);
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  const ModelId m = *(*rt)->add_model(testing::model_ms("m", 0.02, 0.5, 20, 64));
  auto exec = std::make_unique<CudaKernelExecutor>(0);
  ASSERT_TRUE((*rt)->add_gpu(std::move(exec)).ok());
  auto sub = (*rt)->make_submitter();
  // About 10 k requests/s for 0.3 s, well under the GPU's capacity at this SLO.
  const TimePoint start = SteadyClock{}.now();
  for (std::uint64_t t = 0; t < kRequests; ++t) {
    const TimePoint when = start + Duration::microseconds(static_cast<std::int64_t>(t) * 100);
    while (SteadyClock{}.now() < when) std::this_thread::yield();
    sub.submit(m, t);
  }
  (*rt)->stop(StopMode::kDrain);
  EXPECT_EQ(sink.total(), kRequests);
  for (std::uint64_t t = 0; t < kRequests; ++t) ASSERT_EQ(sink.count(t), 1u) << "request " << t;
  EXPECT_EQ(sink.count(Outcome::kError), 0u);
  EXPECT_GT(sink.count(Outcome::kOk), 0u);
  const RuntimeStats st = (*rt)->stats();
  EXPECT_GT(st.batches, 0u);
}

}  // namespace
}  // namespace symphony
