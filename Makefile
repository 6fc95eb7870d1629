# The two commands that matter: `make search` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.installed-stamp
SEARCH_DIR ?= runs/search

.PHONY: search test install clean

$(STAMP): setup.py
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@# Graphviz draws cells (amoeba show --format=svg|png): Debian's package, installed when we are root
	@command -v dot >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y --no-install-recommends graphviz >/dev/null 2>&1 || \
	    { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends graphviz >/dev/null 2>&1; }; }; } || \
	  echo "note: Graphviz is not installed (apt-get install graphviz): amoeba show --format=svg|png will say so"
	touch $(STAMP)

install: $(STAMP)

search: $(STAMP)
	$(VENV)/bin/amoeba search --flagfile=experiments/configs/search_digits.cfg --output_dir=$(SEARCH_DIR)

test: $(STAMP)
	$(VENV)/bin/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info
