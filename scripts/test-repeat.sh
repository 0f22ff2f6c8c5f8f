#!/usr/bin/env bash
# Runs one test tier N times, each on a clean clone of the current commit, and prints one line a
# run (exit code, seconds, failed files) and a summary; the logs stay in the folder it names.
# This is how the flake register in docs/testing.md is fed: a tier "passes 5 consecutive times"
# when `scripts/test-repeat.sh unit 5` prints 5 of 5.
#
#   scripts/test-repeat.sh unit|e2e [N=5]
set -euo pipefail
tier="${1:-}"
runs="${2:-5}"
case "$tier" in
  unit) cmd=(npm test) ;;
  e2e) cmd=(npm run test:e2e) ;;
  *) echo "usage: scripts/test-repeat.sh unit|e2e [N]" >&2; exit 2 ;;
esac
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number, got '$runs'" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
commit="$(git -C "$root" rev-parse --short HEAD)"
[ -z "$(git -C "$root" status --porcelain)" ] || echo "note: uncommitted changes are not in the clones; testing $commit" >&2
out="$(mktemp -d "${TMPDIR:-/tmp}/llmha-repeat-$tier-XXXXXX")"
echo "$tier × $runs on clean clones of $commit; logs in $out"
passed=0
for i in $(seq 1 "$runs"); do
  clone="$out/clone"
  rm -rf "$clone"
  git clone -q "$root" "$clone"
  (cd "$clone" && npm ci --no-audit --no-fund >"$out/npm-ci-$i.log" 2>&1)
  start=$(date +%s)
  set +e
  (cd "$clone" && "${cmd[@]}") >"$out/run-$i.log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  # No failed file is no match: grep's exit 1 must not end the script (pipefail, -e).
  failed=$({ sed 's/\x1b\[[0-9;]*m//g' "$out/run-$i.log" | grep -oE '^ FAIL +[a-z0-9-]+ +test/[^ >]+' || true; } | awk '{print $NF}' | sort -u | tr '\n' ' ')
  [ "$rc" = 0 ] && passed=$((passed + 1))
  printf 'run %d: rc %d, %d s%s\n' "$i" "$rc" "$secs" "${failed:+, failed: $failed}"
done
rm -rf "$out/clone"
echo "$tier: $passed of $runs passed ($commit)"
[ "$passed" = "$runs" ]
