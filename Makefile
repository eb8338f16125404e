# Lazaret — build, run and test.
#
#   make run [ARGS='exec -- git status']   set up what is missing, build, open a sandboxed shell here
#   make install [PREFIX=…]                set up, install the binaries and the docs (share/doc/lazaret)
#   make test                              unit, fuzz seeds, CLI scripts and the integration suite
#   make bench                             benchmarks against the bare podman/runsc baseline
#
# As root, lazaret runs as the unprivileged user made by scripts/setup
# (LAZARET_USER, default "lazaret"); as a normal user (with sudo for the
# Debian packages) it runs as you.

SHELL      := /bin/bash
GO         ?= go
VERSION    ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -s -w -X github.com/lazaret-dev/lazaret/internal/version.Version=$(VERSION)
GOBUILD    := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
ROOT_USER  := $(shell [ "$$(id -u)" = 0 ] && echo yes)
PREFIX     ?= $(if $(ROOT_USER),/usr/local,$(HOME)/.local)
ARGS       ?= shell
BINARIES   := lazaret lazaret-runsc lazaret-escalate lazaret-escalate-go lazaret-netd lazaret-fsmonitor lazaret-kube
DOCS       := README.md $(wildcard docs/*.md)
DOCDIR     ?= $(PREFIX)/share/doc/lazaret

export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build install install-bin install-doc setup run test unit lint integration bench fuzz clean

all: build

build:
	@mkdir -p bin
	@# Before its own binary, lazaret-runsc was a link to lazaret.
	@[ ! -L bin/lazaret-runsc ] || rm -f bin/lazaret-runsc
	$(GOBUILD) -o bin/ ./cmd/lazaret ./cmd/lazaret-runsc ./cmd/lazaret-netd ./cmd/lazaret-fsmonitor ./cmd/lazaret-kube
	$(GOBUILD) -o bin/lazaret-escalate-go ./cmd/lazaret-escalate-go
	gcc -static -O2 -Wall -s -o bin/lazaret-escalate cmd/lazaret-escalate/main.c cmd/lazaret-escalate/holder.c

# install-bin installs only lazaret's own binaries; `install` also makes
# sure the pinned runsc and the images exist (scripts/setup).
install-bin: build
	install -d $(PREFIX)/bin $(PREFIX)/lib/lazaret
	@[ ! -L $(PREFIX)/bin/lazaret-runsc ] || rm -f $(PREFIX)/bin/lazaret-runsc
	install -m 0755 $(addprefix bin/,$(BINARIES)) $(PREFIX)/bin/

# install-doc installs the README and docs/*.md into DOCDIR
# ($(PREFIX)/share/doc/lazaret).
install-doc:
	install -d $(DOCDIR)
	install -m 0644 $(DOCS) $(DOCDIR)/

# install runs scripts/setup, which installs the binaries (install-bin) and
# the documentation (install-doc) into PREFIX.
install:
	PREFIX=$(PREFIX) scripts/setup

setup:
	scripts/setup

run: setup
	@scripts/run-here $(ARGS)

test: setup
	@scripts/test

unit:
	$(GO) test ./...

lint:
	@scripts/lint

integration: setup
	@scripts/integration

bench: setup
	@scripts/bench

# fuzz runs every fuzz target for FUZZTIME each (seeds alone run in `make test`).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep ^Fuzz); do \
	    echo "== $$pkg $$t"; $(GO) test -run XXX -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin dist
