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
//
// The implementation is in impl/threads.ipp (compiled once in typeshard::runtime under
// TYPESHARD_SEPARATE_COMPILATION; see config.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../core/config.hpp"
#include "backend.hpp"
#include "collective_observer.hpp"
#include "detail/function_ref.hpp"

namespace typeshard {

namespace detail {

class thread_run;
struct thread_call;
struct thread_job;
class fiber_worker;
struct fiber_device;

// For tests only: when set, called before each device thread of a cpu_devices is started,
// with the device's index; a hook that throws std::system_error makes that start fail as
// std::thread's constructor does under a thread or memory limit (ulimit -u, RLIMIT_AS, a
// container's pids.max). Not synchronised: set it while no pool is being made.
inline void (*thread_start_hook)(std::size_t device) = nullptr;

// What the calling thread is doing: set while a device thread runs a body.
struct thread_device_context {
  thread_run* run = nullptr;
  std::size_t index = 0;  // position of this device in run->devices
  // While the thread runs an SPMD program of this pool (run_program; run->devices are then
  // all the pool's devices, so `index` is the device): the pool's operations started on it
  // run their device's part inline, over `inner_devices` at `inner_index` while `inner`.
  const void* program = nullptr;
  program_listener* listener = nullptr;
  std::span<const device_id> inner_devices;
  std::size_t inner_index = 0;
  bool inner = false;
  std::vector<std::size_t> members;  // a collective's group, as positions in `run`
};

// The calling thread's context: its own, or that of the fiber it runs (a device of an SPMD
// program on fibers), which the fiber's worker installs here while the fiber runs.
TYPESHARD_DEFERRED thread_device_context& current_thread_device();
TYPESHARD_DEFERRED thread_device_context*& current_fiber_device();

}  // namespace detail

// How a cpu_devices runs an SPMD program (run_program, ts::jit): the default, `fibers`, runs
// each device's program as a fiber (its own stack, switched in user space), on as many
// workers as kernels may run at once (concurrent_kernels(), by default the cores), at most
// one per device, the calling thread being one of them: a device waiting in a collective
// hands its worker to another device, and a worker sleeps only when none of its devices can
// run. A small program (the previous one took under detail::fiber_small_program on several
// workers, or under 4 times that on one) runs on the calling thread alone, waking no other.
// `device_threads` runs each device's program on its device's thread, which blocks in every
// collective it waits in. The environment variable TYPESHARD_PROGRAM_EXECUTION (`fibers` or
// `threads`), read when a pool is made, sets a pool's default.
enum class program_execution { fibers, device_threads };

// ts::cpu_devices is basic_cpu_devices<>, a class template of an unused parameter for the
// same reason as TYPESHARD_DEFERRED (core/config.hpp): header-only, a TU that includes
// typeshard.hpp but makes no pool (a program's other TUs, which take a device_mesh or a
// backend&) compiles none of the pool; with the separately compiled runtime it is compiled
// once, in typeshard::runtime. Spell it cpu_devices.
template <class Unused = void>
class basic_cpu_devices final : public backend {
 public:
  // Starts `count` device threads (usage_error for 0). At most `concurrent_kernels` of them
  // run a heavy kernel (a per-shard GEMM) at once (see backend::kernel_slot); by default as
  // many as the cores this process may run on. When a thread cannot be started (a thread,
  // process or address-space limit), the threads already started are stopped and joined and
  // a typeshard::error naming the device and the system's reason is thrown.
  explicit basic_cpu_devices(std::size_t count);
  basic_cpu_devices(std::size_t count, std::size_t concurrent_kernels);

  basic_cpu_devices(const basic_cpu_devices&) = delete;
  basic_cpu_devices& operator=(const basic_cpu_devices&) = delete;

  // Waits for a running operation to finish, then stops and joins the device threads.
  ~basic_cpu_devices() override;

  std::size_t device_count() const override { return device_count_; }
  // Inside an SPMD program (run_program) a device thread sees the pool as an MPI rank sees
  // its job: its own device only, one process per device.
  bool is_addressable(device_id d) const override {
    const detail::thread_device_context& here = detail::current_thread_device();
    return here.program == this ? d == here.index : d < device_count_;
  }
  std::size_t process_index() const override {
    const detail::thread_device_context& here = detail::current_thread_device();
    return here.program == this ? here.index : 0;
  }
  std::size_t process_count() const override {
    return detail::current_thread_device().program == this ? device_count_ : 1;
  }
  std::string_view platform() const override { return "cpu"; }

  // Runs program(d) for every device d of the pool at once, as one SPMD program (ts::jit),
  // as fibers or each on its device's thread (program_execution): each device sees the pool
  // as an MPI rank sees its job (is_addressable(d) for its own device only; each operation's
  // run() calls the device's part inline, without waking another thread) and meets the
  // others only in collectives, which keep every check and the deadlock detection of a run.
  // If programs throw, the others are released from any collective they wait in, all are
  // joined, and the first failure (by device, a device that failed on its own before one
  // released because of it) is rethrown as it was thrown. Returns false, running nothing,
  // when called from inside a program of this pool (the caller is already one device's
  // program); usage_error from inside a run() body. `listener`, if any, hears each device's
  // local steps.
  bool run_program(detail::function_ref<void(std::size_t)> program,
                   detail::program_listener* listener = nullptr) override;
  std::size_t concurrent_kernels() const { return kernel_slots_; }

  // How run_program runs programs from now on (see program_execution). Waits for a running
  // operation to finish.
  void set_program_execution(program_execution how);
  program_execution program_execution_mode() const { return execution_; }
  // The stack of each device's fiber: address space reserved once per device (plus a guard
  // page), committed as it is touched, reused by every program; default
  // detail::default_fiber_stack_bytes (8 MiB, a thread's default). A program needs what the
  // same code on a thread would. Waits for a running operation; stacks are remapped.
  void set_fiber_stack_bytes(std::size_t bytes);

  // A kernel of at least this many multiply-adds (about a millisecond of a core's float GEMM)
  // holding a slot is also pinned to a core of its own while it runs: long kernels are what
  // the scheduler time-slices. A shorter one is not: pinning and unpinning move the thread
  // between cores, which cost more than a short kernel (docs/reference/backend/threads.md).
  static constexpr std::size_t pinned_kernel_multiply_adds = std::size_t{1} << 25;

 protected:
  body_position current_body() const override;
  void do_acquire_kernel_slot(std::size_t multiply_adds) override;
  void do_release_kernel_slot() noexcept override;
  std::string devices_summary() const override;

  void do_run(std::span<const device_id> devices,
              detail::function_ref<void(std::size_t)> body) override;

  // ---- collectives (see backend.hpp for the contracts) ----------------------------------
  void do_all_gather(const collective_group& g, element_type t,
                     const void* send, void* recv, std::size_t rows,
                     std::span<const std::size_t> counts,
                     std::uint64_t signature) override;
  void do_reduce_scatter(const collective_group& g, element_type t,
                         reduce_op op, const void* send, void* recv,
                         std::size_t rows,
                         std::span<const std::size_t> counts,
                         std::uint64_t signature) override;
  void do_all_reduce(const collective_group& g, element_type t,
                     reduce_op op, const void* send, void* recv,
                     std::size_t count, std::uint64_t signature) override;
  void do_all_to_all(const collective_group& g, element_type t,
                     const void* send, void* recv,
                     const strided_pieces& send_pieces,
                     const strided_pieces& recv_pieces,
                     std::uint64_t signature) override;
  void do_permute(const collective_group& g, element_type t,
                  const void* send, std::size_t send_count,
                  std::size_t send_to, void* recv,
                  std::size_t recv_count, std::size_t recv_from,
                  std::uint64_t signature) override;

 private:
  // A device thread. It is handed a job (its device's part of one do_run) as a pointer to
  // the run's shared state and its position in the run: a plain struct rather than a
  // std::function, so a TU that compiles the pool instantiates no type-erased wrapper.
  struct worker {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable wake;
    detail::thread_job* job = nullptr;
    std::size_t index = 0;  // this device's position in job's run
    bool stop = false;
    // Set with job or stop (under mutex), cleared when the job is taken: what the thread
    // polls while it waits briefly before blocking on `wake` (threads.ipp, work).
    std::atomic<bool> signaled{false};
  };

  // What one member passes to the group's rendezvous besides its buffers (permute only).
  struct send_info {
    std::size_t peer = 0;
    std::size_t count = 0;
    collective_kind kind = collective_kind::permute;  // which collective, for the reports
  };

  void work(worker& w);
  // Hands body(i) to the thread of devices[i] for every i and waits for all; failures as
  // do_run reports them, or (as_thrown) as run_program does.
  void start_and_join(std::span<const device_id> devices,
                      detail::function_ref<void(std::size_t)> body, bool as_thrown);
  // Hands body(i) to the thread of devices[i] for every i; join waits for all of them.
  void start(detail::thread_job& job, std::span<const device_id> devices);
  void join(detail::thread_job& job);
  // run_program on fibers: the programs' run (over all devices) on `workers` workers.
  void run_fibers(detail::thread_job& programs, std::size_t workers);
  // Stops and joins the first `started` device threads.
  void stop_workers(std::size_t started) noexcept;

  // One collective on the calling device: publish, meet the group, check that every member
  // called the same thing, do this member's share (work), meet again (so no member returns,
  // and reuses or frees its buffers, while a peer still reads or writes them). One function
  // for the five collectives (work by function_ref), so the rendezvous is compiled once.
  void collective(
      const collective_group& g, std::uint64_t signature, const void* send, void* recv,
      send_info info, detail::function_ref<void(std::span<const detail::thread_call>)> work);

  // The device threads: one array, not a vector of pointers (a worker never moves, and its
  // thread refers to it for its whole life).
  std::size_t device_count_ = 0;
  std::unique_ptr<worker[]> workers_;
  std::vector<device_id> all_devices_;  // 0 .. device_count_ - 1: run_program's devices
  std::mutex run_mutex_;

  // SPMD programs on fibers (made by the first such program, under run_mutex_): one fiber
  // per device, and the workers (min(kernel slots, devices); worker 0 is the caller's thread).
  program_execution execution_ = program_execution::fibers;
  bool small_program_ = false;  // the last program was small: the next runs on one worker
  std::size_t fiber_stack_bytes_;
  std::unique_ptr<detail::fiber_device[]> fibers_;
  std::unique_ptr<detail::fiber_worker[]> fiber_workers_;

  // Kernel slots: a counter under a mutex (not std::counting_semaphore, whose futex waits
  // the thread sanitizer does not follow). Unused when there are no fewer slots than devices.
  std::size_t kernel_slots_ = 1;
  std::size_t kernels_running_ = 0;
  std::mutex kernel_mutex_;
  std::condition_variable kernel_slot_free_;
  // The cores of the process's affinity mask when the pool was made (Linux; empty where a
  // kernel is not pinned: one core, or more slots than cores), and whether a running kernel
  // holds each (under kernel_mutex_): each long kernel runs pinned to a core of its own.
  struct kernel_core {
    int cpu = 0;
    bool taken = false;
  };
  std::vector<kernel_core> kernel_cores_;
};

using cpu_devices = basic_cpu_devices<>;

#if defined(TYPESHARD_SEPARATE_COMPILATION)
extern template class basic_cpu_devices<void>;
#endif

}  // namespace typeshard

#if !defined(TYPESHARD_SEPARATE_COMPILATION)
#include "impl/threads.ipp"
#endif
