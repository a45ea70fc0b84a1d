// expect: typeshard:
// Control case for the compile-fail harness (check_compile_fail.cmake). Nothing here fails to
// compile, with or without TYPESHARD_COMPILE_FAIL, so the harness must report a failure; the
// CTest test compile_fail.control_harness_rejects_compiling_code is WILL_FAIL and passes only
// if it does. It includes nothing from typeshard on purpose: a broken library header must not
// make this control "fail to compile" and so pass for the wrong reason.

#ifdef TYPESHARD_COMPILE_FAIL
static_assert(sizeof(int) > 0, "typeshard: the control never fires");
#endif

namespace {
[[maybe_unused]] constexpr int control_value = 1;
}  // namespace
