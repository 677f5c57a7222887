# `sam local` on this machine, shared by scripts/sam-local and scripts/test:
# a container engine, arm64 emulation, the Lambda base image made here from
# Debian's packages, and DynamoDB Local reachable from the containers.
# Source it after stack.sh, from the repository root. Nothing here pulls an
# image or opens a port beyond this machine (docs/sam-local.md).

ENGINE_DIR="$TOOLS_DIR/engine"         # Debian's docker.io, unpacked
ENGINE_DATA="$TOOLS_DIR/engine-data"   # its images (the base image is kept)
ENGINE_DEBS=(docker.io containerd runc tini)
LAMBDA_BASE_REPOSITORY=plant-store-lambda-base
SAM_LOCAL_DIR="$TOOLS_DIR/sam-local"
ENGINE_PID=
ENGINE_RUN_DIR=
MOUNTED_BINFMT=
REGISTERED_QEMU=

# The options every `sam local` command takes here: the template and the
# artifact of `sam build`, the base image made here (never pulled), ports on
# 127.0.0.1, and no Cognito user pool (the key set comes in --env-vars).
sam_local_options() {
  SAM_LOCAL_OPTIONS=(--template "$PWD/.aws-sam/build/template.yaml"
    --invoke-image "$LAMBDA_BASE_IMAGE" --skip-pull-image
    --container-host-interface 127.0.0.1
    --parameter-overrides CreateUserPool=false)
}

# ensure_container_engine: points DOCKER_HOST at an engine that answers. The
# user's own if `docker info` reaches one; otherwise (as root) Debian's
# docker.io, started with its state under .tools/ and its run state in a
# temporary folder, without NAT, IP forwarding or DNS beyond the machine.
# stop_container_engine stops only an engine this started.
ensure_container_engine() {
  if command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; then
    log "using the container engine that answers at ${DOCKER_HOST:-the default socket}"
    return
  fi
  [ "$(id -u)" = 0 ] || { log "no container engine answers, and starting one needs root"; return 1; }
  if [ ! -x "$ENGINE_DIR/usr/sbin/dockerd" ]; then
    log "fetching Debian's container engine: ${ENGINE_DEBS[*]}"
    rm -rf "$ENGINE_DIR"
    unpack_debian_packages "$ENGINE_DIR" "${ENGINE_DEBS[@]}"
  fi
  export PATH="$ENGINE_DIR/usr/bin:$ENGINE_DIR/usr/sbin:$PATH"
  # Unix sockets live here: a short path, gone when the engine stops.
  ENGINE_RUN_DIR=$(mktemp -d /tmp/plant-store-engine.XXXXXX)
  export DOCKER_HOST="unix://$ENGINE_RUN_DIR/docker.sock"
  mkdir -p "$ENGINE_DATA"
  log "starting Debian's Docker Engine (state in $ENGINE_DATA, no NAT)"
  setsid dockerd --data-root "$ENGINE_DATA" --exec-root "$ENGINE_RUN_DIR/exec" \
    --pidfile "$ENGINE_RUN_DIR/dockerd.pid" -H "$DOCKER_HOST" \
    --iptables=false --ip-masq=false --ip-forward=false --dns 127.0.0.1 \
    >"$TOOLS_DIR/dockerd.log" 2>&1 &
  ENGINE_PID=$!
  for _ in $(seq 120); do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$ENGINE_PID" 2>/dev/null || break
    sleep 0.5
  done
  log "the container engine did not start:"
  tail -20 "$TOOLS_DIR/dockerd.log" >&2
  return 1
}

# unpack_debian_packages DEST PACKAGE...: Debian's packages downloaded with
# apt-get (its lists refreshed once if they lack one) and unpacked into DEST,
# without installing them.
unpack_debian_packages() {
  local dest=$1 debs
  shift
  debs=$(mktemp -d)
  chmod 1777 "$debs" # apt-get downloads as the _apt user where it can write
  (cd "$debs" && apt-get download -qq "$@" >/dev/null) ||
    { apt-get update -qq >/dev/null && (cd "$debs" && apt-get download -qq "$@" >/dev/null); }
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$dest"; done
  rm -rf "$debs"
}

# stop_within_30s PID: SIGTERM, then SIGKILL to its process group if it is
# still there after 30 s; reaps it.
stop_within_30s() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
  kill -9 -- "-$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# Removes what `sam local` ran from the base image (SAM removes its own
# containers when it stops cleanly; this also covers a killed run).
remove_lambda_containers() {
  local ids
  ids=$(docker ps -a --format '{{.ID}} {{.Image}}' 2>/dev/null |
    awk -v repo="$LAMBDA_BASE_REPOSITORY:" 'index($2, repo) == 1 { print $1 }') || true
  [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
}

# Stops what ensure_container_engine, ensure_arm64_emulation and
# start_bridge_forward started, in reverse order, leaving no container,
# engine process, mount, bridge or port behind.
stop_sam_local() {
  remove_lambda_containers
  if [ -n "$ENGINE_PID" ]; then
    log "stopping the container engine"
    stop_within_30s "$ENGINE_PID"
    # Mounts the engine may leave when it is killed (overlays, network namespaces).
    { findmnt -rn -o TARGET | grep -E "^($ENGINE_DATA|$ENGINE_RUN_DIR)(/|\$)" || true; } | sort -r |
      while read -r target; do umount -l "$target" 2>/dev/null || true; done
    ip link delete docker0 2>/dev/null || true
    rm -rf "$ENGINE_RUN_DIR"
    ENGINE_PID=
  fi
  if [ -n "$REGISTERED_QEMU" ]; then
    echo -1 >/proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null || true
    REGISTERED_QEMU=
  fi
  if [ -n "$MOUNTED_BINFMT" ]; then
    umount /proc/sys/fs/binfmt_misc 2>/dev/null || true
    MOUNTED_BINFMT=
  fi
}

# ensure_arm64_emulation: on a host that is not arm64, registers qemu-user
# for arm64 ELF files with the kernel (binfmt_misc, flag F: the interpreter
# is opened now, so it also works inside containers), unless it already is.
ensure_arm64_emulation() {
  [ "$(uname -m)" != aarch64 ] || return 0
  local binfmt=/proc/sys/fs/binfmt_misc
  [ ! -e "$binfmt/qemu-aarch64" ] || return 0
  ensure_qemu_arm64
  if [ ! -e "$binfmt/register" ]; then
    mount -t binfmt_misc binfmt_misc "$binfmt"
    MOUNTED_BINFMT=1
  fi
  log "registering qemu-aarch64 with binfmt_misc"
  cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$binfmt/register"
  REGISTERED_QEMU=1
}

# The parts of AWS's provided.al2023 image (arm64) that the function and
# SAM's emulator use: glibc, a shell and mv/chmod for SAM's image build
# (busybox), the CA bundle where Amazon Linux keeps it, /var/task,
# /var/runtime, /opt and /tmp. Debian's arm64 packages, unpacked.
lambda_base_rootfs() {
  local rootfs=$1
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "adding Debian's arm64 architecture to apt (for the Lambda base image)"
    dpkg --add-architecture arm64
    apt-get update -qq >/dev/null
  fi
  unpack_debian_packages "$rootfs" busybox-static:arm64 libc6:arm64
  rm -rf "$rootfs/usr/share"
  for tool in sh mv chmod cp rm ls cat mkdir; do ln -s busybox "$rootfs/bin/$tool"; done
  mkdir -p "$rootfs/etc/pki/tls/certs" "$rootfs/var/task" "$rootfs/var/runtime" "$rootfs/opt" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/pki/tls/certs/ca-bundle.crt"
}

# ensure_lambda_base_image: sets LAMBDA_BASE_IMAGE, building it once. Its
# tag is a hash of the recipe above, so a changed recipe builds a new image.
ensure_lambda_base_image() {
  local recipe context
  recipe=$(declare -f lambda_base_rootfs | sha256sum | cut -c1-12)
  LAMBDA_BASE_IMAGE="$LAMBDA_BASE_REPOSITORY:provided.al2023-arm64-$recipe"
  if docker image inspect "$LAMBDA_BASE_IMAGE" >/dev/null 2>&1; then
    return
  fi
  log "building the Lambda base image $LAMBDA_BASE_IMAGE from Debian's arm64 packages"
  context=$(mktemp -d)
  mkdir "$context/rootfs"
  lambda_base_rootfs "$context/rootfs"
  tar --numeric-owner --owner=0 --group=0 -C "$context/rootfs" -cf "$context/rootfs.tar" .
  printf 'FROM scratch\nADD rootfs.tar /\n' >"$context/Dockerfile"
  # FROM scratch pulls nothing; --platform records the image as arm64, so
  # that no engine goes looking for it in a registry.
  DOCKER_BUILDKIT=0 docker build --quiet --platform linux/arm64 \
    -t "$LAMBDA_BASE_IMAGE" -f "$context/Dockerfile" "$context" >/dev/null
  rm -rf "$context"
  # Earlier recipes' images, and SAM's invoke image built on one of them: its
  # name does not change with the base image, so SAM would keep using it.
  docker images "$LAMBDA_BASE_REPOSITORY" --format '{{.Repository}}:{{.Tag}}' |
    { grep -vx "$LAMBDA_BASE_IMAGE" || true; } | xargs -r docker rmi -f >/dev/null
}

# start_bridge_forward PORT: makes DynamoDB Local (127.0.0.1:PORT) reachable
# from the containers, and sets SAM_LOCAL_DYNAMODB to the URL they use. On
# Docker Desktop that is host.docker.internal; on Linux, the bridge's gateway
# address, where haproxy (TCP) forwards to 127.0.0.1: DynamoDB Local itself
# never listens beyond the loopback.
start_bridge_forward() {
  local port=$1 gateway
  if docker info --format '{{.OperatingSystem}}' 2>/dev/null | grep -q 'Docker Desktop'; then
    SAM_LOCAL_DYNAMODB="http://host.docker.internal:$port"
    return
  fi
  gateway=$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Gateway}}{{end}}')
  if [ -z "$gateway" ]; then
    # Some engines leave it out: take the bridge interface's own address.
    local bridge
    bridge=$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.name"}}')
    gateway=$(ip -4 -o addr show dev "${bridge:-docker0}" | awk '{ sub("/.*", "", $4); print $4; exit }')
  fi
  [ -n "$gateway" ] || { log "found no gateway address of the engine's bridge network"; return 1; }
  log "forwarding $gateway:$port (the containers' gateway) to DynamoDB Local on 127.0.0.1:$port"
  start_haproxy "$gateway:$port" "$port" "$SAM_LOCAL_DIR" "http://$gateway:$port/"
  SAM_LOCAL_DYNAMODB="http://$gateway:$port"
}

# prepare_sam_local DYNAMODB_PORT: everything `sam local` needs here, after
# `sam build`: the engine, emulation, base image and forward. Sets
# SAM_LOCAL_OPTIONS and SAM_LOCAL_DYNAMODB; stop with stop_sam_local.
prepare_sam_local() {
  ensure_container_engine
  ensure_arm64_emulation
  ensure_lambda_base_image
  start_bridge_forward "$1"
  sam_local_options
}

# write_sam_env_vars FILE: the --env-vars file for the function as
# configure_local_function configured it, with the endpoint the containers
# reach. `sam local` applies only variables the template declares.
write_sam_env_vars() {
  SAM_LOCAL_DYNAMODB=$SAM_LOCAL_DYNAMODB python3 - "$1" <<'PY'
import json, os, sys
names = ["PLANTS_TABLE", "AUTH_ISSUER", "AUTH_AUDIENCE", "AUTH_JWKS"]
variables = {name: os.environ[name] for name in names}
variables["AWS_ENDPOINT_URL_DYNAMODB"] = os.environ["SAM_LOCAL_DYNAMODB"]
json.dump({"PlantsFunction": variables}, open(sys.argv[1], "w"))
PY
}

# start_sam_api PORT ENV_VARS_FILE: `sam local start-api` on 127.0.0.1:PORT
# with one warm container, started at once (EAGER), and no file watching.
# Sets SAM_API_PID; stop it with stop_sam_api.
start_sam_api() {
  setsid sam local start-api "${SAM_LOCAL_OPTIONS[@]}" --env-vars "$2" \
    --host 127.0.0.1 --port "$1" --warm-containers EAGER --no-watch &
  SAM_API_PID=$!
  wait_for_function "$1" "$SAM_API_PID" "sam local start-api" 300
}

# Stops `sam local start-api` with SIGTERM, on which it removes its
# containers itself (SIGINT would not do: bash starts background commands
# with SIGINT ignored).
stop_sam_api() {
  [ -n "${SAM_API_PID:-}" ] || return 0
  log "stopping sam local start-api"
  stop_within_30s "$SAM_API_PID"
  SAM_API_PID=
}
