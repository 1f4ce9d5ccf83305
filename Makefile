# Shortcuts; each calls dev.py, which needs only Python 3.11+.
.PHONY: demo test bench lint chaos soak soak-100k storm faults ha ha-chaos
demo:
	python3 dev.py demo
test:
	python3 dev.py test
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
bench:
	.venv/bin/python bench/run_all.py
chaos:
	.venv/bin/python -m bench.chaos
# A fleet across nodes (bench/soak.py): SOAK_ARGS="--agents 2000 --seconds 180" for a small machine.
soak:
	.venv/bin/python bench/soak.py $(SOAK_ARGS)
# Issue #32's fleet: 100,000 agents in 10 processes, 3 web nodes behind HAProxy, 2 workers,
# 10 minutes (a quiet machine with cores to spare; SOAK_ARGS adds to or overrides these).
soak-100k:
	.venv/bin/python bench/soak.py --agents 100000 --procs 10 --hold-concurrency 8 --acquire-rate 400 --web 3 --workers 2 --seconds 600 $(SOAK_ARGS)
# Half the fleet dies in the same second (bench/storm.py, own PostgreSQL and Redis):
# STORM_ARGS="--leases 10000" for a small machine; the default is 100,000 leases.
storm:
	.venv/bin/python bench/storm.py $(STORM_ARGS)
# Leaseboard's own parts fail under load (~3 min, servers of its own): bench/faults.py.
faults:
	.venv/bin/python bench/faults.py $(FAULTS_ARGS)
# PostgreSQL made highly available (docs/deployment.md, "High availability"): etcd, two
# nodes under Patroni, HAProxy, web and worker on loopback until Ctrl-C (bench/ha).
ha:
	.venv/bin/python -m bench.ha $(HA_ARGS)
# The chaos fleet while the primary is killed 3 times and frozen (~4 min): bench/ha/chaos.py.
ha-chaos:
	.venv/bin/python -m bench.ha.chaos $(HA_ARGS)
