#!/usr/bin/env python3
"""Chart of graph_memory.py's JSON: CUDA-graph pool memory, patches off vs on, per release and
arrangement, with the floor (largest single pass) and the unpatched sum marked.

  python benchmarks/plot_graph_memory.py benchmarks/results/graph_memory_h200.json docs/benchmarks_graph_memory.png
  python benchmarks/plot_graph_memory.py benchmarks/results/graph_memory_h200.json --markdown   (the tables)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"off": "patches off", "graph_pool": "graph_pool only", "capture_stream": "capture_stream only",
          "graph_pool,capture_stream": "graph_pool + capture_stream"}
COLORS = {"off": "#c0504d", "graph_pool": "#f2a65a", "capture_stream": "#f6d365",
          "graph_pool,capture_stream": "#4f81bd"}
ON = {"0.5.14": "graph_pool,capture_stream"}


def main(src, dst):
    data = json.load(open(src))
    summary, meta = data["summary"], data["meta"]
    versions = list(summary)
    fig, axes = plt.subplots(1, len(versions), figsize=(6.2 * len(versions), 4.6), sharey=True, squeeze=False)
    for ax, version in zip(axes[0], versions):
        arrangements = summary[version]["arrangements"]
        modes = [m for m in LABELS if any(m in row["modes"] for row in arrangements.values())]
        width = 0.8 / len(modes)
        for i, (name, row) in enumerate(arrangements.items()):
            for j, mode in enumerate(modes):
                m = row["modes"].get(mode)
                if m is None:
                    continue
                x = i - 0.4 + width * (j + 0.5)
                mib = m["graph_pool_bytes"] / 2**20
                ax.bar(x, mib, width * 0.92, color=COLORS[mode], label=LABELS[mode] if i == 0 else None)
                on = ON.get(version, "capture_stream")
                note = f"{mib:.0f}"
                if mode == on and m["saving_pct_of_off"] is not None:
                    note += f"\n-{m['saving_pct_of_off']:.0f}%"
                ax.text(x, mib + 8, note, ha="center", va="bottom", fontsize=7)
            floor = row["floor_bytes"] / 2**20
            ax.hlines(floor, i - 0.45, i + 0.45, colors="black", linestyles="dashed",
                      label="floor (largest single pass)" if i == 0 else None)
        ax.set_xticks(range(len(arrangements)))
        ax.set_xticklabels([f"{n}\n({' → '.join(r['passes'])})" for n, r in arrangements.items()], fontsize=8)
        ax.set_title(f"SGLang {version}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("CUDA-graph pool reserved (MiB)")
    handles, labels = [], []
    for ax in axes[0]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, frameon=False)
    cfg = meta["config"]
    fig.text(0.5, 0.005, f"{meta['gpu']}, torch {meta['torch']}; toy bf16 MLP hidden {cfg['hidden']}, "
             f"{cfg['layers']}-layer target / {cfg['draft_layers']}-layer draft; graph-pool segments from "
             "torch.cuda.memory_snapshot(); each bar one fresh process", ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 0.92))
    fig.savefig(dst, dpi=130)
    print("wrote", dst)


def markdown(src):
    data = json.load(open(src))
    mib = lambda b: f"{b / 2**20:.0f}"  # noqa: E731
    for version, vdata in data["summary"].items():
        singles = ", ".join(f"{k} {mib(v)} MiB" for k, v in vdata["singles_bytes"].items())
        print(f"\n**SGLang {version}** — single passes alone (patches off): {singles}\n")
        print("| arrangement (passes in order) | patches on | graph pool MiB | pools | streams | "
              "floor MiB | sum of singles MiB | saving vs off | × floor | pool after each pass (MiB) |")
        print("|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
        for name, row in vdata["arrangements"].items():
            for mode, m in row["modes"].items():
                reps = sorted(set(m["all_repeats"]))
                val = mib(m["graph_pool_bytes"]) + ("" if len(reps) == 1 else f" ({'/'.join(mib(r) for r in reps)})")
                saving = "—" if mode == "off" else f"{m['saving_pct_of_off']:.1f}%"
                print(f"| {name} ({' → '.join(row['passes'])}) | {mode} | {val} | {m['pools']} | {m['streams']} | "
                      f"{mib(row['floor_bytes'])} | {mib(row['sum_of_singles_bytes'])} | {saving} | "
                      f"{m['over_floor']:.2f} | {' → '.join(mib(b) for b in m['per_pass_cumulative'])} |")


if __name__ == "__main__":
    if "--markdown" in sys.argv:
        markdown(sys.argv[1])
    else:
        main(*sys.argv[1:3])
