"""Run every benchmark module of this package (or those named), each in its own interpreter,
then write the report.

Each benchmark configures Django for its own throwaway database, and Django is set up once
per process, so every module runs as ``python -m bench.<name>``. Their figures go to
``var/bench/results/`` (``bench/_report.py``); at the end every figure is printed beside its
same-run baseline with the ratio, and ``var/bench/report.md`` is written with its plots.
"""

import pkgutil
import subprocess
import sys
from pathlib import Path

from bench import _report

BASE_DIR = Path(__file__).resolve().parent.parent


def benchmark_names() -> list[str]:
    """Return the benchmark modules of this package, in name order."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules([str(Path(__file__).parent)])
        if not info.name.startswith("_")
    )


def main(argv: list[str]) -> int:
    available = benchmark_names()
    wanted = argv or available
    unknown = sorted(set(wanted) - set(available))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}")
        return 2
    failed = []
    _report.clear(wanted)
    for name in wanted:
        print(f"\n### bench.{name}\n", flush=True)
        if subprocess.call([sys.executable, "-m", f"bench.{name}"], cwd=BASE_DIR) != 0:
            failed.append(name)
    print("\n### figures beside their same-run baselines\n")
    _report.print_summary()
    print(f"\nreport: {_report.write_report()}")
    if failed:
        print(f"\nbenchmarks with a missed target or an error: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
