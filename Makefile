# mlfc: `make help` lists the targets.
SHELL := /bin/bash
# Debian's python3 carries Mininet's Python module; the venv sees it via --system-site-packages.
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
P4C ?= p4c
# The open-source Tofino compiler (p4c with its Tofino backend) in its own prefix: docs/tofino.md.
P4C_TOFINO ?= $(or $(MLFC_P4C_TOFINO),/opt/p4c-tofino/bin/p4c)
P4_BUILD := p4src/build
# Table sizes other than size.p4's defaults, e.g. P4_SIZES="FLOW_CLASSIFIER_SIZE=16384" with P4_BUILD=dir:
# mlfc/pipeline_sizes.py (the committed outputs keep the defaults).
P4_SIZES :=
TOFINO_BUILD := $(P4_BUILD)/tofino
P4_PROGRAMS := mlfc l3fwd
SHELL_VENV ?= .venv-shell
GRPC_ADDR ?= 127.0.0.1:50051
DEVICE_ID ?= 1

.PHONY: help install certs debian-packages figures install-sim bpf kernel-mltcp kernel-mltcp-ddp kernel-mltcp-gloo p4 p4-tofino proto test ptf e2e sweep hpsearch search approx mltcp-real chaos bench run deploy-test sim sim-scale lint shell shell-venv clean

help:  ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

# As root: the Debian packages mlfc uses (only the missing ones); otherwise the apt-get line for them.
debian-packages:  ## the Debian packages (mininet, ethtool, clang, bpftool, ...) that are missing: installed as root, else printed
	@bash scripts/debian-packages.sh

$(VENV)/.installed: pyproject.toml | debian-packages
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q -e '.[test,train,search]'
	touch $@

install: debian-packages $(VENV)/.installed  ## the Debian packages (root), .venv, mlfc with its test tools, PyTorch (CPU, the train extra) and Optuna (the search extra); the transport's compiled loops; `make bpf` where clang is
	@$(VENV)/bin/mlfc-transport build || echo "make install: the transport runs its numpy paths (docs/transport.md)"
	@if command -v clang >/dev/null && [ -e /sys/kernel/btf/vmlinux ]; then $(MAKE) --no-print-directory bpf; \
	else echo "make install: no clang or no kernel BTF: eBPF MLTCP not built (docs/kernel-mltcp.md)"; fi

bpf: $(VENV)/.installed  ## build the eBPF MLTCP congestion controls for this kernel (clang, libbpf-dev, bpftool)
	$(VENV)/bin/mlfc-mltcp build

kernel-mltcp: install  ## MLTCP in kernel TCP: jobs through an htb bottleneck, tables/CSV/plots in results/kernel-mltcp (root)
	flock /tmp/mlfc-measure.lock $(PY) -m mlfc.lab.kernel_mltcp --out results/kernel-mltcp $(ARGS)

kernel-mltcp-ddp: install  ## N PyTorch DDP jobs (gloo) through the kernel lab's shallow bottleneck: kernel MLTCP against plain (root, torch)
	flock /tmp/mlfc-measure.lock $(PY) -m mlfc.lab.mltcp.gloo --out results/kernel-ddp $(ARGS)

kernel-mltcp-gloo: install  ## unmodified PyTorch DDP over gloo between namespaces on mltcp_cubic: what it detects (root, torch)
	$(PY) -m mlfc.lab.mltcp.kernel_gloo $(ARGS)

# TLS for the gRPC APIs (docs/tls.md): HOSTS="coord ctl sw1 host1"; certs/ is not committed.
HOSTS ?= localhost
CERTS ?= certs
certs:  ## a development CA and a certificate per host of HOSTS="coord ctl sw1" in certs/ (openssl; docs/tls.md)
	bash scripts/make-certs.sh $(CERTS) $(HOSTS)

# ns-3 is a separate step: PyPI's ns3 wheel (with cppyy) takes ~6 minutes to download and ~300 MB.
$(VENV)/.installed-sim: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test,train,search,sim]'
	touch $@

install-sim: $(VENV)/.installed-sim  ## add ns-3 (PyPI ns3==3.44.post0, ~6 min) for mlfc.sim and its tests

p4:  ## compile p4src/ with p4c into the committed BMv2 JSON + P4Info (p4src/build/)
	@command -v $(P4C) >/dev/null || { echo "p4c not found: see docs/toolchain.md" >&2; exit 1; }
	@mkdir -p $(P4_BUILD); for prog in $(P4_PROGRAMS); do \
	  echo "p4c $$prog"; \
	  $(P4C) --target bmv2 --arch v1model --std p4-16 $(foreach s,$(P4_SIZES),-D$(s)) \
	    --p4runtime-files $(P4_BUILD)/$$prog.p4info.txtpb -o $(P4_BUILD) p4src/v1model/$$prog.p4 || exit 1; \
	done

p4-tofino:  ## compile p4src/tna/mlfc.p4 for Tofino 1 into p4src/build/tofino/ (P4C_TOFINO=...; docs/tofino.md)
	@command -v $(P4C_TOFINO) >/dev/null || { echo "$(P4C_TOFINO) not found: see docs/tofino.md" >&2; exit 1; }
	rm -rf $(TOFINO_BUILD) && mkdir -p $(TOFINO_BUILD)
	$(P4C_TOFINO) --target tofino --arch tna --std p4-16 --p4runtime-force-std-externs -g \
	  --p4runtime-files $(TOFINO_BUILD)/mlfc.p4info.txtpb --bf-rt-schema $(TOFINO_BUILD)/bfrt.json \
	  -o $(TOFINO_BUILD) p4src/tna/mlfc.p4
	$(PY) -m mlfc.lab.tofino_resources $(TOFINO_BUILD) --out $(TOFINO_BUILD)/resources.md

proto:  ## regenerate the Python bindings of mlfc/proto/*.proto
	PYTHON=$(PY) bash mlfc/proto/generate.sh

test: install  ## run the test suite (switch tests skip with a reason where p4c/BMv2/Mininet are missing)
	@$(PY) -m pytest tests; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

ptf: install  ## run the PTF packet tests against a fresh simple_switch_grpc (DATAPLANE=ref: the reference switch)
	$(PY) -m mlfc.lab.ptf_runner $(if $(DATAPLANE),--dataplane $(DATAPLANE))

e2e: install  ## Mininet end-to-end scenarios, tables/CSVs/plots in results/ (DATAPLANE=bmv2|ref|both; MLFC_BMV2=another build)
	$(PY) -m mlfc.lab.e2e --out results $(if $(DATAPLANE),--dataplane $(DATAPLANE))

figures: install  ## regenerate the docs' result tables (docs/results.md, README) and plots from docs/data/*/summary.json
	$(PY) -m mlfc.lab.figures

sweep: install  ## MLTCP slope/intercept sweep on one mix: table and plots in results/sweep (DATAPLANE=bmv2|ref)
	$(PY) -m mlfc.lab.mltcp.sweep --out results/sweep $(if $(DATAPLANE),--dataplane $(DATAPLANE))

# Real PyTorch jobs through the lab (issue 13): measurement runs hold the shared lock (docs/training.md).
MEASURE ?= flock /tmp/mlfc-measure.lock
ROUNDS ?= 3

# The defaults are the documented command, `python -m mlfc.lab.hpsearch --publish` (only what differs is passed,
# so the rows record that command).
hpsearch: install  ## MAIF's time to accuracy in a hyper-parameter search of real jobs, published to docs/data/hpsearch (TASK=digits,synthetic DATAPLANE=bmv2|ref|both ROUNDS=3)
	$(MEASURE) $(PY) -m mlfc.lab.hpsearch --publish $(if $(filter-out 3,$(ROUNDS)),--rounds $(ROUNDS)) $(if $(TASK),--task $(TASK)) $(if $(DATAPLANE),--dataplane $(DATAPLANE))

# The defaults are the documented command, `python -m mlfc.lab.search --publish` (only what differs is passed).
search: install  ## an Optuna study (TPE, k trials at once, a pruner) of real jobs, FIFO vs MAIF, published to docs/data/search (TASK=digits DATAPLANE=ref|bmv2 ROUNDS=3 TRIALS=24 CONCURRENCY=6 PRUNERS=median,asha)
	$(MEASURE) $(PY) -m mlfc.lab.search --publish $(if $(filter-out 3,$(ROUNDS)),--rounds $(ROUNDS)) $(if $(TASK),--task $(TASK)) $(if $(DATAPLANE),--dataplane $(DATAPLANE)) $(if $(TRIALS),--trials $(TRIALS)) $(if $(CONCURRENCY),--concurrency $(CONCURRENCY)) $(if $(PRUNERS),--pruners $(PRUNERS))

# The defaults are the documented command, `python -m mlfc.lab.approx --publish` (issue 25's method).
approx: install  ## approximate flow control: full vs fp16 vs top-k+EF vs old selective drop vs mlfc, published to docs/data/approx (MODEL=digits-cnn,synthetic-mlp ROUNDS=3 SEEDS=0,1 DATAPLANE=bmv2|ref|both)
	$(MEASURE) $(PY) -m mlfc.lab.approx --publish $(if $(MODEL),--model $(MODEL)) $(if $(filter-out 3,$(ROUNDS)),--rounds $(ROUNDS)) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(DATAPLANE),--dataplane $(DATAPLANE))

mltcp-real: install  ## MLTCP's interleaving of two compatible real training jobs, next to the emulator's
	$(MEASURE) $(PY) -m mlfc.lab.mltcp.real --out results/mltcp-real --rounds $(ROUNDS) $(if $(DATAPLANE),--dataplane $(DATAPLANE))

chaos: install  ## real training while a seeded schedule kills -9, SIGSTOPs and cuts every component (SEED=N FAULTS=13 DATAPLANE=ref|bmv2)
	$(MEASURE) $(PY) -m mlfc.lab.chaos --out results/chaos --faults $(or $(FAULTS),13) $(if $(SEED),--seed $(SEED)) $(if $(DATAPLANE),--dataplane $(DATAPLANE))

bench: install  ## benchmark figures, scaling curves, one summary table, published to docs/data/bench (QUICK=1: smaller, not published; BMV2="path ...")
	$(MEASURE) $(PY) bench/run_all.py $(if $(QUICK),--quick,--publish) $(foreach b,$(BMV2),--bmv2 $(b))

deploy-test: install  ## docs/deploy.md's cluster in network namespaces: every daemon from its deploy/systemd unit, mutual TLS across hosts, a job trained (root)
	$(PY) -m mlfc.lab.deploy --out results/deploy-test

run: install  ## the main job: the full stack on a local Mininet network (TRAINING=1: real PyTorch jobs)
	$(PY) -m mlfc.lab.run $(if $(TRAINING),--training) $(if $(DATAPLANE),--dataplane $(DATAPLANE))

sim: install-sim  ## a small ns-3 run: two compatible jobs, Reno vs MLTCP-Reno (results/sim/validation)
	$(PY) -m mlfc.sim small --out results/sim

sim-scale: install-sim  ## every ns-3 experiment (validation, scale, circular, maif, incast, bench): hours on 2 cores
	$(PY) -m mlfc.sim all --out results/sim $(if $(SEEDS),--seeds $(SEEDS))

lint: install  ## ruff
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

$(SHELL_VENV)/.installed:
	$(PYTHON) -m venv $(SHELL_VENV) && $(SHELL_VENV)/bin/pip install -q p4runtime-shell==0.0.6
	touch $@

shell-venv: $(SHELL_VENV)/.installed  ## p4runtime-shell's own venv (it pins an old protobuf)

# A switch that already runs a pipeline (e.g. one the controller manages) is joined as a read-only backup:
# pushing a pipeline there would fail ("Not primary") or, as primary, wipe the controller's entries.
shell: install shell-venv  ## p4runtime-shell on a switch (GRPC_ADDR): read-only backup if it runs a pipeline
	@$(PY) -m mlfc.controller.cli pipeline --grpc-addr $(GRPC_ADDR) --device-id $(DEVICE_ID); rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  echo "joining as a read-only backup (election id 0,1); its primary keeps control"; \
	  exec $(SHELL_VENV)/bin/python -m p4runtime_sh --grpc-addr $(GRPC_ADDR) --device-id $(DEVICE_ID) --election-id 0,1; \
	elif [ $$rc -eq 1 ]; then \
	  echo "no pipeline on the switch: loading $(P4_BUILD)/mlfc.json as primary"; \
	  exec $(SHELL_VENV)/bin/python -m p4runtime_sh --grpc-addr $(GRPC_ADDR) --device-id $(DEVICE_ID) --election-id 0,1 \
	    --config $(P4_BUILD)/mlfc.p4info.txtpb,$(P4_BUILD)/mlfc.json; \
	else exit $$rc; fi

clean:  ## remove venvs, caches and results (committed P4 outputs stay)
	rm -rf $(VENV) $(SHELL_VENV) .pytest_cache .ruff_cache .hypothesis results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
