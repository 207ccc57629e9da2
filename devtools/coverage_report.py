"""Line and branch coverage per app, from the data every test process wrote (``make test``).

``coverage report`` lists files; what a reader of ``make test`` wants is one line per app (and
the files of the engine that miss branches), so this sums the measured files by top-level
package.
"""

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import coverage

APPS = ("coordination", "publishing", "plugins", "editors", "outbox", "instatic")


def erase() -> None:
    """Forget the data of an earlier run."""
    coverage.Coverage().erase()


def report(out=sys.stdout) -> dict[str, tuple[float, float]]:
    """Combine the data files, print line and branch coverage per app; return them."""
    cov = coverage.Coverage()
    cov.combine()
    cov.save()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "coverage.json"
        cov.json_report(outfile=str(path))
        files = json.loads(path.read_text())["files"]
    totals = defaultdict(lambda: [0, 0, 0, 0])  # statements, missed, branches, missed branches
    for filename, entry in files.items():
        app = Path(filename).parts[0]
        if app in APPS:
            summary, row = entry["summary"], totals[app]
            row[0] += summary["num_statements"]
            row[1] += summary["missing_lines"]
            row[2] += summary["num_branches"]
            row[3] += summary["missing_branches"]
    results = {}
    print(f"\nCoverage of the whole run\n{'app':<14}{'lines':>10}{'branches':>11}", file=out)
    for app in APPS:
        statements, missed, branches, missed_branches = totals[app]
        lines = 100.0 * (statements - missed) / statements if statements else 100.0
        branch = 100.0 * (branches - missed_branches) / branches if branches else 100.0
        results[app] = (lines, branch)
        print(f"{app:<14}{lines:>9.1f}%{branch:>10.1f}%", file=out)
    print_engine_gaps(files, out)
    return results


def print_engine_gaps(files: dict, out, *, below: float = 90.0) -> None:
    """List the engine's files whose branch coverage is under ``below`` percent, worst first."""
    gaps = []
    for filename, entry in files.items():
        summary = entry["summary"]
        branches, missed = summary["num_branches"], summary["missing_branches"]
        if Path(filename).parts[0] == "coordination" and branches and missed:
            percent = 100.0 * (branches - missed) / branches
            if percent < below:
                gaps.append((percent, filename, missed, branches))
    if gaps:
        print(f"\ncoordination files under {below:.0f}% branch coverage", file=out)
        for percent, filename, missed, branches in sorted(gaps):
            print(f"  {filename:<44}{percent:>6.1f}%  {missed} of {branches} missed", file=out)


if __name__ == "__main__":
    report()
