// typeshard/backend/mpi.hpp: the MPI backend, one device per rank (link typeshard::mpi).
//
//   #include <typeshard/typeshard.hpp>
//   #include <typeshard/backend/mpi.hpp>
//   int main(int argc, char** argv) {
//     ts::mpi_devices devices{argc, argv};   // instead of ts::cpu_devices devices{4};
//     ts::device_mesh<mesh_2x2> m{devices};  // mpirun -np 4: rank r is device r
//     ...                                    // the rest of the program is unchanged
//   }
//
// SPMD, as JAX's multi-process mode: every rank runs the whole program. An operation on a
// device mesh runs its per-device function for this rank's device only; the collectives
// inside it are MPI's own, on one communicator per group of ranks (made on first use and
// kept). Only the C API of MPI is used.
//
// How the primitives of backend.hpp map onto MPI:
//   all_gather      MPI_Allgather (one row, or rows as a resized MPI_Type_vector);
//                   MPI_Allgatherv for unequal pieces (several rows: staged, then placed)
//   reduce_scatter  MPI_Reduce_scatter_block / MPI_Reduce_scatter (several rows: the input
//                   is first laid out member-major, as MPI scatters contiguous segments)
//   all_reduce      MPI_Allreduce (MPI_IN_PLACE when send == recv)
//   all_to_all      MPI_Alltoall, a piece being a resized MPI_Type_vector on each side
//                   (plain counts when pieces are consecutive runs)
//   permute         MPI_Sendrecv, MPI_PROC_NULL where there is no peer
//
// Differences from the thread pool (cpu_devices), none of which needs a change in code:
// - Reduction order. The thread pool sums in group-rank order; MPI_Allreduce and
//   MPI_Reduce_scatter pick their own order (recursive doubling, rings, ...), so a float
//   sum may differ from the thread pool's in the last bits (integers are exact). Every
//   member still receives the same bits from one call.
// - Failures. An exception escaping a per-device function cannot release the peers that
//   wait for this rank inside an MPI collective (MPI has no way to cancel one), so the
//   backend prints the error with the rank and calls MPI_Abort: the whole job stops with a
//   non-zero exit, never hangs. The thread pool instead rethrows a device_error to the
//   caller. Errors raised outside per-device functions (shape checks, rule 6, a device mesh
//   that does not fit the job) are thrown as usual, on every rank alike.
// - Checks. The thread pool diagnoses members that call different collectives (or a
//   ppermute that is not a permutation) and deadlocks; on MPI that costs one more
//   (non-blocking) collective per call, so it is off unless TYPESHARD_MPI_CHECK=1 is set in
//   the environment (the same on every rank). With it, members that disagree abort the job
//   with what each called, and a deadlock (collectives called in crossing orders over
//   different groups, a rank that destroyed its mpi_devices while peers wait for it) is
//   reported by the watchdog (detail/mpi_watchdog.hpp) with every rank's pending collective
//   within about twice TYPESHARD_MPI_CHECK_TIMEOUT seconds (default 5) of the last rank
//   starting to wait, then the job aborts (exit status 1). Without it a mismatch is MPI's
//   undefined behaviour (an error, a hang, or wrong data) and an early exit hangs the job
//   (docs/mpi.md).
// - Threads. MPI is initialised with MPI_THREAD_SERIALIZED; operations run one at a time.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "detail/function_ref.hpp"
#include "detail/mpi_datatypes.hpp"
#include "detail/call_site.hpp"
#include "detail/mpi_watchdog.hpp"
#include "detail/reduce_kernels.hpp"
#include "../core/errors.hpp"
#include "backend.hpp"
#include "collective_observer.hpp"

namespace typeshard {

namespace detail {

// What a rank prints before aborting the job: which rank, and why.
[[noreturn]] inline void mpi_abort_job(const std::string& message) {
  int rank = -1, size = 0, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::fprintf(stderr,
               "typeshard: rank %d of %d: %s\ntypeshard: rank %d aborts the MPI job "
               "(MPI_Abort): other ranks may be waiting for it in a collective, and MPI "
               "cannot release them\n",
               rank, size, message.c_str(), rank);
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

// The message of the exception being handled.
inline std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

// std::terminate while mpi_devices owns MPI (an exception escaped main, say): abort the
// job with the message, instead of leaving the other ranks blocked until mpirun notices.
inline void mpi_terminate_handler() {
  std::string what = "std::terminate was called";
  if (std::current_exception()) what = "uncaught exception: " + current_exception_message();
  mpi_abort_job(what);
}

}  // namespace detail

class mpi_devices final : public backend {
 public:
  // Initialises MPI (MPI_Init_thread) unless the program already did; then this object
  // owns MPI and finalises it when destroyed. The devices are the ranks of MPI_COMM_WORLD.
  // Every rank must construct it (it is collective, as MPI_Init is).
  mpi_devices(int& argc, char**& argv) { start(&argc, &argv); }
  mpi_devices() { start(nullptr, nullptr); }

  // Adopts an MPI the program initialised itself: the devices are the ranks of `comm`
  // (device d = rank d), which typeshard duplicates so that its messages never meet the
  // program's. Never finalises MPI. Collective over `comm`.
  explicit mpi_devices(MPI_Comm comm) { adopt(comm); }

  mpi_devices(const mpi_devices&) = delete;
  mpi_devices& operator=(const mpi_devices&) = delete;

  // Frees typeshard's communicators and types; finalises MPI if this object initialised it.
  // Destroyed by an exception that leaves its scope, an owner aborts the job instead:
  // MPI_Finalize would wait for ranks that may themselves wait for this one.
  ~mpi_devices() override {
    if (owns_mpi_ && std::uncaught_exceptions() > 0)
      detail::mpi_abort_job("an exception is leaving the scope of ts::mpi_devices (catch it "
                            "inside that scope to handle it)");
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      // With checks on, leave only with every rank (a peer may still wait for this one in a
      // collective: the watchdog reports that instead of MPI_Finalize hanging).
      if (checks_) {
        MPI_Request barrier = MPI_REQUEST_NULL;
        MPI_Ibarrier(watch_.communicator(), &barrier);
        detail::mpi_wait w;
        w.kind = detail::mpi_wait::finalizing;
        w.what = "the destruction of ts::mpi_devices (this rank is done with typeshard: it "
                 "returned from main or left the backend's scope), after its collective #" +
                 std::to_string(collectives_);
        watch_.wait(barrier, std::move(w));
      }
      watch_.release();
      types_.release();
      for (auto& [ranks, c] : comms_) MPI_Comm_free(&c.comm);
      MPI_Group_free(&group_);
      MPI_Comm_free(&comm_);
      if (owns_mpi_) MPI_Finalize();
    }
    if (owns_mpi_) std::set_terminate(previous_terminate_);
  }

  std::size_t device_count() const override { return static_cast<std::size_t>(size_); }
  bool is_addressable(device_id d) const override { return d == local_device(); }
  std::string_view platform() const override { return "cpu"; }
  std::size_t process_index() const override { return static_cast<std::size_t>(rank_); }
  std::size_t process_count() const override { return static_cast<std::size_t>(size_); }

  // This rank's device (its rank in the communicator).
  device_id local_device() const { return static_cast<device_id>(rank_); }
  // typeshard's duplicate of the communicator, for programs that mix in MPI calls of
  // their own on the same ranks.
  MPI_Comm communicator() const { return comm_; }
  // Whether every collective is checked (TYPESHARD_MPI_CHECK=1); settable per backend, the
  // same on every rank, before the first operation.
  bool checks_collectives() const { return checks_; }
  void check_collectives(bool on) { checks_ = on; }
  // With checks on: how long a rank waits in a collective before the watchdog asks every
  // rank what it waits in (TYPESHARD_MPI_CHECK_TIMEOUT, seconds, default 5). A deadlock is
  // reported within about twice this after the last rank starts to wait.
  double check_timeout() const { return watch_.bound(); }
  void check_timeout(double seconds) { watch_.set_bound(seconds); }

  // A mesh taken implicitly (device_mesh<M>{devices}) must span every rank: a rank left
  // out would idle through the program, which is almost always a wrong -np.
  void check_default_mesh(std::size_t mesh_size, const std::string& mesh) const override {
    if (mesh_size != device_count())
      throw device_mesh_error(
          "typeshard: " + mesh + " has " + std::to_string(mesh_size) +
          " devices but this MPI job has " + std::to_string(device_count()) +
          " ranks (one device per rank); start it with mpirun -np " +
          std::to_string(mesh_size) +
          ", or give device_mesh an explicit device list to use only some of the ranks");
  }

  // Runs body(i) for the i with devices[i] == this rank, if any, on this thread. An
  // exception escaping it aborts the job (see the top of this file).
  void do_run(std::span<const device_id> devices,
              detail::function_ref<void(std::size_t)> body) override {
    std::size_t mine = devices.size();
    for (std::size_t i = 0; i < devices.size(); ++i)
      if (devices[i] == local_device()) mine = i;
    if (mine == devices.size()) return;  // this rank's device takes no part

    std::lock_guard operation(run_mutex_);  // MPI_THREAD_SERIALIZED: one at a time
    devices_ = devices;
    index_ = mine;
    running() = this;
    try {
      body(mine);
    } catch (...) {
      running() = nullptr;
      detail::mpi_abort_job("the function running on device " + std::to_string(rank_) +
                            " threw: " + detail::current_exception_message());
    }
    running() = nullptr;
    devices_ = {};
  }

  // ---- collectives (see backend.hpp for the contracts) ----------------------------------

  void do_all_gather(const collective_group& g, element_type t, const void* send, void* recv,
                     std::size_t rows, std::span<const std::size_t> counts,
                     std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::all_gather);
    verify(c, g, signature, collective_kind::all_gather);
    const std::size_t total = sum(counts);
    if (rows == 0 || total == 0) return;
    const MPI_Datatype e = types_.element(t);
    if (all_equal(counts)) {
      const std::size_t k = counts[0];
      if (rows == 1)
        detail::mpi_check(MPI_Allgather(send, count(k), e, recv, count(k), e, c), "MPI_Allgather");
      else  // member j's piece: `rows` runs of k elements, `total` apart, from column j * k
        detail::mpi_check(MPI_Allgather(send, count(rows * k), e, recv, 1,
                                        types_.strided(t, rows, k, total, k), c),
                          "MPI_Allgather");
      return;
    }
    // Unequal pieces (uneven shards): MPI_Allgatherv of contiguous pieces. One row lands in
    // place; several rows are staged member-major, then placed row by row.
    const std::size_t n = g.size();
    icounts_.resize(n);
    idispls_.resize(n);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < n; ++j) {
      icounts_[j] = count(rows * counts[j]);
      idispls_[j] = count(rows * offset);
      offset += counts[j];
    }
    if (rows == 1) {
      detail::mpi_check(MPI_Allgatherv(send, icounts_[g.rank], e, recv, icounts_.data(),
                                       idispls_.data(), e, c),
                        "MPI_Allgatherv");
      return;
    }
    unsigned char* stage = staging(rows * total * t.size);
    detail::mpi_check(MPI_Allgatherv(send, icounts_[g.rank], e, stage, icounts_.data(),
                                     idispls_.data(), e, c),
                      "MPI_Allgatherv");
    auto* out = static_cast<unsigned char*>(recv);
    offset = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t bytes = counts[j] * t.size;
      if (bytes != 0)
        for (std::size_t r = 0; r < rows; ++r)
          std::memcpy(out + (r * total + offset) * t.size,
                      stage + (rows * offset + r * counts[j]) * t.size, bytes);
      offset += counts[j];
    }
  }

  void do_reduce_scatter(const collective_group& g, element_type t, reduce_op op,
                         const void* send, void* recv, std::size_t rows,
                         std::span<const std::size_t> counts, std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::reduce_scatter);
    verify(c, g, signature, collective_kind::reduce_scatter);
    const std::size_t total = sum(counts);
    if (rows == 0 || total == 0) return;
    const MPI_Datatype e = types_.element(t);
    const MPI_Op o = types_.op(op, t.kind);
    const std::size_t n = g.size();
    // MPI scatters contiguous segments of the input: with several rows, lay the input out
    // member-major first ([member][rows][counts[j]]).
    const void* in = send;
    if (rows > 1) {
      unsigned char* stage = staging(rows * total * t.size);
      const auto* src = static_cast<const unsigned char*>(send);
      std::size_t offset = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t bytes = counts[j] * t.size;
        if (bytes != 0)
          for (std::size_t r = 0; r < rows; ++r)
            std::memcpy(stage + (rows * offset + r * counts[j]) * t.size,
                        src + (r * total + offset) * t.size, bytes);
        offset += counts[j];
      }
      in = stage;
    }
    if (all_equal(counts)) {
      detail::mpi_check(MPI_Reduce_scatter_block(in, recv, count(rows * counts[0]), e, o, c),
                        "MPI_Reduce_scatter_block");
      return;
    }
    icounts_.resize(n);
    for (std::size_t j = 0; j < n; ++j) icounts_[j] = count(rows * counts[j]);
    detail::mpi_check(MPI_Reduce_scatter(in, recv, icounts_.data(), e, o, c),
                      "MPI_Reduce_scatter");
  }

  void do_all_reduce(const collective_group& g, element_type t, reduce_op op, const void* send,
                     void* recv, std::size_t n, std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::all_reduce);
    verify(c, g, signature, collective_kind::all_reduce);
    if (n == 0) return;
    detail::mpi_check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, count(n),
                                    types_.element(t), types_.op(op, t.kind), c),
                      "MPI_Allreduce");
  }

  void do_all_to_all(const collective_group& g, element_type t, const void* send, void* recv,
                     const strided_pieces& send_pieces, const strided_pieces& recv_pieces,
                     std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::all_to_all);
    verify(c, g, signature, collective_kind::all_to_all);
    if (send_pieces.elements() == 0) return;
    const auto plain = [](const strided_pieces& l) {  // piece j is elements [j*k, (j+1)*k)
      return l.rows == 1 && l.member_stride == l.run;
    };
    if (plain(send_pieces) && plain(recv_pieces)) {
      const int k = count(send_pieces.run);
      const MPI_Datatype e = types_.element(t);
      detail::mpi_check(MPI_Alltoall(send, k, e, recv, k, e, c), "MPI_Alltoall");
      return;
    }
    const MPI_Datatype s = types_.strided(t, send_pieces.rows, send_pieces.run,
                                          send_pieces.stride, send_pieces.member_stride);
    const MPI_Datatype r = types_.strided(t, recv_pieces.rows, recv_pieces.run,
                                          recv_pieces.stride, recv_pieces.member_stride);
    detail::mpi_check(MPI_Alltoall(send, 1, s, recv, 1, r, c), "MPI_Alltoall");
  }

  void do_permute(const collective_group& g, element_type t, const void* send,
                  std::size_t send_count, std::size_t send_to, void* recv,
                  std::size_t recv_count, std::size_t recv_from,
                  std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::permute);
    if (checks_) verify_permutation(c, g, signature, send_count, send_to, recv_count, recv_from);
    // The group communicator ranks members in group order, so a member is its own rank.
    const int dest = send_to == no_peer ? MPI_PROC_NULL : static_cast<int>(send_to);
    const int source = recv_from == no_peer ? MPI_PROC_NULL : static_cast<int>(recv_from);
    const MPI_Datatype e = types_.element(t);
    MPI_Status status;
    const int rc = MPI_Sendrecv(send, count(send_count), e, dest, permute_tag, recv,
                                count(recv_count), e, source, permute_tag, c, &status);
    if (rc != MPI_SUCCESS) {
      int cls = 0;
      MPI_Error_class(rc, &cls);
      if (cls == MPI_ERR_TRUNCATE)
        throw usage_error("typeshard: ppermute: member " + std::to_string(g.rank) +
                          " expects " + std::to_string(recv_count) + " elements from member " +
                          std::to_string(recv_from) +
                          ", which sends more; senders and receivers must agree");
      detail::mpi_check(rc, "MPI_Sendrecv");
    }
    if (source == MPI_PROC_NULL) {
      // No source: zeros, as JAX's ppermute gives.
      if (recv_count != 0) std::memset(recv, 0, recv_count * t.size);
      return;
    }
    int got = 0;
    MPI_Get_count(&status, e, &got);
    if (static_cast<std::size_t>(got) != recv_count)
      throw_permute_count_mismatch(g.rank, recv_count, recv_from,
                                   static_cast<std::size_t>(got), no_peer);
  }

 private:
  static constexpr int permute_tag = 0;
  static constexpr int create_tag = 0;

  void start(int* argc, char*** argv) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
      throw usage_error(
          "typeshard: mpi_devices: MPI is already finalized and cannot be initialised again; "
          "create the mpi_devices before MPI_Finalize (or let it own MPI)");
    if (!initialized) {
      int provided = 0;
      if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw error("typeshard: mpi_devices: MPI_Init_thread failed; is this program started "
                    "by mpirun (or as a singleton) with a working MPI installation?");
      owns_mpi_ = true;
      previous_terminate_ = std::set_terminate(&detail::mpi_terminate_handler);
    }
    adopt(MPI_COMM_WORLD);
  }

  void adopt(MPI_Comm comm) {
    detail::mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_group(comm_, &group_);
    watch_.start(comm_);
    const char* check = std::getenv("TYPESHARD_MPI_CHECK");
    checks_ = check != nullptr && *check != '\0' && std::string_view(check) != "0";
    const char* timeout = std::getenv("TYPESHARD_MPI_CHECK_TIMEOUT");
    if (timeout != nullptr && std::atof(timeout) > 0) watch_.set_bound(std::atof(timeout));
  }

  // The backend running a per-device function on this thread, if any.
  static const mpi_devices*& running() {
    thread_local const mpi_devices* backend = nullptr;
    return backend;
  }

  body_position current_body() const override {
    if (running() != this) return {};
    return {true, devices_.size(), index_};
  }

  std::string devices_summary() const override {
    return "this MPI job has " + std::to_string(device_count()) + " ranks, so devices 0 to " +
           std::to_string(device_count() - 1) + "; start it with more ranks (mpirun -np)";
  }

  // The communicator of a group: its members' ranks in group order, so that group rank j
  // is communicator rank j. Made on first use with MPI_Comm_create_group, which is
  // collective over the group only (MPI_Comm_split would need every rank, including ranks
  // outside a mesh that uses a subset of them), and kept: never made per call.
  // (backend::check_group has checked the group: the caller is its member `rank`, and every
  // member is a device of the current run, once.)
  MPI_Comm group_comm(const collective_group& g, collective_kind kind) {
    ranks_.clear();
    for (std::size_t m : g.members) ranks_.push_back(static_cast<int>(devices_[m]));
    auto it = comms_.find(ranks_);
    if (it != comms_.end()) {
      group_ranks_ = &it->first;
      group_info_ = &it->second;
      return it->second.comm;
    }
    if (checks_) handshake(g, kind);
    MPI_Group members = MPI_GROUP_NULL;
    detail::mpi_check(MPI_Group_incl(group_, static_cast<int>(ranks_.size()), ranks_.data(),
                                     &members),
                      "MPI_Group_incl");
    MPI_Comm c = MPI_COMM_NULL;
    const int rc = MPI_Comm_create_group(comm_, members, create_tag, &c);
    MPI_Group_free(&members);
    detail::mpi_check(rc, "MPI_Comm_create_group");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    const auto made = comms_.emplace(ranks_, group_state{c, 0}).first;
    group_ranks_ = &made->first;
    group_info_ = &made->second;
    return c;
  }

  // TYPESHARD_MPI_CHECK: what every member calls (its signature, the collective, its own
  // collective number and, for permute, its peer and count), gathered without blocking
  // (MPI_Iallgather, waited for by the watchdog) and compared, as the thread pool compares
  // them, with its call site ("file:line", at most call_site_bytes - 1 characters). Only when
  // every member has arrived does the collective itself run.
  static constexpr std::size_t call_site_bytes = 96;
  struct call_record {
    std::uint64_t signature, kind, number, send_to, send_count;
    char site[call_site_bytes];
  };
  void gather_calls(MPI_Comm c, const collective_group& g, collective_kind kind,
                    std::uint64_t signature, std::uint64_t send_to, std::uint64_t send_count) {
    ++collectives_;
    const std::uint64_t group_number = ++group_info_->collectives;
    call_record mine{signature, static_cast<std::uint64_t>(kind), collectives_, send_to,
                     send_count, {}};
    const std::string site = detail::format_call_site(detail::current_call_site(),
                                                      call_site_bytes - 1);
    std::memcpy(mine.site, site.data(), site.size());  // fits: call_site_bytes - 1 at most
    calls_.resize(g.size());
    MPI_Request request = MPI_REQUEST_NULL;
    constexpr int bytes = static_cast<int>(sizeof(call_record));
    detail::mpi_check(MPI_Iallgather(&mine, bytes, MPI_BYTE, calls_.data(), bytes, MPI_BYTE, c,
                                     &request),
                      "MPI_Iallgather");
    detail::mpi_wait w;
    w.kind = detail::mpi_wait::collective;
    w.members = *group_ranks_;
    w.group_seq = group_number;
    w.group_key = key_of(w.members);
    w.what = describe_collective(kind, g, group_number, collectives_, site);
    watch_.wait(request, std::move(w));
    for (call_record& r : calls_) r.site[call_site_bytes - 1] = '\0';
    for (const call_record& r : calls_)
      if (r.signature != signature) throw_calls_differ(g, group_number);
  }

  // A group's identity in the watchdog's answers: FNV-1a over its ranks.
  static std::uint64_t key_of(const std::vector<int>& ranks) {
    std::uint64_t key = 1469598103934665603ull;
    for (int r : ranks) key = (key ^ static_cast<std::uint64_t>(r)) * 1099511628211ull;
    return key;
  }

  // TYPESHARD_MPI_CHECK, before a group's communicator is made (MPI_Comm_create_group blocks
  // until every member calls it): every member tells every other which group it is about to
  // make, point to point on the watchdog's communicator, and waits for theirs under the
  // watchdog. Members that make the communicators of different groups in crossing orders
  // are reported as a deadlock (they wait for each other) or, when their messages cross, as
  // a usage_error here.
  void handshake(const collective_group& g, collective_kind kind) {
    static constexpr int handshake_tag = 7104;
    const std::uint64_t key = key_of(ranks_);
    const std::size_t n = ranks_.size();
    std::vector<std::uint64_t> theirs(n, key);
    std::vector<MPI_Request> requests;
    const MPI_Comm w = watch_.communicator();
    for (std::size_t j = 0; j < n; ++j) {
      if (ranks_[j] == rank_) continue;
      requests.emplace_back();
      MPI_Isend(&key, 1, MPI_UINT64_T, ranks_[j], handshake_tag, w, &requests.back());
      requests.emplace_back();
      MPI_Irecv(&theirs[j], 1, MPI_UINT64_T, ranks_[j], handshake_tag, w, &requests.back());
    }
    detail::mpi_wait wait;
    wait.kind = detail::mpi_wait::collective;
    wait.members = ranks_;
    wait.group_key = key;
    wait.group_seq = 0;
    group_ranks_ = &ranks_;
    wait.what = describe_collective(kind, g, 1, collectives_ + 1) +
                " (before the group's first collective: making its communicator)";
    watch_.wait(std::span<MPI_Request>(requests), std::move(wait));
    for (std::size_t j = 0; j < n; ++j)
      if (theirs[j] != key)
        throw usage_error(
            "typeshard: ranks " + std::to_string(rank_) + " and " + std::to_string(ranks_[j]) +
            " entered the collectives of different groups in crossing orders (rank " +
            std::to_string(rank_) + ": " + describe_collective(kind, g, 1, collectives_ + 1) +
            "); every device must call the same collectives in the same order");
  }

  // "all_reduce over \"x\" (group of ranks [0, 2]) at f.cpp:31: that group's collective #1,
  // rank 0's collective #3".
  std::string describe_collective(collective_kind kind, const collective_group& g,
                                  std::uint64_t group_number, std::uint64_t number,
                                  const std::string& site = detail::format_call_site(
                                      detail::current_call_site())) const {
    std::string axes;
    for (const detail::axis_name& a : g.axes) {
      if (!axes.empty()) axes += ',';
      axes.append(a.chars, a.length);
    }
    if (axes.empty() && g.purpose != nullptr) axes = g.purpose;
    std::string out = std::string(to_string(kind)) + " over \"" + axes + "\" (group of ranks [";
    for (std::size_t j = 0; j < group_ranks_->size(); ++j)
      out += (j ? ", " : "") + std::to_string((*group_ranks_)[j]);
    return out + "]) at " + site +
           ": that group's collective #" + std::to_string(group_number) + ", rank " +
           std::to_string(rank_) + "'s collective #" + std::to_string(number);
  }

  [[noreturn]] void throw_calls_differ(const collective_group& g, std::uint64_t group_number) {
    std::string out =
        "typeshard: the devices of a collective group called different collectives (or the "
        "same with different sizes or element types); every device must call the same "
        "collectives in the same order. Collective #" + std::to_string(group_number) +
        " of the group of ranks [";
    for (std::size_t j = 0; j < group_ranks_->size(); ++j)
      out += (j ? ", " : "") + std::to_string((*group_ranks_)[j]);
    out += "]:";
    for (std::size_t j = 0; j < g.size(); ++j) {
      const call_record& r = calls_[j];
      out += " rank " + std::to_string((*group_ranks_)[j]) + " called " +
             (r.kind <= static_cast<std::uint64_t>(collective_kind::permute)
                  ? to_string(static_cast<collective_kind>(r.kind))
                  : "?") +
             " at " + std::string(r.site) + " (signature " +
             std::to_string(r.signature % 100000) + ", its collective #" +
             std::to_string(r.number) + ")" + (j + 1 < g.size() ? ";" : "");
    }
    throw usage_error(out);
  }

  void verify(MPI_Comm c, const collective_group& g, std::uint64_t signature,
              collective_kind kind) {
    if (!checks_) return;
    gather_calls(c, g, kind, signature, 0, 0);
  }

  void verify_permutation(MPI_Comm c, const collective_group& g, std::uint64_t signature,
                          std::size_t send_count, std::size_t send_to, std::size_t recv_count,
                          std::size_t recv_from) {
    gather_calls(c, g, collective_kind::permute, signature, send_to, send_count);
    for (std::size_t j = 0; j < g.size(); ++j)
      if (calls_[j].send_to == g.rank && j != recv_from)
        throw_not_a_permutation(j, g.rank, recv_from);
    if (recv_from != no_peer && (calls_[recv_from].send_to != g.rank ||
                                 calls_[recv_from].send_count != recv_count))
      throw_permute_count_mismatch(g.rank, recv_count, recv_from, calls_[recv_from].send_count,
                                   calls_[recv_from].send_to);
  }

  static std::size_t sum(std::span<const std::size_t> counts) {
    std::size_t total = 0;
    for (std::size_t c : counts) total += c;
    return total;
  }
  static bool all_equal(std::span<const std::size_t> counts) {
    for (std::size_t c : counts)
      if (c != counts[0]) return false;
    return true;
  }
  static int count(std::size_t n) { return detail::mpi_count(n, "a collective"); }

  // A reusable staging area, grown as needed (never shrunk: the sizes repeat).
  unsigned char* staging(std::size_t bytes) {
    if (staging_.size() < bytes) staging_.resize(bytes);
    return staging_.data();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Group group_ = MPI_GROUP_NULL;
  int rank_ = 0;
  int size_ = 0;
  bool owns_mpi_ = false;
  bool checks_ = false;
  std::terminate_handler previous_terminate_ = nullptr;

  std::mutex run_mutex_;
  std::span<const device_id> devices_;  // the current run's devices, by run index
  std::size_t index_ = 0;               // this device's run index

  // A group's communicator and how many checked collectives it has run.
  struct group_state {
    MPI_Comm comm = MPI_COMM_NULL;
    std::uint64_t collectives = 0;
  };
  std::map<std::vector<int>, group_state> comms_;
  const std::vector<int>* group_ranks_ = nullptr;  // the last group_comm's group
  group_state* group_info_ = nullptr;
  std::uint64_t collectives_ = 0;  // checked collectives this rank has called
  detail::mpi_watchdog watch_;
  detail::mpi_types types_;
  std::vector<int> ranks_, icounts_, idispls_;
  std::vector<call_record> calls_;
  std::vector<unsigned char> staging_;
};

}  // namespace typeshard
