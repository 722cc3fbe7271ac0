<#
.SYNOPSIS
  Build the llama-herd agent MSI on Windows: freeze herd-agent with PyInstaller, fetch the pinned
  llama.cpp release, and run wixl (msitools, from MSYS2) on packaging\windows\herd-agent.wxs.

.DESCRIPTION
  Needs Python 3.10+ with the project and PyInstaller installed (pip install -e . pyinstaller
  pywin32), and MSYS2 (preinstalled on GitHub's Windows runners at C:\msys64) for wixl; the
  script installs mingw-w64-x86_64-msitools into MSYS2 when it is missing.

  -WithApp also freezes the desktop app (herd.exe) and installs it as the MSI's second feature,
  with a Start menu entry: the MSI for the master PC.

  -StageOnly stops after freezing and fetching, leaving build\msi\agent, build\msi\engine (and
  build\msi\app): the CI workflow builds the MSI from them on Linux with the same build_msi.sh.

.EXAMPLE
  powershell -ExecutionPolicy Bypass -File packaging\windows\build_msi.ps1 -Flavor cpu
#>
[CmdletBinding()]
param(
  [ValidateSet('cpu', 'cuda', 'vulkan')] [string] $Flavor = 'cpu',
  [string] $Version = '',
  [string] $Out = '',
  [switch] $WithApp,
  [switch] $StageOnly,
  [string] $Msys2 = 'C:\msys64'
)
$ErrorActionPreference = 'Stop'
$Build = 11434   # the llama.cpp build every node of a cluster runs (agent/engine.py PINNED_BUILD)

$Repo = (Resolve-Path (Join-Path $PSScriptRoot '..\..')).Path
$Stage = Join-Path $Repo 'build\msi'
$AgentDir = Join-Path $Stage 'agent'
$EngineDir = Join-Path $Stage 'engine'
$AppDir = Join-Path $Stage 'app'
New-Item -ItemType Directory -Force -Path $Stage | Out-Null

function Invoke-Checked([string] $What, [scriptblock] $Block) {
  & $Block
  if ($LASTEXITCODE -ne 0) { throw "$What failed (exit code $LASTEXITCODE)" }
}

# 1. Freeze the agent (one folder: herd-agent.exe + _internal\).
Invoke-Checked 'PyInstaller' {
  python -m PyInstaller --noconfirm --log-level WARN --distpath (Join-Path $Stage 'dist') `
    --workpath (Join-Path $Stage 'work') (Join-Path $Repo 'packaging\pyinstaller\herd-agent.spec')
}
if (Test-Path $AgentDir) { Remove-Item -Recurse -Force $AgentDir }
Move-Item (Join-Path $Stage 'dist\herd-agent') $AgentDir
$AgentExe = Join-Path $AgentDir 'herd-agent.exe'
Invoke-Checked 'frozen agent --version' { & $AgentExe --version }

if ($WithApp) {
  Invoke-Checked 'PyInstaller (app)' {
    python -m PyInstaller --noconfirm --log-level WARN --distpath (Join-Path $Stage 'dist') `
      --workpath (Join-Path $Stage 'work-app') (Join-Path $Repo 'packaging\pyinstaller\herd.spec')
  }
  if (Test-Path $AppDir) { Remove-Item -Recurse -Force $AppDir }
  Move-Item (Join-Path $Stage 'dist\herd') $AppDir
  Invoke-Checked 'frozen app --version' { & (Join-Path $AppDir 'herd.exe') --version }
}

# 2. Fetch the pinned llama.cpp release and check it against the digest GitHub publishes.
$Variant = @{ cpu = 'cpu'; cuda = 'cuda-12.4'; vulkan = 'vulkan' }[$Flavor]
$Assets = @("llama-b$Build-bin-win-$Variant-x64.zip")
if ($Flavor -eq 'cuda') { $Assets += 'cudart-llama-bin-win-cuda-12.4-x64.zip' }   # CUDA runtime DLLs
# An API token (GH_TOKEN, set in CI) avoids the anonymous rate limit shared by runners.
$Headers = @{}
if ($env:GH_TOKEN) { $Headers['Authorization'] = "Bearer $($env:GH_TOKEN)" }
$Release = Invoke-RestMethod -Headers $Headers "https://api.github.com/repos/ggml-org/llama.cpp/releases/tags/b$Build"
if (Test-Path $EngineDir) { Remove-Item -Recurse -Force $EngineDir }
New-Item -ItemType Directory -Force -Path $EngineDir | Out-Null
foreach ($Name in $Assets) {
  $Asset = $Release.assets | Where-Object { $_.name -eq $Name }
  if (-not $Asset) { throw "release b$Build has no asset $Name" }
  $Zip = Join-Path $Stage $Name
  Invoke-WebRequest -Uri $Asset.browser_download_url -OutFile $Zip
  $Want = ($Asset.digest -replace '^sha256:', '').ToLower()
  $Got = (Get-FileHash -Algorithm SHA256 $Zip).Hash.ToLower()
  if (-not $Want) { throw "release b$Build publishes no SHA-256 for $Name; refusing an unchecked archive" }
  if ($Got -ne $Want) { throw "SHA-256 mismatch for ${Name}: expected $Want, got $Got" }
  Expand-Archive -Path $Zip -DestinationPath $EngineDir -Force
}
# Some releases unpack into a sub-folder: flatten so ggml-rpc-server.exe sits beside the DLLs.
$Rpc = Get-ChildItem -Path $EngineDir -Recurse -Filter 'ggml-rpc-server.exe' | Select-Object -First 1
if (-not $Rpc) { throw "ggml-rpc-server.exe is not in the b$Build $Flavor release" }
if ($Rpc.DirectoryName -ne $EngineDir) {
  Get-ChildItem -Path $Rpc.DirectoryName | Move-Item -Destination $EngineDir -Force
}
# The agent reads the build from this manifest when it finds the bundled engine.
# (WriteAllText: UTF-8 without the BOM that Windows PowerShell's Set-Content would add.)
$Manifest = @{ build = $Build; origin = 'release'; backend = $Flavor } | ConvertTo-Json
[IO.File]::WriteAllText((Join-Path $EngineDir 'engine.json'), $Manifest)
Invoke-Checked 'ggml-rpc-server --help' { & (Join-Path $EngineDir 'ggml-rpc-server.exe') --help | Out-Null }

if ($StageOnly) { Write-Host "staged in $Stage"; exit 0 }

# 3. Build the MSI with wixl from MSYS2 (the same build_msi.sh the Linux build and tests use).
$Bash = Join-Path $Msys2 'usr\bin\bash.exe'
if (-not (Test-Path $Bash)) { throw "MSYS2 not found at $Msys2 (install it, or pass -Msys2 PATH)" }
$env:MSYSTEM = 'MINGW64'
$env:CHERE_INVOKING = '1'
Invoke-Checked 'pacman' { & $Bash -lc 'pacman -S --needed --noconfirm mingw-w64-x86_64-msitools' }
$Python = (Get-Command python).Source
$BuildArgs = @('--agent-dir', $AgentDir, '--engine-dir', $EngineDir, '--flavor', $Flavor)
if ($WithApp) { $BuildArgs += @('--app-dir', $AppDir) }
if ($Version) { $BuildArgs += @('--version', $Version) }
if ($Out) { $BuildArgs += @('--out', $Out) }
$Quoted = ($BuildArgs | ForEach-Object { "'" + ($_ -replace '\\', '/') + "'" }) -join ' '
$Script = ($Repo -replace '\\', '/') + '/packaging/windows/build_msi.sh'
Invoke-Checked 'build_msi.sh' {
  & $Bash -lc "PYTHON='$($Python -replace '\\', '/')' bash '$Script' $Quoted"
}
