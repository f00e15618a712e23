# gpufleet.node: the two commands are `make test` and `make demo` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help
TOOLS := tools
# Every Molecule scenario, and two jobs that share their lanes: infra-repo, docs/infra-repo.md's repository with its
# own scenario (tools/infra-repo.sh), and newest-core, the newest ansible-core on the collection (tools/newest-core.sh).
SCENARIOS ?= $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard extensions/molecule/*/molecule.yml)))) infra-repo newest-core

.PHONY: help test demo bench bench-env lint yamllint ansible-lint actionlint docs sanity unit molecule infra-repo newest-core build-check clean \
        host-deps venv collections dockerd image mirror snapshot wheelhouse fake-nvml

help:
	@echo "make test    every check: yamllint, ansible-lint, actionlint, docs, ansible-test sanity, unit tests, Molecule ($(SCENARIOS))"
	@echo "make demo    bring up a local fleet of node containers, run playbooks/site.yml, print a summary"
	@echo "make bench   benchmarks (not part of make test), written to docs/benchmarks.md"
	@echo "make clean   remove demo containers and the project cache (the node image stays cached)"

host-deps:
	@$(TOOLS)/host-deps.sh
venv:
	@$(TOOLS)/venv.sh
collections: venv
	@$(TOOLS)/collections.sh
dockerd: host-deps
	@$(TOOLS)/dockerd.sh
image: dockerd
	@$(TOOLS)/node-image.sh
mirror: host-deps
	@$(TOOLS)/mirror.sh
snapshot: image   # snapshot.sh starts a node of each OS
	@$(TOOLS)/snapshot.sh
wheelhouse: venv
	@$(TOOLS)/wheelhouse.sh
fake-nvml: host-deps
	@$(TOOLS)/fake-nvml.sh
bench-env: venv collections image mirror snapshot wheelhouse fake-nvml

# Every check: lint sanity unit build-check molecule, with bench-env built in the background (tools/test.sh).
test:
	@$(TOOLS)/test.sh

lint: yamllint ansible-lint actionlint docs
yamllint: venv
	@$(TOOLS)/run.sh yamllint
ansible-lint: collections
	@$(TOOLS)/run.sh ansible-lint
actionlint: host-deps
	@$(TOOLS)/actionlint.sh
docs: venv   # the role READMEs' variables and CHANGELOG.md are up to date; the changelog fragments are valid
	@$(TOOLS)/run.sh docs
sanity: host-deps collections
	@$(TOOLS)/run.sh sanity
unit: venv
	@$(TOOLS)/run.sh unit
build-check: collections
	@$(TOOLS)/run.sh build-check
molecule: bench-env
	@$(TOOLS)/run.sh molecule $(SCENARIOS)
infra-repo: bench-env
	@$(TOOLS)/run.sh molecule infra-repo
newest-core: bench-env
	@$(TOOLS)/run.sh molecule newest-core

demo: venv collections dockerd mirror wheelhouse fake-nvml   # the node image and snapshot of its OS: tools/demo.sh
	@$(TOOLS)/demo.sh

bench: bench-env dockerd   # BENCH="fleet" (or gpu_facts, site) runs and rewrites only those sections
	@$(TOOLS)/bench.sh $(BENCH)

clean:
	@-$(TOOLS)/demo.sh down 2>/dev/null
	@-$(TOOLS)/serve-snapshot.sh stop 2>/dev/null
	rm -rf .cache tests/output
