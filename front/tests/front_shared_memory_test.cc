// The shared memory extensions: the registry of regions (register, status,
// unregister, the bounds and errors, a mapping kept alive by the requests
// that use it; CUDA regions through a stand-in for the CUDA runtime) and the
// front reading inputs from a region and writing outputs into one, over a
// service that answers when the test says.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <map>

#include "symphony/front/front.hpp"
#include "symphony/front/shared_memory.hpp"

namespace symphony::front {
namespace {

// A POSIX shared memory object of `size` bytes, mapped here, unlinked at the
// end (as a client would make one).
class ShmObject {
 public:
  explicit ShmObject(std::size_t size, const char* tag = "t")
      : key_("/symphony-shm-test-" + std::to_string(getpid()) + "-" + tag), size_(size) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    close(fd);
    data_ = static_cast<char*>(p);
  }
  ~ShmObject() {
    munmap(data_, size_);
    shm_unlink(key_.c_str());
  }
  const std::string& key() const { return key_; }
  char* data() const { return data_; }

 private:
  std::string key_;
  std::size_t size_;
  char* data_ = nullptr;
};

std::string status_names(const SharedMemoryRegistry& shm) {
  std::vector<SharedMemoryRegistry::RegionStatus> all;
  EXPECT_FALSE(shm.status("", &all));
  std::string out;
  for (const auto& r : all) out += (out.empty() ? "" : ",") + r.name;
  return out;
}

TEST(SharedMemoryRegistryTest, RegistersListsAndUnregisters) {
  ShmObject obj(3 * 4096);
  SharedMemoryRegistry shm;
  EXPECT_FALSE(shm.register_region("a", obj.key(), 0, 4096));
  // An offset inside a page: the region starts there, not at the page.
  EXPECT_FALSE(shm.register_region("b", obj.key(), 4096 + 100, 64));
  EXPECT_EQ(shm.size(), 2u);
  std::vector<SharedMemoryRegistry::RegionStatus> one;
  ASSERT_FALSE(shm.status("b", &one));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "b");
  EXPECT_EQ(one[0].key, obj.key());
  EXPECT_EQ(one[0].offset, 4096u + 100);
  EXPECT_EQ(one[0].byte_size, 64u);
  EXPECT_EQ(status_names(shm), "a,b");

  SharedMemoryRegistry::View v;
  ASSERT_FALSE(shm.view({"b", 8, 4}, "input 'x'", &v));
  EXPECT_EQ(v.size(), 4u);
  std::memcpy(v.data(), "abcd", 4);
  EXPECT_EQ(std::string(obj.data() + 4096 + 108, 4), "abcd");  // the client sees what the server wrote
  std::memcpy(obj.data() + 4096 + 100, "wxyz", 4);
  ASSERT_FALSE(shm.view({"b", 0, 4}, "input 'x'", &v));
  EXPECT_EQ(std::string(v.data(), 4), "wxyz");  // and the server what the client wrote

  shm.unregister("a");
  EXPECT_EQ(status_names(shm), "b");
  shm.unregister("not-there");  // no error, as in Triton
  shm.unregister("");
  EXPECT_EQ(shm.size(), 0u);
  EXPECT_EQ(status_names(shm), "");
}

TEST(SharedMemoryRegistryTest, ErrorsNameTheRegion) {
  ShmObject obj(4096);
  SharedMemoryRegistry shm;
  ASSERT_FALSE(shm.register_region("r", obj.key(), 0, 1024));

  std::optional<Reply> e = shm.register_region("r", obj.key(), 0, 16);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kInvalidArgument);
  EXPECT_NE(e->message.find("'r' is already registered"), std::string::npos) << e->message;

  e = shm.register_region("missing", "/symphony-shm-test-no-such-object", 0, 16);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kInvalidArgument);
  EXPECT_NE(e->message.find("'missing'"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find(std::strerror(ENOENT)), std::string::npos) << e->message;

  e = shm.register_region("big", obj.key(), 4000, 100);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'big'"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("beyond the end"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("4096 bytes"), std::string::npos) << e->message;

  e = shm.register_region("empty", obj.key(), 0, 0);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'empty'"), std::string::npos) << e->message;
  EXPECT_TRUE(shm.register_region("wrap", obj.key(), UINT64_MAX, 2));
  EXPECT_EQ(status_names(shm), "r");  // nothing registered by the failures

  std::vector<SharedMemoryRegistry::RegionStatus> st;
  e = shm.status("nope", &st);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kNotFound);
  EXPECT_NE(e->message.find("'nope'"), std::string::npos);

  SharedMemoryRegistry::View v;
  e = shm.view({"nope", 0, 4}, "input 'x'", &v);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kNotFound);
  EXPECT_NE(e->message.find("input 'x'"), std::string::npos);
  EXPECT_NE(e->message.find("'nope'"), std::string::npos);
  for (const SharedMemoryRef& beyond :
       {SharedMemoryRef{"r", 1000, 25}, SharedMemoryRef{"r", 1025, 0}, SharedMemoryRef{"r", 8, UINT64_MAX}}) {
    e = shm.view(beyond, "output 'y'", &v);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, Code::kInvalidArgument);
    EXPECT_NE(e->message.find("beyond the end of shared memory region 'r' (1024 bytes)"), std::string::npos)
        << e->message;
  }
  EXPECT_FALSE(shm.view({"r", 1000, 24}, "output 'y'", &v));  // up to the end is fine
}

TEST(SharedMemoryRegistryTest, AViewKeepsAnUnregisteredRegionMapped) {
  ShmObject obj(4096);
  SharedMemoryRegistry shm;
  ASSERT_FALSE(shm.register_region("r", obj.key(), 0, 4096));
  SharedMemoryRegistry::View held;
  ASSERT_FALSE(shm.view({"r", 16, 8}, "output 'y'", &held));
  shm.unregister("r");
  // The name is gone at once ...
  SharedMemoryRegistry::View v;
  std::optional<Reply> e = shm.view({"r", 0, 8}, "input 'x'", &v);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kNotFound);
  // ... the mapping stays while the view lives: a write still lands.
  std::memcpy(held.data(), "12345678", 8);
  EXPECT_EQ(std::string(obj.data() + 16, 8), "12345678");
  // The name can be registered again, to another range, beside the held one.
  ASSERT_FALSE(shm.register_region("r", obj.key(), 2048, 16));
  ASSERT_FALSE(shm.view({"r", 0, 16}, "input 'x'", &v));
  std::memcpy(v.data(), "new", 3);
  EXPECT_EQ(std::string(obj.data() + 2048, 3), "new");
  held = SharedMemoryRegistry::View();  // unmaps the old mapping
  std::memcpy(v.data(), "NEW", 3);
  EXPECT_EQ(std::string(obj.data() + 2048, 3), "NEW");
}

TEST(SharedMemoryRegistryTest, RegionsArePinnedOnceAndUnpinnedWhenTheLastHolderLetsGo) {
  ShmObject obj(2 * 4096);
  SharedMemoryRegistry shm;
  std::vector<std::pair<void*, std::size_t>> pinned;
  std::vector<void*> unpinned;
  bool fail = false;
  shm.set_pinning(
      [&](void* p, std::size_t n) -> std::string {
        if (fail) return "cudaHostRegister: out of memory";
        pinned.emplace_back(p, n);
        return "";
      },
      [&](void* p) { unpinned.push_back(p); });
  ASSERT_FALSE(shm.register_region("r", obj.key(), 4096 + 100, 64));
  ASSERT_EQ(pinned.size(), 1u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pinned[0].first) % 4096, 0u) << "the mapping, from its page";
  EXPECT_EQ(pinned[0].second, 164u) << "up to the region's end";
  std::vector<SharedMemoryRegistry::RegionStatus> st;
  ASSERT_FALSE(shm.status("r", &st));
  EXPECT_TRUE(st[0].pinned);
  EXPECT_EQ(st[0].pin_error, "");
  SharedMemoryRegistry::View held;
  ASSERT_FALSE(shm.view({"r", 0, 8}, "input 'x'", &held));
  EXPECT_EQ(static_cast<void*>(held.data() - 100), pinned[0].first);
  shm.unregister("r");
  EXPECT_TRUE(unpinned.empty()) << "a request still reads it";
  held = SharedMemoryRegistry::View();
  ASSERT_EQ(unpinned.size(), 1u);
  EXPECT_EQ(unpinned[0], pinned[0].first);
  // One that cannot be pinned is served as mapped, its status saying why.
  fail = true;
  ASSERT_FALSE(shm.register_region("u", obj.key(), 0, 4096));
  ASSERT_FALSE(shm.status("u", &st));
  EXPECT_FALSE(st[0].pinned);
  EXPECT_EQ(st[0].pin_error, "cudaHostRegister: out of memory");
  ASSERT_FALSE(shm.view({"u", 0, 4}, "input 'x'", &held));
  std::memcpy(held.data(), "abcd", 4);
  EXPECT_EQ(std::string(obj.data(), 4), "abcd");
  held = SharedMemoryRegistry::View();
  shm.unregister("");
  EXPECT_EQ(unpinned.size(), 1u) << "never pinned, never unpinned";
}

// A stand-in for a GPU behind CudaIpc: "device" memory is host memory, a
// handle is 64 bytes naming one buffer. The registry's and the front's side
// of CUDA shared memory run on it; the CUDA runtime's side runs on a GPU.
struct FakeDevice {
  std::map<std::string, std::vector<char>> buffers;  // handle -> the device's bytes
  int closed = 0, to_host = 0, to_device = 0;
  static std::string handle(char c) { return std::string(64, c); }
  CudaIpc ipc() {
    return CudaIpc{[this](const std::string& h, std::int64_t device, void** ptr) -> std::string {
                     auto it = buffers.find(h);
                     if (it == buffers.end() || device != 0) return "cudaErrorInvalidValue: invalid argument";
                     *ptr = it->second.data();
                     return "";
                   },
                   [this](void*, std::int64_t) { ++closed; },
                   [this](void* host, const void* dev, std::size_t n, std::int64_t) -> std::string {
                     ++to_host;
                     std::memcpy(host, dev, n);
                     return "";
                   },
                   [this](void* dev, const void* host, std::size_t n, std::int64_t) -> std::string {
                     ++to_device;
                     std::memcpy(dev, host, n);
                     return "";
                   }};
  }
};

TEST(SharedMemoryRegistryTest, CudaRegionsOpenThroughTheirCallsAndAreCopiedBothWays) {
  FakeDevice gpu;
  gpu.buffers[FakeDevice::handle('a')] = std::vector<char>(256, 'd');
  SharedMemoryRegistry shm;
  std::optional<Reply> e = shm.register_cuda_region("c", FakeDevice::handle('a'), 0, 256);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kUnimplemented) << "no CUDA calls: 501 / UNIMPLEMENTED";
  shm.set_cuda_ipc(gpu.ipc());
  ASSERT_TRUE(shm.has_cuda());
  ASSERT_FALSE(shm.register_cuda_region("c", FakeDevice::handle('a'), 0, 256));
  std::vector<SharedMemoryRegistry::RegionStatus> st;
  ASSERT_FALSE(shm.status("", &st, /*cuda=*/true));
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].name, "c");
  EXPECT_EQ(st[0].device_id, 0);
  EXPECT_EQ(st[0].byte_size, 256u);
  ASSERT_FALSE(shm.status("", &st));
  EXPECT_TRUE(st.empty()) << "system status lists system regions only";
  e = shm.status("c", &st);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Code::kNotFound);
  // Errors name the region and the problem.
  const auto says = [&](std::optional<Reply> r, std::string_view what) {
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->code, Code::kInvalidArgument);
    EXPECT_NE(r->message.find(what), std::string::npos) << r->message;
  };
  says(shm.register_cuda_region("c", FakeDevice::handle('a'), 0, 8), "region 'c' is already registered");
  says(shm.register_cuda_region("short", "abc", 0, 8), "'raw_handle' is 3 bytes; a cudaIpcMemHandle_t is 64");
  says(shm.register_cuda_region("gone", FakeDevice::handle('z'), 0, 8),
       "region 'gone': cannot open its handle on device 0: cudaErrorInvalidValue: invalid argument");
  says(shm.register_cuda_region("neg", FakeDevice::handle('a'), -1, 8), "'device_id' -1 is not a device");
  // An input's view is a host copy of the device's bytes, made at once.
  SharedMemoryRegistry::View in;
  ASSERT_FALSE(shm.view({"c", 16, 8}, "input 'x'", &in));
  EXPECT_EQ(gpu.to_host, 1);
  gpu.buffers[FakeDevice::handle('a')][16] = 'X';
  EXPECT_EQ(std::string(in.data(), 8), "dddddddd") << "the copy, not the device's bytes";
  // An output's view writes to the device.
  SharedMemoryRegistry::View out;
  ASSERT_FALSE(shm.view({"c", 100, 4}, "output 'y'", &out, /*read=*/false));
  EXPECT_EQ(gpu.to_host, 1) << "an output is not read";
  EXPECT_EQ(out.write("wxyz", 4), "");
  EXPECT_EQ(std::string(gpu.buffers[FakeDevice::handle('a')].data() + 100, 4), "wxyz");
  EXPECT_NE(out.write("too long", 8), "") << "beyond the view";
  says(shm.view({"c", 250, 8}, "input 'x'", &in),
       "is beyond the end of shared memory region 'c' (256 bytes)");
  // Unregistered as its kind only; closed once its last view goes.
  shm.unregister("c");
  ASSERT_FALSE(shm.status("c", &st, true)) << "a system unregister leaves a CUDA region";
  shm.unregister("c", /*cuda=*/true);
  EXPECT_EQ(gpu.closed, 0) << "a view still holds it";
  in = SharedMemoryRegistry::View();
  out = SharedMemoryRegistry::View();
  EXPECT_EQ(gpu.closed, 1);
}

TEST(SharedMemoryParametersTest, ReadsTheExtensionsParameters) {
  const auto param = [](auto v) {
    Parameter p;
    if constexpr (std::is_same_v<decltype(v), const char*>) {
      p.kind = Parameter::Kind::kString;
      p.s = v;
    } else {
      p.kind = Parameter::Kind::kInt;
      p.i = v;
    }
    return p;
  };
  std::optional<SharedMemoryRef> ref;
  EXPECT_FALSE(shared_memory_parameters({{"binary_data", Parameter{}}}, "input 'x'", &ref));
  EXPECT_FALSE(ref);
  ASSERT_FALSE(shared_memory_parameters(
      {{"shared_memory_region", param("r")}, {"shared_memory_byte_size", param(16)}}, "input 'x'", &ref));
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->region, "r");
  EXPECT_EQ(ref->offset, 0u);
  EXPECT_EQ(ref->byte_size, 16u);
  Parameter u;
  u.kind = Parameter::Kind::kUint;
  u.u = 32;
  ASSERT_FALSE(shared_memory_parameters({{"shared_memory_region", param("r")},
                                         {"shared_memory_byte_size", param(16)},
                                         {"shared_memory_offset", u}},
                                        "input 'x'", &ref));
  EXPECT_EQ(ref->offset, 32u);

  const std::vector<std::pair<std::map<std::string, Parameter>, std::string>> bad = {
      {{{"shared_memory_region", param("r")}}, "needs both"},
      {{{"shared_memory_byte_size", param(4)}}, "needs both"},
      {{{"shared_memory_offset", param(4)}}, "needs both"},
      {{{"shared_memory_region", param(3)}, {"shared_memory_byte_size", param(4)}}, "region's name"},
      {{{"shared_memory_region", param("r")}, {"shared_memory_byte_size", param(-4)}}, "non-negative"},
      {{{"shared_memory_region", param("r")}, {"shared_memory_byte_size", param("4")}}, "non-negative"},
      {{{"shared_memory_region", param("r")},
        {"shared_memory_byte_size", param(4)},
        {"shared_memory_offset", param(-1)}},
       "'shared_memory_offset' must be"},
  };
  for (const auto& [params, says] : bad) {
    std::optional<Reply> e = shared_memory_parameters(params, "output 'y'", &ref);
    ASSERT_TRUE(e) << says;
    EXPECT_EQ(e->code, Code::kInvalidArgument);
    EXPECT_NE(e->message.find("output 'y'"), std::string::npos) << e->message;
    EXPECT_NE(e->message.find(says), std::string::npos) << e->message;
  }
}

// Holds submitted requests until the test ends them; model "m" takes x
// FP32 [-1, 4] and gives y FP32 [-1, 2].
class HoldingService final : public InferenceService {
 public:
  HoldingService() {
    auto m = std::make_shared<ModelMetadata>();
    m->name = "m";
    m->versions = {"1"};
    m->slo = Duration::milliseconds(100);
    m->max_samples = 4;
    m->inputs = {{"x", DataType::kFp32, {-1, 4}}};
    m->outputs = {{"y", DataType::kFp32, {-1, 2}}};
    model_ = m;
  }
  bool ready() const override { return true; }
  std::vector<std::shared_ptr<const ModelMetadata>> models() const override { return {model_}; }
  std::shared_ptr<const ModelMetadata> find(std::string_view name) const override {
    return name == "m" ? model_ : nullptr;
  }
  std::uint64_t submit(InferRequest&& r, Duration, Done done) override {
    pending.push_back({std::move(r), std::move(done)});
    return pending.size();
  }
  void cancel(std::uint64_t) override {}
  // Answers the oldest request with y = the first two floats of each
  // sample of x, `extra` more bytes than that when asked.
  void answer(std::size_t extra = 0) {
    auto [req, done] = std::move(pending.front());
    pending.pop_front();
    Reply r = reply_for_outcome(Outcome::kOk, DropReason::kNone, "", "m", Duration::milliseconds(1));
    const Tensor& x = req.inputs.at(0);
    Tensor y{"y", DataType::kFp32, {x.shape[0], 2}, {}, {}};
    for (std::size_t s = 0; s < x.bytes().size(); s += 16) y.data += x.bytes().substr(s, 8);
    y.data.append(extra, '\0');
    r.outputs.push_back(std::move(y));
    done(std::move(r));
  }
  std::deque<std::pair<InferRequest, Done>> pending;

 private:
  std::shared_ptr<const ModelMetadata> model_;
};

class FrontSharedMemoryTest : public ::testing::Test {
 protected:
  FrontSharedMemoryTest() : obj(4096, "front") {
    front.allow_shared_memory(true);
    EXPECT_FALSE(front.shared_memory().register_region("in", obj.key(), 0, 1024));
    EXPECT_FALSE(front.shared_memory().register_region("out", obj.key(), 1024, 1024));
    const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::memcpy(obj.data() + 64, x, sizeof x);
  }
  // A request for 2 samples of x from region "in" at 64, y into "out" at 8.
  InferRequest request(std::uint64_t in_size = 32, std::uint64_t out_size = 16) {
    InferRequest r;
    r.model = "m";
    Tensor x{"x", DataType::kFp32, {2, 4}, {}, SharedMemoryRef{"in", 64, in_size}, {}, {}};
    r.inputs.push_back(std::move(x));
    r.outputs.push_back({"y", false, SharedMemoryRef{"out", 8, out_size}});
    return r;
  }
  Reply infer(InferRequest r) {
    std::vector<Reply> got;
    front.infer(std::move(r), std::nullopt, [&](Reply&& reply) { got.push_back(std::move(reply)); });
    if (got.empty() && !svc.pending.empty()) svc.answer();
    EXPECT_EQ(got.size(), 1u);
    return got.empty() ? Reply{} : std::move(got.back());
  }
  std::vector<float> out_floats(std::size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), obj.data() + 1024 + 8, n * sizeof(float));
    return v;
  }

  ShmObject obj;
  HoldingService svc;
  Front front{svc};
};

TEST_F(FrontSharedMemoryTest, ReadsInputsFromAndWritesOutputsIntoRegions) {
  const Reply r = infer(request());
  ASSERT_EQ(r.code, Code::kOk) << r.message;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_TRUE(r.outputs[0].data.empty()) << "the bytes went to the region, not into the reply";
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 2}));
  EXPECT_EQ(out_floats(4), (std::vector<float>{1, 2, 5, 6}));
  const std::vector<std::string> ext = front.extensions();
  EXPECT_NE(std::find(ext.begin(), ext.end(), "system_shared_memory"), ext.end());
}

TEST_F(FrontSharedMemoryTest, RefusesWhatDoesNotFitNamingTheRegion) {
  struct Case {
    InferRequest req;
    Code code;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back(
      {request(28), Code::kInvalidArgument,
       "input 'x' of model 'm': [2,4] FP32 is 32 bytes, but shared_memory_byte_size in region 'in' "
       "is 28"});
  cases.push_back({request(32, 12), Code::kInvalidArgument,
                   "output 'y' of model 'm': [2,2] FP32 is 16 bytes, but shared_memory_byte_size in region "
                   "'out' is 12"});
  InferRequest unknown = request();
  unknown.inputs[0].shared_memory->region = "elsewhere";
  cases.push_back({std::move(unknown), Code::kNotFound, "no shared memory region 'elsewhere'"});
  InferRequest beyond = request();
  beyond.outputs[0].shared_memory->offset = 1020;
  cases.push_back(
      {std::move(beyond), Code::kInvalidArgument, "beyond the end of shared memory region 'out'"});
  for (Case& c : cases) {
    const Reply r = infer(std::move(c.req));
    EXPECT_EQ(r.code, c.code) << c.says;
    EXPECT_NE(r.message.find(c.says), std::string::npos) << r.message;
  }
  EXPECT_TRUE(svc.pending.empty()) << "no refused request reaches the service";
  EXPECT_EQ(out_floats(4), (std::vector<float>{0, 0, 0, 0})) << "nothing was written";
}

TEST_F(FrontSharedMemoryTest, NotAllowedItIsRefusedAndNotListed) {
  front.allow_shared_memory(false);
  const std::vector<std::string> ext = front.extensions();
  EXPECT_EQ(std::find(ext.begin(), ext.end(), "system_shared_memory"), ext.end());
  std::optional<Reply> off = front.shared_memory_refusal();
  ASSERT_TRUE(off);
  EXPECT_EQ(off->code, Code::kUnimplemented);
  EXPECT_NE(off->message.find("--allow-client-shm"), std::string::npos);
  Reply r = infer(request());
  EXPECT_EQ(r.code, Code::kInvalidArgument);
  EXPECT_NE(
      r.message.find("input 'x' names shared memory region 'in', but this server takes no shared memory"),
      std::string::npos)
      << r.message;
  InferRequest out_only = request();
  out_only.inputs[0].shared_memory.reset();
  out_only.inputs[0].data.assign(32, '\0');
  r = infer(std::move(out_only));
  EXPECT_EQ(r.code, Code::kInvalidArgument);
  EXPECT_NE(r.message.find("output 'y' of model 'm' names shared memory region 'out'"), std::string::npos)
      << r.message;
  EXPECT_TRUE(svc.pending.empty());
  front.allow_shared_memory(true);
  EXPECT_FALSE(front.shared_memory_refusal());
  EXPECT_EQ(infer(request()).code, Code::kOk);
}

TEST_F(FrontSharedMemoryTest, AnOutputLargerThanItsRegionEndsAsAnError) {
  std::vector<Reply> got;
  front.infer(request(), std::nullopt, [&](Reply&& reply) { got.push_back(std::move(reply)); });
  ASSERT_EQ(svc.pending.size(), 1u);
  svc.answer(/*extra=*/4);  // 20 bytes for a region range of 16
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].code, Code::kInvalidArgument);
  EXPECT_NE(got[0].message.find("output 'y' of model 'm' is 20 bytes"), std::string::npos) << got[0].message;
  EXPECT_NE(got[0].message.find("region 'out'"), std::string::npos) << got[0].message;
  EXPECT_EQ(out_floats(4), (std::vector<float>{0, 0, 0, 0}));
  const FrontCounters c = front.counters();
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].outcomes.errors, 1u);
  EXPECT_EQ(c.models[0].outcomes.ok, 0u);
}

TEST_F(FrontSharedMemoryTest, ARegionUnregisteredMidRequestIsWrittenAllTheSame) {
  std::vector<Reply> got;
  front.infer(request(), std::nullopt, [&](Reply&& reply) { got.push_back(std::move(reply)); });
  ASSERT_EQ(svc.pending.size(), 1u);
  front.shared_memory().unregister("");
  EXPECT_EQ(front.shared_memory().size(), 0u);
  // A new request naming it is refused at once ...
  EXPECT_EQ(infer(request()).code, Code::kNotFound);
  // ... the one inside finishes into the region it started with.
  svc.answer();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].code, Code::kOk) << got[0].message;
  EXPECT_EQ(out_floats(4), (std::vector<float>{1, 2, 5, 6}));
}

TEST_F(FrontSharedMemoryTest, ReadsInputsFromAndWritesOutputsIntoCudaRegions) {
  FakeDevice gpu;
  std::vector<char>& dev = gpu.buffers[FakeDevice::handle('g')] = std::vector<char>(512, 0);
  const float x[8] = {9, 8, 7, 6, 5, 4, 3, 2};
  std::memcpy(dev.data() + 64, x, sizeof x);
  HoldingService cuda_svc;
  FrontOptions o;
  o.cuda_ipc = gpu.ipc();
  Front f(cuda_svc, o);
  f.allow_shared_memory(true);
  const std::vector<std::string> ext = f.extensions();
  EXPECT_NE(std::find(ext.begin(), ext.end(), "cuda_shared_memory"), ext.end());
  ASSERT_FALSE(f.shared_memory().register_cuda_region("gin", FakeDevice::handle('g'), 0, 256));
  ASSERT_FALSE(f.shared_memory().register_cuda_region("gout", FakeDevice::handle('g'), 0, 512));
  InferRequest r;
  r.model = "m";
  r.inputs.push_back(Tensor{"x", DataType::kFp32, {2, 4}, {}, SharedMemoryRef{"gin", 64, 32}, {}, {}});
  r.outputs.push_back({"y", false, SharedMemoryRef{"gout", 300, 16}});
  std::vector<Reply> got;
  f.infer(std::move(r), std::nullopt, [&](Reply&& reply) { got.push_back(std::move(reply)); });
  ASSERT_EQ(cuda_svc.pending.size(), 1u);
  cuda_svc.answer();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].code, Code::kOk) << got[0].message;
  EXPECT_TRUE(got[0].outputs[0].data.empty()) << "the bytes went to the region";
  std::vector<float> y(4);
  std::memcpy(y.data(), dev.data() + 300, sizeof(float) * 4);
  EXPECT_EQ(y, (std::vector<float>{9, 8, 5, 4}));
  EXPECT_EQ(gpu.to_host, 1);
  EXPECT_EQ(gpu.to_device, 1);
  // Without the CUDA calls the extension is not listed.
  const std::vector<std::string> plain = front.extensions();
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "cuda_shared_memory"), plain.end());
}

}  // namespace
}  // namespace symphony::front
