// typeshard/backend/impl/backend.ipp: the checks every backend's operations share.
// Included by backend.hpp (header-only) or compiled once into typeshard::runtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "../../core/errors.hpp"
#include "../backend.hpp"
#include "../collective_observer.hpp"

namespace typeshard {

namespace detail {

// The checks' throws, cold and out of line: a check compiles to its test and one call, with
// no message or exception object built in the checking function.
[[noreturn]] TYPESHARD_COLD TYPESHARD_NOINLINE inline void throw_usage_error(
    std::initializer_list<message_piece> pieces) {
  throw usage_error(message(pieces));
}
[[noreturn]] TYPESHARD_COLD TYPESHARD_NOINLINE inline void throw_device_mesh_error(
    std::initializer_list<message_piece> pieces) {
  throw device_mesh_error(message(pieces));
}

// A hash of the arguments all members of a collective must agree on (FNV-1a over the
// words). The first word names the collective.
inline std::uint64_t collective_signature(std::initializer_list<std::size_t> words,
                                          std::span<const std::size_t> more = {}) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::size_t w) { h = (h ^ static_cast<std::uint64_t>(w)) * 1099511628211ull; };
  for (std::size_t w : words) mix(w);
  for (std::size_t w : more) mix(w);
  return h;
}

inline std::size_t signature_code(element_type t) {
  return static_cast<std::size_t>(t.kind) * 1024 + t.size;
}

// The element type's name, for messages.
inline const char* element_kind_name(element_kind k) {
  switch (k) {
    case element_kind::int8: return "int8";
    case element_kind::uint8: return "uint8";
    case element_kind::int16: return "int16";
    case element_kind::uint16: return "uint16";
    case element_kind::int32: return "int32";
    case element_kind::uint32: return "uint32";
    case element_kind::int64: return "int64";
    case element_kind::uint64: return "uint64";
    case element_kind::float32: return "float32";
    case element_kind::float64: return "float64";
    case element_kind::complex64: return "complex64";
    case element_kind::complex128: return "complex128";
    case element_kind::bfloat16: return "bfloat16";
    case element_kind::opaque: return "opaque";
  }
  return "?";
}

// Throws usage_error unless elements of type t can be reduced with op.
inline void check_reducible(element_type t, reduce_op op) {
  const bool complex = t.kind == element_kind::complex64 || t.kind == element_kind::complex128;
  if (t.kind == element_kind::opaque || (complex && op != reduce_op::sum))
    throw_usage_error(
        {"typeshard: cannot reduce elements of type ", element_kind_name(t.kind), " with ",
         op == reduce_op::sum ? "sum" : op == reduce_op::max ? "max" : "min",
         "; reductions need arithmetic element types (complex: sum only)"});
}

inline void check_counts(const collective_group& g, std::span<const std::size_t> counts,
                         const char* what) {
  if (counts.size() != g.size())
    throw_usage_error({"typeshard: internal: ", what, " got ", counts.size(),
                       " counts for a group of ", g.size()});
}

// Times one device's part in a collective and reports it to the installed observer, if
// any, when the collective has returned (a collective that throws is not reported).
class collective_watch {
 public:
  collective_watch(collective_kind kind, reduce_op op, const collective_group& g,
                   std::size_t block_bytes, std::size_t bytes_received)
      : observer_(installed_collective_observer.load(std::memory_order_acquire)),
        group_(g),
        kind_(kind),
        op_(op),
        block_bytes_(block_bytes),
        bytes_received_(bytes_received) {
    if (observer_ != nullptr) start_ = std::chrono::steady_clock::now();
  }

  void finished() const {
    if (observer_ != nullptr) report();
  }

 private:
  // Only with an observer installed (reports): out of line and cold, compiled once.
  TYPESHARD_COLD TYPESHARD_NOINLINE void report() const {
    collective_event e;
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    e.kind = kind_;
    e.op = op_;
    for (const axis_name& a : group_.axes) {
      if (!e.axes.empty()) e.axes += ',';
      e.axes.append(a.chars, a.length);
    }
    if (e.axes.empty() && group_.purpose != nullptr) e.axes = group_.purpose;
    e.position = group_.members[group_.rank];
    e.group_size = group_.size();
    e.block_bytes = block_bytes_;
    e.bytes_received = bytes_received_;
    observer_->observe(e);
  }

  collective_observer* observer_;
  const collective_group& group_;
  collective_kind kind_;
  reduce_op op_;
  std::size_t block_bytes_;
  std::size_t bytes_received_;
  std::chrono::steady_clock::time_point start_{};
};

// The sum of a collective's per-member counts.
inline std::size_t sum_of(std::span<const std::size_t> counts) {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  return total;
}

// (n - 1) / n of `bytes`: what a member of n receives of a block in a ring algorithm.
inline std::size_t ring_share(std::size_t bytes, std::size_t n) {
  return n == 0 ? 0 : bytes / n * (n - 1) + bytes % n * (n - 1) / n;
}

}  // namespace detail

TYPESHARD_RUNTIME_DEF void backend::run(std::span<const device_id> devices,
                                        detail::function_ref<void(std::size_t)> body) {
  if (current_body().inside)
    throw usage_error(
        "typeshard: a multi-device operation was started from inside a per-device "
        "function; per-device code may only use local blocks and collectives: move the "
        "operation out of the function");
  check_devices(devices);
  do_run(devices, body);
}

TYPESHARD_RUNTIME_DEF void backend::all_gather(const collective_group& g, element_type t,
                                               const void* send, void* recv, std::size_t rows,
                                               std::span<const std::size_t> counts,
                                               detail::source_site loc) {
  const detail::call_site_scope site(loc);
  check_group(g);
  detail::check_counts(g, counts, "all_gather");
  const std::size_t gathered = rows * detail::sum_of(counts) * t.size;
  const detail::collective_watch watch(collective_kind::all_gather, reduce_op::sum, g, gathered,
                                       gathered - rows * counts[g.rank] * t.size);
  do_all_gather(g, t, send, recv, rows, counts,
                detail::collective_signature({1, detail::signature_code(t), rows}, counts));
  watch.finished();
}

TYPESHARD_RUNTIME_DEF void backend::reduce_scatter(const collective_group& g, element_type t,
                                                   reduce_op op, const void* send, void* recv,
                                                   std::size_t rows,
                                                   std::span<const std::size_t> counts,
                                                   detail::source_site loc) {
  const detail::call_site_scope site(loc);
  check_group(g);
  detail::check_reducible(t, op);
  detail::check_counts(g, counts, "reduce_scatter");
  const std::size_t o = static_cast<std::size_t>(op);
  const std::size_t block = rows * detail::sum_of(counts) * t.size;
  const detail::collective_watch watch(collective_kind::reduce_scatter, op, g, block,
                                       detail::ring_share(block, g.size()));
  do_reduce_scatter(
      g, t, op, send, recv, rows, counts,
      detail::collective_signature({2, detail::signature_code(t), o, rows}, counts));
  watch.finished();
}

TYPESHARD_RUNTIME_DEF void backend::all_reduce(const collective_group& g, element_type t,
                                               reduce_op op, const void* send, void* recv,
                                               std::size_t count,
                                               detail::source_site loc) {
  const detail::call_site_scope site(loc);
  check_group(g);
  detail::check_reducible(t, op);
  const std::size_t o = static_cast<std::size_t>(op);
  const detail::collective_watch watch(collective_kind::all_reduce, op, g, count * t.size,
                                       2 * detail::ring_share(count * t.size, g.size()));
  do_all_reduce(g, t, op, send, recv, count,
                detail::collective_signature({3, detail::signature_code(t), o, count}));
  watch.finished();
}

TYPESHARD_RUNTIME_DEF void backend::all_to_all(const collective_group& g, element_type t,
                                               const void* send, void* recv,
                                               const strided_pieces& send_pieces,
                                               const strided_pieces& recv_pieces,
                                               detail::source_site loc) {
  const detail::call_site_scope site(loc);
  check_group(g);
  if (send_pieces.elements() != recv_pieces.elements())
    detail::throw_usage_error({"typeshard: internal: all_to_all pieces of ",
                               send_pieces.elements(), " and ", recv_pieces.elements(),
                               " elements"});
  const std::size_t block = send_pieces.elements() * g.size() * t.size;
  const detail::collective_watch watch(collective_kind::all_to_all, reduce_op::sum, g, block,
                                       detail::ring_share(block, g.size()));
  do_all_to_all(g, t, send, recv, send_pieces, recv_pieces,
                detail::collective_signature(
                    {4, detail::signature_code(t), send_pieces.elements()}));
  watch.finished();
}

TYPESHARD_RUNTIME_DEF void backend::permute(const collective_group& g, element_type t,
                                            const void* send, std::size_t send_count,
                                            std::size_t send_to, void* recv,
                                            std::size_t recv_count, std::size_t recv_from,
                                            detail::source_site loc) {
  const detail::call_site_scope site(loc);
  check_group(g);
  if ((send_to != no_peer && send_to >= g.size()) ||
      (recv_from != no_peer && recv_from >= g.size()))
    detail::throw_usage_error(
        {"typeshard: permute: a peer rank is outside the group of ", g.size(), " members"});
  const detail::collective_watch watch(collective_kind::permute, reduce_op::sum, g,
                                       send_count * t.size,
                                       recv_from == no_peer ? 0 : recv_count * t.size);
  do_permute(g, t, send, send_count, send_to, recv, recv_count, recv_from,
             detail::collective_signature({5, detail::signature_code(t)}));
  watch.finished();
}

TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF void backend::throw_signature_mismatch() {
  throw usage_error(
      "typeshard: the devices of a collective group called different collectives (or the "
      "same with different sizes or element types); every device must call the same "
      "collectives in the same order");
}

TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF void backend::throw_not_a_permutation(std::size_t sender,
                                                            std::size_t receiver,
                                                            std::size_t receiver_source) {
  const bool nobody = receiver_source == no_peer;
  detail::throw_usage_error(
      {"typeshard: ppermute: member ", sender, " sends to member ", receiver,
       ", which receives from ", nobody ? "nobody" : "member ",
       nobody ? detail::message_piece("") : detail::message_piece(receiver_source),
       "; give a permutation (each member sends to one and receives from one)"});
}

TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF void backend::throw_permute_count_mismatch(std::size_t receiver,
                                                                 std::size_t expected,
                                                                 std::size_t sender,
                                                                 std::size_t sent,
                                                                 std::size_t sent_to) {
  const bool known = sent_to != no_peer;
  detail::throw_usage_error(
      {"typeshard: ppermute: member ", receiver, " expects ", expected, " elements from member ",
       sender, ", which sends ", sent, known ? " to member " : "",
       known ? detail::message_piece(sent_to) : detail::message_piece(""),
       "; senders and receivers must agree"});
}

TYPESHARD_RUNTIME_DEF void backend::check_devices(std::span<const device_id> devices) const {
  const std::size_t n = device_count();
  std::vector<unsigned char> seen(n, 0);  // not vector<bool>: its fill costs more to compile
  for (device_id d : devices) {
    if (d >= n)
      detail::throw_device_mesh_error(
          {"typeshard: device ", d, " does not exist: ", devices_summary()});
    if (seen[d])
      detail::throw_device_mesh_error(
          {"typeshard: device ", d, " appears twice in one operation; list each device once"});
    seen[d] = 1;
  }
}

TYPESHARD_RUNTIME_DEF void backend::check_group(const collective_group& g) const {
  const body_position here = current_body();
  if (!here.inside)
    throw usage_error(
        "typeshard: a collective was called outside a per-device function; call it on "
        "local blocks inside ts::shard_map (or a backend run() body)");
  if (g.rank >= g.size() || g.members[g.rank] != here.index)
    detail::throw_usage_error({"typeshard: internal: collective group rank ", g.rank,
                               " does not name the calling device"});
  for (std::size_t a = 0; a < g.size(); ++a) {
    if (g.members[a] >= here.run_size)
      detail::throw_usage_error({"typeshard: internal: collective group member ",
                                 g.members[a], " is not part of the run"});
    for (std::size_t b = 0; b < a; ++b)  // a repeated member would wait for itself
      if (g.members[a] == g.members[b])
        detail::throw_usage_error({"typeshard: internal: collective group member ",
                                   g.members[a], " appears twice"});
  }
}

}  // namespace typeshard
