// A program linking the installed typeshard::cuda (tests/package, built where the package has
// it). With a GPU: one device, a round trip through its memory. Without one (CI: the toolkit,
// no driver): cuda_devices must refuse to start with typeshard::error naming the CUDA
// runtime's reason, which is a pass here: the test checks how the package links and loads
// cudart, cuBLAS and NCCL, not the GPU (tests/cuda does that).
#include <typeshard/backend/cuda.hpp>

#include <cstdio>
#include <string>

namespace ts = typeshard;

int main() {
  std::string why;
  const int gpus = ts::detail::cuda_api::visible_gpus(why);
  try {
    ts::cuda_devices devices{1};
    if (gpus <= 0) {
      std::puts("typeshard consumer (typeshard::cuda): cuda_devices started without a GPU");
      return 1;
    }
    const float x = 3.0f;
    float y = 0.0f;
    void* p = devices.allocate(0, sizeof x);
    devices.to_device(0, p, &x, sizeof x);
    devices.to_host(0, &y, p, sizeof y);
    devices.deallocate(0, p);
    if (y != x) {
      std::puts("typeshard consumer (typeshard::cuda): wrong value back from the GPU");
      return 1;
    }
    std::printf("typeshard consumer (typeshard::cuda): ok on %s\n", devices.gpu_name(0).c_str());
  } catch (const ts::error& e) {
    if (gpus > 0 || std::string(e.what()).find(why) == std::string::npos) {
      std::printf("typeshard consumer (typeshard::cuda): unexpected error: %s\n", e.what());
      return 1;
    }
    std::printf("typeshard consumer (typeshard::cuda): ok, no GPU (%s)\n", why.c_str());
  }
  return 0;
}
