// The formatter of run-time error messages (core/detail/message.hpp): pieces of text and
// integers joined in order, as every throw site of the runtime builds its message.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "typeshard/core/errors.hpp"

namespace {
using typeshard::detail::message;
using typeshard::detail::message_piece;
}  // namespace

TEST_CASE("message joins text and integers in order", "[errors]") {
  const std::string owned = "owned";
  CHECK(message({}) == "");
  CHECK(message({"typeshard: device ", std::size_t{9}, " does not exist: ", owned,
                 std::string_view(" and a view")}) ==
        "typeshard: device 9 does not exist: owned and a view");
  CHECK(message({0, " ", -42, " ", 7u, " ", std::int8_t{-3}, " ", std::uint16_t{65535}}) ==
        "0 -42 7 -3 65535");
  CHECK(message({std::numeric_limits<long long>::min()}) == "-9223372036854775808");
  CHECK(message({std::numeric_limits<std::size_t>::max()}) ==
        std::to_string(std::numeric_limits<std::size_t>::max()));
}

TEST_CASE("message: a piece chosen at run time, text or number", "[errors]") {
  for (const bool nobody : {true, false}) {
    const std::string m = message(
        {"receives from ", nobody ? "nobody" : "member ",
         nobody ? message_piece("") : message_piece(std::size_t{5}), ";"});
    CHECK(m == (nobody ? "receives from nobody;" : "receives from member 5;"));
  }
  const char letter = 'q';
  CHECK(message({"letter '", std::string_view(&letter, 1), "'"}) == "letter 'q'");
}

TEST_CASE("the errors built with message keep their text", "[errors]") {
  CHECK_THROWS_MATCHES(typeshard::detail::checked_multiply(std::size_t{1} << 40,
                                                           std::size_t{1} << 40, "host_tensor"),
                       typeshard::shape_error,
                       Catch::Message("typeshard: host_tensor: the product of the extents "
                                      "(1099511627776 * 1099511627776) overflows size_t; use "
                                      "smaller extents"));
}
