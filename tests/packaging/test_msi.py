"""The agent MSI, built with wixl from packaging/windows/herd-agent.wxs and read back with msiinfo.

The Windows programs (frozen herd-agent.exe, ggml-rpc-server.exe) cannot be built here, so the
build uses stand-in files (`build_msi.sh --stand-in`); everything the installer *does* — the
service, its start type and arguments, the custom actions and their place in the sequence, the
upgrade logic, where files go — comes from the same WiX source the release build uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "packaging" / "windows" / "build_msi.sh"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# msidbCustomActionType*: 18 = run an exe installed with the product (File table key),
# 64 = ignore the exit code, 1024 = deferred (in-script), 2048 = no impersonation (LocalSystem).
CA_EXE_FROM_FILE = 18
CA_CONTINUE = 64
CA_IN_SCRIPT = 1024
CA_NO_IMPERSONATE = 2048
# ServiceInstall.ServiceType / StartType; ServiceControl.Event bits.
SERVICE_WIN32_OWN_PROCESS = 0x10
SERVICE_AUTO_START = 2
EV_START_INSTALL, EV_STOP_INSTALL, EV_STOP_UNINSTALL, EV_DELETE_UNINSTALL = 1, 2, 32, 128


def _need_tools() -> None:
    missing = [t for t in ("wixl", "msiinfo") if shutil.which(t) is None]
    if missing:
        msg = f"{', '.join(missing)} not installed (apt-get install wixl msitools)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)


def table(msi: Path, name: str) -> list[dict[str, str]]:
    """Rows of one MSI table as dicts, via `msiinfo export` (IDT format: 3 header lines)."""
    out = subprocess.run(["msiinfo", "export", str(msi), name], check=True,
                         capture_output=True, text=True).stdout
    lines = out.split("\r\n") if "\r\n" in out else out.split("\n")
    cols = lines[0].split("\t")
    return [dict(zip(cols, ln.split("\t"))) for ln in lines[3:] if ln]


@pytest.fixture(scope="module")
def msi(tmp_path_factory) -> Path:
    _need_tools()
    out = tmp_path_factory.mktemp("msi") / "agent.msi"
    proc = subprocess.run(["bash", str(BUILD), "--stand-in", "--version", "1.2.3", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and not out.with_name(out.name + ".tmp").exists()
    return out


def test_files_go_to_program_files_and_programdata(msi):
    files = {r["File"]: r for r in table(msi, "File")}
    assert files["HerdAgentExe"]["FileName"] == "herd-agent.exe"
    assert files["HerdAgentExe"]["Component_"] == "AgentService"
    names = {r["FileName"] for r in files.values()}
    # the RPC worker and its DLLs, and the frozen agent's runtime folder
    assert {"ggml-rpc-server.exe", "ggml.dll", "ggml-rpc.dll", "python311.dll", "agent.toml"} <= names
    dirs = {r["Directory"]: r for r in table(msi, "Directory")}
    assert dirs["INSTALLDIR"]["Directory_Parent"] == "ProgramFiles64Folder"
    assert dirs["DATADIR"]["Directory_Parent"] == "CommonAppDataFolder"
    comps = {r["Component"]: r for r in table(msi, "Component")}
    by_file = {r["FileName"]: comps[r["Component_"]] for r in files.values()}
    assert by_file["ggml-rpc-server.exe"]["Directory_"] == "INSTALLDIR"
    assert by_file["agent.toml"]["Directory_"] == "DATADIR"
    # every component is 64-bit (msidbComponentAttributes64bit), or it would land in Program Files (x86)
    assert all(int(c["Attributes"]) & 256 for c in comps.values())


def test_config_survives_upgrade_and_uninstall(msi):
    """A component without a ComponentId is never registered, so neither an uninstall nor the
    uninstall half of a major upgrade removes the config (wixl has no Permanent attribute)."""
    comps = {r["Component"]: r for r in table(msi, "Component")}
    assert comps["AgentConfig"]["ComponentId"] == ""
    assert comps["AgentService"]["ComponentId"].startswith("{")


def test_service_install_row(msi):
    (svc,) = table(msi, "ServiceInstall")
    assert svc["Name"] == "HerdAgent"
    assert int(svc["ServiceType"]) == SERVICE_WIN32_OWN_PROCESS
    assert int(svc["StartType"]) == SERVICE_AUTO_START
    assert svc["StartName"] == "LocalSystem"
    assert svc["Component_"] == "AgentService"
    assert svc["Arguments"] == 'service --config "[DATADIR]agent.toml"'


def test_service_control_starts_on_install_and_removes_on_uninstall(msi):
    (ctl,) = table(msi, "ServiceControl")
    assert ctl["Name"] == "HerdAgent"
    event = int(ctl["Event"])
    for bit in (EV_START_INSTALL, EV_STOP_INSTALL, EV_STOP_UNINSTALL, EV_DELETE_UNINSTALL):
        assert event & bit, f"ServiceControl event {event} lacks bit {bit}"
    assert ctl["Wait"] == "1"


def test_custom_actions_run_the_agent_deferred_without_impersonation(msi):
    cas = {r["Action"]: r for r in table(msi, "CustomAction")}
    assert set(cas) == {"FirewallAdd", "FirewallRemove", "ServiceRecovery"}
    # the rules follow the ports in the (upgrade-surviving) config file
    assert cas["FirewallAdd"]["Target"] == 'firewall add --config "[DATADIR]agent.toml"'
    assert cas["FirewallRemove"]["Target"] == "firewall remove"
    assert cas["ServiceRecovery"]["Target"] == "service recovery"
    for name, ca in cas.items():
        t = int(ca["Type"])
        assert ca["Source"] == "HerdAgentExe", name
        assert t & 0x3F == CA_EXE_FROM_FILE, name
        assert t & CA_IN_SCRIPT and t & CA_NO_IMPERSONATE, f"{name}: type {t}"
    # removing rules must not make an uninstall fail; adding them must be checked
    assert int(cas["FirewallRemove"]["Type"]) & CA_CONTINUE
    assert not int(cas["FirewallAdd"]["Type"]) & CA_CONTINUE


def test_sequence_places_actions_around_the_service_steps(msi):
    seq = {r["Action"]: r for r in table(msi, "InstallExecuteSequence")}
    n = {a: int(r["Sequence"]) for a, r in seq.items()}
    assert n["InstallServices"] < n["FirewallAdd"] < n["StartServices"]
    assert n["InstallServices"] < n["ServiceRecovery"] < n["StartServices"]
    # deferred actions must sit inside the install transaction
    assert n["InstallInitialize"] < n["FirewallRemove"] < n["RemoveFiles"] < n["InstallFinalize"]
    assert n["StopServices"] < n["FirewallRemove"]
    assert seq["FirewallRemove"]["Condition"] == 'REMOVE~="ALL"'
    assert seq["FirewallAdd"]["Condition"] == 'NOT REMOVE~="ALL"'
    assert seq["ServiceRecovery"]["Condition"] == 'NOT REMOVE~="ALL"'


def test_major_upgrade_and_apps_and_features(msi):
    props = {r["Property"]: r["Value"] for r in table(msi, "Property")}
    assert props["ProductVersion"] == "1.2.3"
    assert props["Manufacturer"] == "llama-herd"
    assert props["ALLUSERS"] == "1"  # per-machine
    assert props["ProductName"] == "llama-herd agent"
    upgrades = table(msi, "Upgrade")
    assert {u["UpgradeCode"] for u in upgrades} == {props["UpgradeCode"]}
    assert any(u["ActionProperty"] == "WIX_UPGRADE_DETECTED" and u["VersionMax"] == "1.2.3"
               for u in upgrades)
    seq = {r["Action"]: int(r["Sequence"]) for r in table(msi, "InstallExecuteSequence")}
    assert "RemoveExistingProducts" in seq and "FindRelatedProducts" in seq
    assert any(r["Condition"] == "NOT WIX_DOWNGRADE_DETECTED" for r in table(msi, "LaunchCondition"))


def test_build_fails_on_an_element_wixl_would_drop(tmp_path):
    """G_DEBUG=fatal-warnings turns wixl's "no property named …" warning into a failed build."""
    _need_tools()
    src = ROOT / "packaging" / "windows"
    work = tmp_path / "windows"
    shutil.copytree(src, work)
    wxs = work / "herd-agent.wxs"
    wxs.write_text(wxs.read_text().replace('<Component Id="AgentConfig" Guid=""',
                                           '<Component Id="AgentConfig" Guid="" Permanent="yes"'))
    out = tmp_path / "bad.msi"
    proc = subprocess.run(["bash", str(work / "build_msi.sh"), "--stand-in", "--version", "1.2.3",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Permanent" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--stand-in", "--version", "1.2"], "not major.minor.patch"),
    (["--stand-in", "--flavor", "rocm"], "--flavor must be"),
    (["--version", "1.2.3"], "give --agent-dir and --engine-dir"),
])
def test_build_script_rejects_bad_input(tmp_path, args, message):
    _need_tools()
    proc = subprocess.run(["bash", str(BUILD), *args, "--out", str(tmp_path / "x.msi")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / "x.msi").exists()


def test_build_script_needs_the_rpc_worker(tmp_path):
    _need_tools()
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "herd-agent.exe").write_text("x")
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "llama-server.exe").write_text("x")
    proc = subprocess.run(["bash", str(BUILD), "--agent-dir", str(agent), "--engine-dir", str(engine),
                           "--version", "1.2.3", "--out", str(tmp_path / "x.msi")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "no ggml-rpc-server.exe" in proc.stderr


def _load_fragment_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("file_fragment",
                                                  ROOT / "packaging" / "windows" / "file_fragment.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_file_fragment_nests_folders_and_keeps_ids_stable(tmp_path):
    import xml.etree.ElementTree as ET

    ff = _load_fragment_module()
    for rel in ("a.dll", "sub/b.dll", "sub/deeper/c.dat", "empty-parent/x/d.txt", "skip.exe"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    files = ff.collect(tmp_path, {"skip.exe"})
    assert files == ["a.dll", "empty-parent/x/d.txt", "sub/b.dll", "sub/deeper/c.dat"]
    text = ff.fragment(files, group="G", prefix="p", var="V", directory_ref="INSTALLDIR")
    ns = {"w": ff.WIX_NS}
    root = ET.fromstring(text)
    ref = root.find("w:Fragment/w:DirectoryRef", ns)
    # the path of each File, rebuilt from the nesting, matches its source
    seen = {}

    def walk(node, prefix):
        for child in node:
            if child.tag.endswith("Directory"):
                walk(child, prefix + child.get("Name") + "/")
            elif child.tag.endswith("Component"):
                f = child.find("w:File", ns)
                seen[prefix + f.get("Name")] = f.get("Source")
    walk(ref, "")
    assert seen == {rel: f"$(var.V)/{rel}" for rel in files}
    group = [c.get("Id") for c in root.findall("w:Fragment/w:ComponentGroup/w:ComponentRef", ns)]
    assert len(group) == len(set(group)) == 4
    # same input, same ids (component GUIDs derive from them across builds); other prefix, other ids
    assert ff.fragment(files, group="G", prefix="p", var="V", directory_ref="INSTALLDIR") == text
    other = ff.fragment(files, group="G", prefix="q", var="V", directory_ref="INSTALLDIR")
    assert not set(group) & {c.get("Id") for c in ET.fromstring(other).iter() if c.get("Id")}
    assert all(len(i) <= 72 for i in group)


def test_agent_only_msi_has_no_app(msi):
    assert [f["Feature"] for f in table(msi, "Feature")] == ["Agent"]
    assert "herd.exe" not in {r["FileName"] for r in table(msi, "File")}
    # the only shortcut is the agent's own "Show pairing PIN"
    assert [r["Shortcut"] for r in table(msi, "Shortcut")] == ["ShowPairingPin"]


def test_start_menu_shows_the_pairing_pin(msi):
    """The person at the worker PC finds "Show pairing PIN" in the Start menu; it runs the
    installed herd-agent.exe with `service pin --window` (which asks for elevation itself)."""
    (row,) = [r for r in table(msi, "Shortcut") if r["Shortcut"] == "ShowPairingPin"]
    assert row["Directory_"] == "ProgramMenuFolder" and row["Name"] == "Show pairing PIN"
    # a plain (not advertised) shortcut: its target is the installed exe, not the feature
    assert row["Target"] == "[#HerdAgentExe]"
    assert row["Arguments"] == "service pin --window"
    files = {r["File"]: r for r in table(msi, "File")}
    assert files["HerdAgentExe"]["FileName"] == "herd-agent.exe"
    # installed and removed with the service's component, so it never outlives the agent
    assert row["Component_"] == files["HerdAgentExe"]["Component_"]
    assert row["WkDir"] == "INSTALLDIR"
    # the arguments are ones herd-agent accepts
    from agent.main import build_parser  # noqa: PLC0415

    args = build_parser().parse_args(row["Arguments"].split())
    assert (args.command, args.action, args.window) == ("service", "pin", True)


def test_desktop_app_as_a_second_feature(tmp_path):
    _need_tools()
    out = tmp_path / "with-app.msi"
    proc = subprocess.run(["bash", str(BUILD), "--stand-in", "--with-app", "--version", "1.2.3",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    features = {f["Feature"]: f for f in table(out, "Feature")}
    assert set(features) == {"Agent", "App"}
    files = {r["FileName"]: r for r in table(out, "File")}
    comps = {r["Component"]: r for r in table(out, "Component")}
    dirs = {r["Directory"]: r for r in table(out, "Directory")}
    app_dir = comps[files["herd.exe"]["Component_"]]["Directory_"]
    assert app_dir == "APPDIR" and dirs["APPDIR"]["Directory_Parent"] == "INSTALLDIR"
    # the app's runtime sits in its own folder, apart from the agent's _internal
    qt_dir = comps[files["Qt6Core.dll"]["Component_"]]["Directory_"]
    chain = []
    while qt_dir:
        chain.append(dirs[qt_dir]["DefaultDir"])
        qt_dir = dirs[qt_dir]["Directory_Parent"]
    assert chain[:4] == ["PySide6", "_internal", "app", "llama-herd agent"]
    app_comps = {r["Component_"] for r in table(out, "FeatureComponents") if r["Feature_"] == "App"}
    assert files["herd.exe"]["Component_"] in app_comps
    (shortcut,) = [r for r in table(out, "Shortcut") if r["Shortcut"] != "ShowPairingPin"]
    assert shortcut["Directory_"] == "ProgramMenuFolder" and shortcut["Name"] == "llama-herd"
    assert shortcut["Component_"] == files["herd.exe"]["Component_"]
    # the service and its actions are the same as in the agent-only MSI
    assert [s["Name"] for s in table(out, "ServiceInstall")] == ["HerdAgent"]
