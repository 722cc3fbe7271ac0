#!/usr/bin/env bash
# Build the llama-herd agent MSI with wixl (msitools), on Linux or on Windows under MSYS2.
#
#   build_msi.sh --agent-dir DIR --engine-dir DIR [--version X.Y.Z] [--flavor cpu|cuda|vulkan]
#                [--app-dir DIR] [--out FILE]
#   build_msi.sh --stand-in [--with-app] [--out FILE]   # stand-in exes: checks the WiX source anywhere
#
# --agent-dir   PyInstaller one-folder build of herd-agent (must hold herd-agent.exe)
# --engine-dir  unpacked llama.cpp release (must hold ggml-rpc-server.exe)
# --app-dir     also install the desktop app: PyInstaller one-folder build of herd (herd.exe)
# --stand-in    build from tiny stand-in files instead (what the Linux test does; the MSI is
#               structurally complete but its programs are placeholders — never ship it)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"

agent_dir="" engine_dir="" app_dir="" version="" flavor="cpu" out="" stand_in=0 with_app=0
while [ $# -gt 0 ]; do
  case "$1" in
    --agent-dir) agent_dir="$2"; shift 2 ;;
    --engine-dir) engine_dir="$2"; shift 2 ;;
    --app-dir) app_dir="$2"; shift 2 ;;
    --with-app) with_app=1; shift ;;
    --version) version="$2"; shift 2 ;;
    --flavor) flavor="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --stand-in) stand_in=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build_msi.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

case "$flavor" in cpu|cuda|vulkan) ;; *) echo "build_msi.sh: --flavor must be cpu, cuda or vulkan, not '$flavor'" >&2; exit 2 ;; esac
command -v wixl >/dev/null || { echo "build_msi.sh: wixl not found (Debian/Ubuntu: apt-get install wixl msitools; MSYS2: pacman -S mingw-w64-x86_64-msitools)" >&2; exit 2; }

if [ -z "$version" ]; then
  version="$("$python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$repo/pyproject.toml")"
fi
# Windows Installer versions are three numbers (major.minor.build, each ≤ 255.255.65535).
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "build_msi.sh: version '$version' is not major.minor.patch, which an MSI needs" >&2; exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ "$stand_in" = 1 ]; then
  agent_dir="$work/stand-in/agent"; engine_dir="$work/stand-in/engine"
  mkdir -p "$agent_dir/_internal" "$engine_dir"
  printf 'stand-in for the frozen herd-agent.exe\n' > "$agent_dir/herd-agent.exe"
  printf 'stand-in for the Python runtime\n' > "$agent_dir/_internal/python311.dll"
  printf 'stand-in for the frozen modules\n' > "$agent_dir/_internal/base_library.zip"
  for f in ggml-rpc-server.exe ggml.dll ggml-base.dll ggml-cpu.dll ggml-rpc.dll; do
    printf 'stand-in for %s\n' "$f" > "$engine_dir/$f"
  done
  if [ "$with_app" = 1 ]; then
    app_dir="$work/stand-in/app"
    mkdir -p "$app_dir/_internal/PySide6"
    printf 'stand-in for the frozen herd.exe\n' > "$app_dir/herd.exe"
    printf 'stand-in for Qt\n' > "$app_dir/_internal/PySide6/Qt6Core.dll"
  fi
fi

[ -n "$agent_dir" ] && [ -n "$engine_dir" ] || { echo "build_msi.sh: give --agent-dir and --engine-dir, or --stand-in" >&2; exit 2; }
[ -f "$agent_dir/herd-agent.exe" ] || { echo "build_msi.sh: $agent_dir has no herd-agent.exe (freeze the agent first)" >&2; exit 2; }
[ -f "$engine_dir/ggml-rpc-server.exe" ] || [ -f "$engine_dir/rpc-server.exe" ] || { echo "build_msi.sh: $engine_dir has no ggml-rpc-server.exe (unpack the llama.cpp release there)" >&2; exit 2; }
if [ -n "$app_dir" ]; then
  [ -f "$app_dir/herd.exe" ] || { echo "build_msi.sh: $app_dir has no herd.exe (freeze the app first)" >&2; exit 2; }
fi
[ -n "$out" ] || out="$repo/dist/llama-herd-agent-$version-$flavor-x64.msi"
mkdir -p "$(dirname "$out")"

"$python" "$here/file_fragment.py" "$agent_dir" --group CG.AgentFiles --prefix agt --var AgentDir \
  --exclude herd-agent.exe -o "$work/agent-files.wxs"
"$python" "$here/file_fragment.py" "$engine_dir" --group CG.EngineFiles --prefix eng --var EngineDir \
  -o "$work/engine-files.wxs"
sources=(herd-agent.wxs agent-files.wxs engine-files.wxs)
with_app_var=no
if [ -n "$app_dir" ]; then
  "$python" "$here/file_fragment.py" "$app_dir" --group CG.AppFiles --prefix app --var AppDir \
    --directory-ref APPDIR --exclude herd.exe -o "$work/app-files.wxs"
  ln -s "$(cd "$app_dir" && pwd)" "$work/app"
  sources+=(app-files.wxs)
  with_app_var=yes
fi

# wixl resolves File/@Source relative to the working directory and rejects absolute paths:
# link the inputs into the work folder and build from there.
ln -s "$(cd "$agent_dir" && pwd)" "$work/agent"
ln -s "$(cd "$engine_dir" && pwd)" "$work/engine"
cp "$here/agent.toml" "$work/agent.toml"
cp "$here/herd-agent.wxs" "$work/herd-agent.wxs"
out_abs="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

# fatal-warnings: wixl warns and carries on when it meets an element or attribute it does not
# support; an MSI silently missing its service or custom actions must fail the build instead.
(cd "$work" && G_DEBUG=fatal-warnings wixl -a x64 \
  -D Version="$version" -D EngineFlavor="$flavor" -D Win64=yes \
  -D AgentDir=agent -D EngineDir=engine -D ConfigFile=agent.toml \
  -D WithApp="$with_app_var" -D AppDir=app \
  -o "$out_abs.tmp" "${sources[@]}")
mv -f "$out_abs.tmp" "$out_abs"
echo "$out_abs"
