#!/usr/bin/env bash
# Makes sure the engines the drill and the tests run are installed: redis-server, haproxy,
# pdns_server with the bind backend (L3), kcat (a mock Kafka cluster, L4), python3 (the same cluster with one broker
# failed at a time: lab/engines/kafka-mock-host.py), and for the tests (LLMHA_WITH_PROMTOOL=1)
# promtool, prometheus and amtool/alertmanager (the alert rules' tests) and chromium (the HTML drill report's test
# opens it headless). As root it installs what is missing
# with apt-get; otherwise it prints one line naming the command to run, and exits 1.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v pdns_server >/dev/null 2>&1 || missing+=(pdns-server)
ls /usr/lib/x86_64-linux-gnu/pdns/libbindbackend.so /usr/lib/*/pdns/libbindbackend.so >/dev/null 2>&1 || missing+=(pdns-backend-bind)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# The drill cuts links between its members with iptables inside a network namespace of its own (root only).
if [ "$(id -u)" = 0 ]; then command -v iptables >/dev/null 2>&1 || missing+=(iptables); fi
if [ "${LLMHA_WITH_PROMTOOL:-0}" = 1 ]; then
  command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
  command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "llm-ha: installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "llm-ha: missing system packages; run: sudo apt-get install -y ${missing[*]}" >&2
exit 1
