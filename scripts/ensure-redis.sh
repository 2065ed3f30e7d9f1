#!/usr/bin/env bash
# Make sure a Redis server answers on 127.0.0.1:6379; start a throwaway one if none does.
#
# The server it starts keeps nothing on disk (--save "" --appendonly no) and logs to
# /tmp/modelfarm-redis.log. MODELFARM_REDIS_PORT picks another port (the setup tests use it);
# the log is then /tmp/modelfarm-redis-PORT.log. Exit 0 once PING answers PONG, 1 otherwise.
set -euo pipefail

host=127.0.0.1
port="${MODELFARM_REDIS_PORT:-6379}"
if [[ ! "$port" =~ ^[0-9]+$ ]]; then
  echo "ensure-redis: MODELFARM_REDIS_PORT must be a port number, got '$port'" >&2
  exit 2
fi
if [[ "$port" == 6379 ]]; then
  logfile=/tmp/modelfarm-redis.log
else
  logfile="/tmp/modelfarm-redis-$port.log"
fi

# PING; prints the reply. Uses redis-cli when present, else a raw RESP exchange over bash's /dev/tcp.
ping_redis() {
  if command -v redis-cli >/dev/null 2>&1; then
    timeout 2 redis-cli -h "$host" -p "$port" ping 2>/dev/null || true
  else
    # shellcheck disable=SC2016  # expanded by the inner bash
    timeout 2 bash -c '
      exec 3<>"/dev/tcp/$0/$1" || exit 0
      printf "PING\r\n" >&3
      IFS= read -r reply <&3 || true
      printf "%s\n" "${reply#+}" | tr -d "\r"' "$host" "$port" 2>/dev/null || true
  fi
}

if [[ "$(ping_redis)" == PONG ]]; then
  echo "ensure-redis: Redis already answers on $host:$port"
  exit 0
fi

if ! command -v redis-server >/dev/null 2>&1; then
  echo "ensure-redis: ERROR: nothing answers PING on $host:$port and redis-server is not installed" >&2
  echo "ensure-redis: install it with scripts/system-deps.sh (Debian package redis-server)" >&2
  exit 1
fi

echo "ensure-redis: no Redis on $host:$port; starting one (log: $logfile)"
redis-server --daemonize yes --bind "$host" --port "$port" --save "" --appendonly no \
  --dir /tmp --logfile "$logfile" || true

# Wait at most ~10 s (50 x 0.2 s) for PONG.
for _ in $(seq 50); do
  if [[ "$(ping_redis)" == PONG ]]; then
    echo "ensure-redis: Redis answers on $host:$port"
    exit 0
  fi
  sleep 0.2
done

echo "ensure-redis: ERROR: started redis-server but $host:$port gave no PONG within 10 s" >&2
if [[ -r "$logfile" ]]; then
  echo "ensure-redis: last lines of $logfile:" >&2
  tail -n 20 "$logfile" >&2 || true
fi
exit 1
