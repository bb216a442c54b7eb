#!/usr/bin/env bash
# Creates (or updates) the Python environment of tools/asr_judge.py in <repo>/.venv-judge/ and
# installs tools/requirements-judge.txt into it. Safe to run again: an existing environment is
# reused and pip only installs what is missing. Prints the environment's python at the end.
#
# Usage: tools/setup_judge.sh [--python PYTHON]   (default python3; needs Python >= 3.11)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
venv="$repo/.venv-judge"
python=python3

while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) python="$2"; shift 2 ;;
        -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup_judge.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if ! command -v "$python" >/dev/null 2>&1; then
    echo "setup_judge.sh: $python not found; install Python 3.11 or newer (Debian: apt-get install python3)" >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "setup_judge.sh: $python is $("$python" -V 2>&1); the pinned numpy/scipy need Python 3.11 or newer" >&2
    exit 1
fi
if [[ ! -x "$venv/bin/python" ]]; then
    if ! "$python" -m venv "$venv"; then
        rm -rf "$venv"
        echo "setup_judge.sh: '$python -m venv' failed; on Debian/Ubuntu install the venv module first:" >&2
        echo "    sudo apt-get install -y python3-venv" >&2
        exit 1
    fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-judge.txt"
"$venv/bin/python" -c 'import pocketsphinx, jiwer, soundfile, scipy, numpy' || {
    echo "setup_judge.sh: the packages installed but do not import (see above)" >&2
    exit 1
}
echo "$venv/bin/python"
