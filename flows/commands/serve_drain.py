"""``python -m flows.commands.serve_drain --grace-period S run CONFIG [--address A]``: ``tessera serve``'s child.

It is Ray Serve's own ``serve run`` (Ray's CLI, in this process, with the arguments after ``--grace-period``), with
a drain before its shutdown. On SIGINT (``tessera serve`` turns SIGTERM into it) ``serve run`` calls
``serve.shutdown()`` at once, which ends the proxies while the replicas still work: every request in flight lost its
connection. Here the first SIGINT first tells every ingress replica of the config's Tessera applications to drain
(``DeploymentHandle.broadcast("drain")``: each refuses new requests with a 503 ``shutting_down`` and says how many
it still has, ``serve/http/draining.py``), asks again every ``POLL_S`` until none has any or the grace period is over,
and only then lets ``serve run`` shut down. A second SIGINT ends the wait at once.

Why not the alternatives: ``serve.delete`` of the app first would answer 404s and stop the model deployments a
running flow still calls; redeploying with ``user_config: {draining: true}`` reaches every replica too, but leaves
no way to read their counts. ``broadcast`` reaches each running replica, and the next poll reaches one started
meanwhile. It imports neither Tessera's ``serve`` package nor Ray before ``serve run`` does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

#: How often the runner asks the replicas for their requests in flight while it drains, in seconds.
POLL_S = 0.25
#: The ingress's method that ``broadcast`` calls (``serve.api.ModelAPI.drain``).
DRAIN_METHOD = "drain"


def ingress_deployments(config: dict) -> list[tuple[str, str]]:
    """``(application, deployment)`` of each Tessera application's HTTP ingress in a Serve config."""
    found = []
    for application in config.get("applications") or []:
        if application.get("import_path") == "serve.app:build_app":
            args = application.get("args") or {}
            found.append((str(application.get("name") or "default"), str(args.get("api_deployment") or "api")))
    return found


def say(message: str) -> None:
    print(f"tessera serve: {message}", file=sys.stderr, flush=True)


class Drain:
    """The SIGINT handler: the first signal drains, then raises ``KeyboardInterrupt`` into ``serve run`` (its own
    shutdown); a signal during the drain raises it at once, from within the first's wait."""

    def __init__(self, targets: list[tuple[str, str]], grace_s: float) -> None:
        self.targets, self.grace_s, self.started = targets, grace_s, False
        self.handles: dict[tuple[str, str], object] = {}

    def __call__(self, signum, frame) -> None:
        if self.started:
            say("second signal: shutting down now, without waiting for the requests in flight")
            raise KeyboardInterrupt
        self.started = True
        try:
            self.wait()
        except Exception as err:  # noqa: BLE001  (Serve's shutdown must still run: say why the drain ended)
            say(f"draining failed ({type(err).__name__}: {err}): shutting down")
        raise KeyboardInterrupt

    def wait(self) -> None:
        import ray

        if self.grace_s <= 0 or not self.targets or not ray.is_initialized():
            return  # nothing started yet, or no drain asked for
        began = time.monotonic()
        deadline = began + self.grace_s
        say(f"draining: new requests get 503 shutting_down; waiting up to {self.grace_s:g} s for those in flight "
            "(a second Ctrl-C or SIGTERM stops waiting)")
        left = -1
        while time.monotonic() < deadline:
            counts = [self.ask(target, deadline) for target in self.targets]
            if all(count == 0 for count in counts):
                say(f"drained in {time.monotonic() - began:.1f} s: shutting down")
                return
            known = sum(count for count in counts if count is not None)
            if known != left:
                left = known
                say(f"draining: {known} request(s) and task(s) in flight")
            time.sleep(POLL_S)
        say(f"grace period of {self.grace_s:g} s over with {max(left, 0)} request(s) and task(s) in flight: "
            "shutting down")

    def ask(self, target: tuple[str, str], deadline: float) -> int | None:
        """Drain the replicas of the ``(application, deployment)`` and return their requests in flight; 0 when it
        has none running (nothing to wait for), None when they did not answer in time (ask again)."""
        from ray import serve

        app, deployment = target
        timeout_s = max(0.1, min(5.0, deadline - time.monotonic()))
        try:
            if target not in self.handles:
                self.handles[target] = serve.get_deployment_handle(deployment, app)
            answers = self.handles[target].broadcast(DRAIN_METHOD).results(timeout_s=timeout_s,
                                                                           return_exceptions=True)
        except TimeoutError:
            return None
        except Exception as err:  # noqa: BLE001  (no such app, no replica running: nothing of it to wait for)
            say(f"application '{app}' has nothing to drain ({type(err).__name__})")
            return 0
        if any(isinstance(answer, TimeoutError) for answer in answers):
            return None
        return sum(answer for answer in answers if isinstance(answer, int))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.commands.serve_drain")
    parser.add_argument("--grace-period", type=float, required=True)
    known, rest = parser.parse_known_args(argv)
    targets = []
    if len(rest) >= 2 and rest[0] == "run" and Path(rest[1]).is_file():
        import yaml

        targets = ingress_deployments(yaml.safe_load(Path(rest[1]).read_text(encoding="utf-8")) or {})
    drain = Drain(targets, known.grace_period)
    signal.signal(signal.SIGINT, drain)
    from ray.serve.scripts import cli

    try:
        cli.main(rest, prog_name="serve")
    except SystemExit as end:
        # A signal while `serve run` still deploys lands outside its own handler: click said "Aborted!" and exited 1
        # (or the interpreter's teardown crashed in Ray's, 139), where a stop asked for exits 0. Ray is shut down
        # here, then the process ends without the teardown.
        if end.code == 1 and drain.started:
            import ray

            ray.shutdown()
            say("stopped while starting")
            sys.stdout.flush()
            os._exit(0)
        raise


if __name__ == "__main__":
    main()
