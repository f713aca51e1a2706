#!/usr/bin/env bash
# make bench: the seed's two scenarios and a grouped one, each against a fresh
# embedded appliance, recorded in BENCHMARKS.md with the machine and command.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./bin/attune
out=${BENCH_OUT:-BENCHMARKS.md}
runs=(
  "--executions 1000 --concurrency 5"
  "--executions 10000 --concurrency 10"
  "--executions 10000 --concurrency 2 --groups 20"
)
{
  echo
  echo "## Run of $(date -u +%Y-%m-%dT%H:%MZ) — $($bin version)"
  echo
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr)."
  echo
} >>"$out"
for args in "${runs[@]}"; do
  echo "bench: attune bench --embedded $args" >&2
  result=$($bin bench --embedded $args 2> >(grep -v '^time=' >&2))
  {
    echo "\`attune bench --embedded $args\`"
    echo
    echo '```'
    echo "$result"
    echo '```'
    echo
  } >>"$out"
done
echo "bench: results appended to $out" >&2
