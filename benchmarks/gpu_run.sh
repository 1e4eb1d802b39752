#!/usr/bin/env bash
# The one device call of the GPU check (issues 31 and 33), run from the repository root on the lent machine:
#   here:   .venv/bin/python benchmarks/gpu_check.py --prepare .gpu
#   there:  bash benchmarks/gpu_run.sh .gpu        (carry [".gpu"]; figures land in $OUT)
# It unpacks the carried packages and source sets, builds the 916,618-document scale corpus (in the background,
# on one core) while gpu_check.py measures the models in one process, then gpu_ray.py ingests the 916K corpus
# on the GPU (GPU_RAY_ARGS picks other parts: Ray Data GPU actors, Serve's num_gpus). Each part has its own time
# limit, so a part that hangs leaves the others their time; each line says when it ran. A CPU rehearsal shrinks it:
#   SCALE_COUNT=3000 GPU_CHECK_ARGS="--device cpu --limit 512 ..." GPU_RAY_ARGS="--device cpu ..." bash ...
# The ingestion alone, on Ray:  GPU_CHECK_SECONDS=0 GPU_RAY_ARGS="--parts ingest --executor ray" bash ...
# Both executors in one call:   GPU_CHECK_SECONDS=0 GPU_RAY_RUNS="200|--parts ingest --executor ray;200|--parts ingest" ...
set -u
carried=${1:-.gpu}
out=${OUT:-gpu-check}
tmp=${GPU_TMP:-/tmp}  # a CPU rehearsal gives a folder of its own
mkdir -p "$tmp/site" "$tmp/sets" "$out"
for archive in site site-serve; do tar xJf "$carried/$archive.tar.xz" -C "$tmp/site" || exit 1; done
tar xJf "$carried/data.tar.xz" -C "$tmp/sets" || exit 1
export PYTHONPATH="$tmp/site:$PWD" HF_HUB_OFFLINE=1 TESSERA_HOME="$tmp/tessera-home" PYTHONUNBUFFERED=1
# py-spy caught the 2026-12-04 lease's Ray workers compiling numpy's and Ray's sources at their start: the
# packages came without byte code, so each process compiled what it imported. Byte code goes to a cache of this
# call's own (every process reads it), filled here once, in the background, while the corpus is built.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$tmp/pycache"
started=$(date +%s)
at() { echo "[$(( $(date +%s) - started )) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, ray, faiss, pydantic; print('torch', torch.__version__, 'ray', ray.__version__)"
packages=$(python3 -c "import importlib.util as u; print(' '.join(u.find_spec(m).submodule_search_locations[0] for m in
    ('numpy', 'pandas', 'pyarrow', 'torch', 'transformers', 'sentence_transformers', 'tokenizers', 'scipy')
    if u.find_spec(m)))")
python3 -m compileall -q -j 8 "$tmp/site" $packages operators flows >/dev/null 2>&1 &
compiled=$!

python3 benchmarks/build_scale_corpus.py --data "$tmp/sets" --count "${SCALE_COUNT:-916618}" --out "$tmp/scale" --quiet >"$tmp/corpus.log" 2>&1 &
full_corpus=$!
if [ "${GPU_CHECK_SECONDS:-170}" != 0 ]; then  # 0: the ingestion alone
    python3 benchmarks/build_scale_corpus.py --data "$tmp/sets" --count 50000 --out "$tmp/scale50k" --quiet >/dev/null
    at "the models in one process"
    timeout "${GPU_CHECK_SECONDS:-170}" python3 benchmarks/gpu_check.py --carried "$carried" \
        --corpus "$tmp/scale50k/corpus.jsonl" --out "$out" \
        ${GPU_CHECK_ARGS:---limit 30000 --sizes 256 512 --queries 100 --parts generation embedding profile cross_encoder} \
        >"$out/gpu_check.log" 2>&1
    grep -v -i warn "$out/gpu_check.log" | tail -20
fi
at "waiting for the scale corpus"
wait $full_corpus $compiled
tail -3 "$tmp/corpus.log"
at "the 916K ingestion"
# GPU_RAY_RUNS: gpu_ray.py runs one after another, "SECONDS|ARGS;SECONDS|ARGS..." (default: one, GPU_RAY_SECONDS and
# GPU_RAY_ARGS). Each leaves its log, figures, progress, the process tree's load and CPU by process, the GPU's use,
# `top` every 20 s, py-spy stacks of its Ray workers (when py-spy came along and may trace) and Ray's own logs in
# run-N/, all packed into runs.tar.gz (a call brings back 8 files at most); what a run left running is ended.
[ -f "$carried/py-spy.xz" ] && xz -dc "$carried/py-spy.xz" >"$tmp/py-spy" && chmod +x "$tmp/py-spy"
IFS=';' read -ra runs <<<"${GPU_RAY_RUNS:-${GPU_RAY_SECONDS:-280}|${GPU_RAY_ARGS:---parts ingest --executor local}}"
leftovers() {  # this call's ingestion child and Ray processes (they carry its TESSERA_HOME), none of another's
    for pid in $(pgrep -f "ingest_scale.py --child|ray::|raylet|gcs_server|default_worker.py|ray/dashboard"); do
        tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "TESSERA_HOME=$TESSERA_HOME" && echo "$pid"
    done
}
watch_run() {  # $1: the run's folder; samples until killed
    local since=$(date +%s) next_stack=40
    while sleep 20; do
        { echo "== $(( $(date +%s) - since )) s"; top -b -n 2 -d 2 -c -w 220 | awk '/^top -/{n++} n==2' | head -40; } >>"$1/top.txt"
        if [ -x "$tmp/py-spy" ] && [ $(( $(date +%s) - since )) -ge $next_stack ]; then
            next_stack=$(( next_stack + 40 ))
            for pid in $(pgrep -f "ray::|ingest_scale.py --child"); do
                echo "== $(( $(date +%s) - since )) s pid $pid: $(tr '\0' ' ' </proc/$pid/cmdline | cut -c1-80)"
                timeout 10 "$tmp/py-spy" dump --pid "$pid" 2>&1 | head -60
            done >>"$1/stacks.txt"
        fi
    done
}
n=0
for run in "${runs[@]}"; do
    n=$((n + 1)); seconds=${run%%|*}; args=${run#*|}; dir="$tmp/run-$n"; mkdir -p "$dir"
    at "gpu_ray.py run $n ($seconds s at most): $args"
    sessions_before=$(ls -d /tmp/ray/session_2* 2>/dev/null)
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 >"$dir/gpu-util.csv" 2>/dev/null &
    util=$!
    watch_run "$dir" &
    watcher=$!
    timeout "$seconds" python3 benchmarks/gpu_ray.py --carried "$carried" --corpus "$tmp/scale/corpus.jsonl" \
        --out "$dir" --work "$tmp/gpu-ray-$n" $args >"$dir/gpu_ray.log" 2>&1
    kill $util $watcher 2>/dev/null
    cp "$tmp/gpu-ray-$n/ingest/stages-1.jsonl" "$tmp/gpu-ray-$n/ingest/monitor-1.jsonl" "$dir/" 2>/dev/null
    session=$(comm -13 <(echo "$sessions_before") <(ls -d /tmp/ray/session_2* 2>/dev/null) | tail -1)
    logs=$session/logs
    if [ -n "$session" ] && [ -d "$logs" ]; then  # Ray's own logs, of the session this run started
        grep -h -i -E "spill|oom|killed|memory|backpressure" "$logs/raylet.out" "$logs/gcs_server.out" 2>/dev/null \
            | tail -200 >"$dir/ray-notes.txt"
        find "$logs" -name 'ray-data*' -exec cp {} "$dir/" \; 2>/dev/null
        tail -300 "$logs/raylet.out" >"$dir/raylet-tail.txt" 2>/dev/null
    fi
    grep -E '^  (embed|serve|ingest)|failed' "$dir/gpu_ray.log"
    for pid in $(leftovers); do kill -9 "$pid" 2>/dev/null; done  # a run cut short leaves its child and Ray
    sleep 2
done
tar czf "$out/runs.tar.gz" -C "$tmp" $(cd "$tmp" && ls -d run-*) 2>/dev/null
at "done"
