#!/usr/bin/env python3
"""benchmarks/compare_support/driver.py: runs benchmarks/compare's workloads on typeshard and
its alternatives, side by side, and writes the report. Started by benchmarks/compare (which
installs and builds what is needed); standard library only, so it runs without the venv.

Each contender is a long-lived process speaking protocol.hpp's line protocol. For every
workload the driver sets it up on every contender (inputs built, one warm-up run, a sample of
the result), then runs the contenders in turn, one run each per round, the starting
contender rotating from round to round (A B C, B C A, ...), so that drift in the machine's
load hits all of them alike. It reports each contender's median over the rounds and the
ratio to typeshard's median (contender / typeshard: above 1 means typeshard is faster). The
samples of the results must agree with typeshard's (or the warm-up run is reported as wrong).
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
MIB = 1 << 20

# The environment may pin OpenBLAS's core (OPENBLAS_CORETYPE; OPENBLAS_L2_SIZE beside it), as
# the machines here do. Every contender that links OpenBLAS also runs, in the same report, as
# a "<name>_unpinned" twin with both variables unset, so the report shows what the pinning
# costs each one (typeshard's GEMM does not use OpenBLAS where its own AVX-512 kernel runs).
OPENBLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
UNPINNED = {"typeshard_unpinned": "typeshard", "openblas_unpinned": "openblas",
            "threads_unpinned": "threads"}

CONTENDER_LABELS = {
    "typeshard": "typeshard",
    "typeshard_unpinned": "typeshard, OPENBLAS_* unset",
    "openblas": "OpenBLAS, all cores",
    "openblas_unpinned": "OpenBLAS, all cores, OPENBLAS_* unset",
    "threads_unpinned": "std::thread, OPENBLAS_* unset",
    "eigen": "Eigen 3.4, all cores",
    "threads": "hand-written std::thread",
    "jax": "JAX (CPU, 8 devices)",
    "memcpy": "memcpy, all cores",
}
CONTENDER_ORDER = ["typeshard", "typeshard_unpinned", "openblas", "openblas_unpinned", "eigen",
                   "threads", "threads_unpinned", "jax", "memcpy"]
MATMUL_CONTENDERS = ["typeshard", "typeshard_unpinned", "openblas", "openblas_unpinned", "eigen",
                     "threads", "threads_unpinned", "jax"]
COLLECTIVE_CONTENDERS = ["typeshard", "memcpy", "jax"]
# Pause after a run of a contender whose threads keep spinning after it returns, so they do
# not steal the next contender's cores: OpenBLAS's pthreads spin 2^28 cycles (THREAD_TIMEOUT,
# about 0.1 s); OpenMP (Eigen) and XLA's pool spin much less.
SETTLE_S = {"openblas": 0.12, "openblas_unpinned": 0.12, "eigen": 0.03, "jax": 0.03}


# ---- workloads -------------------------------------------------------------------------------

def workloads(quick):
    n = 2048 if quick else 4096
    bn = 2048 if quick else 4096
    mb, md, mf = (1024, 1024, 4096) if quick else (2048, 2048, 8192)
    th, tb = (1024, 2048) if quick else (2048, 4096)
    out = []
    cases = [
        ("case1", "matmul case 1: no collective",
         "seed 001, A[I_X, J] . B[J, K_Y] -> C[I_X, K_Y] on the 2 x 2 mesh (x, y); "
         "the seed writes it `A @ B`", 1),
        ("case2", "matmul case 2: all_gather",
         "seed 001, A[I, J_X] . B[J, K] -> C[I, K] (replicated): all_gather A over x, then "
         "each of the 4 devices multiplies the whole product", 4),
        ("case3", "matmul case 3: psum",
         "seed 001, A[I, J_X] . B[J_X, K] -> C[I, K]: local products, psum over x (the y "
         "axis is unused: 2 devices compute each partial product)", 2),
        ("case4", "matmul case 4: all_gather B",
         "seed 001, A[I_X, J] . B[J, K_X] -> C[I_X, K]: all_gather B over x (y unused: 2 "
         "devices compute each block)", 2),
    ]
    for req, title, desc, work in cases:
        out.append(dict(name=f"matmul_{req}", short=f"matmul {req}", request=req, title=title,
                        description=desc,
                        params={"n": n}, shape=f"N = {n}", flops=2.0 * n ** 3,
                        device_work=work, contenders=MATMUL_CONTENDERS, kind="flops"))
    out.append(dict(name="batched_matmul", short="batched", request="batched",
                    title="batched matmul",
                    description="seed 004, 8 x N x N . 8 x N x N with the batch over 8 devices "
                    "(pmap(jnp.matmul)): no collective",
                    params={"batch": 8, "n": bn}, shape=f"8 x {bn} x {bn}",
                    flops=8 * 2.0 * bn ** 3, device_work=1, contenders=MATMUL_CONTENDERS,
                    kind="flops"))
    out.append(dict(name="megatron_mlp", short="Megatron MLP", request="megatron",
                    title="Megatron MLP forward",
                    description="seed 000 on the 2 x 2 mesh (data, model): all_gather x over "
                    "model, x @ W1, @ W2, psum_scatter over model (the seed's specs leave "
                    "'data' unused: 2 devices compute each block)",
                    params={"batch": mb, "d": md, "f": mf},
                    shape=f"x {mb} x {md}, W1 {md} x {mf}, W2 {mf} x {md}",
                    flops=4.0 * mb * md * mf, device_work=2, contenders=MATMUL_CONTENDERS,
                    kind="flops"))
    sizes = [784, th, th, th, 10]
    step_flops = sum(2.0 * tb * sizes[l] * sizes[l + 1] * (3 if l > 0 else 2)
                     for l in range(len(sizes) - 1))
    out.append(dict(name="training_step", short="training step", request="training",
                    title="MLP training step",
                    description="seed 002, one SGD step (forward, backward, update) of the MLP "
                    f"[784, {th}, {th}, {th}, 10] with 8-way data parallelism (batch over 8 "
                    "devices, parameters replicated)",
                    params={"hidden": th, "batch": tb, "step": "1e-4"},
                    shape=f"hidden {th}, batch {tb}", flops=step_flops, device_work=1,
                    contenders=MATMUL_CONTENDERS, kind="flops"))
    tr = (dict(batch=16, seq=64, vocab=64, d=256, f=1024, heads=4) if quick else
          dict(batch=32, seq=128, vocab=256, d=512, f=2048, heads=4))
    tokens = tr["batch"] * tr["seq"]
    forward = (2.0 * tokens * 2 * tr["vocab"] * tr["d"]                 # embedding, output
               + 2 * (2.0 * tokens * (4 * tr["d"] ** 2 + 2 * tr["d"] * tr["f"])  # 2 blocks
                      + 4.0 * tokens * tr["seq"] * tr["d"]))            # scores, weighted sum
    out.append(dict(name="transformer_step", short="transformer", request="transformer",
                    title="transformer training step",
                    description="examples/transformer.cpp's model (2 pre-norm blocks of causal "
                    "attention and a GELU MLP, one-hot embedding, cross-entropy): one step "
                    "(value_and_grad, ZeRO-1 Adam) on the 2 x 4 mesh (data, model), Megatron "
                    "over model, the batch over data",
                    params=tr, shape=(f"B {tr['batch']}, S {tr['seq']}, V {tr['vocab']}, "
                                      f"D {tr['d']}, F {tr['f']}, {tr['heads']} heads"),
                    flops=3 * forward, device_work=1, contenders=["typeshard", "jax"],
                    kind="flops"))
    out.append(dict(name="transformer_bf16_step", short="transformer bf16",
                    request="transformer_bf16", title="transformer training step, bf16",
                    description="the transformer step in mixed precision (issue 38): float32 "
                    "master parameters and Adam; typeshard: bf16 products accumulated in float "
                    "(vdpbf16ps), bf16 attention probabilities, LayerNorm/GELU/residual/loss "
                    "in float; jax: parameters and activations cast to bf16, the loss in float",
                    params=tr, shape=(f"B {tr['batch']}, S {tr['seq']}, V {tr['vocab']}, "
                                      f"D {tr['d']}, F {tr['f']}, {tr['heads']} heads, bf16"),
                    flops=3 * forward, device_work=1, contenders=["typeshard", "jax"],
                    kind="flops"))
    for op, what in (("all_gather", "each device ends with S"),
                     ("psum", "each device starts and ends with S"),
                     ("psum_scatter", "each device starts with S, ends with S / n")):
        for devs in (2, 8):
            out.append(dict(name=f"{op}_{devs}dev", short=f"{op} x{devs}", request=op,
                            title=f"{op}, {devs} devices",
                            description=f"{op} of S = 64 MiB float32 on a 1-D mesh of {devs} "
                            f"devices ({what}), through shard_map; the memcpy copies n x S "
                            "bytes",
                            params={"devices": devs, "mib": 64}, shape="S = 64 MiB",
                            bytes=devs * 64 * MIB, contenders=COLLECTIVE_CONTENDERS,
                            kind="bytes"))
    return out


# ---- contender processes -----------------------------------------------------------------------

class ContenderError(Exception):
    pass


class Contender:
    def __init__(self, name, cmd, env, log_path):
        self.name = name
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, cwd=ROOT)
        self.buf = b""

    def alive(self):
        return self.proc.poll() is None

    def request(self, line, timeout):
        if not self.alive():
            raise ContenderError(f"{self.name} exited with code {self.proc.returncode}")
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError as e:
            raise ContenderError(f"{self.name}: {e}") from e
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ContenderError(f"{self.name}: no answer to '{line}' in {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise ContenderError(f"{self.name} exited (code {self.proc.wait()}) "
                                         f"during '{line}'")
                self.buf += chunk
        reply, self.buf = self.buf.split(b"\n", 1)
        return reply.decode(errors="replace")

    def close(self):
        if self.alive():
            try:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def parse_ok(reply):
    """'ok check=1,2 info=text' -> (checks, info)."""
    m = re.match(r"ok check=(\S*) info=(.*)$", reply)
    if not m:
        return [], ""
    checks = [float(v) for v in m.group(1).split(",") if v]
    return checks, m.group(2).strip()


def checks_agree(ref, got, group=16, tol=1e-2):
    """Group by group (16 samples of one array), |got - ref| <= tol x max |ref| of the group."""
    if not ref or not got:
        return None
    if len(ref) != len(got):
        return False
    for g in range(0, len(ref), group):
        r, x = ref[g:g + group], got[g:g + group]
        scale = max(abs(v) for v in r) or 1.0
        if any(abs(a - b) > tol * scale or a != a or b != b for a, b in zip(r, x)):
            return False
    return True


# ---- machine facts ------------------------------------------------------------------------------

def run_text(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


def machine_facts(build, native):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0.0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / (1 << 20)
    except OSError:
        pass
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem, 1), "os": os_name,
        "kernel": platform.release(), "virtualized": "hypervisor" in open("/proc/cpuinfo").read(),
        "gxx": run_text(["g++", "--version"]).splitlines()[0] if shutil.which("g++") else "",
        "clangxx": (run_text(["clang++", "--version"]).splitlines() or [""])[0]
        if shutil.which("clang++") else "",
        "flags": "-O3 -DNDEBUG" + (" -march=native" if native else ""),
        "git": run_text(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
        "git_dirty": bool(run_text(["git", "-C", ROOT, "status", "--porcelain", "--",
                                    "include"])),
    }


def measure_peak(build):
    exe = os.path.join(build, "compare_peak")
    out = run_text([exe]) if os.path.exists(exe) else ""
    m = re.match(r"peak (\S+) (\S+) (\S+) (\d+)", out)
    if not m:
        return {"measured_gflops": None, "one_core_gflops": None, "isa": "", "threads": 0}
    return {"measured_gflops": float(m.group(1)), "one_core_gflops": float(m.group(2)),
            "isa": m.group(3), "threads": int(m.group(4)), "load_at_measurement": loadavg()}


# ---- compile-time cost --------------------------------------------------------------------------

def library_flags(build):
    """The -I/-isystem/-D flags compare_typeshard compiles with (so typeshard::blas's too)."""
    path = os.path.join(build, "compile_commands.json")
    flags = ["-I" + os.path.join(ROOT, "include")]
    try:
        with open(path) as f:
            for entry in json.load(f):
                if entry["file"].endswith("typeshard_main.cpp"):
                    words = entry["command"].split()
                    i = 0
                    while i < len(words):
                        w = words[i]
                        if w in ("-isystem", "-I") and i + 1 < len(words):
                            flags += [w, words[i + 1]]
                            i += 1
                        elif w.startswith("-D") and w != "-DNDEBUG" or w.startswith("-I"):
                            flags.append(w)
                        i += 1
                    break
    except (OSError, ValueError, KeyError):
        pass
    return list(dict.fromkeys(flags))


def baseline_tu(path):
    """A translation unit with only the standard headers typeshard includes, and Hana."""
    headers = set()
    for f in glob.glob(os.path.join(ROOT, "include", "typeshard", "**", "*.hpp"), recursive=True):
        with open(f) as src:
            for line in src:
                m = re.match(r"\s*#\s*include\s*<([^>]+)>", line)
                if m:
                    headers.add(m.group(1))
    skip = {"mpi.h", "cblas.h", "io.h", "unistd.h", "immintrin.h", "emmintrin.h"}
    std = sorted(h for h in headers if h not in skip and "/" not in h)
    with open(path, "w") as f:
        f.write("// Generated by benchmarks/compare: the standard headers typeshard includes, and "
                "Boost.Hana.\n")
        for h in std:
            f.write(f"#include <{h}>\n")
        f.write("#include <boost/hana.hpp>\n\nint main() { return 0; }\n")
    return std


def compile_costs(build, quick, log):
    time_exe = "/usr/bin/time"
    if not os.path.exists(time_exe):
        return {"error": "/usr/bin/time is missing (Debian package: time)"}
    base = os.path.join(build, "compile_baseline.cpp")
    std = baseline_tu(base)
    examples = sorted(glob.glob(os.path.join(ROOT, "examples", "*.cpp")))
    if quick:
        examples = [e for e in examples if os.path.basename(e) == "seed000.cpp"]
    flags = ["-std=c++20", "-O2", "-DNDEBUG"] + library_flags(build) + [
        "-I" + os.path.join(ROOT, "examples")]
    rows = []
    for src in [base] + examples:
        name = "baseline (std + Hana)" if src == base else "examples/" + os.path.basename(src)
        for cxx in ("g++", "clang++"):
            if not shutil.which(cxx):
                continue
            with tempfile.NamedTemporaryFile(suffix=".o") as obj:
                cmd = [time_exe, "-v", cxx] + flags + ["-c", src, "-o", obj.name]
                load = loadavg()
                p = subprocess.run(cmd, capture_output=True, text=True)
            stats = {}
            for line in p.stderr.splitlines():
                line = line.strip()
                for key, label in (("user", "User time (seconds)"),
                                   ("sys", "System time (seconds)"),
                                   ("rss_kib", "Maximum resident set size (kbytes)"),
                                   ("wall", "Elapsed (wall clock) time (h:mm:ss or m:ss)")):
                    if line.startswith(label + ":"):
                        stats[key] = line.split(": ", 1)[1]
            wall = 0.0
            for part in stats.get("wall", "0").split(":"):
                wall = wall * 60 + float(part)
            row = {"file": name, "compiler": cxx, "ok": p.returncode == 0, "wall_s": wall,
                   "cpu_s": float(stats.get("user", 0)) + float(stats.get("sys", 0)),
                   "max_rss_mib": float(stats.get("rss_kib", 0)) / 1024, "load": load}
            rows.append(row)
            log(f"  compile {name:32s} {cxx:8s} cpu {row['cpu_s']:6.1f} s  wall "
                f"{row['wall_s']:6.1f} s  peak memory {row['max_rss_mib']:7.0f} MiB"
                + ("" if row["ok"] else "  FAILED: " + p.stderr.strip().splitlines()[-1]))
    return {"flags": " ".join(["-std=c++20", "-O2", "-DNDEBUG", "-c"]), "baseline_headers": std,
            "rows": rows}


# ---- the run ------------------------------------------------------------------------------------

def fmt_ms(s):
    if s is None:
        return "-"
    ms = s * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--venv-python", default="")
    ap.add_argument("--jax-note", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--native", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated workload names (or prefixes)")
    ap.add_argument("--contenders", default="", help="comma-separated contenders")
    ap.add_argument("--no-compile-cost", action="store_true")
    ap.add_argument("--docs", type=int, default=-1,
                    help="write docs/performance.md (default: on full runs only)")
    ap.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results"))
    ap.add_argument("--report-only", action="store_true",
                    help="redraw the plots and rewrite the Markdown from latest.json")
    args = ap.parse_args()
    if args.report_only:
        with open(os.path.join(args.results, "latest.json")) as f:
            report = json.load(f)
        write_outputs(report, args, print)
        return

    quick = args.quick
    reps_min, reps_max, target_s = (5, 10, 0.5) if quick else (5, 25, 3.0)
    os.makedirs(args.results, exist_ok=True)
    logdir = os.path.join(args.build, "logs")
    os.makedirs(logdir, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    t_start = time.monotonic()

    def log(msg=""):
        print(msg, flush=True)

    machine = machine_facts(args.build, bool(args.native))
    machine["load_before"] = loadavg()
    log(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, "
        f"{machine['os']}, load {machine['load_before']}")
    peak = measure_peak(args.build)
    if peak["measured_gflops"]:
        log(f"peak: {peak['measured_gflops']:.1f} GFLOP/s single precision measured on "
            f"{peak['threads']} cores ({peak['isa']} FMA kernel; one core "
            f"{peak['one_core_gflops']:.1f})")
    else:
        log("peak: not measured (compare_peak missing)")

    exe = {
        "typeshard": [os.path.join(args.build, "compare_typeshard")],
        "openblas": [os.path.join(args.build, "compare_openblas")],
        "eigen": [os.path.join(args.build, "compare_eigen")],
        "threads": [os.path.join(args.build, "compare_threads"), "threads"],
        "memcpy": [os.path.join(args.build, "compare_threads"), "memcpy"],
        "jax": [args.venv_python, os.path.join(HERE, "jax_contender.py")] if args.venv_python
        else None,
    }
    for twin, base in UNPINNED.items():
        exe[twin] = exe[base]
    missing_note = {}
    for name, cmd in exe.items():
        if cmd is None:
            missing_note[name] = args.jax_note or "JAX is not installed"
        elif not os.path.exists(cmd[0]):
            missing_note[name] = f"{os.path.relpath(cmd[0], ROOT)} was not built"
    wanted = set(args.contenders.split(",")) if args.contenders else set(CONTENDER_ORDER)
    env = dict(os.environ)
    env_unpinned = {k: v for k, v in env.items() if k not in OPENBLAS_ENV}
    machine["openblas_env"] = {k: env.get(k) for k in OPENBLAS_ENV}
    log("OpenBLAS environment: " + ", ".join(f"{k}={env.get(k, '(unset)')}" for k in OPENBLAS_ENV)
        + "; the *_unpinned contenders run with both unset")
    procs = {}

    def contender(name):
        if name not in procs or not procs[name].alive():
            procs[name] = Contender(name, exe[name], env_unpinned if name in UNPINNED else env,
                                    os.path.join(logdir, f"{name}.log"))
        return procs[name]

    selected = workloads(quick)
    if args.only:
        keys = args.only.split(",")
        selected = [w for w in selected if any(w["name"].startswith(k) for k in keys)]

    results = []
    for w in selected:
        log()
        log(f"== {w['name']}: {w['title']} ({w['shape']})")
        log(f"   {w['description']}")
        entry = dict((k, v) for k, v in w.items() if k != "contenders")
        entry["contenders"] = {}
        entry["load_before"] = loadavg()
        active = []
        for c in w["contenders"]:
            rec = {"label": CONTENDER_LABELS[c]}
            entry["contenders"][c] = rec
            if c not in wanted:
                rec["status"] = "not selected"
                continue
            if c in missing_note:
                rec["status"] = "skipped: " + missing_note[c]
                log(f"   {c}: {rec['status']}")
                continue
            params = " ".join(f"{k}={v}" for k, v in w["params"].items())
            try:
                t0 = time.monotonic()
                reply = contender(c).request(f"setup {w['request']} {params}", timeout=1800)
                rec["setup_s"] = round(time.monotonic() - t0, 2)
            except ContenderError as e:
                reply = f"error {e}"
            if reply.startswith("ok"):
                rec["checks"], rec["info"] = parse_ok(reply)
                rec["status"] = "ok"
                rec["times"] = []
                active.append(c)
                if rec["info"]:
                    log(f"   {c}: {rec['info']}")
            else:
                rec["status"] = reply
                log(f"   {c}: {reply}")
        # checks against typeshard's (the first with checks, if typeshard failed)
        ref_name = next((c for c in active if entry["contenders"][c]["checks"]), None)
        for c in active:
            rec = entry["contenders"][c]
            rec["check"] = checks_agree(entry["contenders"][ref_name]["checks"],
                                        rec["checks"]) if ref_name else None
            rec["check_against"] = ref_name
            if rec["check"] is False:
                log(f"   {c}: CHECK FAILED: its result differs from {ref_name}'s")
        # alternating rounds
        rounds = 0
        while active:
            order = active[rounds % len(active):] + active[:rounds % len(active)]
            for c in list(order):
                rec = entry["contenders"][c]
                try:
                    reply = contender(c).request("run", timeout=1800)
                except ContenderError as e:
                    reply = f"error {e}"
                if reply.startswith("time "):
                    rec["times"].append(float(reply.split()[1]))
                else:
                    rec["status"] = reply
                    active.remove(c)
                    log(f"   {c}: {reply}")
                time.sleep(SETTLE_S.get(c, 0.0))
            rounds += 1
            if rounds >= reps_max:
                break
            if rounds >= reps_min and all(sum(entry["contenders"][c]["times"]) >= target_s
                                          for c in active):
                break
        for c in w["contenders"]:
            if c in procs and procs[c].alive() and entry["contenders"][c].get("status") == "ok":
                try:
                    procs[c].request("free", timeout=600)
                except ContenderError:
                    pass
        entry["load_after"] = loadavg()
        entry["rounds"] = rounds
        # statistics
        base = None
        for c in w["contenders"]:
            rec = entry["contenders"][c]
            if rec.get("times"):
                t = rec["times"]
                rec["median_s"] = statistics.median(t)
                rec["min_s"] = min(t)
                rec["max_s"] = max(t)
                if w["kind"] == "flops":
                    rec["gflops"] = w["flops"] / rec["median_s"] / 1e9
                else:
                    rec["gbytes_per_s"] = w["bytes"] / rec["median_s"] / 1e9
                if c == "typeshard":
                    base = rec["median_s"]
        for c in w["contenders"]:
            rec = entry["contenders"][c]
            if base and rec.get("median_s"):
                rec["ratio"] = rec["median_s"] / base
        # print
        unit = "GFLOP/s" if w["kind"] == "flops" else "GB/s"
        log(f"   {'contender':38s} {'median ms':>10s} {'min':>9s} {'max':>9s} {'runs':>5s} "
            f"{unit:>8s} {'ratio':>7s}  check")
        for c in w["contenders"]:
            rec = entry["contenders"][c]
            if not rec.get("median_s"):
                continue
            rate = rec.get("gflops", rec.get("gbytes_per_s", 0))
            chk = {True: "ok", False: "FAILED", None: "-"}[rec.get("check")]
            log(f"   {rec['label']:38s} {fmt_ms(rec['median_s']):>10s} {fmt_ms(rec['min_s']):>9s} "
                f"{fmt_ms(rec['max_s']):>9s} {len(rec['times']):5d} {rate:8.1f} "
                f"{rec.get('ratio', 0):7.3f}  {chk}")
        log(f"   load average {entry['load_before'][0] if entry['load_before'] else '?'} -> "
            f"{entry['load_after'][0] if entry['load_after'] else '?'}")
        for c in w["contenders"]:
            rec = entry["contenders"][c]
            if c != "typeshard" and rec.get("ratio"):
                log(f"ratio {w['name']} {c} {rec['ratio']:.3f}")
        results.append(entry)

    for p in procs.values():
        p.close()

    compile_info = None
    if not args.no_compile_cost:
        log()
        log("== compile-time cost")
        compile_info = compile_costs(args.build, quick, log)

    machine["load_after"] = loadavg()
    report = {
        "schema": 1,
        "mode": "quick" if quick else "full",
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t_start, 1),
        "machine": machine,
        "peak": peak,
        "settings": {"rounds_min": reps_min, "rounds_max": reps_max, "target_s": target_s,
                     "settle_s": SETTLE_S,
                     "statistic": "median over alternating rounds (rotating start)"},
        "workloads": results,
        "compile": compile_info,
    }
    json_path = os.path.join(args.results, "latest.json")
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    log()
    log(f"wrote {os.path.relpath(json_path, ROOT)}")
    write_outputs(report, args, log)


def write_outputs(report, args, log):
    """The plots (with the venv's matplotlib), latest.md and, after full runs, the docs page."""
    quick = report["mode"] == "quick"
    json_path = os.path.join(args.results, "latest.json")
    plot_note = ""
    if args.venv_python:
        p = subprocess.run([args.venv_python, os.path.join(HERE, "plot.py"), json_path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            plot_note = "plots not drawn: " + (p.stderr.strip().splitlines() or ["?"])[-1]
        else:
            log(p.stdout.strip())
    else:
        plot_note = "plots not drawn: no Python with matplotlib (" + (args.jax_note or "?") + ")"
    if plot_note:
        log(plot_note)

    sys.path.insert(0, HERE)
    import report as report_md  # noqa: E402 - the Markdown writer lives beside this file
    md = report_md.markdown(report, image_prefix="", plot_note=plot_note)
    md_path = os.path.join(args.results, "latest.md")
    with open(md_path, "w") as f:
        f.write(md)
    log(f"wrote {os.path.relpath(md_path, ROOT)}")
    write_docs = args.docs == 1 or (args.docs == -1 and not quick)
    if write_docs:
        doc = report_md.performance_doc(report, plot_note=plot_note)
        doc_path = os.path.join(ROOT, "docs", "performance.md")
        # scripts/compile-time owns the "## Compile time" section at the end: keep it.
        kept = "\n## Compile time\n"
        if os.path.exists(doc_path):
            old = open(doc_path).read()
            if kept in old:
                doc = doc.rstrip("\n") + "\n" + old[old.index(kept):]
        with open(doc_path, "w") as f:
            f.write(doc)
        log(f"wrote {os.path.relpath(doc_path, ROOT)}")
    log()
    log(report_md.summary_table(report))
    log(f"done in {report['duration_s']:.0f} s")


if __name__ == "__main__":
    main()
