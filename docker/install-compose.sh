#!/usr/bin/env bash
# Docker Compose v2 (the `docker compose` plugin) built from its Go module, for a Linux machine whose
# package manager has only Compose v1 (Debian 12 ships docker-compose 1.29). Needs Go 1.24 or newer.
# Installs /usr/local/lib/docker/cli-plugins/docker-compose (run as root) or ~/.docker/cli-plugins.
#   bash docker/install-compose.sh            # the pinned version below
set -euo pipefail
version="${COMPOSE_VERSION:-v2.40.3}"
module="github.com/docker/compose/v2"
if [ "$(id -u)" = "0" ]; then plugins=/usr/local/lib/docker/cli-plugins; else plugins="${HOME}/.docker/cli-plugins"; fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then PATH="/usr/local/go/bin:${PATH}"; fi
command -v go >/dev/null 2>&1 || { echo "install-compose: Go 1.24 or newer is needed (https://go.dev/doc/install)" >&2; exit 1; }
# `go install module@version` refuses a module whose go.mod has exclude directives (compose's has):
# download the module, then build its ./cmd in a writable copy.
src="$(GOFLAGS=-mod=mod go mod download -json "${module}@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "${src}" ] || { echo "install-compose: could not download ${module}@${version}" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cp -r "${src}/." "${work}/" && chmod -R u+w "${work}"
mkdir -p "${plugins}"
(cd "${work}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X ${module}/internal.Version=${version}" \
    -o "${plugins}/docker-compose" ./cmd)
docker compose version
