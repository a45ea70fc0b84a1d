// typeshard/backend/threads.hpp: the default backend, N simulated CPU devices on a pool of
// persistent std::threads (like XLA's --xla_force_host_platform_device_count=N).
//
//   ts::cpu_devices devices{8};   // 8 devices, any number of cores
//
// Each device is one thread that lives as long as the cpu_devices object, so a shard's
// memory is first touched, and then always computed on, by the same thread. N may exceed
// the number of cores: devices wait on condition variables, never spin.
//
// Collectives exchange buffers in place through shared memory: every member publishes its
// buffer pointers, one barrier, each member does its share of the copying or reducing
// straight between the members' buffers (no staging copies), one barrier so no buffer is
// released while a peer still reads it. Reductions are split: in all_reduce member r
// reduces slice r of every member's input and writes the result into every member's
// output; in reduce_scatter member r reduces only its own piece.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "detail/function_ref.hpp"
#include "detail/reduce_kernels.hpp"
#include "detail/stream_copy.hpp"
#include "../core/errors.hpp"
#include "backend.hpp"

namespace typeshard {

namespace detail {

// The rendezvous of one collective group within a run: how many members arrived in the
// current phase, and what each member passed to the current collective.
struct thread_group {
  struct call {
    const void* send = nullptr;
    void* recv = nullptr;
    std::uint64_t signature = 0;  // the arguments every member must agree on, hashed
    std::size_t peer = 0;         // permute: the member this one sends to
    std::size_t count = 0;        // permute: how many elements it sends
  };

  explicit thread_group(std::size_t members) : size(members), calls(members) {}

  std::size_t size;
  std::size_t arrived = 0;
  std::size_t phase = 0;
  std::condition_variable released;
  std::vector<call> calls;
};

// Orders member lists lexicographically; transparent, so a lookup by span allocates nothing.
struct members_less {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
};

// The shared state of one multi-device operation on the thread pool: the devices taking
// part, one rendezvous per collective group (made the first time the group meets), and
// the accounting that turns a would-be hang into an error.
//
// Every barrier of every group goes through one mutex, which keeps an exact count of the
// devices blocked in a barrier and of those whose function returned. When a device is
// about to block and every other device is blocked or finished, nobody can release it:
// the devices called collectives over different groups in different orders, or one
// skipped a collective the others wait in. The run is then aborted with a usage_error
// instead of hanging (an MPI job would hang). abort() releases every member waiting in an
// abortable barrier, now or later.
class thread_run {
 public:
  explicit thread_run(std::span<const device_id> devs) : devices(devs) {}

  std::span<const device_id> devices;

  thread_group& group(std::span<const std::size_t> members) {
    std::lock_guard lock(mutex_);
    auto it = groups_.find(members);
    if (it == groups_.end())
      it = groups_
               .emplace(std::vector<std::size_t>(members.begin(), members.end()),
                        std::make_unique<thread_group>(members.size()))
               .first;
    return *it->second;
  }

  // Blocks until every member of g arrived at this phase. An abortable wait throws
  // collective_aborted when the run is aborted first (usage_error when the abort was a
  // detected deadlock); the other kind waits for its members whatever happens, for a
  // phase every member is certain to reach.
  void arrive_and_wait(thread_group& g, bool abortable) {
    std::unique_lock lock(mutex_);
    if (abortable && aborted_) throw_aborted();
    const std::size_t phase = g.phase;
    if (++g.arrived == g.size) {
      g.arrived = 0;
      ++g.phase;
      blocked_ -= g.size - 1;  // its waiters are runnable again from this moment
      g.released.notify_all();
      return;
    }
    ++blocked_;
    check_deadlock_locked();
    g.released.wait(lock, [&] { return g.phase != phase || (abortable && aborted_); });
    if (g.phase == phase) {
      --blocked_;
      throw_aborted();
    }
  }

  // A device's function returned or threw: it will not arrive anywhere any more.
  void finished() {
    std::lock_guard lock(mutex_);
    ++finished_;
    check_deadlock_locked();
  }

  void abort() {
    std::lock_guard lock(mutex_);
    abort_locked();
  }

 private:
  // Nobody left to release the blocked devices. (After an abort for another reason the
  // waiters are on their way out already.)
  void check_deadlock_locked() {
    if (!aborted_ && blocked_ != 0 && blocked_ + finished_ == devices.size()) {
      deadlocked_ = true;
      abort_locked();
    }
  }

  void abort_locked() {
    aborted_ = true;
    for (auto& [members, g] : groups_) g->released.notify_all();
  }

  [[noreturn]] void throw_aborted() const {
    if (deadlocked_)
      throw usage_error(
          "typeshard: deadlock: every device still running waits in a collective that cannot "
          "complete (the devices called collectives over different groups in different "
          "orders, or some skipped a collective the others wait in); every device must call "
          "the same collectives in the same order");
    throw collective_aborted();
  }

  std::mutex mutex_;
  bool aborted_ = false;
  bool deadlocked_ = false;
  std::size_t blocked_ = 0;   // devices waiting in a barrier
  std::size_t finished_ = 0;  // devices whose function returned or threw
  std::map<std::vector<std::size_t>, std::unique_ptr<thread_group>, members_less> groups_;
};

// What the calling thread is doing: set while a device thread runs a body.
struct thread_device_context {
  thread_run* run = nullptr;
  std::size_t index = 0;  // position of this device in run->devices
};

inline thread_device_context& current_thread_device() {
  thread_local thread_device_context context;
  return context;
}

}  // namespace detail

class cpu_devices final : public backend {
 public:
  explicit cpu_devices(std::size_t count) {
    if (count == 0)
      throw usage_error(
          "typeshard: cpu_devices needs at least one device; pass the number of simulated "
          "devices, for example ts::cpu_devices devices{8}");
    workers_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) workers_.push_back(std::make_unique<worker>());
    for (std::size_t i = 0; i < count; ++i)
      workers_[i]->thread = std::thread([this, i] { work(*workers_[i]); });
  }

  cpu_devices(const cpu_devices&) = delete;
  cpu_devices& operator=(const cpu_devices&) = delete;

  // Waits for a running operation to finish, then stops and joins the device threads.
  ~cpu_devices() override {
    std::lock_guard operation(run_mutex_);
    for (auto& w : workers_) {
      {
        std::lock_guard lock(w->mutex);
        w->stop = true;
      }
      w->wake.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
  }

  std::size_t device_count() const override { return workers_.size(); }

  // ---- collectives (see backend.hpp for the contracts) ----------------------------------

  void all_gather(const collective_group& g, element_type t, const void* send, void* recv,
                  std::size_t rows, std::span<const std::size_t> counts) override {
    check_counts(g, counts, "all_gather");
    const std::uint64_t sig = signature({1, code(t), rows}, counts);
    collective(g, sig, send, recv, {}, [&](std::span<const detail::thread_group::call> calls) {
      // Pull: this member copies every member's pieces into its own output.
      const std::size_t total = sum(counts);
      std::size_t offset = 0;
      for (std::size_t j = 0; j < g.size(); ++j) {
        const auto* src = static_cast<const unsigned char*>(calls[j].send);
        auto* dst = static_cast<unsigned char*>(recv);
        const std::size_t bytes = counts[j] * t.size;
        if (bytes != 0)
          for (std::size_t r = 0; r < rows; ++r)
            std::memcpy(dst + (r * total + offset) * t.size, src + r * bytes, bytes);
        offset += counts[j];
      }
    });
  }

  void reduce_scatter(const collective_group& g, element_type t, reduce_op op,
                      const void* send, void* recv, std::size_t rows,
                      std::span<const std::size_t> counts) override {
    detail::check_reducible(t, op);
    check_counts(g, counts, "reduce_scatter");
    const std::uint64_t sig = signature({2, code(t), static_cast<std::size_t>(op), rows}, counts);
    collective(g, sig, send, recv, {}, [&](std::span<const detail::thread_group::call> calls) {
      // This member reduces its own piece of every row, chunk by chunk so the partial
      // result stays in cache while the members' inputs stream past it.
      const std::size_t total = sum(counts);
      std::size_t offset = 0;
      for (std::size_t j = 0; j < g.rank; ++j) offset += counts[j];
      const std::size_t mine = counts[g.rank];
      if (mine == 0) return;  // nothing to reduce (rows may be huge when a piece is empty)
      auto* dst = static_cast<unsigned char*>(recv);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < mine; c += chunk_elements(t)) {
          const std::size_t n = std::min(chunk_elements(t), mine - c);
          unsigned char* out = dst + (r * mine + c) * t.size;
          const std::size_t at = (r * total + offset + c) * t.size;
          std::memcpy(out, static_cast<const unsigned char*>(calls[0].send) + at, n * t.size);
          for (std::size_t j = 1; j < g.size(); ++j)
            detail::reduce_into(t, out, static_cast<const unsigned char*>(calls[j].send) + at, n,
                                op);
        }
    });
  }

  void all_reduce(const collective_group& g, element_type t, reduce_op op, const void* send,
                  void* recv, std::size_t count) override {
    detail::check_reducible(t, op);
    const std::uint64_t sig = signature({3, code(t), static_cast<std::size_t>(op), count}, {});
    collective(g, sig, send, recv, {}, [&](std::span<const detail::thread_group::call> calls) {
      // Member r reduces slice r of every input (in rank order, so every member gets the
      // same bits) into a cache-sized scratch, then writes it to every member's output.
      // Slice r is read and written by member r alone, so send == recv is safe.
      const std::size_t n = g.size();
      const std::size_t per = (count + n - 1) / n;
      const std::size_t begin = std::min(count, g.rank * per);
      const std::size_t end = std::min(count, begin + per);
      // Large outputs are written with streaming stores (detail/stream_copy.hpp).
      const bool stream = count * t.size >= detail::stream_threshold_bytes;
      alignas(64) unsigned char scratch[chunk_bytes];
      for (std::size_t c = begin; c < end; c += chunk_elements(t)) {
        const std::size_t len = std::min(chunk_elements(t), end - c);
        const std::size_t at = c * t.size;
        std::memcpy(scratch, static_cast<const unsigned char*>(calls[0].send) + at, len * t.size);
        for (std::size_t j = 1; j < n; ++j)
          detail::reduce_into(t, scratch, static_cast<const unsigned char*>(calls[j].send) + at,
                              len, op);
        for (std::size_t j = 0; j < n; ++j) {
          unsigned char* out = static_cast<unsigned char*>(calls[j].recv) + at;
          if (stream)
            detail::stream_copy(out, scratch, len * t.size);
          else
            std::memcpy(out, scratch, len * t.size);
        }
      }
      if (stream) detail::stream_fence();
    });
  }

  void all_to_all(const collective_group& g, element_type t, const void* send, void* recv,
                  const strided_pieces& send_pieces, const strided_pieces& recv_pieces) override {
    if (send_pieces.elements() != recv_pieces.elements())
      throw usage_error("typeshard: internal: all_to_all pieces of " +
                        std::to_string(send_pieces.elements()) + " and " +
                        std::to_string(recv_pieces.elements()) + " elements");
    const std::uint64_t sig =
        signature({4, code(t), send_pieces.elements()}, {});
    collective(g, sig, send, recv, {}, [&](std::span<const detail::thread_group::call> calls) {
      // Pull: this member (r) copies piece r of every member i's input to its piece i.
      for (std::size_t i = 0; i < g.size(); ++i)
        copy_piece(t, static_cast<const unsigned char*>(calls[i].send), send_pieces, g.rank,
                   static_cast<unsigned char*>(recv), recv_pieces, i);
    });
  }

  void permute(const collective_group& g, element_type t, const void* send,
               std::size_t send_count, std::size_t send_to, void* recv, std::size_t recv_count,
               std::size_t recv_from) override {
    if ((send_to != no_peer && send_to >= g.size()) ||
        (recv_from != no_peer && recv_from >= g.size()))
      throw usage_error("typeshard: permute: a peer rank is outside the group of " +
                        std::to_string(g.size()) + " members");
    const std::uint64_t sig = signature({5, code(t)}, {});
    collective(g, sig, send, recv, {send_to, send_count},
               [&](std::span<const detail::thread_group::call> calls) {
      for (std::size_t j = 0; j < g.size(); ++j)
        if (calls[j].peer == g.rank && j != recv_from)
          throw usage_error("typeshard: ppermute: member " + std::to_string(j) +
                            " sends to member " + std::to_string(g.rank) +
                            ", which receives from " +
                            (recv_from == no_peer ? std::string("nobody")
                                                  : "member " + std::to_string(recv_from)) +
                            "; give a permutation (each member sends to one and receives "
                            "from one)");
      if (recv_from != no_peer && (calls[recv_from].peer != g.rank ||
                                   calls[recv_from].count != recv_count))
        throw usage_error("typeshard: ppermute: member " + std::to_string(g.rank) +
                          " expects " + std::to_string(recv_count) + " elements from member " +
                          std::to_string(recv_from) + ", which sends " +
                          std::to_string(calls[recv_from].count) + " to member " +
                          std::to_string(calls[recv_from].peer) +
                          "; senders and receivers must agree");
      if (recv_count == 0) return;
      if (recv_from == no_peer)
        std::memset(recv, 0, recv_count * t.size);
      else
        std::memcpy(recv, calls[recv_from].send, recv_count * t.size);
    });
  }
  bool is_addressable(device_id d) const override { return d < workers_.size(); }
  std::string_view platform() const override { return "cpu"; }

  void run(std::span<const device_id> devices,
           detail::function_ref<void(std::size_t)> body) override {
    if (detail::current_thread_device().run != nullptr)
      throw usage_error(
          "typeshard: a multi-device operation was started from inside a per-device "
          "function; per-device code may only use local blocks and collectives: move the "
          "operation out of the function");
    check_devices(devices);
    std::lock_guard operation(run_mutex_);  // one multi-device operation at a time

    detail::thread_run state(devices);
    std::vector<std::exception_ptr> failures(devices.size());
    std::size_t remaining = devices.size();
    std::mutex done_mutex;
    std::condition_variable done;

    // Every task is made (which may allocate, and so throw) before any device starts: once
    // one runs, run() must not leave before all have finished, for they use its locals.
    std::vector<std::function<void()>> tasks;
    tasks.reserve(devices.size());
    for (std::size_t i = 0; i < devices.size(); ++i)
      tasks.emplace_back([&, i] {
        detail::current_thread_device() = {&state, i};
        try {
          body(i);
        } catch (...) {
          failures[i] = std::current_exception();
          state.abort();  // release the peers waiting for this device in a collective
        }
        state.finished();
        detail::current_thread_device() = {};
        std::lock_guard lock(done_mutex);
        if (--remaining == 0) done.notify_one();
      });
    for (std::size_t i = 0; i < devices.size(); ++i) {
      worker& w = *workers_[devices[i]];
      {
        std::lock_guard lock(w.mutex);
        w.task = std::move(tasks[i]);  // noexcept
      }
      w.wake.notify_one();
    }
    {
      std::unique_lock lock(done_mutex);
      done.wait(lock, [&] { return remaining == 0; });
    }
    rethrow_first_failure(devices, failures);
  }

 private:
  struct worker {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable wake;
    std::function<void()> task;
    bool stop = false;
  };

  void work(worker& w) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(w.mutex);
        w.wake.wait(lock, [&] { return w.stop || w.task; });
        if (w.stop) return;
        task = std::move(w.task);
        w.task = nullptr;
      }
      task();  // never throws: the task catches everything the body throws
    }
  }

  void check_devices(std::span<const device_id> devices) const {
    std::vector<bool> seen(workers_.size(), false);
    for (device_id d : devices) {
      if (d >= workers_.size())
        throw device_mesh_error("typeshard: device " + std::to_string(d) +
                                " does not exist: this cpu_devices has " +
                                std::to_string(workers_.size()) +
                                " devices (0 to " + std::to_string(workers_.size() - 1) + ")");
      if (seen[d])
        throw device_mesh_error("typeshard: device " + std::to_string(d) +
                                " appears twice in one operation; list each device once");
      seen[d] = true;
    }
  }

  // A device that failed on its own is reported before one that was only released from
  // a collective because of it.
  static void rethrow_first_failure(std::span<const device_id> devices,
                                    const std::vector<std::exception_ptr>& failures) {
    std::size_t chosen = failures.size();
    for (std::size_t i = 0; i < failures.size(); ++i) {
      if (!failures[i]) continue;
      if (chosen == failures.size()) chosen = i;
      try {
        std::rethrow_exception(failures[i]);
      } catch (const collective_aborted&) {
        continue;
      } catch (...) {
        chosen = i;
        break;
      }
    }
    if (chosen == failures.size()) return;
    // Thrown from inside the handler, so device_error's nested_exception holds the original.
    const std::string where =
        "typeshard: the function running on device " + std::to_string(devices[chosen]) + " threw: ";
    try {
      std::rethrow_exception(failures[chosen]);
    } catch (const std::exception& e) {
      throw device_error(devices[chosen], where + e.what(), failures[chosen]);
    } catch (...) {
      throw device_error(devices[chosen], where + "an exception not derived from std::exception",
                         failures[chosen]);
    }
  }

  // ---- collective machinery ------------------------------------------------------------

  // The reductions' unit of work: small enough to stay in L1 while inputs stream past.
  static constexpr std::size_t chunk_bytes = 8192;
  static std::size_t chunk_elements(element_type t) {
    return t.size >= chunk_bytes ? 1 : chunk_bytes / t.size;
  }

  static std::size_t code(element_type t) {
    return static_cast<std::size_t>(t.kind) * 1024 + t.size;
  }

  static std::size_t sum(std::span<const std::size_t> counts) {
    std::size_t total = 0;
    for (std::size_t c : counts) total += c;
    return total;
  }

  static void check_counts(const collective_group& g, std::span<const std::size_t> counts,
                           const char* what) {
    if (counts.size() != g.size())
      throw usage_error(std::string("typeshard: internal: ") + what + " got " +
                        std::to_string(counts.size()) + " counts for a group of " +
                        std::to_string(g.size()));
  }

  // A hash of the arguments all members must agree on (FNV-1a over the words).
  static std::uint64_t signature(std::initializer_list<std::size_t> words,
                                 std::span<const std::size_t> more) {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::size_t w) { h = (h ^ static_cast<std::uint64_t>(w)) * 1099511628211ull; };
    for (std::size_t w : words) mix(w);
    for (std::size_t w : more) mix(w);
    return h;
  }

  // Copies piece `send_member` of a send layout to piece `recv_member` of a receive layout.
  // The two may cut the same elements into runs of different lengths.
  static void copy_piece(element_type t, const unsigned char* src, const strided_pieces& sp,
                         std::size_t send_member, unsigned char* dst, const strided_pieces& rp,
                         std::size_t recv_member) {
    const std::size_t total = sp.elements();
    if (total == 0) return;  // src and dst may be null: no pointer arithmetic on them
    const unsigned char* s_base = src + send_member * sp.member_stride * t.size;
    unsigned char* d_base = dst + recv_member * rp.member_stride * t.size;
    std::size_t s_row = 0, s_col = 0, d_row = 0, d_col = 0;
    for (std::size_t done = 0; done < total;) {
      const std::size_t n = std::min(sp.run - s_col, rp.run - d_col);
      std::memcpy(d_base + (d_row * rp.stride + d_col) * t.size,
                  s_base + (s_row * sp.stride + s_col) * t.size, n * t.size);
      done += n;
      if ((s_col += n) == sp.run) s_col = 0, ++s_row;
      if ((d_col += n) == rp.run) d_col = 0, ++d_row;
    }
  }

  // One collective on the calling device: publish, meet the group, check that every member
  // called the same thing, do this member's share, meet again (so no member returns, and
  // reuses or frees its buffers, while a peer still reads or writes them).
  struct send_info {
    std::size_t peer = 0;
    std::size_t count = 0;
  };

  template <class Work>
  void collective(const collective_group& g, std::uint64_t sig, const void* send, void* recv,
                  send_info info, Work&& work) {
    const detail::thread_device_context& here = detail::current_thread_device();
    if (here.run == nullptr)
      throw usage_error(
          "typeshard: a collective was called outside a per-device function; call it on "
          "local blocks inside ts::shard_map (or a backend run() body)");
    if (g.rank >= g.size() || g.members[g.rank] != here.index)
      throw usage_error("typeshard: internal: collective group rank " + std::to_string(g.rank) +
                        " does not name the calling device");
    for (std::size_t a = 0; a < g.size(); ++a) {
      if (g.members[a] >= here.run->devices.size())
        throw usage_error("typeshard: internal: collective group member " +
                          std::to_string(g.members[a]) + " is not part of the run");
      for (std::size_t b = 0; b < a; ++b)  // a repeated member would wait for itself
        if (g.members[a] == g.members[b])
          throw usage_error("typeshard: internal: collective group member " +
                            std::to_string(g.members[a]) + " appears twice");
    }
    detail::thread_group& grp = here.run->group(g.members);
    grp.calls[g.rank] = {send, recv, sig, info.peer, info.count};
    here.run->arrive_and_wait(grp, true);
    // Every member passed the first barrier, so every member reaches the second: it waits
    // even if the run is aborted meanwhile, and a failure in this member's share is raised
    // only after it, when no peer touches this member's buffers any more.
    std::exception_ptr failed;
    try {
      for (std::size_t j = 0; j < g.size(); ++j)
        if (grp.calls[j].signature != sig)
          throw usage_error(
              "typeshard: the devices of a collective group called different collectives (or "
              "the same with different sizes or element types); every device must call the "
              "same collectives in the same order");
      work(std::span<const detail::thread_group::call>(grp.calls));
    } catch (...) {
      failed = std::current_exception();
    }
    here.run->arrive_and_wait(grp, false);
    if (failed) std::rethrow_exception(failed);
  }

  std::vector<std::unique_ptr<worker>> workers_;
  std::mutex run_mutex_;
};

}  // namespace typeshard
