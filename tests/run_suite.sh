#!/usr/bin/env bash
# make test's two pytest runs, at the same time (the Makefile's comment above `test:` says why and what it saved).
#   tests/run_suite.sh PYTHON [pytest options for both runs...]
# The tests with Ray run in one process (one Ray per process) at normal priority; the others run a file to a worker
# on every core under `nice`, so they take the cores while Ray's processes wait (the Serve apps starting, HTTP
# calls, polls) and leave them to Ray otherwise. The Ray run's output is kept in a file and shown when the other
# run ends, then followed to its end. The exit status is the first failing run's; a signal stops both.
set -uo pipefail

python=$1
shift
# In memory where /dev/shm has room (as make test-fast): the fsync of each atomic write returns at once there.
if [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')" -gt 4194304 ] 2>/dev/null; then
  shared=$(mktemp -d -p /dev/shm)
else
  shared=$(mktemp -d)
fi
ray_run= units_run= follow=
stop() {  # the runs still going (a signal, or this script failing) end with it; then the shared folder goes
  for run in $ray_run $units_run $follow; do kill "$run" 2>/dev/null; done
  rm -rf "$shared"
}
trap stop EXIT
# Each run goes in the background and is waited for: bash takes a signal in `wait`, not while a command runs in the
# foreground, so a SIGTERM (CI giving up) or Ctrl-C stops both runs at once instead of after the Ray run's end.
trap 'exit 130' INT TERM
# Both runs share one folder: the first process that needs the ingested sample builds it there and the others read
# it (tests/conftest.py's sample_workspace); their temporary files go there too (--basetemp), not to pytest's
# /tmp/pytest-of-$USER, where a run keeps only the three newest runs' folders.
export TESSERA_TEST_SHARED=$shared

"$python" -m pytest "$@" --basetemp="$shared/tmp-ray" -o tmp_path_retention_policy=failed -m "ray and not slow" >"$shared/ray.log" 2>&1 &
ray_run=$!
mkdir "$shared/tmpdir"
# One OpenMP (torch) thread a worker, as in make test-fast: the workers and the Ray run already fill the cores, and a
# torch op split over two threads waits for the one that is not running (a cross-encoder test took 13-16 s here
# against 0.8 s in make test-fast, 2026-12-01).
OMP_NUM_THREADS=1 TMPDIR="$shared/tmpdir" nice -n 10 "$python" -m pytest "$@" --basetemp="$shared/tmp" \
  -o tmp_path_retention_policy=failed -n auto --dist loadfile --no-loadscope-reorder -m "not slow and not ray" &
units_run=$!
wait "$units_run"
units=$?
units_run=

echo
echo "== the tests with Ray (run at the same time; what they printed so far, then to their end) =="
tail -n +1 -f --pid="$ray_run" "$shared/ray.log" &
follow=$!
wait "$ray_run"
rays=$?
ray_run=
wait "$follow"  # tail ends within a second of the run, having printed the rest
follow=
[ "$units" -ne 0 ] && exit "$units"
exit "$rays"
