#!/usr/bin/env bash
# One-folder builds of the agent and/or the desktop app with PyInstaller.
#
#   build.sh [agent] [herd] [--dist DIR] [--work DIR]
#
# Default: both, into dist/ (dist/herd-agent/herd-agent, dist/herd/herd). Run it on the OS you
# build for: PyInstaller does not cross-compile (the Windows MSI build freezes on Windows).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
dist="$repo/dist" work="$repo/build/pyinstaller" targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    agent|herd) targets+=("$1"); shift ;;
    --dist) dist="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(agent herd)
"$python" -c 'import PyInstaller' 2>/dev/null || { echo "build.sh: PyInstaller is not installed (pip install pyinstaller)" >&2; exit 2; }
for t in "${targets[@]}"; do
  spec="$here/herd-agent.spec"; [ "$t" = herd ] && spec="$here/herd.spec"
  "$python" -m PyInstaller --noconfirm --log-level WARN --distpath "$dist" --workpath "$work/$t" "$spec"
done
echo "$dist"
