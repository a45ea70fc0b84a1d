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
#include "detail/mpi_abort.hpp"
#include "detail/mpi_call_checks.hpp"
#include "detail/mpi_collectives.hpp"
#include "detail/mpi_watchdog.hpp"
#include "detail/reduce_kernels.hpp"
#include "../core/errors.hpp"
#include "backend.hpp"
#include "collective_observer.hpp"

namespace typeshard {

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
                 std::to_string(checker_.collectives());
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
    detail::mpi_all_gather(c, types_, scratch_, g, t, send, recv, rows, counts);
  }

  void do_reduce_scatter(const collective_group& g, element_type t, reduce_op op,
                         const void* send, void* recv, std::size_t rows,
                         std::span<const std::size_t> counts, std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::reduce_scatter);
    verify(c, g, signature, collective_kind::reduce_scatter);
    detail::mpi_reduce_scatter(c, types_, scratch_, g, t, op, send, recv, rows, counts);
  }

  void do_all_reduce(const collective_group& g, element_type t, reduce_op op, const void* send,
                     void* recv, std::size_t n, std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::all_reduce);
    verify(c, g, signature, collective_kind::all_reduce);
    detail::mpi_all_reduce(c, types_, t, op, send, recv, n);
  }

  void do_all_to_all(const collective_group& g, element_type t, const void* send, void* recv,
                     const strided_pieces& send_pieces, const strided_pieces& recv_pieces,
                     std::uint64_t signature) override {
    const MPI_Comm c = group_comm(g, collective_kind::all_to_all);
    verify(c, g, signature, collective_kind::all_to_all);
    detail::mpi_all_to_all(c, types_, t, send, recv, send_pieces, recv_pieces);
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
    checker_.set_rank(rank_);
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
    if (checks_) checker_.handshake(g, ranks_, kind);
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

  void verify(MPI_Comm c, const collective_group& g, std::uint64_t signature,
              collective_kind kind) {
    if (!checks_) return;
    checker_.gather_calls(c, g, *group_ranks_, group_info_->collectives, kind, signature, 0, 0);
  }

  void verify_permutation(MPI_Comm c, const collective_group& g, std::uint64_t signature,
                          std::size_t send_count, std::size_t send_to, std::size_t recv_count,
                          std::size_t recv_from) {
    const auto calls = checker_.gather_calls(c, g, *group_ranks_, group_info_->collectives,
                                             collective_kind::permute, signature, send_to,
                                             send_count);
    for (std::size_t j = 0; j < g.size(); ++j)
      if (calls[j].send_to == g.rank && j != recv_from)
        throw_not_a_permutation(j, g.rank, recv_from);
    if (recv_from != no_peer && (calls[recv_from].send_to != g.rank ||
                                 calls[recv_from].send_count != recv_count))
      throw_permute_count_mismatch(g.rank, recv_count, recv_from, calls[recv_from].send_count,
                                   calls[recv_from].send_to);
  }

  static int count(std::size_t n) { return detail::mpi_count(n, "a collective"); }

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
  detail::mpi_watchdog watch_;
  detail::mpi_call_checks checker_{watch_};
  detail::mpi_types types_;
  detail::mpi_scratch scratch_;
  std::vector<int> ranks_;
};

}  // namespace typeshard
