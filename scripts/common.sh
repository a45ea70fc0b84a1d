# shellcheck shell=bash
# scripts/common.sh: helpers shared by scripts/test and scripts/demo (sourced, not run).

TS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Everything a full `scripts/test` run needs on a fresh Debian 12 (bookworm).
# libopenblas0-serial: the serial OpenBLAS, only for TYPESHARD_OPENBLAS_FLAVOR=serial builds;
# libclang-rt-14-dev: clang's sanitizer runtimes (TSan stage); libfftw3-dev: reserved for the
# library's FFT kernels; python3-numpy: tests/python (a checkpoint read back with numpy).
# shellcheck disable=SC2034 # used by the scripts that source this file
TS_TEST_PACKAGES=(
  cmake ninja-build g++ clang libclang-rt-14-dev
  libboost-dev catch2 libbenchmark-dev
  libopenblas-dev libopenblas0-serial
  libopenmpi-dev openmpi-bin
  libfftw3-dev
  python3-numpy
)
# What scripts/demo needs (a Release build of one example).
# shellcheck disable=SC2034
TS_DEMO_PACKAGES=(cmake ninja-build g++ libboost-dev libopenblas-dev libopenblas0-serial)

ts_say() { printf '%s\n' "$*"; }
ts_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ts_banner <text>: a line that stands out in a long CI log.
ts_banner() {
  printf '\n%s\n==== %s\n%s\n' \
    "==========================================================================" "$*" \
    "=========================================================================="
}

# ts_as_root <command...>: run as root (directly, or through non-interactive sudo).
ts_as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    ts_die "need root (or sudo) to run: $*"
  fi
}

# ts_ensure_packages <pkg...>: install the Debian packages that are not installed yet.
# Checks with dpkg-query first; runs `apt-get update` only when something is missing.
ts_ensure_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    ts_say "note: not a Debian system (no dpkg-query); assuming these are present: $*"
    return 0
  fi
  local missing=() pkg status
  for pkg in "$@"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
    [ "$status" = "installed" ] || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    ts_say "packages: all ${#} present"
    return 0
  fi
  ts_say "packages: installing ${missing[*]}"
  local apt_opts=(-q -y -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef
                  -o Dpkg::Options::=--force-confold)
  ts_as_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update </dev/null
  ts_as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get "${apt_opts[@]}" install --no-install-recommends "${missing[@]}" </dev/null
}

# ts_prepare_build_dir <dir>: start afresh when <dir> was configured for another source tree
# or another generator (CMake refuses to reuse such a cache).
ts_prepare_build_dir() {
  local dir="$1" cache="$1/CMakeCache.txt"
  if [ -f "$cache" ]; then
    local home gen
    home="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")"
    gen="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")"
    if [ "$home" != "$TS_ROOT" ] || [ "$gen" != "Ninja" ]; then
      ts_say "note: $dir was configured for '$home' with '$gen': starting afresh"
      rm -rf "$dir"
    fi
  fi
  mkdir -p "$dir"
}
