#!/usr/bin/env bash
# Create .venv-maxtext: MaxText 0.2.5 (the packaged trainer) and what it needs to train on CPU, on Python 3.12.
#
#   bash scripts/maxtext_env.sh            # idempotent: says "already installed" and exits 0 when it is
#
# flagopt itself runs on any Python >= 3.11; MaxText needs 3.12, so it lives in its own venv that
# search_spaces/maxtext_cpu.yaml and the `maxtext` tests (tests/maxtext/) start by path. The interpreter is taken
# from $FLAGOPT_MAXTEXT_PYTHON, else pyenv's newest 3.12, else python3.12 / python3 on PATH if they are 3.12.
# Measured on a 2-core machine with a warm package cache: ~95 s, 1.4 GB (docs/maxtext.md).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${FLAGOPT_MAXTEXT_VENV:-.venv-maxtext}
MAXTEXT=maxtext==0.2.5
REQUIREMENTS=scripts/maxtext-cpu-requirements.txt
STAMP="$VENV/.flagopt-maxtext"
want="$MAXTEXT $(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"

is_312() { [ -x "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$VENV/bin/python" -c 'import maxtext, jax' >/dev/null 2>&1; then
  echo "maxtext_env: $MAXTEXT already installed in $VENV ($("$VENV/bin/python" -c 'import jax; print("jax", jax.__version__)'))"
  exit 0
fi

python312=""
candidates=("${FLAGOPT_MAXTEXT_PYTHON:-}")
pyenv_root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
# Newest 3.12.x first; pyenv's `python3.12` shim refuses to run unless that version is selected, so use the file.
while IFS= read -r found; do candidates+=("$found"); done < <(ls -d "$pyenv_root"/versions/3.12.*/bin/python 2>/dev/null | sort -rV)
candidates+=("$(command -v python3.12 || true)" "$(command -v python3 || true)")
for candidate in "${candidates[@]}"; do
  if [ -n "$candidate" ] && is_312 "$candidate"; then python312=$candidate; break; fi
done
if [ -z "$python312" ]; then
  echo "maxtext_env: MaxText 0.2.5 needs Python 3.12 and none was found (tried \$FLAGOPT_MAXTEXT_PYTHON," \
       "pyenv's versions/3.12.*, python3.12 and python3 on PATH). Install 3.12 (e.g. pyenv install 3.12)" \
       "or set FLAGOPT_MAXTEXT_PYTHON=/path/to/python3.12, then run this again." >&2
  exit 2
fi

echo "maxtext_env: creating $VENV with $python312 ($("$python312" -c 'import sys; print(sys.version.split()[0])'))"
rm -rf "$VENV"  # a half-made venv from an interrupted run is not reused
"$python312" -m venv "$VENV"
"$VENV/bin/pip" install -q --no-deps "$MAXTEXT"
"$VENV/bin/pip" install -q -r "$REQUIREMENTS"
"$VENV/bin/python" -c 'import maxtext.trainers.pre_train.train' >/dev/null 2>&1 || {
  echo "maxtext_env: installed, but 'import maxtext.trainers.pre_train.train' fails in $VENV:" >&2
  "$VENV/bin/python" -c 'import maxtext.trainers.pre_train.train' 2>&1 | tail -5 >&2
  exit 1
}
echo "$want" > "$STAMP"
echo "maxtext_env: $MAXTEXT installed in $VENV ($(du -sh "$VENV" | cut -f1))"
