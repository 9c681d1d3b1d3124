# evalsuite: `make test` sets itself up; `make eval TARGET=name` runs baseline vs target and compares.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
EVAL_STAMP := $(VENV)/.eval-stamp

TARGET ?= dflash
TASKS  ?=
LIMIT  ?=
EVAL_ARGS := $(if $(TASKS),--task $(TASKS)) $(if $(LIMIT),--limit $(LIMIT))
comma  := ,
SPEED_ARGS ?=
GATE_ARGS := --evalsuite-target $(TARGET) $(foreach t,$(subst $(comma), ,$(TASKS)),--evalsuite-task $(t)) $(if $(LIMIT),--evalsuite-limit $(LIMIT))

.PHONY: setup setup-eval browser lint typecheck test test-fast test-stress eval gate speed leaderboard sample-test rig rig-vllm gold bench mutation clean help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,rig,lmeval]'
	touch $(STAMP)

setup: $(STAMP)  ## create .venv and install evalsuite with its test dependencies

# What `eval`, `speed` and `sample-test` need: evalsuite and the rig's model tools, no test or lm-eval extras.
$(EVAL_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[rig]'
	touch $(EVAL_STAMP)

setup-eval: $(EVAL_STAMP)  ## create .venv and install what an eval needs (no test dependencies)

browser:  ## Debian's chromium for the HTML report test (installed when missing and apt is usable)
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium not found and cannot be installed here: the browser test of the HTML report will skip"; fi; }

lint: setup  ## ruff: lint and formatting (`ruff format` fixes the latter); no import circles in evalsuite/
	$(BIN)/ruff check evalsuite rigbuild tests bench
	$(BIN)/ruff format --check evalsuite rigbuild tests bench
	$(BIN)/python tests/import_cycles.py evalsuite

typecheck: setup  ## mypy over the package (settings in pyproject.toml)
	$(BIN)/mypy

# The rig tests start servers that need the cores to themselves: one at a time, after the rest (two at a time).
test: setup browser lint typecheck  ## lint, typecheck, then every test, the reference-rig integration tests included
	$(BIN)/python -m pytest -q -n 2 -m "not rig"
	$(BIN)/python -m pytest -q -m rig

test-fast: setup  ## unit tests only (no rig build, no full-data gold checks)
	$(BIN)/python -m pytest -q -m "not rig and not gold"

STRESS_RUNS    ?= 5
STRESS_BURNERS ?= 2
STRESS_ARGS    ?= -n 2 -m "not rig"
test-stress: setup  ## the non-rig tests STRESS_RUNS times beside STRESS_BURNERS CPU burners: failures per test [STRESS_ARGS=...]
	$(BIN)/python tests/stress.py --runs $(STRESS_RUNS) --burners $(STRESS_BURNERS) -- $(STRESS_ARGS)

eval: setup-eval  ## baseline + TARGET on TASKS (comma list) [LIMIT=N], then compare
	$(BIN)/evalsuite eval $(TARGET) $(EVAL_ARGS)

gate: setup  ## token-identity gate: one pytest item per sample of TARGET [TASKS=a,b LIMIT=N]
	$(BIN)/python -m pytest -q $(GATE_ARGS)

speed: setup-eval  ## speed of TARGET against its baseline: input lengths, concurrency, tasks [SPEED_ARGS="--reps 3"]
	$(BIN)/evalsuite speed $(TARGET) $(SPEED_ARGS)

# The rig's tuning grid (evalsuite.toml): DFlash at four draft lengths, n-gram lookup at two settings, the draft
# model, and the synthetic configuration that is lossy by construction; docs/leaderboard.md has a measured run.
LEADERBOARD      ?= dflash-n ngram-n draft smollm2-synthetic
# Sized for two shared cores (41 minutes there, docs/rig.md); LIMIT=N and TASKS=a,b override its --limit and tasks.
LEADERBOARD_ARGS ?= --limit 3 --max-tokens 128 --lengths 128,1024 --output-tokens 64 --reps 2 --task-prompts 3 \
                    --session coding --session-turns 4
leaderboard: setup-eval  ## LEADERBOARD configurations against their one baseline, ranked [TASKS=a,b LIMIT=N LEADERBOARD_ARGS=...]
	EVALSUITE_RIG_THREADS=$${EVALSUITE_RIG_THREADS:-1} $(BIN)/evalsuite leaderboard $(LEADERBOARD) $(LEADERBOARD_ARGS) $(EVAL_ARGS)

sample-test: setup-eval  ## is TARGET's output distribution under sampling the baseline's? [DRAWS=N PROMPTS=P]
	$(BIN)/evalsuite sample-test $(TARGET) $(if $(TASKS),--task $(TASKS)) $(if $(DRAWS),--draws $(DRAWS)) $(if $(PROMPTS),--prompts $(PROMPTS))

rig: setup-eval  ## build the reference llama-server and its models (cached)
	$(BIN)/evalsuite rig build
	$(BIN)/evalsuite rig models

rig-vllm: setup-eval  ## install vLLM's CPU build and convert SmolLM2 for it (cached; about 3 minutes and 4.7 GB once)
	$(BIN)/evalsuite rig vllm

gold: setup  ## grader gold checks on the full datasets (EVALSUITE_SHARED_DATA; CONTRIBUTING.md)
	$(BIN)/python -m pytest -q -m gold

bench: setup  ## benchmarks, each as a ratio against a reference measured in the same run (SOAK=full: the 20,000-request soak)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation testing of the verdict core (config: [tool.mutmut] in pyproject.toml; results: docs/mutation.md).
# Slow, so not part of `make test` or CI. MUTATE picks modules (globs over mutant names); one worker, niced,
# because it shares the machine. Results are kept in mutants/, so a rerun tests only what changed.
MUTATE ?= stats,diff,verdict,compare,graders
SHARED_DATA ?= $(abspath ../shared/data)
mutation: setup  ## mutation testing of stats/ diff/ verdict/ compare/ and the graders' rule modules [MUTATE=diff,verdict]
	EVALSUITE_SHARED_DATA=$(SHARED_DATA) nice -n 19 $(BIN)/mutmut run --max-children 1 \
	  $(foreach m,$(subst $(comma), ,$(MUTATE)),'evalsuite.$(m).*')
	$(BIN)/mutmut results

clean:  ## remove the virtualenv and caches (runs/ and reports/ are kept)
	rm -rf $(VENV) .pytest_cache .hypothesis mutants
