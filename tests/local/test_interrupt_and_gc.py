"""`kaliper run` stopped part way: SIGTERM keeps the finished trials and leaves no process or cgroup; a run
killed outright leaves a cgroup that `kaliper gc` finds and removes; expired report folders are found too."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from kaliper.local import cgroups
from kaliper.report.schema import ProfileReport
from tests.support.controlplane import wait_for
from tests.support.local_run import deployment, profile_run
from tests.support.paths import KALIPER


def start_run(tmp_path: Path, model: Path) -> tuple[subprocess.Popen, Path]:
    manifest = tmp_path / "run.yaml"
    manifest.write_text(
        yaml.safe_dump_all([deployment(model), profile_run(sweep={"cpu": ["500m", "1"]}, ttl={"afterSuccess": "1h"})])
    )
    out = tmp_path / "reports"
    process = subprocess.Popen(
        [str(KALIPER), "run", str(manifest), "--output-dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, out


def groups_of(pid: int) -> list[str]:
    """The cgroups a `kaliper run` made (one name in each hierarchy)."""
    version = cgroups.detect()
    assert version is not None
    names = {p.name for d in cgroups.hierarchy_dirs(version) if d.is_dir() for p in d.iterdir() if p.is_dir()}
    return sorted(n for n in names if n.startswith(f"{pid}-"))


def pids_in(group: str) -> list[int]:
    version = cgroups.detect()
    assert version is not None
    return cgroups.Cgroup(group, cgroups.Limits(), version).pids()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def gc(*flags: str, reports: Path) -> dict:
    done = subprocess.run(
        [str(KALIPER), "gc", "--json", "--no-cluster", "--reports", str(reports), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_sigterm_keeps_the_finished_trials_and_leaves_no_process_or_cgroup(tmp_path: Path, model: Path) -> None:
    process, out = start_run(tmp_path, model)
    # The first trial has its results and the second trial's server is up: stop the run there.
    wait_for(lambda: (out / "work" / "t0" / "loadgen-0.json").exists(), what="the first trial's results")
    wait_for(lambda: (out / "work" / "t1" / "server-0.log").exists(), what="the second trial's server")
    wait_for(lambda: groups_of(process.pid) != [], what="the second trial's cgroup")
    (group,) = groups_of(process.pid)
    wait_for(lambda: pids_in(group) != [], what="the second trial's server in its cgroup")
    servers = pids_in(group)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted: the 1 finished trials are in the report" in stdout
    report = ProfileReport.model_validate_json((out / "report.json").read_text())
    assert report.interrupted is True
    assert [(t.index, t.status) for t in report.trials] == [(0, "Succeeded"), (1, "Skipped")]
    assert report.trials[1].message == "not run: the run was interrupted"
    interrupted, *others = report.warnings
    assert interrupted == "interrupted after 1 of 2 trials; the rest were not run"
    # Anything else is the machine's honest flag on t0 when other work kept it busy (a busy CI runner, an
    # editor indexing), which the interruption does not change.
    assert [w for w in others if "the machine was busy with other work" not in w] == [], others
    assert report.expires_at is None  # an interrupted run counts as failed, and only afterSuccess was set
    assert groups_of(process.pid) == [] and [pid for pid in servers if alive(pid)] == []


def test_a_run_killed_outright_leaves_a_cgroup_that_gc_removes(tmp_path: Path, model: Path) -> None:
    process, _ = start_run(tmp_path, model)
    wait_for(lambda: groups_of(process.pid) != [], what="the first trial's cgroup")
    (group,) = groups_of(process.pid)
    wait_for(lambda: pids_in(group) != [], what="the first trial's server in its cgroup")
    process.kill()
    process.wait(timeout=30)
    # The server goes with its parent (parent-death signal); its cgroup stays, for gc.
    wait_for(lambda: pids_in(group) == [], timeout=30, what="the server to exit")
    listed = gc(reports=tmp_path)
    mine = [item for item in listed["local"] if item["what"] == group]
    assert mine == [
        {
            "kind": "cgroup",
            "what": group,
            "why": f"the run that made it (pid {process.pid}) has ended; 0 processes inside",
        }
    ]
    removed = gc("--delete", reports=tmp_path)
    assert removed["failures"] == [] and group in [item["what"] for item in removed["local"]]
    assert groups_of(process.pid) == []


def test_gc_lists_and_removes_report_folders_whose_ttl_has_passed(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    for name, expires in (("old", now - timedelta(minutes=5)), ("fresh", now + timedelta(hours=1)), ("kept", None)):
        report = ProfileReport(name=name, started_at=now, target="http://x", strategy="grid", expires_at=expires)
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(report.model_dump_json(by_alias=True))
    listed = [item for item in gc(reports=tmp_path)["local"] if item["kind"] == "report"]
    assert [item["what"] for item in listed] == [str(tmp_path / "old")]
    gc("--delete", reports=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "kept"]
