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
set -u
carried=${1:-.gpu}
out=${OUT:-gpu-check}
tmp=${GPU_TMP:-/tmp}  # a CPU rehearsal gives a folder of its own
mkdir -p "$tmp/site" "$tmp/sets" "$out"
for archive in site site-serve; do tar xJf "$carried/$archive.tar.xz" -C "$tmp/site" || exit 1; done
tar xJf "$carried/data.tar.xz" -C "$tmp/sets" || exit 1
export PYTHONPATH="$tmp/site:$PWD" HF_HUB_OFFLINE=1 TESSERA_HOME="$tmp/tessera-home" PYTHONUNBUFFERED=1
started=$(date +%s)
at() { echo "[$(( $(date +%s) - started )) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, ray, faiss, pydantic; print('torch', torch.__version__, 'ray', ray.__version__)"

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
wait $full_corpus
tail -3 "$tmp/corpus.log"
at "the 916K ingestion"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 >"$out/gpu-util.csv" 2>/dev/null &
watcher=$!
timeout "${GPU_RAY_SECONDS:-280}" python3 benchmarks/gpu_ray.py --carried "$carried" --corpus "$tmp/scale/corpus.jsonl" \
    --out "$out" --work "$tmp/gpu-ray" ${GPU_RAY_ARGS:---parts ingest --executor local} >"$out/gpu_ray.log" 2>&1
kill $watcher 2>/dev/null
# the ingestion's progress and its process tree's load, memory and CPU, also of a run cut short; Ray's own notes
cp "$tmp/gpu-ray/ingest/stages-1.jsonl" "$tmp/gpu-ray/ingest/monitor-1.jsonl" "$out/" 2>/dev/null
grep -h -i -E "spill|oom|killed|memory|backpressure" /tmp/ray/session_latest/logs/raylet.out \
    /tmp/ray/session_latest/logs/gcs_server.out 2>/dev/null | tail -200 >"$out/ray-notes.txt"
grep -E '^  (embed|serve|ingest)|failed' "$out/gpu_ray.log"
at "done"
