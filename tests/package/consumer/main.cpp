// A program using typeshard as an installed package (or through add_subdirectory).
#include <typeshard/typeshard.hpp>

#include <cstdio>

static_assert(typeshard::mesh<typeshard::axis("x", 2)>::size == 2);

int main() {
  std::puts("typeshard consumer: ok");
  return 0;
}
