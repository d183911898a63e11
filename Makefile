# hwmgr: set-up, demo and tests on a fresh Debian 12 machine (run as root).
# Every target is idempotent: it installs only what is missing.

PY        ?= /usr/bin/python3
VENV      ?= .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
APT_RUN   := python3 python3-venv python3-pip pciutils ethtool kmod iproute2
APT_TEST  := $(APT_RUN) rpm cpio rpmlint zsh dkms linux-headers-amd64 iperf3 lshw curl openssl gnupg \
             build-essential libpci-dev chromium shellcheck busybox-static dash \
             openssh-server openssh-client \
             ifupdown initramfs-tools grub-common \
             lintian
# daemons the tests start only confined (tests/test_persist_nm.py: NetworkManager in its own
# network and mount namespaces with its own D-Bus): installed without starting, their units
# masked (scripts/apt-ensure --no-start), and a host conf leaving every device unmanaged
APT_NOSTART := network-manager
NM_HOST_CONF := /etc/NetworkManager/conf.d/00-hwmgr-tests-unmanaged.conf
PYTEST_ARGS ?=
LINT_PATHS := hwmgr tests bench lab scripts ansible_collections catalog-src
# Real vendor source RPMs for the tests (tests/support/vendor_env.py, docs/testing.md): never in the
# repository, kept in the directory beside the checkout that holds them with a SUMS.txt (a
# checkout with no such directory beside it leaves the variable empty: those tests skip, saying so)
export HWMGR_VENDOR_DIR ?= $(wildcard $(abspath $(CURDIR)/../shared/vendor))
# The other supported Pythons (RHEL 9's 3.9, the newest 3.13): make test runs the fast tests
# under each, in its own venv .venv-X.Y; scripts/find-python finds them (PATH, then pyenv)
# and fails the run, naming where it looked, when one is missing. Debian 12's 3.11 is $(PY).
PY_LEGS   ?= 3.9 3.13
# examples per fuzz target (tests/fuzz, issue 25): make test's budget, and make check's smaller
FUZZ_TEST  ?= 200
FUZZ_CHECK ?= 25
LEG_VENVS := $(foreach v,$(PY_LEGS),.venv-$(v)/.installed)

# the QEMU lab (issue 5): adds its packages to APT_TEST and the lab targets
include lab/Makefile.inc

.PHONY: all demo test check lint legs bench bytecode apt-run apt-test venv clean install-kernel-hooks \
        packages

all: test

# --- system packages -------------------------------------------------------------
apt-run:
	@scripts/apt-ensure $(APT_RUN)

apt-test:
	@scripts/apt-ensure $(APT_TEST)
	@scripts/apt-ensure --no-start $(APT_NOSTART)
	@test -f $(NM_HOST_CONF) || { mkdir -p $(dir $(NM_HOST_CONF)) && printf '%s\n' \
	  '# make apt-test (hwmgr): NetworkManager is here for the tests, which run their own' \
	  '# confined one; should this one ever start, it leaves every device alone' \
	  '[main]' 'no-auto-default=*' '[keyfile]' 'unmanaged-devices=*' > $(NM_HOST_CONF); }

# --- python environment ------------------------------------------------------------
$(STAMP): setup.cfg pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# a plain .pth path entry, not an import hook (package_dir in setup.cfg says why)
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# Byte-code on disk, as an RPM or wheel install has: with PYTHONDONTWRITEBYTECODE set (CI,
# containers) an editable checkout would otherwise recompile ~10k lines on every run. The
# variable stops only writing; .pyc files are still read (and ignored once a source changes).
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q hwmgr

venv: $(STAMP) bytecode

# one venv per other Python, with what the tests need (the test extra) from the package index
.venv-%/.installed: setup.cfg pyproject.toml specs/el9-constraints.txt
	@py=$$(scripts/find-python $*) && test -n "$$py" || exit 1; \
	  test -x .venv-$*/bin/python || $$py -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q --upgrade pip
	# 3.9 is RHEL 9's platform Python: its leg runs with the libraries RHEL 9 and EPEL 9 ship
	.venv-$*/bin/python -m pip install -q $(if $(filter 3.9,$*),-c specs/el9-constraints.txt) \
	  -e '.[test]'
	@touch $@

legs: $(LEG_VENVS)

# --- the main job: this machine's inventory and the seed-000 verdict ---------------
demo: apt-run venv
	@echo "== hwmgr inventory (this machine) =="
	@$(BIN)/hwmgr inventory; rc=$$?; [ $$rc -le 5 ] || exit $$rc
	@echo
	@echo "== hwmgr inventory --root tests/fixtures/hosts/seed000-ustor (seed 000 storage server) =="
	@$(BIN)/hwmgr inventory --root tests/fixtures/hosts/seed000-ustor; rc=$$?; [ $$rc -le 5 ] || exit $$rc
	@echo
	@echo "== hwmgr check --root tests/fixtures/hosts/seed002-before (seed 002 X540 router, before its fixes) =="
	@$(BIN)/hwmgr check --root tests/fixtures/hosts/seed002-before; rc=$$?; [ $$rc -le 5 ] || exit $$rc

# --- tests ----------------------------------------------------------------------------
# The static checks, before any test runs: ruff, mypy (pyproject.toml: hwmgr/ as Python 3.9
# sees it) and the minimum-version check (a construct newer than a file's oldest Python).
lint: venv
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/python scripts/check-min-python

# The CI command: lint, every test (slow ones and the QEMU lab included) under $(PY), and the
# fast tests under each of $(PY_LEGS) (scripts/run-tests runs those beside the lab).
test: apt-test venv legs lint
	HWMGR_FUZZ_EXAMPLES=$(FUZZ_TEST) HWMGR_LEG_FUZZ=$(FUZZ_CHECK) \
	HWMGR_LEGS="$(foreach v,$(PY_LEGS),.venv-$(v)/bin/python)" \
	  scripts/run-tests $(BIN)/python $(PYTEST_ARGS)

# The fast lane (under 90 s on a 2-core machine): lint and the tests not marked slow or heavy
# (heavy: a few seconds each; make test runs them under every Python), on both cores. Slow = DKMS and RPM builds, the lab, Ansible and the fleet, Chromium, wheel installs.
# The temp dir is short and this run's own: with xdist's popen-gwN level, pytest's default
# (/tmp/pytest-of-USER/pytest-N) pushes the gpg-agent socket of a GNUPGHOME that hwmgr makes
# under a test's state dir past the 107-byte limit of a socket path, and gpg fails.
check: apt-test venv lint
	@tmp=$$(mktemp -d /tmp/hwmgr.XXXXXX) && \
	  HWMGR_FUZZ_EXAMPLES=$(FUZZ_CHECK) $(BIN)/python -m pytest -q -m "not slow and not heavy" -n 2 --ignore=tests/lab -p no:cacheprovider \
	    --basetemp=$$tmp $(PYTEST_ARGS); rc=$$?; rm -rf $$tmp; exit $$rc

# every bench script present (bench/*, not the synth.py helper), one after the other
BENCHES = $(sort $(filter-out %.py %.md,$(wildcard bench/*)))
bench: apt-test venv
	@for b in $(BENCHES); do echo "== $$b =="; $(BIN)/python $$b || exit 1; done

# hwmgr's packages into dist/: the EL9 and EL8 RPMs and the .deb (docs/install.md,
# docs/packaging.md); scripts/build-packages says how
packages: venv
	scripts/build-packages $(BIN)/python dist

# the kernel gate's hooks (docs/kernel-gate.md) for a Debian/pip install; the RPM ships its own
install-kernel-hooks:
	install -D -m 0755 contrib/kernel/postinst.d/zz-hwmgr-gate /etc/kernel/postinst.d/zz-hwmgr-gate
	install -D -m 0755 contrib/kernel/install.d/90-hwmgr-gate.install \
		/etc/kernel/install.d/90-hwmgr-gate.install

clean:
	rm -rf $(VENV) .venv-* build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
