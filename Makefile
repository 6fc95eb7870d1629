# The two commands that matter: `make search` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.installed-stamp
SEARCH_DIR ?= runs/search
APT_INSTALL = { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
  { apt-get install -y --no-install-recommends $(1) >/dev/null 2>&1 || \
    { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends $(1) >/dev/null 2>&1; }; }; }

.PHONY: search test install clean

$(STAMP): setup.py
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@# uv installs the same packages as pip in 31 s against 83 s on a fresh machine; pip does it where
	@# uv cannot be had or fails. --compile-bytecode as pip does: under PYTHONDONTWRITEBYTECODE=1
	@# every worker would otherwise compile TensorFlow's sources again (import 17 s against 6 s)
	$(VENV)/bin/python -m pip install --quiet uv || true
	$(VENV)/bin/python -m uv pip install --quiet --compile-bytecode --python $(VENV)/bin/python -e '.[test]' || \
	  { echo "note: uv could not install the packages; pip installs them" && \
	    $(VENV)/bin/python -m pip install --quiet --upgrade pip && \
	    $(VENV)/bin/python -m pip install --quiet -e '.[test]'; }
	@# Debian packages, installed when we are root: Graphviz draws cells (amoeba show, amoeba report);
	@# Chromium opens the report in a test, as a reader would
	@command -v dot >/dev/null || $(call APT_INSTALL,graphviz) || \
	  echo "note: Graphviz is not installed (apt-get install graphviz): amoeba show and report will say so"
	@command -v chromium >/dev/null || $(call APT_INSTALL,chromium) || \
	  echo "note: Chromium is not installed (apt-get install chromium): the test that opens the report skips"
	touch $(STAMP)

install: $(STAMP)

search: $(STAMP)
	$(VENV)/bin/amoeba search --flagfile=experiments/configs/search_digits.cfg --output_dir=$(SEARCH_DIR)

test: $(STAMP)
	$(VENV)/bin/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info
