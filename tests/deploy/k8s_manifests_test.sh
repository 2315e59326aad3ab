#!/usr/bin/env bash
# The Kubernetes manifests (deploy/k8s/ocular.yaml) against the Kubernetes 1.34 schemas,
# strict (unknown fields refused), with kubernetes-validate from the test venv
# (tests/server/requirements.txt). Exits 77 (skipped) without it. Not run on a cluster.
# Usage: tests/deploy/k8s_manifests_test.sh VENV   (from the repository root)
set -euo pipefail
validate=$1/bin/kubernetes-validate
if [[ ! -x $validate ]]; then
  echo "no $validate (scripts/test-venv could not install it): skipped"
  exit 77
fi
"$validate" --strict -k 1.34.0 deploy/k8s/ocular.yaml
