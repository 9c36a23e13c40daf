#!/bin/sh
# Setup step of `make test` (not a test): the scraping tests run a real Prometheus, so `prometheus`
# and `promtool` must be on PATH. As root with apt-get, installs Debian's prometheus package;
# otherwise stops at once with one line saying what is missing and how to get it.
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "make test: installing Debian's prometheus package (prometheus, promtool) for the scraping tests" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null \
    && command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && exit 0
fi
echo "make test: prometheus and promtool are not on PATH; install them (Debian/Ubuntu: sudo apt-get install prometheus; elsewhere: https://prometheus.io/download/) and run make test again" >&2
exit 1
