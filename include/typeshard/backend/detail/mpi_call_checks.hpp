// typeshard/backend/detail/mpi_call_checks.hpp: what the MPI backend checks
// before each collective when TYPESHARD_MPI_CHECK=1 (see backend/mpi.hpp).
// Internal: do not rely on anything here.
//
// Before each collective, every member's call (its signature, the collective,
// its own collective number, for permute its peer and count, and its call site)
// is gathered without blocking (MPI_Iallgather, waited for under the watchdog)
// and compared, as the thread pool compares them: the collective itself runs
// only when every member has arrived with the same call. Before a group's
// communicator is made (MPI_Comm_create_group blocks until every member calls
// it), the members exchange which group each is about to make, point to point
// under the watchdog: crossing orders are reported as a deadlock, or as a
// usage_error when the messages cross.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../core/errors.hpp"
#include "../backend.hpp"
#include "../collective_observer.hpp"
#include "call_site.hpp"
#include "mpi_datatypes.hpp"
#include "mpi_watchdog.hpp"

namespace typeshard::detail {

class mpi_call_checks {
 public:
  // A call site is sent as "file:line" in at most call_site_bytes - 1
  // characters.
  static constexpr std::size_t call_site_bytes = 96;
  // One member's call, as every member of the group receives it.
  struct call_record {
    std::uint64_t signature, kind, number, send_to, send_count;
    char site[call_site_bytes];
  };

  explicit mpi_call_checks(mpi_watchdog& watch) : watch_(watch) {}

  void set_rank(int rank) { rank_ = rank; }
  // The checked collectives this rank has called.
  std::uint64_t collectives() const { return collectives_; }

  // Gathers every member's call on the group's communicator `c` (`ranks`: the
  // members' ranks in group order; `group_collectives`: the group's count of
  // checked collectives, advanced here) and throws usage_error, naming each
  // member's call, unless all have `signature`. The records, in group order,
  // stay valid until the next call.
  std::span<const call_record> gather_calls(MPI_Comm c, const collective_group& g,
                                            const std::vector<int>& ranks,
                                            std::uint64_t& group_collectives, collective_kind kind,
                                            std::uint64_t signature, std::uint64_t send_to,
                                            std::uint64_t send_count) {
    ++collectives_;
    const std::uint64_t group_number = ++group_collectives;
    call_record mine{signature, static_cast<std::uint64_t>(kind), collectives_, send_to, send_count,
                     {}};
    const std::string site = format_call_site(current_call_site(), call_site_bytes - 1);
    std::memcpy(mine.site, site.data(),
                site.size());  // fits: call_site_bytes - 1 at most
    calls_.resize(g.size());
    MPI_Request request = MPI_REQUEST_NULL;
    constexpr int bytes = static_cast<int>(sizeof(call_record));
    mpi_check(MPI_Iallgather(&mine, bytes, MPI_BYTE, calls_.data(), bytes, MPI_BYTE, c, &request),
              "MPI_Iallgather");
    mpi_wait w;
    w.kind = mpi_wait::collective;
    w.members = ranks;
    w.group_seq = group_number;
    w.group_key = key_of(ranks);
    w.what = describe(kind, g, ranks, group_number, collectives_, site);
    watch_.wait(request, std::move(w));
    for (call_record& r : calls_) r.site[call_site_bytes - 1] = '\0';
    for (const call_record& r : calls_)
      if (r.signature != signature) throw_calls_differ(g, ranks, group_number);
    return calls_;
  }

  // Before the communicator of the group of `ranks` is made: every member tells
  // every other which group it is about to make, on the watchdog's
  // communicator, and waits for theirs under the watchdog.
  void handshake(const collective_group& g, const std::vector<int>& ranks, collective_kind kind) {
    static constexpr int handshake_tag = 7104;
    const std::uint64_t key = key_of(ranks);
    const std::size_t n = ranks.size();
    std::vector<std::uint64_t> theirs(n, key);
    std::vector<MPI_Request> requests;
    const MPI_Comm w = watch_.communicator();
    for (std::size_t j = 0; j < n; ++j) {
      if (ranks[j] == rank_) continue;
      requests.emplace_back();
      MPI_Isend(&key, 1, MPI_UINT64_T, ranks[j], handshake_tag, w, &requests.back());
      requests.emplace_back();
      MPI_Irecv(&theirs[j], 1, MPI_UINT64_T, ranks[j], handshake_tag, w, &requests.back());
    }
    const std::string call =
        describe(kind, g, ranks, 1, collectives_ + 1, format_call_site(current_call_site()));
    mpi_wait wait;
    wait.kind = mpi_wait::collective;
    wait.members = ranks;
    wait.group_key = key;
    wait.group_seq = 0;
    wait.what = call + " (before the group's first collective: making its communicator)";
    watch_.wait(std::span<MPI_Request>(requests), std::move(wait));
    for (std::size_t j = 0; j < n; ++j)
      if (theirs[j] != key)
        throw usage_error("typeshard: ranks " + std::to_string(rank_) + " and " +
                          std::to_string(ranks[j]) +
                          " entered the collectives of different groups in crossing orders "
                          "(rank " +
                          std::to_string(rank_) + ": " + call +
                          "); every device must call the same collectives in the same order");
  }

 private:
  // A group's identity in the watchdog's answers: FNV-1a over its ranks.
  static std::uint64_t key_of(const std::vector<int>& ranks) {
    std::uint64_t key = 1469598103934665603ull;
    for (int r : ranks) key = (key ^ static_cast<std::uint64_t>(r)) * 1099511628211ull;
    return key;
  }

  static std::string ranks_string(const std::vector<int>& ranks) {
    std::string out;
    for (std::size_t j = 0; j < ranks.size(); ++j)
      out += (j ? ", " : "") + std::to_string(ranks[j]);
    return out;
  }

  // "all_reduce over \"x\" (group of ranks [0, 2]) at f.cpp:31: that group's
  // collective #1, rank 0's collective #3".
  std::string describe(collective_kind kind, const collective_group& g,
                       const std::vector<int>& ranks, std::uint64_t group_number,
                       std::uint64_t number, const std::string& site) const {
    std::string axes;
    for (const axis_name& a : g.axes) {
      if (!axes.empty()) axes += ',';
      axes.append(a.chars, a.length);
    }
    if (axes.empty() && g.purpose != nullptr) axes = g.purpose;
    return std::string(to_string(kind)) + " over \"" + axes + "\" (group of ranks [" +
           ranks_string(ranks) + "]) at " + site + ": that group's collective #" +
           std::to_string(group_number) + ", rank " + std::to_string(rank_) + "'s collective #" +
           std::to_string(number);
  }

  [[noreturn]] void throw_calls_differ(const collective_group& g, const std::vector<int>& ranks,
                                       std::uint64_t group_number) const {
    std::string out =
        "typeshard: the devices of a collective group called "
        "different collectives (or the "
        "same with different sizes or element types); every "
        "device must call the same "
        "collectives in the same order. Collective #" +
        std::to_string(group_number) + " of the group of ranks [" + ranks_string(ranks) + "]:";
    for (std::size_t j = 0; j < g.size(); ++j) {
      const call_record& r = calls_[j];
      out += " rank " + std::to_string(ranks[j]) + " called " +
             (r.kind <= static_cast<std::uint64_t>(collective_kind::permute)
                  ? to_string(static_cast<collective_kind>(r.kind))
                  : "?") +
             " at " + std::string(r.site) + " (signature " + std::to_string(r.signature % 100000) +
             ", its collective #" + std::to_string(r.number) + ")" + (j + 1 < g.size() ? ";" : "");
    }
    throw usage_error(out);
  }

  mpi_watchdog& watch_;
  int rank_ = 0;
  std::uint64_t collectives_ = 0;
  std::vector<call_record> calls_;
};

}  // namespace typeshard::detail
