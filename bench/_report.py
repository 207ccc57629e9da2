"""The benchmark report: every bench adds its figures here; ``python -m bench`` writes them out.

Each benchmark runs in its own interpreter, so the figures go through files: every call
below appends one JSON line to ``var/bench/results/<bench>.jsonl`` (the bench is the running
``bench.<name>`` module). ``python -m bench`` clears the results of the benches it runs, runs
them, and then :func:`write_report` turns everything under ``results/`` into
``var/bench/report.md`` with SVG plots beside it:

- :func:`figure`: one number, with its same-run baseline (the ratio is computed here) and
  its target;
- :func:`table`: the rows a bench prints with ``_harness.print_table`` (which calls it, so
  every bench that prints a table is in the report without a line of its own);
- :func:`samples`: a distribution (lateness, takeover times), drawn as a CDF or histogram;
- :func:`series`: a cost curve (y against x, e.g. statements against number of replicas).

The hook for another bench is one line, e.g.
``_report.figure("publishing", "publish 100,000 posts", seconds, unit="s", baseline=update_s,
baseline_name="plain UPDATE", target="<= 3x")``.
"""

import json
import math
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
REPORT_DIR = Path(os.environ.get("BENCH_REPORT_DIR", BASE_DIR / "var" / "bench"))
RESULTS_DIR = REPORT_DIR / "results"


def current_bench() -> str:
    """Return the name of the running benchmark (``bench.<name>`` run as ``__main__``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name if spec is not None else "adhoc"
    return name.removeprefix("bench.")


def _add(kind: str, bench: str | None, **fields) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    entry = {"kind": kind, "at": datetime.now(UTC).isoformat(timespec="seconds"), **fields}
    with open(RESULTS_DIR / f"{bench or current_bench()}.jsonl", "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")


def figure(
    name: str,
    value: float,
    *,
    unit: str = "",
    baseline: float | None = None,
    baseline_name: str = "",
    target: str = "",
    ok: bool | None = None,
    note: str = "",
    bench: str | None = None,
) -> None:
    """Record one measured figure, with its same-run baseline if it has one."""
    _add(
        "figure",
        bench,
        name=name,
        value=value,
        unit=unit,
        baseline=baseline,
        baseline_name=baseline_name,
        target=target,
        ok=ok,
        note=note,
    )


def table(title: str, rows: list[tuple[str, str, str, bool]], *, bench: str | None = None) -> None:
    """Record the rows of a printed result table: (name, value, target, passed)."""
    _add("table", bench, title=title, rows=[list(row) for row in rows])


def samples(
    name: str, values: list[float], *, unit: str = "ms", plot: str = "cdf", bench: str | None = None
) -> None:
    """Record a distribution; ``plot`` is ``cdf`` or ``histogram``."""
    _add("samples", bench, name=name, values=[float(v) for v in values], unit=unit, plot=plot)


def series(
    name: str,
    points: list[tuple[float, float]],
    *,
    x_label: str,
    y_label: str,
    label: str = "",
    bench: str | None = None,
) -> None:
    """Record one curve of a cost plot; curves with the same ``name`` share the plot."""
    _add(
        "series",
        bench,
        name=name,
        points=[[float(x), float(y)] for x, y in points],
        x_label=x_label,
        y_label=y_label,
        label=label or name,
    )


def clear(benches: list[str]) -> None:
    """Forget earlier results of ``benches`` (before running them again)."""
    for bench in benches:
        (RESULTS_DIR / f"{bench}.jsonl").unlink(missing_ok=True)


def load() -> dict[str, list[dict]]:
    """Return the recorded entries by bench, in bench name order."""
    results: dict[str, list[dict]] = {}
    for path in sorted(RESULTS_DIR.glob("*.jsonl")):
        results[path.stem] = [json.loads(line) for line in path.read_text().splitlines() if line]
    return results


# --- writing the report --------------------------------------------------------------------


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _verdict(ok: bool | None) -> str:
    return {True: "PASS", False: "**FAIL**", None: "measured"}[ok]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:60]


def ratio_line(entry: dict) -> str:
    """Return the console line of one figure: value, baseline, ratio, target."""
    value, baseline = entry["value"], entry.get("baseline")
    text = f"{entry['name']}: {_number(value)} {entry['unit']}".rstrip()
    if baseline:
        text += (
            f" vs {entry.get('baseline_name') or 'baseline'} {_number(baseline)}"
            f" {entry['unit']} = {value / baseline:.2f}x"
        )
    if entry.get("target"):
        text += f" (target {entry['target']}: {_verdict(entry.get('ok')).strip('*')})"
    return text


def _plot_samples(entries: list[dict], path: Path, title: str) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    histogram = all(e.get("plot") == "histogram" for e in entries)
    for e in entries:
        values = sorted(e["values"])
        if not values:
            continue
        if histogram:
            ax.hist(values, bins=min(30, max(5, len(values) // 2)), alpha=0.6, label=e["name"])
            ax.set_ylabel("count")
        else:
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, ys, where="post", label=f"{e['name']} (n={len(values)})")
            ax.set_ylabel("fraction of samples at or below")
            ax.axhline(0.99, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel(entries[0]["unit"])
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plot_series(entries: list[dict], path: Path, title: str) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for e in entries:
        xs, ys = zip(*e["points"], strict=True) if e["points"] else ((), ())
        ax.plot(xs, ys, marker="o", label=e["label"])
    ax.set_xlabel(entries[0]["x_label"])
    ax.set_ylabel(entries[0]["y_label"])
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plots(bench: str, entries: list[dict], kind: str) -> list[tuple[str, list[dict]]]:
    """Group ``kind`` entries into plots: samples by unit, series by name."""
    grouped: dict[str, list[dict]] = {}
    for e in entries:
        if e["kind"] == kind:
            key = e["unit"] if kind == "samples" else e["name"]
            grouped.setdefault(key, []).append(e)
    return list(grouped.items())


def write_report() -> Path:
    """Write ``report.md`` and its SVG plots from every recorded result; return its path."""
    import matplotlib

    matplotlib.use("svg")
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    results = load()
    lines = [
        "# Benchmark report",
        "",
        f"Written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `make bench` (`python -m bench`)"
        " from the results under `results/`. Each figure stands beside its baseline measured"
        " in the same run; the ratio is what compares across machines.",
    ]
    for bench, entries in results.items():
        lines += ["", f"## bench.{bench}", ""]
        figures = [e for e in entries if e["kind"] == "figure"]
        if figures:
            lines += [
                "| figure | value | baseline (same run) | ratio | target | |",
                "|---|---|---|---|---|---|",
            ]
            for e in figures:
                baseline = e.get("baseline")
                base = (
                    f"{e.get('baseline_name') or 'baseline'}: {_number(baseline)} {e['unit']}"
                    if baseline
                    else "none"
                )
                ratio = f"{e['value'] / baseline:.2f}x" if baseline else "—"
                lines.append(
                    f"| {e['name']} | {_number(e['value'])} {e['unit']} | {base} | {ratio} |"
                    f" {e.get('target') or '—'} | {_verdict(e.get('ok'))} |"
                )
                if e.get("note"):
                    lines.append(f"|  | *{e['note']}* | | | | |")
            lines.append("")
        for e in (e for e in entries if e["kind"] == "table"):
            lines += [f"**{e['title']}**", "", "| figure | value | target | |", "|---|---|---|---|"]
            lines += [f"| {n} | {v} | {t} | {_verdict(ok)} |" for n, v, t, ok in e["rows"]]
            lines.append("")
        for kind, draw in (("samples", _plot_samples), ("series", _plot_series)):
            for key, group in _plots(bench, entries, kind):
                if kind == "series":
                    title = f"{bench}: {key}"
                elif len(group) == 1:
                    title = f"{bench}: {group[0]['name']}"
                else:
                    title = f"{bench}: distributions ({key})"
                svg = f"{bench}-{kind}-{_slug(key)}.svg"
                draw(group, REPORT_DIR / svg, title)
                lines += [f"![{title}]({svg})", ""]
                if kind == "samples":
                    from bench._harness import percentile

                    for e in group:
                        v = e["values"]
                        p50, p99 = _number(percentile(v, 50)), _number(percentile(v, 99))
                        top = _number(max(v, default=math.nan))
                        lines.append(
                            f"- {e['name']}: n={len(v)}, p50 {p50}, p99 {p99}, max {top}"
                            f" {e['unit']}"
                        )
                    lines.append("")
    path = REPORT_DIR / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def print_summary() -> None:
    """Print every recorded figure with its baseline and ratio (the end of ``make bench``)."""
    for bench, entries in load().items():
        figures = [e for e in entries if e["kind"] == "figure"]
        if figures:
            print(f"  bench.{bench}")
            for e in figures:
                print(f"    {ratio_line(e)}")
