// Compile-time report: a TU that includes typeshard and uses nothing.
#include <typeshard/typeshard.hpp>

int main() {}
