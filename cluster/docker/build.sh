#!/usr/bin/env bash
# Build (and optionally push) the ftplat images from the repository root.
#
#   cluster/docker/build.sh              # both images, tagged $IMAGE_REPO:<version>-{cpu,gpu}
#   cluster/docker/build.sh cpu          # the CPU image only
#   PUSH=1 IMAGE_REPO=ghcr.io/acme/ftplat cluster/docker/build.sh gpu
#
# <version> is the project version in pyproject.toml. The KubeRay and cluster-launcher recipes
# name registry.example.com/ml/ftplat:<version>-gpu: change IMAGE_REPO there too when you push
# elsewhere (tests/unit/test_cluster_recipes.py checks they agree with this default).
set -euo pipefail

IMAGE_REPO="${IMAGE_REPO:-registry.example.com/ml/ftplat}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$REPO/pyproject.toml" | head -n 1)"
[[ -n "$VERSION" ]] || { echo "error: no version in $REPO/pyproject.toml" >&2; exit 1; }

build() {
    local variant="$1" index_url="$2"
    local tag="$IMAGE_REPO:$VERSION-$variant"
    echo "building $tag" >&2
    docker build -f "$REPO/cluster/docker/Dockerfile" \
        --build-arg TORCH_INDEX_URL="$index_url" \
        ${BASE_IMAGE:+--build-arg BASE_IMAGE="$BASE_IMAGE"} \
        -t "$tag" "$REPO"
    if [[ "${PUSH:-0}" == 1 ]]; then
        docker push "$tag"
    fi
}

variants=("${@:-cpu gpu}")
for variant in ${variants[*]}; do
    case "$variant" in
        cpu) build cpu https://download.pytorch.org/whl/cpu ;;
        gpu) build gpu https://pypi.org/simple ;;
        *) echo "error: unknown variant $variant (cpu or gpu)" >&2; exit 2 ;;
    esac
done
