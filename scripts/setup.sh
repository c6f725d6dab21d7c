#!/usr/bin/env bash
# Installs everything sidemirror's build, tests and demo need on a fresh
# Debian machine and is a quick no-op when all is present:
#   - Debian packages: kcat (independent test client), maven, a Java 17+ runtime,
#     gcc (go test -race needs cgo), procps (ps, to check no JVM is left),
#     openssl (the tests make certificates and encrypted keys with it),
#     systemd (systemd-analyze verify of the unit), rpm (checks the .rpm),
#     prometheus (promtool tests the alert rules), iproute2 (ip and tc: the
#     multi-host test bed's network namespaces, links and bandwidth limits)
#     and chromium (the status page's screenshot test renders it headless)
#   - Go modules of go.mod and tools/go.mod, and staticcheck for `make lint`
#   - Apache Kafka's jars, resolved by Maven from Maven Central into
#     ~/.cache/sidemirror/kafka/<version> (KAFKA_VERSION overrides the version),
#     and MirrorMaker 2's of the same version (connect-mirror, connect-runtime
#     and their dependencies, for make failover-compare) into
#     ~/.cache/sidemirror/mirrormaker2/<version>
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }

packages=()
command -v kcat >/dev/null 2>&1 || packages+=(kcat)
command -v mvn >/dev/null 2>&1 || packages+=(maven)
command -v java >/dev/null 2>&1 || packages+=(openjdk-17-jre-headless)
command -v gcc >/dev/null 2>&1 || packages+=(gcc)
command -v ps >/dev/null 2>&1 || packages+=(procps)
command -v openssl >/dev/null 2>&1 || packages+=(openssl)
command -v systemd-analyze >/dev/null 2>&1 || packages+=(systemd)
command -v rpm >/dev/null 2>&1 || packages+=(rpm)
{ command -v ip && command -v tc; } >/dev/null 2>&1 || packages+=(iproute2)
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
if ((${#packages[@]})); then
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
	say "installing Debian packages: ${packages[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi
# Prometheus: promtool for the alert rules' tests, the server for the
# monitoring end-to-end test. Without its recommends (node exporter); the
# package does not start a server outside systemd.
if ! command -v promtool >/dev/null 2>&1; then
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
	say "installing Debian package prometheus"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

java_major=$(java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}')
if [ "${java_major%%.*}" -lt 17 ]; then
	say "Java $java_major found; Kafka 4 needs Java 17 or newer (set JAVA_HOME or install openjdk-17-jre-headless)"
	exit 1
fi
command -v go >/dev/null 2>&1 || { say "Go not found: install Go 1.26 or newer"; exit 1; }

say "downloading Go modules"
go mod download
(cd tools && GOFLAGS=-mod=mod go mod download)

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if [ ! -x "$gobin/staticcheck" ]; then
	say "installing staticcheck"
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

go run ./e2e/cmd/testbed fetch >&2
