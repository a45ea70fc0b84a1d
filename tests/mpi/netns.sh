#!/bin/sh
# tests/mpi/netns.sh: an MPI job whose ranks are on two "machines" joined by a network link.
#
#   sh tests/mpi/netns.sh MPIEXEC PROGRAM [ARGUMENT...]
#
# Makes two network namespaces (each its own interfaces, addresses and routes, as two hosts
# have) joined by a veth pair, 10.77.0.1 <-> 10.77.0.2/24, and runs PROGRAM under Open MPI's
# mpirun with 2 ranks, one in each namespace, as a run on two hosts would: mpirun starts in
# the first namespace and launches the second host's daemon (orted) through a launch agent in
# place of ssh (plm_rsh_agent: `ip netns exec` into the namespace that owns the address), and
# the ranks talk over TCP on the veth pair only (btl self,tcp; btl_tcp_if_include and
# oob_tcp_if_include the link's subnet). It then checks that the two ranks ran in the two
# namespaces and that MPI's bytes crossed the link.
#
# Exit status: PROGRAM's (0 = pass, as CTest reads it); 77 (the test's SKIP_RETURN_CODE) when
# the machine cannot make the namespaces: not root, no `ip netns`, no veth, not Open MPI.
# It never hangs: mpirun --timeout, and timeout(1) around it. Whatever happens the namespaces
# go (trap); namespaces left by a run that was killed outright (SIGKILL) go at the next run.
set -u

skip() {
  echo "netns.sh: SKIP: $*"
  exit 77
}
fail() {
  echo "netns.sh: FAIL: $*" >&2
  exit 1
}

[ $# -ge 2 ] || fail "usage: netns.sh MPIEXEC PROGRAM [ARGUMENT...]"
mpiexec=$1
shift

[ "$(id -u)" = 0 ] || skip "not root (making network namespaces needs CAP_SYS_ADMIN)"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
command -v timeout >/dev/null 2>&1 || skip "no timeout command (coreutils)"
"$mpiexec" --version 2>&1 | grep -q "Open MPI\|OpenRTE\|open-mpi.org" ||
  skip "$mpiexec is not Open MPI's (the launch agent and --mca options are Open MPI's)"
ip netns list >/dev/null 2>&1 || skip "ip netns does not work here"

# Namespaces of earlier runs that were killed before their trap ran (their shell is gone).
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(typeshard-mpi-[0-9]*-[ab]\).*/\1/p'); do
  pid=${ns#typeshard-mpi-}
  pid=${pid%-?}
  kill -0 "$pid" 2>/dev/null || ip netns delete "$ns" 2>/dev/null
done

tag=typeshard-mpi-$$
ns_a=$tag-a
ns_b=$tag-b
link_a=tsmpi$$a  # interface names: at most 15 characters
link_b=tsmpi$$b
addr_a=10.77.0.1
addr_b=10.77.0.2
subnet=10.77.0.0/24
work=$(mktemp -d) || fail "mktemp -d failed"

cleanup() {
  ip netns delete "$ns_a" 2>/dev/null  # deleting a namespace deletes its end of the pair,
  ip netns delete "$ns_b" 2>/dev/null  # and with it the other end
  ip link delete "$link_a" 2>/dev/null  # (if it never moved into its namespace)
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ip netns add "$ns_a" 2>"$work/err" || skip "ip netns add failed: $(cat "$work/err")"
ip netns add "$ns_b" 2>"$work/err" || skip "ip netns add failed: $(cat "$work/err")"
ip link add "$link_a" type veth peer name "$link_b" 2>"$work/err" ||
  skip "no veth pair: $(cat "$work/err")"
ip link set "$link_a" netns "$ns_a" &&
  ip link set "$link_b" netns "$ns_b" &&
  ip -n "$ns_a" addr add "$addr_a/24" dev "$link_a" &&
  ip -n "$ns_b" addr add "$addr_b/24" dev "$link_b" &&
  ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
  ip -n "$ns_a" link set "$link_a" up && ip -n "$ns_b" link set "$link_b" up ||
  fail "could not set up the veth pair between $ns_a and $ns_b"

# The launch agent: Open MPI runs `agent HOST COMMAND...` where it would run `ssh HOST
# COMMAND...`; COMMAND is a shell command line (it starts the host's orted).
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
  $addr_a) exec ip netns exec $ns_a sh -c "\$*" ;;
  $addr_b) exec ip netns exec $ns_b sh -c "\$*" ;;
esac
echo "netns.sh agent: unknown host \$host" >&2
exit 1
EOF
# Each rank notes its network namespace, then becomes PROGRAM.
cat >"$work/rank" <<EOF
#!/bin/sh
readlink /proc/self/ns/net >"$work/rank.\${OMPI_COMM_WORLD_RANK:-unknown}.ns"
exec "\$@"
EOF
chmod +x "$work/agent" "$work/rank"

rx_bytes() {
  ip -n "$ns_a" -s link show "$link_a" | awk '/RX:/ { getline; print $1; exit }'
}
before=$(rx_bytes)

# mpi_yield_when_idle: each "host" runs one rank, so Open MPI would busy-poll, and both ranks
# share this machine's cores with the rest of the suite.
timeout -k 5 50 ip netns exec "$ns_a" "$mpiexec" --allow-run-as-root --timeout 40 \
  -np 2 --host "$addr_a,$addr_b" \
  --mca plm_rsh_agent "$work/agent" \
  --mca pml ob1 --mca btl self,tcp \
  --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
  --mca mpi_yield_when_idle 1 \
  "$work/rank" "$@" &
job=$!
# A signal (CTest stopping the test, ^C) stops the job first, then the trap removes the
# namespaces (run in the foreground, the job would delay the trap until it ended).
trap 'kill -TERM "$job" 2>/dev/null; wait "$job"; exit 130' INT TERM HUP
wait "$job"
rc=$?
[ "$rc" = 0 ] || fail "mpirun exited with $rc"

ns_of_a=$(ip netns exec "$ns_a" readlink /proc/self/ns/net)
ns_of_b=$(ip netns exec "$ns_b" readlink /proc/self/ns/net)
[ "$(cat "$work/rank.0.ns" 2>/dev/null)" = "$ns_of_a" ] ||
  fail "rank 0 did not run in $ns_a ($(cat "$work/rank.0.ns" 2>/dev/null) != $ns_of_a)"
[ "$(cat "$work/rank.1.ns" 2>/dev/null)" = "$ns_of_b" ] ||
  fail "rank 1 did not run in $ns_b ($(cat "$work/rank.1.ns" 2>/dev/null) != $ns_of_b)"
crossed=$(($(rx_bytes) - before))
[ "$crossed" -gt 0 ] || fail "no byte crossed the veth pair"
echo "netns.sh: rank 0 in $ns_a ($addr_a), rank 1 in $ns_b ($addr_b): passed, with" \
  "$crossed bytes received over the link by $addr_a"
