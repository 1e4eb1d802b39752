"""What benchmarks/serve_soak.py samples each minute and how it turns the samples into growth figures: RSS/USS,
threads and open fds (by what they point to) of every process of the service's own process tree by kind (found from
``tessera serve``'s pid, never by name: other Rays run on the machine), its Ray session folder (logs, spilled
objects), Ray's object store, the task store's files, and the entries left in its ``$TMPDIR`` and uploads folder."""

from __future__ import annotations

import collections
import os
import re
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

KIND_PATTERNS = [  # (regex on the joined cmdline, kind); the first match wins
    (r"ray::ServeReplica:[^:]+:(\S+?)(\.[a-z_]+)?(\s|$)", r"replica:\1"), (r"ray::TaskWorker", "task_worker"),
    (r"ray::ServeController", "serve_controller"), (r"ray::ProxyActor", "serve_proxy"),
    (r"gcs_server", "gcs"), (r"/raylet ", "raylet"), (r"ray::DashboardAgent|dashboard/agent\.py", "dashboard_agent"),
    (r"dashboard/dashboard\.py", "dashboard"), (r"ray::RuntimeEnvAgent|runtime_env/agent", "runtime_env_agent"),
    (r"log_monitor\.py", "log_monitor"), (r"autoscaler/_private/monitor\.py", "autoscaler_monitor"),
    (r"ray\.serve\.scripts", "serve_run_driver"), (r"tessera serve", "tessera_cli"), (r"ray::IDLE", "idle_worker"),
    (r"ray::worker", "worker_starting"),
    (r"(ray::\w+)", r"\1"),
]


def kind_of(cmdline: str) -> str:
    """The process's kind by its cmdline (``ray::worker``: a worker between its actor's title and none, as it starts
    a task worker, seen as ``task_worker`` a sample later)."""
    for pattern, kind in KIND_PATTERNS:
        match = re.search(pattern, cmdline)
        if match:
            return match.expand(kind)
    return "other:" + Path(cmdline.split(" ")[0] or "?").name


def folder_mb(path: Path, pattern: str = "*") -> tuple[float, int]:
    """Size in MB and number of the files under ``path`` (0, 0 when it is not there); files that vanish are skipped."""
    total, count = 0, 0
    for p in path.rglob(pattern) if path.is_dir() else ():
        try:
            if p.is_file():
                total, count = total + p.stat().st_size, count + 1
        except OSError:
            continue
    return total / 2**20, count


FDS = ("fds", "sockets", "pipes", "sqlite", "deleted", "other")


def fd_kinds(pid: int) -> dict[str, int]:
    """The process's open fds, in all and by what they point to (``other``: files, anon inodes ...); an fd that closes
    while read is skipped."""
    counts = dict.fromkeys(FDS, 0)
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return counts
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        counts["fds"] += 1
        if target.startswith("socket:"):
            counts["sockets"] += 1
        elif target.startswith("pipe:"):
            counts["pipes"] += 1
        elif target.endswith(" (deleted)"):
            counts["deleted"] += 1
        elif re.search(r"\.(db|sqlite3?)(-wal|-shm|-journal)?$", target):
            counts["sqlite"] += 1
        else:
            counts["other"] += 1
    return counts


def entries(folder: Path, leave_out: str = "") -> int:
    """Files and folders under ``folder`` (0 when it is not there), its top-level ``leave_out`` folder left out."""
    count = 0
    for root, dirs, files in os.walk(folder):
        if Path(root) == folder and leave_out in dirs:
            dirs.remove(leave_out)
        count += len(dirs) + len(files)
    return count


def object_store_mb(session: Path) -> float | None:
    """MB in the node's Ray object store (shared memory, disk, spilled: the raylet's ``ray_object_store_memory``),
    from the metrics endpoint whose port the session folder names; None where it cannot be read."""
    try:
        port = next(session.glob("metrics_export_port_*")).read_text("utf-8").strip()
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except (StopIteration, OSError, httpx.HTTPError):
        return None
    values = re.findall(r'^ray_object_store_memory\{Component="raylet"[^}]*\} (\S+)$', text, re.MULTILINE)
    return sum(float(v) for v in values) / 2**20 if values else None


def sample(root_pid: int, session: Path, home: Path, started: float, requests: int,
           seen: dict[int, tuple[str, float]]) -> dict:
    """One sample of the service's process tree (per kind: RSS, USS, threads, fds by kind), its Ray session folder and
    object store, the task store, the entries in ``$TMPDIR`` (``home/t``, Ray's folder aside) and uploads; ``seen``
    gets each process's kind and start time (pid reuse), for the check that none is left."""
    kinds: dict[str, dict] = {}
    try:
        procs = [psutil.Process(root_pid)] + psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        procs = []
    for proc in procs:
        try:
            with proc.oneshot():
                cmdline = " ".join(proc.cmdline())
                kind = kind_of(cmdline)
                seen[proc.pid] = (kind, proc.create_time())
                row = kinds.setdefault(kind, {"n": 0, "rss_mb": 0.0, "uss_mb": 0.0, "threads": 0,
                                              **dict.fromkeys(FDS, 0), "pids": [], "cmd": cmdline[:200]})
                row["rss_mb"] += proc.memory_info().rss / 2**20
                row["uss_mb"] += proc.memory_full_info().uss / 2**20
                row["threads"] += proc.num_threads()
                row["n"] += 1
                row["pids"].append(proc.pid)
            for measure, value in fd_kinds(proc.pid).items():
                row[measure] += value
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    logs_mb, log_files = folder_mb(session / "logs")
    worker_logs = sum(1 for p in (session / "logs").glob("worker-*.out")) if session.is_dir() else 0
    return {"t_min": (time.monotonic() - started) / 60, "requests": requests, "kinds": kinds,
            "logs_mb": logs_mb, "log_files": log_files, "worker_logs": worker_logs,
            "session_mb": folder_mb(session)[0],
            "spill_mb": sum(folder_mb(p)[0] for p in session.glob("ray_spilled_objects*")) if session.is_dir() else 0,
            "task_store_mb": sum(folder_mb(home, name)[0] for name in ("tasks.db", "tasks.db-wal")),
            "object_store_mb": object_store_mb(session) if session.is_dir() else None,
            "tmp_entries": entries(home / "t", "ray"), "upload_entries": entries(home / "uploads"),
            "available_mb": psutil.virtual_memory().available / 2**20}


def slope(points: list[tuple[float, float]]) -> float:
    """Slope of a least-squares line through (x, y); NaN with fewer than 2 points or no spread in x."""
    if len(points) < 2:
        return float("nan")
    x, y = np.array(points, dtype=float).T
    return float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else float("nan")


def series(samples: list[dict]) -> dict[str, dict[str, list[tuple[float, float, float]]]]:
    """Per kind its (minute, requests so far, value) points of RSS, USS and processes; and workers, folders, fds."""
    out: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for s in samples:
        t, n = s["t_min"], s.get("requests", 0)
        for kind, row in s["kinds"].items():
            for measure in ("rss_mb", "uss_mb", "n") + (("fds",) if kind == "replica:api" else ()):
                out[kind if measure != "fds" else "api open fds"][measure].append((t, n, row[measure]))
        out["tree open fds"]["fds"].append((t, n, sum(row.get("fds", 0) for row in s["kinds"].values())))
        out["task workers alive"]["n"].append((t, n, s["kinds"].get("task_worker", {}).get("n", 0)))
        for folder in ("logs_mb", "session_mb", "spill_mb", "task_store_mb", "object_store_mb"):
            out[f"[{folder[:-3]} MB]"]["rss_mb"].append((t, n, s.get(folder) or 0.0))
        for folder in ("tmp_entries", "upload_entries"):
            out[f"[{folder.replace('_', ' ')}]"]["fds"].append((t, n, s.get(folder, 0)))
    return out


def growth_table(samples: list[dict], warmup_min: float) -> list[str]:
    """Lines of a table per kind: processes, first and last RSS (MB; folders: their MB), and after ``warmup_min``
    the slopes in MB per minute and MB per 1,000 requests, of RSS and of USS."""
    lines = [f"{'kind (after warm-up)':<30}{'n':>6}{'first':>8}{'last':>8}{'MB/min':>9}{'MB/1k req':>11}"
             f"{'USS/1k':>9}"]
    for name, measures in sorted(series(samples).items()):
        values = measures.get("rss_mb") or measures.get("fds") or measures["n"]
        after = [p for p in values if p[0] >= warmup_min] or values
        uss = [(p[1] / 1000, p[2]) for p in measures.get("uss_mb", []) if p[0] >= warmup_min]
        n = measures.get("n", [(0, 0, 0)])
        lines.append(f"{name[:29]:<30}{f'{n[0][2]:.0f}-{n[-1][2]:.0f}':>6}{after[0][2]:>8.1f}{after[-1][2]:>8.1f}"
                     f"{slope([(p[0], p[2]) for p in after]):>9.2f}{slope([(p[1] / 1000, p[2]) for p in after]):>11.2f}"
                     f"{slope(uss):>9.2f}")
    return lines


def fd_table(samples: list[dict], warmup_min: float) -> list[str]:
    """Lines of a table per kind, and the tree's totals: threads and open fds by what they point to, the first
    sample after ``warmup_min`` and the last (``first>last``); a kind absent from one counts 0 there."""
    after = [s for s in samples if s["t_min"] >= warmup_min] or samples
    if not after:
        return []
    first, last = after[0]["kinds"], after[-1]["kinds"]
    lines = [f"{'threads, fds (first>last)':<30}" + "".join(f"{m:>12}" for m in ("threads", *FDS))]
    for kind in sorted(set(first) | set(last)) + ["(tree)"]:
        def value(kinds: dict, measure: str) -> int:
            rows = kinds.values() if kind == "(tree)" else [kinds.get(kind, {})]
            return sum(row.get(measure, 0) for row in rows)
        lines.append(f"{kind[:29]:<30}" + "".join(f"{f'{value(first, m)}>{value(last, m)}':>12}"
                                                  for m in ("threads", *FDS)))
    return lines
