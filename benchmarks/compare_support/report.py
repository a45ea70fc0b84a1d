"""benchmarks/compare_support/report.py: the Markdown of benchmarks/compare's report, written
from its JSON (benchmarks/results/latest.json) by driver.py: benchmarks/results/latest.md and,
after full runs, docs/performance.md. Standard library only."""

ORDER = ["typeshard", "typeshard_unpinned", "openblas", "openblas_unpinned", "eigen", "threads",
         "threads_unpinned", "jax", "memcpy"]
SHORT = {"typeshard": "typeshard", "typeshard_unpinned": "typeshard unpinned",
         "openblas": "OpenBLAS", "openblas_unpinned": "OpenBLAS unpinned", "eigen": "Eigen",
         "threads": "std::thread", "threads_unpinned": "std::thread unpinned", "jax": "JAX",
         "memcpy": "memcpy"}

CONTENDERS_TEXT = """\
| contender | what runs |
|---|---|
| typeshard | the seed's program in typeshard: `ts::matmul` with the seed's output spec (cases 1-4, the batched product), `ts::shard_map` with explicit collectives (Megatron, the collectives), the loss in the global view differentiated by `ts::value_and_grad`, the update by `ts::zero_sgd_update` (ZeRO-1: fused reduce-scatter and update on each device's 1/8, then all-gather) (training); examples/transformer.cpp's model itself (examples/support/transformer_model.hpp: `ts::value_and_grad` and ZeRO-1 Adam on the 2 x 4 mesh) (transformer). 8 simulated devices (`ts::cpu_devices{8}`, meshes on the first 2, 4 or 8); each device's GEMM is `kernels::gemm`, single-threaded: typeshard's own kernel at the widest SIMD level where that is AVX-512, else OpenBLAS (docs/kernels/gemm.md). The timed call includes everything a user pays: dispatch to the devices, allocation of the outputs, the collectives. |
| OpenBLAS, all cores | the unsharded problem (one product for cases 1-4 whatever their sharding, one per batch element, the two products of the MLP, the serial training step) on the pthread OpenBLAS with one thread per core, linked into its own executable. No communication, outputs allocated before timing: the throughput limit of one machine. |
| Eigen 3.4, all cores | the same unsharded problems with Eigen's products (`.noalias()`), parallel through OpenMP (`Eigen::setNbThreads(cores)`). |
| hand-written std::thread | the typeshard program written by hand: the same devices (one `std::thread` each), the same blocks, the collectives as `memcpy` and summing loops between the devices' buffers, `std::barrier` where needed, the same serial OpenBLAS. Buffers allocated before timing. What a user writes without typeshard; the gap to it is typeshard's overhead. |
| ..., OPENBLAS_* unset | the same contender (typeshard, OpenBLAS, std::thread: those that link OpenBLAS) in a process without `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE`, so OpenBLAS picks its kernels by its own core detection. The ratio is still to typeshard in the environment as set up. |
| JAX (CPU, 8 devices) | the seed's own Python code (for the transformer, the same model written in JAX with the same shardings: `NamedSharding`s and `with_sharding_constraint` on the activations and the ZeRO-1 update shards, the whole step in one `jax.jit`), on JAX's CPU backend with `XLA_FLAGS=--xla_force_host_platform_device_count=8`. A run is one call and `block_until_ready`. |
| memcpy, all cores | for the collectives: a `memcpy` of n x S bytes (what the collective must read or write over all devices) by one thread per core, between buffers allocated and touched before timing: the memory system's floor. |
"""

METHOD_TEXT = """\
Every contender is a long-lived process. For each workload it builds the same inputs (the
same numbers: a formula of the element index), runs once to warm up, and returns 16 samples
of its result, which must agree with typeshard's (the `check` column). Then the contenders
run one after the other, one run each per round, the first contender rotating from round to
round so that changes in the machine's load hit all of them alike; the table gives each
contender's median over the rounds, and the ratio of medians to typeshard's (contender time /
typeshard time: above 1 means typeshard is faster). GFLOP/s counts the useful flops of the
unsharded problem (2 N^3 per product); where the seed's program has devices repeat each
other's work (the "device work" factor: cases 2 to 4 and the Megatron MLP leave a mesh axis
unused), the sharded contenders do that many times the flops. For the collectives the memcpy
is a floor, not a competitor: it copies n x S bytes, what all_gather writes and psum reads and
writes; psum_scatter reads as much but writes n times less, so it can beat the memcpy.
"""


def fmt_ms(s):
    if s is None:
        return "-"
    ms = s * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def contenders_of(w):
    return [c for c in ORDER if c in w["contenders"]]


def cell(w, c):
    rec = w["contenders"].get(c)
    if rec is None:
        return ""
    if rec.get("median_s") is None:
        status = rec.get("status", "")
        return "skipped" if status.startswith("skip") or status == "not selected" else "failed"
    text = fmt_ms(rec["median_s"])
    if c != "typeshard" and rec.get("ratio"):
        text += f" ({rec['ratio']:.2f})"
    if rec.get("check") is False:
        text += " WRONG"
    return text


def summary_table(report):
    cols = [c for c in ORDER if any(c in w["contenders"] for w in report["workloads"])]
    lines = ["| workload | size | " + " | ".join(SHORT[c] for c in cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for w in report["workloads"]:
        lines.append(f"| {w['title']} | {w['shape']} | " +
                     " | ".join(cell(w, c) for c in cols) + " |")
    return "\n".join(lines)


def behind(report):
    """Where typeshard is not ahead, stated from the numbers."""
    out = []
    for w in report["workloads"]:
        for c in contenders_of(w):
            r = w["contenders"][c].get("ratio")
            if c == "typeshard" or r is None:
                continue
            if c == "openblas" and w["name"] == "matmul_case1":
                # r = OpenBLAS time / typeshard time = typeshard's throughput / OpenBLAS's
                verdict = "meets" if r >= 0.9 else "misses"
                out.append(f"- {w['title']}: typeshard runs at {r:.2f}x OpenBLAS-all-cores' "
                           f"throughput ({verdict} the 0.9x target).")
            elif r < 1.0 and c in ("jax", "threads"):
                out.append(f"- {w['title']}: {SHORT[c]} takes {r:.2f}x typeshard's time "
                           + ("(at par: within 3%)." if r >= 0.97 else "(typeshard is slower)."))
            elif r < 1.0 and w["kind"] == "flops" and w.get("device_work", 1) == 1:
                out.append(f"- {w['title']}: {SHORT[c]} takes {r:.2f}x typeshard's time.")
    return out


def machine_text(report):
    m, p = report["machine"], report["peak"]
    when = report["started"].replace("T", " ")
    text = (f"Taken {when} ({report['mode']} run, {report['duration_s']:.0f} s) on "
            f"{m['cpu'] or 'an unknown CPU'}, {m['cores']} cores, {m['memory_gib']} GiB, "
            f"{m['os']}, Linux {m['kernel']}"
            + (" (a virtual machine)" if m.get("virtualized") else "") + ". "
            f"Contenders built with {m['gxx']}, `{m['flags']}`; typeshard at commit `{m['git']}`"
            + (" with uncommitted changes under include/" if m.get("git_dirty") else "") + ". "
            f"Load average (1 min) {m['load_before'][0] if m['load_before'] else '?'} before, "
            f"{m['load_after'][0] if m['load_after'] else '?'} after: other processes shared "
            "the cores when it is well above 0.\n\n")
    if p.get("measured_gflops"):
        text += (f"Peak: **{p['measured_gflops']:.0f} GFLOP/s** single precision, measured "
                 f"on {p['threads']} cores by an FMA-bound kernel ({p['isa']}; "
                 f"{p['one_core_gflops']:.0f} on one core; load {p.get('load_at_measurement', ['?'])[0]} "
                 "at the time). Every \"% of peak\" below is of this measured figure.\n")
    env = m.get("openblas_env")
    if env:
        text += ("\nOpenBLAS environment: " + ", ".join(
            f"`{k}={v}`" if v is not None else f"`{k}` unset" for k, v in env.items())
            + "; the contenders marked \"OPENBLAS_* unset\" run without both.\n")
    gemm = {}
    for w in report["workloads"]:
        for c, rec in w["contenders"].items():
            for part in (rec.get("info") or "").split(";"):
                if part.strip().startswith("gemm:"):
                    gemm.setdefault(c, part.strip()[len("gemm:"):].strip())
    if gemm:
        text += "\n| contender | GEMM kernel (ISA), as the contender reports it |\n|---|---|\n"
        text += "".join(f"| {SHORT.get(c, c)} | {gemm[c]} |\n" for c in ORDER if c in gemm)
    info = {}
    for w in report["workloads"]:
        for c, rec in w["contenders"].items():
            if rec.get("info") and c in ("openblas", "eigen", "jax"):
                parts = [p.strip() for p in rec["info"].split(";")
                         if not p.strip().startswith("gemm:")]
                if parts:
                    info.setdefault(c, parts[0])
    if info:
        text += "\nVersions: " + "; ".join(f"{SHORT[c]}: {v}" for c, v in info.items()) + ".\n"
    return text


def workload_section(w, report, image_prefix):
    peak = report["peak"].get("measured_gflops")
    lines = [f"### {w['title']} ({w['shape']})", "", w["description"] + ".", ""]
    if w["kind"] == "flops":
        lines.append(f"Useful work: {w['flops'] / 1e9:.1f} GFLOP per run; device work x"
                     f"{w.get('device_work', 1)} for the sharded contenders. "
                     f"{w['rounds']} rounds; load {w['load_before'][0]} -> {w['load_after'][0]}.")
    else:
        lines.append(f"n x S = {w['bytes'] / (1 << 20):.0f} MiB per collective. {w['rounds']} "
                     f"rounds; load {w['load_before'][0]} -> {w['load_after'][0]}.")
    lines += ["", f"![{w['title']}]({image_prefix}{w['name']}.png)", ""]
    unit = "GFLOP/s" if w["kind"] == "flops" else "GB/s"
    head = f"| contender | median ms | min | max | runs | {unit} |"
    sep = "|---|---|---|---|---|---|"
    if w["kind"] == "flops" and peak:
        head += " % of peak |"
        sep += "---|"
    lines += [head + " ratio | check | notes |", sep + "---|---|---|"]
    for c in contenders_of(w):
        rec = w["contenders"][c]
        if rec.get("median_s") is None:
            lines.append(f"| {rec['label']} | {rec.get('status', '')} |" + " |" * (
                7 if w["kind"] == "flops" and peak else 6))
            continue
        rate = rec.get("gflops", rec.get("gbytes_per_s", 0))
        row = (f"| {rec['label']} | {fmt_ms(rec['median_s'])} | {fmt_ms(rec['min_s'])} | "
               f"{fmt_ms(rec['max_s'])} | {len(rec['times'])} | {rate:.1f} |")
        if w["kind"] == "flops" and peak:
            row += f" {100 * rate / peak:.0f}% |"
        check = {True: "ok", False: "**WRONG**", None: "-"}[rec.get("check")]
        info = (rec.get("info") or "").replace("|", "/")
        row += f" {rec.get('ratio', 1.0):.2f} | {check} | {info} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def compile_section(report):
    c = report.get("compile")
    if not c:
        return "Not measured in this run.\n"
    if "error" in c:
        return c["error"] + "\n"
    rows = {}
    for r in c["rows"]:
        rows.setdefault(r["file"], {})[r["compiler"]] = r
    lines = [
        f"Each file compiled alone (`{c['flags']}`, typeshard's include and BLAS flags), one "
        "compile at a time, measured by `/usr/bin/time -v`: CPU time (user + system: the "
        "figure least disturbed by other processes), wall time and peak memory (maximum "
        "resident set). The baseline is a translation unit that includes only the "
        f"{len(c['baseline_headers'])} standard headers typeshard's headers include and "
        "`<boost/hana.hpp>` (typeshard itself includes no Boost header today).",
        "",
        "| file | g++ CPU s | g++ wall s | g++ MiB | clang++ CPU s | clang++ wall s | clang++ MiB |",
        "|---|---|---|---|---|---|---|"]
    for f, by in rows.items():
        cells = []
        for cxx in ("g++", "clang++"):
            r = by.get(cxx)
            if r is None:
                cells += ["-"] * 3
            elif not r["ok"]:
                cells += ["failed", "-", "-"]
            else:
                cells += [f"{r['cpu_s']:.1f}", f"{r['wall_s']:.1f}", f"{r['max_rss_mib']:.0f}"]
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def analysis():
    """The hand-written analysis beside this file (analysis.md), if any."""
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "analysis.md")
    try:
        with open(path) as f:
            return f.read().strip() + "\n"
    except OSError:
        return ""


def markdown(report, image_prefix="", plot_note="", title="typeshard against the alternatives"):
    parts = [f"# {title}", "",
             "Generated by `benchmarks/compare" + (" --quick" if report["mode"] == "quick" else "")
             + "` from `benchmarks/results/latest.json`; do not edit by hand.", "",
             machine_text(report), "## Summary", "",
             "Median time in ms; in parentheses the ratio to typeshard's median (contender / "
             "typeshard: above 1 means typeshard is faster).", "",
             summary_table(report), ""]
    if not plot_note:
        parts += [f"![ratios]({image_prefix}summary.png)", ""]
    else:
        parts += [f"({plot_note})", ""]
    b = behind(report)
    parts += ["### Where typeshard is behind, or at par", ""]
    parts += (b or ["- nowhere in this run."]) + [""]
    why = analysis()
    if why:
        parts += ["### Why (written by hand, in benchmarks/compare_support/analysis.md)", "", why]
    parts += ["## How it is measured", "", METHOD_TEXT, CONTENDERS_TEXT, "## Workloads", ""]
    for w in report["workloads"]:
        parts.append(workload_section(w, report, image_prefix))
    parts += ["## Compile-time cost", "", compile_section(report)]
    return "\n".join(parts)


GEMM_TEXT = """\
## The per-shard GEMM

Every device runs its blocks' products through `kernels::gemm`, single-threaded (the mesh is
the parallelism), so the matmul workloads below run at the speed of that GEMM. Which kernel it
runs (the report's GEMM table says, per contender):

- **typeshard's own packed kernel with an AVX-512 micro-kernel** wherever the CPU has AVX-512
  (F, DQ, VL), detected from CPUID features at run time, whatever a BLAS's core detection or its
  environment says. On the Zen 5 machines here it runs at 85-90% of the measured single-core
  peak, in float and in double, at the per-device shapes of these workloads, where Debian
  12's OpenBLAS, pinned to its AVX2 kernels by `OPENBLAS_CORETYPE=Haswell` as these machines
  must pin it, reaches 48%; BLIS 0.9 does not recognise Zen 5 (16%); oneDNN's `dnnl_sgemm`
  reaches 96% but has no double GEMM. The measurements and the reasoning:
  [docs/reference/kernels/gemm.md](reference/kernels/gemm.md); the latest `bench_gemm` table:
  [benchmarks/results/gemm.md](../benchmarks/results/gemm.md).
- **the linked OpenBLAS** (pthread build, one thread per call) on CPUs with AVX2 but not
  AVX-512, where its AVX2 kernels are faster than typeshard's (by a few percent on Zen 5 with
  AVX2 forced, by 0-18% on Zen 3: [gemm.md](reference/kernels/gemm.md));
- **typeshard's AVX2 or portable kernel** when no BLAS is linked.

`TYPESHARD_GEMM_ISA=portable|avx2|avx512` (or `kernels::set_gemm_isa`) forces typeshard's
kernel at a level, e.g. to see what an AVX2-only machine would get; `bench_gemm` measures every
level the CPU has against single-thread OpenBLAS and the peak. The contenders marked
"OPENBLAS_* unset" below run in processes without `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE`,
so OpenBLAS picks its kernels itself; typeshard's does not change, which is the point.

"""


def performance_doc(report, plot_note=""):
    intro = (
        "# Performance\n\n"
        "This page is the latest full report of `benchmarks/compare`, which runs each workload of\n"
        "the seeds on typeshard and on its alternatives side by side (OpenBLAS and Eigen on all\n"
        "cores, the same program hand-written with `std::thread`, JAX on the CPU with 8 devices,\n"
        "and `memcpy` for the collectives), and measures what the examples cost to compile.\n"
        "Regenerate it with `benchmarks/compare` (about 12 minutes on 2 idle cores here; `--quick`\n"
        "takes about 2 and writes only `benchmarks/results/`). The raw numbers are in\n"
        "[benchmarks/results/latest.json](../benchmarks/results/latest.json).\n\n")
    body = markdown(report, image_prefix="../benchmarks/results/", plot_note=plot_note,
                    title="The latest report")
    # one heading level down, under the page's title
    body = "\n".join(("#" + line) if line.startswith("#") else line
                     for line in body.splitlines()) + "\n"
    return intro + GEMM_TEXT + body
