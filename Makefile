# modelfarm: the two commands the README documents are `make demo` and `make test`.
# venv, system-deps and lint are helpers they call.

PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.stamp
# Headless GL everywhere: Mesa's surfaceless EGL platform, PyOpenGL through EGL.
GL_ENV := EGL_PLATFORM=surfaceless PYOPENGL_PLATFORM=egl

.PHONY: demo test venv system-deps lint
# The steps of `test` and `demo` must run in the order written, even under `make -j`.
.NOTPARALLEL:

demo: system-deps venv
	$(GL_ENV) $(VENV)/bin/farm demo --out demo-out
	@echo "farm is $(VENV)/bin/farm: '. $(VENV)/bin/activate' puts it on PATH for this shell (README, Quick start)"

test: system-deps venv lint
	bash scripts/ensure-redis.sh
	$(GL_ENV) $(VENV)/bin/python -m pytest -q

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
