"""llama.cpp's weight repacking on a CPU where it crashes (Intel AMX), and on one where it does not.

Where repacking crashes, herd probes it once per engine and CPU, keeps the verdict beside the
engine, and starts every llama-server on that machine with ``--no-repack`` — so a start crashes
zero times. A crash the probe did not foresee is caught once by the start's safety net and kept.

The crash is real on Intel CPUs with AMX; elsewhere :mod:`repack_crash`'s stand-in delivers it
around the real llama-server, as the real one fails (the real log, then SIGILL or SIGSEGV at the
warm-up step, only when host layers hold AMX-kernel types and repacking is on). The last test
asks the real engine what *this* CPU does and checks the right thing for either answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest
from cluster.rpc_workers import start_rpc_workers
from conftest import free_port
from repack_crash import crashes, crashing_engine

from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama import repack_probe
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import NO_REPACK_FLAG, ServerOptions, ServerSpec
from gui.cluster.llama.server_process import CRASH_SIGNALS, FAILED, READY, LaunchError, ServerProcess, signal_name
from gui.cluster.llama.server_start import ServerStart, machine_args, serving
from gui.cluster.planning.plan import Plan

pytestmark = pytest.mark.engine


def _model(tmp_path, quant, layers=4):
    return write_demo_model(tmp_path / f"{quant}-{layers}L.gguf", DemoShape(layers=layers, embd=256, ff=512, quant=quant))


def _crash_now(pid: int) -> None:
    """Make ``pid`` die of SIGSEGV where it is: stopped first, so it cannot finish starting in
    between, then the signal, then continued (it dies as it resumes)."""
    os.kill(pid, signal.SIGSTOP)
    os.kill(pid, signal.SIGSEGV)
    os.kill(pid, signal.SIGCONT)


async def _raw_start(program, spec) -> ServerProcess:
    """llama-server started as herd never starts it: without what the machine needs (these
    tests are about that very difference)."""
    server = ServerProcess(program, spec)
    await server.start()
    try:
        await server.wait_ready(120)
    except LaunchError:
        pass
    return server


async def test_the_stand_in_fails_as_an_amx_cpu_does(engine, tmp_path, procs):
    standin = crashing_engine(tmp_path / "engine", engine)
    q4 = _model(tmp_path, "Q4_0")
    # Host layers of an AMX type, repacking on: the real start-up log, then a signal at warm-up.
    server = await _raw_start(standin.llama_server, ServerSpec(model=q4, ngl=0, options=ServerOptions(ctx=256, port=free_port())))
    try:
        assert server.state == FAILED and signal_name(server.returncode) in ("SIGILL", "SIGSEGV")
        assert any("warming up the model with an empty run" in ln for ln in server.startup_log)
        assert any("load_tensors:" in ln for ln in server.startup_log)  # the real server's log
        assert not any("listening on" in ln for ln in server.startup_log)
    finally:
        await server.stop()
    # The signal varies from run to run, as it does on the real CPU.
    again = await _raw_start(standin.llama_server, ServerSpec(model=q4, ngl=0, options=ServerOptions(ctx=256, port=free_port())))
    await again.stop()
    assert {signal_name(server.returncode), signal_name(again.returncode)} == {"SIGILL", "SIGSEGV"}
    assert len(crashes(standin)) == 2
    # --no-repack serves; F16 on the host serves; Q4_0 with every layer on a worker serves.
    [worker] = start_rpc_workers(engine, procs, 1)
    for spec in (ServerSpec(model=q4, ngl=0, options=ServerOptions(ctx=256, port=free_port(), extra_args=[NO_REPACK_FLAG])),
                 ServerSpec(model=_model(tmp_path, "F16"), ngl=0, options=ServerOptions(ctx=256, port=free_port())),
                 ServerSpec(model=q4, rpc=[worker], ngl=5, tensor_split=[5], options=ServerOptions(ctx=256, port=free_port()))):
        ok = await _raw_start(standin.llama_server, spec)
        try:
            assert ok.state == READY, (spec.args(), ok.error)
        finally:
            await ok.stop()
    assert len(crashes(standin)) == 2


async def test_the_probe_finds_the_crash_and_every_start_then_goes_without_repacking(engine, tmp_path):
    standin = crashing_engine(tmp_path / "engine", engine)
    program = standin.llama_server
    assert repack_probe.load_verdict(program) is None and machine_args(program) == []
    verdict = await repack_probe.ensure_verdict(program)
    assert verdict.needs_no_repack and verdict.learned_from == "probe"
    assert set(verdict.crashed) == set(repack_probe.PROBE_QUANTS)
    assert set(verdict.crashed.values()) <= {"SIGILL", "SIGSEGV"}
    assert verdict.served_without_repack is True
    # kept beside the engine, keyed by its programs and this CPU
    path = repack_probe.verdict_path(program)
    assert path.parent == program.parent and json.loads(path.read_text())["key"] == verdict.key
    assert repack_probe.load_verdict(program) == verdict
    assert machine_args(program) == [NO_REPACK_FLAG]
    probe_crashes = len(crashes(standin))
    assert probe_crashes == len(repack_probe.PROBE_QUANTS)

    # A launch of real quantized models with host layers: zero crashes, no retry needed.
    for quant in ("Q4_K_M", "Q8_0", "Q4_1"):
        model = _model(tmp_path, quant)
        request = LaunchRequest(Plan(4, 5), inspect_model(model), ServerOptions(ctx=512, port=free_port()))
        launcher = ClusterLauncher(program, request, {}, None)
        try:
            check = await launcher.start(120)
            assert check.ok, check.problems
            assert NO_REPACK_FLAG in launcher.spec.args() and launcher.notes == []
            assert launcher.server_start.crashes == 0
        finally:
            await launcher.stop()
        assert NO_REPACK_FLAG not in request.spec().args()  # the request itself is left as it was
    assert len(crashes(standin)) == probe_crashes

    # The doctor and `herd engine status` say it in words.
    from gui.cluster.launching.doctor import check_repacking
    finding = check_repacking(standin)
    assert finding.severity == "warning" and "--no-repack" in finding.message
    assert "herd engine probe" in finding.message and "slower" in finding.message


def test_a_new_cpu_or_a_new_build_asks_again(tmp_path):
    program = tmp_path / "llama-server"
    program.write_text("#!/bin/sh\n")
    cpu = ("Intel(R) Xeon(R) Platinum", "amx_bf16 amx_int8 amx_tile avx512f")
    key = repack_probe.machine_key(program, cpu)
    assert repack_probe.machine_key(program, cpu) == key
    assert repack_probe.machine_key(program, (cpu[0], "avx2 avx512f")) != key  # other flags
    assert repack_probe.machine_key(program, ("AMD EPYC", cpu[1])) != key     # another CPU
    verdict = repack_probe.RepackVerdict(key=repack_probe.machine_key(program), cpu="x",
                                         crashed={"Q4_0": "SIGILL"}, served_without_repack=True)
    repack_probe.save_verdict(program, verdict)
    assert repack_probe.load_verdict(program) == verdict
    # another build of the engine (the program replaced): not known any more
    time.sleep(0.01)  # a later modification time than the first write, on coarse clocks
    program.write_text("#!/bin/sh\n# rebuilt\n")
    assert repack_probe.load_verdict(program) is None and machine_args(program) == []
    # a corrupt verdict is set aside and asked anew, not trusted
    repack_probe.save_verdict(program, repack_probe.RepackVerdict(key=repack_probe.machine_key(program), cpu="x"))
    path = repack_probe.verdict_path(program)
    path.write_text("{not json")
    assert repack_probe.load_verdict(program) is None
    assert any(p.name.startswith(path.name + ".corrupt-") for p in tmp_path.iterdir())


async def test_a_crash_the_probe_missed_is_retried_once_and_kept(engine, tmp_path):
    standin = crashing_engine(tmp_path / "engine", engine)
    program = standin.llama_server
    # A verdict that says "safe", as a probe would that did not meet this kernel.
    repack_probe.save_verdict(program, repack_probe.RepackVerdict(key=repack_probe.machine_key(program), cpu="x"))
    model = _model(tmp_path, "Q4_0")
    request = LaunchRequest(Plan(4, 5), inspect_model(model), ServerOptions(ctx=512, port=free_port()))
    launcher = ClusterLauncher(program, request, {}, None)
    try:
        check = await launcher.start(120)
        assert check.ok, check.problems
        assert launcher.server_start.crashes == 1 and NO_REPACK_FLAG in launcher.spec.args()
        [note] = launcher.notes
        assert "warming up the model" in note and "--no-repack" in note and "from now on" in note
        assert any(s in note for s in ("SIGILL", "SIGSEGV"))
    finally:
        await launcher.stop()
    assert len(crashes(standin)) == 1
    kept = repack_probe.load_verdict(program)
    assert kept.needs_no_repack and kept.learned_from == "start"
    # The next start on this machine goes without repacking at once.
    async with serving(program, ServerSpec(model=model, ngl=0, options=ServerOptions(ctx=256, port=free_port()))) as server:
        assert NO_REPACK_FLAG in server.spec.args()
    assert len(crashes(standin)) == 1


async def test_a_crash_that_is_not_repacking_is_not_retried(engine, tmp_path):
    standin = crashing_engine(tmp_path / "engine", engine)
    program = standin.llama_server
    repack_probe.save_verdict(program, repack_probe.RepackVerdict(key=repack_probe.machine_key(program), cpu="x"))
    model = _model(tmp_path, "F16")
    start = ServerStart(program, ServerSpec(model=model, ngl=0, options=ServerOptions(ctx=256, port=free_port())))
    task = asyncio.create_task(start.run(120))
    while start.server is None or start.server.pid is None:
        await asyncio.sleep(0.01)
    _crash_now(start.server.pid)  # the wrapper itself dies by SIGSEGV before it got anywhere
    with pytest.raises(LaunchError, match=r"crashed \(SIGSEGV\)"):
        await task
    await start.stop()
    assert start.crashes == 0 and NO_REPACK_FLAG not in start.spec.args()
    assert not repack_probe.load_verdict(program).needs_no_repack


async def test_this_cpu_as_it_is(engine, tmp_path):
    """Whatever this CPU does, the product's start serves a quantized model with host layers,
    without a crash; and the verdict says what the raw start does here."""
    verdict = await repack_probe.ensure_verdict(engine.llama_server)
    assert verdict is not None
    model = _model(tmp_path, "Q4_0")
    raw = await _raw_start(engine.llama_server, ServerSpec(model=model, ngl=0, options=ServerOptions(ctx=256, port=free_port())))
    raw_state = raw.state
    await raw.stop()
    if verdict.needs_no_repack:
        # repacking crashes here: the raw start dies of a signal, and the verdict knew
        assert raw_state == FAILED and signal_name(raw.returncode) in CRASH_SIGNALS
        assert machine_args(engine.llama_server) == [NO_REPACK_FLAG]
    else:
        assert raw_state == READY, raw.error
        assert machine_args(engine.llama_server) == []
    start = ServerStart(engine.llama_server, ServerSpec(model=model, ngl=0, options=ServerOptions(ctx=256, port=free_port())))
    try:
        server = await start.run(120)
        assert server.state == READY and start.crashes == 0 and start.notes == []
        assert (NO_REPACK_FLAG in server.spec.args()) == verdict.needs_no_repack
    finally:
        await start.stop()


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q4_1"])
def test_herd_plan_fastest_measures_and_plans_where_repacking_crashes(engine, procs, tmp_path, quant):
    """`herd plan --fastest` on a CPU where repacking crashes: the calibration runs (the master's
    CPU keeps every layer) start the way every start does, so they measure instead of crashing."""
    from cluster.agents import start_agent
    from e2e.herd_cli import herd

    standin = crashing_engine(tmp_path / "engine", engine)
    model = _model(tmp_path, quant, layers=8)
    env = dict(os.environ, HERD_ENGINE_DIR=str(standin.folder), HERD_CONFIG_DIR=str(tmp_path / "config"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    agents = [start_agent(procs.popen, tmp_path, name, mdns=False) for name in ("alpha", "beta")]
    for a in agents:
        r = herd(["pair", a.api_url, "--pin", a.pin()], env)
        assert r.returncode == 0, r.stderr
    r = herd(["plan", "--model", model, "--fastest", "--ctx", "512", "--no-mdns", "--json"], env, timeout=600)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["plan"]
    assert plan["host_layers"] + sum(a["count"] for a in plan["assignments"]) == 9
    measured = {json.loads(p.read_text())["node_id"]
                for p in (tmp_path / "cache" / "llama-herd" / "measure").glob("*.json")}
    assert measured == {"master", *(a.node_id for a in agents)}
    # The only crashes were the probe's, once per type; the measurement itself crashed zero times.
    assert len(crashes(standin)) == len(repack_probe.PROBE_QUANTS)
    assert repack_probe.load_verdict(standin.llama_server).needs_no_repack
    status = herd(["engine", "status"], env)
    assert "--no-repack" in status.stdout and "herd engine probe" in status.stdout, status.stdout


async def test_a_failed_calibration_is_told_in_words(engine, tmp_path):
    """A calibration run that still fails names the node, what happened and what to do — never
    llama-server's raw lines (a vocabulary warning of llama.cpp's read like a verdict on the model)."""
    from gui.cluster.planning import measure as M
    model = _model(tmp_path, "F16")
    start = ServerStart(engine.llama_server, ServerSpec(model=model, ngl=0, options=ServerOptions(ctx=256, port=free_port())))
    task = asyncio.create_task(start.run(120))
    while start.server is None or start.server.pid is None:
        await asyncio.sleep(0.01)
    _crash_now(start.server.pid)  # a real crash of the real llama-server, before it serves
    with pytest.raises(LaunchError) as err:
        await task
    await start.stop()
    start.server.log.append("W llama_vocab: control-looking token: 128247 '</s>' was not control-type; "
                            "this is probably a bug in the model. its type will be overridden")
    words = M.calibration_failure("gaming-pc", start.server, err.value)
    assert words.startswith("Measuring gaming-pc on this model failed: llama-server crashed (SIGSEGV) while ")
    assert "herd doctor" in words and "herd engine status" in words
    assert "probably a bug" not in words and "llama_server:" not in words and "|" not in words
    assert "probably a bug" not in str(err.value)  # nor in the launch's own message
