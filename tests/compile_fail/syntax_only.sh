#!/bin/sh
# syntax_only.sh <compiler> <args...>: the compiler launcher of the compiling twins
# (tests/compile_fail/CMakeLists.txt). Runs the compile command with -fsyntax-only: every
# declaration parsed, every template the file uses instantiated, every front-end diagnostic
# (static_assert, -Werror warnings) issued, but no code generated, which is ~3x cheaper. On
# success it leaves an empty object file where the build expects one, so the twin is up to
# date for the next build.
out=""
prev=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then
    out="$arg"
  fi
  prev="$arg"
done
"$@" -fsyntax-only || exit $?
if [ -n "$out" ]; then
  : >"$out"
fi
