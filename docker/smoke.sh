#!/usr/bin/env bash
# Smoke test of the deployment, where Docker (with compose v2 and BuildKit) exists: build the image,
# start Redis, two render workers, the nightly worker, beat and Flower, wait until they are healthy,
# render the committed goldens/manifest.toml on the workers, compare it with the goldens, and take
# everything down again (volumes included). Run from anywhere:
#
#   docker/smoke.sh            exit status 0 when the job rendered and matched its goldens
#   KEEP=1 docker/smoke.sh     leave the stack running afterwards (then: docker compose -p NAME down -v)
#
# It uses a project name of its own (modelfarm-smoke-PID), so it never touches a running farm.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project="modelfarm-smoke-$$"
password="$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
export FLOWER_BASIC_AUTH="smoke:$password"
export FARM_WORKER_CPUS="${FARM_WORKER_CPUS:-2}" FARM_CONCURRENCY="${FARM_CONCURRENCY:-1}"
compose=(docker compose -p "$project" -f "$here/compose.yaml")

say() { echo "smoke: $*"; }

cleanup() {
  local rc=$?
  if [[ "${KEEP:-0}" == 1 ]]; then
    say "left running: ${compose[*]} down -v"
  else
    if ((rc != 0)); then
      "${compose[@]}" logs --no-color --tail 50 || true
    fi
    "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  exit "$rc"
}

command -v docker >/dev/null 2>&1 || { say "docker not found: nothing to do"; exit 0; }
docker compose version >/dev/null 2>&1 || { say "docker compose (v2) not found"; exit 1; }
docker info >/dev/null 2>&1 || { say "the Docker daemon does not answer"; exit 1; }
trap cleanup EXIT

say "building and starting $project"
"${compose[@]}" up -d --build --wait --wait-timeout 300 --scale worker=2

say "image: $("${compose[@]}" run --rm --no-deps worker python -m farm.version)"

say "rendering /data/assets/manifest.toml on the workers"
"${compose[@]}" run --rm --no-deps worker \
  farm run /data/assets/manifest.toml --out /data/out --job-id smoke

say "comparing with the goldens"
"${compose[@]}" run --rm --no-deps worker \
  farm compare smoke --out /data/out --goldens /data/assets

say "passed"
