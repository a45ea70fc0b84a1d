// typeshard/backend/backend.hpp: what a backend is.
//
// A backend owns devices and runs per-device functions on them. typeshard's runtime
// (device_put, elementwise ops, collectives, matmul) talks only to this interface, so
// the same program runs on the thread pool (cpu_devices) or on MPI ranks.
//
// Collectives are primitives on raw buffers, called from inside a per-device function (a
// run() body) by every member of a group, in the same order (SPMD, as MPI requires). Each
// maps onto one MPI call on a per-group communicator (MPI_Comm_create_group):
//   all_gather      MPI_Allgather(v)            tiled: rows of per-member pieces
//   reduce_scatter  MPI_Reduce_scatter(_block)  the same layout, reduced
//   all_reduce      MPI_Allreduce
//   all_to_all      MPI_Alltoall                pieces as MPI_Type_vector, resized
//   permute         MPI_Sendrecv                MPI_PROC_NULL where there is no peer
// Backends move and reduce bytes; they know nothing of arrays, specs or matmul.
#pragma once

#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/config.hpp"
#include "../core/detail/axis_name.hpp"
#include "detail/call_site.hpp"
#include "detail/function_ref.hpp"

namespace typeshard {

using device_id = std::size_t;

// device: one device of a backend, as JAX shows it.
struct device {
  device_id id = 0;
  std::string_view platform = "cpu";

  // "CPU 0": the label visualize draws.
  std::string label() const {
    std::string p(platform);
    for (char& c : p) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return p + " " + std::to_string(id);
  }
  // "CpuDevice(id=0)", as JAX prints a device.
  std::string to_string() const {
    std::string p(platform);
    if (!p.empty() && p[0] >= 'a' && p[0] <= 'z') p[0] = static_cast<char>(p[0] - 'a' + 'A');
    return p + "Device(id=" + std::to_string(id) + ")";
  }
  friend bool operator==(const device&, const device&) = default;
};

// element_kind / element_type: what a collective's buffer holds, so that a backend can
// reduce it and MPI can name it (bfloat16 reduces in float per element, stored rounded).
// `opaque` (any other trivially copyable type) can be moved (gathered, exchanged, permuted)
// but not reduced.
enum class element_kind : unsigned char {
  int8, uint8, int16, uint16, int32, uint32, int64, uint64,
  float32, float64, complex64, complex128, bfloat16, opaque
};

// reduce_op: how all_reduce and reduce_scatter combine the members' values. Sums run in
// group-rank order on every backend that can (the thread pool always does), so results
// are reproducible.
enum class reduce_op : unsigned char { sum, max, min };

// reduce_kernel: acc[i] = op(acc[i], x[i]) for n elements of one element type.
using reduce_kernel = void (*)(void* acc, const void* x, std::size_t n, reduce_op op);

struct element_type {
  element_kind kind = element_kind::opaque;
  std::size_t size = 1;  // bytes per element
  // The loop a backend that reduces in memory (the thread pool) combines buffers with, set
  // by element_type_of<T> for the arithmetic kinds (nullptr for opaque): a program compiles
  // the reduction loops of the element types it passes to collectives, not of all twelve.
  // Not part of the type's identity (==).
  reduce_kernel reduce = nullptr;
  friend constexpr bool operator==(const element_type& a, const element_type& b) {
    return a.kind == b.kind && a.size == b.size;
  }
};

namespace detail {
template <class T>
constexpr element_kind element_kind_of() {
  if constexpr (std::is_same_v<T, float>) return element_kind::float32;
  else if constexpr (std::is_same_v<T, double>) return element_kind::float64;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return element_kind::complex64;
  else if constexpr (std::is_same_v<T, std::complex<double>>) return element_kind::complex128;
  else if constexpr (std::is_same_v<T, typeshard::bfloat16>) return element_kind::bfloat16;
  else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    constexpr bool s = std::is_signed_v<T>;
    if constexpr (sizeof(T) == 1) return s ? element_kind::int8 : element_kind::uint8;
    else if constexpr (sizeof(T) == 2) return s ? element_kind::int16 : element_kind::uint16;
    else if constexpr (sizeof(T) == 4) return s ? element_kind::int32 : element_kind::uint32;
    else if constexpr (sizeof(T) == 8) return s ? element_kind::int64 : element_kind::uint64;
    else return element_kind::opaque;
  } else {
    return element_kind::opaque;
  }
}
}  // namespace detail

namespace detail {
// The reduction loop of element type T (defined in detail/reduce_kernels.hpp).
template <class T>
void reduce_elements(void* acc, const void* x, std::size_t n, reduce_op op);

template <class T>
constexpr reduce_kernel reduce_kernel_of() {
  if constexpr (element_kind_of<T>() == element_kind::opaque) return nullptr;
  else return &reduce_elements<T>;
}
}  // namespace detail

// element_type_of<T>: the tag a collective on T passes to the backend.
template <class T>
inline constexpr element_type element_type_of{detail::element_kind_of<T>(), sizeof(T),
                                              detail::reduce_kernel_of<T>()};

// collective_group: the devices one collective runs over, backend-neutrally. members are
// indices into the device list of the current run() (the i of body(i)), in group-rank
// order; members[rank] is the calling device. Groups of one call partition the devices
// that take part (for a mesh axis: the devices that share every other coordinate).
// `axes` (the mesh axes of the group) and `purpose` (what a group over no axes is for) do
// not change what the collective does: they label it in a communication report.
struct collective_group {
  std::span<const std::size_t> members;
  std::size_t rank = 0;
  std::span<const detail::axis_name> axes = {};
  const char* purpose = nullptr;

  std::size_t size() const { return members.size(); }
};

// strided_pieces: where each member's piece lies in an all_to_all buffer: `rows` runs of
// `run` elements, `stride` elements apart; member j's piece starts at j * member_stride.
// (An MPI backend builds MPI_Type_vector(rows, run, stride), resized to member_stride.)
struct strided_pieces {
  std::size_t rows = 1;
  std::size_t run = 0;
  std::size_t stride = 0;
  std::size_t member_stride = 0;

  std::size_t elements() const { return rows * run; }
};

// The "no peer" value of permute's send_to / recv_from (MPI_PROC_NULL).
inline constexpr std::size_t no_peer = static_cast<std::size_t>(-1);

namespace detail {
// Told, on a device's thread, what that device of an SPMD program (backend::run_program)
// runs: each part of a multi-device operation it runs (a local step) and how long it took.
class program_listener {
 public:
  virtual void local_step(std::size_t device, double seconds) = 0;

 protected:
  ~program_listener() = default;
};

}  // namespace detail

// backend: the interface typeshard's runtime talks to. Its public operations are
// non-virtual: each checks its arguments once, here, for every backend (the devices of a
// run exist and are distinct; a collective is called inside a run, by a device of its
// group, with one count per member and peers inside the group; the members' calls agree, by
// a signature), then calls the backend's own primitive (do_run, do_all_gather, ...). So the
// thread pool and MPI reject the same bad calls with the same messages.
class backend {
 public:
  backend() = default;
  // A copy is another backend, with a lifetime of its own.
  backend(const backend&) : alive_(std::make_shared<std::atomic<bool>>(true)) {}
  backend& operator=(const backend&) { return *this; }
  virtual ~backend() { alive_->store(false, std::memory_order_release); }

  // Whether the backend still exists, as a flag that outlives it: a device mesh (and so
  // every array on it) holds this and refuses to reach a destroyed backend with a
  // usage_error rather than a use after free (device_mesh::get_backend).
  std::shared_ptr<const std::atomic<bool>> lifetime() const { return alive_; }

  // Total number of devices, addressable by this process or not.
  virtual std::size_t device_count() const = 0;

  // Whether this process holds the device's memory and runs its functions (all devices on
  // the thread pool; one per rank on MPI).
  virtual bool is_addressable(device_id d) const = 0;

  // "cpu".
  virtual std::string_view platform() const = 0;

  device describe(device_id d) const { return {d, platform()}; }

  // This process among the processes running the program (JAX's process_index() and
  // process_count()): MPI ranks; 0 of 1 on the thread pool. visualize draws on process 0.
  virtual std::size_t process_index() const { return 0; }
  virtual std::size_t process_count() const { return 1; }

  // Called when a device mesh takes the backend's first devices implicitly
  // (device_mesh<M>{backend}); a backend may refuse a mesh of that size by throwing
  // device_mesh_error. MPI does unless the mesh spans every rank.
  virtual void check_default_mesh(std::size_t /*mesh_size*/, const std::string& /*mesh*/) const {}

  // Runs body(i) for every i whose devices[i] is addressable, each on its device,
  // concurrently, and returns when all have returned. The devices must exist and be
  // distinct (device_mesh_error). If bodies throw, the others are released from any
  // collective they wait in, all are joined, and the first failure (by position in
  // `devices`) is rethrown as a device_error that names the device. Not callable from
  // inside a body (usage_error).
  void run(std::span<const device_id> devices,
           detail::function_ref<void(std::size_t)> body);

  // Runs program(d) once per device d, concurrently, as one SPMD program (ts::jit): each
  // device sees the backend as an MPI rank sees its job and meets the others only in
  // collectives; failures as run()'s, rethrown as thrown. Returns false, running nothing, on
  // a backend without such a mode (MPI, whose ranks already run one program each) or when
  // the caller already is one device's program. `listener` hears each device's local steps.
  virtual bool run_program(detail::function_ref<void(std::size_t)> /*program*/,
                           detail::program_listener* /*listener*/ = nullptr) {
    return false;
  }

  // ---- collectives: called inside a run() body by every member of `g` ------------------
  // Buffers are in elements of `t`; counts[j] is member j's piece per row. A backend may
  // throw usage_error for calls the members disagree on; if any member throws, the run
  // releases the others (collective_aborted) as for any exception. `loc`, the caller's
  // call site, is what the backends' mismatch and deadlock reports name, unless an outer
  // entry point (ts::psum, ts::reshard, ...: detail/call_site.hpp) set the user's.

  // all_gather: send is [rows][counts[rank]]; recv is [rows][sum(counts)], row r holding
  // every member's row r in rank order (the tiled all_gather along one dimension).
  void all_gather(const collective_group& g, element_type t,
                  const void* send, void* recv, std::size_t rows,
                  std::span<const std::size_t> counts,
                  detail::source_site loc = detail::source_site::current());

  // reduce_scatter: send is [rows][sum(counts)]; recv is [rows][counts[rank]], the
  // reduction over members of this member's columns (tiled psum_scatter). No aliasing.
  void reduce_scatter(const collective_group& g, element_type t,
                      reduce_op op, const void* send, void* recv,
                      std::size_t rows,
                      std::span<const std::size_t> counts,
                      detail::source_site loc = detail::source_site::current());

  // all_reduce: recv[i] = reduction over members of send[i], i < count. send == recv is
  // allowed (in place); every member gets bitwise the same result.
  void all_reduce(const collective_group& g, element_type t,
                  reduce_op op, const void* send, void* recv,
                  std::size_t count, detail::source_site loc = detail::source_site::current());

  // all_to_all: member j's piece of send (by send_pieces) goes to member j, which stores
  // the piece from member i at piece i of its recv (by recv_pieces). Pieces have equal
  // element counts in both layouts, copied in row-major order. No aliasing.
  void all_to_all(const collective_group& g, element_type t,
                  const void* send, void* recv,
                  const strided_pieces& send_pieces,
                  const strided_pieces& recv_pieces,
                  detail::source_site loc = detail::source_site::current());

  // permute: send send_count elements to member send_to and receive recv_count from member
  // recv_from (either may be no_peer; the counts of a sender and its receiver must agree);
  // without a source recv is zero-filled, as JAX's ppermute does. No aliasing.
  void permute(const collective_group& g, element_type t,
               const void* send, std::size_t send_count,
               std::size_t send_to, void* recv, std::size_t recv_count,
               std::size_t recv_from, detail::source_site loc = detail::source_site::current());

  // ---- kernel slots: no more heavy kernels at once than there are cores ------------------
  // A device body runs each heavy per-shard kernel (the GEMM of a matmul or einsum) holding
  // a kernel_slot. A backend whose devices share fewer cores than it has devices (the thread
  // pool simulating 8 devices on 2 cores) lets only as many kernels run at once as it has
  // cores: time-sliced on one core, two cache-blocked GEMMs evict each other's packed panels
  // from the core's caches every few milliseconds, and both run slower than one after the
  // other. A slot is never held across a collective (every device holding one is computing,
  // so a device waiting for one never waits on a peer that waits on it). Backends with a core
  // per device (MPI ranks) hand slots out for free. `multiply_adds` is the kernel's size (a
  // GEMM's m * n * k, summed over a batch): the thread pool also pins a kernel to a core, but
  // only a long one (threads.hpp).
  class [[nodiscard]] kernel_slot {
   public:
    kernel_slot(backend& b, std::size_t multiply_adds) : backend_(&b) {
      b.do_acquire_kernel_slot(multiply_adds);
    }
    kernel_slot(const kernel_slot&) = delete;
    kernel_slot& operator=(const kernel_slot&) = delete;
    ~kernel_slot() { backend_->do_release_kernel_slot(); }

   private:
    backend* backend_;
  };
  kernel_slot acquire_kernel_slot(std::size_t multiply_adds) {
    return kernel_slot(*this, multiply_adds);
  }

 protected:
  // Where the calling thread is: inside a per-device function of this backend's current
  // run (at position `index` of a run over `run_size` devices), or not.
  struct body_position {
    bool inside = false;
    std::size_t run_size = 0;
    std::size_t index = 0;
  };
  virtual body_position current_body() const = 0;

  // The kernel_slot's primitives (see above); by default every device may run a kernel.
  virtual void do_acquire_kernel_slot(std::size_t /*multiply_adds*/) {}
  virtual void do_release_kernel_slot() noexcept {}

  // How many devices there are, said in the backend's terms, for the message naming a
  // device that does not exist ("this cpu_devices has 4 devices (0 to 3)").
  virtual std::string devices_summary() const = 0;

  // The primitives, called once the arguments are checked. `signature` hashes what every
  // member of the group must agree on (the collective, element type, reduction, sizes):
  // a backend that can compare the members' signatures diagnoses a mismatch with it.
  virtual void do_run(std::span<const device_id> devices,
                      detail::function_ref<void(std::size_t)> body) = 0;
  virtual void do_all_gather(const collective_group& g, element_type t, const void* send,
                             void* recv, std::size_t rows, std::span<const std::size_t> counts,
                             std::uint64_t signature) = 0;
  virtual void do_reduce_scatter(const collective_group& g, element_type t, reduce_op op,
                                 const void* send, void* recv, std::size_t rows,
                                 std::span<const std::size_t> counts,
                                 std::uint64_t signature) = 0;
  virtual void do_all_reduce(const collective_group& g, element_type t, reduce_op op,
                             const void* send, void* recv, std::size_t count,
                             std::uint64_t signature) = 0;
  virtual void do_all_to_all(const collective_group& g, element_type t, const void* send,
                             void* recv, const strided_pieces& send_pieces,
                             const strided_pieces& recv_pieces, std::uint64_t signature) = 0;
  virtual void do_permute(const collective_group& g, element_type t, const void* send,
                          std::size_t send_count, std::size_t send_to, void* recv,
                          std::size_t recv_count, std::size_t recv_from,
                          std::uint64_t signature) = 0;

  // The usage_error for members whose signatures differ.
  [[noreturn]] static void throw_signature_mismatch();
  // The usage_error for a ppermute that is not a permutation: member `sender` sends to
  // `receiver`, which receives from `receiver_source`.
  [[noreturn]] static void throw_not_a_permutation(
      std::size_t sender, std::size_t receiver, std::size_t receiver_source);
  // The usage_error for a receiver expecting `expected` elements from `sender`, which
  // sends `sent` (to member `sent_to`, when known).
  [[noreturn]] static void throw_permute_count_mismatch(
      std::size_t receiver, std::size_t expected, std::size_t sender, std::size_t sent,
      std::size_t sent_to);

 private:
  void check_devices(std::span<const device_id> devices) const;
  void check_group(const collective_group& g) const;

  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
};

}  // namespace typeshard

// detail::reduce_elements<T>'s definition, for every TU that names element_type_of<T>.
#include "detail/reduce_kernels.hpp"

#if !defined(TYPESHARD_SEPARATE_COMPILATION)
#include "impl/backend.ipp"
#endif
