# The course's two commands:   make lab    (set up, start Kafka, open JupyterLab for a learner)
#                              make test   (run the whole test suite, build the site and check it in a browser)
# For instructors:             make lab-instructor  (JupyterLab with nbgrader's formgrader and Create Assignment)
# The course as a website:     make site   (build/site/: the executed lessons, the labs, the glossary)
# For contributors:            make check  (the fast tier: everything but executing notebooks, grading labs and the Spark cluster)
# Everything lives in this folder: .venv/ (Python packages), .cache/ (jars), .streamlab/ (broker, checkpoints).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null || echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help lab lab-instructor test check site setup labs kafka-stop clean docker-base tests-here solutions-here

help:
	@echo "make lab    set up (first run only), start Kafka and open JupyterLab on the course (a learner's:"
	@echo "            nbgrader's Validate button, not the instructor's tools)"
	@echo "make lab-instructor   the same, with nbgrader's formgrader, course list and Create Assignment"
	@echo "make test   set up (first run only) and run every test, notebook and lab (what CI runs): the fast tier"
	@echo "            first, stopping at its first failure, then the heavy tiers ($(HEAVY)) with the docker"
	@echo "            tier ($(DOCKER)) beside them, then builds the site and checks it and the learner's"
	@echo "            JupyterLab in headless Chromium ($(LATE))"
	@echo "make site   the course as a static website in build/site/ (lessons executed once: the notebook"
	@echo "            tests keep theirs in build/executed/; only missing ones are executed here)"
	@echo "make check  the fast tier (in parallel, about 2 min on 2 cores): every test except executing notebooks, grading"
	@echo "            whole labs, the Spark cluster and the broker crash test; includes ruff"
	@echo "            (-m 'not ($(HEAVY) or $(LATE) or $(DOCKER))')"
	@echo "make labs   regenerate the student labs in labs/ from solutions/, and the course in Chinese (zh/)"
	@echo "make kafka-stop   stop the course's Kafka broker"
	@echo "make docker-base  make the Docker stack's base image here, where no registry serves it (root, debootstrap)"

lab: setup
	$(BIN)/streamlab lab

lab-instructor: setup
	$(BIN)/streamlab lab --instructor

# The heavy tiers: executing notebooks, grading whole labs, the Spark cluster, the broker crash test.
HEAVY := notebooks or labs or cluster or slow
# The late tier: what the others built, looked at in headless Chromium (the site, the learner's JupyterLab).
LATE := browser
# The docker tier: what a Docker user runs (tests/docker): the images built here, the compose stack, its cluster
# and grader profiles, the tests' Kafka through testcontainers. Skipped, in one line, where no Docker engine answers.
DOCKER := docker

# Tests run in parallel (pytest-xdist, one worker per core): tests/conftest.py starts Kafka once and
# hands whole groups (a lab's grading run, a notebook, the Spark cluster) to one worker each, heaviest first.
# `make test` runs the fast tier first and stops at its first failure (a broken import or a lint error
# costs a minute, not forty), then the heavy tiers; the notebook tests keep the lessons they executed in
# build/executed/, the site is built from them (nothing is executed twice) and checked in a browser.
# The suite keeps Python's bytecode caches (__pycache__/, ignored by git) even where the environment sets
# PYTHONDONTWRITEBYTECODE: otherwise every pytest run (four in `make test`, one per xdist worker) compiles and
# assertion-rewrites the 135 test modules again (`make check`: 219 s of CPU instead of 239). The graded kernels keep
# it set (the sandbox).
test check: export PYTHONDONTWRITEBYTECODE :=

# The docker tier mostly waits for its containers (a third of the CPU, 6 minutes, in the fresh clone of 8dc7a33): it
# runs beside the heavy tiers, its report kept in .streamlab/docker-tier.log and printed after theirs; either failing
# fails `make test`. The late tier looks at what the heavy tiers built (the site from the executed lessons): it comes
# last.
test: tests-here setup
	$(BIN)/python -m pytest -n auto -x -q -m "not ($(HEAVY) or $(LATE) or $(DOCKER))"
	@mkdir -p .streamlab; \
	$(BIN)/python -m pytest -p no:xdist -q -rs -m "$(DOCKER)" >.streamlab/docker-tier.log 2>&1 & docker=$$!; \
	echo "$(BIN)/python -m pytest -n auto -m \"$(HEAVY)\"   (the docker tier beside it: -m \"$(DOCKER)\")"; \
	$(BIN)/python -m pytest -n auto -m "$(HEAVY)"; heavy=$$?; \
	wait $$docker; docker_status=$$?; \
	echo "$(BIN)/python -m pytest -p no:xdist -q -rs -m \"$(DOCKER)\"   (ran beside the heavy tiers; its report:)"; \
	cat .streamlab/docker-tier.log; \
	test $$heavy -eq 0 && test $$docker_status -eq 0
	$(BIN)/streamlab site
	$(BIN)/python -m pytest -q -m "$(LATE)"

check: tests-here setup
	$(BIN)/python -m pytest -n auto -m "not ($(HEAVY) or $(LATE) or $(DOCKER))" -q

site: setup
	$(BIN)/streamlab site

# The course as students get it (`streamlab release`) has no tests/ and no solutions/: they hold the answer key.
solutions-here:
	@test -d solutions || { echo "make labs: no solutions/ here (the course as students get it): the labs in labs/ are already released"; exit 2; }

tests-here:
	@test -d tests || { echo "make test: this copy of the course has no tests/: it is the course as students get it, and the tests stay with the instructor's private repository (they hold the answer key). To check your set-up: make lab, then .venv/bin/streamlab doctor"; exit 2; }

# After the first set-up: the JVMs' start-up archives, made again if the JDK or the jars changed
# (a look at file dates when nothing changed; `streamlab doctor` shows their state).
setup: $(STAMP)
	@$(BIN)/streamlab fetch --archives --quiet

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else "The course needs Python 3.11; found " + sys.version.split()[0] + " at " + sys.executable + ". Install Python 3.11 or use: make PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.txt pyspark kafka-python
	@# While pip installs the rest (mostly one core unpacking), the jars are resolved (mostly waiting on Maven
	@# Central, 80 s on a first run) and the JVMs' start-up archives made from them (pyspark and kafka-python are
	@# all that needs). `streamlab fetch` then finds both ready, or makes what is missing and says what went wrong.
	PYTHONPATH=$(CURDIR) $(BIN)/python -c "from streamlab.stack import jars, make_archives; jars.fetch_every_set(); make_archives.make_missing()" \
	    >$(VENV)/jars.log 2>&1 & jars=$$!; \
	$(BIN)/python -m pip install -r requirements.txt; installed=$$?; wait $$jars; cat $(VENV)/jars.log; exit $$installed
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/streamlab fetch
	@touch $(STAMP)

labs: solutions-here setup
	$(BIN)/streamlab release-labs
	$(BIN)/streamlab translate

kafka-stop:
	$(BIN)/streamlab kafka stop

# On a machine no image registry serves: the Dockerfile's base image, made here from Debian's packages (root,
# debootstrap), under the name the Dockerfile uses, so `docker compose -f docker/compose.yaml up --build` works.
docker-base:
	$(PYTHON) streamlab/stack/docker_images.py base

clean:
	-$(BIN)/streamlab kafka stop
	rm -rf $(VENV) .cache .streamlab build
