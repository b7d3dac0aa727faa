#!/usr/bin/env bash
# Installs the lab's tools once and caches them: MinIO and Toxiproxy (built from the Go module
# proxy at pinned versions), DynamoDB Local (Maven Central), fio + s3fs (apt) and the lab's
# Mountpoint (cargo). Idempotent; prints the cache directory (with `all`, `servers` or `mounts`:
# `make demo` stays quiet once built). Each build's own output (go: downloading ..., Maven, cargo)
# goes to a log under $CACHE/logs, named on one line; a failed build prints the log's tail.
# No mc: the lab configures MinIO through its S3 and admin APIs from Python (src/replmon/lab/minio_admin.py).
set -euo pipefail
CACHE="${REPLMON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/replmon}"
LOGS="$CACHE/logs"
mkdir -p "$LOGS"

logged() {  # name command...: run a build with its output in $LOGS/<name>.log; on failure, its tail
  local name=$1; shift
  local log="$LOGS/$name.log"
  echo "lab-deps:   its output: $log" >&2
  if ! "$@" >"$log" 2>&1; then
    echo "lab-deps: $name failed; the last lines of $log:" >&2
    tail -n 30 "$log" >&2
    return 1
  fi
}
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"   # minio master of 2026-02-12
DDB_LOCAL_VERSION="2.5.4"
TOXIPROXY_VERSION="v2.5.0"                             # network faults between the MinIO pair
mkdir -p "$CACHE/bin"

build_go() {  # name module version
  local name=$1 mod=$2 ver=$3 stamp="$CACHE/bin/.$1-$3"
  [ -x "$CACHE/bin/$name" ] && [ -f "$stamp" ] && return 0
  echo "lab-deps: building $name $ver with go install (minutes, once)" >&2
  logged "go-install-$name" env GOBIN="$CACHE/bin" CGO_ENABLED=0 go install "$mod@$ver"
  local built; built=$(basename "$mod")  # go names the binary after the package's directory
  [ "$built" = "$name" ] || mv "$CACHE/bin/$built" "$CACHE/bin/$name"
  touch "$stamp"
}

fetch_ddb_local() {
  local dir="$CACHE/dynamodb-local-$DDB_LOCAL_VERSION"
  [ -f "$dir/DynamoDBLocal.jar" ] && [ -d "$dir/lib" ] && return 0
  echo "lab-deps: fetching DynamoDB Local $DDB_LOCAL_VERSION from Maven Central (once)" >&2
  local tmp; tmp=$(mktemp -d)
  cat > "$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>replmon</groupId><artifactId>ddb-local-fetch</artifactId><version>1</version>
<dependencies><dependency><groupId>com.amazonaws</groupId><artifactId>DynamoDBLocal</artifactId>
<version>$DDB_LOCAL_VERSION</version></dependency></dependencies></project>
POM
  mkdir -p "$dir.tmp/lib"
  logged maven-dynamodb-local mvn -q -B -f "$tmp/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dir.tmp/lib"
  mv "$dir.tmp/lib"/DynamoDBLocal-*.jar "$dir.tmp/DynamoDBLocal.jar"
  rm -rf "$dir" && mv "$dir.tmp" "$dir" && rm -rf "$tmp"
}

# DynamoDB Local's own runner binds every interface: the lab starts it through a small launcher
# that binds loopback only (src/replmon/lab/LoopbackDynamoDB.java), compiled once per source.
build_ddb_launcher() {
  local src; src="$(cd "$(dirname "$0")/.." && pwd)/src/replmon/lab/LoopbackDynamoDB.java"
  local dir="$CACHE/dynamodb-local-$DDB_LOCAL_VERSION" sum; sum=$(sha256sum "$src" | cut -c1-16)
  [ -f "$dir/launcher/.$sum" ] && return 0
  echo "lab-deps: compiling the loopback launcher for DynamoDB Local" >&2
  rm -rf "$dir/launcher" && mkdir -p "$dir/launcher"
  logged javac-launcher javac -nowarn -d "$dir/launcher" -cp "$dir/DynamoDBLocal.jar:$dir/lib/*" "$src"
  touch "$dir/launcher/.$sum"
}

# fio, s3fs (mount baselines) and the headers the Mountpoint crates build against, from Debian.
APT_PACKAGES="fio s3fs libclang-dev libfuse3-dev"
apt_deps() {
  local missing=""
  for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  [ -z "$missing" ] && return 0
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "lab-deps: apt-get install$missing (once)" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q $missing >&2 || { $sudo apt-get update -q >&2 && $sudo apt-get install -y -q $missing >&2; }
}

# The lab's Mountpoint: tools/mountpoint-lab on the mountpoint-s3-fs / -client crates (crates.io,
# versions pinned by its Cargo.lock), rebuilt when its sources change. ~5-8 min once on 2 cores.
build_mountpoint() {
  local src; src="$(cd "$(dirname "$0")/.." && pwd)/tools/mountpoint-lab"
  local sum; sum=$(cat "$src/Cargo.toml" "$src/Cargo.lock" "$src/src/main.rs" | sha256sum | cut -c1-16)
  local target="$CACHE/cargo-target"
  [ -x "$target/release/replmon-mountpoint" ] && [ -f "$target/.replmon-mountpoint-$sum" ] && return 0
  command -v cargo >/dev/null || { echo "lab-deps: cargo (Rust) is needed to build the lab's Mountpoint" >&2; exit 1; }
  echo "lab-deps: building the lab's Mountpoint from crates.io (minutes, once)" >&2
  logged cargo-mountpoint env CARGO_TARGET_DIR="$target" cargo build --manifest-path "$src/Cargo.toml" --release --locked -j "$(nproc)"
  rm -f "$target"/.replmon-mountpoint-* && touch "$target/.replmon-mountpoint-$sum"
}

lab_servers() {
  # DynamoDB Local's Maven fetch (network) runs while Go builds (CPU); its failure fails the script.
  local ddb_log; ddb_log=$(mktemp)
  (fetch_ddb_local; build_ddb_launcher) 2>"$ddb_log" &
  local ddb=$!
  build_go toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server "$TOXIPROXY_VERSION"
  build_go minio github.com/minio/minio "$MINIO_VERSION"
  local rc=0; wait "$ddb" || rc=$?
  cat "$ddb_log" >&2; rm -f "$ddb_log"
  [ "$rc" = 0 ] || { echo "lab-deps: DynamoDB Local failed (exit $rc)" >&2; exit "$rc"; }
}

case "${1:-all}" in
  minio) build_go minio github.com/minio/minio "$MINIO_VERSION" ;;
  toxiproxy) build_go toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server "$TOXIPROXY_VERSION" ;;
  apt) apt_deps ;;
  mounts) apt_deps; build_mountpoint ;;
  ddb) fetch_ddb_local; build_ddb_launcher ;;
  # What `make demo` runs (the replication lab): no fio, s3fs or Mountpoint build.
  servers) lab_servers ;;
  all) lab_servers; apt_deps; build_mountpoint ;;
  *) echo "usage: $0 [servers|mounts|all|minio|toxiproxy|ddb|apt]" >&2; exit 2 ;;
esac
echo "$CACHE"
