# modelfarm: the two commands the README documents are `make demo` and `make test`
# (`make test-fast`: the same without the slow tests, those that start real processes).
# venv, system-deps and lint are helpers they call.

PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.stamp
# Headless GL everywhere: Mesa's surfaceless EGL platform, PyOpenGL through EGL.
GL_ENV := EGL_PLATFORM=surfaceless PYOPENGL_PLATFORM=egl

.PHONY: demo test test-fast venv system-deps lint
# The steps of `test` and `demo` must run in the order written, even under `make -j`.
.NOTPARALLEL:

demo: system-deps venv
	$(GL_ENV) $(VENV)/bin/farm demo --out demo-out
	@echo "farm is $(VENV)/bin/farm: '. $(VENV)/bin/activate' puts it on PATH for this shell (README, Quick start)"

test: system-deps venv lint
	bash scripts/ensure-redis.sh
	$(GL_ENV) $(VENV)/bin/python -m pytest -q

# Everything but the tests marked slow (Celery workers, Redis servers of their own, moto, wheel builds,
# Chromium, strace, the fuzz slice): the quick loop while working.
test-fast: system-deps venv lint
	bash scripts/ensure-redis.sh
	$(GL_ENV) $(VENV)/bin/python -m pytest -q -m "not slow"

system-deps:
	bash scripts/system-deps.sh

venv: $(STAMP)

# Rebuilt only when pyproject.toml changes (or the venv is gone).
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "make venv: $(PYTHON) is older than Python 3.11; run make PYTHON=python3.11 ..." >&2; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[test]'
	touch $@

lint: venv
	$(VENV)/bin/ruff check .
