// typeshard/backend/detail/mpi_watchdog.hpp: the MPI backend's collective watchdog, used when
// collective checks are on (TYPESHARD_MPI_CHECK=1). Internal: do not rely on anything here.
//
// With checks on, a rank never blocks in MPI: before each collective its group exchanges
// what each member calls (a non-blocking MPI_Iallgather, see mpi_call_checks.hpp), and
// destroying mpi_devices waits in an MPI_Ibarrier over every rank before MPI_Finalize. The
// rank polls those requests (MPI_Test) and, meanwhile, answers its peers' queries about what
// it waits in. A rank that has waited `bound` seconds asks every rank what it waits in (point
// to point, on a communicator of its own). When every rank waits, none of the waits can
// complete (no group has all its members in the same collective of that group, or a rank is
// finalizing while its peers wait in collectives), and a second round of answers shows the
// same waits (so the snapshot is consistent: each rank was in its wait between its two
// answers, and every first answer came before every second), the job is deadlocked: the rank
// prints every rank's wait, tells the others, and aborts the job (MPI_Abort, exit status 1).
// A rank that computes, or waits in MPI outside typeshard, answers only when it next waits
// in a checked collective: until then no deadlock is declared (no false report).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace typeshard::detail {

// What one rank waits in, as it answers a query.
struct mpi_wait {
  enum kind_t : int { none = 0, collective = 1, finalizing = 2 };
  int kind = none;
  std::uint64_t id = 0;         // this rank's wait number: unchanged while it waits
  std::uint64_t group_key = 0;  // a hash of the group's ranks (0 when finalizing)
  std::uint64_t group_seq = 0;  // which collective of that group (1 = its first)
  double waited = 0;            // seconds waited so far
  std::vector<int> members;     // the group's ranks, in group order
  std::string what;             // for the report

  // One line: "kind id key seq waited n m0 .. m(n-1) |what".
  std::string encode() const {
    std::string s = std::to_string(kind) + ' ' + std::to_string(id) + ' ' +
                    std::to_string(group_key) + ' ' + std::to_string(group_seq) + ' ' +
                    std::to_string(waited) + ' ' + std::to_string(members.size());
    for (int m : members) s += ' ' + std::to_string(m);
    return s + " |" + what;
  }
  static mpi_wait decode(const std::string& s) {
    mpi_wait w;
    const char* p = s.c_str();
    char* end = nullptr;
    w.kind = static_cast<int>(std::strtol(p, &end, 10));
    w.id = std::strtoull(end, &end, 10);
    w.group_key = std::strtoull(end, &end, 10);
    w.group_seq = std::strtoull(end, &end, 10);
    w.waited = std::strtod(end, &end);
    const std::size_t n = std::strtoull(end, &end, 10);
    for (std::size_t i = 0; i < n && i < 1u << 20; ++i)
      w.members.push_back(static_cast<int>(std::strtol(end, &end, 10)));
    const std::size_t bar = s.find('|');
    if (bar != std::string::npos) w.what = s.substr(bar + 1);
    return w;
  }
};

class mpi_watchdog {
 public:
  static constexpr int query_tag = 7101, reply_tag = 7102, verdict_tag = 7103;

  // Collective over `comm` (duplicated: the watchdog's messages never meet others).
  void start(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  void release() {
    if (comm_ == MPI_COMM_NULL) return;
    serve();
    int from = 0;
    std::string late;
    while (poll(reply_tag, from, late)) {  // late answers to a round that ended: dropped
    }
    for (outgoing& o : sends_) MPI_Request_free(&o.request);  // delivered or dropped
    sends_.clear();
    MPI_Comm_free(&comm_);
  }
  MPI_Comm communicator() const { return comm_; }

  // Seconds a rank waits before it asks every rank what it waits in.
  double bound() const { return bound_; }
  void set_bound(double seconds) { bound_ = seconds > 0 ? seconds : 1e-3; }

  // Waits for `requests` (a non-blocking collective, or a group's handshake, described by
  // `w`), serving queries and looking for a deadlock meanwhile. Aborts the job when it finds
  // one.
  void wait(MPI_Request& request, mpi_wait w) { wait(std::span<MPI_Request>(&request, 1), w); }
  void wait(std::span<MPI_Request> requests, mpi_wait w) {
    w.id = ++waits_;
    const auto start = clock::now();
    current_ = std::move(w);
    round_ = {};
    auto next_round = start + seconds(bound_);
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                  MPI_STATUSES_IGNORE);
      if (done) break;
      const auto now = clock::now();
      current_.waited = std::chrono::duration<double>(now - start).count();
      serve();
      if (!round_.open && now >= next_round) ask();
      if (round_.open && collect()) {
        if (!judge()) {
          round_ = {};
          next_round = clock::now() + seconds(bound_ / 2);
        }
      }
      std::this_thread::yield();  // ranks may outnumber cores: let a computing peer run
    }
    current_ = {};
    if (round_.open) round_ = {};  // its late answers are recognised as stale and dropped
  }

 private:
  using clock = std::chrono::steady_clock;
  static clock::duration seconds(double s) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
  }

  struct outgoing {
    MPI_Request request = MPI_REQUEST_NULL;
    std::string payload;
  };
  struct round_state {
    bool open = false;
    std::uint64_t number = 0;
    std::size_t answered = 0;
    std::vector<mpi_wait> answers;
    std::vector<char> have;
  };

  void send(int to, int tag, std::string payload) {
    sends_.push_back({MPI_REQUEST_NULL, std::move(payload)});
    outgoing& o = sends_.back();
    MPI_Isend(o.payload.data(), static_cast<int>(o.payload.size()), MPI_CHAR, to, tag, comm_,
              &o.request);
  }
  // Receives a pending message of `tag` from any rank: true, with its sender and text; false
  // when none is pending.
  bool poll(int tag, int& from, std::string& text) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st);
    if (!flag) return false;
    from = st.MPI_SOURCE;
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    text.assign(static_cast<std::size_t>(n), '\0');
    MPI_Recv(text.data(), n, MPI_CHAR, from, tag, comm_, MPI_STATUS_IGNORE);
    return true;
  }

  // Answers pending queries with this rank's wait; a verdict from a peer aborts the job.
  void serve() {
    int from = 0;
    std::string text;
    while (poll(query_tag, from, text)) send(from, reply_tag, text + '\n' + current_.encode());
    if (poll(verdict_tag, from, text)) {
      std::fprintf(stderr,
                   "typeshard: rank %d of %d: rank %s found a collective deadlock (its report "
                   "lists every rank); this rank waits in %s\n",
                   rank_, size_, text.c_str(), current_.what.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    while (!sends_.empty()) {  // completed sends, oldest first
      int done = 0;
      MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) break;
      sends_.pop_front();
    }
  }

  // Starts a round: asks every other rank what it waits in.
  void ask() {
    round_.open = true;
    round_.number = ++rounds_;
    round_.answered = 1;
    round_.answers.assign(static_cast<std::size_t>(size_), {});
    round_.have.assign(static_cast<std::size_t>(size_), 0);
    round_.answers[static_cast<std::size_t>(rank_)] = current_;
    round_.have[static_cast<std::size_t>(rank_)] = 1;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) send(r, query_tag, std::to_string(round_.number));
  }

  // Reads answers; true when every rank has answered the open round.
  bool collect() {
    int from = 0;
    std::string s;
    while (poll(reply_tag, from, s)) {
      const std::size_t nl = s.find('\n');
      if (nl == std::string::npos) continue;
      if (std::strtoull(s.c_str(), nullptr, 10) != round_.number) continue;  // stale
      const auto r = static_cast<std::size_t>(from);
      if (round_.have[r]) continue;
      round_.have[r] = 1;
      round_.answers[r] = mpi_wait::decode(s.substr(nl + 1));
      ++round_.answered;
    }
    return round_.answered == static_cast<std::size_t>(size_);
  }

  // Whether the answers of the round show a wait that can complete (or a rank that has
  // not waited long): then no deadlock.
  bool can_progress(const std::vector<mpi_wait>& a) const {
    bool all_finalizing = true;
    for (const mpi_wait& w : a) {
      if (w.kind == mpi_wait::none || w.waited < bound_ / 2) return true;
      all_finalizing = all_finalizing && w.kind == mpi_wait::finalizing;
    }
    if (all_finalizing) return true;
    for (const mpi_wait& w : a) {
      if (w.kind != mpi_wait::collective) continue;
      bool complete = true;
      for (int m : w.members) {
        const mpi_wait& p = a[static_cast<std::size_t>(m)];
        complete = complete && p.kind == mpi_wait::collective && p.group_key == w.group_key &&
                   p.group_seq == w.group_seq;
      }
      if (complete) return true;
    }
    return false;
  }

  // Judges a complete round: false when no deadlock can be concluded (the caller waits on);
  // another round when this one looks deadlocked for the first time; the report and
  // MPI_Abort when two rounds in a row show the same deadlocked waits.
  bool judge() {
    if (can_progress(round_.answers)) {
      suspect_.clear();
      return false;
    }
    bool same = suspect_.size() == round_.answers.size();
    for (std::size_t r = 0; same && r < suspect_.size(); ++r)
      same = suspect_[r].id == round_.answers[r].id;
    if (!same) {
      suspect_ = round_.answers;
      ask();  // confirm with a second round
      return true;
    }
    report(round_.answers);
  }

  [[noreturn]] void report(const std::vector<mpi_wait>& a) {
    std::string out = "typeshard: rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) +
                      ": collective deadlock (TYPESHARD_MPI_CHECK, after " +
                      std::to_string(static_cast<int>(bound_ * 1000)) +
                      " ms of waiting): every rank waits and no wait can complete\n";
    for (std::size_t r = 0; r < a.size(); ++r)
      out += "typeshard:   rank " + std::to_string(r) + " waits in " + a[r].what + '\n';
    out += "typeshard: (a rank's collective #N is the N-th typeshard collective it called, "
           "counted from its first)\n"
           "typeshard: every rank must call the same collectives over each group in the same "
           "order, and stay in the job until every rank is done with typeshard\n";
    out += "typeshard: rank " + std::to_string(rank_) +
           " aborts the MPI job (MPI_Abort, exit status 1)\n";
    std::fputs(out.c_str(), stderr);
    std::fflush(stderr);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) send(r, verdict_tag, std::to_string(rank_));
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double bound_ = 5.0;
  std::uint64_t waits_ = 0, rounds_ = 0;
  mpi_wait current_;
  round_state round_;
  std::vector<mpi_wait> suspect_;
  std::deque<outgoing> sends_;
};

}  // namespace typeshard::detail
