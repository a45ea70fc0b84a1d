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

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// Declared in the headers, defined once in the runtime library.
#define TYPESHARD_RUNTIME_DECL
#else
// Defined in the headers (impl/*.ipp), inline.
#define TYPESHARD_RUNTIME_DECL inline
#endif
