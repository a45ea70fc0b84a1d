"""benchmarks/compare_support/plot.py: the pictures of benchmarks/compare's report.

    python plot.py benchmarks/results/latest.json

Writes, next to the JSON, <workload>.png for every workload (left: each contender's median
time with its min-max range and its ratio to typeshard; right: throughput, GFLOP/s of useful
work against the machine's measured peak, or GB/s for the collectives) and
summary.png (every ratio, on a log scale). Needs matplotlib (installed in benchmarks/compare's
venv).
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["typeshard", "typeshard_unpinned", "openblas", "openblas_unpinned", "eigen", "threads",
         "threads_unpinned", "jax", "memcpy"]
COLORS = {"typeshard": "#1f77b4", "typeshard_unpinned": "#aec7e8", "openblas": "#7f7f7f",
          "openblas_unpinned": "#c7c7c7", "eigen": "#bcbd22", "threads": "#2ca02c",
          "threads_unpinned": "#98df8a", "jax": "#d62728", "memcpy": "#9467bd"}
LABELS = {"typeshard_unpinned": "typeshard, OPENBLAS_* unset",
          "openblas": "OpenBLAS, all cores", "openblas_unpinned": "OpenBLAS, OPENBLAS_* unset",
          "threads_unpinned": "std::thread, OPENBLAS_* unset", "eigen": "Eigen, all cores",
          "threads": "hand-written std::thread", "jax": "JAX (CPU, 8 devices)",
          "memcpy": "memcpy, all cores"}


def measured(w):
    return [c for c in ORDER if c in w["contenders"] and w["contenders"][c].get("median_s")]


def workload_figure(w, report, path):
    cs = measured(w)
    if not cs:
        return False
    recs = [w["contenders"][c] for c in cs]
    labels = [r["label"] for r in recs]
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(11, 0.55 * len(cs) + 1.9))
    y = list(range(len(cs)))[::-1]
    med = [r["median_s"] * 1e3 for r in recs]
    lo = [m - r["min_s"] * 1e3 for m, r in zip(med, recs)]
    hi = [r["max_s"] * 1e3 - m for m, r in zip(med, recs)]
    ax_t.barh(y, med, xerr=[lo, hi], color=[COLORS[c] for c in cs], capsize=3)
    ax_t.set_yticks(y)
    ax_t.set_yticklabels(labels)
    ax_t.set_xlabel("median time per run, ms (bars: min to max)")
    for yi, m, h, r, c in zip(y, med, hi, recs, cs):
        text = "" if c == "typeshard" else f"  {r.get('ratio', 0):.2f}x"
        if r.get("check") is False:
            text += " WRONG"
        ax_t.text(m + h, yi, text, va="center", ha="left", fontsize=8)
    ax_t.set_xlim(0, max(m + h for m, h in zip(med, hi)) * 1.3)

    if w["kind"] == "flops":
        rate = [r["gflops"] for r in recs]
        ax_r.barh(y, rate, color=[COLORS[c] for c in cs])
        peak = report["peak"].get("measured_gflops")
        top = max(rate + [peak or 0])
        if peak:
            ax_r.axvline(peak, color="k", lw=1)
            ax_r.text(peak, max(y) + 0.45, f" measured peak {peak:.0f}", fontsize=8, va="bottom")
        ax_r.set_xlabel("GFLOP/s of useful work (the unsharded problem's flops)")
        ax_r.set_xlim(0, top * 1.2)
        ax_r.set_ylim(min(y) - 0.9, max(y) + 0.9)
    else:
        rate = [r["gbytes_per_s"] for r in recs]
        ax_r.barh(y, rate, color=[COLORS[c] for c in cs])
        ax_r.set_xlabel("GB/s (n x S bytes per collective)")
        ax_r.set_xlim(0, max(rate) * 1.25)
    for yi, v in zip(y, rate):
        ax_r.text(v, yi, f" {v:.1f}", va="center", fontsize=8)
    ax_r.set_yticks(y)
    ax_r.set_yticklabels([])
    fig.suptitle(f"{w['title']} ({w['shape']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def summary_figure(report, path):
    ws = [w for w in report["workloads"] if measured(w)]
    others = [c for c in ORDER if c != "typeshard" and any(
        w["contenders"].get(c, {}).get("ratio") for w in ws)]
    if not ws or not others:
        return False
    fig, ax = plt.subplots(figsize=(11, 4.2))
    width = 0.8 / len(others)
    for k, c in enumerate(others):
        xs, vs = [], []
        for i, w in enumerate(ws):
            r = w["contenders"].get(c, {}).get("ratio")
            if r:
                xs.append(i - 0.4 + width * (k + 0.5))
                vs.append(r)
        ax.bar(xs, vs, width, color=COLORS[c], label=LABELS[c])
    ax.axhline(1.0, color="k", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(ws)))
    ax.set_xticklabels([w.get("short", w["name"]) for w in ws], fontsize=8, rotation=30,
                       ha="right")
    ax.set_ylabel("contender time / typeshard time\n(above 1: typeshard faster)")
    ax.legend(fontsize=7, ncol=min(len(others), 4), loc="upper left")
    ax.set_title(f"typeshard against the alternatives ({report['mode']} run)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def main():
    path = sys.argv[1]
    with open(path) as f:
        report = json.load(f)
    out = os.path.dirname(os.path.abspath(path))
    drawn = 0
    for w in report["workloads"]:
        drawn += workload_figure(w, report, os.path.join(out, w["name"] + ".png"))
    drawn += summary_figure(report, os.path.join(out, "summary.png"))
    print(f"drew {drawn} plots in {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
