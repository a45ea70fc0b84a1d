// typeshard/core/config.hpp: how typeshard's runtime is linked into a program.
//
// Header-only (the default): the runtime's functions (the thread pool, the backends' checks,
// the shard allocator, the GEMM kernels, the drawing of ts::visualize) are inline functions
// in the headers, and every translation unit that uses them compiles them again.
//
// Separately compiled (TYPESHARD_SEPARATE_COMPILATION, set for you by linking the CMake
// target typeshard::runtime, or by hand: compile src/typeshard_runtime.cpp once with it and
// every TU of the program with it): the headers only declare those functions and the library
// holds their one definition, so a TU compiles only its own templates. As with Boost.Asio's
// BOOST_ASIO_SEPARATE_COMPILATION, every TU of one program must agree on the macro.
#pragma once

// TYPESHARD_RUNTIME_DEF begins each definition of the runtime's functions (impl/*.ipp); their
// declarations in the headers carry nothing. Header-only the definitions are inline and
// never inlined into their callers: a program then has the code shape of the separately
// compiled mode, one copy of each per TU instead of one per call site. Inlined,
// allocate_block and free_block alone were copied into every function that makes or drops a
// shard's buffer, 5% of small_global_view's code and 2% of its compile.
#if defined(TYPESHARD_SEPARATE_COMPILATION)
// Defined once in the runtime library.
#define TYPESHARD_RUNTIME_DEF
#elif defined(__GNUC__) || defined(__clang__)
// Defined in the headers (impl/*.ipp). (GCC warns when a declaration that says `inline`
// and one that says `noinline` meet, hence nothing on the declarations.)
#define TYPESHARD_RUNTIME_DEF [[gnu::noinline]] inline
#else
#define TYPESHARD_RUNTIME_DEF inline
#endif

// The element types and ranks whose value-level kernels (a function of the element type and
// rank only: block copies, the local einsum, shape strings) typeshard::runtime compiles once.
// X(prefix, T, R) is applied to each; the headers declare them `extern template` in
// TYPESHARD_SEPARATE_COMPILATION mode and src/typeshard_runtime.cpp defines them.
#define TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(X, prefix)                                      \
  X(prefix, float, 1) X(prefix, float, 2) X(prefix, float, 3) X(prefix, float, 4)             \
  X(prefix, double, 1) X(prefix, double, 2) X(prefix, double, 3) X(prefix, double, 4)
#define TYPESHARD_FOR_RUNTIME_RANKS(X, prefix) X(prefix, 1) X(prefix, 2) X(prefix, 3) X(prefix, 4)

// Code that runs once per operation or only to report (drawing ts::visualize's picture,
// building a thread pool, planning an operation's steps for its run-time extents, formatting
// an error): GCC and Clang optimise a cold function for size and leave its loops alone,
// which compiles it markedly faster in every TU of a header-only program. Never on a path
// that runs per element, per block or per step.
#if defined(__GNUC__) || defined(__clang__)
#define TYPESHARD_COLD [[gnu::cold]]
#else
#define TYPESHARD_COLD
#endif

// A function called per operation or per step (never per element) from many places, kept
// out of line so that each TU compiles it once instead of once per caller.
#if defined(__GNUC__) || defined(__clang__)
#define TYPESHARD_NOINLINE [[gnu::noinline]]
#else
#define TYPESHARD_NOINLINE
#endif

// Header-only, the runtime code that a program may never call (drawing ts::visualize's
// picture) is a function template of an unused parameter: a TU that includes it but does not
// call it neither instantiates the standard templates its body uses nor compiles it, and one
// that calls it compiles it once, as before. TYPESHARD_DEFERRED begins such a function's
// first declaration, TYPESHARD_DEFERRED_DEFINITION its definition when it was declared
// before. With the separately compiled runtime they are plain functions, compiled once there.
#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_DEFERRED
#define TYPESHARD_DEFERRED_DEFINITION
#else
#define TYPESHARD_DEFERRED template <class = void>
#define TYPESHARD_DEFERRED_DEFINITION template <class>
#endif
