#!/usr/bin/env bash
# Installs what the tests need from Debian's packages when it is missing:
# ZooKeeper (and its Java runtime) and Redis for the cluster tests;
# Node.js and npm for the JavaScript tests; Chromium (and a Chinese font,
# so that screenshots show the page's text) for the browser test; iproute2
# for the fault test's network namespaces; Prometheus's promtool for the
# alert rules; what the Debian package's test needs; poppler, zbar and
# OpenSSL for the certificate's tests. Safe to
# run again: it installs nothing that is present.
set -euo pipefail

need=()
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ -x /usr/bin/chromium ] || need+=(chromium)
# Network namespaces, veth pairs and bridges for the fault test's partitions.
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# promtool, for scripts/check-ops.sh (the alert rules and the dashboard's queries).
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# check-ops.sh reads the dashboard with jq, or python3 if present.
command -v jq >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 || need+=(jq)
if [ -z "$(fc-list :lang=zh 2>/dev/null || true)" ]; then
  need+=(fonts-wqy-microhei)
fi
# The Debian package's test (scripts/test-package.sh): dpkg-shlibdeps and
# objcopy for cargo-deb, adduser for the package, systemd-analyze for its
# unit, strace for its system call filter, curl for the domain's health.
command -v dpkg-shlibdeps >/dev/null 2>&1 || need+=(dpkg-dev)
command -v objcopy >/dev/null 2>&1 || need+=(binutils)
command -v adduser >/dev/null 2>&1 || need+=(adduser)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v curl >/dev/null 2>&1 || need+=(curl)
# Tools nobody here wrote read what the certificates are made of: poppler
# (pdftotext, pdftoppm) the PDF, zbar the QR code, OpenSSL 3 the SM2 seal.
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
command -v zbarimg >/dev/null 2>&1 || need+=(zbar-tools)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# Python's venv, for Schemathesis (below).
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)

# Schemathesis, the OpenAPI fuzzer the API's contract test runs
# (crates/node/tests/schemathesis.rs), from PyPI at a pinned version, in a
# virtual environment of its own at $SCHEMATHESIS_VENV: the version the
# test was last run with, installed again whenever another is found.
SCHEMATHESIS_VERSION=4.32.5
SCHEMATHESIS_VENV=${SCHEMATHESIS_VENV:-/opt/xarchive-test/schemathesis}
install_schemathesis() {
  if [ "$("$SCHEMATHESIS_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null || true)" = "$SCHEMATHESIS_VERSION" ]; then
    return
  fi
  echo "installing schemathesis $SCHEMATHESIS_VERSION from PyPI into $SCHEMATHESIS_VENV" >&2
  rm -rf "$SCHEMATHESIS_VENV"
  python3 -m venv "$SCHEMATHESIS_VENV"
  "$SCHEMATHESIS_VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
}

if [ ${#need[@]} -eq 0 ]; then
  install_schemathesis
  exit 0
fi

echo "installing from Debian's packages: ${need[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "error: need root (or sudo) to install ${need[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the services it installs; the tests start their own.
for svc in zookeeper redis-server prometheus; do
  if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
  $sudo service "$svc" stop >/dev/null 2>&1 || true
done
install_schemathesis
