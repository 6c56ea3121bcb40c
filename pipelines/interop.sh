#!/usr/bin/env bash
# make test's last step: readers nobody here wrote read what fabricsim writes,
# and agree with fctstats. The demo run (16-GPU Spectrum-X, micro AllReduce
# workload) is written as out/demo.parquet and as Arrow IPC stream and file;
#   - DuckDB (npm @duckdb/node-api, its binary ships in the package) reads
#     the Parquet trace,
#   - Arrow JS (npm apache-arrow) reads the Arrow IPC stream and file,
#   - Debian's pandas (/usr/bin/python3, python3-pandas) reads fctstats' CSV,
# and each checks rows, column names, sums and collective times against
# fctstats --format json. A per-link load file (formats/links.md) is read
# the same way: DuckDB reads the Parquet file and pandas fctstats --links'
# CSV, each checked against fctstats --links --format json; the file is the
# demo run's (flowsim-analytical --link-loads). A serving run's per-request
# Parquet (formats/requests.md, simccl-serve) is read by DuckDB, and its
# request_metrics.csv and fctstats --requests' CSV by pandas, each checked
# against fctstats --requests --format json (Arrow JS has no Parquet reader
# and simccl-serve writes no Arrow IPC). The Node packages are pinned in
# tests/interop/package-lock.json, installed with npm ci once per lock file
# and host (OS, machine, Node ABI, libc) into a cache outside the clone and
# linked as tests/interop/node_modules.
#
# INTEROP=0 skips everything. Without node/npm the Node checks are skipped,
# without pandas (and not root to install it) the pandas check is, each
# with a line saying so; a check that runs and disagrees fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${INTEROP:-1}" = 0 ]; then
	echo "interop: skipped (INTEROP=0)"
	exit 0
fi
GO=${GO:-go}
$GO build -o bin/ ./cmd/topogen ./cmd/ncclpath ./cmd/simccl-decompose ./cmd/flowsim-analytical ./cmd/fctstats ./cmd/simccl-serve
dir=out/interop
mkdir -p "$dir"
bin/topogen --family spectrum-x --gpus 16 | bin/ncclpath |
	bin/simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 --ep 2 >"$dir/demo.stream"
# quiet runs the simulator without its summary line, but shows errors.
quiet() { "$@" 2>"$dir/stderr" || { cat "$dir/stderr" >&2; exit 1; }; }
quiet bin/flowsim-analytical --out out/demo.parquet --link-loads "$dir/demo-links.parquet" "$dir/demo.stream"
quiet bin/flowsim-analytical --out "$dir/demo.arrow" "$dir/demo.stream"
quiet bin/flowsim-analytical "$dir/demo.stream" >"$dir/demo.arrows"
bin/fctstats --format json out/demo.parquet >"$dir/parquet.json"
bin/fctstats --format json <"$dir/demo.arrows" >"$dir/arrows.json" # Arrow on stdin
bin/fctstats --format csv out/demo.parquet >"$dir/collectives.csv"
links=$dir/demo-links.parquet
bin/fctstats --links "$links" --format json --top 0 >"$dir/links.json"
bin/fctstats --links "$links" --format csv >"$dir/links-tiers.csv"
# Serving: prompts and outputs of varied lengths, some of one output token
# (no KV transfer, no TPOT), so the counts differ per latency.
bin/topogen --family spectrum-x --gpus 16 |
	quiet bin/simccl-serve --model examples/models/llama-3-8b.json --requests 200 --prompt-tokens 64-2048 \
		--output-tokens 1-64 --prefill 1:tp=4 --decode 2:tp=4 --out "$dir/requests.parquet" --request-metrics "$dir/request_metrics.csv"
bin/fctstats --requests "$dir/requests.parquet" --format json >"$dir/requests.json"
bin/fctstats --requests "$dir/requests.parquet" --format csv >"$dir/requests-latencies.csv"
failed=0

# Node: DuckDB and Arrow JS.
if command -v node >/dev/null && command -v npm >/dev/null; then
	lock=tests/interop/package-lock.json
	# The packages live outside the clone (as Go's build cache does): a
	# fresh clone links them instead of running npm ci again (82 MB; 3.7 s
	# of CPU, 16 s at load 35). NODE_CACHE moves them; without HOME they go
	# to the clone's out/, not to a /tmp directory another user can make.
	if [ -n "${NODE_CACHE:-}" ]; then
		cache=$NODE_CACHE
	elif [ -n "${XDG_CACHE_HOME:-}${HOME:-}" ]; then
		cache=${XDG_CACHE_HOME:-$HOME/.cache}/fabricsim/interop
	else
		cache=out/.node-cache
	fi
	# Absolute: node_modules links to it from tests/interop.
	cache=$(realpath -m "$cache")
	# npm ci installs only this host's DuckDB binding
	# (@duckdb/node-bindings-<os>-<arch>[-musl], package-lock.json), built
	# for one Node ABI: the key is the lock file with the OS, machine, Node
	# ABI and libc, so that a shared cache (NFS home, CI volume) keeps a
	# tree for each.
	libc=$(ldd --version 2>&1 || true)
	host="$(uname -sm) node-abi $(node -p process.versions.modules) ${libc%%$'\n'*}"
	keyed=$cache/$({ cat "$lock" && echo "$host"; } | sha256sum | cut -c1-16)
	if [ ! -f "$keyed/node_modules/.fabricsim-lock" ]; then
		echo "interop: npm ci into $keyed (first run, package-lock.json changed or another host: $host)"
		tmp=
		mkdir -p "$cache" && tmp=$(mktemp -d "$keyed.XXXXXX") &&
			cp tests/interop/package.json "$lock" "$tmp/" &&
			(cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error) &&
			cp "$lock" "$tmp/node_modules/.fabricsim-lock" || {
			# A partial install is removed, not left beside the cache.
			[ -z "$tmp" ] || rm -rf "$tmp"
			echo "interop: FAIL: npm ci into $cache failed (the npm registry must be reachable for the first run)" >&2
			exit 1
		}
		# Another run may have put the same packages there first.
		mv -T "$tmp" "$keyed" 2>/dev/null || rm -rf "$tmp"
	fi
	# An installed tree of an earlier version of this script is replaced.
	[ -L tests/interop/node_modules ] || rm -rf tests/interop/node_modules
	ln -sfn "$keyed/node_modules" tests/interop/node_modules
	(cd tests/interop && node check.mjs parquet ../../out/demo.parquet "../../$dir/parquet.json") || failed=1
	(cd tests/interop && node check.mjs arrow "../../$dir/demo.arrows" "../../$dir/arrows.json") || failed=1
	(cd tests/interop && node check.mjs arrow "../../$dir/demo.arrow" "../../$dir/parquet.json") || failed=1
	(cd tests/interop && node check.mjs links "../../$links" "../../$dir/links.json") || failed=1
	(cd tests/interop && node check.mjs requests "../../$dir/requests.parquet" "../../$dir/requests.json") || failed=1
else
	echo "interop: SKIP DuckDB and Arrow JS checks: node and npm are not installed"
fi

# pandas: Debian's, not whatever python3 comes first on PATH.
py=/usr/bin/python3
why="no /usr/bin/python3"
if [ -x "$py" ] && ! "$py" -c 'import pandas' 2>/dev/null; then
	why="Debian's python3-pandas is not installed and installing it needs root (apt-get install python3-pandas)"
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "interop: installing Debian's python3-pandas (apt-get)"
		export DEBIAN_FRONTEND=noninteractive
		# A stale package list is the usual reason a first attempt fails.
		apt-get install -y -qq python3-pandas >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq python3-pandas >/dev/null 2>&1; } ||
			why="apt-get install python3-pandas failed (is the Debian archive reachable?)"
	fi
fi
if [ -x "$py" ] && "$py" -c 'import pandas' 2>/dev/null; then
	"$py" tests/interop/check_csv.py "$dir/collectives.csv" "$dir/parquet.json" || failed=1
	"$py" tests/interop/check_links_csv.py "$dir/links-tiers.csv" "$dir/links.json" || failed=1
	"$py" tests/interop/check_requests_csv.py "$dir/request_metrics.csv" "$dir/requests-latencies.csv" "$dir/requests.json" || failed=1
else
	echo "interop: SKIP pandas check: $why"
fi

if [ "$failed" != 0 ]; then
	echo "interop: FAIL: a reader disagrees with fctstats (see above)" >&2
	exit 1
fi
echo "interop: ok"
