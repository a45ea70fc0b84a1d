// tests/cuda/check.hpp: the CUDA tests' harness, without Catch2 (the GPU machine has none):
// CHECK counts failures, main returns 1 if any; a program that finds no GPU prints why and
// returns skip_code, which CTest reports as skipped (SKIP_RETURN_CODE).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <typeshard/backend/cuda.hpp>

namespace cuda_test {

inline constexpr int skip_code = 77;
inline int failures = 0;

#define CHECK(cond, ...)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      ++cuda_test::failures;                                                         \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(__VA_ARGS__).c_str());                                \
    }                                                                                \
  } while (0)

// The number of visible GPUs; with none, checks that cuda_devices refuses to start with a
// typeshard::error naming the CUDA runtime's reason, and prints the skip message.
inline int visible_gpus_or_report(const char* test) {
  std::string why;
  const int n = typeshard::detail::cuda_api::visible_gpus(why);
  if (n > 0) return n;
  try {
    typeshard::cuda_devices d{1};
    ++failures;
    std::fprintf(stderr, "cuda_devices started without a visible GPU\n");
  } catch (const typeshard::error& e) {
    const std::string m = e.what();
    CHECK(m.find("no CUDA GPU is visible") != std::string::npos && m.find(why) != std::string::npos,
          m);
  }
  std::printf("SKIPPED %s: no CUDA GPU is visible (%s)\n", test, why.c_str());
  return 0;
}

inline int result(const char* test) {
  if (failures == 0) std::printf("PASSED %s\n", test);
  else std::printf("FAILED %s: %d checks failed\n", test, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace cuda_test
