#!/usr/bin/env bash
# What `pip install replmon[EXTRA]` brings: builds the wheel of this checkout, installs it into a fresh
# venv (versions from requirements.lock) and prints the packages besides replmon and pip, and the
# size of the venv's site-packages. Usage: tools/install_size.sh [EXTRA]  (e.g. "", local, lab)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
extra=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PYTHON:-$root/.venv/bin/python}" -m pip wheel --no-deps --no-build-isolation -q -w "$work/dist" "$root" >/dev/null 2>&1  # the venv has the build backend
whl=$(ls "$work"/dist/replmon-*.whl)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check -c "$root/requirements.lock" "$whl${extra:+[$extra]}"
n=$("$work/venv/bin/pip" list --format=freeze --disable-pip-version-check | grep -v -e '^pip==' -e '^replmon==' | wc -l)
size=$(du -sm "$work/venv/lib" | cut -f1)
echo "replmon${extra:+[$extra]}: $n packages besides replmon and pip, $size MB site-packages"
