// The baseline TU of the compile-time report: the standard headers typeshard uses and
// Boost.Hana, no typeshard. Every other TU's cost is reported as a ratio to this one.
#include <boost/hana.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <complex>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

int main() {}
